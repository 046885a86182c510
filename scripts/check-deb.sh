#!/bin/bash
# Installs the Debian packages built by scripts/build-deb.sh into a clean
# Debian 12 root made with debootstrap, and checks them there as a user
# would meet them (docs/PACKAGING.md):
#   - apt installs the four packages, pulling their dependencies from the
#     archive (so debian/control and the shlibs dependencies are complete);
#   - tests/install/consumer.c builds with
#     `pkg-config --cflags --libs libspindle` against the installed headers
#     and runs (one member delivers the ten messages it sent);
#   - tests/install/three_members.c builds the same way and runs as a group
#     of three under spindle-run: its own epoll loop and log sink, replies
#     sent from the delivery upcall, spindle-stat showing the members and
#     spindle-ctl removing one (tests/install/three_members.sh);
#   - the manual pages are where man finds them, spindle-keygen writes a key
#     and spindle-info runs;
#   - python3 imports the spindle package, which finds the installed library
#     by itself, and a member of one delivers what it sent;
#   - tests/install/three_members.py, the same group of three through the
#     installed Python package alone, passes three_members.sh too.
#
# Usage: bash scripts/check-deb.sh [DEB_DIR]      (default: build-deb)
# Needs root (debootstrap, chroot, mounts) and the network to the archive
# apt uses here (MIRROR overrides it). Installs debootstrap when missing.
# Takes a few minutes, most of them debootstrap; see docs/PACKAGING.md for
# the times measured. The root is made under TMPDIR (/var/tmp) and removed
# at the end (KEEP_ROOT=1 keeps it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
debs=${1:-build-deb}
[ -d "$debs" ] || { echo "check-deb: no $debs (bash scripts/build-deb.sh first)" >&2; exit 2; }
debs=$(cd "$debs" && pwd)
if [ "$(id -u)" -ne 0 ]; then
    echo "check-deb: needs root (debootstrap, chroot and mounts)" >&2
    exit 2
fi
packages=()
for name in libspindle0 libspindle-dev spindle-tools python3-spindle; do
    found=$(find "$debs" -maxdepth 1 -name "${name}_*.deb" | sort | tail -n 1)
    [ -n "$found" ] || { echo "check-deb: $debs has no ${name}_*.deb (bash scripts/build-deb.sh)" >&2; exit 2; }
    packages+=("$found")
done

export DEBIAN_FRONTEND=noninteractive
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "check-deb: installing debootstrap"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

# The archive apt uses here: a one-line "deb URI bookworm ..." entry, or a
# deb822 stanza whose Suites has bookworm.
mirror_of_apt() {
    local uri
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++;
              if ($(i + 1) == "bookworm") { print $i; exit } }')
    if [ -z "$uri" ]; then
        uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
            awk 'BEGIN { RS = ""; FS = "\n" }
                 { u = ""; s = 0
                   for (i = 1; i <= NF; i++) {
                       if ($i ~ /^URIs:/) { split($i, f, " "); u = f[2] }
                       if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) s = 1
                   }
                   if (s && u != "") { print u; exit } }')
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}
mirror=${MIRROR:-$(mirror_of_apt)}

