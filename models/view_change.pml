/*
 * The failure-driven view change, view 0 -> view 1, of src/view/: failure
 * reports and suspicion (view_failure.c), the membership thread's attempts
 * (view_thread.c: view_change), the blob exchange and the commit/lock rules
 * (view_exchange.c: exchange_blobs, commit, look), the ragged-edge trim
 * (trim.c: trim_compute, view_install.c: deliver_trim), the install and the
 * start-of-view rendezvous (view_install.c: install, meet,
 * gather_survivors).
 *
 * One process per member plays its membership thread. The control channel
 * (src/control/ctl.h: ctl_publish, ctl_collect) keeps, at every receiver,
 * the latest blob of each tag from each member; here a publish puts the
 * message in flight to every addressee (a later one of the same kind
 * replaces one still in flight: the receiver could only have seen it just
 * before the newer one), the net process delivers it into the receiver's
 * mailbox whenever it likes, in any order across kinds (the directory
 * channel keeps no order between tags), and drops what a crashed member
 * still had in flight, or not.
 *
 * Failures: a crash can strike a member at every step of its thread, up to
 * MAXCRASH members (the second one during the change when MAXCRASH >= 2);
 * the detector reports a crashed member to each live one, eventually, and
 * with FALSE_SUSP > 0 it may also report up to that many live members
 * (a stopped process, a partial partition: the asymmetric suspicion of
 * docs/VIEWS.md). A graceful leave is a crash of an idle member that
 * flushed everything first (its messages are stable): the same thing for
 * this protocol. Deadlines (EXCHANGE_TIMEOUTS failure timeouts) are pan's
 * timeout: they fire only when nothing else can move; an earlier deadline
 * only stops a member, which a crash at that step covers.
 *
 * The multicast is frozen at the wedge (smc_group_wedge: no trigger runs,
 * so received counts stop), so each member's blob counts are fixed and
 * nothing before the trim depends on them. The trim is checked, at each
 * install, against every SMC state the invariants allow (enumerated in one
 * step): each member received a prefix of each sender's positions, each
 * position is a message or a null, and each member passed, in round-robin
 * order, only nulls it held and messages every member, the failed
 * included, held (models/smc.pml).
 *
 * Properties:
 *  - one next view: no two members install different sets (assertion);
 *  - majority: the installed set's survivors are a majority of view 0
 *    (assertion);
 *  - same sequence: every member that installs computes the same trim
 *    and delivers, in round-robin order, every message within its
 *    sender's trim (Derecho's cleanup, view/trim.h), holding each of them;
 *    every message anyone (the failed included) delivered before is among
 *    them (assertions); a failed sender's message is thus delivered by
 *    all survivors or none;
 *  - termination (LTL, pan -a): with a majority alive and no false
 *    suspicion, every live member installs view 1 and starts it.
 *
 * Sizes: spin -DN=3 -DMAXCRASH=1 -DFALSE_SUSP=0 (members of view 0, N <= 5;
 * senders are members 0 and 1, each with up to MSGS messages). With
 * -DPRECRASH the change starts from a crash of member N - 1 that every
 * member already saw (one of the MAXCRASH), which cuts the search in
 * groups of four and five.
 *
 * Broken variants:
 *  BROKEN_NO_MAJORITY     no majority check of the next view
 *                         (view.c: view_check_majority skipped): must
 *                         yield a counterexample (scripts/check-models.sh)
 *  BROKEN_PREFIX_TRIM     the survivors deliver only up to the first
 *                         position one of them lacks (the trim before
 *                         nulls were passed unstable): a member that
 *                         passed a null another lacks delivered a message
 *                         beyond it, which the others would not; must
 *                         yield a counterexample
 * and three that the sizes checked so far do NOT catch (docs/MODELS.md,
 * "Not caught yet"): with three members a set has at most one other
 * survivor, so the commit and lock rules cannot go wrong there, and the
 * groups of five where they could are beyond an exhaustive search here:
 *  BROKEN_COMMIT_GREW     commit although this member's suspicion grew
 *                         (all_same checked before grew in exchange_blobs)
 *  BROKEN_LEAVE_LOCKED    a locked member still leaves its set when a
 *                         survivor names more rows
 *  BROKEN_LOCK_MINORITY   lock on the commitments of the survivors it does
 *                         not suspect, without a majority
 */

