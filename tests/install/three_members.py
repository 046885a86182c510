"""A member of a three-member group through the installed Python bindings:
three_members.c again, in Python. Started three times by
`spindle-run -n 3 python3 three_members.py ...` and driven by
three_members.sh, which looks at it with spindle-stat and has member 2
removed with spindle-ctl; it prints the lines that script checks.

What it does with the bindings, each checked:
  - a logging handler on the logger "spindle" (the package routes the
    library's lines there) at the library's level info: every line goes
    to standard output as "sink: <level> <module>: <message>";
  - its own event loop: dispatch=True, Group.fileno() in an epoll
    selector, Group.dispatch() when it is readable;
  - member 0 multicasts REQUESTS requests; member 1 answers each from
    inside the on_deliver that delivers it (kept for on_send_ready when
    the send raises Again); every member delivers every request and
    reply, each reply after its request;
  - member 0 asks member 1 with p2p_query how many replies it sent, and
    member 1 answers from inside its on_p2p (dispatched from its loop):
    REQUESTS;
  - it writes <work>/ready-<id> and waits: members 0 and 1 for the view
    without member 2, in which member 0 multicasts once more and both
    deliver it before they shut down; member 2 for its removal (Removed).
Exit 0 when all of that happened, 1 naming what did not.

Usage: python3 three_members.py GROUP_NAME ADMIN_DIR WORK_DIR  (under spindle-run)
The package is imported from sys.path (PYTHONPATH or the system's), never
from a source tree.
"""

import logging
import os
import re
import selectors
import sys
import time

import spindle

REQUESTS = 10
REMOVED = 2  # the member spindle-ctl removes
TIMEOUT = 60.0  # seconds, for each wait

LEVELS = {"ERROR": "error", "WARNING": "warn", "INFO": "info", "DEBUG": "debug"}


class Sink(logging.Handler):
    """The library's lines on standard output, counted."""

    def __init__(self):
        super().__init__()
        self.lines = 0

    def emit(self, record):
        module = record.name.split(".", 1)[1] if "." in record.name else record.name
        level = LEVELS.get(record.levelname, "?")
        print(f"sink: {level} {module}: {record.getMessage()}", flush=True)
        self.lines += 1


class Member:
    def __init__(self):
        self.group = None
        self.self = None
        self.request_seen = [False] * REQUESTS
        self.requests = self.replies = self.after_view = 0
        self.replies_sent = self.queries_answered = 0
        self.replies_pending = 0  # replies the window had no room for
        self.mistakes = []
        self.view_id = 0
        self.view_members = 0
        self.removed_seen = False  # a view reported member REMOVED as left

    def mistake(self, text):
        self.mistakes.append(text)

    def send_reply(self, number):
        """Sends the reply to request number; False when the window is full."""
        try:
            self.group.send(0, b"reply %d" % number)
        except spindle.Again:
            return False
        except spindle.SpindleError as error:
            self.mistake(f"reply {number} from on_deliver: {error}")
            return True
        self.replies_sent += 1
        return True

    def on_deliver(self, batch):
        for message in batch:
            text = message.data.decode(errors="replace")
            request = re.fullmatch(r"request (\d+)", text)
            reply = re.fullmatch(r"reply (\d+)", text)
            if request and int(request[1]) < REQUESTS:
                self.request_seen[int(request[1])] = True
                self.requests += 1
                # The reply, sent from inside the callback that delivers the request.
                if self.self == 1 and (
                    self.replies_pending > 0 or not self.send_reply(int(request[1]))
                ):
                    self.replies_pending += 1
            elif reply and int(reply[1]) < REQUESTS:
                if not self.request_seen[int(reply[1])]:
                    self.mistake(f"reply {reply[1]} delivered before its request")
                self.replies += 1
            elif text == "after the removal":
                if message.view_id != self.view_id or self.view_members != 2:
                    self.mistake(
                        f"the message after the removal came in view {message.view_id}, "
                        "not in the view of two"
                    )
                self.after_view += 1
            else:
                self.mistake(f"delivered an unknown message {text!r}")

    def on_send_ready(self, subgroup):
        """The window has room again: the replies on_deliver had to keep, in order."""
        first = self.requests - self.replies_pending
        while self.replies_pending > 0 and self.send_reply(first):
            first += 1
            self.replies_pending -= 1

    def on_view(self, view):
        self.view_id = view.view_id
        self.view_members = len(view.members)
        if REMOVED in view.left:
            self.removed_seen = True

    def on_p2p(self, message):
        """Member 1's: answers a query with the number of replies it sent,
        from inside the callback."""
        if not message.is_query:
            self.mistake(f"a one-way point-to-point message from member {message.sender_id}")
            return
        try:
            self.group.p2p_reply(message, b"replies sent %d" % self.replies_sent)
        except spindle.SpindleError as error:
            self.mistake(f"p2p reply to member {message.sender_id}: {error}")
            return
        self.queries_answered += 1


