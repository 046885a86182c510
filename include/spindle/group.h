/*
 * libspindle groups: atomic multicast of small messages.
 *
 * A group is a fixed list of member processes (member index 0..n-1) and one
 * or more subgroups. Each subgroup names its members and, among them, its
 * senders (both as indices into the group member list), a ring window and a
 * maximum payload. Every member of a subgroup delivers every message sent in
 * it. In SPINDLE_MODE_ATOMIC all members deliver the same messages in the
 * same total order (round-robin over the senders: round r delivers message r
 * of sender 0, then of sender 1, ...), and a message is delivered only once
 * every member has received it. In SPINDLE_MODE_UNORDERED a message is
 * delivered as soon as it arrives (per-sender FIFO, no cross-sender order).
 *
 * Sending is in place: spindle_reserve() hands out a pointer into the next
 * ring slot, the application writes its message there, spindle_commit()
 * marks it ready. Deliveries arrive in batches through the deliver upcall
 * given in the options; message pointers stay valid until it returns.
 *
 * Threads: one application thread at a time may hold an open reservation on
 * a subgroup (different subgroups may be used from different threads). A
 * reservation belongs to the thread that made it, which commits it. A view
 * change waits for open reservations to be committed, so while a thread
 * holds one, its other calls into the same group (reserve or send on
 * another subgroup, flush) do not wait for a view change: they return
 * SPINDLE_EAGAIN naming the reservation to commit first. One thread may
 * hold up to 16 open reservations on a group, on up to 4 groups.
 * spindle_group_stats, spindle_flush and spindle_barrier may be called from
 * any application thread.
 *
 * Upcalls (docs/DISPATCH.md): deliver, view_changed and send_ready, and
 * p2p_deliver (<spindle/p2p.h>), which runs where deliver does (in the
 * default mode always on the predicate thread). Which thread runs them
 * depends on the mode:
 *  - Default (options.dispatch false): deliver and send_ready run on the
 *    library's predicate thread with the multicast's lock held (the trim
 *    of a view change, delivered whole before the next view is installed,
 *    runs on the membership thread under the same lock; over libfabric,
 *    while the predicate thread sleeps, messages that just arrived may be
 *    delivered on the transport's progress thread, under the same lock,
 *    instead of waking it: never two upcalls at once); view_changed
 *    runs on the membership thread once the new view's resends are in, so
 *    the first deliveries of a view may come before it (their view_id
 *    says which view they belong to). Deliveries may begin before
 *    spindle_group_create returns. A slow upcall stalls this member's
 *    multicast and, through the windows, every sender. With
 *    options.own_inline, a sender's own messages of an unordered subgroup
 *    are delivered on the sending thread instead, inside spindle_send or
 *    spindle_commit, under the same lock.
 *  - Dispatch (options.dispatch true): the library copies each delivered
 *    batch into a bounded queue and queues views and send_ready calls, in
 *    the order they happened (a view before anything delivered in it);
 *    spindle_group_fd() is readable while something is queued, and
 *    spindle_dispatch() runs the queued upcalls on the calling thread with
 *    no library lock held. A full queue stops delivery, not the library:
 *    messages wait in the ring and senders feel it through their windows.
 * Inside an upcall of a group (either mode), for that group:
 * spindle_reserve and spindle_send never wait for the window: they return
 * SPINDLE_EAGAIN when it is full (the window may be waiting for this very
 * upcall, or, in dispatch mode, for members whose dispatching threads wait
 * in turn), and send_ready is called once it has room again; so a request
 * can be answered where it is delivered, keeping what does not fit until
 * send_ready. They return SPINDLE_EAGAIN during a view change too (send
 * from view_changed, which follows it; in dispatch mode a reserve there may
 * wait, briefly, for the new view's resends, which never wait for the
 * application). spindle_commit works; a reservation must be committed before the upcall
 * returns (in the default mode one left open is dropped, with a warning).
 * spindle_flush, spindle_barrier, spindle_group_shutdown,
 * spindle_group_leave and spindle_dispatch return SPINDLE_EINVAL saying
 * that they would wait for the thread they are called on, and
 * spindle_group_destroy does nothing; spindle_group_stats, _status, _self,
 * _size and _identity may be called. A call into another group is an
 * ordinary call: if it blocks, this group's upcalls wait meanwhile.
 *
 * Errors: every function returns 0 (or a documented non-negative value) or a
 * negative SPINDLE_E* code; spindle_errmsg() names what was wrong.
 */
#ifndef SPINDLE_GROUP_H
#define SPINDLE_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <spindle/config.h> /* enum spindle_delivery_mode: SPINDLE_MODE_ATOMIC, _UNORDERED */
#include <spindle/error.h>
#include <spindle/export.h>
#include <spindle/p2p.h>  /* point-to-point messages */
#include <spindle/view.h> /* views, the layout function, state transfer */

