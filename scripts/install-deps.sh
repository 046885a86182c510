#!/bin/sh
# Installs the Debian 12 packages libspindle builds and tests with, when any
# is missing. Needs root (or sudo) only when something must be installed.
set -eu

PACKAGES="build-essential cmake pkg-config libinih-dev libsodium-dev libcmocka-dev \
libfabric-dev libfabric-bin libibverbs-dev librdmacm-dev ibverbs-providers \
iproute2 procps gnuplot-nox man-db groff-base clang-format clang-tidy cppcheck clang libclang-rt-14-dev \
spin python3 jq util-linux redis-tools python3-redis"

missing=""
for pkg in $PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    case "$status" in
        *"install ok installed"*) ;;
        *) missing="$missing $pkg" ;;
    esac
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing"
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=sudo
    else
        echo "install-deps: missing packages:$missing; run as root or install them" >&2
        exit 1
    fi
else
    SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
