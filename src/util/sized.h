/*
 * Sized public structs (include/spindle/group.h "Sized structs",
 * docs/ABI.md "Growing a struct"): a program passes the size of a struct
 * as its header declared it, and the library reads and writes only that
 * many bytes of the program's copy, working on a full copy of its own.
 *
 * The smallest sizes accepted are the structs as the ABI baseline of the
 * first release has them (abi/libspindle.so.0.abi): the members before
 * the first one added after it. They never change; the entry points
 * without a size, which programs built against that baseline call, pass
 * them. Pure functions; thread-safe.
 */
#ifndef SP_UTIL_SIZED_H
#define SP_UTIL_SIZED_H

#include <stddef.h>

#include <spindle/group.h>

/* Up to num_logged_subgroups (224 bytes on LP64). */
#define SIZED_OPTIONS_MIN offsetof(struct spindle_group_options, persisted)
/* Up to log_queue_waits (784 bytes on LP64). */
#define SIZED_STATS_MIN offsetof(struct spindle_stats, dispatch_queue_bytes)
/* Unchanged since the baseline (40 bytes on LP64). */
#define SIZED_SUBGROUP_MIN sizeof(struct spindle_subgroup_config)

/* 0 when a program's struct of size bytes is at least min; else
 * SPINDLE_EINVAL naming what (the struct), the size and min. */
int sized_check(const char *what, size_t size, size_t min);

/*
 * Reads a program's struct (src, src_size bytes) into the library's own
 * (dst, dst_size bytes, holding the defaults): the common prefix is
 * copied, dst's tail keeps its defaults. Bytes of src beyond dst_size
 * (members of a later header) must be zero, since this library cannot
 * honour them: else SPINDLE_ENOTSUP naming what and the first such
 * offset, and dst is unchanged.
 */
int sized_copy_in(void *dst, size_t dst_size, const void *src, size_t src_size, const char *what);

/* Writes the library's struct (src, src_size bytes) into a program's
 * (dst, dst_size bytes): the common prefix, zeros beyond src_size. */
void sized_copy_out(void *dst, size_t dst_size, const void *src, size_t src_size);

#endif
