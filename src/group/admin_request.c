/*
 * The administration endpoint's requests (group/admin.h): one line of
 * words from a client, untrusted until parsed here.
 */
#include <stdio.h>
#include <string.h>

#include "group/admin.h"
#include "util/error.h"

#define MAX_WORDS 3

struct word {
    const char *start;
    size_t length;
};

static bool word_is(const struct word *word, const char *text)
{
    return word->length == strlen(text) && memcmp(word->start, text, word->length) == 0;
}

/* Splits line into words; every byte must be printable or a space. */
static int split(const char *line, size_t length, struct word *words, uint32_t *count)
{
    if (length > ADMIN_REQUEST_MAX - 1)
        return sp_error(SPINDLE_EINVAL,
                        "admin request: %zu bytes, longer than the %u a request may have", length,
                        ADMIN_REQUEST_MAX - 1);
    *count = 0;
    for (size_t i = 0; i < length;) {
        unsigned char byte = (unsigned char)line[i];
        if (byte == ' ') {
            i++;
            continue;
        }
        size_t start = i;
        for (; i < length && line[i] != ' '; i++) {
            byte = (unsigned char)line[i];
            if (byte < 0x21 || byte > 0x7e)
                return sp_error(SPINDLE_EINVAL,
                                "admin request: byte 0x%02x at offset %zu is not printable ASCII",
                                byte, i);
        }
        if (*count == MAX_WORDS)
            return sp_error(SPINDLE_EINVAL, "admin request: more than %d words", MAX_WORDS);
        words[*count].start = line + start;
        words[(*count)++].length = i - start;
    }
    if (*count == 0)
        return sp_error(SPINDLE_EINVAL, "admin request: empty (commands: stats, leave, remove ID)");
    return 0;
}

/* A member id: 1 to 2 decimal digits, no leading zero, below
 * SPINDLE_MAX_MEMBERS. */
static int member_id(const struct word *word, uint32_t *out)
{
    uint32_t value = 0;
    bool digits =
        word->length >= 1 && word->length <= 2 && (word->length == 1 || word->start[0] != '0');
    for (size_t i = 0; digits && i < word->length; i++) {
        if (word->start[i] < '0' || word->start[i] > '9')
            digits = false;
        else
            value = value * 10 + (uint32_t)(word->start[i] - '0');
    }
    if (!digits || value >= SPINDLE_MAX_MEMBERS)
        return sp_error(
            SPINDLE_EINVAL, "admin request: remove: '%.*s' is not a member id (0 .. %u)",
            (int)(word->length > 20 ? 20 : word->length), word->start, SPINDLE_MAX_MEMBERS - 1);
    *out = value;
    return 0;
}

/* The arguments words[1..count) of a command with at most `most`. */
static int arguments(const struct word *words, uint32_t count, uint32_t least, uint32_t most)
{
    if (count - 1 < least)
        return sp_error(SPINDLE_EINVAL, "admin request: %.*s needs %s", (int)words[0].length,
                        words[0].start, "a member id (remove ID)");
    if (count - 1 > most)
        return sp_error(SPINDLE_EINVAL, "admin request: %.*s takes %s", (int)words[0].length,
                        words[0].start,
                        most == 0                 ? "no argument"
                        : most == 1 && least == 0 ? "json or text"
                                                  : "one member id");
    return 0;
}

int admin_request_parse(const char *line, size_t length, struct admin_request *out)
{
    memset(out, 0, sizeof *out);
    struct word words[MAX_WORDS];
    uint32_t count = 0;
    int rc = split(line, length, words, &count);
    if (rc < 0)
        return rc;
    if (word_is(&words[0], "stats")) {
        rc = arguments(words, count, 0, 1);
        if (rc == 0 && count == 2 && !word_is(&words[1], "json") && !word_is(&words[1], "text"))
            rc = sp_error(SPINDLE_EINVAL, "admin request: stats takes json or text, not '%.*s'",
                          (int)(words[1].length > 20 ? 20 : words[1].length), words[1].start);
        out->command = count == 2 && word_is(&words[1], "text") ? ADMIN_STATS_TEXT : ADMIN_STATS;
    } else if (word_is(&words[0], "leave")) {
        rc = arguments(words, count, 0, 0);
        out->command = ADMIN_LEAVE;
    } else if (word_is(&words[0], "remove")) {
        rc = arguments(words, count, 1, 1);
        if (rc == 0)
            rc = member_id(&words[1], &out->member);
        out->command = ADMIN_REMOVE;
    } else {
        rc = sp_error(SPINDLE_EINVAL,
                      "admin request: unknown command '%.*s' (commands: stats, leave, remove ID)",
                      (int)(words[0].length > 20 ? 20 : words[0].length), words[0].start);
    }
    if (rc < 0)
        memset(out, 0, sizeof *out);
    return rc;
}

int admin_request_format(const struct admin_request *request, char *out, size_t size)
{
    int length = -1;
    switch (request->command) {
    case ADMIN_STATS:
        length = snprintf(out, size, "stats");
        break;
    case ADMIN_STATS_TEXT:
        length = snprintf(out, size, "stats text");
        break;
    case ADMIN_LEAVE:
        length = snprintf(out, size, "leave");
        break;
    case ADMIN_REMOVE:
        if (request->member < SPINDLE_MAX_MEMBERS)
            length = snprintf(out, size, "remove %u", request->member);
        break;
    }
    if (length < 0 || (size_t)length >= size)
        return sp_error(SPINDLE_EINVAL, "admin request: command %d does not format into %zu bytes",
                        (int)request->command, size);
    return length;
}
