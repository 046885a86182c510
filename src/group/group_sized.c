/*
 * The entry points that take the program's struct sizes
 * (include/spindle/group.h "Sized structs", util/sized.h), and the
 * unsized ones of the first release, which programs built against its
 * headers call: they pass that release's sizes (docs/ABI.md).
 *
 * Each works on a full copy of the library's struct: the program's
 * members over the defaults, so that the rest of the library never sees
 * the program's size.
 */
#include <stdlib.h>
#include <string.h>

#include "group/group_impl.h"
#include "util/error.h"
#include "util/sized.h"

/* The defaults, in the library's whole struct. */
static void options_defaults(struct spindle_group_options *options)
{
    memset(options, 0, sizeof *options);
    options->transport = "shm";
    options->num_members = 1;
    options->bootstrap_kind = SPINDLE_BOOTSTRAP_AUTO;
    options->bootstrap_timeout_ms = 30000;
    options->failure_timeout_ms = 5000;
    options->batching = true;
    options->null_sends = true;
    options->early_unlock = true;
}

SPINDLE_API int spindle_group_options_init_sized(struct spindle_group_options *options,
                                                 size_t options_size)
{
    if (options == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_group_options_init: options is NULL");
    int rc = sized_check("spindle_group_options", options_size, SIZED_OPTIONS_MIN);
    if (rc < 0)
        return rc;
    struct spindle_group_options defaults;
    options_defaults(&defaults);
    sized_copy_out(options, options_size, &defaults, sizeof defaults);
    return 0;
}

/* The program's subgroups in the library's stride: *copy is NULL when
 * they already are (the program's own array is used), else an array to
 * free. */
static int subgroups_in(const struct spindle_subgroup_config *subgroups, size_t subgroup_size,
                        uint32_t num_subgroups, struct spindle_subgroup_config **copy)
{
    *copy = NULL;
    int rc = sized_check("spindle_subgroup_config", subgroup_size, SIZED_SUBGROUP_MIN);
    if (rc < 0 || subgroup_size == sizeof **copy || subgroups == NULL || num_subgroups == 0)
        return rc;
    if (num_subgroups > SPINDLE_MAX_SUBGROUPS) /* spindle_group_create names it */
        return 0;
    *copy = calloc(num_subgroups, sizeof **copy);
    if (*copy == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %u subgroups", num_subgroups);
    const unsigned char *bytes = (const void *)subgroups;
    for (uint32_t i = 0; i < num_subgroups && rc == 0; i++)
        rc = sized_copy_in(&(*copy)[i], sizeof **copy, bytes + i * subgroup_size, subgroup_size,
                           "spindle_subgroup_config");
    if (rc < 0) {
        free(*copy);
        *copy = NULL;
    }
    return rc;
}

SPINDLE_API int spindle_group_create_sized(const struct spindle_group_options *options,
                                           size_t options_size,
                                           const struct spindle_subgroup_config *subgroups,
                                           size_t subgroup_size, uint32_t num_subgroups,
                                           spindle_group_t **out)
{
    if (options == NULL || out == NULL || (subgroups == NULL && num_subgroups > 0))
        return sp_error(SPINDLE_EINVAL, "spindle_group_create: null argument");
    int rc = sized_check("spindle_group_options", options_size, SIZED_OPTIONS_MIN);
    struct spindle_group_options full;
    options_defaults(&full);
    if (rc == 0)
        rc = sized_copy_in(&full, sizeof full, options, options_size, "spindle_group_options");
    struct spindle_subgroup_config *copy = NULL;
    if (rc == 0)
        rc = subgroups_in(subgroups, subgroup_size, num_subgroups, &copy);
    if (rc == 0)
        rc = group_create_with(&full, copy != NULL ? copy : subgroups, num_subgroups, NULL, out);
    free(copy); /* the group keeps what it needs of them */
    return rc;
}

/* The first release's entry points (docs/ABI.md): not declared in the
 * headers, whose names of them are macros for the sized ones. */
#undef spindle_group_options_init
#undef spindle_group_create
#undef spindle_group_stats
SPINDLE_API void spindle_group_options_init(struct spindle_group_options *options);
SPINDLE_API int spindle_group_create(const struct spindle_group_options *options,
                                     const struct spindle_subgroup_config *subgroups,
                                     uint32_t num_subgroups, spindle_group_t **out);
SPINDLE_API int spindle_group_stats(spindle_group_t *group, struct spindle_stats *out);

SPINDLE_API void spindle_group_options_init(struct spindle_group_options *options)
{
    (void)spindle_group_options_init_sized(options, SIZED_OPTIONS_MIN);
}

SPINDLE_API int spindle_group_create(const struct spindle_group_options *options,
                                     const struct spindle_subgroup_config *subgroups,
                                     uint32_t num_subgroups, spindle_group_t **out)
{
    return spindle_group_create_sized(options, SIZED_OPTIONS_MIN, subgroups, SIZED_SUBGROUP_MIN,
                                      num_subgroups, out);
}

SPINDLE_API int spindle_group_stats(spindle_group_t *group, struct spindle_stats *out)
{
    return spindle_group_stats_sized(group, out, SIZED_STATS_MIN);
}
