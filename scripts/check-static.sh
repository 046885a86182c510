#!/bin/sh
# Static checks of the project's own code, as CI runs them:
#   1. formatting      clang-format --dry-run -Werror (root .clang-format)
#   2. layering        scripts/check-layers.sh (no upward include, no circle)
#   3. clang-tidy      root .clang-tidy, over src/, tools/ and examples/
#   4. cppcheck        warnings, portability, performance, and functions
#                      that nothing in src/, tools/ or examples/ calls (code
#                      reachable only from tests); the public API (spindle_*)
#                      is for applications and is not counted
# Usage: sh scripts/check-static.sh BUILD_DIR
# BUILD_DIR is a configured build (its compile_commands.json is written by
# CMake). Exits non-zero when any check finds something; prints all of them.
set -u
build=${1:?usage: check-static.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
cd "$root"
status=0
jobs=$(nproc 2>/dev/null || echo 2)

files=$(git ls-files '*.c' '*.h' 2>/dev/null || find src include tests tools examples -name '*.[ch]')
echo "== clang-format"
# shellcheck disable=SC2086
clang-format --dry-run -Werror $files || status=1

echo "== layering"
sh scripts/check-layers.sh || status=1

echo "== clang-tidy"
if [ ! -f "$build/compile_commands.json" ]; then
    echo "check-static: $build/compile_commands.json is missing (configure with CMake first)" >&2
    exit 2
fi
run-clang-tidy -quiet -p "$build" -j "$jobs" "$root/(src|tools|examples)/" >"$build/clang-tidy.log" 2>&1
grep -E "(warning|error):" "$build/clang-tidy.log" | sort -u >"$build/clang-tidy.findings" || true
if [ -s "$build/clang-tidy.findings" ]; then
    cat "$build/clang-tidy.findings"
    status=1
fi

echo "== cppcheck"
cppcheck --project="$build/compile_commands.json" --quiet --inline-suppr \
    --enable=warning,performance,portability,unusedFunction -j 1 \
    --file-filter="$root/src/*" --file-filter="$root/tools/*" --file-filter="$root/examples/*" \
    --template='{file}:{line}: {severity}: {message} [{id}]' 2>"$build/cppcheck.log" >/dev/null
grep -v "The function 'spindle_[a-z_]*' is never used" "$build/cppcheck.log" |
    grep -E '^/.*: [a-z]+: ' >"$build/cppcheck.findings" || true
if [ -s "$build/cppcheck.findings" ]; then
    cat "$build/cppcheck.findings"
    status=1
fi

[ "$status" -eq 0 ] && echo "check-static: formatting, layering, clang-tidy and cppcheck are clean"
exit "$status"
