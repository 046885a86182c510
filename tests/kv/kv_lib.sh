# Shell functions of the spindle-kv test scripts (sourced; they use the
# caller's $python, $parent and fail()).

# Prints "RESP CONTROL": two bases of eight consecutive free loopback
# ports, below 32768, where Linux's ephemeral ports start (an outgoing
# connection of another test could take one between the check and the use).
kv_free_ports() {
    "$python" - <<'PY'
import random, socket
def free(base):
    for p in range(base, base + 8):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            return False
        finally:
            s.close()
    return True
for _ in range(200):
    base = random.randrange(20000, 25992, 8)
    if free(base) and free(base + 6000):
        print(base, base + 6000)
        break
PY
}

# Waits (polling, up to 60 s) until every given port answers PONG; fails
# when the service ($parent) exits first.
# Its variables are local: a caller's $n or $p stays as it was.
wait_serving() {
    local p tries
    for p in "$@"; do
        tries=0
        until [ "$(redis-cli -p "$p" PING 2>/dev/null)" = "PONG" ]; do
            tries=$((tries + 1))
            [ "$tries" -lt 600 ] || fail "replica on port $p never served"
            kill -0 "$parent" 2>/dev/null || fail "spindle-kv exited before serving"
            sleep 0.1
        done
    done
}