#ifndef N
#define N 3
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef FALSE_SUSP
#define FALSE_SUSP 0
#endif
#ifndef MSGS
#define MSGS 1 /* messages of each sender (members 0 and 1) */
#endif
#define NSEND 2

#define ALL ((1 << N) - 1)
#define BIT(x) (1 << (x))
#define HAS(m, x) (((m) >> (x)) & 1)
#define PRESENT 128
#define SET(v) ((v) & 127)

/* Message kinds: the step tags of view_impl.h (STEP_BLOB, STEP_COMMIT,
 * STEP_LOCK, STEP_READY). A value is the suspected set it names, with
 * PRESENT set; 0: none. */
#define BLOB 0
#define COMMIT 1
#define LOCK 2
#define READY 3
#define KINDS 4
#define MB(k, to, from) mbox[((k) * N + (to)) * N + (from)]
#define FL(k, from, to) flight[((k) * N + (from)) * N + (to)]

byte mbox[KINDS * N * N];   /* latest of kind k from `from` at `to` */
byte flight[KINDS * N * N]; /* published, not delivered yet */
byte pend[N];               /* messages in flight to each member */
bool dirty[N];              /* new input since the thread last looked */

bool alive[N];
byte alive_mask;
byte crashes, false_susp;
byte susp[N]; /* m->suspected, rows of view 0 */

/* Checks. */
byte installed_set; /* the first installed set, PRESENT set */
byte n_installed, n_done, n_alive;
/* Scratch of the trim check (one d_step; not part of the state). */
hidden byte recv[N * NSEND]; /* received counts at the wedge */
hidden byte ti, ts, tv, tw, tp, nul, prefix;
hidden byte trv[2 * NSEND]; /* trim vectors: this member's, the first installer's */

#define MAJORITY(m) (2 * (HAS(m, 0) + HAS(m, 1) + HAS(m, 2) + HAS(m, 3) + HAS(m, 4)) > N)

inline publish(k, val, to)
{
	for (i : 0 .. N - 1) {
		if
		:: HAS(to, i) && i != me ->
			pend[i] = pend[i] + (FL(k, me, i) == 0 -> 1 : 0);
			FL(k, me, i) = val | PRESENT
		:: else -> skip
		fi
	}
}

inline crash()
{
	crashes++;
	alive[me] = false;
	alive_mask = alive_mask & ~BIT(me);
	n_alive--;
	goto dead
}

/* Picks `out`, the k-th set bit of m (m != 0), k chosen freely. */
inline pick_bit(m, out)
{
	cnt = HAS(m, 0) + HAS(m, 1) + HAS(m, 2) + HAS(m, 3) + HAS(m, 4) + HAS(m, 5) + HAS(m, 6);
	select(pk : 1 .. cnt);
	out = 0;
	do
	:: HAS(m, out) && pk == 1 -> break
	:: HAS(m, out) && pk > 1 -> pk--; out++
	:: !HAS(m, out) -> out++
	od;
	cnt = 0;
	pk = 0
}

/* Failure reports (view_failure.c: view_on_failure), on the engine's
 * thread, at any time: a crashed member is reported eventually; with
 * FALSE_SUSP, up to that many live ones too. */
#define UNREPORTED (ALL & ~alive_mask & ~susp[me])
#define FALSELY (false_susp < FALSE_SUSP -> (alive_mask & ~susp[me] & ~BIT(me)) : 0)
inline report()
{
	cm = UNREPORTED | FALSELY;
	pick_bit(cm, x);
	if
	:: HAS(alive_mask, x) -> false_susp++
	:: else -> skip
	fi;
	susp[me] = susp[me] | BIT(x);
	dirty[me] = true;
	x = 0;
	cm = 0
}

/* The control channel delivers one message in flight to this member, or
 * drops it when its sender crashed. */
inline receive()
{
	/* the pk-th message in flight to me */
	select(pk : 1 .. pend[me]);
	x = 0;
	do
	:: FL(x / N % KINDS, x % N, me) != 0 && pk == 1 -> break
	:: FL(x / N % KINDS, x % N, me) != 0 && pk > 1 -> pk--; x++
	:: FL(x / N % KINDS, x % N, me) == 0 -> x++
	od;
	if
	:: MB(x / N, me, x % N) = FL(x / N, x % N, me); dirty[me] = true
	:: !HAS(alive_mask, x % N) -> skip /* lost with its sender */
	fi;
	FL(x / N, x % N, me) = 0;
	pend[me]--;
	x = 0;
	pk = 0
}

