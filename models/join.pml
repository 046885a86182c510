/*
 * Join admission, src/view/view_join_leader.c and view_join_joiner.c, with
 * the late-accept rule of the control channel (src/control/ctl_tcp_join.c:
 * ctl_late_refusal, ctl_late_take, ctl_tcp_expect_member,
 * ctl_tcp_remove_member, ctl_reset_slot in ctl_tcp_mailbox.c).
 *
 * NM members start the group (ids 0..NM-1, admission 0); NJ joiner
 * processes want in. A joiner runs join_attempt again and again (view_join)
 * until it is a member: ask the leader (rank 0: the oldest member of the
 * view), take the offer (the lowest free id, an admission number, the next
 * view and its members), connect to every member of the offer (one hello
 * each, judged by the late-accept rule), send the leader its descriptor,
 * wait for JOIN_VIEW (the view, or a drop), start the view (ready to every
 * member, wait for every member's ready), then run as a member. Any failure
 * on the way undoes the attempt (join_undo: its control channel closes) and
 * it asks again.
 *
 * The members are one process (`group`): every step of theirs is one
 * atomic step, as the control channel handles one hello or one message at
 * a time. The leader admits one joiner at a time (view_join_poll,
 * take_request, admit: offer_admission, ctl_expect_member, await_desc,
 * the announcement, set_joiner); the others take the announcement
 * (take_announcement); then the view change runs. The view change itself
 * is models/view_change.pml: here it is one step, taken when every
 * survivor takes part in it (its membership thread runs: a joiner that has
 * not finished start_view has none yet) and, for a join, when every member
 * took the announcement. A change with a failure drops the joiner
 * (view_thread.c: view_change, view_join_abort); a change without one adds
 * it and the leader sends it JOIN_VIEW (view_install.c: prepare,
 * view_join_send_view); the members install it (install:
 * ctl_remove_member for the removed), publish their readies to it and wait
 * for its ready (meet), or suspect it when it does not come
 * (view_suspect). A change whose survivors are no majority of the view
 * stops the members (view.c: view_check_majority).
 *
 * The control channel: at each process, one slot per member id with the
 * admission of its holder and the process whose connection it is; a
 * message goes over the sender's connection for the slot of the receiver,
 * and lands in the receiver's mailbox for the sender's slot (latest per
 * tag). Resetting a slot (a new holder, ctl_expect_member, a removal)
 * drops its connection and its mailbox.
 *
 * Faults: up to MCRASH crashes of members that started the group, and up
 * to JFAULTS joiner faults, each at ANY step of a joiner: it dies (for
 * good, also after it became a member: the next change removes it), or it
 * freezes and later resumes (before asking, after the offer, while
 * connecting, after its descriptor, after JOIN_VIEW, during start_view:
 * a resumed joiner carries on from where it stopped, with its old offer,
 * and its own deadlines have passed), or it gives up waiting for its view
 * early. A crash is detected by every member, eventually; a joiner
 * that stopped, gave up or froze stops its heartbeat and is detected too.
 *
 * Deadlines: the leader's wait for the descriptor, the members' wait for
 * the joiner's ready and the joiner's waits end when the awaited process is
 * silent (dead, frozen, or gone from that attempt); otherwise pan's timeout
 * (nothing else can move) stands for them.
 *
 * Properties:
 *  - one holder per id and view, a stale joiner cannot take a newer
 *    holder's slot: the leader admits only the descriptor of the process
 *    it made the offer to, the members take the joiner's ready only from
 *    the process the view gives its id, and a joiner that starts a view
 *    holds its id in the members' record of that view (assertions);
 *  - agreement: a joiner starts a view whose members are exactly the
 *    members' record of it (assertion; the members' agreement among
 *    themselves is models/view_change.pml's);
 *  - the members go on: they stop only when at least half the view really
 *    failed (assertion), and they end idle with no dead or frozen process
 *    in their view, every joiner being a member of it, dead, or removed
 *    (it froze and was suspected, then started: it learns so and stops)
 *    (LTL, pan -a): the admission terminates, with the joiner or without
 *    it, and every joiner that stays alive gets in.
 *
 * Sizes: spin -DNM=3 -DNJ=2 -DMCRASH=0 -DJFAULTS=2 (NM + NJ <= 6, ids up
 * to NM + 2 * NJ <= 8).
 *
 * Found (fixed): one member crash during a joiner's start_view stopped a
 * group of three (the stop assertion; docs/MODELS.md, "Found"): start_view
 * waited for the ready of every member of the view, the crashed one too,
 * gave up, and the members, which count the joiner as a member, were left
 * with two of four. Now start_view waits only for the members not failed
 * meanwhile; BROKEN_START_WAITS_ALL is the start as it was.
 *
 * Broken variants (scripts/check-models.sh, each must fail):
 *  BROKEN_ACCEPT_ANY   ctl_late_refusal takes any admission but 0 (no
 *                      comparison with the slot's holder)
 *  BROKEN_NO_EXPECT    the leader does not call ctl_expect_member, and
 *                      await_desc does not compare admissions
 *  BROKEN_KEEP_JOINER  a change with a failure keeps the joiner
 *  BROKEN_WAIT_JOINER  meet waits for the joiner's ready without deadline
 *  BROKEN_START_WAITS_ALL  start_view waits for every member's ready
 * and one that is not caught (docs/MODELS.md says why):
 *  BROKEN_ACCEPT_EQUAL the comparison is hello->admission >= p->admission
 */

