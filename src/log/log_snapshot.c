/* Snapshot files of a log directory (log/log_snapshot.h, docs/LOGS.md). */
#include "log/log_snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log/log.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/private_dir.h"
#include "util/wire.h"

static const uint8_t snapshot_magic[8] = {'S', 'P', 'N', 'D', 'L', 'S', 'N', 'P'};

/* The largest view record: 64 members, 256 subgroups. */
#define MAX_VIEW_RECORD                                                                            \
    (LOG_RECORD_HEADER_SIZE + 16u + 4u * SPINDLE_MAX_MEMBERS + 8u * SPINDLE_MAX_SUBGROUPS)
#define CHUNK ((size_t)1 << 16)

static struct log_record view_record(const struct log_snapshot *snap)
{
    struct log_record record;
    memset(&record, 0, sizeof record);
    record.type = LOG_REC_VIEW;
    record.view = snap->view;
    return record;
}

size_t log_snapshot_encode(const struct log_snapshot *snap, uint8_t *buf, size_t cap)
{
    struct log_record record = view_record(snap);
    size_t view_size = log_record_size(&record);
    size_t size = LOG_SNAPSHOT_HEADER_SIZE + view_size;
    if (buf == NULL || cap < size)
        return size;
    struct wire_writer w;
    wire_writer_init(&w, buf, LOG_SNAPSHOT_HEADER_SIZE);
    wire_put_bytes(&w, snapshot_magic, sizeof snapshot_magic);
    wire_put_u16(&w, LOG_SNAPSHOT_VERSION);
    wire_put_u16(&w, LOG_SNAPSHOT_HEADER_SIZE);
    wire_put_u32(&w, snap->subgroup);
    wire_put_u64(&w, snap->view_id);
    wire_put_u64(&w, snap->seq);
    wire_put_u64(&w, snap->position);
    wire_put_u64(&w, snap->state_length);
    wire_put_u32(&w, snap->state_crc);
    wire_put_u32(&w, (uint32_t)view_size);
    wire_put_zero(&w, 4);
    wire_put_u32(&w, sp_crc32c(0, buf, LOG_SNAPSHOT_HEADER_SIZE - 4));
    log_record_encode(&record, buf + LOG_SNAPSHOT_HEADER_SIZE, view_size);
    return size;
}

/* The 64-byte header: 0 with the fields and *view_size, or the failure. */
static int decode_header(struct wire_reader *r, struct log_snapshot *snap, uint32_t *view_size)
{
    if (memcmp(r->buf, snapshot_magic, sizeof snapshot_magic) != 0) {
        wire_fail(r, "magic is not \"SPNDLSNP\": not a snapshot");
        return r->rc;
    }
    r->pos = sizeof snapshot_magic;
    uint16_t version = wire_get_u16(r, "version");
    if (r->rc == 0 && version != LOG_SNAPSHOT_VERSION) {
        r->pos -= 2;
        wire_fail(r, "format version %u is not %u, the version this build reads", version,
                  LOG_SNAPSHOT_VERSION);
    }
    uint16_t header_size = wire_get_u16(r, "header size");
    if (r->rc == 0 && header_size != LOG_SNAPSHOT_HEADER_SIZE) {
        r->pos -= 2;
        wire_fail(r, "header size %u is not %u", header_size, LOG_SNAPSHOT_HEADER_SIZE);
    }
    snap->subgroup = wire_get_u32(r, "subgroup");
    if (r->rc == 0 && snap->subgroup >= SPINDLE_MAX_SUBGROUPS) {
        r->pos -= 4;
        wire_fail(r, "subgroup %u exceeds %u", snap->subgroup, SPINDLE_MAX_SUBGROUPS - 1);
    }
    snap->view_id = wire_get_u64(r, "view id");
    snap->seq = wire_get_u64(r, "sequence number");
    snap->position = wire_get_u64(r, "position");
    snap->state_length = wire_get_u64(r, "state length");
    snap->state_crc = wire_get_u32(r, "state checksum");
    *view_size = wire_get_u32(r, "view record length");
    if (r->rc == 0 && (*view_size < LOG_RECORD_HEADER_SIZE || *view_size > MAX_VIEW_RECORD)) {
        r->pos -= 4;
        wire_fail(r, "view record length %u is outside %u..%u", *view_size, LOG_RECORD_HEADER_SIZE,
                  (unsigned)MAX_VIEW_RECORD);
    }
    wire_get_zero(r, 4, "reserved");
    uint32_t crc = wire_get_u32(r, "checksum");
    uint32_t actual = sp_crc32c(0, r->buf, LOG_SNAPSHOT_HEADER_SIZE - 4);
    if (r->rc == 0 && crc != actual) {
        r->pos -= 4;
        wire_fail(r, "checksum 0x%08x does not match the header's 0x%08x", crc, actual);
    }
    return r->rc;
}

