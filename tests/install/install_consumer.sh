#!/bin/sh
# Installs the built tree into a temporary prefix, then builds and runs a
# user program against it three ways: pkg-config (shared), find_package
# (shared) and find_package (static). Proves the installed headers, the
# libspindle.pc file and the CMake package are complete and usable.
# Usage: install_consumer.sh BUILD_DIR SOURCE_DIR
set -eu
BUILD=$1
SRC=$2
WORK=$(mktemp -d /tmp/spindle-install-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
PREFIX="$WORK/prefix"

cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" ||
    { cat "$WORK/install.log"; echo "FAIL: cmake --install"; exit 1; }
pc=$(find "$PREFIX" -name libspindle.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: libspindle.pc was not installed under $PREFIX"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"

run() { # name binary
    mkdir -p "$WORK/boot-$1"
    LD_LIBRARY_PATH="$(dirname "$pc")/.." "$2" "$WORK/boot-$1" ||
        { echo "FAIL: $1 consumer did not deliver its messages"; exit 1; }
}

# pkg-config, shared library
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$WORK/consumer_pc" "$SRC/tests/install/consumer.c" \
    $(pkg-config --cflags --libs libspindle) ||
    { echo "FAIL: building with pkg-config --cflags --libs libspindle"; exit 1; }
run pkg-config "$WORK/consumer_pc"

# find_package(spindle), shared and static
cmake -S "$SRC/tests/install" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
    >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log"; echo "FAIL: find_package(spindle)"; exit 1; }
cmake --build "$WORK/consumer" >"$WORK/build.log" 2>&1 ||
    { cat "$WORK/build.log"; echo "FAIL: building against spindle::spindle"; exit 1; }
run find_package-shared "$WORK/consumer/consumer_shared"
run find_package-static "$WORK/consumer/consumer_static"
echo "ok: installed headers, libspindle.pc and find_package(spindle) all build a working program"
