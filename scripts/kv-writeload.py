"""A write load generator for docs/KV.md's etcd comparison: the same
workload, random keys of 100,000 with 16-byte values, one request
outstanding per connection, sent either to etcd's v3 HTTP/JSON gateway
(POST /v3/kv/put over keep-alive connections) or as RESP SETs. Connections
are spread over the given servers and over PROCS processes, each an event
loop over its connections, so the generator is not one Python thread.

Usage: kv-writeload.py etcd|resp REQUESTS CONNECTIONS PROCS HOST:PORT...
Prints "writes/s N" (completed writes over the wall time of the run); exits
1 naming the server and the reply when a write is refused."""
import base64
import json
import multiprocessing
import random
import selectors
import socket
import sys
import time

VALUE = b"v" * 16


def etcd_request(host, key):
    body = json.dumps({"key": base64.b64encode(key).decode(),
                       "value": base64.b64encode(VALUE).decode()}).encode()
    return (b"POST /v3/kv/put HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(body), body))


def resp_request(_host, key):
    return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(VALUE), VALUE)


def etcd_complete(buf):
    """Length of one complete HTTP response at the start of buf, or 0."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return 0
    head = buf[:end].lower()
    if not head.startswith(b"http/1.1 200"):
        raise RuntimeError("etcd replied %r" % buf[:200])
    for line in head.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            total = end + 4 + int(line.split(b":")[1])
            return total if len(buf) >= total else 0
    if b"transfer-encoding: chunked" in head:
        term = buf.find(b"\r\n0\r\n\r\n", end)
        return term + 7 if term >= 0 else 0
    raise RuntimeError("etcd reply without a length: %r" % buf[:200])


def resp_complete(buf):
    end = buf.find(b"\r\n")
    if end < 0:
        return 0
    if buf[:1] != b"+":
        raise RuntimeError("spindle-kv replied %r" % buf[:200])
    return end + 2


def worker(kind, requests, connections, servers, seed, out):
    try:
        out.put(run(kind, requests, connections, servers, seed))
    except (OSError, RuntimeError) as e:
        print("kv-writeload: %s" % e, file=sys.stderr)
        out.put(-1)


def run(kind, requests, connections, servers, seed):
    make = etcd_request if kind == "etcd" else resp_request
    complete = etcd_complete if kind == "etcd" else resp_complete
    rng = random.Random(seed)
    sel = selectors.DefaultSelector()
    conns = []
    for i in range(connections):
        host, port = servers[i % len(servers)]
        s = socket.create_connection((host, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        conns.append({"sock": s, "host": "%s:%d" % (host, port), "buf": b""})
    sent = done = 0

    def send(c):
        nonlocal sent
        key = b"key:%012d" % rng.randrange(100000)
        c["sock"].sendall(make(c["host"], key))
        sent += 1

    for c in conns:
        if sent < requests:
            send(c)
            sel.register(c["sock"], selectors.EVENT_READ, c)
    while done < requests:
        for event, _ in sel.select(timeout=60):
            c = event.data
            data = c["sock"].recv(65536)
            if not data:
                raise RuntimeError("%s closed the connection" % c["host"])
            c["buf"] += data
            while True:
                n = complete(c["buf"])
                if n == 0:
                    break
                c["buf"] = c["buf"][n:]
                done += 1
                if sent < requests:
                    send(c)
    return done


def main(argv):
    if len(argv) < 6 or argv[1] not in ("etcd", "resp"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, requests, connections, procs = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    servers = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in argv[5:]]
    out = multiprocessing.Queue()
    workers = [multiprocessing.Process(
        target=worker, args=(kind, requests // procs, connections // procs,
                             servers[i % len(servers):] + servers[:i % len(servers)], i, out))
        for i in range(procs)]
    started = time.monotonic()
    for w in workers:
        w.start()
    counts = [out.get() for _ in workers]
    seconds = time.monotonic() - started
    for w in workers:
        w.join()
    if min(counts) < 0:
        return 1
    total = sum(counts)
    print("writes/s %.0f (%d writes in %.2f s)" % (total / seconds, total, seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
