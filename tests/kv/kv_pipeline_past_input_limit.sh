#!/bin/sh
# A client that pipelines more than a connection's input limit (16 MiB,
# KV_MAX_INPUT) before it reads a reply. Client sockets are edge-triggered
# (kv_client.c): the replica must read each one until it is drained, and
# re-arm it whenever it stopped reading with bytes left (its pipeline of
# replies full, its input at the limit), or the rest of the input is never
# read and the client waits forever. Three logged replicas; every SET is
# answered, in order, and applied at another replica.
# Usage: kv_pipeline_past_input_limit.sh SPINDLE_KV
set -u
kv=${1:?usage: kv_pipeline_past_input_limit.sh SPINDLE_KV}
python=/usr/bin/python3
. "$(dirname "$0")/kv_lib.sh"
command -v redis-cli >/dev/null 2>&1 || {
    echo "kv_pipeline_past_input_limit: redis-cli missing (sh scripts/install-deps.sh)" >&2
    exit 1
}
dir=$(mktemp -d /tmp/spindle-kv-test-XXXXXX)
parent=""
cleanup() {
    if [ -n "$parent" ]; then
        kill -TERM "$parent" 2>/dev/null
        wait "$parent" 2>/dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "kv_pipeline_past_input_limit: FAIL: $*" >&2
    tail -n 20 "$dir/log" >&2 2>/dev/null
    exit 1
}
kv_ports || fail "no free ports"
"$kv" --local 3 --port "$port" --control-port "$control" --log-dir "$dir/logs" \
    >"$dir/log" 2>&1 &
parent=$!
wait_serving "$port" "$((port + 1))" "$((port + 2))"

# 2,400 SETs of 8 KiB values, about 19 MiB, written whole before any
# reply is read (a second thread reads them, with a deadline).
"$python" - "$port" <<'PY' || fail "the pipelined SETs were not all answered"
import socket, sys, threading
port = int(sys.argv[1])
count, size = 2400, 8192
value = b"v" * size
request = b"".join(
    b"*3\r\n$3\r\nSET\r\n$%d\r\npipe:%05d\r\n$%d\r\n%s\r\n" % (len(b"pipe:%05d" % i), i, size, value)
    for i in range(count))
assert len(request) > (16 << 20)
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(60)
sent = threading.Thread(target=s.sendall, args=(request,))
sent.start()
want = b"+OK\r\n" * count
got = b""
while len(got) < len(want):
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("connection closed after %d of %d reply bytes" % (len(got), len(want)))
    got += chunk
sent.join()
if got != want:
    sys.exit("replies differ from %d +OK" % count)
PY
last=$(redis-cli -p "$((port + 2))" STRLEN pipe:02399)
[ "$last" = "8192" ] || fail "the last SET is not applied at another replica (STRLEN $last)"
kill -TERM "$parent"
wait "$parent" || fail "a replica did not exit cleanly"
parent=""
echo "kv_pipeline_past_input_limit: ok"
