#!/bin/sh
# Installs the built tree into a temporary prefix, then builds and runs a
# user program against it three ways: pkg-config (shared), find_package
# (shared) and find_package (static). Proves the installed headers, the
# libspindle.pc file and the CMake package are complete and usable, that
# the tools and every manual page were installed where man finds them, that
# a group of three runs under the installed tools (tests/install/
# three_members.sh), and that the installed Python package finds the
# installed library by itself and runs the same group of three
# (three_members.py).
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

# The tools, and the manual pages: every page of man/ under share/man, and
# man opening a function's link page and a tool's page from there.
"$PREFIX/bin/spindle-info" --version >/dev/null || { echo "FAIL: spindle-info not installed"; exit 1; }
for tool in spindle-stat spindle-ctl; do
    "$PREFIX/bin/$tool" --version >/dev/null || { echo "FAIL: $tool not installed"; exit 1; }
done
"$PREFIX/bin/spindle-bench" --help >/dev/null ||
    { echo "FAIL: the installed spindle-bench does not run (its runpath?)"; exit 1; }
mandir=$(find "$PREFIX" -type d -name man -path '*/share/man' | head -n 1)
[ -n "$mandir" ] || { echo "FAIL: no share/man under $PREFIX"; exit 1; }
for page in "$SRC"/man/man[1-9]/*.[1-9]; do
    name=$(basename "$(dirname "$page")")/$(basename "$page")
    [ -f "$mandir/$name" ] || { echo "FAIL: $name was not installed under $mandir"; exit 1; }
done
if command -v man >/dev/null 2>&1; then
    for what in "3 spindle_commit" "1 spindle-info" "5 spindle.ini"; do
        # shellcheck disable=SC2086
        MAN_DISABLE_SECCOMP=1 MANWIDTH=80 man -M "$mandir" $what 2>/dev/null | grep -q "${what#* }" ||
            { echo "FAIL: man -M $mandir $what does not open its page"; exit 1; }
    done
fi

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

# A group of three under the installed spindle-run, with its own event
# loop and log sink, seen by the installed spindle-stat and steered by
# spindle-ctl (three_members.sh says what is checked).
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$WORK/three_members" "$SRC/tests/install/three_members.c" \
    $(pkg-config --cflags --libs libspindle) ||
    { echo "FAIL: building three_members.c with pkg-config --cflags --libs libspindle"; exit 1; }
PATH="$PREFIX/bin:$PATH" LD_LIBRARY_PATH="$(dirname "$pc")/.." \
    sh "$SRC/tests/install/three_members.sh" "$WORK/three_members" ||
    { echo "FAIL: three members of the installed library under spindle-run"; exit 1; }

# find_package(spindle), shared and static
cmake -S "$SRC/tests/install" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
    >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log"; echo "FAIL: find_package(spindle)"; exit 1; }
cmake --build "$WORK/consumer" >"$WORK/build.log" 2>&1 ||
    { cat "$WORK/build.log"; echo "FAIL: building against spindle::spindle"; exit 1; }
run find_package-shared "$WORK/consumer/consumer_shared"
run find_package-static "$WORK/consumer/consumer_static"
# The Python package, when it was installed and there is a python3: with
# only PYTHONPATH set, it loads the library of this prefix and a member of
# one delivers what it sent.
pydir=$(find "$PREFIX" -type d -name spindle -path '*dist-packages/spindle' | head -n 1)
if [ -n "$pydir" ] && command -v python3 >/dev/null 2>&1; then
    mkdir -p "$WORK/boot-python"
    env -u SPINDLE_LIBRARY PYTHONPATH="$(dirname "$pydir")" PYTHONDONTWRITEBYTECODE=1 \
        python3 - "$PREFIX" "$WORK/boot-python" <<'PYTHON' ||
import os, sys
import spindle
prefix, bootstrap = sys.argv[1], sys.argv[2]
assert os.path.realpath(spindle.library_path).startswith(os.path.realpath(prefix)), \
    f"loaded {spindle.library_path}, not the library under {prefix}"
with spindle.Group([spindle.Subgroup([0], window=4, max_payload=64)], bootstrap=bootstrap) as g:
    g.send(0, b"installed")
    assert [m.data for m in g.receive(timeout=10)] == [b"installed"]
    g.shutdown(10)
PYTHON
        { echo "FAIL: the installed Python package (PYTHONPATH=$(dirname "$pydir"))"; exit 1; }
    # The group of three again, through that package alone.
    PATH="$PREFIX/bin:$PATH" PYTHONPATH="$(dirname "$pydir")" PYTHONDONTWRITEBYTECODE=1 \
        env -u SPINDLE_LIBRARY sh "$SRC/tests/install/three_members.sh" \
        python3 "$SRC/tests/install/three_members.py" ||
        { echo "FAIL: three members of the installed Python package under spindle-run"; exit 1; }
fi
echo "ok: installed headers, libspindle.pc and find_package(spindle) all build a working program"