def loop_until(member, selector, done, what):
    """The event loop: dispatches what the group's descriptor says is
    queued until done() holds. Returns None, or the error that stopped the
    member (e.g. Removed: the descriptor becomes readable at the stop
    itself, so no timer is needed to notice it), or TimedOut naming what."""
    deadline = time.monotonic() + TIMEOUT
    while not done():
        left = deadline - time.monotonic()
        if left <= 0:
            print(f"member {member.self}: no {what} within {TIMEOUT} s", file=sys.stderr)
            return spindle.TimedOut.make(f"no {what}", "loop_until")
        if selector.select(timeout=left):
            try:
                member.group.dispatch()
            except spindle.SpindleError as error:
                return error
    return None


def point_to_point_query(member):
    """Member 0 asks member 1 directly, not through the multicast; its
    thread waits for the reply, which does not go through its dispatch queue."""
    if member.self != 0:
        return True
    try:
        reply = member.group.p2p_query(1, b"how many replies did you send?", TIMEOUT)
    except spindle.SpindleError as error:
        print(f"member 0: point-to-point query to member 1: {error}", file=sys.stderr)
        return False
    text = reply.decode(errors="replace")
    if text != f"replies sent {REQUESTS}":
        print(f"member 0: member 1 answered {text!r}, not {REQUESTS} replies", file=sys.stderr)
        return False
    print(f"member 0: member 1 answered the point-to-point query: {text}", flush=True)
    return True


def run(member, selector, work):
    group = member.group
    if member.self == 0:
        for index in range(REQUESTS):
            # Outside any callback a send waits for room in the window.
            group.send(0, b"request %d" % index)
    error = loop_until(
        member,
        selector,
        lambda: member.requests == REQUESTS and member.replies == REQUESTS,
        "request/reply round",
    )
    if error is not None:
        print(f"member {member.self}: request/reply round: {error}", file=sys.stderr)
        return False
    if not point_to_point_query(member):
        return False
    with open(os.path.join(work, f"ready-{member.self}"), "w", encoding="utf-8"):
        pass
    print(
        f"member {member.self}: delivered {member.requests} requests and "
        f"{member.replies} replies",
        flush=True,
    )

    if member.self == REMOVED:
        error = loop_until(member, selector, lambda: member.removed_seen, "removal")
        if not isinstance(error, spindle.Removed):
            print(f"member {member.self}: expected to be removed, got {error!r}", file=sys.stderr)
            return False
        print(f"member {member.self}: removed ({error.detail})", flush=True)
        return True
    error = loop_until(member, selector, lambda: member.removed_seen, "view without member 2")
    if error is None and member.self == 0:
        try:
            group.send(0, b"after the removal")
        except spindle.SpindleError as failed:
            error = failed
    if error is None:
        error = loop_until(
            member, selector, lambda: member.after_view == 1, "message after the removal"
        )
    if error is not None:
        print(f"member {member.self}: after the removal: {error}", file=sys.stderr)
        return False
    print(
        f"member {member.self}: view {member.view_id} of {member.view_members} members "
        f"without member {REMOVED}",
        flush=True,
    )
    return True


def main():
    if len(sys.argv) != 4:
        print(
            f"usage: {sys.argv[0]} GROUP_NAME ADMIN_DIR WORK_DIR (under spindle-run -n 3)",
            file=sys.stderr,
        )
        return 2
    group_name, admin_dir, work = sys.argv[1:]
    # Before anything logs: no line of the library reaches stderr.
    sink = Sink()
    logger = logging.getLogger("spindle")
    logger.addHandler(sink)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    spindle.log.set_level("info")

    member = Member()
    try:
        member.group = spindle.Group.from_env(
            group_name=group_name,
            admin_dir=admin_dir,
            tolerate_failures=True,
            dispatch=True,
            on_deliver=member.on_deliver,
            on_view=member.on_view,
            on_send_ready=member.on_send_ready,
            on_p2p=member.on_p2p,
        )
    except spindle.SpindleError as error:
        print(f"Group.from_env under spindle-run: {error}", file=sys.stderr)
        return 1
    member.self = member.group.member_id

    selector = selectors.EpollSelector()
    selector.register(member.group.fileno(), selectors.EVENT_READ)
    ok = run(member, selector, work)
    if ok and member.self != REMOVED:
        # Collective among the two that stay; in dispatch mode nothing of
        # theirs is queued any more, so it waits for nobody's dispatch.
        try:
            member.group.shutdown(10.0)
        except spindle.SpindleError as error:
            print(f"member {member.self}: shutdown: {error}", file=sys.stderr)
            ok = False
    selector.unregister(member.group.fileno())
    selector.close()
    member.group.close()
    if member.mistakes:
        print(
            f"member {member.self}: {len(member.mistakes)} mistakes, the first: "
            f"{member.mistakes[0]}",
            file=sys.stderr,
        )
        ok = False
    if member.self == 1 and member.queries_answered != 1:
        print(
            f"member 1: answered {member.queries_answered} point-to-point queries, not 1",
            file=sys.stderr,
        )
        ok = False
    if sink.lines == 0:
        print(f"member {member.self}: the log sink received no line", file=sys.stderr)
        ok = False
    print(
        f"member {member.self}: {'ok' if ok else 'FAILED'}, {sink.lines} log lines through the sink",
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
