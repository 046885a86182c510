/*
 * A JSON text written into a growing buffer: objects, arrays, strings
 * (escaped; bytes outside printable ASCII become \u00XX, so the text is
 * ASCII whatever a string holds), integers and booleans, with the commas placed for the
 * caller. What the administration endpoint answers with.
 *
 * A writer that runs out of memory or nesting depth, or exceeds its
 * limit, sets failed and ignores further calls; the caller checks it once
 * at the end. Thread-safety: one writer per thread.
 */
#ifndef SP_UTIL_JSON_H
#define SP_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SP_JSON_DEPTH 16

struct sp_json {
    char *text; /* NUL-terminated; owned, freed by sp_json_free */
    size_t length, capacity, limit;
    bool failed;
    uint32_t depth;
    bool first[SP_JSON_DEPTH]; /* no value yet at this depth */
};

/* An empty writer whose text may grow to limit bytes. */
void sp_json_init(struct sp_json *json, size_t limit);
void sp_json_free(struct sp_json *json);

/* Each takes key (inside an object) or NULL (inside an array, or at the
 * top). */
void sp_json_object(struct sp_json *json, const char *key);
void sp_json_array(struct sp_json *json, const char *key);
void sp_json_end_object(struct sp_json *json);
void sp_json_end_array(struct sp_json *json);
void sp_json_string(struct sp_json *json, const char *key, const char *value);
void sp_json_u64(struct sp_json *json, const char *key, uint64_t value);
void sp_json_i64(struct sp_json *json, const char *key, int64_t value);
void sp_json_bool(struct sp_json *json, const char *key, bool value);

/* Appends printf-formatted text outside the JSON structure (a text
 * report uses the same buffer). */
void sp_json_printf(struct sp_json *json, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