int log_snapshot_decode(const uint8_t *buf, size_t len, struct log_snapshot *snap, size_t *size)
{
    *size = LOG_SNAPSHOT_HEADER_SIZE;
    if (len < LOG_SNAPSHOT_HEADER_SIZE)
        return 0;
    memset(snap, 0, sizeof *snap);
    struct wire_reader r;
    wire_reader_init(&r, buf, LOG_SNAPSHOT_HEADER_SIZE, "log snapshot");
    uint32_t view_size = 0;
    int rc = decode_header(&r, snap, &view_size);
    if (rc < 0)
        return rc;
    *size = LOG_SNAPSHOT_HEADER_SIZE + view_size;
    if (len < *size)
        return 0;
    struct log_record record;
    memset(&record, 0, sizeof record);
    size_t record_size;
    rc = log_record_decode(buf + LOG_SNAPSHOT_HEADER_SIZE, view_size, &record, &record_size);
    const char *wrong = NULL;
    if (rc < 0)
        wrong = spindle_errmsg();
    else if (rc == 0 || record_size != view_size)
        wrong = "its length is not the header's";
    else if (record.type != LOG_REC_VIEW || record.position != 0)
        wrong = "not a view record at position 0";
    else if (record.view.view_id != snap->view_id)
        wrong = "of another view than the header's";
    if (wrong != NULL) {
        char why[256];
        snprintf(why, sizeof why, "%s", wrong);
        r.pos = LOG_SNAPSHOT_HEADER_SIZE;
        r.rc = 0;
        wire_fail(&r, "view record: %s", why);
        return r.rc;
    }
    snap->view = record.view;
    return 1;
}

void log_snapshot_name(const struct log_snapshot *snap, char name[LOG_SNAPSHOT_NAME_SIZE + 1])
{
    snprintf(name, LOG_SNAPSHOT_NAME_SIZE + 1, "%03u-%020" PRIu64 "-%020" PRIu64 ".snap",
             snap->subgroup % 1000u, snap->view_id, snap->seq);
}

/* Parses count decimal digits; 0 when one is not a digit or it overflows. */
static int parse_digits(const char *text, int count, uint64_t *value)
{
    *value = 0;
    for (int i = 0; i < count; i++) {
        if (text[i] < '0' || text[i] > '9')
            return 0;
        unsigned digit = (unsigned)(text[i] - '0');
        if (*value > (UINT64_MAX - digit) / 10)
            return 0;
        *value = *value * 10 + digit;
    }
    return 1;
}

int log_snapshot_name_parse(const char *name, uint32_t *subgroup, uint64_t *view_id, uint64_t *seq)
{
    uint64_t group;
    if (strlen(name) != LOG_SNAPSHOT_NAME_SIZE || name[3] != '-' || name[24] != '-' ||
        strcmp(name + 45, ".snap") != 0 || !parse_digits(name, 3, &group) ||
        !parse_digits(name + 4, 20, view_id) || !parse_digits(name + 25, 20, seq) ||
        group >= SPINDLE_MAX_SUBGROUPS)
        return 0;
    *subgroup = (uint32_t)group;
    return 1;
}

static int write_all(int fd, const void *buf, size_t length)
{
    for (size_t done = 0; done < length;) {
        ssize_t wrote = write(fd, (const uint8_t *)buf + done, length - done);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0) {
            if (wrote == 0)
                errno = ENOSPC;
            return -1;
        }
        done += (size_t)wrote;
    }
    return 0;
}

