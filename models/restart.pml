/*
 * Total restart, src/view/view_restart.c: the members of the latest view
 * V* (ids 0..N-1) come back after all of them stopped and elect the one
 * that starts the group again; the others join it.
 *
 * Each member has a rank, fixed by its log (a later latest view, then more
 * messages of it, then the lower id: view_restart_better), a vote (a member
 * id, at first itself) and a running flag. A member learns of a peer only
 * by asking it: the answer is the peer's state at that moment (vote,
 * running, rank). A round of member R (one pass of elect's loop):
 *  - ask every other member (ask); one that is not up, has
 *    crashed, or whose answer is lost does not answer;
 *  - then decide, on those answers, which may be stale by now:
 *    1. a peer answered running: R joins it (view_restart_decide: FOLLOW; follow), for
 *       good;
 *    2. the vote (view_restart_decide): voting for itself, R votes for the
 *       best-ranked member it heard this round if that one is better than
 *       R; voting for X != R, R moves only when X answered released (X's
 *       vote is not X and X is not running), to the best-ranked member it
 *       heard this round (itself included); when X did not answer, R keeps
 *       its vote: it waits;
 *    3. the start (view_restart_decide: START; start_group): voting for itself, with more than
 *       N/2 members (R included) voting for R in this round's answers, and
 *       a member of each logged subgroup heard this round (a source:
 *       view_restart_source), R starts a group (running; it never votes
 *       again). Member SOURCE (N - 1, the worst-ranked) stands for the
 *       only member of a logged subgroup the others do not log: R starts
 *       only when it answered this round (or R is it).
 * Rounds repeat (elect). A member that joined answers with its
 * vote set to the member it joined, not running.
 *
 * Here each question is one atomic step (the peer's state at that moment),
 * and R keeps of the answers only what its decision reads: the best rank
 * heard, how many voted for R (when R votes for itself), whether its
 * candidate answered and released it, and a running member heard. The
 * decision is a later step of its own, so every answer may be stale by
 * then, each from a different moment.
 *
 * Why one starter (what the assertions check): a member leaves its own
 * vote only for a better member, and then never votes for itself again
 * (the best member heard, when its candidate releases it, is at least that
 * candidate, which answered: ranks do not change). So a member that starts
 * voted for itself from the beginning and never released anyone, and a
 * member that counted for it goes on voting for it (or joins it): no
 * other member can gather a majority, before or after.
 *
 * Ranks: member i has rank N - i (member 0 is the best). The protocol
 * uses ids only through ranks and votes, so every order of ranks is this
 * one up to a renaming of the members, and every subset of members is
 * explored; -DALL_RANKS chooses every permutation instead (a check of
 * that argument).
 *
 * Faults: up to MAXDOWN members never come up; the others come up at any
 * time (a member that is not up yet does not answer); up to MAXCRASH
 * members crash at any time after coming up (also after starting or
 * joining) and never answer again; with LOSS, any answer of a live member
 * may be lost (a slow peer, a partition: the asker waits as for a crashed
 * one).
 *
 * Properties:
 *  - at most one member ever starts (assertion at the start);
 *  - a member that joins joins the one that started (assertion);
 *  - with no crash, no lost answer, a majority up and SOURCE up (LTL
 *    `elected`, pan -a -f): eventually a member started and every up
 *    member runs or joined it (with SOURCE never up, no member starts: the
 *    group does not restart without a logged subgroup's history). Weak fairness is needed: rounds repeat while a member waits, so
 *    without it one member could ask for ever while another never moves;
 *  - with crashes (LTL `elected_or_waits`, pan -a -f): eventually the same,
 *    or a live member's vote names a crashed member, or at most half the
 *    members are alive, or SOURCE is not. `elected` fails then (scripts/check-models.sh
 *    checks that it does): a voter of a member that crashed before
 *    starting waits for it for ever (restarting the waiting process
 *    withdraws its vote); and when the starter crashes after some joined
 *    it, a member that had not joined yet (one that comes up late) waits
 *    for ever too, voting for itself: the votes it would need stay with
 *    the crashed starter.
 *
 * The printf lines (MSC: ...) tell a replayed trail (spin -t) in the
 * protocol's terms; pan ignores them.
 *
 * Sizes: spin -DN=3 or -DN=4 (N <= 4 for the LTL claims and ALL_RANKS; a
 * safety run takes N = 5), -DMAXDOWN=N -DMAXCRASH=N -DLOSS=1 for every
 * fault.
 *
 * Broken variants (scripts/check-models.sh, each must fail):
 *  BROKEN_SWITCH_VOTE  a member moves its vote to a better member heard
 *                      while the member it votes for has not released it
 *  BROKEN_NO_MAJORITY  a member starts with half the votes
 *  BROKEN_DROP_SILENT  a member whose candidate does not answer moves its
 *                      vote as if the candidate had released it
 */

