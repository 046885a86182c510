/*
 * spindle-keygen FILE: writes a new group key, 32 random bytes, to FILE,
 * readable and writable by its owner only (mode 0600). It never replaces a
 * file that exists (O_EXCL), so a key in use is not lost by a slip, and it
 * does not follow a symlink planted at FILE. Copy the file to every
 * member's host by a channel you trust (docs/SECURITY.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_BYTES 32

static const char usage[] = "usage: spindle-keygen FILE\n"
                            "Writes a new 32-byte group key to FILE (mode 0600); refuses to\n"
                            "overwrite an existing file. Give every member the same file\n"
                            "(spindle_group_options.key_file, [group] key_file,\n"
                            "spindle-bench --key-file).\n";

static int write_key(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            fprintf(stderr,
                    "spindle-keygen: %s exists; refusing to overwrite it (a key in use would "
                    "be lost): remove it first or choose another name\n",
                    path);
        else
            fprintf(stderr, "spindle-keygen: cannot create %s: %s\n", path, strerror(errno));
        return 1;
    }
    unsigned char key[KEY_BYTES];
    randombytes_buf(key, sizeof key);
    /* fchmod: the mode is 0600 whatever the umask left of it. */
    int ok = fchmod(fd, 0600) == 0 && write(fd, key, sizeof key) == (ssize_t)sizeof key &&
             fsync(fd) == 0;
    int err = errno;
    sodium_memzero(key, sizeof key);
    if (close(fd) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        fprintf(stderr, "spindle-keygen: writing %s failed: %s\n", path, strerror(err));
        unlink(path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '\0') {
        fputs(usage, stderr);
        return 2;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "spindle-keygen: libsodium failed to initialise\n");
        return 1;
    }
    return write_key(argv[1]);
}
