#!/usr/bin/env python3
"""Takes out of an abidw dump the growth docs/ABI.md promises is compatible,
so that abidiff reports everything else (scripts/check-abi.sh).

Usage: abi-appended.py BASELINE CURRENT OUT

- A sized struct (include/spindle/group.h "Sized structs"), or one only
  the library makes (struct spindle_config, struct spindle_view_info), whose baseline
  members are the first members of the current one, at the same offsets:
  the members appended after them are removed from the current dump and
  its size set back, so that abidiff still compares every member the
  baseline has (and every type they reach) and nothing appended.
- struct spindle_group_setup, which is its options and then members that
  never change: when its members are the baseline's and everything after
  the options moved by exactly what the options grew by, the offsets and
  size are set back.

Writes the result to OUT and prints one line per struct it changed. Struct
changes of any other shape are left in, for abidiff to report. abidiff's
suppression specifications cannot say this: a suppressed struct also hides
every change of the types reached through it (the delivery callback's
struct spindle_message through the options), whatever else it states.
"""

import re
import sys

SIZED = ("spindle_group_options", "spindle_subgroup_config", "spindle_stats")
# Made only by the library and read by the program, which reads the
# members it knows (docs/ABI.md "Growing a struct").
LIBRARY_MADE = ("spindle_config", "spindle_view_info")
SETUP = "spindle_group_setup"
MEMBER = re.compile(
    r"\s*<data-member access='public' layout-offset-in-bits='(\d+)'>\s*"
    r"<var-decl name='(\w+)'[^>]*/>\s*</data-member>"
)


def class_decl(text, name):
    """(match of the defining class-decl, its size, [(offset, name, span)])."""
    found = re.search(
        r"<class-decl name='%s' size-in-bits='(\d+)'.*?</class-decl>" % name, text, re.S
    )
    if found is None:
        return None
    members = [
        (int(m.group(1)), m.group(2), (m.start(), m.end()))
        for m in MEMBER.finditer(found.group(0))
    ]
    return found, int(found.group(1)), members


def appended(baseline, current, name):
    """current with name's appended members taken out, and what was taken."""
    base, cur = class_decl(baseline, name), class_decl(current, name)
    if base is None or cur is None:
        return current, []
    _, base_size, base_members = base
    found, cur_size, cur_members = cur
    prefix = [(o, n) for o, n, _ in base_members]
    head = [(o, n) for o, n, _ in cur_members[: len(prefix)]]
    if len(cur_members) <= len(prefix) or head != prefix:
        return current, []
    block = found.group(0)
    first_appended = cur_members[len(prefix)][2][0]
    last = cur_members[-1][2][1]
    block = block[:first_appended] + block[last:]
    block = block.replace("size-in-bits='%d'" % cur_size, "size-in-bits='%d'" % base_size, 1)
    taken = [n for _, n, _ in cur_members[len(prefix):]]
    return current[: found.start()] + block + current[found.end():], taken


def setup_moved(baseline, current, growth):
    """current with the setup's members set back by growth bits, when they
    moved by exactly that."""
    base, cur = class_decl(baseline, SETUP), class_decl(current, SETUP)
    if base is None or cur is None or growth == 0:
        return current, False
    _, base_size, base_members = base
    found, cur_size, cur_members = cur
    if [n for _, n, _ in base_members] != [n for _, n, _ in cur_members] or not base_members:
        return current, False
    if base_members[0][0] != 0 or cur_members[0][0] != 0 or cur_size != base_size + growth:
        return current, False
    if any(c[0] != b[0] + growth for b, c in zip(base_members[1:], cur_members[1:])):
        return current, False
    block = found.group(0)
    pairs = list(zip(cur_members, base_members))
    for (cur_offset, _, span), (base_offset, _, _) in reversed(pairs):
        member = block[span[0]: span[1]].replace(
            "layout-offset-in-bits='%d'" % cur_offset, "layout-offset-in-bits='%d'" % base_offset
        )
        block = block[: span[0]] + member + block[span[1]:]
    block = block.replace("size-in-bits='%d'" % cur_size, "size-in-bits='%d'" % base_size, 1)
    return current[: found.start()] + block + current[found.end():], True


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: abi-appended.py BASELINE CURRENT OUT")
    with open(sys.argv[1]) as f:
        baseline = f.read()
    with open(sys.argv[2]) as f:
        current = f.read()
    base_options, cur_options = (
        class_decl(text, "spindle_group_options") for text in (baseline, current)
    )
    for name in SIZED + LIBRARY_MADE:
        current, taken = appended(baseline, current, name)
        if taken:
            print("abi-appended: struct %s: appended %s" % (name, ", ".join(taken)))
    if base_options is not None and cur_options is not None:
        current, moved = setup_moved(baseline, current, cur_options[1] - base_options[1])
        if moved:
            print("abi-appended: struct %s: its members after the options moved with them" % SETUP)
    with open(sys.argv[3], "w") as f:
        f.write(current)


if __name__ == "__main__":
    main()
