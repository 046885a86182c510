/*
 * The launcher formats (setup_internal.h): Slurm host lists and tasks per
 * node, hostfiles. Pure functions over untrusted text; every error names
 * the variable (or file and line) and the value.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/setup_internal.h"
#include "util/error.h"

void launch_hosts_free(struct launch_hosts *hosts)
{
    if (hosts == NULL)
        return;
    for (uint32_t i = 0; i < hosts->count; i++)
        free(hosts->names[i]);
    free(hosts->names);
    free(hosts->slots);
    memset(hosts, 0, sizeof *hosts);
}

/* Digits only, at least one, value <= max. */
static bool launch_number(const char *text, size_t len, uint32_t max, uint32_t *out)
{
    if (len == 0 || len > 9)
        return false;
    uint32_t value = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)text[i]))
            return false;
        value = value * 10 + (uint32_t)(text[i] - '0');
    }
    if (value > max)
        return false;
    *out = value;
    return true;
}

static bool launch_host_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

static int launch_add_host(struct launch_hosts *out, const char *host, size_t len, uint32_t slots,
                           const char *where)
{
    if (out->count == LAUNCH_MAX_HOSTS)
        return sp_error(SPINDLE_ECONFIG, "%s: more than %u hosts", where, LAUNCH_MAX_HOSTS);
    if ((out->count & (out->count - 1)) == 0) { /* 0, 1, 2, 4, ...: grow */
        uint32_t capacity = out->count > 0 ? out->count * 2 : 1;
        char **names = realloc(out->names, capacity * sizeof *names);
        if (names != NULL)
            out->names = names;
        uint32_t *grown = names != NULL ? realloc(out->slots, capacity * sizeof *grown) : NULL;
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "out of memory for the hosts of %s", where);
        out->slots = grown;
    }
    char *copy = strndup(host, len);
    if (copy == NULL)
        return sp_error(SPINDLE_ENOMEM, "out of memory for the hosts of %s", where);
    out->names[out->count] = copy;
    out->slots[out->count++] = slots;
    return 0;
}

struct hostlist_walk {
    const char *name, *text;
    struct launch_hosts *out;
    char where[320]; /* "NAME 'text'" for launch_add_host, cut when long */
};

static int hostlist_bad(const struct hostlist_walk *w, const char *what)
{
    return sp_error(SPINDLE_ECONFIG, "%s '%s': %s", w->name, w->text, what);
}

/* Appends prefix + every expansion of rest (an item's remainder). */
static int hostlist_expand_item(struct hostlist_walk *w, char *prefix, size_t prefix_len,
                                const char *rest, size_t rest_len)
{
    const char *open = memchr(rest, '[', rest_len);
    size_t literal = open != NULL ? (size_t)(open - rest) : rest_len;
    for (size_t i = 0; i < literal; i++)
        if (!launch_host_char(rest[i])) {
            char what[64];
            snprintf(what, sizeof what, "character '%c' cannot be in a host name", rest[i]);
            return hostlist_bad(w, what);
        }
    if (prefix_len + literal > LAUNCH_HOST_MAX)
        return hostlist_bad(w, "a host name is longer than 255 characters");
    memcpy(prefix + prefix_len, rest, literal);
    prefix_len += literal;
    if (open == NULL) {
        if (prefix_len == 0)
            return hostlist_bad(w, "an empty host name");
        return launch_add_host(w->out, prefix, prefix_len, 1, w->where);
    }
    const char *body = open + 1, *end = rest + rest_len;
    const char *close = memchr(body, ']', (size_t)(end - body));
    if (close == NULL)
        return hostlist_bad(w, "'[' without ']'");
    for (const char *c = body; c < close; c++)
        if (!isdigit((unsigned char)*c) && *c != ',' && *c != '-')
            return hostlist_bad(w, "a bracket holds numbers and ranges (01-04,07) only");
    const char *element = body;
    while (element <= close) {
        const char *stop = memchr(element, ',', (size_t)(close - element));
        if (stop == NULL)
            stop = close;
        const char *dash = memchr(element, '-', (size_t)(stop - element));
        uint32_t low, high;
        size_t low_len = dash != NULL ? (size_t)(dash - element) : (size_t)(stop - element);
        if (!launch_number(element, low_len, 999999999u, &low))
            return hostlist_bad(w, "a bracket element is not a number or a range N-M");
        high = low;
        if (dash != NULL && !launch_number(dash + 1, (size_t)(stop - dash - 1), 999999999u, &high))
            return hostlist_bad(w, "a bracket element is not a number or a range N-M");
        if (high < low)
            return hostlist_bad(w, "a range goes backwards");
        if (high - low >= LAUNCH_MAX_HOSTS)
            return hostlist_bad(w, "a range names more than 4096 hosts");
        for (uint32_t v = low; v <= high; v++) {
            char digits[16];
            int n = snprintf(digits, sizeof digits, "%0*u", (int)low_len, v);
            if (prefix_len + (size_t)n > LAUNCH_HOST_MAX)
                return hostlist_bad(w, "a host name is longer than 255 characters");
            memcpy(prefix + prefix_len, digits, (size_t)n);
            int rc = hostlist_expand_item(w, prefix, prefix_len + (size_t)n, close + 1,
                                          (size_t)(end - close - 1));
            if (rc != 0)
                return rc;
        }
        element = stop + 1;
    }
    return 0;
}

