/*
 * A fake RDMA device that really moves bytes, for running the verbs
 * backend end to end in one process (the transport conformance suite).
 *
 * It plugs in where the backend expects rdma-core: the control path through
 * the injectable struct verbs_api (devices, PDs, CQs, completion channels,
 * memory registration, QPs, and an RDMA CM that connects endpoints of this
 * process to each other by port), and the data path through the provider
 * ops of every context it opens (post_send, post_recv, poll_cq,
 * req_notify_cq), which the header-inline verbs dispatch to.
 *
 * Like a NIC, it executes work requests asynchronously on its own thread:
 * the requests of one queue pair in posting order; an RDMA write's bytes are
 * copied into the target region in pieces, in an order of its choosing, with
 * every aligned 8-byte word stored whole (so T1 holds and nothing is promised
 * about byte order inside a write, as on hardware); inline data is copied at
 * post time and other sources when the request executes (T3: a source may be
 * reused once its completion is polled); a write with immediate consumes a
 * receive at the target and completes it there (receiver not ready: the
 * request waits); completions go to CQs and wake their completion channels.
 * Writes to an unknown key or outside the registered region, and writes to
 * a queue pair whose context crashed or was destroyed, complete in error and
 * move the sending queue pair to the error state, flushing what follows.
 *
 * Threads: every entry point may be called from any thread (one lock
 * guards the device); the NIC thread starts at install and stops at
 * uninstall. Contexts, queue pairs and CM objects are kept until uninstall,
 * so stale pointers held by a crashed endpoint stay valid.
 */
#ifndef SPINDLE_TESTS_FAKE_NIC_H
#define SPINDLE_TESTS_FAKE_NIC_H

/* Installs the fake device as the verbs backend's rdma-core (verbs_api_set)
 * and starts its NIC thread. Call before opening verbs endpoints. */
void fake_nic_install(void);
/* Stops the NIC thread, restores the real verbs and frees everything. Call
 * once every endpoint is closed. */
void fake_nic_uninstall(void);
/* Number of device contexts opened so far: the next endpoint opened gets
 * this index. */
int fake_nic_contexts(void);
/* Crashes context index, as if its process died: its queue pairs stop
 * executing, and requests of other contexts that target them complete in
 * error (the peer sees its connection fail). */
void fake_nic_crash(int index);

#endif
