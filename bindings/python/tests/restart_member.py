"""One process of the restart test (test_restart.py): a member of a group
with one logged atomic subgroup, steered line by line.

    python3 restart_member.py OPTIONS_JSON

OPTIONS_JSON holds the Group keyword arguments that differ between the
processes (self, num_members, bootstrap, join, log_dir, member_name,
incarnation). The process prints one JSON object a line on stdout: one once
its Group() returned, then one for each command it reads on stdin:

    send FIRST COUNT   sends the counters FIRST .. FIRST+COUNT-1 in subgroup 0
    persist            waits until they are durable in every member's log
    await COUNT        waits until its state holds COUNT counters
    snapshot COUNT     stores its state after the first COUNT counters as a snapshot
    shutdown           the collective end; the process then exits 0

Its state is the list of counters it applied, in order: from on_deliver
and, inside Group(), from on_replay (a snapshot replaces it). Whatever goes
wrong is a traceback on stderr and exit status 1; end of input, exit 2.
"""

import json
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import spindle  # noqa: E402

WAIT = 20.0  # seconds any single wait may take
SUBGROUP = spindle.Subgroup(members=[0, 1], senders=[0], window=8, max_payload=64)


class State:
    """The counters applied, in order, and where each delivered one was
    (the point after it, for a snapshot); what on_replay was given."""

    def __init__(self):
        self.changed = threading.Condition()
        self.counters = []
        self.points = []  # (view_id, seq + 1) of each counter; None for replayed ones
        self.replayed = []

    def on_replay(self, item):
        self.replayed.append(
            {
                "kind": int(item.kind),
                "subgroup": item.subgroup,
                "view_id": item.view_id,
                "seq": item.seq,
                "sender": item.sender,
                "sender_index": item.sender_index,
                "received": item.received,
                "data": item.data.decode(),
            }
        )
        with self.changed:
            if item.kind == spindle.REPLAY_SNAPSHOT:
                self.counters = json.loads(item.data) if item.data else []
                self.points = [None] * len(self.counters)
            else:
                self.counters.append(int(item.data))
                self.points.append(None)

    def on_deliver(self, batch):
        with self.changed:
            for message in batch:
                self.counters.append(int(message.data))
                self.points.append((message.view_id, message.seq + 1))
            self.changed.notify_all()

    def await_count(self, count):
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.counters) >= count, WAIT):
                raise TimeoutError(f"{len(self.counters)} of {count} counters after {WAIT} s")
            return list(self.counters)


def main():
    options = json.loads(sys.argv[1])
    state = State()
    group = spindle.Group(
        [SUBGROUP],
        bootstrap_kind="tcp",
        tolerate_failures=True,
        failure_timeout_ms=1500,
        bootstrap_timeout_ms=int(WAIT * 1000),
        logged_subgroups=[0],
        on_deliver=state.on_deliver,
        on_replay=state.on_replay,
        **options,
    )

    def reply(**fields):
        print(json.dumps(fields), flush=True)

    with group:
        reply(member_id=group.member_id, at_create=list(state.counters), replayed=state.replayed)
        for line in sys.stdin:
            command, *numbers = line.split()
            numbers = [int(n) for n in numbers]
            if command == "send":
                first, count = numbers
                for counter in range(first, first + count):
                    group.send(0, str(counter).encode())
                reply(sent=first + count)
            elif command == "persist":
                group.flush_persistent(0, WAIT)
                reply(persisted=True)
            elif command == "await":
                counters = state.await_count(numbers[0])
                stats = group.stats()
                reply(
                    counters=counters,
                    log_catchup_records=stats.log_catchup_records,
                    log_catchup_bytes=stats.log_catchup_bytes,
                )
            elif command == "snapshot":
                (count,) = numbers
                counters = state.await_count(count)
                with state.changed:
                    point = state.points[count - 1]
                view_id, seq = point
                group.snapshot(0, view_id, seq, json.dumps(counters[:count]).encode())
                reply(snapshot=[view_id, seq])
            elif command == "shutdown":
                group.shutdown(WAIT)
                reply(shutdown=True)
                return 0
            else:
                raise ValueError(f"unknown command {line!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
