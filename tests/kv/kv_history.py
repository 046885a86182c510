"""Records a concurrent history of reads, writes, INCRs and CASes from many
clients against spindle-kv, while replica 2 of `--local 3` is killed with
SIGKILL and a new replica joins, then checks it with kv_linearizability.py.
With --shards, the service is two shards of three replicas (--local 6
--replicas 3), the keys are shard 1's, replica 5 is killed, and the joiner
of shard 1 is admitted by member 0 (of shard 0), so it takes shard 1's
state from a replica of shard 1 (docs/KV.md "Joining a shard").

Every client is a thread with its own connections (a small RESP client:
what is timed is one request and its reply). It sends each operation to a
replica picked at random among those serving, so a write acknowledged by
one replica is read through another. A request whose connection breaks or
times out after it was sent is recorded with an unknown outcome; one that
could not be sent (connection refused) is not recorded.

Usage: kv_history.py SPINDLE_KV [options]
  --ops N           operations before the kill, and again after the join
  --clients N       concurrent clients (default 12)
  --keys N          keys (default 6)
  --shards          two shards; the history is shard 1's (see above)
  --stale-reads     run the service with --stale-reads and no failover, in
                    batches of N operations (at most 20), until the checker
                    finds a violation; fail if none is found
  --log-dir         logged replicas (every replica and the joiner with a log
                    directory): a write is answered once on every disk
  --history FILE    also write the history as JSON
Exits 0 when the history is linearizable (with --stale-reads: when it is
not), 1 saying what was wrong otherwise (also when no ports are free)."""
import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kv_linearizability as lin  # noqa: E402
import test_ports  # noqa: E402 - tests/test_ports.py

REPLY_TIMEOUT = 60.0  # longer than a view change on a loaded machine
STALE_BATCHES = 20


def fail(message):
    sys.exit("kv_history: FAIL: %s" % message)


def free_ports(count):
    """count consecutive loopback ports P.. and count more at P+count,
    reserved for this process (tests/test_ports.py)."""
    base = test_ports.port_block(2 * count)
    return base, base + count


class Broken(Exception):
    """The request may or may not have been applied."""


class Refused(Exception):
    """The request was not sent."""


