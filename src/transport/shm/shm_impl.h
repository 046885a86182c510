/*
 * Private to the shared-memory backend: the limits its attribute table
 * (shm_attr.c) states and shm.c enforces.
 */
#ifndef SP_TRANSPORT_SHM_IMPL_H
#define SP_TRANSPORT_SHM_IMPL_H

#include "transport/transport.h"

#define SHM_DESC_LEN      40u  /* bytes of an address or region descriptor */
#define SHM_EVENTS_MAX    256u /* queued completions and failure reports */
#define SHM_FAILURE_SLOTS 64u  /* of which completions leave this many to failures */
#define SHM_DEFAULT_MS    1000 /* failure_timeout_ms when none is configured */

#endif
