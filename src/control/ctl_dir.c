/*
 * Bootstrap exchange through a shared directory, for processes on one host.
 * The files, their checks and the run they belong to are
 * ctl_dir_files.c's; this file is the exchange: every member checks each
 * other member's hello before reading anything else it wrote, and readers
 * poll the directory with short sleeps until every member's file is there:
 * this is a one-time start-up step, not a data path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/ctl_dir_files.h"
#include "control/ctl_impl.h"
#include "control/ctl_wire.h"
#include "util/clock.h"
#include "util/error.h"

struct ctl_dir {
    struct ctl base;
    struct ctl_dir_files files;
    uint32_t self_index;
    uint32_t num_members;
    struct ctl_versions versions;
    uint64_t checked; /* members whose hello file was read and found compatible */
};

/* 1 when member's hello file is there and speaks this build, 0 when not
 * there yet, SPINDLE_EPROTO naming both versions otherwise. */
static int check_hello(struct ctl_dir *ctl, uint32_t member)
{
    if ((ctl->checked >> member) & 1)
        return 1;
    uint8_t bytes[CTL_HELLO_SIZE];
    int rc = ctl_dir_file_read(&ctl->files, CTL_DIR_HELLO_TAG, member, bytes, sizeof bytes);
    if (rc <= 0)
        return rc;
    struct ctl_hello hello;
    char who[64];
    snprintf(who, sizeof who, "control: member %u", member);
    rc = ctl_wire_decode_hello(bytes, sizeof bytes, &hello);
    if (rc < 0)
        return sp_error(rc, "%s wrote a bad hello in %s: %s", who, ctl->files.dir,
                        spindle_errmsg());
    if (hello.from != member || hello.num_members != ctl->num_members)
        return sp_error(SPINDLE_EPROTO, "%s's hello in %s names member %u of %u, not %u of %u", who,
                        ctl->files.dir, hello.from, hello.num_members, member, ctl->num_members);
    rc = ctl_hello_compatible(&hello, &ctl->versions, who);
    if (rc < 0)
        return rc;
    ctl->checked |= 1ull << member;
    return 1;
}

/* 1 when member's blob was read, 0 when not there yet, negative on error. */
static int read_blob(struct ctl_dir *ctl, uint32_t tag, uint32_t member, void *out, size_t length)
{
    int rc = check_hello(ctl, member);
    return rc <= 0 ? rc : ctl_dir_file_read(&ctl->files, tag, member, out, length);
}

static int dir_allgather(struct ctl *base, uint32_t tag, const void *mine, size_t length, void *all,
                         int timeout_ms)
{
    struct ctl_dir *ctl = (struct ctl_dir *)base;
    int rc = ctl_dir_file_write(&ctl->files, tag, mine, length);
    if (rc != 0)
        return rc;
    uint8_t *have = calloc(ctl->num_members, 1);
    if (have == NULL)
        return sp_error(SPINDLE_ENOMEM, "control: out of memory");
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
    uint32_t missing = ctl->num_members;
    for (;;) {
        for (uint32_t i = 0; i < ctl->num_members; i++) {
            if (have[i])
                continue;
            rc = read_blob(ctl, tag, i, (uint8_t *)all + (size_t)i * length, length);
            if (rc < 0) {
                free(have);
                return rc;
            }
            if (rc == 1) {
                have[i] = 1;
                missing--;
            }
        }
        if (missing == 0 || sp_now_ns() >= deadline)
            break;
        struct timespec pause = {0, 1000000}; /* 1 ms between directory scans */
        nanosleep(&pause, NULL);
    }
    if (missing != 0) {
        char names[256] = "";
        for (uint32_t i = 0; i < ctl->num_members; i++) {
            if (!have[i] && strlen(names) < sizeof names - 16)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%u",
                         names[0] ? ", " : "", i);
        }
        free(have);
        return sp_error(SPINDLE_ETIMEDOUT,
                        "control: members %s did not publish tag %u in %s within %d ms", names, tag,
                        ctl->files.dir, timeout_ms);
    }
    free(have);
    return 0;
}

