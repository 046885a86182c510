/*
 * Private to src/group: the administration endpoint (docs/OPERATIONS.md),
 * through which spindle-stat and spindle-ctl see and steer a running
 * member.
 *
 * Each member serves a Unix-domain stream socket <group>-<id>.sock in a
 * directory of its user's alone (util/private_dir.h), mode 0600, and
 * answers only peers of its own uid or root (SO_PEERCRED). A client
 * connects, sends one request line (at most ADMIN_REQUEST_MAX bytes, the
 * newline included) and reads the answer up to the end of the stream:
 *
 *   stats [json|text]   the member's view, subgroups, counters, transport
 *   leave               the member leaves the group (spindle_group_leave)
 *   remove <id>         the member has member <id> removed from the group
 *
 * Answers are one JSON object ({"ok": true, ...} or {"ok": false,
 * "error": ..., "code": ..., "message": ...}), except a successful
 * "stats text", which is the readable report.
 *
 * Threads: one thread per endpoint, asleep in poll() until a client
 * connects; it serves one client at a time, each within ADMIN_CLIENT_MS,
 * on non-blocking sockets, so a client that says nothing, too much or
 * reads nothing delays other clients by at most that, and the group not at
 * all. It never holds the engine lock but for the moments the report's
 * figures are copied (view_snapshot, spindle_group_stats). A leave runs on
 * it after the answer is sent.
 */
#ifndef SP_GROUP_ADMIN_H
#define SP_GROUP_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <spindle/group.h>

#include "util/json.h"

#define ADMIN_REQUEST_MAX    256u        /* bytes of a request line, its newline included */
#define ADMIN_CLIENT_MS      1000        /* a client's whole exchange */
#define ADMIN_RESPONSE_MAX   (16u << 20) /* bytes of one answer */
#define ADMIN_LEAVE_FLUSH_MS 10000       /* a leave's flush, before it gives up */
#define ADMIN_SOCKET_SUFFIX  ".sock"

enum admin_command {
    ADMIN_STATS,      /* "stats" or "stats json" */
    ADMIN_STATS_TEXT, /* "stats text" */
    ADMIN_LEAVE,      /* "leave" */
    ADMIN_REMOVE,     /* "remove <id>" */
};

struct admin_request {
    enum admin_command command;
    uint32_t member; /* ADMIN_REMOVE: the member id, below SPINDLE_MAX_MEMBERS */
};

/*
 * Parses one request line: length bytes, the line's terminator ("\n" or
 * "\r\n") already cut. Words are separated by spaces; every byte must be
 * printable ASCII or a space. 0 and *out, or SPINDLE_EINVAL with a message
 * that starts with "admin request" and names what is wrong (an unknown
 * command, a missing, extra or malformed argument, a byte that is not
 * printable, a line longer than ADMIN_REQUEST_MAX - 1).
 */
int admin_request_parse(const char *line, size_t length, struct admin_request *out);
/* Writes request's canonical line (without newline) into out; its length,
 * or SPINDLE_EINVAL when it does not fit or request is not valid. */
int admin_request_format(const struct admin_request *request, char *out, size_t size);

/*
 * The directory the endpoint uses: configured (an explicit option) or, for
 * NULL, the default, $XDG_RUNTIME_DIR/spindle when that variable is set,
 * else /tmp/spindle-<uid>. 0, or SPINDLE_EINVAL when it does not fit size.
 * The tools find members with the same rule.
 */
int admin_default_dir(char *out, size_t size);
/* The socket's file name for a group and member id: the group name with
 * every byte outside [A-Za-z0-9._+@-] made '_', then "-<id>.sock". 0, or
 * SPINDLE_EINVAL when it does not fit size. */
int admin_socket_name(const char *group_name, uint32_t id, char *out, size_t size);

/* The report of "stats": JSON (text false) or the readable text, into
 * out (initialised by the caller). 0, or the error of a copy that failed
 * (SPINDLE_ENOMEM) or SPINDLE_EMSGSIZE when out's limit is too small. */
int admin_report(spindle_group_t *group, bool text, struct sp_json *out);

struct group_admin;
/*
 * Starts group's endpoint (after the group was created): options.admin_dir
 * NULL uses the default directory, and a problem with it (another user's
 * directory, a live socket of the same name) is logged as a warning and
 * leaves the member without an endpoint; "off" starts none (*out NULL);
 * any other directory must work: SPINDLE_EPERM naming it when it is not
 * the user's alone, SPINDLE_EADDRINUSE when a live endpoint holds the
 * name, SPINDLE_EINVAL for a path too long for a socket, SPINDLE_EIO.
 */
int admin_start(spindle_group_t *group, struct group_admin **out);
/* Stops the thread (waiting for a leave it runs), removes the socket
 * (when it is still this endpoint's) and frees everything. Safe on NULL. */
void admin_stop(struct group_admin *admin);

/* Test hook: when set, the endpoint takes fn's answer for the peer's uid
 * (tests check the SO_PEERCRED refusal without a second user). NULL, the
 * default, uses the kernel's. */
typedef uint32_t (*admin_peer_uid_fn)(uint32_t uid);
void admin_test_peer_uid(admin_peer_uid_fn fn);

#endif
