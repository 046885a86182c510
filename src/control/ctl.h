/*
 * The control channel: how members reach each other before, beside and
 * after the one-sided data path. It carries the bootstrap exchange (table
 * descriptors), every step of a view change, barriers and joins. Two
 * variants sit behind one interface: a shared directory for processes on
 * one host, and TCP (host:port per member) between hosts.
 *
 * Messages are opaque blobs to this layer; the layers above encode them
 * with the one wire codec (util/wire.h). The channel's own framing (the
 * hello that opens a TCP connection, the frame header of every blob) uses
 * the same codec (ctl_wire.h). The hello carries the wire version and the
 * table and ring layout versions of the build, so members of incompatible
 * builds refuse each other naming both versions.
 *
 * Members are named by member id (a slot: the initial members 0..n-1, then
 * joiners, which may take the id of a member that is gone); masks have bit
 * i for member i.
 *
 * Threads: ctl_allgather is used by one thread at a time (set-up);
 * ctl_publish, ctl_collect and ctl_collect_one may run on several threads
 * at once; the join calls run on the membership thread.
 */
#ifndef SP_CONTROL_CTL_H
#define SP_CONTROL_CTL_H

#include <stddef.h>
#include <stdint.h>

/* Longest host name or address of a member, NUL included. */
#define CTL_HOST_MAX 256
/* Most members (slots) one channel knows: ids 0..63. */
#define CTL_MAX_MEMBERS 64
/* Largest blob one publish may carry. */
#define CTL_BLOB_MAX (64u << 20)

struct ctl;

/* A group key's size (docs/SECURITY.md). */
#define CTL_KEY_BYTES 32u
/* Keys one member accepts at once: room for a rotation (the old and the
 * new key; a dialer proves with the first). */
#define CTL_KEYS_MAX 2u

/* The keys a TCP channel authenticates with; count 0 (or a NULL ring):
 * no key, the unkeyed wire. */
struct ctl_keyring {
    uint32_t count;
    uint8_t key[CTL_KEYS_MAX][CTL_KEY_BYTES];
};

/*
 * Reads a group key file into keys->key[keys->count++]. The file must be a
 * regular file (not a symlink), readable and writable by its owner only
 * (no group or other bits), of exactly CTL_KEY_BYTES bytes. SPINDLE_ENOENT
 * when it cannot be opened, SPINDLE_EINVAL naming the file and what is
 * wrong (its mode, its type, its size, a full ring), SPINDLE_EIO.
 */
int ctl_key_load(const char *path, struct ctl_keyring *keys);
/* Wipes the keys (safe on NULL). */
void ctl_keyring_clear(struct ctl_keyring *keys);
/* Initialises libsodium, which does all of the channel's cryptography
 * (idempotent, thread-safe; keyed channels call it too). 0, or
 * SPINDLE_EIO. */
int ctl_crypto_init(void);

/* Where a member's control channel listens. */
struct ctl_address {
    char host[CTL_HOST_MAX];
    uint16_t port;
};

/* One member of a TCP channel; host NULL: absent (gone, or not joined).
 * Process-local (it holds a pointer, never sent); fields ordered for no
 * padding, so initialise by name. */
struct ctl_member {
    const char *host;
    uint32_t id;
    uint16_t port;
};

/* What a hello compares besides the wire version: the layout versions of
 * the build's shared state table and ring buffers. The channel only checks
 * them for equality; their meaning belongs to the layers that set them. */
struct ctl_versions {
    uint32_t table_layout;
    uint32_t ring_layout;
};

/*
 * Parses "host:port" into out. SPINDLE_EINVAL naming `what` and the text
 * when it is empty, has no port, a port outside 1..65535 or a host of
 * CTL_HOST_MAX bytes or more. len: bytes of text to read.
 */
int ctl_address_parse(const char *text, size_t len, const char *what, struct ctl_address *out);