static int dir_publish(struct ctl *base, uint32_t tag, const void *blob, size_t length, uint64_t to)
{
    (void)to; /* every member reads the same directory */
    return ctl_dir_file_write(&((struct ctl_dir *)base)->files, tag, blob, length);
}

static int dir_collect(struct ctl *base, uint32_t tag, uint64_t from, void *all, size_t length,
                       int timeout_ms, uint64_t *have)
{
    struct ctl_dir *ctl = (struct ctl_dir *)base;
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    uint64_t want = from & ~(1ull << ctl->self_index), got = 0;
    if (ctl->num_members < 64)
        want &= (1ull << ctl->num_members) - 1;
    int rc = 0;
    for (;;) {
        for (uint32_t i = 0; i < ctl->num_members && rc == 0; i++) {
            if (((want & ~got) >> i) & 1) {
                int r = read_blob(ctl, tag, i, (uint8_t *)all + (size_t)i * length, length);
                if (r < 0)
                    rc = r;
                else if (r == 1)
                    got |= 1ull << i;
            }
        }
        if (rc != 0 || got == want)
            break;
        if (sp_now_ns() >= deadline) {
            char names[256] = "";
            for (uint32_t i = 0; i < ctl->num_members; i++)
                if (((want & ~got) >> i) & 1) {
                    size_t used = strlen(names);
                    snprintf(names + used, sizeof names - used, "%s%u", used ? ", " : "", i);
                }
            rc = sp_error(SPINDLE_ETIMEDOUT, "control: members %s did not publish tag %u in %s",
                          names, tag, ctl->files.dir);
            break;
        }
        struct timespec pause = {0, 1000000}; /* 1 ms between directory scans */
        nanosleep(&pause, NULL);
    }
    if (have != NULL)
        *have = got;
    return rc;
}

static void dir_close(struct ctl *base)
{
    struct ctl_dir *ctl = (struct ctl_dir *)base;
    ctl_dir_files_close(&ctl->files);
    free(ctl);
}

static const struct ctl_vtable dir_vtable = {
    .allgather = dir_allgather,
    .publish = dir_publish,
    .collect = dir_collect,
    .close = dir_close,
};

int ctl_open_dir(const char *dir, uint32_t self_index, uint32_t num_members,
                 const struct ctl_versions *versions, int timeout_ms, struct ctl **out)
{
    if (dir == NULL || versions == NULL || num_members == 0 || self_index >= num_members ||
        num_members > CTL_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "control: member index %u is not below member count %u",
                        self_index, num_members);
    struct ctl_dir *ctl = calloc(1, sizeof *ctl);
    if (ctl == NULL)
        return sp_error(SPINDLE_ENOMEM, "control: out of memory");
    ctl->base.vt = &dir_vtable;
    ctl->self_index = self_index;
    ctl->num_members = num_members;
    ctl->versions = *versions;
    ctl->checked = 1ull << self_index;
    struct ctl_hello hello = {self_index, num_members, 0, *versions, 0};
    uint8_t bytes[CTL_HELLO_SIZE];
    ctl_wire_encode_hello(&hello, bytes);
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    int rc = ctl_dir_files_open(&ctl->files, dir, self_index);
    if (rc == 0 && self_index == 0)
        rc = ctl_dir_run_start(&ctl->files, bytes, sizeof bytes, deadline, timeout_ms);
    else if (rc == 0)
        rc = ctl_dir_run_join(&ctl->files, deadline, timeout_ms);
    if (rc == 0 && self_index != 0)
        rc = ctl_dir_file_write(&ctl->files, CTL_DIR_HELLO_TAG, bytes, sizeof bytes);
    if (rc < 0) {
        dir_close(&ctl->base);
        return rc;
    }
    *out = &ctl->base;
    return 0;
}