int launch_hostlist_expand(const char *name, const char *text, struct launch_hosts *out)
{
    memset(out, 0, sizeof *out);
    struct hostlist_walk w = {.name = name, .text = text, .out = out};
    snprintf(w.where, sizeof w.where, "%s '%s'", name, text);
    if (text[0] == '\0')
        return hostlist_bad(&w, "no hosts");
    char prefix[LAUNCH_HOST_MAX + 16];
    const char *item = text;
    int rc = 0;
    while (rc == 0) {
        /* An item ends at a comma outside brackets. */
        const char *c = item;
        int depth = 0;
        for (; *c != '\0' && (*c != ',' || depth > 0); c++) {
            if (*c == '[' && depth++ > 0)
                return launch_hosts_free(out), hostlist_bad(&w, "brackets cannot nest");
            if (*c == ']' && depth-- == 0)
                return launch_hosts_free(out), hostlist_bad(&w, "']' without '['");
        }
        rc = hostlist_expand_item(&w, prefix, 0, item, (size_t)(c - item));
        if (*c == '\0')
            break;
        item = c + 1;
    }
    if (rc != 0)
        launch_hosts_free(out);
    return rc;
}

int launch_tasks_per_node(const char *name, const char *text, uint32_t *counts, uint32_t max,
                          uint32_t *n)
{
    *n = 0;
    const char *item = text;
    for (;;) {
        const char *stop = strchr(item, ',');
        size_t len = stop != NULL ? (size_t)(stop - item) : strlen(item);
        const char *paren = memchr(item, '(', len);
        uint32_t tasks, repeat = 1;
        size_t tasks_len = paren != NULL ? (size_t)(paren - item) : len;
        if (!launch_number(item, tasks_len, 1000000u, &tasks) || tasks == 0)
            return sp_error(SPINDLE_ECONFIG,
                            "%s '%s': '%.*s' is not a task count (N or N(xM), N >= 1)", name, text,
                            (int)len, item);
        if (paren != NULL &&
            (len < tasks_len + 4 || paren[1] != 'x' || item[len - 1] != ')' ||
             !launch_number(paren + 2, len - tasks_len - 3, 1000000u, &repeat) || repeat == 0))
            return sp_error(SPINDLE_ECONFIG,
                            "%s '%s': '%.*s' is not a task count (N or N(xM), M >= 1)", name, text,
                            (int)len, item);
        if (repeat > max - *n)
            return sp_error(SPINDLE_ECONFIG, "%s '%s': more than %u nodes", name, text, max);
        for (uint32_t i = 0; i < repeat; i++)
            counts[(*n)++] = tasks;
        if (stop == NULL)
            return 0;
        item = stop + 1;
    }
}

/* One hostfile line (comment removed): "host [slots=N]". */
static int hostfile_line(const char *path, int line, char *text, struct launch_hosts *out)
{
    char *save = NULL, *host = strtok_r(text, " \t\r", &save);
    if (host == NULL)
        return 0;
    for (const char *c = host; *c != '\0'; c++)
        if (!launch_host_char(*c))
            return sp_error(SPINDLE_ECONFIG,
                            "%s:%d: host '%s': character '%c' cannot be in a "
                            "host name",
                            path, line, host, *c);
    if (strlen(host) > LAUNCH_HOST_MAX)
        return sp_error(SPINDLE_ECONFIG, "%s:%d: host name longer than 255 characters", path, line);
    uint32_t slots = 1;
    for (char *word = strtok_r(NULL, " \t\r", &save); word != NULL;
         word = strtok_r(NULL, " \t\r", &save)) {
        if (strncmp(word, "slots=", 6) != 0)
            return sp_error(SPINDLE_ECONFIG, "%s:%d: '%s': only slots=N may follow the host", path,
                            line, word);
        if (!launch_number(word + 6, strlen(word + 6), 1000000u, &slots) || slots == 0)
            return sp_error(SPINDLE_ECONFIG, "%s:%d: '%s': slots must be a number >= 1", path, line,
                            word);
    }
    char where[300];
    snprintf(where, sizeof where, "%s:%d", path, line);
    return launch_add_host(out, host, strlen(host), slots, where);
}

int launch_hostfile_parse(const char *path, const char *text, struct launch_hosts *out)
{
    memset(out, 0, sizeof *out);
    int rc = 0, line = 0;
    const char *start = text;
    while (rc == 0 && *start != '\0') {
        const char *end = strchr(start, '\n');
        size_t len = end != NULL ? (size_t)(end - start) : strlen(start);
        char *copy = strndup(start, len);
        if (copy == NULL) {
            rc = sp_error(SPINDLE_ENOMEM, "out of memory reading %s", path);
            break;
        }
        char *hash = strchr(copy, '#');
        if (hash != NULL)
            *hash = '\0';
        rc = hostfile_line(path, ++line, copy, out);
        free(copy);
        start += len + (end != NULL);
    }
    if (rc == 0 && out->count == 0)
        rc = sp_error(SPINDLE_ECONFIG, "%s: no hosts (one host per line)", path);
    if (rc != 0)
        launch_hosts_free(out);
    return rc;
}