/*
 * Local exchange through files in dir (created with mode 0700 if missing;
 * it must be owned by the caller and writable by nobody else). Member 0
 * starts the run; the others wait for it up to timeout_ms
 * (control/ctl_dir_files.h tells how blobs of an earlier run are told
 * apart). SPINDLE_EINVAL for self >= num_members, SPINDLE_EPERM naming the
 * directory or a planted file and what is wrong with it, SPINDLE_ETIMEDOUT
 * when member 0 did not start the run, SPINDLE_EADDRINUSE when another
 * run still holds the directory, SPINDLE_EIO when dir cannot be created,
 * SPINDLE_ENOMEM.
 */
int ctl_open_dir(const char *dir, uint32_t self, uint32_t num_members,
                 const struct ctl_versions *versions, int timeout_ms, struct ctl **out);
/*
 * TCP exchange: listens on members[self] and connects to the others (each
 * pair shares one connection). A connection from another group, another
 * wire version or other layout versions is refused, naming both values.
 * With keys (non-empty), every connection is authenticated with them
 * before anything else is said and sealed after (control/ctl_auth.h); a
 * peer that fails is closed without a word, logged locally, and a member
 * that this one dials and that proves another key is SPINDLE_EAUTH.
 * Without, a member listening on an address other than loopback logs a
 * warning.
 * SPINDLE_EINVAL for a bad member list, SPINDLE_EADDRINUSE naming the port
 * that cannot be bound, SPINDLE_EUNREACH naming a member that cannot be
 * reached or refused this build, SPINDLE_ETIMEDOUT naming members that
 * never connected, SPINDLE_ENOMEM.
 */
int ctl_open_tcp(const char *group_name, const struct ctl_member *members, uint32_t num_members,
                 uint32_t self, const struct ctl_versions *versions, const struct ctl_keyring *keys,
                 int timeout_ms, struct ctl **out);
/*
 * A joiner given slot self by the admission `admission` (non-zero; later
 * admissions are larger) opens its TCP exchange: members[] has
 * CTL_MAX_MEMBERS entries, the current members (NULL host: absent) and its
 * own address; it connects to each, and from then on publish/collect reach
 * it like any member. A member takes the connection in place of an earlier
 * holder of the id with a smaller admission. Errors as ctl_open_tcp.
 */
int ctl_open_tcp_joiner(const char *group_name, const struct ctl_member *members,
                        uint32_t num_initial, uint32_t self, uint64_t admission,
                        const struct ctl_versions *versions, const struct ctl_keyring *keys,
                        int timeout_ms, struct ctl **out);
/* Flushes what is queued (for at most a second) and frees the channel.
 * Safe on NULL. */
void ctl_close(struct ctl *ctl);

/*
 * Collective: every member calls it with the same tag and blob length; all
 * receives num_members * length bytes, member i's blob at i * length.
 * SPINDLE_ETIMEDOUT naming the members still missing, SPINDLE_EUNREACH
 * naming one whose connection is gone, SPINDLE_EPROTO naming one that sent
 * a blob of another length, SPINDLE_EINVAL for a null argument.
 */
int ctl_allgather(struct ctl *ctl, uint32_t tag, const void *mine, size_t length, void *all,
                  int timeout_ms);

/*
 * Exchange among a subset (view changes, barriers of a later view).
 * publish makes blob this member's latest for tag at every member in `to`
 * (self and unreachable members are skipped); a later publish of the same
 * tag replaces it. SPINDLE_EINVAL for a blob above CTL_BLOB_MAX,
 * SPINDLE_ENOMEM, SPINDLE_EIO (directory) when it cannot be written.
 */
int ctl_publish(struct ctl *ctl, uint32_t tag, const void *blob, size_t length, uint64_t to);
/*
 * Waits up to timeout_ms (0: just look) for the latest blob of tag from
 * every member in `from` other than self, copying member i's to
 * all + i * length and setting bit i of *have (may be NULL) for each one
 * present. 0 when all are there, SPINDLE_ETIMEDOUT naming the missing
 * ones, SPINDLE_EPROTO when one sent a blob of another length or broke the
 * framing, SPINDLE_EUNREACH when one's connection is gone.
 */
