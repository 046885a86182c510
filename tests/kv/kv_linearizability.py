"""A linearizability checker for spindle-kv histories (Wing & Gong's search
with Lowe's memoization, as Knossos and Porcupine do it).

The object is a map of registers, so a history is checked key by key (a
history of a map is linearizable if and only if the history of each key is:
linearizability is local, Herlihy & Wing 1990). A register's value is absent
(None) or an integer; its operations are

  read           -> None or the integer read
  write v        -> OK                       (SET key v)
  incr           -> the new integer          (INCR key; absent counts as 0)
  cas expected v -> 1 if the value was expected and is now v, else 0 (CAS)

An operation is (process, key, kind, argument, result, invoke, complete).
complete is None for an operation whose outcome is unknown (the connection
broke or timed out after the request was sent): it may have taken effect at
any point after its invocation, or never, and its result is not checked.
Reads with an unknown outcome change nothing and are dropped.

The search for one key keeps the set of operations already linearized and
the register's value; a state seen before is not searched again. An
operation may be linearized next when it was invoked before every pending
operation with a known outcome completed. The search is exact; a bound on
the states visited turns a search that would run too long into an
"undecided" answer rather than a wrong one.

Usage: kv_linearizability.py selftest
       kv_linearizability.py check HISTORY.json
Exits 0 when linearizable (selftest: when every hand-made history is judged
as it should be), 1 with the key and the operations that cannot be ordered
otherwise."""
import json
import sys

READ, WRITE, INCR, CAS = "read", "write", "incr", "cas"
DEFAULT_STATE_LIMIT = 2_000_000


class Op:
    __slots__ = ("process", "key", "kind", "arg", "result", "invoke", "complete")

    def __init__(self, process, key, kind, arg, result, invoke, complete):
        self.process, self.key, self.kind, self.arg = process, key, kind, arg
        self.result, self.invoke, self.complete = result, invoke, complete

    def __repr__(self):
        end = "?" if self.complete is None else self.complete
        arg = "" if self.arg is None else " %s" % (self.arg,)
        res = "unknown" if self.complete is None else repr(self.result)
        return "p%s %s %s%s -> %s [%s, %s]" % (self.process, self.kind, self.key, arg, res,
                                              self.invoke, end)


def step(state, op, check_result):
    """The register's value after op from state, or raises ValueError when
    op's recorded result cannot follow from state."""
    if op.kind == READ:
        if check_result and op.result != state:
            raise ValueError
        return state
    if op.kind == WRITE:
        return op.arg
    if op.kind == INCR:
        new = (state or 0) + 1
        if check_result and op.result != new:
            raise ValueError
        return new
    if op.kind == CAS:
        expected, new = op.arg
        swapped = state == expected
        if check_result and op.result != (1 if swapped else 0):
            raise ValueError
        return new if swapped else state
    raise ValueError


class Verdict:
    def __init__(self, ok, key=None, states=0, detail="", undecided=False):
        self.ok, self.key, self.states = ok, key, states
        self.detail, self.undecided = detail, undecided


def check_key(key, ops, state_limit=DEFAULT_STATE_LIMIT):
    """Whether the operations on one key (starting from absent) linearize."""
    known = sorted((o for o in ops if o.complete is not None), key=lambda o: o.invoke)
    unknown = sorted((o for o in ops if o.complete is None and o.kind != READ),
                     key=lambda o: o.invoke)
    all_known = (1 << len(known)) - 1
    visited = set()
    stack = [(0, 0, None)]
    deepest, deepest_at = -1, None
    while stack:
        kmask, umask, state = stack.pop()
        if kmask == all_known:
            return Verdict(True, key, len(visited))
        if (kmask, umask, state) in visited:
            continue
        visited.add((kmask, umask, state))
        if len(visited) > state_limit:
            return Verdict(False, key, len(visited), "more than %d states searched" % state_limit,
                           undecided=True)
        # The pending known-outcome operations that may go next: invoked
        # before the earliest completion among the pending ones.
        first = (~kmask & (kmask + 1)).bit_length() - 1
        min_complete = float("inf")
        window = []
        for i in range(first, len(known)):
            op = known[i]
            if op.invoke > min_complete:
                break
            if kmask >> i & 1:
                continue
            window.append(i)
            min_complete = min(min_complete, op.complete)
        done = bin(kmask).count("1")
        if done > deepest:
            deepest, deepest_at = done, (state, [known[i] for i in window if known[i].invoke <= min_complete])
        children = []
        for i in window:
            op = known[i]
            if op.invoke > min_complete:
                continue
            try:
                children.append((op.complete, kmask | 1 << i, umask, step(state, op, True)))
            except ValueError:
                pass
        for j, op in enumerate(unknown):
            if umask >> j & 1 or op.invoke > min_complete:
                continue
            children.append((float("inf"), kmask, umask | 1 << j, step(state, op, False)))
        # Earliest completion searched first (pushed last).
        children.sort(key=lambda c: c[0], reverse=True)
        stack.extend(c[1:] for c in children)
    state, candidates = deepest_at
    detail = ("after %d of %d operations with known outcome, the value is %r and none of "
              "these can come next:\n  %s" % (deepest, len(known), state,
                                               "\n  ".join(map(repr, candidates))))
    return Verdict(False, key, len(visited), detail)


