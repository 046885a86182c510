/* spindle-rawbench --append (rawappend.h). */
#include "rawappend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log/log_format.h"
#include "util/clock.h"

#define RAW_APPEND_MAX_WRITERS 64

struct append_result {
    int ok;
    char error[200];
    double seconds;
};

static void failed(struct append_result *r, const char *what, const char *path)
{
    snprintf(r->error, sizeof r->error, "%s %.120s: %s", what, path, strerror(errno));
}

#define DIRECT_BLOCK 4096u

/* Writes len bytes of buf at offset, through short writes and EINTR. */
static bool write_all(int fd, const uint8_t *buf, size_t len, off_t offset)
{
    for (size_t put = 0; put < len;) {
        ssize_t w = pwrite(fd, buf + put, len - put, offset + (off_t)put);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        put += (size_t)w;
    }
    return true;
}

#define DIRECT_AHEAD ((size_t)1 << 20)

/* --direct, as the log's writer appends (src/log/log_direct.h): zeros
 * written DIRECT_AHEAD at a time ahead of the records (from zeros, a
 * DIRECT_AHEAD aligned buffer of them) whenever a batch would pass the
 * file's end (*allocated), then the batch: staging holds the file's
 * partial last block (carry bytes) and has room for it and the batch,
 * rounded up to a block; all of it goes direct, the last block padded
 * with zeros. */
static bool append_direct(int direct, uint8_t *staging, const uint8_t *zeros, size_t *carry,
                          off_t *allocated, const uint8_t *batch, size_t bytes, off_t *end)
{
    off_t block_offset = *end - (off_t)*carry;
    memcpy(staging + *carry, batch, bytes);
    size_t fill = *carry + bytes, whole = fill - fill % DIRECT_BLOCK;
    size_t padded = fill == whole ? fill : whole + DIRECT_BLOCK;
    memset(staging + fill, 0, padded - fill);
    off_t padded_end = block_offset + (off_t)padded;
    if (*allocated < padded_end) {
        if (!write_all(direct, zeros, DIRECT_AHEAD, padded_end))
            return false;
        *allocated = padded_end + (off_t)DIRECT_AHEAD;
    }
    if (padded > 0 && !write_all(direct, staging, padded, block_offset))
        return false;
    size_t rest = fill - whole;
    if (rest > 0)
        memmove(staging, staging + whole, rest);
    *carry = rest;
    *end += (off_t)bytes;
    return true;
}

/* One writer: waits on go (its end closes when every writer exists), then
 * appends and syncs; the file is removed afterwards. */
static void run_writer(const struct raw_append_config *c, uint32_t self, int go,
                       struct append_result *r)
{
    memset(r, 0, sizeof *r);
    size_t record = LOG_RECORD_HEADER_SIZE + LOG_MESSAGE_FIXED_SIZE + (size_t)c->msg_size;
    size_t chunk = record * c->batch;
    char path[4096];
    snprintf(path, sizeof path, "%s/raw-append-%u-%d", c->dir, self, (int)getpid());
    uint8_t *buffer = malloc(chunk);
    if (buffer == NULL) {
        snprintf(r->error, sizeof r->error, "no memory for a batch of %zu bytes", chunk);
        return;
    }
    for (size_t i = 0; i < chunk; i++)
        buffer[i] = (uint8_t)(i * 31u + self);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        failed(r, "cannot create", path);
        free(buffer);
        return;
    }
    int direct = -1;
    void *staging = NULL, *zeros = NULL;
    size_t carry = 0;
    off_t allocated = 0;
    if (c->direct) {
        direct = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
        if (direct < 0 ||
            posix_memalign(&staging, DIRECT_BLOCK,
                           (chunk + 2 * (size_t)DIRECT_BLOCK) & ~(size_t)(DIRECT_BLOCK - 1)) != 0 ||
            posix_memalign(&zeros, DIRECT_BLOCK, DIRECT_AHEAD) != 0) {
            failed(r, "cannot open with O_DIRECT (or no memory for)", path);
            free(staging);
            if (direct >= 0)
                close(direct);
            close(fd);
            unlink(path);
            free(buffer);
            return;
        }
        memset(zeros, 0, DIRECT_AHEAD);
    }
    char byte;
    while (read(go, &byte, 1) < 0 && errno == EINTR) {
    }
    uint64_t start = sp_now_ns();
    off_t offset = 0;
    bool ok = true;
    for (uint64_t done = 0; done < c->records && ok;) {
        uint64_t n = c->records - done < c->batch ? c->records - done : c->batch;
        size_t bytes = (size_t)n * record;
        if (c->direct)
            ok = append_direct(direct, staging, zeros, &carry, &allocated, buffer, bytes, &offset);
        else if ((ok = write_all(fd, buffer, bytes, offset)))
            offset += (off_t)bytes;
        if (!ok)
            failed(r, "cannot append to", path);
        if (ok && fdatasync(fd) != 0) {
            failed(r, "cannot fdatasync", path);
            ok = false;
        }
        done += n;
    }
    r->seconds = (double)(sp_now_ns() - start) / 1e9;
    r->ok = ok;
    if (direct >= 0)
        close(direct);
    free(staging);
    free(zeros);
    close(fd);
    unlink(path);
    free(buffer);
}