#ifndef NM
#define NM 3
#endif
#ifndef NJ
#define NJ 2
#endif
#ifndef MCRASH
#define MCRASH 1
#endif
#ifndef JFAULTS
#define JFAULTS 1
#endif
#define NP (NM + NJ) /* processes */
/* ids: a joiner that gave up may still hold one in the view while it asks
 * again */
#define NID (NP + NJ)
#define NONE 255
#define BIT(x) (1 << (x))
#define HAS(m, x) (((m) >> (x)) & 1)
#define CNT(m) (HAS(m, 0) + HAS(m, 1) + HAS(m, 2) + HAS(m, 3) + HAS(m, 4) + HAS(m, 5) + HAS(m, 6) + \
	HAS(m, 7))

/* Admission numbers: view << 16 plus attempts (next_admission); here
 * view * ATT + attempts. */
#define ATT 8
#define ADM(view, attempt) ((view) * ATT + (attempt))

/* Process status. */
#define OUT 0    /* a joiner not (yet) in */
#define MEMBER 1 /* its membership thread runs */
#define DEAD 2
#define REMOVED 3 /* removed while alive: it learns so and stops */

/* Joiner steps (join_attempt). */
#define ASK 0
#define CONNECT 1
#define DESC 2
#define AWAIT 3
#define START 4
#define IN 5

/* The leader's state (admit, then the change). */
#define IDLE 0
#define AWAIT_DESC 1
#define ANNOUNCED 2
#define MEET 3

/* The group. */
byte view;
byte vset;        /* ids in the current view */
byte vproc[NID];  /* the process holding each id of the view */
byte joined[NID];  /* the view in which each id's holder joined (rank order) */
byte susp;        /* ids suspected by the members */
byte took;        /* ids that took the announcement (set_joiner) */
byte rsent;       /* ids that published their ready to the joiner (meet) */
byte lstate, lj, lid, ladm; /* leader: state, joiner process, id, admission */
byte last_adm[NP]; /* m->last_admission of each process */
byte lead;        /* rank 0 of the view (derived from vset, joined) */
bool stopped;
byte crashes, faults;

/* Processes. */
byte status[NP];
byte myid[NP];
byte my_adm[NP];
bool frozen[NP];
bool failed[NP]; /* died or froze at some point */

