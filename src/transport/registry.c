/* Backend registry: maps a name to a compiled-in ops table. */
#include <string.h>

#include "transport/transport.h"
#include "util/error.h"

#ifdef SPINDLE_HAVE_SHM
extern const struct tp_ops tp_shm_ops;
#endif
#ifdef SPINDLE_HAVE_FABRIC
extern const struct tp_ops tp_fabric_ops;
#endif
#ifdef SPINDLE_HAVE_VERBS
extern const struct tp_ops tp_verbs_ops;
#endif

static const struct tp_ops *const backends[] = {
#ifdef SPINDLE_HAVE_SHM
    &tp_shm_ops,
#endif
#ifdef SPINDLE_HAVE_FABRIC
    &tp_fabric_ops,
#endif
#ifdef SPINDLE_HAVE_VERBS
    &tp_verbs_ops,
#endif
};

const struct tp_ops *tp_backend_find(const char *name)
{
    if (name == NULL || name[0] == '\0')
        name = backends[0]->name;
    char available[128] = "";
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
        if (i > 0)
            strncat(available, ", ", sizeof available - strlen(available) - 1);
        strncat(available, backends[i]->name, sizeof available - strlen(available) - 1);
    }
    sp_error(SPINDLE_ENOTSUP, "transport '%s' is unknown or not built (available: %s)", name,
             available);
    return NULL;
}