int log_snapshot_write(int dir_fd, const char *dir, struct log_snapshot *snap, const void *state,
                       size_t length)
{
    snap->state_length = length;
    snap->state_crc = length > 0 ? sp_crc32c(0, state, length) : 0;
    char name[LOG_SNAPSHOT_NAME_SIZE + 1], temp[LOG_SNAPSHOT_NAME_SIZE + 8];
    log_snapshot_name(snap, name);
    snprintf(temp, sizeof temp, "%s%s", name, LOG_SNAPSHOT_TEMP_SUFFIX);
    uint8_t head[LOG_SNAPSHOT_HEADER_SIZE + MAX_VIEW_RECORD];
    size_t head_size = log_snapshot_encode(snap, head, sizeof head);
    /* A temporary file of an earlier attempt that crashed: not a snapshot. */
    if (unlinkat(dir_fd, temp, 0) != 0 && errno != ENOENT)
        return sp_error(SPINDLE_EIO, "log: cannot remove %s/%s: %s", dir, temp, strerror(errno));
    int fd = openat(dir_fd, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return sp_error(SPINDLE_EIO, "log: cannot create snapshot %s/%s: %s", dir, temp,
                        strerror(errno));
    /* The file is whole and durable before it takes the name; the name is
     * durable before anything relies on it (compaction). */
    const char *failed = NULL;
    if (fchmod(fd, 0600) != 0 || write_all(fd, head, head_size) != 0 ||
        write_all(fd, state, length) != 0)
        failed = "write";
    else if (fdatasync(fd) != 0)
        failed = "sync";
    int err = errno;
    close(fd);
    if (failed == NULL && renameat(dir_fd, temp, dir_fd, name) != 0) {
        failed = "rename";
        err = errno;
    }
    if (failed != NULL) {
        unlinkat(dir_fd, temp, 0);
        return sp_error(SPINDLE_EIO, "log: cannot %s snapshot %s/%s (%zu bytes of state): %s",
                        failed, dir, temp, length, strerror(err));
    }
    if (fsync(dir_fd) != 0)
        return sp_error(SPINDLE_EIO, "log: cannot sync %s after writing snapshot %s: %s", dir, name,
                        strerror(errno));
    return 0;
}

/*
 * Checks an open snapshot file whole: 1 with *snap (and the state into
 * state, when not NULL, state_length bytes), 0 with why when it is torn or
 * corrupt, SPINDLE_EIO.
 */
static int check_file(int fd, uint64_t file_size, const char *name, struct log_snapshot *snap,
                      uint8_t *state, char *why, size_t why_size)
{
    uint8_t head[LOG_SNAPSHOT_HEADER_SIZE + MAX_VIEW_RECORD];
    size_t want = LOG_SNAPSHOT_HEADER_SIZE, size = 0;
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        if (want > file_size) {
            snprintf(why, why_size, "torn: %" PRIu64 " bytes, the header and view need %zu",
                     file_size, want);
            return 0;
        }
        if (log_pread_all(fd, head, want, 0) != 0)
            return sp_error(SPINDLE_EIO, "cannot read %zu bytes: %s", want,
                            errno != 0 ? strerror(errno) : "the file shrank");
        rc = log_snapshot_decode(head, want, snap, &size);
        want = size;
    }
    if (rc <= 0) {
        snprintf(why, why_size, "%s", rc < 0 ? spindle_errmsg() : "the header is incomplete");
        return 0;
    }
    uint32_t subgroup;
    uint64_t view_id, seq;
    if (!log_snapshot_name_parse(name, &subgroup, &view_id, &seq) || subgroup != snap->subgroup ||
        view_id != snap->view_id || seq != snap->seq) {
        snprintf(why, why_size,
                 "its header is of subgroup %u at view %" PRIu64 ", seq %" PRIu64
                 ": not what its name says",
                 snap->subgroup, snap->view_id, snap->seq);
        return 0;
    }
    if (file_size - size != snap->state_length) {
        snprintf(why, why_size,
                 "%s: the header promises %" PRIu64 " bytes of state, the file has %" PRIu64,
                 file_size - size < snap->state_length ? "torn" : "corrupt", snap->state_length,
                 file_size - size);
        return 0;
    }
    uint8_t *chunk = state != NULL ? NULL : malloc(CHUNK);
    if (state == NULL && chunk == NULL)
        return sp_error(SPINDLE_ENOMEM, "out of memory for a %zu-byte buffer", CHUNK);
    uint32_t crc = 0;
    for (uint64_t done = 0; done < snap->state_length;) {
        uint64_t left = snap->state_length - done;
        size_t part = state != NULL ? (size_t)left : (left < CHUNK ? (size_t)left : CHUNK);
        uint8_t *into = state != NULL ? state : chunk;
        if (log_pread_all(fd, into, part, size + done) != 0) {
            free(chunk);
            return sp_error(SPINDLE_EIO, "cannot read the state: %s",
                            errno != 0 ? strerror(errno) : "the file shrank");
        }
        crc = sp_crc32c(crc, into, part);
        done += part;
    }
    free(chunk);
    if (crc != snap->state_crc) {
        snprintf(why, why_size, "corrupt: the state's checksum is 0x%08x, the header says 0x%08x",
                 crc, snap->state_crc);
        return 0;
    }
    return 1;
}