/* Joiners: the step and the offer of the current attempt. */
byte jst[NP];
byte oid[NP], oadm[NP], oview[NP], oset[NP], olead[NP];
byte oproc[NP * NID]; /* the process at each member's address in the offer */
bool late[NP]; /* resumed from a freeze during this attempt */

/* Control channel: at process p, slot id. */
#define SL(p, id) ((p) * NID + (id))
byte sadm[NP * NID];  /* the slot's holder's admission */
byte shold[NP * NID]; /* the process whose connection it is */
byte desc_mb[NP * NID]; /* JOIN_DESC: its admission (0: none) */
byte desc_from[NP * NID];
byte rdy_mb[NP * NID];  /* ready: the view it names (0: none) */
byte rdy_from[NP * NID];
byte jv_mb[NP];   /* JOIN_VIEW at a joiner: view << 1 | admitted (0: none) */
byte jv_from[NP]; /* the id that sent it */

/* The members' record of each view (checks). */
#define MAXV 12
byte vlog_set[MAXV];
byte vlog_joiner[MAXV]; /* the process that joined in it, or NONE */

inline reset_slot(p, k)
{
	shold[SL(p, k)] = NONE;
	desc_mb[SL(p, k)] = 0;
	desc_from[SL(p, k)] = 0;
	rdy_mb[SL(p, k)] = 0;
	rdy_from[SL(p, k)] = 0
}

/* The process a member id's address leads to: the view's holder. */
#define PROC(k) vproc[k]

/* Rank 0 of the view: the member that joined first (initial members in
 * id order; view_next appends a joiner as the last rank). */
inline set_leader()
{
	lead = NONE;
	for (t : 0 .. NID - 1) {
		if
		:: HAS(vset, t) && (lead == NONE || joined[t] * 8 + t < joined[lead] * 8 + lead) ->
			lead = t
		:: else -> skip
		fi
	}
	t = 0
}

/* Picks `out`, one of the set bits of m (m != 0), freely. */
inline pick(m, out)
{
	n = CNT(m);
	select(t : 1 .. n);
	out = 0;
	do
	:: HAS(m, out) && t == 1 -> break
	:: HAS(m, out) && t > 1 -> t--; out++
	:: !HAS(m, out) -> out++
	od;
	n = 0;
	t = 0
}

/* Conditions over every index (guards: no step may change nothing). */
#define ANY(P) (P(0) || P(1) || P(2) || P(3) || P(4) || P(5) || P(6) || P(7))
#define ALL(P) (P(0) && P(1) && P(2) && P(3) && P(4) && P(5) && P(6) && P(7))
#define MASK(P) ((P(0) -> 1 : 0) | (P(1) -> 2 : 0) | (P(2) -> 4 : 0) | (P(3) -> 8 : 0) | \
	(P(4) -> 16 : 0) | (P(5) -> 32 : 0) | (P(6) -> 64 : 0) | (P(7) -> 128 : 0))

/* A process still is the holder the view gives id k: a member, or a
 * joiner on its way in with that offer (engine and heartbeat up). */
#define HOLDS(p, k) ((status[p] == MEMBER && myid[p] == k) || \
	(status[p] == OUT && jst[p] >= AWAIT && oid[p] == k && oview[p] <= view))
#define SILENT(p, k) (status[p] == DEAD || frozen[p] || !HOLDS(p, k))

/* ---------------------------------------------------------------- */
/* The joiner's side (view_join_joiner.c). */

/* join_undo: the control channel closes (its connections at the members
 * break; what arrived stays in their mailboxes), the next attempt starts
 * clean. */
inline undo()
{
	for (t : 0 .. NID - 1) {
		if
		:: t < NP && shold[SL(t, oid[me])] == me -> shold[SL(t, oid[me])] = NONE
		:: else -> skip
		fi;
		sadm[SL(me, t)] = 0;
		reset_slot(me, t);
		oproc[SL(me, t)] = 0
	}
	t = 0;
	jv_mb[me] = 0;
	jv_from[me] = 0;
	jst[me] = ASK;
	oid[me] = 0; oadm[me] = 0; oview[me] = 0; oset[me] = 0; olead[me] = 0;
	late[me] = false;
	k = 0
}

