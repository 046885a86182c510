/*
 * Private to src/config: the key table, value parsing and validation
 * behind spindle_config_load (config.c), and that loader on a stream. Owns
 * the storage of a loaded configuration: struct spindle_config is the first
 * member of an owner structure holding every string and array it points to.
 *
 * Not thread-safe: cfg_last_problem() is a per-thread message buffer
 * filled by cfg_apply.
 */
#ifndef SP_CONFIG_KEYS_H
#define SP_CONFIG_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <spindle/config.h>

enum cfg_kind { CFG_GROUP, CFG_MEMBER, CFG_SUBGROUP, CFG_BENCH };

/* Most keys a section kind has ([group]'s sixteen). */
#define CFG_MAX_KEYS 16

/* The line each key of one section was set on in the file (0: not set),
 * by its index in cfg_keys(): a second setting is a duplicate. */
struct cfg_key_lines {
    int line[CFG_MAX_KEYS];
};

struct cfg_member {
    struct spindle_config_member pub;
    char *host;
    char *name;
    struct cfg_key_lines keys;
};

struct cfg_subgroup {
    struct spindle_config_subgroup pub;
    uint32_t *members, *senders;
    /* 0 when set from the environment or left at the default */
    int members_line, senders_line, window_line, payload_line;
    struct cfg_key_lines keys;
};

struct cfg_target {
    enum cfg_kind kind;
    struct cfg_member *member;
    struct cfg_subgroup *subgroup;
};

/* NULL-terminated key names of a section kind. */
const char *const *cfg_keys(enum cfg_kind kind);
/* 1 when key belongs to a section of this kind, 0 when not (never fails). */
int cfg_key_known(enum cfg_kind kind, const char *key);
/* key's index in cfg_keys(kind), below CFG_MAX_KEYS; -1 when unknown. */
int cfg_key_index(enum cfg_kind kind, const char *key);

/* Parses and stores one value; 0, or -1 with cfg_last_problem() saying
 * what is wrong (without the location). line is recorded for validation. */
int cfg_apply(struct spindle_config *config, const struct cfg_target *target, const char *key,
              const char *value, int line);
const char *cfg_last_problem(void);

/* A configuration with every default filled in; NULL when out of memory. */
struct spindle_config *cfg_new(const char *path);
/* Hands the member and subgroup arrays to the configuration (always,
 * also on failure, so spindle_config_free releases them); -1 when out of
 * memory for the public tables. */
int cfg_attach(struct spindle_config *config, struct cfg_member *members,
               struct cfg_subgroup *subgroups);
/* Cross-reference checks after parsing; 0, or -1 with message filled. */
int cfg_validate(struct spindle_config *config, const char *path, struct cfg_member *members,
                 struct cfg_subgroup *subgroups, char *message, size_t len);

/* config.c: spindle_config_load on an open stream (the fuzz target feeds
 * it memory through fmemopen); path only names the source in messages.
 * Reads file to its end without closing it. Same results as
 * spindle_config_load: 0 and *out, SPINDLE_ECONFIG, SPINDLE_ENOMEM. */
int cfg_load_stream(FILE *file, const char *path, struct spindle_config **out);

#endif
