/*
 * Private to src/control: the files of the directory exchange (ctl_dir.c)
 * and the run they belong to.
 *
 * The directory must be owned by the caller and writable by nobody else;
 * it is opened once (never through a symbolic link) and every file is
 * reached relative to it, opened without following links and checked
 * after opening (a regular file of the caller's). Member m's blob for tag
 * t is "<t>.<m>", written to an exclusively created temporary file of mode
 * 0600 and renamed, so a reader never sees a partial file.
 *
 * A run is one formation of a group in the directory. Member 0 starts it:
 * it draws a random nonce and writes it, with its hello, into its hello
 * file "4294967295.0" (the run file), on which it holds an OFD write lock
 * on byte 0 for as long as its channel is open. Every other member waits
 * for a run file whose byte 0 is locked (a run file left by a crashed run
 * holds no lock and is ignored) and takes the nonce from it. Every file
 * begins with the nonce of its run, and a file of another nonce is
 * ignored, so blobs of an earlier run are never read as current. Every
 * member of the run holds a read lock on byte 1 of the run file while its
 * channel is open; the member that closes last (who can take a write lock
 * on byte 1) removes the run's files.
 *
 * Threads: the read and write calls may run on several threads at once
 * (the temporary names come from an atomic counter); open and close on
 * one.
 */
#ifndef SP_CONTROL_CTL_DIR_FILES_H
#define SP_CONTROL_CTL_DIR_FILES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_DIR_NONCE_SIZE 16
/* Tag of the hello file each member writes at open (above every tag the
 * layers use); member 0's is the run file. */
#define CTL_DIR_HELLO_TAG 0xffffffffu

struct ctl_dir_files {
    char *dir; /* the path, for messages */
    int dir_fd;
    int run_fd; /* the run file, holding this member's locks; -1 before */
    uint32_t self;
    uint8_t nonce[CTL_DIR_NONCE_SIZE];
    atomic_uint next_temp; /* numbers temporary file names */
};

/*
 * Creates dir (mode 0700) when missing and opens it for member self.
 * SPINDLE_EPERM naming the directory, its owner and mode when it is a
 * symbolic link, not a directory, owned by another user or writable by
 * group or others; SPINDLE_EIO when it cannot be created or opened;
 * SPINDLE_ENOMEM.
 */
int ctl_dir_files_open(struct ctl_dir_files *files, const char *dir, uint32_t self);

/*
 * Member 0: starts a run with hello (its hello file's content after the
 * nonce), first removing what crashed runs left. SPINDLE_EADDRINUSE when a
 * member of an earlier run still holds the directory at deadline_ns
 * (sp_now_ns clock; timeout_ms names it), SPINDLE_EPERM for a planted run
 * file, SPINDLE_EIO when the run file cannot be written.
 */
int ctl_dir_run_start(struct ctl_dir_files *files, const void *hello, size_t length,
                      uint64_t deadline_ns, int timeout_ms);

/*
 * Other members: waits until deadline_ns (sp_now_ns clock) for member 0's
 * run and takes its nonce. SPINDLE_ETIMEDOUT naming the directory,
 * SPINDLE_EPERM for a planted run file.
 */
int ctl_dir_run_join(struct ctl_dir_files *files, uint64_t deadline_ns, int timeout_ms);

/* Publishes blob as this member's file for tag. SPINDLE_EIO naming the file
 * when it cannot be written. */
int ctl_dir_file_write(struct ctl_dir_files *files, uint32_t tag, const void *blob, size_t length);

/*
 * Reads member's file for tag into out: 1 when it is there and of this
 * run, 0 when absent or of another run, SPINDLE_EPERM naming a symbolic
 * link, a file that is not regular or not the caller's, SPINDLE_EPROTO
 * when a file of this run does not hold length bytes.
 */
int ctl_dir_file_read(const struct ctl_dir_files *files, uint32_t tag, uint32_t member, void *out,
                      size_t length);

/* Leaves the run (removing its files when this member is the last to
 * leave) and closes the directory. Safe on a never-opened (zeroed) one. */
void ctl_dir_files_close(struct ctl_dir_files *files);

#endif
