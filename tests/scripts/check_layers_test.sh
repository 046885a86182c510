#!/bin/sh
# scripts/check-layers.sh passes on the tree, and fails, naming the file and
# the circle, on a copy of the tree given an upward include, a circle and a
# backend reaching into another's folder.
set -eu
checker=$1
tree=$2
out=$(sh "$checker" "$tree")
echo "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$tree/src" "$work/src"
echo '#include "view/view.h"' >>"$work/src/sst/sst.h"
echo '#include "transport/shm/shm_impl.h"' >>"$work/src/transport/fabric/fabric_attr.c"
if sh "$checker" "$work" >"$work/log" 2>&1; then
    echo "FAIL: an upward include and a circle passed the check" >&2
    exit 1
fi
cat "$work/log"
grep -q 'src/sst/sst.h includes "view/view.h": sst may not use view' "$work/log"
grep -q 'sst/sst.h -> view/view.h -> smc/smc.h -> sst/sst.h' "$work/log"
grep -q 'src/transport/fabric/fabric_attr.c includes "transport/shm/shm_impl.h": only the shm backend may' "$work/log"
echo "ok: the checker names the upward include, the circle and the reach into a backend"
