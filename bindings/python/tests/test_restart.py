"""Restart of one member from its log (docs/LOGS.md "Restart of one
member"): on_replay gives a joiner its state back inside Group().

RestartTest runs two members and a joiner as processes
(tests/restart_member.py), over shm with a loopback TCP bootstrap, one
logged atomic subgroup in which member 0 sends counters. The joiner joins,
takes a snapshot, is killed with SIGKILL, the members go on, and it starts
again with the same log directory and name and a larger incarnation.
ReplayErrorTest plays a callback that raises, in this process."""

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

from support import free_port

import spindle

HERE = os.path.dirname(os.path.abspath(__file__))
RESTART_MEMBER = os.path.join(HERE, "restart_member.py")
WAIT = 25.0  # seconds for any one answer of a process: a deadline, never a pause

BEFORE_JOIN = 5  # counters 0..4, sent before the joiner's first life
FIRST_LIFE = 30  # counters 5..29, delivered by its first life too
SNAPSHOT_AT = 12  # its first life's snapshot: the state after counters 0..11
WHILE_DEAD = 60  # counters 30..59, sent while it is dead
AFTER = 70  # counters 60..69, once it is back


class Process:
    """A restart_member.py process: commands on its stdin, JSON answers
    from its stdout (read by a thread, so a wait has a deadline), stderr
    in a file for the failure message."""

    def __init__(self, name, options, directory):
        self.name = name
        self.errors = open(os.path.join(directory, f"{name}.stderr"), "w+", encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, RESTART_MEMBER, json.dumps(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
        )
        self.lines = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def tell(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def answer(self):
        try:
            line = self.lines.get(timeout=WAIT)
        except queue.Empty:
            line = None
        if line is None:
            self.proc.kill()
            self.proc.wait()
            self.errors.seek(0)
            raise AssertionError(
                f"{self.name}: no answer within {WAIT} s (exit status {self.proc.returncode}):\n"
                f"{self.errors.read()}"
            )
        return json.loads(line)

    def ask(self, command):
        self.tell(command)
        return self.answer()

    def end(self):
        """Its exit status, once it exited (within WAIT seconds)."""
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            self.close()

    def close(self):
        """Kills it if it still runs; closes the pipes and the stderr file."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.errors):
            try:
                stream.close()
            except OSError:
                pass  # stdin to a killed process: its unflushed bytes are moot


def ask_all(processes, command):
    """The same command to every process, answered concurrently."""
    for process in processes:
        process.tell(command)
    return [process.answer() for process in processes]


def counters(items):
    return [int(item["data"]) for item in items]


class RestartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with tempfile.TemporaryDirectory(prefix="spindle-py-restart-") as root:
            cls.run_scenario(root)

    @classmethod
    def run_scenario(cls, root):
        ports = [free_port() for _ in range(3)]
        addresses = [f"127.0.0.1:{port}" for port in ports]
        joiner = dict(
            join=addresses[0], bootstrap=addresses[2], log_dir=os.path.join(root, "j"),
            member_name="j",
        )
        processes = []
        try:
            members = [
                Process(
                    f"member {rank}",
                    dict(
                        self=rank, num_members=2, bootstrap=",".join(addresses[:2]),
                        log_dir=os.path.join(root, f"m{rank}"), member_name=f"m{rank}",
                    ),
                    root,
                )
                for rank in range(2)
            ]
            processes += members
            for member in members:
                member.answer()
            sender = members[0]
            sender.ask(f"send 0 {BEFORE_JOIN}")
            ask_all(members, f"await {BEFORE_JOIN}")

            # The first life: a fresh joiner, sent the whole log.
            first = Process("joiner, first life", dict(joiner, incarnation=1), root)
            processes.append(first)
            cls.first_created = first.answer()
            sender.ask(f"send {BEFORE_JOIN} {FIRST_LIFE - BEFORE_JOIN}")
            sender.ask("persist")  # durable in every member's log, the joiner's too
            first.ask(f"await {FIRST_LIFE}")
            cls.snapshot_point = first.ask(f"snapshot {SNAPSHOT_AT}")["snapshot"]
            first.proc.send_signal(signal.SIGKILL)
            cls.first_status = first.end()
            processes.remove(first)

            # The members go on without it (once they found it dead).
            sender.ask(f"send {FIRST_LIFE} {WHILE_DEAD - FIRST_LIFE}")
            cls.members_before = [a["counters"] for a in ask_all(members, f"await {WHILE_DEAD}")]

            # The second life: the same directory and name, a larger incarnation.
            second = Process("joiner, second life", dict(joiner, incarnation=2), root)
            processes.append(second)
            cls.second_created = second.answer()
            cls.second_stats = second.ask(f"await {WHILE_DEAD}")
            sender.ask(f"send {WHILE_DEAD} {AFTER - WHILE_DEAD}")
            cls.ends = [a["counters"] for a in ask_all(processes, f"await {AFTER}")]
            ask_all(processes, "shutdown")
            cls.statuses = [process.end() for process in processes]
        finally:
            for process in processes:
                process.close()

    def test_a_fresh_joiner_replays_the_whole_log_as_received(self):
        replayed = self.first_created["replayed"]
        self.assertEqual(counters(replayed), list(range(BEFORE_JOIN)))
        self.assertTrue(all(item["received"] for item in replayed), replayed)
        self.assertEqual(self.first_created["at_create"], list(range(BEFORE_JOIN)))
        self.assertEqual(self.first_status, -signal.SIGKILL)

    def test_the_restarted_joiner_replays_its_log_then_what_it_lacked(self):
        replayed = self.second_created["replayed"]
        snapshot, messages = replayed[0], replayed[1:]
        # Its own log: its snapshot, then the messages after it.
        self.assertEqual(snapshot["kind"], spindle.REPLAY_SNAPSHOT)
        self.assertFalse(snapshot["received"])
        self.assertEqual([snapshot["view_id"], snapshot["seq"]], self.snapshot_point)
        self.assertEqual(json.loads(snapshot["data"]), list(range(SNAPSHOT_AT)))
        own = [item for item in messages if not item["received"]]
        sent = [item for item in messages if item["received"]]
        self.assertEqual(messages, own + sent, "an item of its own log after a received one")
        self.assertEqual(counters(own), list(range(SNAPSHOT_AT, FIRST_LIFE)))
        # Then what it lacked: the rest, no gap, no duplicate.
        self.assertEqual(counters(sent), list(range(FIRST_LIFE, WHILE_DEAD)))
        for item in messages:
            self.assertEqual(item["kind"], spindle.REPLAY_MESSAGE)
            self.assertEqual((item["subgroup"], item["sender"]), (0, 0), item)
        # One sender, whose messages are numbered per view.
        indices = [(item["view_id"], item["sender_index"]) for item in messages]
        self.assertEqual(indices, sorted(set(indices)), "sender indices not increasing")
        points = [(item["view_id"], item["seq"]) for item in messages]
        self.assertEqual(points, sorted(set(points)), "(view_id, seq) not increasing")
        self.assertGreaterEqual(points[0], tuple(self.snapshot_point), "a message it covers")

    def test_after_create_its_state_is_the_members(self):
        for before in self.members_before:
            self.assertEqual(before, list(range(WHILE_DEAD)))
        self.assertEqual(self.second_created["at_create"], self.members_before[0])

    def test_stats_count_what_it_was_sent(self):
        sent = WHILE_DEAD - FIRST_LIFE
        self.assertGreaterEqual(self.second_stats["log_catchup_records"], sent)
        self.assertGreaterEqual(
            self.second_stats["log_catchup_bytes"],
            sum(len(str(counter)) for counter in range(FIRST_LIFE, WHILE_DEAD)),
        )

    def test_every_process_ends_with_every_counter_once(self):
        for end in self.ends:
            self.assertEqual(end, list(range(AFTER)))
        self.assertEqual(self.statuses, [0, 0, 0])


class ReplayErrorTest(unittest.TestCase):
    """A member with a log replays it inside Group() before it asks to
    join: an exception there fails the create, with no member to ask."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.TemporaryDirectory(prefix="spindle-py-replay-")
        cls.log_dir = os.path.join(cls.root.name, "log")
        subgroup = spindle.Subgroup(members=[0], window=4, max_payload=64)
        with spindle.Group(
            [subgroup], bootstrap=cls.root.name, bootstrap_kind="dir", log_dir=cls.log_dir,
            logged_subgroups=[0],
        ) as group:
            for counter in range(3):
                group.send(0, str(counter).encode())
            group.flush_persistent(0, WAIT)
            group.shutdown(WAIT)

    @classmethod
    def tearDownClass(cls):
        cls.root.cleanup()

    def rejoin(self, on_replay):
        return spindle.Group(
            [spindle.Subgroup(members=[0], window=4, max_payload=64)],
            join=f"127.0.0.1:{free_port()}",
            bootstrap=f"127.0.0.1:{free_port()}",
            bootstrap_kind="tcp",
            bootstrap_timeout_ms=2000,
            tolerate_failures=True,
            log_dir=self.log_dir,
            logged_subgroups=[0],
            on_replay=on_replay,
        )

    def test_an_exception_in_on_replay_fails_the_create_chained_from_it(self):
        cases = [
            (ValueError("counter out of order"), spindle.InvalidArgument),
            (spindle.NotSupported.make("no such state"), spindle.NotSupported),
            # Again would make the join ask again: refused as invalid instead.
            (spindle.Again.make("later"), spindle.InvalidArgument),
        ]
        for raised, expected in cases:
            with self.subTest(raised=type(raised).__name__):
                seen = []

                def on_replay(item):
                    seen.append(item)
                    if len(seen) == 2:
                        raise raised

                with self.assertRaises(expected) as caught:
                    self.rejoin(on_replay)
                self.assertIs(caught.exception.__cause__, raised)
                self.assertEqual(caught.exception.call, "spindle_group_create")
                text = str(caught.exception)
                self.assertIn("replay upcall refused the message of subgroup 0", text)
                self.assertIn(f"on_replay raised {type(raised).__name__}", text)
                self.assertEqual([item.data for item in seen], [b"0", b"1"])
                self.assertEqual(
                    [(item.kind, item.received) for item in seen],
                    [(spindle.REPLAY_MESSAGE, False)] * 2,
                )

    def test_keyboard_interrupt_in_on_replay_goes_on_as_it_is(self):
        def on_replay(item):
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            self.rejoin(on_replay)


if __name__ == "__main__":
    unittest.main()
