/*
 * SMC delivery with null-sends (Spindle 3.2, 3.3): one atomic subgroup,
 * failure-free, batching on (the default, src/group/group_create.c).
 *
 * Modelled after src/smc/smc_predicate.c, src/smc/smc_send.c and the push
 * rules of src/sst/sst.h. One process per member plays both its predicate
 * thread (smc_trigger, run only while smc_predicate holds) and its
 * application thread (smc_reserve + smc_commit, and the commit's own send
 * of smc_commit_send_pass over libfabric): all run under the engine lock,
 * and the commit's send posts before releasing it, so each of their steps
 * is one atomic step here. The one-sided writes
 * addressed to a member land whenever the model chooses, one at a time.
 *
 * What travels, and how (src/sst/sst.h: sst_push, sst_push_side):
 *  - a push is one write per peer, applied at the peer in call order (T2):
 *    one FIFO channel per ordered pair of members;
 *  - a queued push reads its source when it is posted, after the trigger
 *    released the engine lock: a write carries the values the trigger left
 *    (two pushes of sent_num in one trigger carry the same value);
 *  - writes are delayed arbitrarily, never lost (no failure here: the view
 *    change model covers failures).
 *
 * Abstracted away (docs/MODELS.md): payloads (a message is its sender and
 * its application index), the wrap of the slot header's position field
 * (positions stay tiny), several subgroups, unordered mode, the
 * heartbeat, the wake-ups of blocked reservers (a sender just waits until
 * its slot is free), non-batching mode. The own pass of unordered subgroups
 * (own_inline) has a model of its own: models/own_pass.pml.
 *
 * Sizes: spin -DNM=3 -DNS=2 -DWIN=1 -DMSGS=1 ... (members, senders = members
 * 0..NS-1, window_size, messages each sender may commit; NM <= 4, NS <= 3).
 *
 * Properties (assertions unless said otherwise):
 *  - no duplicate, no gap, sender order: member j delivers message a of
 *    sender s only as the a-th message of s it delivers;
 *  - total order agreement: every member delivers the same sequence;
 *  - stability: a message is delivered only once every member holds it,
 *    and a null is passed only by a member that holds it (what the
 *    ragged-edge trim relies on, src/view/trim.h); a null need not be
 *    held by the others, which saves the round of acknowledgements of
 *    the nulls that a message of a later rank used to wait for;
 *  - no busy predicate: a trigger run because the predicate held changes
 *    something;
 *  - quiescence: no sender ever needs more than NS * MSGS positions (a
 *    null-send storm would run past it);
 *  - every committed message delivered: when nothing can move any more
 *    (pan's timeout), every member delivered every committed message and
 *    every sender stopped on its own (the checker process); with the state
 *    graph acyclic (every step grows a counter or consumes a write) this is
 *    the liveness property, and the LTL claim below says it again for the
 *    acceptance-cycle search (pan -a -f).
 *
 * Broken variants (each must yield a counterexample, scripts/check-models.sh):
 *  BROKEN_DELIVER_UNSTABLE  deliver what this member received, before every
 *                           member holds it
 *  BROKEN_NO_NULLS          no null-sends at all
 *  BROKEN_NULL_AHEAD        a null answers one round more than needed
 *  BROKEN_GUARD_FIRST       sent_num is pushed before the ring slots it
 *                           covers (breaks T2)
 *  BROKEN_PASS_UNRECEIVED_NULL  pass a null its sender published but this
 *                           member has not received (the trim could then
 *                           not tell that member's stream from the others')
 */

#ifndef NM
#define NM 3 /* members */
#endif
#ifndef NS
#define NS 2 /* senders: members 0 .. NS-1 */
#endif
#ifndef WIN
#define WIN 1 /* window_size */
#endif
#ifndef MSGS
#define MSGS 1 /* messages each sender may commit */
#endif
#ifndef CAP
#define CAP 12 /* writes in flight per ordered pair; asserted, never silently full */
#endif

