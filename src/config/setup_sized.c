/*
 * struct spindle_group_setup as the program lays it out
 * (include/spindle/setup.h): its options are a sized struct
 * (util/sized.h), so the members after them sit at the program's size of
 * the options, and its subgroups[] has the program's stride. setup.c and
 * setup_env.c fill the library's own layout; this file copies that into
 * the program's, and holds the first release's unsized entry points
 * (docs/ABI.md).
 */
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/setup.h>

#include "config/setup_internal.h"
#include "util/error.h"
#include "util/sized.h"

/* What follows the options in a setup, in every release. */
struct setup_tail {
    struct spindle_subgroup_config *subgroups;
    uint32_t num_subgroups;
    uint32_t local_rank;
    struct spindle_group_setup_storage *storage;
};
_Static_assert(offsetof(struct spindle_group_setup, subgroups) ==
                       sizeof(struct spindle_group_options) &&
                   offsetof(struct spindle_group_setup, storage) ==
                       sizeof(struct spindle_group_options) +
                           offsetof(struct setup_tail, storage) &&
                   sizeof(struct spindle_group_setup) ==
                       sizeof(struct spindle_group_options) + sizeof(struct setup_tail),
               "struct spindle_group_setup is its options, then struct setup_tail");

/* The program's options size places its tail: it must be one a compiler
 * could give the struct (a multiple of its alignment). */
static int setup_check_sizes(const char *function, struct spindle_group_setup *out,
                             size_t options_size, size_t subgroup_size)
{
    if (out == NULL)
        return sp_error(SPINDLE_EINVAL, "%s: out is NULL", function);
    int rc = sized_check("spindle_group_options", options_size, SIZED_OPTIONS_MIN);
    if (rc == 0 && options_size % alignof(struct setup_tail) != 0)
        return sp_error(SPINDLE_EINVAL,
                        "%s: struct spindle_group_options of %zu bytes: not a multiple of its "
                        "alignment %zu",
                        function, options_size, alignof(struct setup_tail));
    if (rc == 0)
        rc = sized_check("spindle_subgroup_config", subgroup_size, SIZED_SUBGROUP_MIN);
    if (rc == 0) /* a failure leaves nothing to free */
        memset(out, 0, options_size + sizeof(struct setup_tail));
    return rc;
}

/* Moves the library's setup *full into the program's *out; on failure
 * full is freed and out untouched. */
static int setup_export(struct spindle_group_setup *full, struct spindle_group_setup *out,
                        size_t options_size, size_t subgroup_size)
{
    void *subgroups = full->subgroups;
    if (subgroup_size != sizeof *full->subgroups && full->num_subgroups > 0) {
        unsigned char *strided = setup_keep(full, calloc(full->num_subgroups, subgroup_size));
        if (strided == NULL)
            return setup_fail(full, sp_error(SPINDLE_ENOMEM, "out of memory for the group setup"));
        for (uint32_t i = 0; i < full->num_subgroups; i++)
            sized_copy_out(strided + i * subgroup_size, subgroup_size, &full->subgroups[i],
                           sizeof *full->subgroups);
        subgroups = strided;
    }
    sized_copy_out(out, options_size, &full->options, sizeof full->options);
    struct setup_tail tail = {subgroups, full->num_subgroups, full->local_rank, full->storage};
    memcpy((unsigned char *)out + options_size, &tail, sizeof tail);
    return 0;
}

SPINDLE_API int spindle_group_setup_from_config_sized(const struct spindle_config *config,
                                                      uint32_t id, struct spindle_group_setup *out,
                                                      size_t options_size, size_t subgroup_size)
{
    int rc = setup_check_sizes("spindle_group_setup_from_config", out, options_size, subgroup_size);
    struct spindle_group_setup full;
    if (rc == 0)
        rc = setup_from_config(config, id, &full);
    return rc == 0 ? setup_export(&full, out, options_size, subgroup_size) : rc;
}

SPINDLE_API int spindle_group_setup_from_env_sized(const struct spindle_config *config,
                                                   struct spindle_group_setup *out,
                                                   size_t options_size, size_t subgroup_size)
{
    int rc = setup_check_sizes("spindle_group_setup_from_env", out, options_size, subgroup_size);
    struct spindle_group_setup full;
    if (rc == 0)
        rc = setup_from_env(config, &full);
    return rc == 0 ? setup_export(&full, out, options_size, subgroup_size) : rc;
}

SPINDLE_API void spindle_group_setup_free_sized(struct spindle_group_setup *setup,
                                                size_t options_size)
{
    if (setup == NULL || options_size < SIZED_OPTIONS_MIN ||
        options_size % alignof(struct setup_tail) != 0)
        return;
    struct setup_tail tail;
    memcpy(&tail, (unsigned char *)setup + options_size, sizeof tail);
    if (tail.storage == NULL)
        return;
    setup_storage_free(tail.storage);
    memset(setup, 0, options_size + sizeof tail);
}

/* The first release's entry points (docs/ABI.md): not declared in the
 * headers, whose names of them are macros for the sized ones. */
#undef spindle_group_setup_from_config
#undef spindle_group_setup_from_env
#undef spindle_group_setup_free
SPINDLE_API int spindle_group_setup_from_config(const struct spindle_config *config, uint32_t id,
                                                struct spindle_group_setup *out);
SPINDLE_API int spindle_group_setup_from_env(const struct spindle_config *config,
                                             struct spindle_group_setup *out);
SPINDLE_API void spindle_group_setup_free(struct spindle_group_setup *setup);

SPINDLE_API int spindle_group_setup_from_config(const struct spindle_config *config, uint32_t id,
                                                struct spindle_group_setup *out)
{
    return spindle_group_setup_from_config_sized(config, id, out, SIZED_OPTIONS_MIN,
                                                 SIZED_SUBGROUP_MIN);
}

SPINDLE_API int spindle_group_setup_from_env(const struct spindle_config *config,
                                             struct spindle_group_setup *out)
{
    return spindle_group_setup_from_env_sized(config, out, SIZED_OPTIONS_MIN, SIZED_SUBGROUP_MIN);
}

SPINDLE_API void spindle_group_setup_free(struct spindle_group_setup *setup)
{
    spindle_group_setup_free_sized(setup, SIZED_OPTIONS_MIN);
}
