#!/bin/bash
# Compares the ABI of a built libspindle.so with the baseline committed under
# abi/ (docs/ABI.md). Both sides are the ABI as abidw sees it through the
# public headers (include/spindle/ and the generated version.h), so internal
# types never count.
#
#   - a removed or renamed public function (abidiff's bit 8,
#     ABIDIFF_ABI_INCOMPATIBLE_CHANGE): fails;
#   - only added functions: reported, passes (a compatible addition);
#   - members appended to a sized struct (include/spindle/group.h "Sized
#     structs") or to one only the library makes: listed, passes
#     (scripts/abi-appended.py takes them out of the dump before abidiff);
#   - anything else abidiff reports (a public struct or function type that
#     changed, bit 4 alone): printed for review; fails with --strict, as
#     `make abi` and so CI run it.
#
# Usage: bash scripts/check-abi.sh [--strict] [--update] BUILD_DIR
#   BUILD_DIR  a build holding libspindle.so with debug information
#              (RelWithDebInfo, the default build type, or Debug)
#   --update   writes the baseline from BUILD_DIR instead of checking (at a
#              release, docs/ABI.md "Updating the baseline")
# Installs abigail-tools (Debian 12, as root) when abidw is missing. Exits 0
# when compatible, 1 on a break (or a change to review under --strict), 2
# when the library, the baseline or a tool is missing.
set -euo pipefail

strict=0
update=0
while [ $# -gt 1 ]; do
    case $1 in
        --strict) strict=1 ;;
        --update) update=1 ;;
        *) echo "check-abi: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
build=${1:?usage: check-abi.sh [--strict] [--update] BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$build" ] || { echo "check-abi: no build directory $build (make build)" >&2; exit 2; }
build=$(cd "$build" && pwd)

if ! command -v abidw >/dev/null 2>&1 || ! command -v abidiff >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "check-abi: abidw/abidiff are missing: install abigail-tools (as root)" >&2
        exit 2
    fi
    echo "check-abi: installing abigail-tools"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends abigail-tools >/dev/null
fi

library=$(readlink -f "$build/libspindle.so" 2>/dev/null || true)
if [ -z "$library" ] || [ ! -f "$library" ]; then
    echo "check-abi: $build/libspindle.so is missing (build the library first: make build)" >&2
    exit 2
fi
sections=$(readelf -S "$library")
if ! grep -q '\.debug_info' <<<"$sections"; then
    echo "check-abi: $library has no debug information; abidw needs it" \
        "(build with CMAKE_BUILD_TYPE=RelWithDebInfo or Debug)" >&2
    exit 2
fi
soname=$(readelf -d "$library" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -n "$soname" ] || { echo "check-abi: $library has no SONAME" >&2; exit 2; }
baseline="$root/abi/$soname.abi"

# The same options for the baseline and the build, so the two XML files
# differ only where the ABI does: no paths of the build machine, and no
# DT_NEEDED list (it follows which optional backends were found).
dump() { # output
    abidw --headers-dir "$root/include/spindle" --headers-dir "$build/include/spindle" \
        --drop-private-types --no-corpus-path --no-comp-dir-path --short-locs --drop-undefined-syms \
        --no-elf-needed --out-file "$1" "$library"
}

if [ "$update" -eq 1 ]; then
    mkdir -p "$root/abi"
    dump "$baseline"
    echo "check-abi: wrote $baseline ($(grep -c '<elf-symbol ' "$baseline") exported functions)"
    exit 0
fi

if [ ! -f "$baseline" ]; then
    echo "check-abi: no baseline $baseline for $soname: a new soname starts a new baseline" \
        "(bash scripts/check-abi.sh --update $build; docs/ABI.md)" >&2
    exit 2
fi
current="$build/$soname.abi"
dump "$current"
command -v python3 >/dev/null 2>&1 ||
    { echo "check-abi: python3 is missing (scripts/abi-appended.py needs it)" >&2; exit 2; }
compared="$build/$soname.compared.abi"
python3 "$root/scripts/abi-appended.py" "$baseline" "$current" "$compared"
current=$compared

status=0
abidiff "$baseline" "$current" >"$build/abidiff.txt" 2>&1 || status=$?
cat "$build/abidiff.txt"
if [ $((status & 1)) -ne 0 ]; then
    echo "check-abi: abidiff failed (status $status): see above" >&2
    exit 2
fi
if [ $((status & 8)) -ne 0 ]; then
    echo "check-abi: FAIL: $soname breaks programs built against abi/$soname.abi" \
        "(a public function was removed or changed incompatibly; docs/ABI.md)" >&2
    exit 1
fi
if [ "$status" -eq 0 ]; then
    echo "check-abi: ok: $soname has the ABI of abi/$soname.abi"
    exit 0
fi

# Bit 4 alone: additions, other changes, or both. Without the added
# functions, is anything left?
rest=0
abidiff --no-added-syms "$baseline" "$current" >/dev/null 2>&1 || rest=$?
if [ "$rest" -eq 0 ]; then
    echo "check-abi: ok: compatible additions to abi/$soname.abi (listed above)"
    exit 0
fi
if [ "$strict" -eq 1 ]; then
    echo "check-abi: FAIL: public types or functions of $soname changed (above): only" \
        "members appended to the structs that may grow are compatible (docs/ABI.md)" >&2
    exit 1
fi
echo "check-abi: REVIEW: public types or functions of $soname changed (above): abidiff" \
    "cannot tell whether they are compatible; see docs/ABI.md (--strict fails here)"
exit 0
