#!/bin/sh
# `make demo`: runs a 3-member group over shared memory and shows that every
# member delivered the same messages in the same order.
# Usage: sh scripts/demo.sh BUILD_DIR
set -eu
BUILD=${1:-build}
DEMO="$BUILD/examples/demo/spindle-demo"
if [ ! -x "$DEMO" ]; then
    echo "demo: $DEMO not found; build first (make build)" >&2
    exit 1
fi
exec "$DEMO" --members 3 --messages 1000