static int is_temp(const char *name)
{
    size_t length = strlen(name), suffix = strlen(LOG_SNAPSHOT_TEMP_SUFFIX);
    if (length != LOG_SNAPSHOT_NAME_SIZE + suffix ||
        strcmp(name + LOG_SNAPSHOT_NAME_SIZE, LOG_SNAPSHOT_TEMP_SUFFIX) != 0)
        return 0;
    char base[LOG_SNAPSHOT_NAME_SIZE + 1];
    memcpy(base, name, LOG_SNAPSHOT_NAME_SIZE);
    base[LOG_SNAPSHOT_NAME_SIZE] = '\0';
    uint32_t subgroup;
    uint64_t view_id, seq;
    return log_snapshot_name_parse(base, &subgroup, &view_id, &seq);
}

static int compare_files(const void *a, const void *b)
{
    return strcmp(((const struct log_snapshot_file *)a)->name,
                  ((const struct log_snapshot_file *)b)->name);
}

/* Opens and checks one listed file into *file. */
static int examine(int dir_fd, const char *dir, struct log_snapshot_file *file)
{
    int fd;
    struct stat st;
    int rc = sp_private_file_open(dir_fd, dir, file->name, O_RDONLY, "log", &fd, &st);
    if (rc == 0) {
        snprintf(file->why, sizeof file->why, "vanished while it was read");
        return 0;
    }
    if (rc < 0)
        return rc;
    file->file_size = (uint64_t)st.st_size;
    rc =
        check_file(fd, file->file_size, file->name, &file->snap, NULL, file->why, sizeof file->why);
    close(fd);
    if (rc < 0)
        return sp_error(rc, "log: snapshot %s/%s: %s", dir, file->name, spindle_errmsg());
    file->valid = rc == 1;
    if (!file->valid)
        log_snapshot_name_parse(file->name, &file->snap.subgroup, &file->snap.view_id,
                                &file->snap.seq);
    return 0;
}

/* Collects the names of snapshot files (removing temporary ones). */
static int collect(int dir_fd, const char *dir, bool remove_temps, struct log_snapshot_file **files,
                   size_t *count)
{
    int fd = dup(dir_fd);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (listing == NULL) {
        if (fd >= 0)
            close(fd);
        return sp_error(SPINDLE_EIO, "log: cannot list %s: %s", dir, strerror(errno));
    }
    rewinddir(listing);
    size_t cap = 0;
    int rc = 0;
    bool removed = false;
    for (struct dirent *entry; rc == 0 && (entry = readdir(listing)) != NULL;) {
        uint32_t subgroup;
        uint64_t view_id, seq;
        if (remove_temps && is_temp(entry->d_name)) {
            if (unlinkat(dir_fd, entry->d_name, 0) != 0)
                rc = sp_error(SPINDLE_EIO, "log: cannot remove %s/%s: %s", dir, entry->d_name,
                              strerror(errno));
            removed = true;
            continue;
        }
        size_t length = strlen(entry->d_name);
        if (!log_snapshot_name_parse(entry->d_name, &subgroup, &view_id, &seq) ||
            length > LOG_SNAPSHOT_NAME_SIZE)
            continue;
        if (*count == cap) {
            cap = cap == 0 ? 8 : cap * 2;
            struct log_snapshot_file *grown = realloc(*files, cap * sizeof *grown);
            if (grown == NULL) {
                rc = sp_error(SPINDLE_ENOMEM, "log: out of memory listing snapshots of %s", dir);
                break;
            }
            *files = grown;
        }
        struct log_snapshot_file *file = &(*files)[(*count)++];
        memset(file, 0, sizeof *file);
        memcpy(file->name, entry->d_name, length + 1);
    }
    closedir(listing);
    if (rc == 0 && removed && fsync(dir_fd) != 0)
        rc = sp_error(SPINDLE_EIO, "log: cannot sync %s: %s", dir, strerror(errno));
    return rc;
}

