/*
 * Private to the library and its tools: every environment variable
 * libspindle reads, declared in one table (as libfabric's fi_param_define),
 * and the one accessor through which src/config reads them.
 *
 * Why here, beside the INI key table (config_keys.c), and not in src/util:
 * most variables are configuration (the SPINDLE_<SECTION>_<KEY> overrides of
 * INI keys, the launcher's rank, size and hosts), and the table names the
 * INI key each override replaces. Two lower layers read one variable each
 * (src/util/log.c: SPINDLE_LOG_LEVEL; src/transport/verbs/verbs.c:
 * SPINDLE_VERBS_DCT) and may not include src/config (scripts/check-layers.sh),
 * so they keep a getenv of a literal name, which scripts/check-env.sh
 * (run by make check and the check_env_declared test) holds to this table,
 * as it does every name in src/.
 *
 * The table is constant; cfg_env_get is as thread-safe as getenv.
 */
#ifndef SP_CONFIG_ENV_H
#define SP_CONFIG_ENV_H

#include <stddef.h>

struct cfg_env_var {
    /* The variable's name; "<N>" stands for a member id or a subgroup
     * index (SPINDLE_MEMBER_<N>_PORT is SPINDLE_MEMBER_3_PORT, ...). */
    const char *name;
    const char *type;    /* the values it takes */
    const char *deflt;   /* what holds when it is unset */
    const char *what;    /* what it does, one line */
    const char *ini_key; /* "[group] transport": the INI key it overrides; NULL for none */
};

/* The table, in the order spindle-info lists it; *count rows. */
const struct cfg_env_var *cfg_env_table(size_t *count);

/* The row declaring name (a pattern row matches any decimal number in
 * place of "<N>"); NULL when name is not declared. */
const struct cfg_env_var *cfg_env_find(const char *name);

/* The value of a declared variable, NULL when unset. An undeclared name is a broken
 * invariant of the library (every read is declared): it is logged as an
 * error and reads as unset (NULL). */
const char *cfg_env_get(const char *name);

#endif