#define MAXPOS (NS * MSGS)
#define OLDER 255 /* SMC_HEADER_OLDER */

mtype = { RING, SENT, ACK };

/* One-sided writes from member f to member j: link[f * NM + j] (FIFO, T2).
 * RING(slot, position, app index); SENT(sent_num); ACK(received_num[0..2],
 * delivered_num). */
chan link[NM * NM] = [CAP] of { mtype, byte, byte, byte, byte };
chan nolink[4] = [1] of { mtype, byte, byte, byte, byte }; /* NM < 4 */

/* Checks only (ghosts): who holds what, the first delivery order. */
byte holds[NM * NS];  /* recv_position of member m for sender s */
byte glog[NS * MSGS]; /* s * MSGS + app + 1 */
byte total_committed;
byte total_delivered; /* over all members */
byte total_quota;     /* messages the senders will commit */
byte gnext[NS];                   /* next_position of each sender */
bool gmsg[NS * (NS * MSGS + 1)];  /* position holds an application message */

#if NM > 3
#define IN3(x) link[3 * NM + (x)]
#else
#define IN3(x) nolink[x]
#endif
#define RI(s, k) ((s) * WIN + (k))

/* The steps below are expanded inside proctype member and use its
 * variables. */

#define SCRATCH_RESET() \
	kind = 0; f1 = 0; f2 = 0; f3 = 0; f4 = 0; i = 0; s = 0; k = 0; v = 0; \
	snt = 0; dist = 0; nxt = 0; rnd = 0; needed = 0; before = 0; \
	pub = 0; ack = 0; progress = 0; canpass = false

/* One write to peer p (link[j * NM + p]). */
inline send_to(p, kd, a1, a2, a3, a4)
{
	assert(nfull(link[j * NM + p]));
	link[j * NM + p]!kd, a1, a2, a3, a4
}

/* smc_predicate.c: passable (the delivery rule). Position delivered =
 * (sender s, round rnd) may be passed when this member holds it
 * (recv_position[s] > rnd) and it is a null, or it is an application
 * message every member holds (received_num[m][s] > rnd at every member m,
 * read from this member's copies of the rows; its own row is local). A
 * null need not be held by the others (Spindle 3.3 nulls carry nothing to
 * deliver): the trim delivers every message within its sender's trim
 * (view/trim.h), so no survivor depends on another's passing a null.
 * Sets canpass. */
inline passable()
{
	s = delivered % NS;
	rnd = delivered / NS;
	k = deliv_app[s] % WIN;
	canpass = false;
	if
	:: recv_position[s] > rnd ->
		if
		:: deliv_app[s] < recv_app[s] && app_position[RI(s, k)] == rnd ->
			canpass = true;
			for (i : 0 .. NM - 1) {
#ifdef BROKEN_DELIVER_UNSTABLE
				v = recv_position[s];
#else
				v = (i == j -> recv_position[s] : c_recv[i * NS + s]);
#endif
				if
				:: v <= rnd -> canpass = false
				:: else -> skip
				fi
			}
		:: else -> canpass = true /* a null this member holds */
		fi
#ifdef BROKEN_PASS_UNRECEIVED_NULL
	/* a null the sender published that this member has not received:
	 * passed on the sender's word alone (ghost knowledge) */
	:: recv_position[s] <= rnd && rnd < gnext[s] && !gmsg[s * MAXPOS + rnd] -> canpass = true
	:: else -> skip
#else
	:: else -> skip
#endif
	fi
}

/* smc_predicate.c: subgroup_has_work; smc_send.c: smc_slot_free. */
inline after_step()
{
	work = (j < NS && committed != pushed);
	for (s : 0 .. NS - 1) {
		snt = (s == j -> published : c_sent[s]);
		if
		:: snt > recv_position[s] -> work = true
		:: else -> skip
		fi
	}
	passable();
	if
	:: canpass -> work = true
	:: else -> skip
	fi;
	slot_free = true;
	if
	:: j < NS && committed >= WIN ->
		/* the message in the slot the next commit reuses: every member
		 * delivered it (delivered_num > its sequence number) */
		needed = slot_position[committed % WIN] * NS + j;
		for (i : 0 .. NM - 1) {
			v = (i == j -> delivered : c_deliv[i]);
			if
			:: v <= needed -> slot_free = false
			:: else -> skip
			fi
		}
	:: else -> skip
	fi
}