/* ctl_late_refusal at process p for a hello of (id, admission). */
#ifdef BROKEN_ACCEPT_ANY
#define LATE_OK(p, id, adm) ((adm) != 0)
#elif defined(BROKEN_ACCEPT_EQUAL)
#define LATE_OK(p, id, adm) ((adm) != 0 && (adm) >= sadm[SL(p, id)])
#else
#define LATE_OK(p, id, adm) ((adm) != 0 && (adm) > sadm[SL(p, id)])
#endif

/* What can happen to a joiner at any of its steps. */
#define JFAULT \
	:: atomic { faults < JFAULTS && status[me] != DEAD && !frozen[me] -> \
		faults++; failed[me] = true; status[me] = DEAD } \
	:: atomic { faults < JFAULTS && status[me] == OUT && !frozen[me] -> \
		faults++; failed[me] = true; frozen[me] = true } \
	:: atomic { frozen[me] && status[me] != DEAD -> frozen[me] = false; late[me] = true }

#define RUNS (!frozen[me] && status[me] == OUT)
#define OPROC(k) oproc[SL(me, k)]
#define JV_OK (jv_mb[me] != 0 && jv_mb[me] >> 1 == oview[me] && jv_from[me] == olead[me])
/* Every member of the offer sent its ready, or one of them is gone. */
#define GONE(x) ((x) < NID && HAS(oset[me], x) && status[OPROC(x)] != MEMBER)
#define GOT_OR_GONE(x) (!((x) < NID && HAS(oset[me], x)) || rdy_mb[SL(me, x)] == oview[me] || \
	status[OPROC(x)] != MEMBER)
#ifndef BROKEN_START_WAITS_ALL
/* start_view waits only for the members not failed meanwhile
 * (view_gather_survivors), then runs the membership thread */
#define GOT(x) GOT_OR_GONE(x)
#else
#define GOT(x) (!((x) < NID && HAS(oset[me], x)) || rdy_mb[SL(me, x)] == oview[me])
#endif

