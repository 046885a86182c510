#include "util/name.h"

#include <string.h>

#include <spindle/view.h>

#include "util/error.h"

int sp_check_name(const char *name, const char *whose)
{
    size_t length = strnlen(name, SPINDLE_MEMBER_NAME_MAX);
    if (length == 0 || length >= SPINDLE_MEMBER_NAME_MAX)
        return sp_error(SPINDLE_EINVAL, "%s name must have 1 to %u characters, not %zu%s", whose,
                        SPINDLE_MEMBER_NAME_MAX - 1, length,
                        length >= SPINDLE_MEMBER_NAME_MAX ? " or more" : "");
    for (size_t i = 0; i < length; i++)
        if (name[i] <= ' ' || name[i] > '~')
            return sp_error(SPINDLE_EINVAL,
                            "%s name '%.*s...' has byte 0x%02x at %zu: names are printable ASCII "
                            "without spaces",
                            whose, (int)i, name, (unsigned char)name[i], i);
    return 0;
}
