/*
 * The own pass of an unordered subgroup (smc_options.own_inline): the
 * application thread sends and delivers its own message inside its commit
 * while the predicate thread runs its passes for the same subgroup.
 *
 * Modelled after src/smc/smc_send.c (smc_reserve, slot_holder, commit,
 * own_pass_allowed), src/smc/smc_predicate.c (smc_trigger's posted_mark,
 * send_step, receive_senders, smc_own_pass, smc_own_posted) and
 * src/sst/sst_engine.c (sst_unlock_and_post). One sender (member 0) with
 * two threads, its application thread and its predicate thread, and one
 * receiver (member 1). The sender's threads share the engine lock (L) and
 * the post lock (P): a locked section queues writes, and the thread that
 * ends it takes P before it releases L, then posts what it queued, reading
 * the ring slots as it posts them (shm: memcpy; fabric: the copy into the
 * staging ring; verbs: the NIC's read). Every commit chooses freely between
 * the own pass and a plain commit that leaves the message to the predicate
 * (inside an upcall, during a view change, own_inline off).
 *
 * Happens-before, not only interleaving. That the receiver acknowledged a
 * message shows that a post read its slot, but it is memory another process
 * wrote: it orders nothing between this process's threads (C11; what TSan
 * checks). So the model tracks, per thread, the highest message whose post
 * it knows has ended (kp[t]), passed on only by what synchronizes: L and P
 * (release by the owner, acquire by the next), the release/acquire of
 * posted_mark and the read-modify-writes of own_posting. A thread knows the
 * posts it made itself. The application thread writes a reused slot only
 * when it knows the post of the message that slot last held has ended:
 * otherwise it writes a slot another thread may still be reading, a data
 * race.
 *
 * Properties (assertions):
 *  - no race on a reused slot (above);
 *  - every post reads the message it was queued for, and the receiver
 *    takes each message once, in order, with the right payload;
 *  - the sender delivers each own message once, in order (own pass and
 *    predicate pass both run receive_senders on its own ring);
 *  - when nothing can move any more: every message committed, delivered
 *    by both members, no lock held, no post under way (the checker).
 *
 * Abstracted away (docs/MODELS.md): payloads beyond their index, view
 * changes (the own pass is off while wedged), several subgroups or
 * senders, the sender's acknowledgements to the receiver (unordered
 * delivery does not wait for them), the wake-ups (a thread runs whenever
 * its step is enabled), NONBLOCK reserves.
 *
 * Sizes: spin -DWIN=1 -DQUOTA=3 (window_size, messages the sender commits).
 *
 * Broken variants (each must yield a counterexample, scripts/check-models.sh):
 *  BROKEN_MARK_IGNORES_OWN  the predicate marks everything pushed as posted
 *                           while an own pass's post is still under way
 *  BROKEN_POSTED_EARLY      the own pass marks its pushes posted before it
 *                           posts them
 */

#ifndef WIN
#define WIN 1
#endif
#ifndef QUOTA
#define QUOTA 3
#endif
#ifndef CAP
#define CAP 8 /* writes in flight per direction; asserted, never silently full */
#endif

#define NAPP 2 /* application threads: proctype application */
#define PRED 2 /* the predicate thread */
#define NONE 3

#define MAX(a, b) ((a) > (b) -> (a) : (b))

mtype = { RING, SENT };

chan to_recv = [CAP] of { mtype, byte, byte }; /* RING(index, payload), SENT(count) */
chan to_send = [CAP] of { byte };              /* the receiver's received_num */

/* Sender (member 0). */
byte ring[WIN];       /* payload of each slot: message index + 1 */
byte committed;
byte pushed;
byte posted_mark;
byte own_posting;
byte own_recv;        /* own messages received = delivered (unordered) */
byte c_recv;          /* the receiver's received_num, landed here */
byte L = NONE;        /* engine lock holder */
byte P = NONE;        /* post lock holder */
/* The range each thread queued in its locked section and now posts. */
byte post_from[3], post_to[3], post_at[3];
bool posting[3];
bool reserve_open;    /* one open reservation at a time (reserve_open) */

/* Receiver (member 1). */
byte r_ring[WIN];
byte r_sent;
byte r_recv;

/* Ghosts: happens-before knowledge (highest message whose post is known to
 * have ended, plus one) of each thread and of each synchronizing object. */
byte kp[3];
byte g_L, g_P, g_mark, g_posting;
byte deliv_own; /* own deliveries so far (checks) */

inline acquire(t, g) { kp[t] = MAX(kp[t], g) }
inline release(t, g) { g = MAX(g, kp[t]) }

/* send_step: every committed message not yet pushed, queued for this
 * thread's post; pushed then covers them (sent_num = committed). */
inline send_step(t)
{
	post_from[t] = pushed;
	post_to[t] = committed;
	post_at[t] = pushed;
	pushed = committed
}

/* receive_senders for this member's own ring: what its sent_num covers. */
inline receive_own()
{
	do
	:: own_recv < pushed ->
		assert(ring[own_recv % WIN] == own_recv + 1);
		assert(deliv_own == own_recv);
		deliv_own++;
		own_recv++
	:: else -> break
	od
}

/* slot_holder < 0: the slot the next commit reuses is free. */
#define SLOT_FREE (committed < WIN || \
	(committed - WIN < posted_mark && own_recv > committed - WIN && c_recv > committed - WIN))

