/* A JSON text in a growing buffer (util/json.h). */
#include "util/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sp_json_init(struct sp_json *json, size_t limit)
{
    memset(json, 0, sizeof *json);
    json->limit = limit;
    json->first[0] = true;
}

void sp_json_free(struct sp_json *json)
{
    free(json->text);
    json->text = NULL;
    json->length = json->capacity = 0;
}

/* Room for more bytes and the NUL; false (failed set) when there is none. */
static bool reserve(struct sp_json *json, size_t more)
{
    if (json->failed)
        return false;
    size_t want = json->length + more + 1;
    if (want > json->limit) {
        json->failed = true;
        return false;
    }
    if (want <= json->capacity)
        return true;
    size_t capacity = json->capacity < 4096 ? 4096 : json->capacity;
    while (capacity < want)
        capacity *= 2;
    if (capacity > json->limit)
        capacity = json->limit;
    char *grown = realloc(json->text, capacity);
    if (grown == NULL) {
        json->failed = true;
        return false;
    }
    json->text = grown;
    json->capacity = capacity;
    return true;
}

static void append(struct sp_json *json, const char *bytes, size_t count)
{
    if (!reserve(json, count))
        return;
    memcpy(json->text + json->length, bytes, count);
    json->length += count;
    json->text[json->length] = '\0';
}

void sp_json_printf(struct sp_json *json, const char *fmt, ...)
{
    char small[512];
    va_list args, again;
    va_start(args, fmt);
    va_copy(again, args);
    int count = vsnprintf(small, sizeof small, fmt, args);
    va_end(args);
    if (count < 0)
        json->failed = true;
    else if ((size_t)count < sizeof small)
        append(json, small, (size_t)count);
    else if (reserve(json, (size_t)count)) {
        vsnprintf(json->text + json->length, (size_t)count + 1, fmt, again);
        json->length += (size_t)count;
    }
    va_end(again);
}

static void quoted(struct sp_json *json, const char *value)
{
    append(json, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)value; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            char escaped[2] = {'\\', (char)*p};
            append(json, escaped, 2);
        } else if (*p < 0x20 || *p >= 0x7f) { /* ASCII out: valid JSON whatever comes in */
            char escaped[8];
            snprintf(escaped, sizeof escaped, "\\u%04x", *p);
            append(json, escaped, 6);
        } else {
            append(json, (const char *)p, 1);
        }
    }
    append(json, "\"", 1);
}

/* The comma before a value and its key. */
static void prefix(struct sp_json *json, const char *key)
{
    if (!json->first[json->depth])
        append(json, ",", 1);
    json->first[json->depth] = false;
    if (key != NULL) {
        quoted(json, key);
        append(json, ":", 1);
    }
}

static void open_nested(struct sp_json *json, const char *key, char bracket)
{
    prefix(json, key);
    if (json->depth + 1 >= SP_JSON_DEPTH) {
        json->failed = true;
        return;
    }
    append(json, &bracket, 1);
    json->first[++json->depth] = true;
}

static void close_nested(struct sp_json *json, char bracket)
{
    if (json->depth == 0) {
        json->failed = true;
        return;
    }
    json->depth--;
    append(json, &bracket, 1);
}

void sp_json_object(struct sp_json *json, const char *key)
{
    open_nested(json, key, '{');
}

void sp_json_array(struct sp_json *json, const char *key)
{
    open_nested(json, key, '[');
}

void sp_json_end_object(struct sp_json *json)
{
    close_nested(json, '}');
}

void sp_json_end_array(struct sp_json *json)
{
    close_nested(json, ']');
}

void sp_json_string(struct sp_json *json, const char *key, const char *value)
{
    prefix(json, key);
    quoted(json, value);
}

void sp_json_u64(struct sp_json *json, const char *key, uint64_t value)
{
    prefix(json, key);
    sp_json_printf(json, "%llu", (unsigned long long)value);
}

void sp_json_i64(struct sp_json *json, const char *key, int64_t value)
{
    prefix(json, key);
    sp_json_printf(json, "%lld", (long long)value);
}

void sp_json_bool(struct sp_json *json, const char *key, bool value)
{
    prefix(json, key);
    append(json, value ? "true" : "false", value ? 4 : 5);
}