/* smc_send.c: smc_commit. The position is taken at commit, not at
 * reserve: nulls may have been sent in between (Spindle 3.3). */
inline commit()
{
	k = committed % WIN;
	slot_position[k] = next_position;
	ring_pos[RI(j, k)] = next_position + 1;
	ring_app[RI(j, k)] = committed;
	gmsg[j * MAXPOS + next_position] = true;
	next_position++;
	gnext[j] = next_position;
	committed++;
	total_committed++
}

/* A write from peer f lands in this member's memory. */
inline land(f)
{
	if
	:: kind == RING ->
		ring_pos[RI(f, f1)] = f2 + 1;
		ring_app[RI(f, f1)] = f3
	:: kind == SENT -> c_sent[f] = f1
	:: kind == ACK ->
		c_recv[f * NS + 0] = f1;
		if
		:: NS > 1 -> c_recv[f * NS + 1 % NS] = f2
		:: else -> skip
		fi;
		if
		:: NS > 2 -> c_recv[f * NS + 2 % NS] = f3
		:: else -> skip
		fi;
		c_deliv[f] = f4
	fi
}

/* A delivery upcall, with the checks of the properties. */
inline deliver(s, app, rnd)
{
	/* no duplicate, no gap, sender order */
	assert(app == deliv_app[s]);
	/* stable: every member holds it */
	for (i : 0 .. NM - 1) {
		assert(holds[i * NS + s] > rnd)
	}
	/* total order agreement */
	if
	:: glog[logpos] == 0 -> glog[logpos] = s * MSGS + app + 1
	:: else -> assert(glog[logpos] == s * MSGS + app + 1)
	fi;
	logpos++;
	total_delivered++
}

/* smc_predicate.c: send_step: every committed slot in one write per peer,
 * then the counter that covers them (T2) */
