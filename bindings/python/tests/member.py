"""One member process of the multi-process tests (test_group.py).

    python3 member.py SCENARIO RANK BOOTSTRAP

prints one JSON object on its last line of stdout (what it delivered, its
views, its stats) and exits 0, or names what went wrong on stderr and
exits 1. SCENARIO is "multicast", "leave" or "p2p" (BOOTSTRAP: a
directory), or "join" (BOOTSTRAP: "PORT,PORT", the member's and the
joiner's).
"""

import json
import logging
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import spindle  # noqa: E402

MEMBERS = 3
MESSAGES = 40  # per sender and subgroup
WAIT = 20.0  # seconds any single wait may take


def payload(subgroup, sender, index):
    return f"sg{subgroup} from {sender} #{index}".encode()


def record(message):
    return [message.sender_id, message.sender_index, message.seq, message.data.decode()]


def multicast(rank, bootstrap):
    """Subgroup 0 atomic, subgroup 1 unordered, every member sends in both.
    Rank 0 takes its deliveries through on_deliver, the others through
    receive(), so both paths are exercised."""
    delivered = {0: [], 1: []}
    done = threading.Event()
    expected = MEMBERS * MESSAGES

    def take(batch):
        for message in batch:
            delivered[message.subgroup].append(record(message))
        if all(len(got) >= expected for got in delivered.values()):
            done.set()

    subgroups = [
        spindle.Subgroup(members=range(MEMBERS), window=16, max_payload=64),
        spindle.Subgroup(
            members=range(MEMBERS), window=16, max_payload=64, mode="unordered"
        ),
    ]
    with spindle.Group(
        subgroups,
        self=rank,
        num_members=MEMBERS,
        bootstrap=bootstrap,
        bootstrap_kind="dir",
        bootstrap_timeout_ms=int(WAIT * 1000),
        on_deliver=take if rank == 0 else None,
    ) as group:
        for index in range(MESSAGES):
            group.send(0, payload(0, rank, index))
            with group.reserve(1, len(payload(1, rank, index))) as slot:
                slot[:] = payload(1, rank, index)
        if rank == 0:
            if not done.wait(WAIT):
                raise SystemExit(f"member 0: delivered {len(delivered[0])}, {len(delivered[1])}")
        else:
            while not all(len(got) >= expected for got in delivered.values()):
                take(group.receive(timeout=WAIT))
        group.flush(WAIT)
        stats = group.stats()
        group.shutdown(WAIT)
    return {
        "atomic": delivered[0],
        "unordered": delivered[1],
        "messages_sent": stats.messages_sent,
        "messages_delivered": stats.messages_delivered,
        "delivery_batch_messages": stats.delivery_batch_messages,
        "delivery_batches": sum(stats.delivery_batches),
        "delivery_batch_count": stats.delivery_batch_count,
    }


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append((record.name, record.levelname, text))


def leave(rank, bootstrap):
    """Rank 2 sends and leaves; 0 and 1 must install a view without it and
    deliver all its messages. Their on_view raises after recording the
    view: the process must go on. The leaver stays alive until its stdin
    closes, so the others learn of the leave from the group, not from its
    exit."""
    collect = Collect()
    logging.getLogger("spindle").addHandler(collect)
    logging.getLogger("spindle").setLevel(logging.INFO)
    spindle.log.set_level("info")
    views = []

    def on_view(view):
        views.append(view)
        raise RuntimeError("on_view raises on purpose")

    leaver = MEMBERS - 1
    group = spindle.Group(
        [spindle.Subgroup(members=range(MEMBERS), window=8, max_payload=64)],
        self=rank,
        num_members=MEMBERS,
        bootstrap=bootstrap,
        tolerate_failures=True,
        on_view=on_view,
    )
    with group:
        first = group.view
        if rank == leaver:
            for index in range(MESSAGES):
                group.send(0, payload(0, rank, index))
            group.leave(WAIT)
            sys.stdin.read()  # until the test has heard from the others
            return {"first_view": [first.view_id, list(first.members)]}
        view = group.wait_for_view(lambda v: leaver not in v.members, WAIT)
        from_leaver = []
        while len(from_leaver) < MESSAGES:
            for message in group.receive(timeout=WAIT):
                if message.sender_id == leaver:
                    from_leaver.append(message.data.decode())
        group.shutdown(WAIT)
    return {
        "first_view": [first.view_id, list(first.members)],
        "view": [view.view_id, list(view.members), list(view.left), view.my_rank],
        "left_name": view.left_identities[0].name if view.left_identities else None,
        "callback_views": [v.view_id for v in views],
        "from_leaver": from_leaver,
        "logged": collect.lines,
    }