int ctl_collect(struct ctl *ctl, uint32_t tag, uint64_t from, void *all, size_t length,
                int timeout_ms, uint64_t *have);
/* collect from the one member `from` into out (TCP only: SPINDLE_ENOTSUP
 * otherwise); errors as ctl_collect, SPINDLE_EINVAL for from >= 64. */
int ctl_collect_one(struct ctl *ctl, uint32_t tag, uint32_t from, void *out, size_t length,
                    int timeout_ms);
/*
 * Takes member `from`'s latest blob of tag: waits up to timeout_ms for one,
 * copies it into out (at most capacity bytes) with its size in *length,
 * and removes it, so that the next take of tag waits for a newer one: a
 * stream of blobs under one tag, the sender publishing the next only once
 * told the previous one was taken (a joiner's state, in chunks). TCP only
 * (SPINDLE_ENOTSUP otherwise); errors as ctl_collect_one, SPINDLE_EPROTO
 * when the blob is larger than capacity (it is dropped).
 */
int ctl_take_one(struct ctl *ctl, uint32_t tag, uint32_t from, void *out, size_t capacity,
                 size_t *length, int timeout_ms);
/*
 * Key rotation without a restart: from now on the channel proves keys'
 * first key on connections it makes and accepts connections proving any
 * of them; connections already open keep their sessions. Any thread.
 * 0; SPINDLE_EINVAL when the channel was opened without a key (its
 * listener and peers speak the unkeyed wire) or keys is empty or holds
 * more than CTL_KEYS_MAX; SPINDLE_ENOTSUP for a directory channel. On
 * error the keys in use are unchanged.
 */
int ctl_set_keys(struct ctl *ctl, const struct ctl_keyring *keys);

/*
 * Joins (TCP only). A member keeps its listening socket open after
 * set-up. A process that wants to join sends one request to any member
 * (ctl_join_ask: connect, hello, one request frame, then one answer frame,
 * malloc'ed into *reply; SPINDLE_EINVAL for a request above
 * CTL_JOIN_REQUEST_MAX, SPINDLE_EUNREACH naming the contact when it cannot
 * be reached, refuses this build or does not answer). The member sees the
 * request with ctl_join_poll (1 and the request copied out while one is
 * pending, 0 when none; at most one is pending at a time, others are
 * refused) and answers it once with ctl_join_answer, which closes that
 * connection (SPINDLE_EINVAL when none is pending, SPINDLE_EUNREACH when
 * the joiner went away). ctl_add_member records a joiner's address.
 * ctl_remove_member forgets a member that left the group (a view without
 * it was installed): its connection is closed and what it sent is dropped;
 * collecting from it fails as from a member that is gone, until a later
 * holder of its id connects (a joiner with a larger admission).
 * ctl_expect_member prepares slot id for the joiner of `admission` (the
 * leader, right after offering it the id): an earlier holder's connection
 * and blobs are dropped, collecting from id waits for the joiner, and only
 * a hello of this admission or a larger one takes the slot.
 */
#define CTL_JOIN_REQUEST_MAX 8192u
int ctl_join_ask(const char *group_name, const struct ctl_versions *versions,
                 const struct ctl_keyring *keys, const char *host, uint16_t port,
                 const void *request, size_t length, void **reply, size_t *reply_length,
                 int timeout_ms);
int ctl_join_poll(struct ctl *ctl, int timeout_ms, void *request, size_t capacity, size_t *length);
int ctl_join_answer(struct ctl *ctl, const void *reply, size_t length);
void ctl_add_member(struct ctl *ctl, uint32_t id, const char *host, uint16_t port);
void ctl_remove_member(struct ctl *ctl, uint32_t id);
void ctl_expect_member(struct ctl *ctl, uint32_t id, uint64_t admission);

#endif