inline send_part()
{
	if
	:: j < NS && committed != pushed ->
#ifdef BROKEN_GUARD_FIRST
		published = next_position;
		for (i : 0 .. NM - 1) {
			if
			:: i != j -> send_to(i, SENT, published, 0, 0, 0)
			:: else -> skip
			fi
		}
#endif
		for (v : pushed .. committed - 1) {
			k = v % WIN;
			for (i : 0 .. NM - 1) {
				if
				:: i != j -> send_to(i, RING, k, slot_position[k], v, 0)
				:: else -> skip
				fi
			}
		}
		pushed = committed;
		/* pushed == committed: sent_num = next_position (publish) */
		if
		:: published != next_position ->
			published = next_position;
			pub = 1
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* receive_step / receive_sender: positions whose slot does not hold the
 * next application message are nulls; with own_only, this member's own
 * positions alone (receive_senders(me, me + 1), smc_commit_send_pass) */
inline receive_part(own_only)
{
	for (s : 0 .. NS - 1) {
		if
		:: own_only && s != j -> skip
		:: else ->
		snt = (s == j -> published : c_sent[s]);
		before = recv_position[s];
		do
		:: recv_position[s] < snt ->
			k = recv_app[s] % WIN;
			/* smc_header_distance */
			if
			:: ring_pos[RI(s, k)] == 0 -> dist = OLDER
			:: ring_pos[RI(s, k)] - 1 >= recv_position[s] ->
				dist = ring_pos[RI(s, k)] - 1 - recv_position[s]
			:: else -> dist = OLDER
			fi;
			if
			:: dist == 0 ->
				assert(ring_app[RI(s, k)] == recv_app[s]);
				app_position[RI(s, k)] = recv_position[s];
				recv_app[s]++;
				recv_position[s]++
			:: else ->
				nxt = (dist != OLDER -> recv_position[s] + dist : snt);
				recv_position[s] = (nxt < snt -> nxt : snt)
			fi
		:: else -> break
		od;
		if
		:: recv_position[s] != before ->
			holds[j * NS + s] = recv_position[s];
			ack = 1
		:: else -> skip
		fi
		fi
	}
}

/* null_step (Spindle 3.3): for every sender s whose position k we hold,
 * this sender must have sent k when j < s, k - 1 when j > s; only when
 * nothing of ours is pending */
inline null_part()
{
#ifndef BROKEN_NO_NULLS
	if
	:: j < NS && committed == pushed ->
		needed = 0;
		for (s : 0 .. NS - 1) {
			if
			:: s != j && recv_position[s] > 0 ->
				rnd = recv_position[s] - 1;
#ifdef BROKEN_NULL_AHEAD
				v = (j < s -> rnd + 2 : rnd + 1);
#else
				v = (j < s -> rnd + 1 : rnd);
#endif
				if
				:: v > needed -> needed = v
				:: else -> skip
				fi
			:: else -> skip
			fi
		}
		if
		:: needed > next_position ->
			next_position = needed;
			gnext[j] = needed;
			published = needed;
			pub = 1
		:: else -> skip
		fi
	:: else -> skip
	fi;
#endif
	skip
}

/* delivery_step / smc_deliver_range: in round-robin order, every null this
 * member holds and every message all members hold; nulls are skipped */
inline deliver_part()
{
	do
	:: true ->
		passable();
		if
		:: !canpass -> break
		:: else -> skip
		fi;
		/* what the trim relies on (view/trim.h): a position is passed
		 * only by a member that holds it */
		assert(holds[j * NS + s] > rnd);
		delivered++;
		ack = 1;
		if
		:: deliv_app[s] < recv_app[s] && app_position[RI(s, k)] == rnd ->
			deliver(s, ring_app[RI(s, k)], rnd);
			deliv_app[s]++
		:: else -> skip /* a null */
		fi
	od
}

/* The writes, posted when the step ends, in call order per peer: sent_num
 * (publish), then received_num[] + delivered_num in one write (ack_dirty);
 * then the step's checks. */
inline post_part()
{
	for (i : 0 .. NM - 1) {
		if
		:: i != j && pub -> send_to(i, SENT, published, 0, 0, 0)
		:: else -> skip
		fi;
		if
		:: i != j && ack ->
			nxt = (NS > 1 -> recv_position[1 % NS] : 0);
			rnd = (NS > 2 -> recv_position[2 % NS] : 0);
			send_to(i, ACK, recv_position[0], nxt, rnd, delivered)
		:: else -> skip
		fi
	}
	/* quiescence: no null-send storm */
	assert(next_position <= MAXPOS);
	/* no busy step: it changed something */
	v = pushed + published + delivered;
	for (s : 0 .. NS - 1) {
		v = v + recv_position[s]
	}
	assert(v > progress)
}

inline progress_before()
{
	progress = pushed + published + delivered;
	for (s : 0 .. NS - 1) {
		progress = progress + recv_position[s]
	}
}

/* smc_predicate.c: smc_trigger (one subgroup, batching on). */
inline trigger()
{
	progress_before();
	send_part();
	receive_part(false);
	null_part();
	deliver_part();
	post_part()
}

/* smc_predicate.c: smc_commit_send_pass, the committing thread's send
 * while the predicate thread sleeps (libfabric): the pass's send step,
 * receipt of its own positions, nulls and the acknowledgement, posted
 * before the lock is released; no delivery. The code runs it only for an
 * idle sender (everything earlier delivered) whose predicate thread
 * sleeps; here it may run whenever something is committed and unpushed,
 * which covers those cases and more. */
inline commit_send()
{
	progress_before();
	send_part();
	receive_part(true);
	null_part();
	post_part()
}

proctype member(byte j; byte quota; chan in0, in1, in2, in3)
{
	xr in0; xr in1; xr in2; xr in3;

	/* Sender side (smc_impl.h: struct smc_subgroup). */
	byte committed, pushed, next_position, published;
	byte slot_position[WIN];
	/* the sender commits quota messages (chosen at the start), then is
	 * idle for good: only its null-sends let the others deliver then */
	/* Receiver side (struct smc_sender), by sender rank. */
	byte recv_position[NS], recv_app[NS], deliv_app[NS];
	byte app_position[NS * WIN];
	byte delivered;
	byte logpos; /* deliveries so far (checks) */
	/* Ring copies: slot header (position + 1, 0: never written) and the
	 * message (application index) of slot k of sender s. A sender's own
	 * ring is written by its commits. */
	byte ring_pos[NS * WIN], ring_app[NS * WIN];
	/* Copies of the other rows, landed by one-sided writes. */
	byte c_sent[NS], c_recv[NM * NS], c_deliv[NM];
	/* Derived: smc_predicate, smc_slot_free. */
	bool work, slot_free = true;
	/* Scratch (reset after each step, not part of the state). */
	byte kind, f1, f2, f3, f4, i, s, k, v, snt, dist, nxt, rnd, needed, before;
	bool canpass;
	byte pub, ack, progress;

end:
	do
	/* smc_predicate true: smc_trigger */
	:: d_step { work -> trigger(); after_step(); SCRATCH_RESET() }
	/* application: smc_commit's own send (smc_commit_send_pass) */
	:: d_step { j < NS && committed != pushed -> commit_send(); after_step(); SCRATCH_RESET() }
	/* application: smc_reserve (waits for a free slot), smc_commit */
	:: d_step { committed < quota && slot_free -> commit(); after_step(); SCRATCH_RESET() }
	/* a write lands (FIFO per peer) */
	:: d_step { nempty(in0) -> in0?kind, f1, f2, f3, f4; land(0); after_step(); SCRATCH_RESET() }
	:: d_step { nempty(in1) -> in1?kind, f1, f2, f3, f4; land(1); after_step(); SCRATCH_RESET() }
	:: d_step { nempty(in2) -> in2?kind, f1, f2, f3, f4; land(2); after_step(); SCRATCH_RESET() }
	:: d_step { nempty(in3) -> in3?kind, f1, f2, f3, f4; land(3); after_step(); SCRATCH_RESET() }
	od
}

/* When nothing can move any more: every committed message was delivered by
 * every member and every sender stopped on its own. */
active proctype checker()
{
	timeout ->
	assert(total_committed == total_quota && total_delivered == NM * total_quota)
}

init
{
	byte q;
	byte quota[NS];
	atomic {
		/* how many messages each sender commits: 0 .. MSGS */
		for (q : 0 .. NS - 1) {
			if
			:: quota[q] = 0
			:: MSGS >= 1 -> quota[q] = 1
			:: MSGS >= 2 -> quota[q] = 2
			:: MSGS >= 3 -> quota[q] = 3
			fi;
			total_quota = total_quota + quota[q]
		}
		run member(0, quota[0], link[0], link[NM], link[2 * NM], IN3(0));
		run member(1, (NS > 1 -> quota[1 % NS] : 0), link[1], link[NM + 1], link[2 * NM + 1], IN3(1));
		run member(2, (NS > 2 -> quota[2 % NS] : 0), link[2], link[NM + 2], link[2 * NM + 2], IN3(2));
#if NM > 3
		run member(3, 0, link[3], link[NM + 3], link[2 * NM + 3], link[3 * NM + 3]);
#endif
	}
}

/* Every committed message is delivered by every member and the group then
 * stays quiet (no write in flight is implied: a write in flight can land).
 * pan -a -f (weak fairness). */
#define ALL_DELIVERED (total_delivered == NM * total_quota)
ltl delivered { <> [] ALL_DELIVERED }