class Conn:
    def __init__(self, port):
        self.port, self.sock, self.buf = port, None, b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock, self.buf = None, b""

    def call(self, *args):
        if self.sock is None:
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except OSError as e:
                raise Refused(str(e))
            self.sock.settimeout(REPLY_TIMEOUT)
        req = b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in (str(x).encode() for x in args))
        try:
            self.sock.sendall(req)
            return self._reply()
        except (OSError, Broken) as e:
            self.close()
            raise Broken(str(e))

    def _line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise Broken("connection closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b":":
            return int(rest)
        if kind == b"-":
            raise Broken("error reply: %s" % rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                data = self.sock.recv(65536)
                if not data:
                    raise Broken("connection closed")
                self.buf += data
            value, self.buf = self.buf[:n], self.buf[n + 2:]
            return int(value)
        raise Broken("unexpected reply %r" % line)


class Recorder:
    def __init__(self, ports, keys, prefix="lin"):
        self.ports = list(ports)
        self.keys = ["%s:%d" % (prefix, i) for i in range(keys)]
        self.lock = threading.Lock()
        self.history = []
        self.per_port = {}
        self.done = 0
        self.stop = threading.Event()
        self.errors = []
        self.error_replies = []

    def add_port(self, port):
        with self.lock:
            self.ports.append(port)

    def remove_port(self, port):
        with self.lock:
            self.ports.remove(port)

    def served_by(self, port):
        with self.lock:
            return self.per_port.get(port, 0)

    def client(self, process):
        rng = random.Random(process)
        conns = {}
        seq = 0
        last_read = {}
        while not self.stop.is_set():
            with self.lock:
                port = rng.choice(self.ports)
            conn = conns.setdefault(port, Conn(port))
            key = rng.choice(self.keys)
            roll = rng.random()
            seq += 1
            unique = process * 10_000_000 + seq
            if roll < 0.45:
                kind, arg, cmd = lin.READ, None, ("GET", key)
            elif roll < 0.7:
                kind, arg, cmd = lin.WRITE, unique, ("SET", key, unique)
            elif roll < 0.85:
                kind, arg, cmd = lin.INCR, None, ("INCR", key)
            else:
                expected = last_read.get(key, 0)
                kind, arg, cmd = lin.CAS, (expected, unique), ("CAS", key, expected, unique)
            invoke = time.monotonic_ns()
            try:
                result = conn.call(*cmd)
                complete = time.monotonic_ns()
            except Refused:
                continue
            except Broken as e:
                result, complete = None, None
                if str(e).startswith("error reply"):
                    with self.lock:
                        self.error_replies.append(str(e))
            if kind == lin.READ and complete is not None and result is not None:
                last_read[key] = result
            if kind == lin.WRITE and complete is not None and result != "OK":
                self.errors.append("SET replied %r" % result)
            with self.lock:
                self.history.append(lin.Op(process, key, kind, arg, result, invoke, complete))
                if complete is not None:
                    self.done += 1
                    self.per_port[port] = self.per_port.get(port, 0) + 1
        for c in conns.values():
            c.close()

    def start(self, clients, batch):
        """Starts clients; process ids are unique across batches."""
        self.stop.clear()
        self.threads = [threading.Thread(target=self.client, args=(batch * clients + i + 1,))
                        for i in range(clients)]
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()

    def completed(self):
        with self.lock:
            return self.done


def wait_for(what, condition, seconds, service):
    """Polls condition until the deadline; fails if the service exited."""
    deadline = time.monotonic() + seconds
    while not condition():
        if service.poll() is not None:
            fail("spindle-kv exited (status %s) while waiting for %s" % (service.returncode, what))
        if time.monotonic() > deadline:
            fail("timed out after %d s waiting for %s" % (seconds, what))
        time.sleep(0.05)


def serving(port):
    try:
        c = Conn(port)
        ok = c.call("PING") == "PONG"
        c.close()
        return ok
    except (Refused, Broken):
        return False


def loaded(port):
    """The replica serves and holds its shard's state (INFO: loading:0)."""
    try:
        return "loading:0" in replication_info(port, b"INFO")
    except OSError:
        return False


def replication_info(port, command=b"INFO replication"):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(command + b"\r\n")
        data = b""
        while True:
            data += s.recv(65536)
            if b"\r\n" in data:
                n = int(data.split(b"\r\n", 1)[0][1:])
                if len(data.split(b"\r\n", 1)[1]) >= n:
                    return data.split(b"\r\n", 1)[1][:n].decode()
    finally:
        s.close()


def main():
    work = tempfile.mkdtemp(prefix="spindle-kv-lin-")
    try:
        return record_and_check(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def record_and_check(work):
    ap = argparse.ArgumentParser()
    ap.add_argument("kv")
    ap.add_argument("--ops", type=int, default=1500)
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--keys", type=int, default=6)
    ap.add_argument("--stale-reads", action="store_true")
    ap.add_argument("--shards", action="store_true")
    ap.add_argument("--log-dir", action="store_true",
                    help="logged replicas (a write is answered once on every replica's disk)")
    ap.add_argument("--history")
    a = ap.parse_args()

    port, control = free_ports(8)
    log = open(os.path.join(work, "log"), "w")
    cmd = [a.kv, "--local", "6" if a.shards else "3", "--port", str(port), "--control-port",
           str(control), "--pid-dir", work, "--failure-timeout-ms", "10000"]
    if a.shards:
        cmd += ["--replicas", "3"]
    if a.stale_reads:
        cmd.append("--stale-reads")
    if a.log_dir:
        cmd += ["--log-dir", os.path.join(work, "logs")]
    service = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    joiner = None
    # Shard 1 is replicas 3-5; "{foo}" puts every key in slot 12182, of shard 1.
    first = port + 3 if a.shards else port
    ports = [first, first + 1, first + 2]
    try:
        for p in range(port, ports[-1] + 1):
            wait_for("port %d to serve" % p, lambda p=p: serving(p), 60, service)
        rec = Recorder(ports, a.keys, "{foo}lin" if a.shards else "lin")
        if a.stale_reads:
            # Whether a stale read is caught in a batch depends on timing:
            # batches go on, each adding to one history (every operation
            # of a batch has completed before it is checked), until the
            # checker finds a violation or STALE_BATCHES were run.
            for batch in range(STALE_BATCHES):
                rec.start(a.clients, batch)
                wait_for("%d operations" % a.ops, lambda: rec.completed() >= (batch + 1) * a.ops,
                         300, service)
                rec.finish()
                if lin.check_history(rec.history):
                    break
        else:
            rec.start(a.clients, 0)
            wait_for("%d operations" % a.ops, lambda: rec.completed() >= a.ops, 300, service)
            # The last replica of the shard dies in the middle of the workload ...
            victim = 5 if a.shards else 2
            with open(os.path.join(work, "replica-%d.pid" % victim)) as f:
                os.kill(int(f.read()), signal.SIGKILL)
            rec.remove_port(port + victim)
            wait_for("the survivors to report the lost replica",
                     lambda: "state=degraded" in replication_info(first), 120, service)
            # ... and a new one joins while it goes on, through member 0.
            joined = port + 6 if a.shards else port + 5
            join = [a.kv, "--join", "127.0.0.1:%d" % control, "--listen",
                    "127.0.0.1:%d" % (control + joined - port), "--port", str(joined)]
            if a.shards:
                join += ["--shards", "2", "--shard", "1"]
            if a.log_dir:
                join += ["--log-dir", os.path.join(work, "joiner-log")]
            joiner = subprocess.Popen(join, stdout=log, stderr=subprocess.STDOUT)
            wait_for("the joiner to serve with its shard's state", lambda: loaded(joined), 120,
                     joiner)
            if a.shards:
                log.flush()
                with open(os.path.join(work, "log")) as f:
                    if "took shard 1's state" not in f.read():
                        fail("the joiner of shard 1 did not take the state from its shard")
            rec.add_port(joined)
            before = rec.completed()
            wait_for("%d more operations, some at the joiner" % a.ops,
                     lambda: rec.completed() >= before + a.ops and rec.served_by(joined) >= 20,
                     300, service)
            rec.finish()
        if rec.errors:
            fail("; ".join(rec.errors[:5]))
    finally:
        if joiner is not None:
            joiner.terminate()
            if joiner.wait() != 0:
                fail("the joiner exited with status %d" % joiner.returncode)
        service.terminate()
        if service.wait() != 0:
            log.close()
            with open(os.path.join(work, "log")) as f:
                sys.stderr.write(f.read()[-4000:])
            fail("spindle-kv exited with status %d (its log above)" % service.returncode)
        log.close()

    ops = rec.history
    unknown = sum(1 for o in ops if o.complete is None)
    if a.history:
        lin.dump(ops, a.history)
    started = time.monotonic()
    verdicts = lin.check_history(ops)
    seconds = time.monotonic() - started
    undecided = [v for v in verdicts if v.undecided]
    summary = ("%d operations (%d with unknown outcome, %d of them error replies%s) by %d "
               "clients on %d keys, checked in %.1f s" % (
                   len(ops), unknown, len(rec.error_replies),
                   ": " + rec.error_replies[0] if rec.error_replies else "", a.clients, a.keys,
                   seconds))
    if undecided:
        lin.report(undecided)
        fail("the checker could not decide: " + summary)
    if a.stale_reads:
        if not verdicts:
            fail("no violation found with --stale-reads: " + summary)
        lin.report(verdicts[:1])
        print("kv_history: --stale-reads: violations on %d of %d keys found in %s" % (
            len(verdicts), a.keys, summary))
    else:
        if verdicts:
            lin.report(verdicts)
            fail("not linearizable: " + summary)
        print("kv_history: linearizable across a SIGKILL and a join%s: %s" % (
            " with every replica logged" if a.log_dir else "", summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