#ifndef N
#define N 3
#endif
#ifndef MAXDOWN
#define MAXDOWN N
#endif
#ifndef MAXCRASH
#define MAXCRASH 0
#endif
#ifndef LOSS
#define LOSS 0
#endif

#define NONE 255
#define SOURCE (N - 1)
#define BIT(x) (1 << (x))
#define HAS(m, x) (((m) >> (x)) & 1)

/* state of a member */
#define DOWN 0    /* never comes up */
#define PENDING 1 /* comes up later */
#define UP 2      /* answers */
#define CRASHED 3 /* answered before, never again */

byte state[N];
byte rank[N];    /* larger is better */
byte vote[N];
bool running[N];
byte joined[N];  /* the member it joined, or NONE */
byte starters;   /* members that started */
byte starter = NONE; /* the first of them */
byte downs;
byte crashes;

/* the first member a round asks */
#define FIRST (me == 0 -> 1 : 0)

/* forget the round, so that it does not tell states apart */
inline forget()
{
	i = FIRST;
	best = me;
	count = 1;
	cand_heard = false;
	cand_released = false;
	src_heard = (me == SOURCE);
	run_peer = NONE
}

proctype member(byte me)
{
	/* the round: the next member to ask, and what the answers told */
	byte i = FIRST;
	byte best = me;       /* the best-ranked member heard, or itself */
	byte count = 1;       /* members voting for this one, itself included */
	bool cand_heard;      /* the member it votes for answered */
	bool cand_released;   /* and released it */
	byte run_peer = NONE; /* a member that answered running */
	bool src_heard = (me == SOURCE); /* SOURCE answered (or is this one) */

	atomic { state[me] = UP; printf("MSC: %d up\n", me) };
	do
	:: /* ask: ask member i (an answer is its state now) */
		atomic {
			i < N ->
			if
			:: state[i] == UP ->
				printf("MSC: %d asks %d: vote %d running %d\n", me, i, vote[i], running[i]);
				if
				:: rank[i] > rank[best] -> best = i
				:: else
				fi;
				if
				:: vote[i] == me && vote[me] == me -> count++
				:: else
				fi;
				if
				:: i == vote[me] ->
					cand_heard = true;
					cand_released = (vote[i] != i && !running[i])
				:: else
				fi;
				if
				:: running[i] && run_peer == NONE -> run_peer = i
				:: else
				fi;
				if
				:: i == SOURCE -> src_heard = true
				:: else
				fi
#if LOSS
			:: state[i] == UP -> /* the answer is lost */
				printf("MSC: %d asks %d: lost\n", me, i)
#endif
			:: else /* not up, or crashed */
			fi;
			i++;
			if
			:: i == me -> i++
			:: else
			fi
		}
	:: /* every member asked: decide on the answers, stale by now */
		atomic {
			i == N ->
			/* 1. view_restart_decide: FOLLOW */
			if
			:: run_peer != NONE ->
				assert(run_peer == starter);
				joined[me] = run_peer;
				printf("MSC: %d joins %d\n", me, run_peer);
				vote[me] = run_peer;
				forget();
				goto end_settled
			:: else
			fi;
			/* 2. view_restart_decide: the vote */
			if
			:: vote[me] == me -> vote[me] = best
			:: vote[me] != me && cand_released -> vote[me] = best
#ifdef BROKEN_SWITCH_VOTE
			:: vote[me] != me && !cand_released && rank[best] > rank[vote[me]] -> vote[me] = best
#endif
#ifdef BROKEN_DROP_SILENT
			:: vote[me] != me && !cand_heard -> vote[me] = best
#endif
			:: else /* it waits */
			fi;
			printf("MSC: %d decides: vote %d\n", me, vote[me]);
			/* 3. view_restart_decide: START */
			if
#ifdef BROKEN_NO_MAJORITY
			:: vote[me] == me && 2 * count >= N ->
#else
			:: vote[me] == me && 2 * count > N && src_heard ->
#endif
				printf("MSC: %d starts with %d votes\n", me, count);
				running[me] = true;
				starters++;
				assert(starters == 1);
				starter = me;
				forget();
				goto end_settled
			:: else
			fi;
			forget()
		}
	:: /* a crash (between rounds: a round's questions change nothing) */
		atomic { i == FIRST && crashes < MAXCRASH -> crashes++; state[me] = CRASHED;
			printf("MSC: %d crashes\n", me); goto gone }
	od;
	/* started or joined: it may still crash; the skip keeps weak fairness
	 * from forcing it to */
end_settled:
	do
	:: atomic { crashes < MAXCRASH -> crashes++; state[me] = CRASHED;
		printf("MSC: %d crashes\n", me); break }
	:: crashes < MAXCRASH -> skip
	od;
gone:
	skip
}