/* sst_unlock_and_post: with writes queued, P is taken before L is
 * released, then the writes are posted, then P is released; with none, L
 * is just released. */
#define END_SECTION_READY(t) (L == t && (post_to[t] == post_from[t] || P == NONE))
inline end_section(t)
{
	if
	:: post_to[t] > post_from[t] ->
		P = t; acquire(t, g_P);
		posting[t] = true
	:: else -> skip
	fi;
	release(t, g_L); L = NONE
}

/* One step of a post: a slot (read now), or the closing sent_num. */
inline post_step(t)
{
	if
	:: post_at[t] < post_to[t] ->
		/* the slot still holds the message queued for it */
		assert(ring[post_at[t] % WIN] == post_at[t] + 1);
		assert(nfull(to_recv));
		to_recv!RING, post_at[t], ring[post_at[t] % WIN];
		post_at[t]++
	:: post_at[t] == post_to[t] ->
		/* the guard last (T2); the receiver may take the messages before
		 * this thread's post returns */
		assert(nfull(to_recv));
		to_recv!SENT, post_to[t], 0;
		post_at[t]++
	:: else ->
		kp[t] = MAX(kp[t], post_to[t]);
		posting[t] = false;
		release(t, g_P); P = NONE
	fi
}

proctype application(byte t)
{
	byte mine; /* pushed as this thread's own pass left it */
	bool own;
end_reserve:
	do
	/* smc_reserve: takes the reservation, then finds the slot free
	 * (posted_mark and the counts: acquire loads) */
	:: atomic { !reserve_open && committed < QUOTA -> reserve_open = true };
		atomic { SLOT_FREE -> acquire(t, g_mark) };
		/* in-place construction, no lock held: the post of the message
		 * this slot held must be known to have ended */
		atomic {
			assert(committed < WIN || kp[t] > committed - WIN);
			ring[committed % WIN] = committed + 1
		};
		/* commit, under the engine lock */
		atomic { L == NONE -> L = t; acquire(t, g_L) };
		atomic {
			committed++;
			if
			:: own = true
			:: own = false
			fi;
			if
			:: own ->
				/* smc_own_pass; the reservation closes first */
				reserve_open = false;
				send_step(t);
				receive_own();
#ifdef BROKEN_POSTED_EARLY
				posted_mark = MAX(posted_mark, pushed);
				release(t, g_mark);
#else
				acquire(t, g_posting);
				own_posting++;
				release(t, g_posting);
#endif
				mine = pushed
			:: else ->
				post_from[t] = 0; post_to[t] = 0; post_at[t] = 0
			fi
		};
		atomic { END_SECTION_READY(t) -> end_section(t); reserve_open = (own -> reserve_open : false) };
		do
		:: atomic { posting[t] -> post_step(t) }
		:: else -> break
		od;
#ifndef BROKEN_POSTED_EARLY
		if
		:: own ->
			/* smc_own_posted: a CAS up to mine, then the decrement */
			atomic {
				acquire(t, g_mark);
				posted_mark = MAX(posted_mark, mine);
				release(t, g_mark)
			};
			atomic {
				acquire(t, g_posting);
				own_posting--;
				release(t, g_posting)
			}
		:: else -> skip
		fi
#endif
	:: else -> break
	od
}

active proctype predicate()
{
end_idle:
	do
	/* smc_predicate: something to push, or (a reserve waits) a mark to
	 * move */
	:: atomic { L == NONE && (committed != pushed || (posted_mark != pushed && own_posting == 0)) ->
		L = PRED; acquire(PRED, g_L);
		/* smc_trigger: what earlier passes pushed is posted, unless an
		 * own pass's post is under way */
		acquire(PRED, g_posting);
#ifdef BROKEN_MARK_IGNORES_OWN
		posted_mark = pushed;
		release(PRED, g_mark);
#else
		if
		:: own_posting == 0 ->
			posted_mark = pushed;
			release(PRED, g_mark)
		:: else -> skip
		fi;
#endif
		send_step(PRED);
		receive_own()
	};
		atomic { END_SECTION_READY(PRED) -> end_section(PRED) };
		do
		:: atomic { posting[PRED] -> post_step(PRED) }
		:: else -> break
		od
	od
}

/* The receiver: writes land in order (T2); its predicate takes what
 * sent_num covers and acknowledges. */
active proctype receiver()
{
	byte index, payload;
	mtype kind;
end_recv:
	do
	:: atomic {
		to_recv?kind, index, payload ->
		if
		:: kind == RING -> r_ring[index % WIN] = payload
		:: else -> r_sent = index
		fi
	}
	:: atomic {
		r_recv < r_sent ->
		do
		:: r_recv < r_sent ->
			assert(r_ring[r_recv % WIN] == r_recv + 1);
			r_recv++
		:: else -> break
		od;
		assert(nfull(to_send));
		to_send!r_recv
	}
	:: atomic { to_send?index -> c_recv = index }
	od
}

/* When nothing can move any more. */
active proctype checker()
{
	timeout ->
	assert(committed == QUOTA && deliv_own == QUOTA && r_recv == QUOTA && !reserve_open &&
	       L == NONE && P == NONE && !posting[0] && !posting[1] && !posting[PRED])
}

init
{
	atomic {
		run application(0);
		run application(1)
	}
}
