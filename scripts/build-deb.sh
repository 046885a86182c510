#!/bin/bash
# Builds the Debian packages (libspindle0, libspindle-dev, spindle-tools,
# python3-spindle) with `dpkg-buildpackage -us -uc -b` and checks them with
# lintian, which must find no error (docs/PACKAGING.md).
#
# dpkg-buildpackage writes its results next to the source tree, so the build
# runs in a copy of the tree under OUT_DIR and nothing lands outside it; the
# .deb files and the lintian report end up in OUT_DIR itself.
#
# Usage: bash scripts/build-deb.sh [OUT_DIR]     (default: build-deb)
# DEB_BUILD_OPTIONS is passed through: with nocheck (what `make deb` sets)
# the suite is neither built nor run. Installs dpkg-dev, debhelper, lintian
# and the build dependencies of debian/control (Debian 12, as root) when
# missing. Exits 1 when the build fails or lintian reports an error.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build-deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
case $out in
    "$root") echo "build-deb: OUT_DIR must not be the source tree itself" >&2; exit 2 ;;
esac

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "build-deb: $1 must be installed (as root: $2)" >&2
        exit 2
    fi
}
export DEBIAN_FRONTEND=noninteractive
missing=""
for pkg in dpkg-dev debhelper lintian fakeroot; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    need_root "$missing" "apt-get install$missing"
    echo "build-deb: installing$missing"
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# A clean copy of the tree: the files git knows, plus new ones not ignored
# (so an uncommitted debian/ change is built too), never build directories.
version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
src="$out/src/libspindle-$version"
rm -rf "$out/src"
mkdir -p "$src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do
        if [ -e "$file" ]; then printf '%s\0' "$file"; fi
    done | tar --null -T - -cf -) | tar -xf - -C "$src"

profiles=""
case " ${DEB_BUILD_OPTIONS:-} " in *" nocheck "*) profiles="nocheck" ;; esac
if ! (cd "$src" && dpkg-checkbuilddeps ${profiles:+-P "$profiles"} 2>/dev/null); then
    need_root "the build dependencies of debian/control" "apt-get build-dep ./"
    echo "build-deb: installing the build dependencies of debian/control"
    apt-get update -qq
    (cd "$src" && apt-get build-dep -y -qq ${profiles:+-P "$profiles"} ./ >/dev/null)
fi

echo "build-deb: dpkg-buildpackage -us -uc -b (DEB_BUILD_OPTIONS='${DEB_BUILD_OPTIONS:-}')"
start=$(date +%s)
if ! (cd "$src" && nice dpkg-buildpackage -us -uc -b ${profiles:+--build-profiles="$profiles"}) \
    >"$out/dpkg-buildpackage.log" 2>&1; then
    tail -n 40 "$out/dpkg-buildpackage.log"
    echo "build-deb: FAIL: dpkg-buildpackage (the whole log: $out/dpkg-buildpackage.log)" >&2
    exit 1
fi
# dpkg-gensymbols reports a new or lost symbol as a diff; show it.
grep -A40 '^dpkg-gensymbols: warning' "$out/dpkg-buildpackage.log" || true
rm -f "$out"/*.deb "$out"/*.ddeb "$out"/*.changes "$out"/*.buildinfo
mv "$out/src"/*.deb "$out/src"/*.changes "$out/src"/*.buildinfo "$out"/
mv "$out/src"/*.ddeb "$out"/ 2>/dev/null || true
echo "build-deb: built in $(($(date +%s) - start)) s:"
(cd "$out" && ls -1 ./*.deb)

changes=$(ls "$out"/*.changes)
lintian_rc=0
lintian --fail-on error --display-info "$changes" >"$out/lintian.txt" 2>&1 || lintian_rc=$?
cat "$out/lintian.txt"
echo "build-deb: lintian: $(grep -c '^E: ' "$out/lintian.txt" || true) errors," \
    "$(grep -c '^W: ' "$out/lintian.txt" || true) warnings," \
    "$(grep -c '^I: ' "$out/lintian.txt" || true) notes ($out/lintian.txt)"
if [ "$lintian_rc" -ne 0 ]; then
    echo "build-deb: FAIL: lintian reported errors (above)" >&2
    exit 1
fi
echo "build-deb: ok: packages in $out"
