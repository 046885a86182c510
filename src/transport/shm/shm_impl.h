/*
 * Private to the shared-memory backend: the limits its attribute table
 * (shm_attr.c) states and shm.c enforces, the descriptor codec, which
 * shm.c uses and the fuzz target tests/fuzz/fuzz_shm_desc.c drives, and
 * the memory objects (shm_object.c).
 */
#ifndef SP_TRANSPORT_SHM_IMPL_H
#define SP_TRANSPORT_SHM_IMPL_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define SHM_DESC_LEN      40u  /* bytes of an address or region descriptor */
#define SHM_EVENTS_MAX    256u /* queued completions and failure reports */
#define SHM_FAILURE_SLOTS 64u  /* of which completions leave this many to failures */
#define SHM_DEFAULT_MS    1000 /* failure_timeout_ms when none is configured */
/* Slices are whole 4 KiB pages, so that a peer maps its slice and nothing
 * else; on a host with larger pages the mapping spans the pages around the
 * slice and only posts are held to it. */
#define SHM_SLICE_ALIGN 4096u

#define SHM_MAGIC        0x53504e53484d3031ull /* "SPNSHM01" */
#define SHM_VERSION      1u
#define SHM_KIND_ADDRESS 1u /* an endpoint's control page */
#define SHM_KIND_REGION  2u /* a registered region */

/* What travels in a tp_desc, in host byte order: both ends share the host.
 * The peer maps /proc/<pid>/fd/<fd>; nonce, the owner's endpoint's in
 * both kinds (in a region's object name too), tells a reused fd from ours. */
struct shm_wire {
    uint64_t magic;
    uint32_t version;
    uint32_t kind;
    int32_t pid;
    int32_t fd;
    uint64_t length;
    uint64_t nonce;
};
_Static_assert(sizeof(struct shm_wire) == SHM_DESC_LEN, "shm_attr.c states the descriptor size");

/* Writes wire as a descriptor of SHM_DESC_LEN bytes. Never fails. */
void shm_desc_encode(const struct shm_wire *wire, struct tp_desc *out);
/* Parses a peer's descriptor of the given kind into *wire without acting on
 * it (pure). 0; SPINDLE_EINVAL for a kind other than SHM_KIND_ADDRESS or
 * SHM_KIND_REGION or a descriptor that is NULL or not SHM_DESC_LEN bytes;
 * SPINDLE_EPROTO for another magic, version or kind, a pid <= 0, an fd < 0
 * or a length of 0. An accepted descriptor re-encodes to the same bytes. */
int shm_desc_decode(const struct tp_desc *desc, uint32_t kind, struct shm_wire *wire);

/* The seals every object shares: its size can change no more (a peer
 * that maps it cannot shrink it under its owner, whose next touch of the
 * lost pages would be a SIGBUS), nor can the seals. */
#define SHM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* shm_object.c. A new memfd named name of length bytes, sealed (SHM_SEALS)
 * and mapped shared: 0 with *fd_out and *addr_out; SPINDLE_EIO or
 * SPINDLE_ENOMEM, named. */
int shm_memfd_map(const char *name, size_t length, int *fd_out, void **addr_out);
/* The descriptor of this process's object fd of kind: always 0. */
int shm_desc_make(struct tp_desc *out, uint32_t kind, int fd, uint64_t length, uint64_t nonce);
/* The name shm_memfd_map gives a region of the endpoint of that nonce. */
void shm_region_name(uint64_t nonce, char *name, size_t cap);
/* Maps map_length bytes from map_offset of another process's memfd named
 * name (wire: its pid, fd and length) through /proc, once it is checked to
 * be that object: that name, sealed, exactly that length. SPINDLE_EUNREACH
 * when the process or fd is gone, SPINDLE_EPROTO when the object is another,
 * SPINDLE_EIO; each named. */
int shm_map_remote(const struct shm_wire *wire, const char *name, uint64_t map_offset,
                   size_t map_length, void **addr_out);

#endif
