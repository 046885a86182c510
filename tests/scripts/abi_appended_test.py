#!/usr/bin/env python3
"""scripts/abi-appended.py with abidiff, on the committed baseline edited to
be an earlier release: members appended to the options and the statistics
(with the setup's members moved by the options' growth) pass; a member
inserted in the middle of a sized struct, a member gone from a struct that
may not change (spindle_message, reached only through the delivery
callback of the options), and a setup member added, are each reported.

Usage: abi_appended_test.py SCRIPT BASELINE   (abidiff on PATH)
"""

import re
import subprocess
import sys
import tempfile

SCRIPT, BASELINE = sys.argv[1], sys.argv[2]
MEMBER = (
    r"\s*<data-member access='public' layout-offset-in-bits='(\d+)'>\s*"
    r"<var-decl name='%s'[^>]*/>\s*</data-member>"
)


def block(text, name):
    found = re.search(
        r"<class-decl name='%s' size-in-bits='(\d+)'.*?</class-decl>" % name, text, re.S
    )
    assert found, name
    return found


def without(text, name, member, shrink=True):
    """text as if struct name had no member (and, with shrink, 64 bits less)."""
    found = block(text, name)
    edited = re.sub(MEMBER % member, "", found.group(0), count=1)
    assert edited != found.group(0), (name, member)
    if shrink:
        size = int(found.group(1))
        edited = edited.replace("size-in-bits='%d'" % size, "size-in-bits='%d'" % (size - 64), 1)
    return text[: found.start()] + edited + text[found.end():]


def setup_shifted(text, bits):
    """text with the setup's members after its options, and its size,
    smaller by bits."""
    found = block(text, "spindle_group_setup")
    edited = found.group(0)
    size = int(found.group(1))
    edited = edited.replace("size-in-bits='%d'" % size, "size-in-bits='%d'" % (size - bits), 1)
    def moved(offset):
        value = int(offset.group(1))
        return "layout-offset-in-bits='%d'" % (value - bits if value else 0)

    edited = re.sub(r"layout-offset-in-bits='(\d+)'", moved, edited)
    return text[: found.start()] + edited + text[found.end():]


def reported(earlier, current):
    """abidiff's status for earlier against what the script leaves of current."""
    with tempfile.TemporaryDirectory() as work:
        paths = [f"{work}/{n}.abi" for n in ("earlier", "current", "compared")]
        for path, text in zip(paths, (earlier, current)):
            with open(path, "w") as f:
                f.write(text)
        subprocess.run([sys.executable, SCRIPT, *paths], check=True)
        diff = subprocess.run(["abidiff", paths[0], paths[2]], stdout=subprocess.DEVNULL)
        return diff.returncode


with open(BASELINE) as f:
    current = f.read()
earlier = without(current, "spindle_group_options", "admin_dir")
earlier = setup_shifted(without(earlier, "spindle_stats", "dispatch_queue_peak"), 64)
cases = [
    ("members appended to the options and the statistics", earlier, False),
    (
        "a member inserted in the middle of spindle_stats",
        without(current, "spindle_stats", "pinned_bytes"),
        True,
    ),
    (
        "spindle_message changed (reached through the options)",
        without(earlier, "spindle_message", "length", shrink=False),
        True,
    ),
    (
        "a member added to the setup after its options",
        without(earlier, "spindle_group_setup", "local_rank", shrink=False),
        True,
    ),
]
failed = 0
for what, text, expect_report in cases:
    status = reported(text, current)
    if (status != 0) != expect_report:
        expected = "a report" if expect_report else "0"
        print(f"FAIL: {what}: abidiff status {status}, expected {expected}")
        failed += 1
    else:
        print(f"ok: {what}: abidiff status {status}")
sys.exit(1 if failed else 0)