proctype joiner(byte me)
{
	byte t, k, p, n;

end_run:
	do
	/* view_join_poll at the leader, take_request, admit: the leader takes
	 * this request while it is idle and no change runs (a request while
	 * another one is pending is refused, and asked again: a wait here).
	 * free_id, next_admission, offer_admission, ctl_expect_member. */
	:: atomic {
		RUNS && jst[me] == ASK && lstate == IDLE && susp == 0 && !stopped &&
		status[PROC(lead)] == MEMBER ->
		p = PROC(lead);
		/* free_id: the lowest id no member of the view holds */
		t = 0;
		do
		:: HAS(vset, t) -> t++
		:: else -> break
		od;
		oid[me] = t;
		/* next_admission: 2^16 attempts into one view at most (here ATT) */
		if
		:: last_adm[p] >= ADM(view + 1, 0) -> oadm[me] = last_adm[p] + 1
		:: else -> oadm[me] = ADM(view + 1, 0)
		fi;
		assert(oadm[me] < ADM(view + 2, 0)); /* never spent in the sizes checked */
		last_adm[p] = oadm[me];
		oview[me] = view + 1;
		oset[me] = vset;
		olead[me] = lead;
		for (t : 0 .. NID - 1) {
			sadm[SL(me, t)] = 0;
			reset_slot(me, t);
			oproc[SL(me, t)] = (HAS(vset, t) -> vproc[t] : 0)
		}
		t = 0;
		/* ctl_tcp_expect_member at the leader */
#ifndef BROKEN_NO_EXPECT
		if
		:: sadm[SL(p, oid[me])] < oadm[me] ->
			reset_slot(p, oid[me]);
			sadm[SL(p, oid[me])] = oadm[me] - 1
		:: else -> skip
		fi;
#endif
		lstate = AWAIT_DESC;
		lj = me;
		lid = oid[me];
		ladm = oadm[me];
		jst[me] = CONNECT;
		k = 0;
		p = 0
	}
	/* open_channel (ctl_open_tcp_joiner): a hello to each member of the
	 * offer in id order; ctl_late_take there; a refusal or a member that
	 * is gone makes the attempt fail (SPINDLE_EAGAIN). */
	:: atomic {
		RUNS && jst[me] == CONNECT && (k == NID || !HAS(oset[me], k) ||
		status[OPROC(k)] == MEMBER || HAS(susp, k) || !HAS(vset, k) || vproc[k] != OPROC(k)) ->
		if
		:: k < NID && !HAS(oset[me], k) -> k++
		:: k == NID -> jst[me] = DESC; k = 0
		:: k < NID && HAS(oset[me], k) ->
			p = OPROC(k); /* the address in the offer */
			if
			:: status[p] == MEMBER && myid[p] == k && LATE_OK(p, oid[me], oadm[me]) ->
				reset_slot(p, oid[me]);
				shold[SL(p, oid[me])] = me;
				sadm[SL(p, oid[me])] = oadm[me];
				/* ctl_connect: the answer's admission for the slot here */
				shold[SL(me, k)] = p;
				sadm[SL(me, k)] = my_adm[p];
				k++
			:: status[p] == MEMBER && myid[p] == k && !LATE_OK(p, oid[me], oadm[me]) -> undo()
			/* the address now answers as another slot */
			:: status[p] == MEMBER && myid[p] != k -> undo()
			/* a member that does not answer (or this joiner's own
			 * earlier id, at its own address): after two failure
			 * timeouts, by when the members suspect it */
			:: status[p] != MEMBER && (HAS(susp, k) || !HAS(vset, k) || vproc[k] != p) -> undo()
			fi;
			p = 0
		fi
	}
	/* send_desc: JOIN_DESC to the offer's leader */
	:: atomic {
		RUNS && jst[me] == DESC ->
		p = OPROC(olead[me]);
		if
		:: shold[SL(p, oid[me])] == me && status[p] == MEMBER ->
			desc_mb[SL(p, oid[me])] = oadm[me];
			desc_from[SL(p, oid[me])] = me
		:: else -> skip /* lost: the connection is gone */
		fi;
		jst[me] = AWAIT;
		p = 0
	}
	/* await_view: the view, or a drop, from the offer's leader */
	:: atomic {
		RUNS && jst[me] == AWAIT && JV_OK ->
		if
		:: jv_mb[me] & 1 -> jst[me] = START
		:: else -> undo() /* the join was dropped */
		fi
	}
	/* its deadline: it was frozen meanwhile, the leader is gone, or
	 * nothing else can happen */
	:: atomic {
		RUNS && jst[me] == AWAIT && !JV_OK &&
		(late[me] || status[OPROC(olead[me])] != MEMBER) -> undo()
	}
	:: atomic { RUNS && jst[me] == AWAIT && !JV_OK && timeout -> undo() }
	/* giving up early (a deadline that a slow machine reaches first) */
	:: atomic {
		RUNS && jst[me] == AWAIT && faults < JFAULTS ->
		faults++; failed[me] = true; undo()
	}
	/* start_view: ready to every member of the view (over this joiner's
	 * connections), then every member's ready; only then a member. */
	:: atomic {
		RUNS && jst[me] == START ->
		for (k : 0 .. NID - 1) {
			if
			:: HAS(oset[me], k) ->
				p = OPROC(k);
				if
				:: shold[SL(p, oid[me])] == me ->
					rdy_mb[SL(p, oid[me])] = oview[me];
					rdy_from[SL(p, oid[me])] = me
				:: else -> skip
				fi
			:: else -> skip
			fi
		}
		k = 0;
		p = 0;
		jst[me] = IN
	}
	/* view_gather_ready from every member of the view */
	:: atomic {
		RUNS && jst[me] == IN && ALL(GOT) ->
		/* one holder per id and view, and agreement: this process holds
		 * its id in the members' record of the view, whose members are
		 * the offer's and this joiner */
		assert(vlog_joiner[oview[me]] == me);
		assert(vlog_set[oview[me]] == (oset[me] | BIT(oid[me])));
		myid[me] = oid[me];
		my_adm[me] = oadm[me];
		/* a later view may have removed it meanwhile: it learns so */
		if
		:: HAS(vset, oid[me]) && vproc[oid[me]] == me -> status[me] = MEMBER
		:: else -> status[me] = REMOVED
		fi;
		jst[me] = ASK;
		oid[me] = 0; oadm[me] = 0; oview[me] = 0; oset[me] = 0; olead[me] = 0;
		for (t : 0 .. NID - 1) {
			oproc[SL(me, t)] = 0
		}
		t = 0;
		late[me] = false;
		jv_mb[me] = 0;
		jv_from[me] = 0
	}
	/* its deadline: the readies missing are of members that are gone,
	 * or this joiner was frozen */
	:: atomic {
		RUNS && jst[me] == IN && !ALL(GOT) && (late[me] || timeout || ALL(GOT_OR_GONE)) -> undo()
	}
	JFAULT
	od
}

