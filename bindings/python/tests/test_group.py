"""Three member processes over shared memory, bootstrapped through a
private temporary directory (tests/member.py is each member)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from support import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
MEMBER = os.path.join(HERE, "member.py")
MEMBERS = 3
MESSAGES = 40
DEADLINE = 60  # seconds a whole run may take


def run_members(scenario, keep_stdin_open=()):
    """Starts the members, returns their parsed results by rank; fails
    the test naming any member that exited non-zero. Ranks in
    keep_stdin_open get a pipe as stdin, closed once every other member
    has exited."""
    with tempfile.TemporaryDirectory(prefix="spindle-py-") as bootstrap:
        procs = {}
        for rank in range(MEMBERS):
            procs[rank] = subprocess.Popen(
                [sys.executable, MEMBER, scenario, str(rank), bootstrap],
                stdin=subprocess.PIPE if rank in keep_stdin_open else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        outputs = {}
        try:
            order = [r for r in procs if r not in keep_stdin_open] + list(keep_stdin_open)
            for rank in order:
                closing = "" if rank in keep_stdin_open else None  # EOF on its stdin
                out, err = procs[rank].communicate(closing, timeout=DEADLINE)
                outputs[rank] = (procs[rank].returncode, out, err)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
    failed = [
        f"member {rank} exited {code}:\n{err}"
        for rank, (code, out, err) in outputs.items()
        if code != 0
    ]
    if failed:
        raise AssertionError("\n".join(failed))
    return {
        rank: (json.loads(out.splitlines()[-1]), err) for rank, (_, out, err) in outputs.items()
    }


class MulticastTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.results = {rank: result for rank, (result, _) in run_members("multicast").items()}

    def expected(self, subgroup):
        return {
            (sender, index): f"sg{subgroup} from {sender} #{index}"
            for sender in range(MEMBERS)
            for index in range(MESSAGES)
        }

    def test_atomic_every_member_delivers_every_message_once_in_one_order(self):
        sequences = [self.results[rank]["atomic"] for rank in range(MEMBERS)]
        for rank, sequence in enumerate(sequences):
            got = {(sender, index): data for sender, index, _, data in sequence}
            self.assertEqual(len(sequence), len(got), f"member {rank} delivered a message twice")
            self.assertEqual(got, self.expected(0), f"member {rank}")
            seqs = [seq for _, _, seq, _ in sequence]
            self.assertEqual(seqs, sorted(set(seqs)), f"member {rank}: seq not increasing")
        self.assertEqual(sequences[1], sequences[0], "members 0 and 1 disagree on the order")
        self.assertEqual(sequences[2], sequences[0], "members 0 and 2 disagree on the order")

    def test_unordered_every_member_gets_every_message_once_in_sender_order(self):
        for rank in range(MEMBERS):
            sequence = self.results[rank]["unordered"]
            got = {(sender, index): data for sender, index, _, data in sequence}
            self.assertEqual(len(sequence), len(got), f"member {rank} delivered a message twice")
            self.assertEqual(got, self.expected(1), f"member {rank}")
            for sender in range(MEMBERS):
                indices = [index for s, index, _, _ in sequence if s == sender]
                self.assertEqual(indices, list(range(MESSAGES)), f"member {rank}, sender {sender}")

    def test_stats_count_what_was_sent_and_delivered(self):
        for rank in range(MEMBERS):
            result = self.results[rank]
            self.assertEqual(result["messages_sent"], 2 * MESSAGES, f"member {rank}")
            self.assertEqual(
                result["messages_delivered"], 2 * MEMBERS * MESSAGES, f"member {rank}"
            )
            self.assertEqual(
                result["delivery_batch_messages"], 2 * MEMBERS * MESSAGES, f"member {rank}"
            )
            self.assertEqual(result["delivery_batches"], result["delivery_batch_count"])


class LeaveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.results = run_members("leave", keep_stdin_open=(MEMBERS - 1,))

    def test_survivors_see_a_view_without_the_leaver(self):
        for rank in range(MEMBERS - 1):
            result, _ = self.results[rank]
            self.assertEqual(result["first_view"], [0, [0, 1, 2]], f"member {rank}")
            view_id, members, left, my_rank = result["view"]
            self.assertGreater(view_id, 0, f"member {rank}")
            self.assertEqual(members, [0, 1], f"member {rank}")
            self.assertEqual(left, [2], f"member {rank}")
            self.assertEqual(my_rank, rank, f"member {rank}")
            self.assertEqual(result["left_name"].split("@")[0], "member-2", f"member {rank}")
            self.assertIn(view_id, result["callback_views"], f"member {rank}")

    def test_survivors_deliver_every_message_of_the_leaver_in_order(self):
        for rank in range(MEMBERS - 1):
            result, _ = self.results[rank]
            expected = [f"sg0 from 2 #{index}" for index in range(MESSAGES)]
            self.assertEqual(result["from_leaver"], expected, f"member {rank}")

    def test_an_exception_in_a_callback_is_logged_and_the_member_goes_on(self):
        for rank in range(MEMBERS - 1):
            result, _ = self.results[rank]
            raised = [
                message
                for name, level, message in result["logged"]
                if name == "spindle" and level == "ERROR" and "view callback raised" in message
            ]
            self.assertTrue(raised, f"member {rank}: not logged: {result['logged']}")
            self.assertIn("on_view raises on purpose", raised[0], f"member {rank}")

    def test_library_log_lines_reach_python_logging(self):
        for rank in range(MEMBERS - 1):
            result, _ = self.results[rank]
            view_lines = [
                message
                for name, level, message in result["logged"]
                if name == "spindle.view" and level == "INFO"
            ]
            self.assertTrue(
                any("installed" in line for line in view_lines),
                f"member {rank}: no 'view ... installed' INFO line on spindle.view: "
                f"{result['logged']}",
            )


class JoinTest(unittest.TestCase):
    def test_a_joiner_gets_the_state_and_later_messages(self):
        ports = f"{free_port()},{free_port()}"
        start = [sys.executable, MEMBER, "join"]
        member = subprocess.Popen(
            start + ["0", ports], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            ready = member.stdout.readline()  # the group of one is up
            if ready != "ready\n":
                self.fail(f"member 0 did not start its group: {ready}{member.stderr.read()}")
            joiner = subprocess.run(
                start + ["1", ports], capture_output=True, text=True, timeout=DEADLINE
            )
            out, err = member.communicate(timeout=DEADLINE)
        finally:
            if member.poll() is None:
                member.kill()
                member.communicate()
        self.assertEqual(member.returncode, 0, f"member 0:\n{err}")
        self.assertEqual(joiner.returncode, 0, f"joiner:\n{joiner.stderr}")
        original = json.loads(out.splitlines()[-1])
        joined = json.loads(joiner.stdout.splitlines()[-1])
        self.assertEqual(joined["loaded"], ["state of member 0"])
        self.assertEqual(joined["member_id"], 1)
        for result in (original, joined):
            self.assertEqual(result["view"][1:], [[0, 1], [1]])
            self.assertEqual(result["delivered"], [[0, "after the join"]])
        self.assertEqual(original["view"][0], joined["view"][0])
        self.assertEqual(joined["refused"], "SPINDLE_EPERM")


if __name__ == "__main__":
    unittest.main()


class PointToPointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.results = {rank: result for rank, (result, _) in run_members("p2p").items()}

    def test_queries_are_answered_from_a_thread_and_from_the_callback(self):
        self.assertEqual(
            self.results[0]["replies"],
            {
                "1": "rank 1 from its thread to who is 1?",
                "2": "rank 2 in the callback to who is 2?",
            },
        )
        self.assertEqual(self.results[1]["queries"], [0])
        self.assertTrue(self.results[2]["answered"])

    def test_one_way_messages_arrive_once_in_order(self):
        self.assertEqual(self.results[1]["received"], [[0, f"n {i}"] for i in range(20)])

    def test_bad_sends_are_refused_naming_the_error(self):
        self.assertEqual(
            self.results[0]["refused"],
            ["SPINDLE_EINVAL", "SPINDLE_EMSGSIZE", "SPINDLE_ENOENT"],
        )
