/*
 * What spindle-stat and spindle-ctl share: finding members' administration
 * sockets (src/group/admin.h) in a directory and asking one a question.
 * Everything a member answers is untrusted: its length is bounded and
 * what is printed is checked (admin_client_print).
 */
#ifndef SPINDLE_TOOLS_ADMIN_CLIENT_H
#define SPINDLE_TOOLS_ADMIN_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ADMIN_CLIENT_TIMEOUT_MS 5000
#define ADMIN_CLIENT_STALE      (-2) /* admin_client_ask: nobody serves the socket */

/* One member's socket found in the directory. */
struct admin_member {
    char group[128]; /* as the file name has it */
    uint32_t id;
    char path[256];
};

/* The directory: dir when given, else the library's default. 0, or -1
 * with a message on stderr. */
int admin_client_dir(const char *dir, char *out, size_t size);

/* Splits "GROUP/ID" (ID decimal); with id_optional, "GROUP" alone gives
 * *has_id false. 0, or -1 with a message on stderr. */
int admin_client_target(const char *text, bool id_optional, char *group, size_t size, uint32_t *id,
                        bool *has_id);

/* The sockets of dir (sorted by group then id), those of group only when
 * group is not NULL (the group's name, made a file name as the library
 * does), of id only when has_id. The count (may be 0), or -1 with a
 * message on stderr. *out is freed by the caller. */
int admin_client_list(const char *dir, const char *group, bool has_id, uint32_t id,
                      struct admin_member **out);

/* The one socket of member id of group (whether it exists or not: asking
 * it says), as the single entry of *out (freed by the caller). 1, or -1
 * with a message on stderr. */
int admin_client_member(const char *dir, const char *group, uint32_t id, struct admin_member **out);

/* Sends request to the member at path and reads its answer (NUL-ended,
 * at most ADMIN_RESPONSE_MAX bytes) into *answer (freed by the caller).
 * 0, ADMIN_CLIENT_STALE for a socket nobody serves (its process died),
 * or -1 with why in error: "no such member", "permission denied", a
 * timeout. */
int admin_client_ask(const char *path, const char *request, char **answer, char *error,
                     size_t error_size);

/* True when answer is {"ok":true...}. */
bool admin_client_ok(const char *answer);
/* The string value of key in a JSON answer (the first occurrence),
 * unescaped into out; false when absent. */
bool admin_client_field(const char *answer, const char *key, char *out, size_t size);
/* Writes text to out, replacing bytes that are neither printable nor
 * newline or tab with '?'. */
void admin_client_print(FILE *out, const char *text);

#endif
