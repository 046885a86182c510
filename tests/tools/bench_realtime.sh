#!/bin/sh
# spindle-bench --realtime: a run whose group threads take SCHED_FIFO
# delivers everything (where the policy is refused, the run fails naming
# it); a priority outside 1..99 is refused before anything starts.
set -eu
bench=$1
field() {
    echo "$1" | sed -n "s/.*\"$2\":\([0-9.e+]*\).*/\1/p"
}
if out=$("$bench" --local 2 --senders one --messages 300 --rate 3000 --realtime 1 2>&1); then
    line=$(echo "$out" | tail -n 1)
    if [ "$(field "$line" messages_delivered_total)" != 600 ]; then
        echo "FAIL: realtime run: messages_delivered_total '$(field "$line" messages_delivered_total)', not 600" >&2
        exit 1
    fi
else
    case $out in
    *"--realtime 1: cannot take SCHED_FIFO"*) echo "no right to SCHED_FIFO here: the refusal is named" ;;
    *) echo "FAIL: --realtime 1 run failed: $out" >&2; exit 1 ;;
    esac
fi
for priority in 0 100; do
    if out=$("$bench" --local 2 --messages 10 --realtime $priority 2>&1); then
        echo "FAIL: --realtime $priority accepted" >&2
        exit 1
    fi
    case $out in
    *"--realtime '$priority'"*) ;;
    *) echo "FAIL: --realtime $priority refused without naming the flag: $out" >&2; exit 1 ;;
    esac
done
echo "ok: spindle-bench --realtime runs, or fails naming the policy; bad priorities refused"
