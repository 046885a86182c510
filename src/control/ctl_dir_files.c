/* The files and the run of the directory exchange (control/ctl_dir_files.h). */
#include "control/ctl_dir_files.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/private_dir.h"

/* Bytes of the run file that carry the locks (never written: a lock may
 * lie past the end of a file). */
#define RUN_LIVE_BYTE     0 /* member 0 holds a write lock while its channel is open */
#define RUN_PRESENCE_BYTE 1 /* every member holds a read lock while its channel is open */

int ctl_dir_files_open(struct ctl_dir_files *files, const char *dir, uint32_t self)
{
    memset(files, 0, sizeof *files);
    files->dir_fd = -1;
    files->run_fd = -1;
    files->self = self;
    int fd;
    int rc = sp_private_dir_open(dir, true, "control: bootstrap directory",
                                 "use a directory only its owner can write, such as one under "
                                 "$XDG_RUNTIME_DIR",
                                 &fd);
    if (rc < 0)
        return rc;
    files->dir = strdup(dir);
    if (files->dir == NULL) {
        close(fd);
        return sp_error(SPINDLE_ENOMEM, "control: out of memory");
    }
    files->dir_fd = fd;
    return 0;
}

/* True for the names of the exchange: "<tag>.<member>" and the
 * temporary ".<tag>.<member>.<n>.tmp". */
static bool is_exchange_name(const char *name)
{
    bool temp = name[0] == '.';
    const char *p = name + temp;
    int numbers = 0;
    while (isdigit((unsigned char)*p)) {
        while (isdigit((unsigned char)*p))
            p++;
        numbers++;
        if (*p == '.')
            p++;
        else
            break;
    }
    return temp ? numbers == 3 && strcmp(p, "tmp") == 0 : numbers == 2 && *p == '\0';
}

/* Opens name in the directory (access: O_RDONLY, or O_RDWR to lock it for
 * writing) as util/private_dir.h does: 1 and *fd, 0 when absent, or
 * SPINDLE_EPERM naming what is wrong with it. */
static int open_checked(const struct ctl_dir_files *files, const char *name, int access, int *fd,
                        struct stat *st)
{
    return sp_private_file_open(files->dir_fd, files->dir, name, access, "control", fd, st);
}

/* 1 when fd's file begins with this run's nonce. */
static int of_this_run(const struct ctl_dir_files *files, int fd, const struct stat *st)
{
    uint8_t nonce[CTL_DIR_NONCE_SIZE];
    return st->st_size >= CTL_DIR_NONCE_SIZE &&
           pread(fd, nonce, sizeof nonce, 0) == (ssize_t)sizeof nonce &&
           memcmp(nonce, files->nonce, sizeof nonce) == 0;
}

/* Removes the exchange's files: those of this run (run_only), or every
 * regular one of the caller's (no run holds the directory). */
