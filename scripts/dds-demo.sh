#!/bin/sh
# `make dds-demo`: a publisher and a subscriber of one atomic topic, two
# processes over shared memory, configured by a file written here (ports
# from this script's PID, so two demos do not meet); shows the samples
# flowing with their info (writer, sequence number, age).
# Usage: sh scripts/dds-demo.sh BUILD_DIR [SAMPLES]
set -eu
BUILD=${1:-build}
SAMPLES=${2:-10}
PUB="$BUILD/examples/dds/spindle-dds-pub"
SUB="$BUILD/examples/dds/spindle-dds-sub"
for tool in "$PUB" "$SUB"; do
    if [ ! -x "$tool" ]; then
        echo "dds-demo: $tool not found; build first (make build)" >&2
        exit 1
    fi
done
WORK=$(mktemp -d /tmp/spindle-dds-demo-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
BASE=$((30000 + $$ % 20000))
cat >"$WORK/demo.ini" <<INI
[dds]
group = dds-demo-$$
[participant.0]
name = publisher
port = $BASE
[participant.1]
name = subscriber
port = $((BASE + 1))
[topic.0]
name = hello
qos = atomic
publishers = 0
subscribers = 1
max_sample_size = 64
INI
echo "dds demo: one publisher, one subscriber of topic \"hello\" (atomic), $SAMPLES samples"
"$SUB" "$WORK/demo.ini" subscriber hello "$SAMPLES" &
sub=$!
"$PUB" "$WORK/demo.ini" publisher hello "$SAMPLES"
wait "$sub"
echo "dds demo: the subscriber took all $SAMPLES samples"
