/*
 * A directory that belongs to this process's user alone, and the files in
 * it: what the control directory exchange (src/control) and the logs
 * (src/log) keep their files in.
 *
 * The directory is opened once, never through a symbolic link, and must be
 * owned by the caller and writable by nobody else; every file is then
 * reached relative to it, opened without following links or blocking on a
 * planted FIFO, and checked after opening (a regular file of the caller's).
 * So another user can neither read nor replace what is written there.
 *
 * Thread-safety: none needed; the functions keep no state.
 */
#ifndef SP_UTIL_PRIVATE_DIR_H
#define SP_UTIL_PRIVATE_DIR_H

#include <stdbool.h>
#include <sys/stat.h>

/*
 * Opens dir (creating it, mode 0700, when create and missing) into *fd.
 * what names it in messages ("control: bootstrap directory"); hint ends
 * the refusal of a directory others may write. SPINDLE_EPERM naming the
 * directory, its owner and mode when it is a symbolic link, not a
 * directory, owned by another user or writable by group or others;
 * SPINDLE_ENOENT when it is missing and !create; SPINDLE_EIO when it
 * cannot be created or opened.
 */
int sp_private_dir_open(const char *dir, bool create, const char *what, const char *hint, int *fd);

/*
 * Opens name in the directory dir_fd (dir, for messages) with flags
 * (O_RDONLY or O_RDWR, plus O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC added
 * here): 1 with *fd and *st, 0 when absent, SPINDLE_EPERM naming a
 * symbolic link, a file that is not regular or owned by another user,
 * SPINDLE_EIO when it cannot be opened. layer prefixes messages ("log").
 */
int sp_private_file_open(int dir_fd, const char *dir, const char *name, int flags,
                         const char *layer, int *fd, struct stat *st);

#endif
