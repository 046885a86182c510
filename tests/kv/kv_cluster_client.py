"""redis-py's RedisCluster, unchanged, against a sharded spindle-kv service:
it learns the shards from CLUSTER SLOTS and the keys of each command from
COMMAND, then sends every key to its shard.

Usage: kv_cluster_client.py PORT   (any replica)
Exits non-zero, saying what differed, when a check fails."""
import sys

from redis.cluster import RedisCluster, key_slot


def check(what, got, want):
    if got != want:
        sys.exit("kv_cluster_client: %s: got %r, want %r" % (what, got, want))


def main():
    cluster = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]), socket_timeout=30)
    for i in range(40):
        check("set rc%d" % i, cluster.set("rc%d" % i, i), True)
    check("get back", [cluster.get("rc%d" % i) for i in range(40)],
          [str(i).encode() for i in range(40)])
    check("incr", cluster.incr("rc-counter"), 1)
    check("keyslot", cluster.execute_command("CLUSTER KEYSLOT", "rc7"), key_slot(b"rc7"))
    print("kv_cluster_client: 40 keys written and read through RedisCluster")


main()
