#!/bin/sh
# The shell and Python twins of tests/test_ports.h reserve blocks through
# the same lock files: a block the shell holds is locked for Python's
# flock too, Python's reservation passes over it, and both lie below the
# ephemeral range on the same grid of 32-port blocks.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
TMPDIR=$(mktemp -d /tmp/spindle-ports-twins-XXXXXX)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
. "$here/test_ports.sh"
test_port_block || { echo "FAIL: the shell found no block"; exit 1; }
python3 - "$here" "$TEST_PORT_BASE" <<'PY' || exit 1
import fcntl, os, sys
sys.path.insert(0, sys.argv[1])
import test_ports
shell_block = int(sys.argv[2])
low = test_ports._ephemeral_low()
assert test_ports.LOW <= shell_block < low and (shell_block - test_ports.LOW) % 32 == 0, shell_block
with open(os.path.join(os.environ["TMPDIR"], "spindle-test-ports", str(shell_block))) as f:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        sys.exit(f"FAIL: the shell's block {shell_block} is not locked for Python")
    except BlockingIOError:
        pass
# Every reservation Python makes, until it holds every other block, avoids
# the shell's (a listener of a concurrent test must not end this early).
test_ports._bindable = lambda base, count: True
blocks = (low - test_ports.LOW) // test_ports.BLOCK
seen = set()
for _ in range(blocks - 1):
    base = test_ports.port_block(test_ports.BLOCK)
    assert base != shell_block and base not in seen, (base, shell_block)
    seen.add(base)
print(f"ok: shell block {shell_block}, Python took the other {len(seen)} blocks")
PY
