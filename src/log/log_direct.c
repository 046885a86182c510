/* Writing the tail segment past the page cache (log/log_direct.h). */
#include "log/log_direct.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/log.h"

struct log_direct {
    const char *dir;        /* the log's, for messages */
    uint8_t *staging;       /* LOG_DIRECT_STAGING bytes, LOG_DIRECT_BLOCK-aligned */
    uint8_t *zeros;         /* LOG_DIRECT_ZEROS zero bytes, aligned: for the space ahead */
    int fd;                 /* the tail segment opened O_DIRECT, or -1 */
    uint64_t fd_first;      /* the first position of fd's segment */
    uint64_t allocated;     /* fd's length: its records, then zeros */
    uint64_t segment_bytes; /* where the appender seals a segment */
    bool refused;           /* O_DIRECT refused: buffered from now on */
    /* staging[0, carry_bytes) holds the file's bytes at carry_offset (a
     * block boundary) of the segment starting at carry_first. */
    bool carry_valid;
    uint64_t carry_first, carry_offset;
    size_t carry_bytes;
};

int log_direct_create(const struct log *log, uint64_t segment_bytes, struct log_direct **out)
{
    *out = NULL;
    struct log_direct *direct = calloc(1, sizeof *direct);
    void *staging = NULL, *zeros = NULL;
    if (direct == NULL || posix_memalign(&staging, LOG_DIRECT_BLOCK, LOG_DIRECT_STAGING) != 0 ||
        posix_memalign(&zeros, LOG_DIRECT_BLOCK, LOG_DIRECT_ZEROS) != 0) {
        free(staging);
        free(direct);
        return sp_error(SPINDLE_ENOMEM, "log: out of memory for a %zu-byte staging buffer",
                        LOG_DIRECT_STAGING);
    }
    memset(zeros, 0, LOG_DIRECT_ZEROS);
    direct->dir = log->dir;
    direct->segment_bytes = segment_bytes;
    direct->staging = staging;
    direct->zeros = zeros;
    direct->fd = -1;
    *out = direct;
    return 0;
}

void log_direct_destroy(struct log_direct *direct)
{
    if (direct == NULL)
        return;
    if (direct->fd >= 0)
        close(direct->fd);
    free(direct->staging);
    free(direct->zeros);
    free(direct);
}

/* From now on buffered only, said once. */
static void refuse(struct log_direct *direct, const char *why)
{
    direct->refused = true;
    direct->carry_valid = false;
    if (direct->fd >= 0)
        close(direct->fd);
    direct->fd = -1;
    SP_LOG_INFO_("log", "%s: O_DIRECT refused (%s): appending through the page cache", direct->dir,
                 why);
}

/* The tail segment open with O_DIRECT: 0, or -1 when refused. */
static int open_tail(struct log_direct *direct, const struct log *log)
{
    const struct log_segment *seg = &log->segments[log->segment_count - 1];
    if (direct->fd >= 0 && direct->fd_first == seg->first_position)
        return 0;
    if (direct->fd >= 0)
        close(direct->fd);
    char name[LOG_SEGMENT_NAME_SIZE + 1];
    log_segment_name(seg->first_position, name);
    direct->fd = openat(log->dir_fd, name, O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (direct->fd < 0 || fstat(direct->fd, &st) != 0) {
        refuse(direct, strerror(errno));
        return -1;
    }
    direct->fd_first = seg->first_position;
    direct->allocated = (uint64_t)st.st_size;
    return 0;
}

/* Writes zeros from the block boundary at or after the file's end up to
 * LOG_DIRECT_AHEAD past end, when the file does not reach end already:
 * the batches that follow then overwrite blocks the file has, and their
 * fdatasync has no length or allocation to write, only the data and the
 * disk's flush. A failure (a full disk) only leaves less space ahead: the
 * batch's own write says whether it fits. */
static void zero_ahead(struct log_direct *direct, uint64_t end)
{
    if (direct->allocated >= end)
        return;
    /* From the batch's end at the earliest: never over records. */
    uint64_t at = (direct->allocated + LOG_DIRECT_BLOCK - 1) / LOG_DIRECT_BLOCK * LOG_DIRECT_BLOCK;
    if (at < end)
        at = end;
    /* Not past the block where the segment is sealed (and trimmed). */
    uint64_t until = end + LOG_DIRECT_AHEAD;
    uint64_t seal =
        (direct->segment_bytes + LOG_DIRECT_BLOCK - 1) / LOG_DIRECT_BLOCK * LOG_DIRECT_BLOCK;
    if (until > seal)
        until = seal > end ? seal : end;
    /* One write of up to LOG_DIRECT_AHEAD: the zero buffer, repeated. */
    struct iovec iov[LOG_DIRECT_AHEAD / LOG_DIRECT_ZEROS];
    for (size_t i = 0; i < sizeof iov / sizeof iov[0]; i++)
        iov[i] = (struct iovec){direct->zeros, LOG_DIRECT_ZEROS};
    while (at < until) {
        int count = 0;
        for (uint64_t left = until - at; left > 0 && count < (int)(sizeof iov / sizeof iov[0]);
             count++) {
            iov[count].iov_len = left < LOG_DIRECT_ZEROS ? (size_t)left : LOG_DIRECT_ZEROS;
            left -= iov[count].iov_len;
        }
        ssize_t wrote = pwritev(direct->fd, iov, count, (off_t)at);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0 || (size_t)wrote % LOG_DIRECT_BLOCK != 0) {
            if (wrote > 0)
                direct->allocated = at + (uint64_t)wrote;
            return;
        }
        at += (uint64_t)wrote;
        direct->allocated = at;
    }
}