def check_history(ops, state_limit=DEFAULT_STATE_LIMIT):
    """Checks every key; returns the list of Verdicts that are not ok."""
    by_key = {}
    for op in ops:
        by_key.setdefault(op.key, []).append(op)
    return [v for v in (check_key(k, by_key[k], state_limit) for k in sorted(by_key))
            if not v.ok]


def load(path):
    with open(path) as f:
        return [Op(*(tuple(x) if isinstance(x, list) else x for x in row))
                for row in json.load(f)]


def dump(ops, path):
    with open(path, "w") as f:
        json.dump([[o.process, o.key, o.kind, o.arg, o.result, o.invoke, o.complete]
                   for o in ops], f)


def report(verdicts, out=sys.stderr):
    for v in verdicts:
        what = "undecided" if v.undecided else "not linearizable"
        print("key %r: %s (%d states searched): %s" % (v.key, what, v.states, v.detail), file=out)


# Hand-made histories: (name, linearizable?, operations).
def _h(*rows):
    return [Op(*r) for r in rows]


SELFTEST = [
    ("sequential write then read", True,
     _h((1, "k", WRITE, 5, "OK", 0, 1), (2, "k", READ, None, 5, 2, 3))),
    ("stale read after an acknowledged write", False,
     _h((1, "k", WRITE, 5, "OK", 0, 1), (2, "k", READ, None, None, 2, 3))),
    ("concurrent read may see either value", True,
     _h((1, "k", WRITE, 5, "OK", 0, 10), (2, "k", READ, None, None, 1, 2),
        (3, "k", READ, None, 5, 3, 4))),
    ("read goes back to the old value", False,
     _h((1, "k", WRITE, 5, "OK", 0, 10), (2, "k", READ, None, 5, 1, 2),
        (3, "k", READ, None, None, 3, 4))),
    ("two concurrent writes, reads agree on the order", True,
     _h((1, "k", WRITE, 1, "OK", 0, 10), (2, "k", WRITE, 2, "OK", 0, 10),
        (3, "k", READ, None, 2, 11, 12), (4, "k", READ, None, 2, 13, 14))),
    ("two concurrent writes, reads disagree after both", False,
     _h((1, "k", WRITE, 1, "OK", 0, 10), (2, "k", WRITE, 2, "OK", 0, 10),
        (3, "k", READ, None, 2, 11, 12), (4, "k", READ, None, 1, 13, 14))),
    ("incr counts from absent", True,
     _h((1, "k", INCR, None, 1, 0, 1), (2, "k", INCR, None, 2, 2, 3))),
    ("two incrs return the same value", False,
     _h((1, "k", INCR, None, 1, 0, 5), (2, "k", INCR, None, 1, 1, 6))),
    ("an incr with unknown outcome that took effect", True,
     _h((1, "k", INCR, None, None, 0, None), (2, "k", INCR, None, 2, 5, 6))),
    ("an incr with unknown outcome that did not", True,
     _h((1, "k", INCR, None, None, 0, None), (2, "k", INCR, None, 1, 5, 6))),
    ("an effect before its invocation", False,
     _h((2, "k", READ, None, 7, 0, 1), (1, "k", WRITE, 7, None, 2, None))),
    ("cas succeeds once of two", True,
     _h((1, "k", WRITE, 0, "OK", 0, 1), (2, "k", CAS, (0, 1), 1, 2, 5),
        (3, "k", CAS, (0, 2), 0, 2, 5), (4, "k", READ, None, 1, 6, 7))),
    ("cas succeeds twice", False,
     _h((1, "k", WRITE, 0, "OK", 0, 1), (2, "k", CAS, (0, 1), 1, 2, 5),
        (3, "k", CAS, (0, 2), 1, 2, 5))),
    ("keys are independent", True,
     _h((1, "a", WRITE, 1, "OK", 0, 1), (2, "b", READ, None, None, 2, 3),
        (2, "a", READ, None, 1, 4, 5))),
    ("a violation on one key of two", False,
     _h((1, "a", WRITE, 1, "OK", 0, 1), (2, "b", WRITE, 3, "OK", 0, 1),
        (2, "b", READ, None, 3, 2, 3), (3, "a", READ, None, None, 2, 3))),
]


def selftest():
    wrong = []
    for name, linearizable, ops in SELFTEST:
        verdicts = check_history(ops)
        if (not verdicts) != linearizable or any(v.undecided for v in verdicts):
            wrong.append("%s: judged %s, want %s" % (
                name, "linearizable" if not verdicts else "not linearizable",
                "linearizable" if linearizable else "not linearizable"))
    # A long sequential history of one key with many concurrent readers
    # must be decided quickly (the search stays near one path).
    ops, t = [], 0
    for i in range(3000):
        ops.append(Op(i % 8, "k", WRITE if i % 3 == 0 else READ, i if i % 3 == 0 else None,
                      "OK" if i % 3 == 0 else i - i % 3, t, t + 3))
        t += 2
    verdicts = check_history(ops)
    if verdicts:
        wrong.append("long overlapping history judged not linearizable")
    for w in wrong:
        print("kv_linearizability selftest: %s" % w, file=sys.stderr)
    if wrong:
        return 1
    print("kv_linearizability selftest: %d hand-made histories judged right" % (len(SELFTEST) + 1))
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    if len(argv) == 3 and argv[1] == "check":
        ops = load(argv[2])
        verdicts = check_history(ops)
        report(verdicts)
        if verdicts:
            return 1
        print("kv_linearizability: %d operations linearizable" % len(ops))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