/* Scratch of one step, cleared so that it never tells states apart. */
#define CLEAR seen_c = 0; seen_l = 0; moved = 0; waived = 0; uni = 0; c = 0; i = 0; \
	all_same = false; lk = false

/* What can happen at every wait of the membership thread. */
#define CRASH :: atomic { crashes < MAXCRASH -> crash() }
#define EVENTS \
	CRASH \
	:: atomic { pend[me] > 0 -> receive() } \
	:: atomic { (UNREPORTED | FALSELY) != 0 -> report() }

/* trim.c: trim_compute over the blobs of the survivors of `set` (counts
 * in recv[]): trim[s] = min over the survivors of received[s], into
 * trv[base + s]. */
inline trim_of(set, base)
{
	for (ts : 0 .. NSEND - 1) {
		tv = 255;
		for (ti : 0 .. N - 1) {
			if
			:: !HAS(set, ti) && recv[ti * NSEND + ts] < tv -> tv = recv[ti * NSEND + ts]
			:: else -> skip
			fi
		}
		trv[base + ts] = tv
	}
}

/* Position p (sender p % NSEND, round p / NSEND) is an application
 * message (not a null) in the enumerated state. */
#define IS_MSG(p) (!((nul >> (p)) & 1))
/* The survivors deliver position p when it is a message within its
 * sender's trim (view/trim.h: Derecho's cleanup); BROKEN_PREFIX_TRIM:
 * only below the first position some survivor lacks, as before nulls
 * were passed unstable. */
#ifdef BROKEN_PREFIX_TRIM
#define TRIMMED(p) ((p) < prefix)
#else
#define TRIMMED(p) ((p) / NSEND < trv[(p) % NSEND])
#endif

/* view_install.c: deliver_trim (trim_compute, smc_group_deliver_trim)
 * for the set `mask`, checked against every SMC state at the wedge (see
 * the top): each member received a prefix of each sender's positions,
 * each position is a message or a null, and each member passed, in
 * round-robin order, only nulls it held and messages every member held
 * (models/smc.pml). Deterministic: the states are enumerated, not
 * chosen. */
inline trim_and_check()
{
	d_step {
		for (ti : 0 .. N * NSEND - 1) {
			recv[ti] = 0
		}
		nul = 0;
		do
		:: true ->
			trim_of(mask, 0);
			prefix = 255;
			for (ts : 0 .. NSEND - 1) {
				if
				:: trv[ts] * NSEND + ts < prefix -> prefix = trv[ts] * NSEND + ts
				:: else -> skip
				fi
			}
			/* this member holds every position the cleanup delivers */
			for (tp : 0 .. NSEND * MSGS - 1) {
				if
				:: IS_MSG(tp) && TRIMMED(tp) -> assert(recv[me * NSEND + tp % NSEND] > tp / NSEND)
				:: else -> skip
				fi
			}
			/* nothing delivered before, here or anywhere (failed members
			 * too), is left out: every message below the furthest each
			 * member can have passed is delivered by the cleanup, so a
			 * failed member's message is delivered by all survivors or
			 * none, and each survivor ends with the same messages */
			for (ti : 0 .. N - 1) {
				tp = 0;
				do
				:: tp == NSEND * MSGS -> break
				:: tp < NSEND * MSGS && !IS_MSG(tp) ->
					/* a null: passed by a member that holds it */
					if
					:: recv[ti * NSEND + tp % NSEND] > tp / NSEND -> tp++
					:: else -> break
					fi
				:: tp < NSEND * MSGS && IS_MSG(tp) ->
					/* a message: passed (delivered) once every member holds it */
					tv = 1;
					for (tw : 0 .. N - 1) {
						if
						:: recv[tw * NSEND + tp % NSEND] <= tp / NSEND -> tv = 0
						:: else -> skip
						fi
					}
					if
					:: tv -> assert(TRIMMED(tp)); tp++
					:: else -> break
					fi
				od
			}
			/* the same trim as the first member that installed */
			if
			:: installed_set != 0 ->
				trim_of(SET(installed_set), NSEND);
				for (ts : 0 .. NSEND - 1) {
					assert(trv[NSEND + ts] == trv[ts])
				}
			:: else -> skip
			fi;
			/* next state (odometer): counts, then the nulls */
			ti = 0;
			do
			:: ti < N * NSEND && recv[ti] < MSGS -> recv[ti]++; break
			:: ti < N * NSEND && recv[ti] == MSGS -> recv[ti] = 0; ti++
			:: ti == N * NSEND -> break
			od;
			if
			:: ti == N * NSEND && nul + 1 < (1 << (NSEND * MSGS)) -> nul++
			:: ti == N * NSEND && nul + 1 >= (1 << (NSEND * MSGS)) -> break
			:: else -> skip
			fi
		od;
		ti = 0; ts = 0; tv = 0; tw = 0; tp = 0; nul = 0; prefix = 0;
		for (ts : 0 .. 2 * NSEND - 1) {
			trv[ts] = 0
		}
		ts = 0
	}
}