static void sweep(const struct ctl_dir_files *files, bool run_only)
{
    int fd = dup(files->dir_fd);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (listing == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    rewinddir(listing);
    for (struct dirent *entry; (entry = readdir(listing)) != NULL;) {
        if (!is_exchange_name(entry->d_name))
            continue;
        struct stat st;
        int file;
        bool remove;
        if (run_only) {
            /* quietly: a planted file stays, and closing keeps the
             * caller's last error message */
            file = openat(files->dir_fd, entry->d_name,
                          O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            remove = file >= 0 && fstat(file, &st) == 0 && S_ISREG(st.st_mode) &&
                     st.st_uid == geteuid() && of_this_run(files, file, &st);
            if (file >= 0)
                close(file);
        } else {
            remove = fstatat(files->dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                     S_ISREG(st.st_mode) && st.st_uid == geteuid();
        }
        if (remove)
            unlinkat(files->dir_fd, entry->d_name, 0);
    }
    closedir(listing);
}

static int lock_byte(int fd, int cmd, short type, off_t byte, off_t count)
{
    struct flock lock = {.l_type = type, .l_whence = SEEK_SET, .l_start = byte, .l_len = count};
    if (fcntl(fd, cmd, &lock) != 0)
        return -1;
    return cmd == F_OFD_GETLK ? lock.l_type : 0;
}

static int write_all(int fd, const void *bytes, size_t length)
{
    for (size_t done = 0; done < length;) {
        ssize_t wrote = write(fd, (const uint8_t *)bytes + done, length - done);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0)
            return -1;
        done += (size_t)wrote;
    }
    return 0;
}

/* Creates a fresh temporary file of mode 0600; a leftover of a crashed
 * process under the same name is removed first. */
static int create_temp(const struct ctl_dir_files *files, char *name, size_t size, uint32_t tag,
                       unsigned number)
{
    snprintf(name, size, ".%u.%u.%u.tmp", tag, files->self, number);
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd =
            openat(files->dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 && fchmod(fd, 0600) == 0)
            return fd;
        if (fd >= 0) {
            close(fd);
            unlinkat(files->dir_fd, name, 0);
            return -1;
        }
        if (errno != EEXIST)
            return -1;
        unlinkat(files->dir_fd, name, 0);
    }
    return -1;
}

/* Writes this member's file for tag; keep_fd (the run file): the file
 * stays open with both locks held and its descriptor lands in *keep_fd. */
static int write_file(struct ctl_dir_files *files, uint32_t tag, const void *blob, size_t length,
                      int *keep_fd)
{
    char temp[64], final[32];
    snprintf(final, sizeof final, "%u.%u", tag, files->self);
    unsigned number = atomic_fetch_add(&files->next_temp, 1);
    int fd = create_temp(files, temp, sizeof temp, tag, number);
    if (fd < 0)
        return sp_error(SPINDLE_EIO, "control: cannot create %s/%s: %s", files->dir, temp,
                        strerror(errno));
    bool ok =
        (keep_fd == NULL || (lock_byte(fd, F_OFD_SETLK, F_WRLCK, RUN_LIVE_BYTE, 1) == 0 &&
                             lock_byte(fd, F_OFD_SETLK, F_RDLCK, RUN_PRESENCE_BYTE, 1) == 0)) &&
        write_all(fd, files->nonce, sizeof files->nonce) == 0 && write_all(fd, blob, length) == 0;
    if (!ok || renameat(files->dir_fd, temp, files->dir_fd, final) != 0) {
        int err = errno;
        close(fd);
        unlinkat(files->dir_fd, temp, 0);
        return sp_error(SPINDLE_EIO, "control: cannot write %s/%s: %s", files->dir, final,
                        strerror(err));
    }
    if (keep_fd != NULL)
        *keep_fd = fd;
    else
        close(fd);
    return 0;
}

int ctl_dir_file_write(struct ctl_dir_files *files, uint32_t tag, const void *blob, size_t length)
{
    return write_file(files, tag, blob, length, NULL);
}

static void pause_1ms(void)
{
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
}

/* Opens the run file "4294967295.0" as open_checked does; name receives
 * its name. */
static int open_run_file(const struct ctl_dir_files *files, int access, char name[32], int *fd)
{
    snprintf(name, 32, "%u.0", CTL_DIR_HELLO_TAG);
    struct stat st;
    return open_checked(files, name, access, fd, &st);
}

int ctl_dir_run_start(struct ctl_dir_files *files, const void *hello, size_t length,
                      uint64_t deadline_ns, int timeout_ms)
{
    for (;;) {
        char name[32];
        int fd;
        int rc = open_run_file(files, O_RDONLY, name, &fd);
        if (rc < 0)
            return rc;
        /* Any lock on bytes 0..1: a member of an earlier run still has its
         * channel open (or is removing that run's files). */
        int held = rc == 0 ? F_UNLCK : lock_byte(fd, F_OFD_GETLK, F_WRLCK, RUN_LIVE_BYTE, 2);
        if (rc == 1)
            close(fd);
        if (held == F_UNLCK)
            break;
        if (sp_now_ns() >= deadline_ns)
            return sp_error(SPINDLE_EADDRINUSE,
                            "control: directory %s is in use: a member of a running group "
                            "holds %s/%s (still after %d ms); give each group its own directory",
                            files->dir, files->dir, name, timeout_ms);
        pause_1ms();
    }
    sweep(files, false); /* no run holds the directory: what is left is from crashed runs */
    if (getrandom(files->nonce, sizeof files->nonce, 0) != (ssize_t)sizeof files->nonce)
        return sp_error(SPINDLE_EIO, "control: getrandom failed: %s", strerror(errno));
    return write_file(files, CTL_DIR_HELLO_TAG, hello, length, &files->run_fd);
}

int ctl_dir_run_join(struct ctl_dir_files *files, uint64_t deadline_ns, int timeout_ms)
{
    for (;;) {
        char name[32];
        int fd;
        int rc = open_run_file(files, O_RDWR, name, &fd);
        if (rc < 0)
            return rc;
        /* Live: member 0 holds byte 0. A run file without the lock is left
         * by a crashed run and waits to be replaced. */
        if (rc == 1 && lock_byte(fd, F_OFD_GETLK, F_RDLCK, RUN_LIVE_BYTE, 1) == F_WRLCK &&
            lock_byte(fd, F_OFD_SETLK, F_RDLCK, RUN_PRESENCE_BYTE, 1) == 0 &&
            pread(fd, files->nonce, sizeof files->nonce, 0) == (ssize_t)sizeof files->nonce) {
            files->run_fd = fd;
            return 0;
        }
        if (rc == 1)
            close(fd);
        if (sp_now_ns() >= deadline_ns)
            return sp_error(SPINDLE_ETIMEDOUT,
                            "control: member 0 did not start a run in %s within %d ms", files->dir,
                            timeout_ms);
        pause_1ms();
    }
}

int ctl_dir_file_read(const struct ctl_dir_files *files, uint32_t tag, uint32_t member, void *out,
                      size_t length)
{
    char name[32];
    snprintf(name, sizeof name, "%u.%u", tag, member);
    int fd;
    struct stat st;
    int rc = open_checked(files, name, O_RDONLY, &fd, &st);
    if (rc <= 0)
        return rc;
    if (!of_this_run(files, fd, &st)) {
        close(fd);
        return 0;
    }
    bool whole = st.st_size == (off_t)(CTL_DIR_NONCE_SIZE + length) &&
                 pread(fd, out, length, CTL_DIR_NONCE_SIZE) == (ssize_t)length;
    close(fd);
    if (!whole)
        return sp_error(SPINDLE_EPROTO, "control: %s/%s holds %lld bytes, not a %zu-byte blob",
                        files->dir, name, (long long)st.st_size - CTL_DIR_NONCE_SIZE, length);
    return 1;
}

void ctl_dir_files_close(struct ctl_dir_files *files)
{
    if (files->run_fd >= 0) {
        /* Leave, then see whether anyone is still there: of members that
         * close at once, the last to leave finds no lock and removes the
         * files (or one that already holds the write lock does). */
        lock_byte(files->run_fd, F_OFD_SETLK, F_UNLCK, RUN_LIVE_BYTE, 2);
        if (lock_byte(files->run_fd, F_OFD_SETLK, F_WRLCK, RUN_PRESENCE_BYTE, 1) == 0)
            sweep(files, true);
        close(files->run_fd);
        files->run_fd = -1;
    }
    if (files->dir_fd >= 0)
        close(files->dir_fd);
    files->dir_fd = -1;
    free(files->dir);
    files->dir = NULL;
}