/* Writes length bytes of buf at offset of fd, through short writes and
 * EINTR: 0, or -1 with errno (0 for a disk that took nothing). */
static int pwrite_all(int fd, const uint8_t *buf, size_t length, uint64_t offset)
{
    for (size_t done = 0; done < length;) {
        ssize_t wrote = pwrite(fd, buf + done, length - done, (off_t)(offset + done));
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            if (wrote == 0)
                errno = 0;
            return -1;
        }
        done += (size_t)wrote;
    }
    return 0;
}

/* Writes the whole blocks of staging[0, length) at offset (aligned): past
 * the page cache, or through it once O_DIRECT is refused or a short write
 * left the rest unaligned. */
static int write_blocks(struct log_direct *direct, const struct log *log, size_t length,
                        uint64_t offset)
{
    size_t done = 0;
    while (!direct->refused && done < length) {
        ssize_t wrote =
            pwrite(direct->fd, direct->staging + done, length - done, (off_t)(offset + done));
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote < 0 && errno == EINVAL && done == 0) {
            refuse(direct, "a write of aligned blocks was refused");
            break;
        }
        if (wrote <= 0) {
            if (wrote == 0)
                errno = 0;
            return -1;
        }
        done += (size_t)wrote;
        if (done % LOG_DIRECT_BLOCK != 0)
            break;
    }
    return pwrite_all(log->tail_fd, direct->staging + done, length - done, offset + done);
}

/* The buffered way, straight from the queue. */
static int write_buffered(const struct log *log, struct iovec *iov, int count, size_t bytes,
                          uint64_t offset)
{
    for (size_t done = 0; done < bytes;) {
        ssize_t wrote = pwritev(log->tail_fd, iov, count, (off_t)offset);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            if (wrote == 0)
                errno = 0;
            return -1;
        }
        done += (size_t)wrote;
        offset += (uint64_t)wrote;
        for (size_t skip = (size_t)wrote; count > 0 && skip > 0;) {
            size_t part = skip < iov->iov_len ? skip : iov->iov_len;
            iov->iov_base = (uint8_t *)iov->iov_base + part;
            iov->iov_len -= part;
            skip -= part;
            if (iov->iov_len == 0) {
                iov++;
                count--;
            }
        }
    }
    return 0;
}

/* Puts the file's bytes from the block boundary before offset up to offset
 * at the start of staging: the carry, or read back. */
static int load_carry(struct log_direct *direct, const struct log *log, uint64_t first,
                      uint64_t block_offset, size_t fill)
{
    if (fill == 0 || (direct->carry_valid && direct->carry_first == first &&
                      direct->carry_offset == block_offset && direct->carry_bytes == fill))
        return 0;
    direct->carry_valid = false;
    return log_pread_all(log->tail_fd, direct->staging, fill, block_offset);
}

int log_direct_write(struct log_direct *direct, struct log *log, struct iovec *iov, int count,
                     size_t bytes, uint64_t offset)
{
    if (direct->refused || open_tail(direct, log) != 0)
        return write_buffered(log, iov, count, bytes, offset);
    uint64_t first = log->segments[log->segment_count - 1].first_position;
    uint64_t block_offset = offset - offset % LOG_DIRECT_BLOCK;
    size_t fill = (size_t)(offset - block_offset);
    if (load_carry(direct, log, first, block_offset, fill) != 0)
        return -1;
    direct->carry_valid = false;
    for (int i = 0; i < count; i++) {
        const uint8_t *from = iov[i].iov_base;
        for (size_t left = iov[i].iov_len; left > 0;) {
            size_t part = LOG_DIRECT_STAGING - fill < left ? LOG_DIRECT_STAGING - fill : left;
            memcpy(direct->staging + fill, from, part);
            from += part;
            left -= part;
            fill += part;
            if (fill < LOG_DIRECT_STAGING)
                continue;
            /* LOG_DIRECT_STAGING is a number of blocks: all of it goes. */
            if (write_blocks(direct, log, fill, block_offset) != 0)
                return -1;
            block_offset += fill;
            if (direct->allocated < block_offset)
                direct->allocated = block_offset;
            fill = 0;
        }
    }
    /* The partial block goes direct too, its rest zeros: past the last
     * record the file holds only zeros, which a reopen takes for the end
     * (log_store.c), and the next batch rewrites the block. */
    size_t whole = fill - fill % LOG_DIRECT_BLOCK;
    size_t padded = fill == whole ? fill : whole + LOG_DIRECT_BLOCK;
    memset(direct->staging + fill, 0, padded - fill);
    if (!direct->refused)
        zero_ahead(direct, block_offset + padded);
    if (padded > 0 && write_blocks(direct, log, padded, block_offset) != 0)
        return -1;
    if (direct->allocated < block_offset + padded)
        direct->allocated = block_offset + padded;
    block_offset += whole;
    fill -= whole;
    if (fill > 0)
        memmove(direct->staging, direct->staging + whole, fill);
    direct->carry_valid = !direct->refused;
    direct->carry_first = first;
    direct->carry_offset = block_offset;
    direct->carry_bytes = fill;
    return 0;
}
