/*
 * Group key files (control/ctl.h): 32 random bytes that only their owner
 * may read or write. The checks run on the opened descriptor (fstat), so
 * the file judged is the file read; O_NOFOLLOW refuses a symlink.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/ctl.h"
#include "util/error.h"

static int ctl_key_check(const char *path, const struct stat *st)
{
    if (!S_ISREG(st->st_mode))
        return sp_error(SPINDLE_EINVAL, "key file %s is not a regular file", path);
    if ((st->st_mode & (S_IRWXG | S_IRWXO)) != 0)
        return sp_error(SPINDLE_EINVAL,
                        "key file %s has mode %04o: group or others may use it (chmod 600 it)",
                        path, (unsigned)(st->st_mode & 07777));
    if (st->st_size != CTL_KEY_BYTES)
        return sp_error(SPINDLE_EINVAL,
                        "key file %s holds %lld bytes, a key is %u (make one with spindle-keygen)",
                        path, (long long)st->st_size, CTL_KEY_BYTES);
    return 0;
}

int ctl_key_load(const char *path, struct ctl_keyring *keys)
{
    if (path == NULL || path[0] == '\0' || keys == NULL)
        return sp_error(SPINDLE_EINVAL, "key file: no path given");
    if (keys->count >= CTL_KEYS_MAX)
        return sp_error(SPINDLE_EINVAL, "key file %s: already %u keys", path, CTL_KEYS_MAX);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int err = errno;
        if (err == ELOOP)
            return sp_error(SPINDLE_EINVAL, "key file %s is a symbolic link; name the file itself",
                            path);
        return sp_error(err == ENOENT ? SPINDLE_ENOENT : SPINDLE_EIO, "key file %s: %s", path,
                        strerror(err));
    }
    struct stat st;
    int rc = fstat(fd, &st) != 0 ? sp_error(SPINDLE_EIO, "key file %s: %s", path, strerror(errno))
                                 : ctl_key_check(path, &st);
    uint8_t *key = keys->key[keys->count];
    ssize_t n = rc == 0 ? read(fd, key, CTL_KEY_BYTES) : 0;
    if (rc == 0 && n != (ssize_t)CTL_KEY_BYTES)
        rc = sp_error(SPINDLE_EIO, "key file %s: read %zd of %u bytes", path, n, CTL_KEY_BYTES);
    close(fd);
    if (rc != 0) {
        sodium_memzero(key, CTL_KEY_BYTES);
        return rc;
    }
    keys->count++;
    return 0;
}

void ctl_keyring_clear(struct ctl_keyring *keys)
{
    if (keys != NULL)
        sodium_memzero(keys, sizeof *keys);
}
