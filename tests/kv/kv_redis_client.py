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
    digests = [c.execute_command("DEBUG", "DIGEST") for c in clients]
    check("digests of all replicas equal", len(set(digests)), 1)
    info = first.info("replication")
    check("info names the read mode", info.get("reads"), "linearizable")
    print("kv_redis_client: %d replicas agree, digest %s" % (len(clients), digests[0].decode()))


main()
