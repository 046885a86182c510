#!/bin/sh
# spindle-info -e lists every variable of the table (read from its source,
# src/config/config_env.c, not from the tool) and shows the value of the
# ones set in its environment, also for "<N>" rows; -k lists every key of
# every section; bad options exit 2.
# Usage: info.sh SPINDLE_INFO SOURCE_ROOT
set -eu
info=$1
root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

names=$(sed -n 's/^[[:space:]]*{"\([A-Z0-9_<>]*\)",.*/\1/p' "$root/src/config/config_env.c")
count=$(echo "$names" | wc -l)
[ "$count" -gt 30 ] || fail "only $count rows parsed from config_env.c"

env -u SPINDLE_BASE_PORT SPINDLE_HOSTFILE=/srv/hosts SPINDLE_SUBGROUP_2_MODE=unordered \
    SPINDLE_LOG_LEVEL=debug "$info" -e >"$work/env"
grep -q "^# Environment variables ($count)\$" "$work/env" || fail "-e does not count $count variables"
for name in $names; do
    grep -qx "$name" "$work/env" || fail "-e does not list $name"
done
listed=$(grep -c '^[A-Z]' "$work/env")
[ "$listed" -eq "$count" ] || fail "-e lists $listed variables, the table has $count"

# The lines of one variable's entry, up to the next name.
entry() { awk -v n="$1" '$0 == n { on = 1; next } /^[A-Z#]/ { on = 0 } on' "$work/env"; }
entry SPINDLE_HOSTFILE | grep -qx '    current:   SPINDLE_HOSTFILE=/srv/hosts' ||
    fail "SPINDLE_HOSTFILE is set but not shown"
entry 'SPINDLE_SUBGROUP_<N>_MODE' | grep -qx '    current:   SPINDLE_SUBGROUP_2_MODE=unordered' ||
    fail "SPINDLE_SUBGROUP_2_MODE is set but not shown under SPINDLE_SUBGROUP_<N>_MODE"
entry SPINDLE_LOG_LEVEL | grep -qx '    overrides: \[group\] log_level' ||
    fail "SPINDLE_LOG_LEVEL does not name the key it overrides"
if entry SPINDLE_BASE_PORT | grep -q current; then fail "unset SPINDLE_BASE_PORT shown as set"; fi
[ "$(grep -c 'current:' "$work/env")" -eq 3 ] || fail "more variables shown as set than were set"

"$info" -k >"$work/keys"
for section in group member.N subgroup.N bench; do
    grep -qx "\[$section\]" "$work/keys" || fail "-k does not list [$section]"
done
# Every key an override row names is listed in its section.
grep '    overrides: \[' "$work/env" | sed 's/.*overrides: \[\([^]]*\)\] \(.*\)/\1 \2/' |
    while read -r section key; do
        awk -v s="[$section]" -v k="$key" '
            $0 == s { on = 1; next } /^\[/ { on = 0 } on && $1 == k { found = 1 }
            END { exit !found }' "$work/keys" || fail "-k does not list $key in [$section]"
    done
grep -q '^  window_size  *values: 1 .. 100000; default: 100$' "$work/keys" ||
    fail "-k does not give window_size's default"

"$info" --help | grep -q '^usage: spindle-info' || fail "--help prints no usage"
"$info" --version | grep -q '^spindle-info [0-9]' || fail "--version prints no version"
if "$info" --bogus >/dev/null 2>"$work/err"; then fail "--bogus accepted"; fi
"$info" --bogus >/dev/null 2>&1 || [ $? -eq 2 ] || fail "--bogus does not exit 2"
grep -q "unknown option '--bogus'" "$work/err" || fail "--bogus is not named"
echo "ok: spindle-info lists all $count variables, marks the set ones, and every key"