work=$(mktemp -d "${TMPDIR:-/var/tmp}/spindle-deb-XXXXXX")
chroot_dir="$work/root"
cleanup() {
    for mount in "$chroot_dir/dev/shm" "$chroot_dir/proc"; do
        if mountpoint -q "$mount" 2>/dev/null; then umount "$mount" || umount -l "$mount"; fi
    done
    if [ "${KEEP_ROOT:-0}" = 1 ]; then
        echo "check-deb: kept $chroot_dir"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
fail() {
    echo "check-deb: FAIL: $*" >&2
    exit 1
}
in_root() {
    chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

start=$(date +%s)
echo "check-deb: debootstrap --variant=minbase bookworm from $mirror"
nice debootstrap --variant=minbase bookworm "$chroot_dir" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log"; fail "debootstrap from $mirror (log above)"; }
bootstrapped=$(date +%s)

mount -t proc proc "$chroot_dir/proc"
mkdir -p "$chroot_dir/dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$chroot_dir/dev/shm"
mkdir -p "$chroot_dir/tmp/debs" "$chroot_dir/tmp/check"
cp "${packages[@]}" "$chroot_dir/tmp/debs/"
in_root_debs=()
for package in "${packages[@]}"; do in_root_debs+=("/tmp/debs/$(basename "$package")"); done
cp "$root/tests/install/consumer.c" "$root/tests/install/three_members.c" \
    "$root/tests/install/three_members.sh" "$root/tests/install/three_members.py" \
    "$root/tests/test_ports.sh" "$chroot_dir/tmp/check/"

echo "check-deb: apt-get install the packages (and gcc, pkg-config, man-db to check them)"
(in_root apt-get update -qq &&
    in_root apt-get install -y -qq --no-install-recommends \
        "${in_root_debs[@]}" gcc libc6-dev pkg-config man-db) >"$work/install.log" 2>&1 ||
    { tail -n 30 "$work/install.log"; fail "apt-get install of the packages in the clean root (log above)"; }
installed=$(date +%s)

echo "check-deb: consumer built with pkg-config against the installed library"
# shellcheck disable=SC2016 # expanded by the shell in the root
in_root sh -ec '
    cd /tmp/check
    cc -std=c11 -Wall -Werror -o consumer consumer.c $(pkg-config --cflags --libs libspindle)
    ldd ./consumer | grep -Eq "libspindle.so.0 => (/usr)?/lib/" || { echo "not linked to the installed library"; exit 1; }
    mkdir -m 700 boot
    ./consumer /tmp/check/boot' || fail "the consumer program against the installed libspindle-dev"

echo "check-deb: three members under spindle-run, seen by spindle-stat, one removed by spindle-ctl"
# shellcheck disable=SC2016 # expanded by the shell in the root
in_root sh -ec '
    cd /tmp/check
    cc -std=c11 -Wall -Werror -o three_members three_members.c $(pkg-config --cflags --libs libspindle)
    sh ./three_members.sh /tmp/check/three_members' ||
    fail "three members of the installed packages (tests/install/three_members.sh)"

echo "check-deb: manual pages, spindle-keygen, spindle-info"
for page in "3 spindle_commit" "3 spindle_group_create" "3 spindle_group_create_sized" "7 spindle" \
    "1 spindle-keygen" "1 spindle-run" "1 spindle-stat" "1 spindle-ctl" "5 spindle.ini"; do
    # shellcheck disable=SC2086
    in_root man -w $page >/dev/null 2>&1 || fail "man $page: no such page installed"
done
# shellcheck disable=SC2016 # expanded by the shell in the root
in_root sh -ec '
    spindle-keygen /tmp/check/key
    [ "$(stat -c %s:%a /tmp/check/key)" = 32:600 ] || { echo "key file is $(stat -c %s:%a /tmp/check/key)"; exit 1; }
    spindle-info --version >/dev/null' || fail "spindle-keygen or spindle-info from spindle-tools"

echo "check-deb: the Python package over the installed library"
in_root python3 - <<'PYTHON' || fail "python3-spindle: import or a group of one"
import os, spindle
assert os.path.realpath(spindle.library_path).startswith("/usr/lib/"), spindle.library_path
os.makedirs("/tmp/check/boot-python", mode=0o700)
with spindle.Group([spindle.Subgroup([0], window=4, max_payload=64)],
                   bootstrap="/tmp/check/boot-python") as g:
    g.send(0, b"installed")
    assert [m.data for m in g.receive(timeout=10)] == [b"installed"]
    g.shutdown(10)
PYTHON
echo "check-deb: three members again through python3-spindle, under spindle-run"
in_root sh -ec '
    cd /tmp/check
    sh ./three_members.sh python3 /tmp/check/three_members.py' ||
    fail "three members through the installed python3-spindle (tests/install/three_members.py)"
done_at=$(date +%s)
echo "check-deb: ok: debootstrap $((bootstrapped - start)) s, install $((installed - bootstrapped)) s," \
    "checks $((done_at - installed)) s, total $((done_at - start)) s"
