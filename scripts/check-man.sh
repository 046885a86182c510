#!/bin/sh
# Checks the manual pages under man/:
#   1. every page renders without a warning (man --warnings, as lintian and
#      Debian's man-db do; a .so page through the page it names);
#   2. every public function (SPINDLE_API in include/spindle/*.h and *.h.in)
#      opens a section 3 page of its own name that lists it under NAME;
#   3. every tool installed (install(TARGETS ...) under tools/ and
#      examples/) has a section 1 page.
# Usage: sh scripts/check-man.sh [source-root]   (default: the repository)
# Exits 1 naming every problem, 2 when man is not installed.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
if ! command -v man >/dev/null 2>&1; then
    echo "check-man: man is not installed (sh scripts/install-deps.sh: man-db, groff-base)" >&2
    exit 2
fi
status=0
problem() {
    echo "check-man: $*" >&2
    status=1
}

# 1. Rendering. .so requests name pages relative to man/, so render from there.
pages=$(cd man && find . -name '*.[1-9]' -path './man[1-9]/*' | sed 's|^\./||' | sort)
[ -n "$pages" ] || problem "no pages under man/man[1-9]/"
for page in $pages; do
    # MAN_DISABLE_SECCOMP: man-db's sandbox is refused by some CI containers.
    warnings=$(cd man && LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 MAN_DISABLE_SECCOMP=1 \
        man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null)
    [ -z "$warnings" ] || problem "man/$page: $warnings"
    section=$(echo "$page" | sed 's|^man\([1-9]\)/.*|\1|')
    case $page in *."$section") ;; *) problem "man/$page is not in man$section's section" ;; esac
    target=$(sed -n '1s/^\.so[[:space:]]*//p' "man/$page")
    if [ -n "$target" ] && [ ! -f "man/$target" ]; then
        problem "man/$page: .so $target: no such page"
    fi
done

# The page NAME opens with `man 3 NAME`: man3/NAME.3, or the page its .so
# names, must list NAME in its NAME section.
lists_name() { # page name
    file=man/$1
    target=$(sed -n '1s/^\.so[[:space:]]*//p' "$file")
    [ -z "$target" ] || file=man/$target
    [ -f "$file" ] || return 1
    awk -v n="$2" '
        /^\.SH/ { on = ($2 == "NAME") ; next }
        on { sub(/[[:space:]]\\-[[:space:]].*/, ""); gsub(/\\-/, "-"); gsub(/,/, " "); for (i = 1; i <= NF; i++) if ($i == n) found = 1 }
        END { exit !found }' "$file"
}

# 2. Public functions: the identifier before the first "(" of each
# SPINDLE_API declaration (which may span lines).
functions=$(cat include/spindle/*.h include/spindle/*.h.in 2>/dev/null | awk '
    /^[[:space:]]*#/ { next }
    /SPINDLE_API/ { decl = ""; on = 1 }
    on { decl = decl " " $0
         if (index(decl, "(")) {
             head = substr(decl, 1, index(decl, "(") - 1)
             n = split(head, words, /[^A-Za-z0-9_]+/)
             while (n > 0 && words[n] == "") n--
             print words[n]; on = 0 } }' | sort -u)
[ -n "$functions" ] || problem "no SPINDLE_API function found in include/spindle/"
for function in $functions; do
    if [ ! -f "man/man3/$function.3" ]; then
        problem "$function (include/spindle) has no page man/man3/$function.3"
    elif ! lists_name "man3/$function.3" "$function"; then
        problem "man/man3/$function.3 opens a page whose NAME does not list $function"
    fi
done

# 3. Installed tools.
tools=$(cat tools/*/CMakeLists.txt examples/*/CMakeLists.txt 2>/dev/null |
    sed -n 's/^[[:space:]]*install(TARGETS[[:space:]]\{1,\}\([^)]*\).*/\1/p' |
    sed 's/[[:space:]]\{1,\}\(RUNTIME\|LIBRARY\|ARCHIVE\|DESTINATION\|EXPORT\).*//' | tr ' ' '\n' |
    grep -v '^$' | sort -u)
for tool in $tools; do
    if [ ! -f "man/man1/$tool.1" ]; then
        problem "$tool is installed but has no page man/man1/$tool.1"
    elif ! lists_name "man1/$tool.1" "$tool"; then
        problem "man/man1/$tool.1 does not list $tool under NAME"
    fi
done

[ "$status" -eq 0 ] && echo "check-man: $(echo "$pages" | wc -l) pages render cleanly;" \
    "$(echo "$functions" | wc -l) functions and $(echo "$tools" | wc -l) tools have theirs"
exit "$status"