/* ---------------------------------------------------------------- */
/* The members' side (view_join_leader.c, view_thread.c, view_install.c). */

/* send_drop, view_join_send_view: JOIN_VIEW over slot k's connection at
 * p, to whichever process holds it. */
inline send_view(p, k, v, admitted)
{
	t = shold[SL(p, k)];
	if
	:: t != NONE && status[t] != DEAD ->
		jv_mb[t] = (v << 1) | admitted;
		jv_from[t] = myid[p]
	:: else -> skip
	fi;
	t = 0
}

/* Every survivor's membership thread runs (a joiner has one only once
 * start_view is over): the exchange of view_change.pml can complete. */
#define TAKES_PART(x, set) (!((x) < NID && HAS(set, x)) || status[vproc[x]] == MEMBER)
#define PART(x) TAKES_PART(x, vset & ~susp)
#define CRASHABLE(x) ((x) < NM && status[x] == MEMBER)
#define DETECTABLE(x) ((x) < NID && HAS(vset, x) && !HAS(susp, x) && SILENT(vproc[x], x))
#define ANNOUNCEABLE(x) ((x) < NID && HAS(vset, x) && !HAS(took, x) && status[vproc[x]] == MEMBER)
#define UNSENT(x) ((x) < NID && HAS(vset, x) && (x) != lid && !HAS(rsent, x) && \
	status[vproc[x]] == MEMBER)
/* The joiner's ready is at every live member. */
#define RDY(x) (!((x) < NID && HAS(vset, x) && (x) != lid && status[vproc[x]] == MEMBER) || \
	rdy_mb[SL(vproc[x], lid)] == view)
#ifdef BROKEN_NO_EXPECT
#define DESC_OK (desc_mb[SL(PROC(lead), lid)] != 0 && desc_mb[SL(PROC(lead), lid)] / ATT == view + 1)
#else
#define DESC_OK (desc_mb[SL(PROC(lead), lid)] == ladm)
#endif

/* Ids of the view whose holder failed (died or froze) for real. */
inline count_failed(out)
{
	out = 0;
	for (t : 0 .. NID - 1) {
		if
		:: HAS(vset, t) && failed[vproc[t]] -> out++
		:: else -> skip
		fi
	}
	t = 0
}

/* The members stop (view_check_majority, or the exchange's deadline):
 * only when at least half the view really failed. */
inline stop()
{
	count_failed(n);
	assert(2 * n >= CNT(vset));
	stopped = true;
	n = 0
}