int log_snapshot_list(int dir_fd, const char *dir, bool remove_temps,
                      struct log_snapshot_file **files, size_t *count)
{
    *files = NULL;
    *count = 0;
    int rc = collect(dir_fd, dir, remove_temps, files, count);
    for (size_t i = 0; rc == 0 && i < *count; i++)
        rc = examine(dir_fd, dir, &(*files)[i]);
    if (rc < 0) {
        free(*files);
        *files = NULL;
        *count = 0;
        return rc;
    }
    if (*count > 1)
        qsort(*files, *count, sizeof **files, compare_files);
    return 0;
}

/* Used by tests only, until a restart reads the state back. */
// cppcheck-suppress unusedFunction
int log_snapshot_read(int dir_fd, const char *dir, const char *name, struct log_snapshot *snap,
                      void **state)
{
    *state = NULL;
    int fd;
    struct stat st;
    int rc = sp_private_file_open(dir_fd, dir, name, O_RDONLY, "log", &fd, &st);
    if (rc == 0)
        return sp_error(SPINDLE_ENOENT, "log: no snapshot %s/%s", dir, name);
    if (rc < 0)
        return rc;
    uint64_t file_size = (uint64_t)st.st_size;
    /* The header first, so that a bad length is not allocated. */
    char why[256];
    rc = check_file(fd, file_size, name, snap, NULL, why, sizeof why);
    uint8_t *buf = NULL;
    if (rc == 1 && snap->state_length > 0) {
        buf = malloc((size_t)snap->state_length);
        if (buf == NULL)
            rc = sp_error(SPINDLE_ENOMEM, "log: out of memory for a %" PRIu64 "-byte state",
                          snap->state_length);
        else
            rc = check_file(fd, file_size, name, snap, buf, why, sizeof why);
    }
    close(fd);
    if (rc == 0)
        rc = sp_error(SPINDLE_EPROTO, "log: snapshot %s/%s: %s", dir, name, why);
    else if (rc < 0 && rc != SPINDLE_ENOMEM)
        rc = sp_error(rc, "log: snapshot %s/%s: %s", dir, name, spindle_errmsg());
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *state = buf;
    return 0;
}

int log_snapshot_prune(int dir_fd, const char *dir, uint32_t subgroup,
                       const struct log_snapshot *keep, size_t keep_count)
{
    struct log_snapshot_file *files = NULL;
    size_t count = 0;
    int rc = collect(dir_fd, dir, false, &files, &count);
    bool removed = false;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        struct log_snapshot snap;
        if (!log_snapshot_name_parse(files[i].name, &snap.subgroup, &snap.view_id, &snap.seq) ||
            snap.subgroup != subgroup)
            continue;
        bool kept = false;
        for (size_t k = 0; k < keep_count; k++)
            kept |= keep[k].view_id == snap.view_id && keep[k].seq == snap.seq;
        if (kept)
            continue;
        if (unlinkat(dir_fd, files[i].name, 0) != 0 && errno != ENOENT)
            rc = sp_error(SPINDLE_EIO, "log: cannot remove snapshot %s/%s: %s", dir, files[i].name,
                          strerror(errno));
        removed = true;
    }
    free(files);
    if (rc == 0 && removed && fsync(dir_fd) != 0)
        rc = sp_error(SPINDLE_EIO, "log: cannot sync %s: %s", dir, strerror(errno));
    return rc;
}
