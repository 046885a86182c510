#!/bin/sh
# The longer linearizability run (docs/KV.md "Linearizability"): ROUNDS
# histories against `spindle-kv --local 3`, each across a SIGKILL of a
# replica and a join, with OPS operations before the kill and OPS after the
# join, checked by tests/kv/kv_linearizability.py; ROUNDS more with every
# replica logged (--log-dir: a write is answered once on every disk); then
# ROUNDS runs with --stale-reads, each of which must be found not
# linearizable.
# Usage: sh scripts/kv-linearizability.sh [BUILD_DIR] [ROUNDS] [OPS]
#   (defaults: build, 5, 20000)
set -eu
BUILD=${1:-build}
ROUNDS=${2:-5}
OPS=${3:-20000}
KV="$BUILD/examples/kv/spindle-kv"
HERE=$(dirname "$0")/../tests/kv
[ -x "$KV" ] || { echo "kv-linearizability: $KV not found; build first" >&2; exit 2; }
python=/usr/bin/python3
"$python" "$HERE/kv_linearizability.py" selftest
i=1
while [ "$i" -le "$ROUNDS" ]; do
    echo "round $i of $ROUNDS: $OPS operations, a SIGKILL, a join, $OPS more"
    "$python" "$HERE/kv_history.py" "$KV" --ops "$OPS" --clients 16 --keys 8
    i=$((i + 1))
done
i=1
while [ "$i" -le "$ROUNDS" ]; do
    echo "logged round $i of $ROUNDS: $OPS operations, a SIGKILL, a join, $OPS more"
    "$python" "$HERE/kv_history.py" "$KV" --ops "$OPS" --clients 16 --keys 8 --log-dir
    i=$((i + 1))
done
i=1
while [ "$i" -le "$ROUNDS" ]; do
    echo "stale round $i of $ROUNDS: $OPS operations with --stale-reads"
    "$python" "$HERE/kv_history.py" "$KV" --ops "$OPS" --clients 16 --keys 8 --stale-reads
    i=$((i + 1))
done
