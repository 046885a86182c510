#!/bin/sh
# scripts/check-man.sh passes on the tree, and fails, naming each, on a copy
# of it with a public function without a page, a page that renders with a
# warning, a link page to no page, a link page whose page does not list its
# name, and an installed tool without a section 1 page.
set -eu
checker=$1
tree=$2
sh "$checker" "$tree"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$tree/include" "$tree/man" "$tree/tools" "$work/"
mkdir -p "$work/examples"
printf 'SPINDLE_API int\nspindle_group_frobnicate(spindle_group_t *group);\n' \
    >>"$work/include/spindle/group.h"
printf '.XX not a macro\n' >>"$work/man/man3/spindle_flush.3"
echo '.so man3/spindle_gone.3' >"$work/man/man3/spindle_commit.3"
echo '.so man3/spindle_flush.3' >"$work/man/man3/spindle_send.3"
echo 'install(TARGETS spindle-frob RUNTIME DESTINATION bin)' >>"$work/tools/info/CMakeLists.txt"
if sh "$checker" "$work" >"$work/log" 2>&1; then
    echo "FAIL: the broken copy passed the check" >&2
    exit 1
fi
cat "$work/log"
grep -q 'spindle_group_frobnicate (include/spindle) has no page man/man3/spindle_group_frobnicate.3' "$work/log"
grep -q "man/man3/spindle_flush.3: .*macro 'XX' not defined" "$work/log"
grep -q 'man/man3/spindle_commit.3: .so man3/spindle_gone.3: no such page' "$work/log"
grep -q 'man/man3/spindle_send.3 opens a page whose NAME does not list spindle_send' "$work/log"
grep -q 'spindle-frob is installed but has no page man/man1/spindle-frob.1' "$work/log"
echo "ok: the checker names the missing page, the warning, the broken links and the tool"
