#!/bin/sh
# spindle-bench --app-cpus: each member's application thread is pinned to
# its CPU of the list; a run so pinned delivers everything, a CPU the
# process may not use fails the run naming it, and a malformed list is
# refused before anything starts.
set -eu
bench=$1
field() {
    echo "$1" | sed -n "s/.*\"$2\":\([0-9.e+]*\).*/\1/p"
}
cpu=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
line=$("$bench" --local 2 --senders one --messages 300 --rate 3000 --app-cpus "$cpu,$cpu" | tail -n 1)
if [ "$(field "$line" messages_delivered_total)" != 600 ]; then
    echo "FAIL: pinned run: messages_delivered_total '$(field "$line" messages_delivered_total)', not 600" >&2
    exit 1
fi
if out=$("$bench" --local 2 --senders one --messages 10 --app-cpus 1023 2>&1); then
    echo "FAIL: --app-cpus 1023 (no such CPU) ran: $out" >&2
    exit 1
fi
case $out in
*"cannot pin to CPU 1023"*) ;;
*) echo "FAIL: --app-cpus 1023 failed without naming the CPU: $out" >&2; exit 1 ;;
esac
if out=$("$bench" --local 2 --messages 10 --app-cpus 0,,1 2>&1); then
    echo "FAIL: --app-cpus 0,,1 accepted" >&2
    exit 1
fi
case $out in
*"--app-cpus '0,,1'"*) ;;
*) echo "FAIL: --app-cpus 0,,1 refused without naming the flag: $out" >&2; exit 1 ;;
esac
echo "ok: spindle-bench --app-cpus pins, or fails naming the CPU or the list"