proctype member(byte me)
{
	byte mask, tried, attempts, others, seen_c, seen_l, moved, waived, uni, c, i;
	byte x, pk, cnt, cm;
	bool locked, all_same, lk;

	/* view_thread.c: membership_main, idle until a failure report */
end_idle:
	do
	:: susp[me] != 0 -> break
	EVENTS
	od;
	/* view_thread.c: view_change; view_failure.c: view_wedge (the counts
	 * freeze, see the top) */
retry:
	atomic {
		mask = susp[me];
		/* an attempt is never repeated under the same set */
		if
		:: attempts > 0 && mask == tried -> goto stopped
		:: else -> skip
		fi;
		tried = mask;
		attempts++;
		/* view.c: view_check_majority */
#ifndef BROKEN_NO_MAJORITY
		if
		:: HAS(mask, me) || !MAJORITY(ALL & ~mask) -> goto stopped
		:: else -> skip
		fi;
#endif
		others = ALL & ~mask & ~BIT(me);
		/* view_exchange.c: exchange_blobs, publish this member's blob */
		publish(BLOB, mask, others);
		dirty[me] = true;
		i = 0
	}
	/* exchange_blobs: gather until every survivor's latest blob names
	 * exactly this set */
exchange:
	do
	:: atomic {
		dirty[me] ->
		dirty[me] = false;
		/* read_blobs */
		uni = mask;
		all_same = true;
		for (i : 0 .. N - 1) {
			if
			:: HAS(others, i) ->
				c = MB(BLOB, me, i);
				if
				:: c & PRESENT ->
					uni = uni | SET(c);
					all_same = all_same && SET(c) == mask
				:: else -> all_same = false /* rc != 0: not all there */
				fi
			:: else -> skip
			fi
		}
		if
		:: uni != mask -> susp[me] = susp[me] | uni /* view_adopt_suspicion */
		:: else -> skip
		fi;
#ifdef BROKEN_COMMIT_GREW
		if
		:: all_same -> CLEAR; goto commit
		:: else -> skip
		fi;
#endif
		/* suspicion is checked first */
		if
		:: susp[me] != mask -> CLEAR; goto retry /* SPINDLE_ETIMEDOUT */
		:: all_same -> CLEAR; goto commit
		:: else -> skip
		fi;
		CLEAR
	}
	:: timeout -> goto stopped /* SPINDLE_EMINORITY at the deadline */
	EVENTS
	od;

	/* view_exchange.c: commit */
commit:
	atomic {
		publish(COMMIT, mask, others);
		locked = false;
		dirty[me] = true;
		i = 0
	}
	do
	:: atomic {
		dirty[me] ->
		dirty[me] = false;
		/* look: commitments, locks and blobs of the others */
		seen_c = 0;
		seen_l = 0;
		moved = 0;
		for (i : 0 .. N - 1) {
			if
			:: HAS(others, i) ->
				c = MB(COMMIT, me, i);
				if
				:: c & PRESENT ->
					seen_c = seen_c | (SET(c) == mask -> BIT(i) : 0);
					moved = moved | (SET(c) & ~mask)
				:: else -> skip
				fi;
				c = MB(LOCK, me, i);
				if
				:: c & PRESENT ->
					seen_l = seen_l | (SET(c) == mask -> BIT(i) : 0);
					seen_c = seen_c | (SET(c) == mask -> BIT(i) : 0);
					moved = moved | (SET(c) & ~mask)
				:: else -> skip
				fi;
				c = MB(BLOB, me, i);
				if
				:: c & PRESENT -> moved = moved | (SET(c) & ~mask)
				:: else -> skip
				fi
			:: else -> skip
			fi
		}
		waived = susp[me] & others;
		lk = (seen_c == others) || seen_l != 0 ||
#ifdef BROKEN_LOCK_MINORITY
		     ((seen_c | waived) == others);
#else
		     ((seen_c | waived) == others && MAJORITY(seen_c | BIT(me)));
#endif
		if
#ifdef BROKEN_LEAVE_LOCKED
		:: !lk && moved != 0 ->
#else
		:: !locked && !lk && moved != 0 ->
#endif
			susp[me] = susp[me] | moved;
			CLEAR;
			goto retry /* SPINDLE_ETIMEDOUT */
		:: else -> skip
		fi;
		if
		:: !locked && lk ->
			publish(LOCK, mask, others);
			locked = true
		:: else -> skip
		fi;
		if
		:: seen_c == others -> CLEAR; goto install /* (I1) */
		:: locked && (seen_l | waived) == others && MAJORITY(seen_l | BIT(me)) ->
			CLEAR;
			goto install /* (I2) */
		:: else -> skip
		fi;
		CLEAR
	}
	:: timeout -> goto stopped /* EUNREACH when locked, else EMINORITY */
	EVENTS
	od;

	/* view_install.c: prepare (deliver_trim), install, meet */
install:
	atomic {
		trim_and_check();
		/* one next view, and a majority of view 0 */
		assert(MAJORITY(ALL & ~mask));
		if
		:: installed_set == 0 -> installed_set = mask | PRESENT
		:: else -> assert(installed_set == (mask | PRESENT))
		fi;
		n_installed++;
		/* meet: ready to the survivors */
		publish(READY, mask, ALL & ~mask);
		dirty[me] = true;
		i = 0
	}
	/* gather_survivors: the survivors' readies, except from those
	 * suspected meanwhile (the next change removes them) */
meet:
	do
	:: atomic {
		dirty[me] ->
		dirty[me] = false;
		all_same = true;
		for (i : 0 .. N - 1) {
			if
			:: HAS(others, i) && !HAS(susp[me], i) && !(MB(READY, me, i) & PRESENT) ->
				all_same = false
			:: else -> skip
			fi
		}
		if
		:: all_same -> n_done++; CLEAR; goto end_done
		:: else -> skip
		fi;
		CLEAR
	}
	:: timeout -> goto stopped /* installed: SPINDLE_EUNREACH */
	EVENTS
	od;
end_done:
	skip;
	goto end_final;
stopped:
	skip;
end_final:
	skip;
dead:
	skip;
	/* a finished thread's variables tell no states apart */
	d_step {
		mask = 0; tried = 0; attempts = 0; others = 0;
		x = 0; pk = 0; cnt = 0; cm = 0; locked = false;
		CLEAR
	}
}

init
{
	byte x;
	atomic {
		n_alive = N;
		alive_mask = ALL;
		for (x : 0 .. N - 1) {
			alive[x] = true
		}
#ifdef PRECRASH
		/* the first failure already happened and every member saw it:
		 * member N - 1 crashed (one of the MAXCRASH) */
		alive[N - 1] = false;
		alive_mask = ALL & ~BIT(N - 1);
		n_alive--;
		crashes++;
		for (x : 0 .. N - 2) {
			susp[x] = BIT(N - 1)
		}
#endif
		for (x : 0 .. N - 1) {
#ifdef PRECRASH
			if
			:: x == N - 1 -> break
			:: else -> skip
			fi;
#endif
			run member(x)
		}
	}
}

/* Termination: with a majority alive and no false suspicion, every live
 * member installs view 1 and meets the others in it. */
#define LIVE_DONE (n_alive > 0 && n_done == n_alive)
ltl terminates { <> LIVE_DONE }
