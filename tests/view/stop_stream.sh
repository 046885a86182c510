#!/bin/bash
# Sourced by join.sh and soak.sh: ends a stream of spindle-bench members
# run with --stop-file (bench_main.c's usage says the protocol), so that the
# stream lasts exactly as long as the test needs it, however slow a loaded
# machine makes the joins. The caller defines fail and TIMEOUT, and
# STOP_MARGIN: messages per sender after the end is asked for.
#
# end_stream: the part of the run that needs the stream is over. Every
# sender reports what it has sent and waits ("hold"); the stream then ends
# at the highest count reported plus STOP_MARGIN messages (at most CAP),
# which every process of the group reads from the stop file. Sets
# STREAM_MESSAGES. Usage: end_stream STOP_FILE CAP MEMBER_ID...
end_stream() {
    local stop=$1 cap=$2 m sent deadline=$((SECONDS + TIMEOUT))
    shift 2
    STREAM_MESSAGES=0
    printf 'hold\n' >"$stop"
    for m in "$@"; do
        until [ -f "$stop.$m" ]; do
            [ "$SECONDS" -lt "$deadline" ] || fail "member $m did not report its count in ${TIMEOUT}s"
            sleep 0.01
        done
        sent=$(cat "$stop.$m")
        case $sent in "" | *[!0-9]*) fail "member $m reported '$sent' as its count" ;; esac
        [ "$sent" -le "$STREAM_MESSAGES" ] || STREAM_MESSAGES=$sent
    done
    STREAM_MESSAGES=$((STREAM_MESSAGES + STOP_MARGIN))
    [ "$STREAM_MESSAGES" -le "$cap" ] || STREAM_MESSAGES=$cap
    printf '%d\n' "$STREAM_MESSAGES" >"$stop"
}
