#!/bin/sh
# scripts/check-env.sh passes on the tree, and fails, naming the file, the
# line and the variable, on a copy of the tree that reads an undeclared
# variable by a literal name, reads a computed name outside the accessor,
# and passes an undeclared name through src/config.
set -eu
checker=$1
tree=$2
sh "$checker" "$tree"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$tree/src" "$work/src"
echo 'const char *sp_undeclared(void) { return getenv("SPINDLE_NOT_DECLARED"); }' \
    >>"$work/src/util/log.c"
echo 'const char *tp_computed(const char *v) { return getenv(v); }' \
    >>"$work/src/transport/registry.c"
sed -i 's/env_number("SPINDLE_BASE_PORT"/env_number("SPINDLE_BASE_PORTS"/' \
    "$work/src/config/setup_env.c"
if sh "$checker" "$work" >"$work/log" 2>&1; then
    echo "FAIL: undeclared variables passed the check" >&2
    exit 1
fi
cat "$work/log"
grep -q 'src/util/log.c:[0-9]*: getenv("SPINDLE_NOT_DECLARED"): SPINDLE_NOT_DECLARED is not declared' "$work/log"
grep -q 'src/transport/registry.c:[0-9]*: getenv(v): a computed name' "$work/log"
grep -q 'src/config/setup_env.c:[0-9]*: "SPINDLE_BASE_PORTS" is not declared' "$work/log"
echo "ok: the checker names an undeclared literal, a computed name and an undeclared name in src/config"
