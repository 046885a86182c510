"""A python3-redis program against a running spindle-kv service, unchanged
from what it would run against redis-server: commands, pipelines, errors,
expiry, and equal digests on every replica afterwards.

Usage: kv_redis_client.py PORT [PORT...]   (one port per replica)
Exits non-zero, saying what differed, when a check fails."""
import socket
import sys
import time

import redis


def check(what, got, want):
    if got != want:
        sys.exit("kv_redis_client: %s: got %r, want %r" % (what, got, want))


def wait_until(what, condition, seconds=30.0):
    """Polls condition (no fixed sleep stands in for it) until the deadline."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            sys.exit("kv_redis_client: timed out waiting for %s" % what)
        time.sleep(0.05)


def transactions(clients):
    """MULTI/EXEC through redis-py's pipeline (transaction=True), WATCH
    aborting when another client changed the key, and EXEC under SESSION
    applied once."""
    first, last = clients[0], clients[-1]
    pipe = first.pipeline()
    pipe.set("tx:a", "1")
    pipe.incr("tx:a")
    pipe.get("tx:a")
    pipe.incrby("tx:n", 5)
    check("transaction replies", pipe.execute(), [True, 2, b"2", 5])
    for i, c in enumerate(clients):
        check("transaction applied at replica %d" % i, c.mget("tx:a", "tx:n"), [b"2", b"5"])
    # An error when a command runs is its reply; the others still run.
    pipe = first.pipeline()
    pipe.set("tx:s", "x")
    pipe.incr("tx:s")
    pipe.set("tx:t", "y")
    replies = pipe.execute(raise_on_error=False)
    check("runtime error inside a transaction", isinstance(replies[1], redis.ResponseError), True)
    check("others of the transaction ran", [replies[0], replies[2]], [True, True])
    # An error when queued (wrong arity): EXECABORT, nothing applied.
    pipe = first.pipeline()
    pipe.set("tx:u", "1")
    pipe.execute_command("GET")
    try:
        pipe.execute()
        sys.exit("kv_redis_client: a transaction with a queueing error ran")
    except redis.ResponseError as error:
        check("queueing error raised", "wrong number of arguments" in str(error), True)
    check("aborted transaction applied nothing", last.exists("tx:u"), 0)
    # WATCH: another client's write (at another replica) between WATCH and
    # EXEC aborts the transaction.
    first.set("tx:w", "0")
    with first.pipeline() as pipe:
        pipe.watch("tx:w")
        seen = int(pipe.get("tx:w"))
        check("other client's write", last.set("tx:w", "changed"), True)
        pipe.multi()
        pipe.set("tx:w", seen + 1)
        try:
            pipe.execute()
            sys.exit("kv_redis_client: EXEC ran although a watched key changed")
        except redis.WatchError:
            pass
    for i, c in enumerate(clients):
        check("aborted EXEC wrote nothing at replica %d" % i, c.get("tx:w"), b"changed")
    # Untouched: EXEC runs. The ordered GET first brings this replica's
    # copy up to the other client's write, so WATCH sees its version.
    check("read before watching", first.get("tx:w"), b"changed")
    with first.pipeline() as pipe:
        pipe.watch("tx:w", "tx:absent")
        pipe.multi()
        pipe.set("tx:w", "mine")
        pipe.get("tx:absent")
        check("EXEC of untouched watched keys", pipe.execute(), [True, None])
    # A watched absent key that another client creates aborts too.
    with first.pipeline() as pipe:
        pipe.watch("tx:new")
        check("create the watched key elsewhere", last.set("tx:new", "1"), True)
        pipe.multi()
        pipe.set("tx:new", "2")
        try:
            pipe.execute()
            sys.exit("kv_redis_client: EXEC ran although a watched absent key was created")
        except redis.WatchError:
            pass
    # redis-py's transaction() helper retries on WatchError until it runs.
    def add_one(pipe):
        value = int(pipe.get("tx:c") or 0)
        pipe.multi()
        pipe.set("tx:c", value + 1)
    for c in clients:
        c.transaction(add_one, "tx:c")
    check("transaction() helper increments", last.get("tx:c"), b"3")
    # EXEC under a session runs once, also when retried at another replica.
    for c in (first, last):
        pipe = c.pipeline(transaction=False)
        pipe.execute_command("MULTI")
        pipe.execute_command("INCR", "tx:once")
        pipe.execute_command("SESSION", 4242, 1, "EXEC")
        check("SESSION EXEC reply", pipe.execute(), [b"OK", b"QUEUED", [1]])
    check("SESSION EXEC applied once", first.get("tx:once"), b"1")


def main():
    ports = [int(p) for p in sys.argv[1:]]
    clients = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=30) for p in ports]
    first, last = clients[0], clients[-1]
    check("ping", first.ping(), True)
    check("set", first.set("py:k", "v1"), True)
    # Linearizable reads: a write acknowledged by one replica is seen by all.
    for i, c in enumerate(clients):
        check("get at replica %d" % i, c.get("py:k"), b"v1")
    check("set nx", last.set("py:k", "v2", nx=True), None)
    check("set xx", last.set("py:k", "v2", xx=True), True)
    check("incr", first.incr("py:n"), 1)
    check("incrby", last.incrby("py:n", 9), 10)
    check("decr", first.decr("py:n"), 9)
    check("mset", first.mset({"py:a": "1", "py:b": "2"}), True)
    check("mget", last.mget("py:a", "py:b", "py:none"), [b"1", b"2", None])
    check("append", first.append("py:a", "23"), 3)
    check("strlen", last.strlen("py:a"), 3)
    check("exists", first.exists("py:a", "py:b", "py:none"), 2)
    check("delete", last.delete("py:b"), 1)
    check("cas miss", first.execute_command("CAS", "py:k", "v1", "v3"), 0)
    check("cas hit", first.execute_command("CAS", "py:k", "v2", "v3"), 1)
    check("keys", sorted(last.keys("py:[ak]")), [b"py:a", b"py:k"])
    check("scan", sorted(first.scan_iter(match="py:*", count=3)),
          [b"py:a", b"py:k", b"py:n"])
    try:
        first.execute_command("NOSUCHCOMMAND", "x")
        sys.exit("kv_redis_client: an unknown command was not refused")
    except redis.ResponseError as error:
        check("unknown command error", str(error).startswith("unknown command 'NOSUCHCOMMAND'"),
              True)
    check("connection usable after an error", first.get("py:k"), b"v3")
    # Pipelining: 200 requests in one write, replies in order.
    pipe = first.pipeline(transaction=False)
    for i in range(100):
        pipe.incr("py:pipe")
        pipe.set("py:p%d" % i, i, ex=1000)
    replies = pipe.execute()
    check("pipelined incr replies", replies[0::2], list(range(1, 101)))
    check("pipelined set replies", all(replies[1::2]), True)
    # Expiry decided in the ordered stream: gone on every replica.
    for i in range(20):
        clients[i % len(clients)].set("py:short%d" % i, "x", px=200)
    for i, c in enumerate(clients):
        wait_until("short keys to expire at replica %d" % i,
                   lambda c=c: c.exists(*["py:short%d" % k for k in range(20)]) == 0)
    check("long-lived keys kept", last.exists(*["py:p%d" % i for i in range(100)]), 100)
    ttl = first.ttl("py:p0")
    check("ttl of a key with EX 1000 in range", 990 <= ttl <= 1000, True)
    # Pipelined local and ordered commands: replies in request order.
    pipe = last.pipeline(transaction=False)
    pipe.incr("py:order")
    pipe.ping()
    pipe.get("py:order")
    pipe.execute_command("ECHO", "e")
    pipe.incr("py:order")
    check("mixed pipeline", pipe.execute(), [1, True, b"1", b"e", 2])
    # Stale reads on a READONLY connection, counted in INFO.
    stale = redis.Redis(host="127.0.0.1", port=ports[-1], socket_timeout=30)
    served = int(stale.info("replication")["stale_reads_served"])
    check("readonly", stale.execute_command("READONLY"), True)
    check("stale read of an acknowledged write", stale.get("py:order"), b"2")
    check("stale reads counted",
          int(stale.info("replication")["stale_reads_served"]), served + 1)
    # A bulk length past the limit: a protocol error naming it, then close.
    raw = socket.create_connection(("127.0.0.1", ports[0]), timeout=30)
    raw.sendall(b"*1\r\n$99999999\r\n")
    answer = b""
    while True:
        chunk = raw.recv(4096)
        if not chunk:
            break
        answer += chunk
    raw.close()
    check("oversize bulk refused",
          answer.startswith(b"-ERR Protocol error: invalid bulk length '99999999'"), True)
    transactions(clients)
    digests = [c.execute_command("DEBUG", "DIGEST") for c in clients]
    check("digests of all replicas equal", len(set(digests)), 1)
    info = first.info("replication")
    check("info names the read mode", info.get("reads"), "linearizable")
    print("kv_redis_client: %d replicas agree, digest %s" % (len(clients), digests[0].decode()))


main()
