/*
 * check_traces internals (the tool's contract is the comment at the top of
 * check_traces.c): the processes found in the trace directory, one per
 * (member id, incarnation), and the checker's global state. Single-threaded;
 * the first violation exits through fail_at().
 *
 * check_traces_files.c finds, names and reads the files and decides what
 * each process was (survivor, left, killed, joiner); check_traces.c checks
 * them against each other.
 */
#ifndef CHECK_TRACES_H
#define CHECK_TRACES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_MEMBERS   1024
#define MAX_SUBGROUPS 1024
#define MAX_PROCESSES 65536

struct record {
    uint64_t view;
    uint64_t index;
    uint32_t subgroup;
    uint32_t sender;
    uint32_t length;
    uint32_t crc;
    uint32_t line;
};

/* One process: an initial member (files member-<id>.trace/.end), or a
 * joiner, whose files carry its incarnation (member-<id>.<view>.*). */
struct member {
    uint32_t id;
    bool named;           /* the file names carry an incarnation */
    uint64_t incarnation; /* from the name (named), else 0 */
    char trace_path[PATH_MAX];
    char end_path[PATH_MAX];
    bool has_trace, has_end;
    bool killed;   /* --killed, or the incarnation the harness named there */
    bool survivor; /* .end, not "left", not killed */
    bool left;     /* .end says "left", not killed */
    struct record *records;
    size_t count, capacity;
    uint64_t first_view, last_view; /* views the member was in */
    uint64_t final_view;            /* from the .end file */
    bool joiner;                    /* a process that joined the running group */
    uint64_t joined_view;
    bool end_says_joined; /* the .end file has "joined <view>" */
    uint64_t end_joined;
    uint32_t *final_members; /* ids of the .end file's view */
    uint32_t num_final;
    uint64_t *next_index; /* [subgroup * members + sender]: next expected app_index */
};

/* What one (subgroup, sender, app_index) looked like where first seen. */
struct seen {
    uint32_t length, crc;
    uint32_t member, line; /* member: index in g.member; line 0: not seen yet */
};

/* One --killed entry: ID (the id's last incarnation) or ID.VIEW. */
struct killed_entry {
    uint32_t id;
    bool named;
    uint64_t incarnation;
};

struct checker {
    const char *dir;
    uint64_t messages;
    uint32_t members, subgroups; /* members: ids 0..members-1 */
    long long msg_size;          /* -1: not checked */
    struct killed_entry *killed;
    size_t num_killed;
    uint32_t initial; /* members from this id on joined later (unnamed files) */
    struct member *member;
    size_t count;      /* processes in member[], sorted by id, then by the view each joined in */
    uint32_t senders;  /* sender ids below this appear in some trace */
    struct seen *seen; /* [(subgroup * senders + sender) * messages + index] */
    uint64_t checked;
    bool unordered; /* --mode unordered: the guarantee of SPINDLE_MODE_UNORDERED */
};

/* Global so that everything stays reachable when a failure exits. */
extern struct checker g;

/* Reports the first violation as "FAIL: file:line: what" and exits 1. */
_Noreturn void fail_at(const char *path, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

bool parse_u64_token(const char *text, int base, uint64_t *out);

/* Finds every member-* file in g.dir, applies --killed, reads the traces
 * and .end files and classifies each process (check_traces_files.c). */
void load_processes(void);

/* The position of m's first record of view or a later one (records are in
 * view order once check_file passed them). */
size_t view_start(const struct member *m, uint64_t view);

/* --mode unordered: sets a joiner's next_index to where it starts, per
 * subgroup and sender: where the member that handed it the state was
 * (check_traces_unordered.c). Fails when no process was there. */
void unordered_joiner_start(struct member *joiner);

/* "member-3" or "member-3.7" (incarnation 7): how messages name a process. */
const char *process_name(const struct member *m);

/* The first view the process was in as far as anyone can tell: its
 * incarnation (0 for an initial member). */
uint64_t process_start(const struct member *m);

#endif
