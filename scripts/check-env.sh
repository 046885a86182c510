#!/bin/sh
# Fails when the library reads an environment variable that the table of
# src/config/config_env.c does not declare (docs/CONFIG.md "Environment
# variables", spindle-info -e):
#   1. getenv("NAME") anywhere under src/: NAME must be declared;
#   2. getenv of a computed name: only in src/config/config_env.c, the
#      accessor (cfg_env_get) that refuses undeclared names at run time;
#   3. every literal that is a whole variable name in src/config (names
#      passed to cfg_env_get directly or through a variable) must be
#      declared.
# A row "SPINDLE_MEMBER_<N>_PORT" declares SPINDLE_MEMBER_0_PORT, ...
# Usage: sh scripts/check-env.sh [source-root]   (default: the repository)
set -eu
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
table=src/config/config_env.c

# The table's rows begin with {"NAME", (clang-format keeps them so).
declared=$(sed -n 's/^[[:space:]]*{"\([A-Z0-9_<>]*\)",.*/\1/p' "$table")
if [ -z "$declared" ]; then
    echo "check-env: no rows found in $table" >&2
    exit 1
fi
patterns=$(echo "$declared" | sed 's/<N>/[0-9][0-9]*/g; s/^/^/; s/$/$/')

is_declared() {
    for pattern in $patterns; do
        echo "$1" | grep -q "$pattern" && return 0
    done
    return 1
}

status=0
# 1 and 2: every getenv( call, comments included (a commented-out read is
# cheap to declare or to delete).
calls=$(grep -rn --include='*.c' --include='*.h' 'getenv[[:space:]]*(' src || true)
echo "$calls" | while IFS= read -r line; do
    [ -n "$line" ] || continue
    where=$(echo "$line" | cut -d: -f1-2)
    file=$(echo "$line" | cut -d: -f1)
    args=$(echo "$line" | cut -d: -f3- | grep -o 'getenv[[:space:]]*([^)]*)' || true)
    echo "$args" | while IFS= read -r call; do
        [ -n "$call" ] || continue
        arg=$(echo "$call" | sed 's/^getenv[[:space:]]*([[:space:]]*//; s/[[:space:]]*)$//')
        case $arg in
        \"*\")
            name=$(echo "$arg" | tr -d '"')
            if ! is_declared "$name"; then
                echo "check-env: $where: getenv(\"$name\"): $name is not declared in $table" >&2
                echo fail
            fi
            ;;
        *)
            if [ "$file" != "$table" ]; then
                echo "check-env: $where: getenv($arg): a computed name; read it through" \
                    "cfg_env_get (src/config/config_env.h) or name it literally" >&2
                echo fail
            fi
            ;;
        esac
    done
done >"${TMPDIR:-/tmp}/check-env.$$"
grep -q fail "${TMPDIR:-/tmp}/check-env.$$" && status=1
rm -f "${TMPDIR:-/tmp}/check-env.$$"

# 3: the names src/config passes around.
for name in $(grep -ohE '"(SPINDLE|SLURM|PMIX|OMPI)_[A-Z0-9][A-Z0-9_]*"' src/config/*.c | tr -d '"' |
    sort -u); do
    if ! is_declared "$name"; then
        where=$(grep -n "\"$name\"" src/config/*.c | head -n 1 | cut -d: -f1-2)
        echo "check-env: $where: \"$name\" is not declared in $table" >&2
        status=1
    fi
done

[ "$status" -eq 0 ] &&
    echo "check-env: $(echo "$declared" | wc -l) variables declared, every one read in src/ among them"
exit "$status"
