#!/usr/bin/env python3
"""A group chat in which every member sees every line in the same order.

    spindle-run -n 3 python3 chat.py [--lines N] [--config FILE]

Each copy is one member of a group its launcher started (spindle-run, srun:
spindle.Group.from_env); a configuration file, when given, supplies the rest
(transport, subgroups, ...). Every sender of subgroup 0 says N lines; every
member prints the lines as they are delivered, then a digest of the whole
sequence. The subgroup is atomic, so the digests agree: one order everywhere.

Deliveries are taken on the main thread from the group's queue
(group.messages()); the library's thread only copies each batch out.
"""

import argparse
import hashlib
import os
import sys

try:
    import spindle
except ImportError:  # run from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import spindle


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5, help="lines each member says")
    parser.add_argument("--config", help="configuration file for all but the members")
    args = parser.parse_args()

    def on_view(view):  # on the library's thread: keep it short
        print(f"view {view.view_id}: members {list(view.members)}", flush=True)

    try:
        group = spindle.Group.from_env(args.config, on_view=on_view)
    except spindle.SpindleError as e:
        sys.exit(f"chat: {e}")
    with group:
        me = group.member_id
        on_view(group.view)  # view 0, the group as started, is not an upcall
        subgroup = group.setup_subgroups[0]
        if me in subgroup.senders:
            for n in range(args.lines):
                group.send(0, f"line {n} from member {me}".encode())
        expected = len(subgroup.senders) * args.lines if me in subgroup.members else 0
        digest = hashlib.sha256()
        received = 0
        try:
            for message in group.messages(timeout=60) if expected else ():
                if message.subgroup != 0:
                    continue
                text = message.data.decode(errors="replace")
                print(f"member {message.sender_id} says: {text}")
                digest.update(f"{message.sender_id}:{text}\n".encode())
                received += 1
                if received == expected:
                    break
        except spindle.TimedOut:
            sys.exit(f"chat: member {me}: {received} of {expected} lines after a minute")
        group.shutdown()
    print(f"member {me}: {received} lines, order digest {digest.hexdigest()[:16]}", flush=True)


if __name__ == "__main__":
    main()