def join(rank, ports):
    """Rank 0 runs a group of one and prints "ready"; rank 1 joins it,
    getting rank 0's state through state_save and state_load. Rank 0 then
    sends; both deliver. The joiner is a receiver, not a sender."""
    member, joiner = (f"127.0.0.1:{port}" for port in ports.split(","))
    subgroups = [spindle.Subgroup(members=[0], window=8, max_payload=64)]
    options = dict(bootstrap_kind="tcp", tolerate_failures=True, bootstrap_timeout_ms=20000)
    loaded = []
    if rank == 0:
        group = spindle.Group(
            subgroups, self=0, num_members=1, bootstrap=member,
            state_save=lambda: b"state of member 0", **options,
        )
        print("ready", flush=True)
    else:
        group = spindle.Group(
            subgroups, join=member, bootstrap=joiner, state_load=loaded.append, **options
        )
    with group:
        view = group.wait_for_view(lambda v: len(v.members) == 2, WAIT)
        refused = None
        if rank == 0:
            group.send(0, b"after the join")
        else:
            try:
                group.send(0, b"a receiver cannot send")
            except spindle.NotPermitted as e:
                refused = e.name
        batch = group.receive(timeout=WAIT)
        member_id = group.member_id
        group.shutdown(WAIT)
    return {
        "member_id": member_id,
        "view": [view.view_id, list(view.members), list(view.joined)],
        "loaded": [state.decode() for state in loaded],
        "delivered": [[m.sender_id, m.data.decode()] for m in batch],
        "refused": refused,
    }


P2P_MESSAGES = 20


def p2p(rank, bootstrap):
    """Point to point: rank 0 queries ranks 1 and 2 and sends rank 1
    P2P_MESSAGES one-way messages, and tries three bad sends. Rank 1 takes
    everything from p2p_receive() and answers the query from its own
    thread; rank 2 answers inside on_p2p. A barrier, once everyone is
    done, ends the run."""
    answered, created = threading.Event(), threading.Event()
    group = None

    def on_p2p(message):
        # A query may come before this member's Group() has returned.
        if message.is_query and created.wait(WAIT):
            group.p2p_reply(message, f"rank 2 in the callback to {message.data.decode()}".encode())
            answered.set()

    with spindle.Group(
        [spindle.Subgroup(members=range(MEMBERS), window=8, max_payload=64)],
        self=rank,
        num_members=MEMBERS,
        bootstrap=bootstrap,
        bootstrap_kind="dir",
        bootstrap_timeout_ms=int(WAIT * 1000),
        on_p2p=on_p2p if rank == 2 else None,
    ) as group:
        created.set()
        result = {}
        if rank == 0:
            result["replies"] = {
                target: group.p2p_query(target, f"who is {target}?".encode(), WAIT).decode()
                for target in (1, 2)
            }
            for index in range(P2P_MESSAGES):
                group.p2p_send(1, f"n {index}".encode())
            refused = []
            for target, data in ((0, b"me"), (1, bytes(spindle.P2P_MAX_PAYLOAD + 1)), (9, b"x")):
                try:
                    group.p2p_send(target, data)
                    refused.append(None)
                except spindle.SpindleError as error:
                    refused.append(error.name)
            result["refused"] = refused
        elif rank == 1:
            queries, received = [], []
            while not queries or len(received) < P2P_MESSAGES:
                message = group.p2p_receive(timeout=WAIT)
                if message.is_query:
                    group.p2p_reply(message, f"rank 1 from its thread to {message.data.decode()}".encode())
                    queries.append(message.sender_id)
                else:
                    received.append([message.sender_id, message.data.decode()])
            result["queries"] = queries
            result["received"] = received
        else:
            if not answered.wait(WAIT):
                raise SystemExit("member 2: no query came")
            result["answered"] = True
        group.barrier(WAIT)
        group.shutdown(WAIT)
    return result


def main():
    scenario, rank, bootstrap = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    scenarios = {"multicast": multicast, "leave": leave, "join": join, "p2p": p2p}
    result = scenarios[scenario](rank, bootstrap)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