#ifdef __cplusplus
extern "C" {
#endif

/* Largest max_payload a subgroup may ask for (bytes). */
#define SPINDLE_MAX_PAYLOAD (1u << 20)
/* Largest window_size a subgroup may ask for (slots per sender). */
#define SPINDLE_MAX_WINDOW 100000u
/* Largest ring of one sender, in bytes: window_size slots of
 * SPINDLE_SLOT_BYTES(max_payload) each must fit it. */
#define SPINDLE_MAX_RING_BYTES (256u << 20)
/* Bytes of one ring slot: an 8-byte header, then max_payload rounded up to
 * 8 bytes. */
#define SPINDLE_SLOT_BYTES(max_payload) (8u + (((uint64_t)(max_payload) + 7u) & ~(uint64_t)7u))
/* Most subgroups one group may have (also what a joiner may bring). */
#define SPINDLE_MAX_SUBGROUPS 256u
/* Number of log2 buckets in the batch-size histograms. */
#define SPINDLE_HIST_BUCKETS 24

/* Opaque group handle. */
typedef struct spindle_group spindle_group_t;

/* How options.bootstrap is read. */
enum spindle_bootstrap_kind {
    SPINDLE_BOOTSTRAP_AUTO = 0, /* a member list when it looks like host:port,...; else a dir */
    SPINDLE_BOOTSTRAP_DIR = 1,  /* a directory shared by local members */
    SPINDLE_BOOTSTRAP_TCP = 2,  /* "host:port,host:port,..." in member order */
};

/* One subgroup. members and senders are indices into the group member list;
 * senders must be members and give the round-robin delivery order. Sized
 * ("Sized structs" below): new members only ever at the end, with zero as
 * their default. */
struct spindle_subgroup_config {
    const uint32_t *members;
    uint32_t num_members;
    const uint32_t *senders;
    uint32_t num_senders;
    uint32_t window_size; /* ring slots per sender, 1..SPINDLE_MAX_WINDOW */
    uint32_t max_payload; /* bytes per message, 1..SPINDLE_MAX_PAYLOAD */
    /* SPINDLE_MODE_ATOMIC: total order, delivered when stable at every member;
     * virtual synchrony across view changes (docs/VIEWS.md).
     * SPINDLE_MODE_UNORDERED: delivered on receipt, per-sender FIFO only.
     * Across a view change, every member that goes on gets every message
     * of every sender that goes on, once and in its order (what some
     * member lacked is resent); of a failed sender, each gets a gap-free
     * prefix of its messages, not necessarily the same one (no
     * all-or-none, unlike atomic subgroups). */
    enum spindle_delivery_mode mode;
};

/* One delivered message. */
struct spindle_message {
    uint32_t subgroup;     /* subgroup index */
    uint32_t sender_id;    /* sender's member id (its index in the first member list) */
    uint64_t sender_index; /* this sender's message number in the subgroup: 0, 1, 2 ... */
    uint64_t seq;          /* global sequence number in the subgroup (round * senders + rank) */
    const void *data;      /* points into the ring; valid until the callback returns */
    uint32_t length;
    uint64_t view_id; /* view the message was delivered in (0 until the first change) */
};

/* Batched delivery upcall: count >= 1 messages in delivery order. Runs on
 * the predicate thread, or in spindle_dispatch (dispatch mode); keep it
 * short (copy out what must outlive it). */
typedef void (*spindle_deliver_fn)(void *ctx, const struct spindle_message *messages, size_t count);

/*
 * Persistence upcall (logged subgroups, docs/LOGS.md "Persistence
 * frontiers"): the global persistence frontier of subgroup grew. Every
 * message of view view_id with seq below frontier (a count of sequence
 * numbers, nulls included) is on stable storage in the log of every
 * member of the subgroup in that view that did not fail (at a view change
 * the last frontier of the old view is reported once every survivor made
 * its trim durable). Frontiers only grow, in (view_id, frontier) order;
 * in the default mode one never passes a message before its delivery
 * upcall. Runs on the predicate thread, on the log's writer thread right
 * after a sync that moved this member's own column, or on the membership
 * thread for a view change; never two at once, and with the rules of an
 * upcall on the predicate thread: keep it short, call no group function.
 * In dispatch mode too: it is not queued, so it may report messages that
 * are still waiting in the dispatch queue.
 */
typedef void (*spindle_persisted_fn)(void *ctx, uint32_t subgroup, uint64_t view_id,
                                     uint64_t frontier);

/*
 * Replay upcall (docs/LOGS.md "Restart of one member"): a member that
 * joins with a log directory that already holds a log gets back, before
 * its first delivery, what its state is made of, in order: per logged
 * subgroup its newest snapshot (kind SPINDLE_REPLAY_SNAPSHOT: the state
 * to start from, replacing any), then every message its log holds after
 * it, then the messages its log lacked, sent by the member that admits
 * it and appended to its log (received true). Then the joiner delivers
 * as any member does. Runs inside spindle_group_create on the calling
 * thread; data is valid only during the call. It returns 0, or a negative
 * SPINDLE_E* code, which fails the create (SPINDLE_EAGAIN is taken as
 * SPINDLE_EINVAL); a received item is in the log before the upcall sees
 * it, so a refused one comes back from the log at the next start. A
 * restarting joiner is sent
 * these records instead of the application's state (state_save and
 * state_load, or state_write and state_read, are not called for it).
 */
enum spindle_replay_kind {
    SPINDLE_REPLAY_SNAPSHOT = 1, /* data: a snapshot's state, taken before (view_id, seq) */
    SPINDLE_REPLAY_MESSAGE = 2,  /* data: a logged message's payload */
};
struct spindle_replayed {
    uint32_t kind; /* enum spindle_replay_kind */
    uint32_t subgroup;
    uint64_t view_id;      /* the view it was delivered in (a snapshot: its point's) */
    uint64_t seq;          /* its sequence number (a snapshot: its point's) */
    uint32_t sender;       /* the sender's member id (messages) */
    uint64_t sender_index; /* the sender's message number in the subgroup (messages) */
    const void *data;
    size_t length;
    bool received; /* sent at this join, not read from this member's own log */
};
typedef int (*spindle_replay_fn)(void *ctx, const struct spindle_replayed *item);

/* Send-ready upcall: after a non-blocking reserve of this member in
 * subgroup returned SPINDLE_EAGAIN because its window was full (as every
 * reserve inside an upcall is), called once as soon as a slot of that
 * window is free again, on the thread that runs deliveries (an upcall:
 * the same rules hold). The moment to send what an upcall had to keep.
 * Also called once after a non-blocking reserve outside every upcall
 * returned SPINDLE_EAGAIN because a view change was under way, once the
 * new view takes messages (after its view_changed; or once a change that
 * failed stopped the member, whose calls then say so): in dispatch mode
 * queued like the others, in the default mode on the membership thread,
 * which may run it while the predicate thread runs deliveries. */
typedef void (*spindle_send_ready_fn)(void *ctx, uint32_t subgroup);

/* Sized ("Sized structs" below): new members only ever at the end. */
struct spindle_group_options {
    const char *transport;  /* "shm" (default when NULL), "fabric", "verbs" */
    const char *provider;   /* fabric: libfabric provider ("tcp", "sockets"); NULL = default */
    const char *group_name; /* names shared objects; NULL = derived from bootstrap */
    uint32_t self;          /* this member's index in the member list */
    uint32_t num_members;   /* 1..SPINDLE_MAX_MEMBERS */
    /* A directory for local groups (owned by this user and writable by no
     * one else, e.g. under $XDG_RUNTIME_DIR: docs/CONFIG.md), or
     * "host:port,host:port,..." (one per member, in member order) for TCP
     * bootstrap. */
    const char *bootstrap;
    enum spindle_bootstrap_kind bootstrap_kind;
    int bootstrap_timeout_ms; /* how long to wait for the other members; default 30000 */
    int failure_timeout_ms;   /* how long a silent peer may take to be reported; default 5000 */
    /* Spindle optimizations, all on by default. */
    bool batching;     /* opportunistic batching at send, receive and delivery (3.2) */
    bool null_sends;   /* null-sends for lagging senders (3.3) */
    bool early_unlock; /* release the predicate lock before posting writes (3.4) */
    spindle_deliver_fn deliver;
    void *deliver_ctx;
    /* Virtual synchrony: when a member fails or leaves, the survivors agree
     * over the bootstrap channel on the ragged-edge trim, deliver every
     * message within it, install the next view and resend their undelivered
     * messages; sends block during the change. A view needs a majority of
     * the previous one: a member that cannot reach one stops
     * (spindle_group_status). Off: a failure fails the group. */
    bool tolerate_failures;
    spindle_view_fn view_changed; /* upcall after each installed view; may be NULL */
    void *view_ctx;
    /* verbs: RDMA device name (e.g. "mlx5_0"); NULL = the first device
     * with an active port. */
    const char *device;
    /*
     * Joining a running group (needs tolerate_failures and a TCP
     * bootstrap): join is "host:port" of any member's bootstrap address;
     * bootstrap is this process's own "host:port", where later joiners
     * will reach it. self and num_members are ignored (the group assigns
     * the member id: spindle_group_self), subgroups must have the group's
     * count, window sizes, payload sizes and modes (their member lists are
     * ignored: the view's layout decides), group_name may be NULL (taken
     * from the group). spindle_group_create returns once this process is
     * a member of a new view, after state_load; it retries while the
     * group is busy or changing, until bootstrap_timeout_ms.
     */
    const char *join;
    spindle_state_save_fn state_save;
    spindle_state_load_fn state_load;
    void *state_ctx;
    spindle_layout_fn layout; /* NULL: the default layout (see spindle_layout_fn) */
    void *layout_ctx;
    /*
     * Slow members (tolerate_failures). 0, the default: a member that keeps
     * up too slowly holds every sender's window full and senders wait for
     * it (back-pressure, visible in spindle_stats: window_full,
     * window_full_ns, window_holder). > 0: a member that held a sender's
     * window full for this many milliseconds without a break, while a
     * blocking send or reserve waited for a slot, is removed like a failed
     * one (the sender's member suspects it); if it is alive it learns so
     * (SPINDLE_EREMOVED). A sender that only uses SPINDLE_RESERVE_NONBLOCK
     * never waits, so never suspects. Choose it well above the longest
     * delivery upcall the application makes.
     */
    int slow_member_ms;
    /*
     * Even splits (tolerate_failures). false, the default: a view needs
     * more than half of the previous one, so a group of two cannot survive
     * a failure. true: exactly half also goes on when it holds the
     * previous view's leader (rank 0), the side that wins an even split or
     * the survivor of two when the other fails (a failed leader's partner
     * stops). Any two such sides share a member, so two halves of a
     * partition never both go on. Every member of a group must agree (a
     * joiner with another setting is refused).
     */
    bool tie_breaker;
    /*
     * Persistent identity (struct spindle_member_identity, <spindle/view.h>).
     * member_name: at most SPINDLE_MEMBER_NAME_MAX - 1 printable ASCII
     * characters without spaces, unique in the group; NULL: this member's
     * control address "host:port" (TCP bootstrap and joins), else
     * "member-<self>@<hostname>". incarnation: grows with each start of the
     * process behind the name; 0, the default: the CLOCK_REALTIME time of
     * spindle_group_create in nanoseconds (grows while the clock does not
     * go back). A joiner whose name a member of the view holds is refused
     * when its incarnation is not larger; when it is larger, the member
     * holding the name is taken for an earlier, dead incarnation of the
     * joiner: it is removed by a view change and the joiner, which asks
     * again, is admitted after it.
     */
    const char *member_name;
    uint64_t incarnation;
    /*
     * Group key (docs/SECURITY.md): a file of 32 random bytes
     * (spindle-keygen), a regular file readable and writable by its owner
     * only. With it, every control-channel connection (TCP bootstrap and
     * joins) is mutually authenticated with the key before anything is
     * said and encrypted after; a peer without it gets nothing and a
     * member that holds another key is SPINDLE_EAUTH. Every member and
     * joiner must use the same key. NULL, the default: no key, and a
     * member that listens on an address other than loopback logs a
     * warning. The one-sided data plane is not encrypted either way.
     */
    const char *key_file;
    /*
     * Key rotation (docs/SECURITY.md "Rotating the key"): a second key file
     * this member also accepts from members that connect to it, while it
     * proves key_file itself (a member that starts during a rotation; a
     * running one changes its keys with spindle_group_set_keys). Needs
     * key_file; checked like it. NULL, the default: key_file alone.
     */
    const char *accept_key_file;
    /*
     * Dedicated-CPU polling, for hosts with cores to spare
     * (docs/PERFORMANCE.md). false, the default: adaptive polling, the
     * predicate thread spins briefly after work (as long as the CPUs it
     * may use allow) and then sleeps on its doorbell. true: the predicate
     * thread is pinned to CPU poll_cpu and polls without ever sleeping,
     * taking that CPU whole; give each member on a host its own CPU and
     * keep other busy threads off them. spindle_group_create fails with
     * SPINDLE_EINVAL when poll_cpu is not a CPU this process may run on.
     * Either way the predicate thread runs under the scheduling policy of
     * the thread that creates or joins the group: a real-time one
     * (SCHED_FIFO, SCHED_RR) is kept, which keeps other threads on its CPU
     * out of the light-load tail at a cost in throughput (not with
     * poll_dedicated, which never sleeps); a normal one asks for a short
     * time slice (docs/PERFORMANCE.md, "The slowest one percent").
     */
    bool poll_dedicated;
    uint32_t poll_cpu;
    /*
     * Logged delivery (docs/LOGS.md): in each subgroup listed in
     * logged_subgroups (indices; num_logged_subgroups of them), every
     * member appends each message it delivers to its log in log_dir, in
     * delivery order, before the upcall. Atomic subgroups only (the members
     * of an unordered one deliver in no common order). log_dir is created
     * (mode 0700) when missing; it must belong to this user and be writable
     * by no one else, and no symbolic link is followed; give each member a
     * directory of its own. A torn tail left by a crash is cut at open.
     * NULL and 0, the defaults: nothing is logged.
     */
    const char *log_dir;
    const uint32_t *logged_subgroups;
    uint32_t num_logged_subgroups;
    /* Called when a logged subgroup's global persistence frontier grows
     * (spindle_persisted_fn); may be NULL. Every member of a logged
     * subgroup must log it, or its frontier never moves. */
    spindle_persisted_fn persisted;
    void *persisted_ctx;
    /*
     * Dispatch mode (docs/DISPATCH.md): deliveries and views are queued
     * and run by spindle_dispatch() on the application's thread (an event
     * loop watching spindle_group_fd()). Each delivered batch is copied
     * into the queue, so ring slots go back to their senders at once;
     * the queue holds at most dispatch_queue_bytes, each message counting
     * its length plus SPINDLE_DISPATCH_OVERHEAD. When it is full, the
     * library stops delivering (the messages wait in the ring, holding
     * the senders' windows: back-pressure) until spindle_dispatch frees
     * room; the predicate thread never waits for the application. The one
     * exception is the trim of a view change, which is delivered whole
     * and may take the queue past its bound by at most the messages the
     * windows held. dispatch_queue_bytes 0: 8 MiB; otherwise it must hold
     * the largest message of any subgroup (SPINDLE_EINVAL names both).
     * spindle_flush, spindle_group_shutdown and spindle_group_leave wait
     * until this member's own messages are delivered, which a full queue
     * holds back: keep dispatching (on another thread) while they wait.
     */
    bool dispatch;
    size_t dispatch_queue_bytes;
    /* See spindle_send_ready_fn; NULL, the default: not called. (In
     * dispatch mode state_save, too, runs in spindle_dispatch, after every
     * upcall of the view before the joiner's; a member whose application
     * does not dispatch it within failure_timeout_ms refuses the joiner.) */
    spindle_send_ready_fn send_ready;
    void *send_ready_ctx;
    /*
     * Administration endpoint (docs/OPERATIONS.md): a Unix-domain socket
     * <group name>-<member id>.sock in admin_dir, through which
     * spindle-stat reads this member's view, subgroups, counters and
     * transport, and spindle-ctl asks it to leave or to have another
     * member removed. Only this user and root are answered (directory of
     * this user's alone, socket mode 0600, the peer's uid checked). NULL,
     * the default: $XDG_RUNTIME_DIR/spindle, or /tmp/spindle-<uid> when
     * that is unset, created mode 0700; a problem with it is logged and the
     * member runs without an endpoint. Another directory is created when
     * missing and checked as log_dir is; a problem with it fails
     * spindle_group_create. "off": no endpoint.
     */
    const char *admin_dir;
    /* Streamed state transfer (include/spindle/view.h); NULL, the
     * default: state_save and state_load, or no state. Set either with
     * state_ctx; state_write replaces state_save, state_read state_load. */
    spindle_state_write_fn state_write;
    spindle_state_read_fn state_read;
    /*
     * Point-to-point messages (<spindle/p2p.h>, docs/P2P.md): the upcall
     * of each message or query another member sends this one (NULL, the
     * default: they are taken and dropped), and the slots of each pair's
     * ring, 1..SPINDLE_P2P_MAX_WINDOW (0, the default:
     * SPINDLE_P2P_DEFAULT_WINDOW). Every member must use the same
     * p2p_window (a send to a member with another fails with
     * SPINDLE_EPROTO). Each member keeps 2 x num_members rings of
     * p2p_window x (SPINDLE_P2P_MAX_PAYLOAD + 16) bytes.
     */
    spindle_p2p_deliver_fn p2p_deliver;
    void *p2p_ctx;
    uint32_t p2p_window;
    /* The replay upcall of a joiner that restarts with its log
     * (spindle_replay_fn); NULL: its log is caught up all the same, and
     * nothing is handed to the application. */
    spindle_replay_fn replay;
    void *replay_ctx;
    /*
     * Own deliveries inline (unordered subgroups, docs/PERFORMANCE.md).
     * false, the default: every delivery upcall runs on the predicate
     * thread (or in spindle_dispatch), which a send wakes when it sleeps.
     * true: spindle_commit and spindle_send, called outside every upcall
     * of the group, post the message to the other members and deliver it
     * to this member themselves, so the deliver upcall of a sender's own
     * unordered message runs on the sending thread, inside the call, with
     * the rules of an upcall (engine lock held: never concurrently with
     * another delivery of the group, in per-sender order, once each;
     * keep it short, call no waiting group function). A sender that holds
     * a lock of its own while sending must not take it in the upcall.
     * In dispatch mode the message is queued there instead. Saves the
     * wake-up of a sleeping predicate thread, most of a light-load own
     * delivery's latency; atomic subgroups are not affected (over
     * libfabric their idle senders post their messages themselves whatever
     * this says, without any upcall: spindle_commit).
     */
    bool own_inline;
};

/* What one queued message costs in the dispatch queue besides its length. */
#define SPINDLE_DISPATCH_OVERHEAD 256u

/* How spindle_dispatch runs the queue (as corosync's cpg_dispatch). */
enum spindle_dispatch_flags {
    SPINDLE_DISPATCH_ONE = 1,      /* at most one queued upcall; never waits */
    SPINDLE_DISPATCH_ALL = 2,      /* the upcalls queued when called; never waits */
    SPINDLE_DISPATCH_BLOCKING = 3, /* upcalls as they come, until the member stops */
};

/* Statistics of one member (counts since the group was created). Histogram
 * bucket b counts batches whose size n satisfies 2^b <= n < 2^(b+1). Sized
 * ("Sized structs" below): new counters only ever at the end. */
struct spindle_stats {
    uint64_t messages_sent;      /* application messages committed by this member */
    uint64_t messages_delivered; /* application messages delivered to this member */
    uint64_t nulls_sent;         /* null messages this member sent (3.3) */
    uint64_t nulls_received;     /* null positions this member skipped at delivery */
    uint64_t writes_posted;      /* one-sided writes posted by this member */
    uint64_t doorbells;          /* doorbells rung (one per batch of writes to one peer) */
    uint64_t pushes;             /* SST push requests */
    uint64_t post_ns;            /* time spent posting writes */
    uint64_t predicate_passes;   /* predicate thread passes */
    uint64_t sleeps;             /* times the predicate thread slept on its doorbell */
    uint64_t wakeups_sent;       /* doorbells rung to wake a sleeping peer */
    uint64_t send_batches[SPINDLE_HIST_BUCKETS];     /* messages per send push */
    uint64_t receive_batches[SPINDLE_HIST_BUCKETS];  /* messages per receive pass */
    uint64_t delivery_batches[SPINDLE_HIST_BUCKETS]; /* messages per delivery upcall */
    uint64_t send_batch_count, send_batch_messages;  /* totals behind the histograms */
    uint64_t receive_batch_count, receive_batch_messages;
    uint64_t delivery_batch_count, delivery_batch_messages;
    uint64_t pinned_bytes; /* bytes this member's transport keeps pinned (0 on shm) */
    /* Back-pressure: a member that delivers (atomic) or receives
     * (unordered) too slowly keeps every sender's window full, and senders
     * wait for it. window_full counts this member's reserves that found a
     * window full (blocking or not), window_full_ns the time they waited
     * for a slot, window_holder the member id that held the last full
     * window (the first one found behind), -1 when none did. */
    uint64_t window_full;
    uint64_t window_full_ns;
    int32_t window_holder;
    /* Logged delivery (docs/LOGS.md), how far this member's log is
     * durable: records of its log on stable storage (the messages of
     * logged subgroups and the views it installed, counted from the log's
     * first position), the bytes and the fdatasync calls this process
     * wrote them with. The same per subgroup, in its sequence numbers,
     * with the global frontier: spindle_group_persisted. */
    uint64_t log_records_durable;
    uint64_t log_bytes_durable;
    uint64_t log_syncs;
    /* Back-pressure of the log (docs/LOGS.md "Logged delivery"): delivery
     * steps of logged subgroups stopped where the log's queue had no more
     * room (the rest waited in the ring), and the times the predicate
     * thread itself waited for room (only to deliver a view change's trim
     * whole). Counted in the current view. */
    uint64_t log_deliveries_held;
    uint64_t log_queue_waits;
    /* Dispatch mode (docs/DISPATCH.md): bytes in the dispatch queue now
     * and at most so far, counted as its bound counts them (each message
     * its length plus SPINDLE_DISPATCH_OVERHEAD, a view its copy); delivery
     * steps stopped at the bound are counted in log_deliveries_held. */
    uint64_t dispatch_queue_bytes;
    uint64_t dispatch_queue_peak;
    /* A joiner that restarted with its log (docs/LOGS.md "Restart of one
     * member"): the records it was sent at its join and the bytes of that
     * catch-up stream (its header and the records as logged). */
    uint64_t log_catchup_records;
    uint64_t log_catchup_bytes;
};

/* Flags of spindle_reserve. */
#define SPINDLE_RESERVE_NONBLOCK 1u /* SPINDLE_EAGAIN instead of waiting for a free slot */
/* More messages follow at once from this thread (as MSG_MORE): the commit of
 * this reservation does not wake the predicate thread, so that one push
 * carries the whole burst. The next commit without it, or a reserve that
 * finds the window full, wakes it for all of them; a burst must end with
 * such a commit, else its messages wait for the predicate thread's next
 * pass for another reason (a peer's push, or its heartbeat: at most
 * 100 ms). */
#define SPINDLE_RESERVE_MORE 2u

/*
 * Sized structs (docs/ABI.md "Growing a struct"). spindle_group_options,
 * spindle_subgroup_config and spindle_stats may gain members at their end
 * in later releases of this soname. Each function that reads or fills one
 * takes its size as the program's header declared it: the names below are
 * macros that pass sizeof for the program, so source code calls them as
 * plain functions. The library reads and writes only that many bytes; a
 * member the program's header lacks takes its default (zero, unless
 * spindle_group_options_init says otherwise). A size below the struct of
 * the first release (docs/ABI.md) is refused with SPINDLE_EINVAL; bytes
 * beyond the library's own struct (a program built against a later
 * header) must be zero where the library reads them, else SPINDLE_ENOTSUP
 * names the struct and the offset, and are zeroed where it fills them.
 */

/* Fills options with the defaults (shm, all optimizations on, 30 s
 * bootstrap timeout, 5 s failure timeout, member 0 of 1): the first
 * options_size bytes. 0, or SPINDLE_EINVAL for NULL or a size below the
 * first release's (nothing is written then). */
SPINDLE_API int spindle_group_options_init_sized(struct spindle_group_options *options,
                                                 size_t options_size);
#define spindle_group_options_init(options)                                                        \
    spindle_group_options_init_sized((options), sizeof(struct spindle_group_options))

/*
 * Creates this member's side of a group and waits until every member has
 * joined (collective: every member calls it with the same subgroups).
 * Returns 0 and *out, or SPINDLE_EINVAL naming a bad value (window 0,
 * max_payload too large, a sender that is not a member, more than
 * SPINDLE_MAX_SUBGROUPS subgroups, ...),
 * SPINDLE_ENOTSUP for an unknown transport, SPINDLE_ETIMEDOUT when members
 * are missing after bootstrap_timeout_ms, or a transport error; for the
 * sizes, see "Sized structs" above.
 */
SPINDLE_API int spindle_group_create_sized(const struct spindle_group_options *options,
                                           size_t options_size,
                                           const struct spindle_subgroup_config *subgroups,
                                           size_t subgroup_size, uint32_t num_subgroups,
                                           spindle_group_t **out);
/* subgroups[] is read with the program's stride, subgroup_size. */
#define spindle_group_create(options, subgroups, num_subgroups, out)                               \
    spindle_group_create_sized((options), sizeof(struct spindle_group_options), (subgroups),       \
                               sizeof(struct spindle_subgroup_config), (num_subgroups), (out))

/*
 * Reserves the next ring slot of this member in subgroup for a message of
 * size bytes and stores a pointer to it in *slot. Blocks while the window is
 * full (every slot still holds a message some member has not delivered),
 * unless flags has SPINDLE_RESERVE_NONBLOCK, then returns SPINDLE_EAGAIN.
 * Without SPINDLE_RESERVE_NONBLOCK it waits out a view change (with
 * tolerate_failures) and reserves in the new view; with it, it never waits
 * for one either: SPINDLE_EAGAIN while the change is under way, and once
 * the new view takes messages send_ready is called for subgroup (in
 * dispatch mode, queued: the descriptor becomes readable), the moment to
 * retry (a loop that is the only dispatcher of its member can send
 * without a thread of its own: the change may wait for it to dispatch a
 * joiner's state_save).
 * Errors: SPINDLE_EINVAL (unknown subgroup, a reservation already open on
 * it, too many open on this thread), SPINDLE_EPERM (this member is not a
 * sender of subgroup), SPINDLE_EAGAIN (also: a view change waits for a
 * reservation this thread holds on another subgroup),
 * SPINDLE_EMSGSIZE (size above max_payload; both are named),
 * SPINDLE_ESHUTDOWN, SPINDLE_EPEERFAILED. Inside an upcall of the group
 * it never waits, as if SPINDLE_RESERVE_NONBLOCK were given: also
 * SPINDLE_EAGAIN while a view change is under way.
 */
SPINDLE_API int spindle_reserve(spindle_group_t *group, uint32_t subgroup, size_t size,
                                unsigned flags, void **slot);

/* Marks the reserved message of subgroup ready to send. SPINDLE_EINVAL when
 * the calling thread holds no open reservation on that subgroup (nothing
 * changes then). Works inside an upcall (the message goes out once it
 * returns, or sooner). The library's predicate thread sends the message,
 * except over libfabric at light load: in an atomic subgroup, when that
 * thread sleeps, this commit and the sender's previous one each found
 * every earlier message of the sender delivered, and the two were at
 * least 5 ms apart, the calling thread posts the message itself (the
 * group's locks only tried, never waited for), so the call returns once
 * the provider has taken the writes; no upcall runs on it for that
 * (docs/FABRIC.md "Commit's send"). spindle_send likewise. */
SPINDLE_API int spindle_commit(spindle_group_t *group, uint32_t subgroup);

/* Convenience: reserve, copy size bytes from data, commit. Same errors as
 * spindle_reserve. */
SPINDLE_API int spindle_send(spindle_group_t *group, uint32_t subgroup, const void *data,
                             size_t size, unsigned flags);

/* Waits until every message this member committed before the call has been
 * delivered locally (in every subgroup) and, in unordered subgroups,
 * received by every member. SPINDLE_ETIMEDOUT after timeout_ms (< 0: no
 * limit), SPINDLE_EPEERFAILED when a peer failed meanwhile. */
SPINDLE_API int spindle_flush(spindle_group_t *group, int timeout_ms);

/* spindle_flush_persistent: every logged subgroup. */
#define SPINDLE_ALL_SUBGROUPS UINT32_MAX

/*
 * Waits until every message this member committed in subgroup
 * (SPINDLE_ALL_SUBGROUPS: every logged subgroup) before the call is
 * delivered and on stable storage in the log of every member of the
 * subgroup (docs/LOGS.md "Persistence frontiers"). Across a view change
 * (tolerate_failures) it goes on in the next view: what the old view
 * delivered is durable at every survivor once the next view is installed,
 * messages resent there are waited for there, and a member that failed or
 * left no longer counts. SPINDLE_EINVAL for an unknown or unlogged
 * subgroup (named), SPINDLE_ETIMEDOUT after timeout_ms (< 0: no limit),
 * or the group's failure (SPINDLE_EPEERFAILED without tolerate_failures,
 * SPINDLE_EMINORITY, SPINDLE_EIO when this member's log failed, ...).
 */
SPINDLE_API int spindle_flush_persistent(spindle_group_t *group, uint32_t subgroup, int timeout_ms);

/*
 * The persistence frontiers of logged subgroup in the current view, as
 * counts of its sequence numbers: *local, this member's (every message it
 * delivered below it is on its stable storage), *global, the minimum over
 * the subgroup's members (what spindle_persisted_fn reports), *view_id the
 * view they count in (any pointer may be NULL). SPINDLE_EINVAL for an
 * unknown or unlogged subgroup or one this member is not in.
 */
SPINDLE_API int spindle_group_persisted(spindle_group_t *group, uint32_t subgroup,
                                        uint64_t *view_id, uint64_t *local, uint64_t *global);

/*
 * Snapshots and compaction (docs/LOGS.md "Snapshots and compaction"):
 * stores state, length bytes the application built from the messages of
 * logged subgroup delivered before (view_id, seq) (of an earlier view, or
 * of view view_id with a seq below seq: after applying message msg, pass
 * msg.view_id and msg.seq + 1), durably in this member's log directory.
 * The newest two snapshots of the subgroup are kept; once everything in a
 * segment of the log is covered by the older of them (every logged
 * subgroup's), the segment is removed, off the calling thread. So a long
 * run's log stays bounded when the application snapshots now and then.
 * Writes and syncs the file on the calling thread: call it from the
 * application's thread, not from an upcall. The point must not be past
 * what this member delivered, nor before the subgroup's newest snapshot
 * (the same point again replaces it), and must be in one of the last views
 * this member installed. SPINDLE_EINVAL naming what was wrong (unknown or
 * unlogged subgroup, such a point, NULL state with a length), SPINDLE_EIO
 * naming the file, SPINDLE_ENOMEM.
 */
SPINDLE_API int spindle_group_snapshot(spindle_group_t *group, uint32_t subgroup, uint64_t view_id,
                                       uint64_t seq, const void *state, size_t length);

/* Collective: returns once every member has called it (over the bootstrap
 * channel). SPINDLE_ETIMEDOUT names the members still missing. */
SPINDLE_API int spindle_barrier(spindle_group_t *group, int timeout_ms);

/* Copies this member's statistics into the first stats_size bytes of
 * *out (zeros past the library's struct). SPINDLE_EINVAL on NULL or a size
 * below the first release's. */
SPINDLE_API int spindle_group_stats_sized(spindle_group_t *group, struct spindle_stats *out,
                                          size_t stats_size);
#define spindle_group_stats(group, out)                                                            \
    spindle_group_stats_sized((group), (out), sizeof(struct spindle_stats))

/* 0 while this member takes part in the group. Once it has stopped on its
 * own (tolerate_failures: cut off in a minority, SPINDLE_EMINORITY; removed
 * by the others, who suspected it of failure while it was stopped or hung,
 * or at an administrator's request, SPINDLE_EREMOVED; left at an
 * administrator's request through its administration socket, spindle-ctl
 * leave, SPINDLE_ESHUTDOWN; or a view change that could not complete), the
 * error that stopped it, with spindle_errmsg() saying why; its sends fail
 * with the same error. */
SPINDLE_API int spindle_group_status(spindle_group_t *group);

/* This member's index and the member count of the group (-1 on NULL). */
SPINDLE_API int spindle_group_self(const spindle_group_t *group);
SPINDLE_API int spindle_group_size(const spindle_group_t *group);
/* The identity of member_id in the current view: 0, or SPINDLE_EINVAL
 * when it is not a member of it. */
SPINDLE_API int spindle_group_identity(spindle_group_t *group, uint32_t member_id,
                                       struct spindle_member_identity *out);

/*
 * Orderly shutdown (collective): flushes this member's messages, waits at a
 * barrier until every member got there (so nobody tears down state a peer
 * still reads), then stops the predicate thread. Later sends fail with
 * SPINDLE_ESHUTDOWN. Returns the first error met; the group must still be
 * destroyed.
 */
SPINDLE_API int spindle_group_shutdown(spindle_group_t *group, int timeout_ms);

/*
 * Graceful leave (tolerate_failures only): flushes this member's messages,
 * so that every survivor delivers all of them, then announces the departure
 * in the SST and stops. The others install a view without this member at
 * once (no failure timeout); like any view change, that needs a majority of
 * the previous view among those who stay. Later sends fail with
 * SPINDLE_ESHUTDOWN; the group must still be destroyed. If the flush fails
 * (SPINDLE_ETIMEDOUT...), nothing was announced and the member is still in
 * the group. spindle-ctl leave makes a member leave the same way
 * (admin_dir, docs/OPERATIONS.md); a leave or shutdown that comes second
 * finds the member gone.
 */
SPINDLE_API int spindle_group_leave(spindle_group_t *group, int timeout_ms);

/*
 * Key rotation without a restart (docs/SECURITY.md "Rotating the key"):
 * from now on this member proves key_file on the control connections it
 * makes and accepts connections proving key_file or accept_key_file (NULL:
 * key_file alone). Both files are checked as options.key_file is.
 * Connections already open keep their sessions. To replace a key, call it
 * on every member with (old, new), then with (new, old), then (new, NULL)
 * to drop the old key: at every moment any two members share a key one
 * proves and the other accepts. Any thread. 0; SPINDLE_EINVAL when the
 * group was created without a key (a key cannot be added to a running
 * group) or key_file is NULL; a key file's own error (SPINDLE_ENOENT,
 * SPINDLE_EINVAL naming the file and what is wrong). On error the keys in
 * use are unchanged.
 */
SPINDLE_API int spindle_group_set_keys(spindle_group_t *group, const char *key_file,
                                       const char *accept_key_file);

/*
 * Dispatch mode: a file descriptor that is readable while upcalls are
 * queued for spindle_dispatch (level-triggered: it stays readable until
 * the queue is empty, so after SPINDLE_DISPATCH_ONE it may still be; with
 * EPOLLET dispatch with SPINDLE_DISPATCH_ALL until it returns 0). It also
 * becomes readable, and stays so, once the member stopped: through
 * spindle_group_shutdown or spindle_group_leave, or on its own (removed by
 * the others, cut off in a minority: spindle_group_status), the moment it
 * happens; spindle_dispatch then says so. Only poll it:
 * never read, write or close it; it is closed by spindle_group_destroy
 * (take it out of an epoll set first). Returns the descriptor, or
 * SPINDLE_EINVAL when the group is NULL or not in dispatch mode.
 */
SPINDLE_API int spindle_group_fd(spindle_group_t *group);

/*
 * Dispatch mode: runs queued upcalls (deliver batches, view_changed,
 * send_ready and a joiner's state_save, in the order they happened) on the
 * calling thread, with no library lock
 * held, and frees their room in the queue. flags: SPINDLE_DISPATCH_ONE,
 * _ALL or _BLOCKING (enum spindle_dispatch_flags). One thread dispatches
 * at a time (a concurrent call waits its turn). Returns the number of
 * upcalls run (0: nothing was queued). Once the queue is empty and the
 * member has stopped, SPINDLE_ESHUTDOWN (shutdown or leave) or the error
 * that stopped it (spindle_group_status); _BLOCKING returns only then.
 * SPINDLE_EINVAL for a NULL group, a group not in dispatch mode, unknown
 * flags, or a call from inside an upcall of this group.
 */
SPINDLE_API int spindle_dispatch(spindle_group_t *group, unsigned flags);

/* Releases everything (stops the predicate thread if still running); in
 * dispatch mode, upcalls still queued are discarded, not run, and the
 * descriptor is closed (no thread may be in spindle_dispatch). Safe on
 * NULL. Called from inside an upcall of the group, it does nothing (and
 * logs why). */
SPINDLE_API void spindle_group_destroy(spindle_group_t *group);

#ifdef __cplusplus
}
#endif

#endif