init {
	byte i;
	byte used;
	atomic {
		i = 0;
		do
		:: i == N -> break
		:: i < N ->
#ifdef ALL_RANKS
			if
			:: !HAS(used, 0) -> rank[i] = 1; used = used | BIT(0)
			:: !HAS(used, 1) -> rank[i] = 2; used = used | BIT(1)
			:: !HAS(used, 2) -> rank[i] = 3; used = used | BIT(2)
			:: N > 3 && !HAS(used, 3) -> rank[i] = 4; used = used | BIT(3)
			fi;
#else
			rank[i] = N - i;
#endif
			vote[i] = i;
			joined[i] = NONE;
			if
			:: downs < MAXDOWN -> downs++; state[i] = DOWN
			:: state[i] = PENDING
			fi;
			i++
		od;
		i = 0;
		do
		:: i == N -> break
		:: i < N && state[i] == PENDING -> run member(i); i++
		:: i < N && state[i] != PENDING -> i++
		od;
		used = 0;
		i = 0
	}
}

#define LIVE(i) (state[i] != DOWN && state[i] != CRASHED)
#define SETTLED(i) ((i) >= N || !LIVE(i) || running[i] || joined[i] != NONE)
#define ALL_SETTLED (SETTLED(0) && SETTLED(1) && SETTLED(2) && SETTLED(3))
/* a live member votes for one that crashed: it waits for it, or it joined
 * it before the crash */
#define WAITS(i) ((i) < N && LIVE(i) && state[vote[i]] == CRASHED)
#define SOME_WAIT (WAITS(0) || WAITS(1) || WAITS(2) || WAITS(3))
#define NLIVE ((0 < N && LIVE(0)) + (1 < N && LIVE(1)) + (2 < N && LIVE(2)) + (3 < N && LIVE(3)))

ltl elected { <> [] ((starters == 1 && ALL_SETTLED) || !LIVE(SOURCE)) }
ltl elected_or_waits { <> [] ((starters == 1 && ALL_SETTLED) || SOME_WAIT || 2 * NLIVE <= N ||
                              !LIVE(SOURCE)) }