static void report(const struct raw_append_config *c, const struct append_result *results)
{
    size_t record = LOG_RECORD_HEADER_SIZE + LOG_MESSAGE_FIXED_SIZE + (size_t)c->msg_size;
    double rate = 0, longest = 0;
    for (uint32_t i = 0; i < c->writers; i++) {
        rate += (double)c->records / results[i].seconds;
        if (results[i].seconds > longest)
            longest = results[i].seconds;
    }
    rate /= c->writers;
    double mb = rate * (double)record / 1e6;
    printf("raw append: %u writers, %llu records of %zu bytes each (%u-byte messages), %u per "
           "fdatasync: %.0f records/s, %.2f MB/s per writer (the slowest took %.3f s)\n",
           c->writers, (unsigned long long)c->records, record, c->msg_size, c->batch, rate, mb,
           longest);
    printf("{\"writers\":%u,\"direct\":%s,\"msg_size\":%u,\"record_bytes\":%zu,\"batch\":%u,"
           "\"records_per_writer\":%llu,\"seconds\":%.6f,\"append_records_per_s\":%.1f,"
           "\"append_mb_per_s\":%.3f,\"fdatasync_per_record\":%.5f}\n",
           c->writers, c->direct ? "true" : "false", c->msg_size, record, c->batch,
           (unsigned long long)c->records, longest, rate, mb, 1.0 / c->batch);
}

int raw_append(const struct raw_append_config *c)
{
    if (c->writers < 1 || c->writers > RAW_APPEND_MAX_WRITERS) {
        fprintf(stderr, "spindle-rawbench: --writers must be 1..%d\n", RAW_APPEND_MAX_WRITERS);
        return 2;
    }
    int go[2];
    if (pipe(go) < 0) {
        perror("spindle-rawbench: pipe");
        return 1;
    }
    pid_t pids[RAW_APPEND_MAX_WRITERS];
    int results_fd[RAW_APPEND_MAX_WRITERS];
    uint32_t started = 0;
    int status = 0;
    fflush(NULL);
    for (; started < c->writers; started++) {
        int out[2];
        if (pipe(out) < 0) {
            perror("spindle-rawbench: pipe");
            status = 1;
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("spindle-rawbench: fork");
            close(out[0]);
            close(out[1]);
            status = 1;
            break;
        }
        if (pid == 0) {
            close(go[1]);
            close(out[0]);
            struct append_result r;
            run_writer(c, started, go[0], &r);
            ssize_t w = write(out[1], &r, sizeof r);
            _exit(w == (ssize_t)sizeof r && r.ok ? 0 : 1);
        }
        close(out[1]);
        pids[started] = pid;
        results_fd[started] = out[0];
    }
    /* Every writer reads end-of-file at once: they start together. */
    close(go[0]);
    close(go[1]);
    struct append_result results[RAW_APPEND_MAX_WRITERS];
    for (uint32_t i = 0; i < started; i++) {
        ssize_t got = read(results_fd[i], &results[i], sizeof results[i]);
        close(results_fd[i]);
        int exit_status = 0;
        bool exited = waitpid(pids[i], &exit_status, 0) == pids[i] && WIFEXITED(exit_status);
        if (got != (ssize_t)sizeof results[i]) {
            fprintf(stderr, "spindle-rawbench: append writer %u died without a result\n", i);
            status = 1;
        } else if (!results[i].ok || !exited || WEXITSTATUS(exit_status) != 0) {
            fprintf(stderr, "spindle-rawbench: append writer %u: %s\n", i, results[i].error);
            status = 1;
        }
    }
    if (status == 0)
        report(c, results);
    return status;
}
