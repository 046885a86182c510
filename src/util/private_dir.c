/* A directory of the caller's alone, and its files (util/private_dir.h). */
#include "util/private_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

int sp_private_dir_open(const char *dir, bool create, const char *what, const char *hint, int *fd)
{
    *fd = -1;
    if (create && mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sp_error(SPINDLE_EIO, "%s %s cannot be created: %s", what, dir, strerror(errno));
    int opened = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (opened < 0 && (errno == ELOOP || errno == ENOTDIR))
        return sp_error(SPINDLE_EPERM, "%s %s is %s: refusing it", what, dir,
                        lstat(dir, &st) == 0 && S_ISLNK(st.st_mode) ? "a symbolic link"
                                                                    : "not a directory");
    if (opened < 0 && errno == ENOENT)
        return sp_error(SPINDLE_ENOENT, "%s %s does not exist", what, dir);
    if (opened < 0)
        return sp_error(SPINDLE_EIO, "%s %s cannot be opened: %s", what, dir, strerror(errno));
    const char *wrong = NULL;
    if (fstat(opened, &st) != 0)
        wrong = "not readable by fstat";
    else if (st.st_uid != geteuid())
        wrong = "owned by another user";
    else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        wrong = "writable by group or others";
    if (wrong != NULL) {
        close(opened);
        return sp_error(SPINDLE_EPERM,
                        "%s %s (owner uid %u, mode %04o) is %s; this process runs as uid %u: %s",
                        what, dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), wrong,
                        (unsigned)geteuid(), hint);
    }
    *fd = opened;
    return 0;
}

int sp_private_file_open(int dir_fd, const char *dir, const char *name, int flags,
                         const char *layer, int *fd, struct stat *st)
{
    *fd = openat(dir_fd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0 && errno == ENOENT)
        return 0;
    if (*fd < 0 && errno == ELOOP)
        return sp_error(SPINDLE_EPERM, "%s: %s/%s is a symbolic link: refusing to follow it", layer,
                        dir, name);
    if (*fd < 0)
        return sp_error(SPINDLE_EIO, "%s: cannot open %s/%s: %s", layer, dir, name,
                        strerror(errno));
    const char *wrong = NULL;
    if (fstat(*fd, st) != 0)
        wrong = "cannot be examined";
    else if (!S_ISREG(st->st_mode))
        wrong = "is not a regular file";
    else if (st->st_uid != geteuid())
        wrong = "is owned by another user";
    if (wrong == NULL)
        return 1;
    close(*fd);
    *fd = -1;
    return sp_error(SPINDLE_EPERM, "%s: %s/%s (owner uid %u, mode %04o) %s: refusing it", layer,
                    dir, name, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777), wrong);
}