proctype group()
{
	byte t, k, p, n, m;

end_idle:
	do
	/* a member that started the group crashes */
	:: atomic {
		crashes < MCRASH && ANY(CRASHABLE) ->
		m = MASK(CRASHABLE);
		pick(m, k);
		crashes++;
		status[k] = DEAD;
		failed[k] = true;
		k = 0; m = 0
	}
	/* failure detection: a dead, frozen or departed holder is suspected */
	:: atomic {
		!stopped && ANY(DETECTABLE) ->
		m = MASK(DETECTABLE);
		pick(m, k);
		susp = susp | BIT(k);
		k = 0; m = 0
	}
	/* take_announcement: a member takes the leader's JOIN_ANNOUNCE */
	:: atomic {
		lstate == ANNOUNCED && !stopped && ANY(ANNOUNCEABLE) ->
		m = MASK(ANNOUNCEABLE);
		pick(m, k);
		took = took | BIT(k);
		k = 0; m = 0
	}
	/* await_desc: the descriptor of this admission arrived; the
	 * announcement to every member, set_joiner */
	:: atomic {
		lstate == AWAIT_DESC && susp == 0 && !stopped && status[PROC(lead)] == MEMBER &&
		DESC_OK ->
		/* the offer's process, not a stale holder of the id */
		assert(desc_from[SL(PROC(lead), lid)] == lj);
		lstate = ANNOUNCED;
		took = BIT(lead)
	}
	/* await_desc gives up: the joiner is silent (two failure timeouts),
	 * or a change began (view_quiet); send_drop */
	:: atomic {
		lstate == AWAIT_DESC &&
		(susp != 0 || stopped || status[lj] == DEAD || frozen[lj] || oadm[lj] != ladm) ->
		if
		:: status[PROC(lead)] == MEMBER -> send_view(PROC(lead), lid, view + 1, 0)
		:: else -> skip
		fi;
		lstate = IDLE
	}
	/* the view change with the joiner: no failure, every member took the
	 * announcement; the leader sends JOIN_VIEW in prepare, every member
	 * installs and publishes its ready to the joiner (meet) */
	:: atomic {
		lstate == ANNOUNCED && susp == 0 && took == vset && ALL(PART) && !stopped ->
		send_view(PROC(lead), lid, view + 1, 1);
		view++;
		assert(view < MAXV);
		vset = vset | BIT(lid);
		vproc[lid] = lj;
		joined[lid] = view;
		vlog_set[view] = vset;
		vlog_joiner[view] = lj;
		took = 0;
		set_leader();
		lstate = MEET
	}
	/* meet, at each member once it installed: its ready to the joiner,
	 * over its connection for the joiner's id */
	:: atomic {
		lstate == MEET && !stopped && ANY(UNSENT) ->
		m = MASK(UNSENT);
		pick(m, k);
		rsent = rsent | BIT(k);
		t = shold[SL(vproc[k], lid)];
		if
		:: t != NONE && status[t] != DEAD -> rdy_mb[SL(t, k)] = view
		:: else -> skip
		fi;
		k = 0; m = 0; t = 0
	}
	/* meet: the joiner's ready at every member */
	:: atomic {
		lstate == MEET && !stopped && ALL(RDY) && !ANY(UNSENT) ->
		for (k : 0 .. NID - 1) {
			if
			:: HAS(vset, k) && k != lid && status[vproc[k]] == MEMBER ->
				/* only from the process the view gives the id */
				assert(rdy_from[SL(vproc[k], lid)] == lj)
			:: else -> skip
			fi
		}
		k = 0;
		rsent = 0;
		lstate = IDLE
	}
#ifndef BROKEN_WAIT_JOINER
	/* ... with a deadline: a joiner that never started is a failure in
	 * the new view (view_suspect), not a reason to stop */
	:: atomic {
		lstate == MEET && !ALL(RDY) && !ANY(UNSENT) && (SILENT(lj, lid) || timeout) ->
		susp = susp | BIT(lid);
		rsent = 0;
		lstate = IDLE
	}
#endif
	/* the view change after failures (view_change): the joiner, if any,
	 * is dropped (view_join_abort: the leader tells it); the survivors
	 * must be a majority (view_check_majority), else the members stop */
	:: atomic {
		susp != 0 && (lstate == IDLE || lstate == ANNOUNCED) && ALL(PART) && !stopped ->
		if
		:: 2 * CNT(vset & ~susp) <= CNT(vset) -> stop()
		:: else ->
			if
			:: lstate == ANNOUNCED && status[PROC(lead)] == MEMBER ->
#ifdef BROKEN_KEEP_JOINER
				send_view(PROC(lead), lid, view + 1, 1)
#else
				send_view(PROC(lead), lid, view + 1, 0)
#endif
			:: else -> skip
			fi;
			view++;
			assert(view < MAXV);
			/* install: ctl_remove_member for every removed id (the slot
			 * keeps its admission: only a later holder connects) */
			for (k : 0 .. NID - 1) {
				if
				:: HAS(susp, k) ->
					/* a removed member that is alive learns so
					 * (sst_table_announce_removed) and stops */
					if
					:: status[vproc[k]] == MEMBER && myid[vproc[k]] == k ->
						status[vproc[k]] = REMOVED
					:: else -> skip
					fi;
					for (p : 0 .. NP - 1) {
						if
						:: status[p] == MEMBER -> reset_slot(p, k)
						:: else -> skip
						fi
					}
					vproc[k] = 0;
					joined[k] = 0
				:: else -> skip
				fi
			}
			vset = vset & ~susp;
			vlog_joiner[view] = NONE;
#ifdef BROKEN_KEEP_JOINER
			if
			:: lstate == ANNOUNCED ->
				vset = vset | BIT(lid);
				vproc[lid] = lj;
				joined[lid] = view;
				vlog_joiner[view] = lj
			:: else -> skip
			fi;
#endif
			vlog_set[view] = vset;
			susp = 0;
			took = 0;
			lstate = IDLE;
			set_leader();
			k = 0; p = 0
		fi
	}
	/* the members' exchange deadline: a survivor never takes part */
	:: atomic {
		(susp != 0 || lstate == ANNOUNCED) && !ALL(PART) && timeout && !stopped -> stop()
	}
	od
}

