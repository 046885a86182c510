"""examples/chat.py under spindle-run (SPINDLE_RUN: its path): three copies
form a group from their environment alone and print the same digest of the
lines they delivered."""

import os
import re
import subprocess
import sys
import unittest

import support

CHAT = os.path.join(support.HERE, "..", "examples", "chat.py")


class ChatExampleTest(unittest.TestCase):
    def test_three_copies_under_spindle_run_agree_on_the_order(self):
        run = os.environ.get("SPINDLE_RUN")
        if not run:
            self.skipTest("SPINDLE_RUN is not set (the path of spindle-run)")
        # The members listen on three consecutive ports, reserved for this
        # process: no other test can take one (tests/test_ports.py).
        ran = subprocess.run(
            [
                run,
                "-n",
                "3",
                "--base-port",
                str(support.free_port_block(3)),
                sys.executable,
                CHAT,
                "--lines",
                "4",
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
        self.assertEqual(ran.returncode, 0, f"spindle-run failed:\n{ran.stdout}\n{ran.stderr}")
        digests = re.findall(
            r"^\[(\d)\] member \1: 12 lines, order digest (\w+)$", ran.stdout, re.M
        )
        self.assertEqual(sorted(rank for rank, _ in digests), ["0", "1", "2"], ran.stdout)
        self.assertEqual(len({digest for _, digest in digests}), 1, ran.stdout)


if __name__ == "__main__":
    unittest.main()
