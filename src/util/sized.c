/* Sized public structs (util/sized.h). */
#include <string.h>

#include <spindle/version.h>

#include "util/error.h"
#include "util/sized.h"

int sized_check(const char *what, size_t size, size_t min)
{
    if (size < min)
        return sp_error(SPINDLE_EINVAL,
                        "struct %s of %zu bytes is smaller than the first release's %zu: not a "
                        "libspindle header's struct",
                        what, size, min);
    return 0;
}

int sized_copy_in(void *dst, size_t dst_size, const void *src, size_t src_size, const char *what)
{
    const unsigned char *bytes = src;
    for (size_t offset = dst_size; offset < src_size; offset++)
        if (bytes[offset] != 0)
            return sp_error(SPINDLE_ENOTSUP,
                            "struct %s of %zu bytes sets byte %zu, beyond the %zu this library "
                            "knows: a member of a later libspindle (version %s here)",
                            what, src_size, offset, dst_size, spindle_version());
    memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
    return 0;
}

void sized_copy_out(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
    if (dst_size > src_size)
        memset((unsigned char *)dst + src_size, 0, dst_size - src_size);
}