init
{
	byte x, y;
	atomic {
		for (x : 0 .. NP - 1) {
			myid[x] = NONE;
			for (y : 0 .. NID - 1) {
				shold[SL(x, y)] = NONE
			}
		}
		for (x : 0 .. NM - 1) {
			status[x] = MEMBER;
			myid[x] = x;
			vproc[x] = x;
			vset = vset | BIT(x);
			for (y : 0 .. NM - 1) {
				if
				:: y != x -> shold[SL(x, y)] = y
				:: else -> skip
				fi
			}
		}
		vlog_set[0] = vset;
		vlog_joiner[0] = NONE;
		lead = 0;
		run group();
		for (x : NM .. NP - 1) {
			run joiner(x)
		}
		x = 0;
		y = 0
	}
}

/* The admission terminates and every joiner that stays alive gets in:
 * eventually for good, the members are idle in a view of live members
 * with nothing suspected, and every joiner is a member of it, dead, or
 * was removed after it froze (or the members stopped, which the stop
 * assertion allows only when half the view failed). */
#define SETTLED(x) (!((x) >= NM && (x) < NP) || status[x] == DEAD || status[x] == REMOVED || \
	(status[x] == MEMBER && HAS(vset, myid[x]) && vproc[myid[x]] == x))
#define CLEAN(x) (!((x) < NID && HAS(vset, x)) || status[vproc[x]] == MEMBER)
#define DONE (stopped || (lstate == IDLE && susp == 0 && ALL(SETTLED) && ALL(CLEAN)))
ltl admitted { <> [] DONE }
