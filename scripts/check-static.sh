#!/bin/sh
# Static checks of the project's own code, as CI runs them:
#   1. formatting      clang-format --dry-run -Werror (root .clang-format)
#   2. layering        scripts/check-layers.sh (no upward include, no circle)
#      environment     scripts/check-env.sh (every variable src/ reads is
#                      declared in src/config/config_env.c)
#      manual pages    scripts/check-man.sh (every page renders without a
#                      warning; every public function and installed tool
#                      has one)
#   3. clang-tidy      root .clang-tidy, over src/, tools/ and examples/
#   4. cppcheck        warnings, portability, performance, and functions
#                      that nothing in src/, tools/ or examples/ calls (code
#                      reachable only from tests); the public API (spindle_*)
#                      is for applications and is not counted
# Usage: sh scripts/check-static.sh BUILD_DIR
# BUILD_DIR is a configured build (its compile_commands.json and generated
# headers are written by CMake at configure time; `make check` configures).
# Exits 1 when any check finds something (all of them are printed), 2 when a
# tool is missing or the build is not configured.
set -u
build=${1:?usage: check-static.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd) || exit 2
cd "$root"
status=0
jobs=$(nproc 2>/dev/null || echo 2)

for tool in clang-format clang-tidy run-clang-tidy cppcheck man; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "check-static: $tool is not installed (sh scripts/install-deps.sh)" >&2
        exit 2
    fi
done
for made in compile_commands.json include/spindle/version.h; do
    if [ ! -f "$build/$made" ]; then
        echo "check-static: $build/$made is missing (configure with CMake first)" >&2
        exit 2
    fi
done

files=$(git ls-files '*.c' '*.h' 2>/dev/null || find src include tests tools examples -name '*.[ch]')
echo "== clang-format"
# shellcheck disable=SC2086
clang-format --dry-run -Werror $files || status=1

echo "== layering"
sh scripts/check-layers.sh || status=1

echo "== environment variables"
sh scripts/check-env.sh || status=1

echo "== manual pages"
sh scripts/check-man.sh || status=1

echo "== clang-tidy"
run-clang-tidy -quiet -p "$build" -j "$jobs" "$root/(src|tools|examples)/" >"$build/clang-tidy.log" 2>&1
tidy_rc=$?
grep -E "(warning|error):" "$build/clang-tidy.log" | sort -u >"$build/clang-tidy.findings" || true
if [ -s "$build/clang-tidy.findings" ]; then
    cat "$build/clang-tidy.findings"
    status=1
elif [ "$tidy_rc" -ne 0 ]; then
    # Failed without a diagnostic line (a crash, a bad database): say so.
    tail -n 20 "$build/clang-tidy.log"
    echo "check-static: run-clang-tidy exited with $tidy_rc (log: $build/clang-tidy.log)" >&2
    status=1
fi

echo "== cppcheck"
cppcheck --project="$build/compile_commands.json" --quiet --inline-suppr \
    --enable=warning,performance,portability,unusedFunction -j 1 \
    --file-filter="$root/src/*" --file-filter="$root/tools/*" --file-filter="$root/examples/*" \
    --template='{file}:{line}: {severity}: {message} [{id}]' 2>"$build/cppcheck.log" >/dev/null
cppcheck_rc=$?
if [ "$cppcheck_rc" -ne 0 ]; then
    tail -n 20 "$build/cppcheck.log"
    echo "check-static: cppcheck exited with $cppcheck_rc (log: $build/cppcheck.log)" >&2
    status=1
fi
grep -v "The function 'spindle_[a-z_]*' is never used" "$build/cppcheck.log" |
    grep -E '^/.*: [a-z]+: ' >"$build/cppcheck.findings" || true
if [ -s "$build/cppcheck.findings" ]; then
    cat "$build/cppcheck.findings"
    status=1
fi

[ "$status" -eq 0 ] && echo "check-static: formatting, layering, environment, manual pages, clang-tidy and cppcheck are clean"
exit "$status"
