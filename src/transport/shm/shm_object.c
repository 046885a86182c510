/*
 * The shared-memory backend's memory objects: creating and sealing a
 * memfd, the descriptor that names one to a peer, and mapping a peer's
 * object once it is checked to be the one its descriptor names (shm.c
 * says how the backend uses them).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/shm/shm_impl.h"
#include "util/error.h"
#include "util/wire.h"

int shm_memfd_map(const char *name, size_t length, int *fd_out, void **addr_out)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return sp_error(SPINDLE_EIO, "shm: memfd_create(%s): %s", name, strerror(errno));
    if (ftruncate(fd, (off_t)length) != 0 || fcntl(fd, F_ADD_SEALS, SHM_SEALS) != 0) {
        int err = errno;
        close(fd);
        return sp_error(SPINDLE_ENOMEM, "shm: cannot size and seal %s at %zu bytes: %s", name,
                        length, strerror(err));
    }
    void *addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        int err = errno;
        close(fd);
        return sp_error(SPINDLE_ENOMEM, "shm: cannot map %zu bytes: %s", length, strerror(err));
    }
    *fd_out = fd;
    *addr_out = addr;
    return 0;
}

/* Field by field through the wire codec (util/wire.h), little-endian: u64
 * magic, u32 version, u32 kind, i32 pid, i32 fd, u64 length, u64 nonce. */
void shm_desc_encode(const struct shm_wire *wire, struct tp_desc *out)
{
    memset(out, 0, sizeof *out);
    struct wire_writer w;
    wire_writer_init(&w, out->bytes, sizeof out->bytes);
    wire_put_u64(&w, wire->magic);
    wire_put_u32(&w, wire->version);
    wire_put_u32(&w, wire->kind);
    wire_put_u32(&w, (uint32_t)wire->pid);
    wire_put_u32(&w, (uint32_t)wire->fd);
    wire_put_u64(&w, wire->length);
    wire_put_u64(&w, wire->nonce);
    out->len = (uint32_t)w.pos;
}

int shm_desc_make(struct tp_desc *out, uint32_t kind, int fd, uint64_t length, uint64_t nonce)
{
    struct shm_wire wire = {SHM_MAGIC, SHM_VERSION, kind, (int32_t)getpid(), fd, length, nonce};
    shm_desc_encode(&wire, out);
    return 0;
}

int shm_desc_decode(const struct tp_desc *desc, uint32_t kind, struct shm_wire *wire)
{
    static const char *kinds[] = {"", "address", "region"};
    if (kind != SHM_KIND_ADDRESS && kind != SHM_KIND_REGION)
        return sp_error(SPINDLE_EINVAL, "shm: descriptor kind %u is neither address nor region",
                        kind);
    if (desc == NULL || desc->len != sizeof *wire)
        return sp_error(SPINDLE_EINVAL, "shm: %s descriptor has length %u, expected %zu",
                        kinds[kind], desc == NULL ? 0u : desc->len, sizeof *wire);
    struct wire_reader r;
    wire_reader_init(&r, desc->bytes, desc->len, "shm descriptor");
    wire->magic = wire_get_u64(&r, "magic");
    wire->version = wire_get_u32(&r, "version");
    wire->kind = wire_get_u32(&r, "kind");
    wire->pid = wire_get_i32(&r, "pid");
    wire->fd = wire_get_i32(&r, "fd");
    wire->length = wire_get_u64(&r, "length");
    wire->nonce = wire_get_u64(&r, "nonce");
    if (wire->magic != SHM_MAGIC || wire->version != SHM_VERSION)
        return sp_error(SPINDLE_EPROTO,
                        "shm: %s descriptor is not a shm descriptor "
                        "(magic %#llx, version %u)",
                        kinds[kind], (unsigned long long)wire->magic, wire->version);
    if (wire->kind != kind || wire->pid <= 0 || wire->fd < 0 || wire->length == 0)
        return sp_error(SPINDLE_EPROTO, "shm: malformed %s descriptor (kind %u, pid %d, fd %d)",
                        kinds[kind], wire->kind, wire->pid, wire->fd);
    return 0;
}

void shm_region_name(uint64_t nonce, char *name, size_t cap)
{
    snprintf(name, cap, "spindle-region-%016llx", (unsigned long long)nonce);
}

/* Why the object fd (opened from path) is not the peer's object named name:
 * not that memory object of this backend (another process's, or a stale
 * descriptor whose fd number now names something else), not sealed as
 * memfd_map seals them, or not exactly the size its descriptor claims.
 * NULL when it is. */
static const char *remote_refusal(int fd, const char *path, const char *name, uint64_t length,
                                  char *why, size_t cap)
{
    char target[128] = "";
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n > 0)
        target[n] = '\0';
    size_t name_len = strlen(name);
    /* The kernel shows "/memfd:<name> (deleted)". */
    if (n <= 0 || strncmp(target, "/memfd:", 7) != 0 || strncmp(target + 7, name, name_len) != 0 ||
        (target[7 + name_len] != '\0' && target[7 + name_len] != ' ')) {
        snprintf(why, cap, "is %s, not the memory object %s of this backend",
                 n > 0 ? target : "unreadable", name);
        return why;
    }
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & SHM_SEALS) != SHM_SEALS) {
        snprintf(why, cap, "is not sealed (seals %#x): its owner could shrink it under us",
                 seals < 0 ? 0 : (unsigned)seals);
        return why;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != length) {
        snprintf(why, cap, "holds %lld bytes, not the %llu its descriptor claims",
                 (long long)st.st_size, (unsigned long long)length);
        return why;
    }
    return NULL;
}

int shm_map_remote(const struct shm_wire *wire, const char *name, uint64_t map_offset,
                   size_t map_length, void **addr_out)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", wire->pid, wire->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return sp_error(err == ENOENT ? SPINDLE_EUNREACH : SPINDLE_EIO,
                        "shm: cannot open peer pid %d object %s: %s", wire->pid, path,
                        strerror(err));
    }
    char why[192];
    if (remote_refusal(fd, path, name, wire->length, why, sizeof why) != NULL) {
        close(fd);
        return sp_error(SPINDLE_EPROTO, "shm: peer pid %d object %s %s", wire->pid, path, why);
    }
    void *addr = mmap(NULL, map_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map_offset);
    int err = errno;
    close(fd);
    if (addr == MAP_FAILED)
        return sp_error(SPINDLE_EIO, "shm: cannot map peer pid %d object: %s", wire->pid,
                        strerror(err));
    *addr_out = addr;
    return 0;
}
