/*
 * libspindle configuration files (INI). See docs/CONFIG.md for every key.
 *
 *   [group]        name, transport, provider, device, failure_timeout_ms,
 *                  slow_member_ms, tie_breaker, log_level, key_file,
 *                  accept_key_file, log_dir, admin_dir
 *   [member.N]     host, port, name      (N is the member id)
 *   [subgroup.N]   members, senders, window_size, max_payload, mode, logged
 *   [bench]        messages, message_size, duration_ms
 *
 * Every key can be overridden by the environment variable
 * SPINDLE_<SECTION>_<KEY>, the section name uppercased with '.' turned into
 * '_' (SPINDLE_GROUP_TRANSPORT, SPINDLE_MEMBER_3_PORT,
 * SPINDLE_SUBGROUP_0_WINDOW_SIZE). An override replaces the file's value
 * for a section the file defines ([group] and [bench] always count as
 * defined); it cannot create members or subgroups.
 *
 * spindle-info -k lists every key with its default, spindle-info -e every
 * variable.
 *
 * The loaded configuration is a plain read-only structure; all strings and
 * arrays belong to it and are released by spindle_config_free.
 */
#ifndef SPINDLE_CONFIG_H
#define SPINDLE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <spindle/export.h>

#ifdef __cplusplus
extern "C" {
#endif

enum spindle_delivery_mode {
    SPINDLE_MODE_ATOMIC = 0,    /* totally ordered, delivered once stable */
    SPINDLE_MODE_UNORDERED = 1, /* delivered on receipt */
};

struct spindle_config_member {
    uint32_t id;      /* 0..SPINDLE_MAX_MEMBERS - 1 (63) */
    const char *host; /* default "127.0.0.1" */
    uint16_t port;    /* 0 = ephemeral (single-host only) */
    /* Persistent name (spindle_group_options.member_name), unique in the
     * file; NULL when not set (the library's default name). */
    const char *name;
};

struct spindle_config_subgroup {
    uint32_t index; /* 0..SPINDLE_MAX_SUBGROUPS - 1 (255) */
    uint32_t num_members;
    const uint32_t *members; /* member ids, in rank order */
    uint32_t num_senders;
    const uint32_t *senders; /* subset of members; default all members */
    uint32_t window_size;    /* 1..SPINDLE_MAX_WINDOW (100000), default 100 */
    uint32_t max_payload;    /* 1..SPINDLE_MAX_PAYLOAD (1048576) bytes, default 1024; window_size
                              * slots of it must fit SPINDLE_MAX_RING_BYTES */
    enum spindle_delivery_mode mode;
    bool logged; /* logged delivery (docs/LOGS.md), default false; atomic only */
};

struct spindle_config {
    const char *path;
    struct {
        const char *name;              /* default "spindle" */
        const char *transport;         /* "shm" (default), "fabric", "verbs" */
        const char *provider;          /* fabric provider, default "tcp" */
        const char *device;            /* verbs device, NULL = first active port */
        int failure_timeout_ms;        /* 1..3600000, default 5000 */
        int slow_member_ms;            /* 0..3600000, default 0 (back-pressure only) */
        bool tie_breaker;              /* true|false, default false */
        const char *log_level;         /* error|warn|info|debug, default "warn" */
        const char *key_file;          /* group key file (docs/SECURITY.md), NULL = none */
        const char *accept_key_file;   /* a second key accepted (rotation), NULL = none */
        const char *log_dir;           /* this member's log directory (docs/LOGS.md), NULL = none */
        bool dispatch;                 /* dispatch mode (docs/DISPATCH.md), default false */
        uint64_t dispatch_queue_bytes; /* its queue's bound, 0 = the library's default */
        const char *admin_dir;         /* admin socket's directory (docs/OPERATIONS.md), "off" */
    } group;
    uint32_t num_members;
    const struct spindle_config_member *members; /* sorted by id */
    uint32_t num_subgroups;
    const struct spindle_config_subgroup *subgroups; /* sorted by index */
    struct {
        uint64_t messages;     /* default 100000 */
        uint32_t message_size; /* 1..SPINDLE_MAX_PAYLOAD, default 64 */
        uint32_t duration_ms;  /* 0 = until messages are sent (default); else a timed run */
    } bench;
    /* [group] p2p_window (docs/P2P.md): slots of each point-to-point ring,
     * 0 = the library's default. Kept last, not in group, so that the
     * fields above keep their places. */
    uint32_t group_p2p_window;
    /* [group] own_inline (spindle_group_options.own_inline), default
     * false; last for the same reason. */
    bool group_own_inline;
};

/*
 * Loads and validates the INI file at path (environment overrides applied).
 * Returns 0 and *out, or SPINDLE_ECONFIG with spindle_errmsg() naming
 * "file:line: key = value: what is wrong", SPINDLE_ENOENT when the file
 * cannot be opened, SPINDLE_ENOMEM.
 */
SPINDLE_API int spindle_config_load(const char *path, struct spindle_config **out);

/* Releases a configuration from spindle_config_load; NULL is ignored. */
SPINDLE_API void spindle_config_free(struct spindle_config *config);

/* The member with the given id, or NULL. */
SPINDLE_API const struct spindle_config_member *
spindle_config_member(const struct spindle_config *config, uint32_t id);

#ifdef __cplusplus
}
#endif

#endif
