#!/bin/sh
# Fails when a file under src/ includes a header of a layer it may not use,
# or when headers under src/ include each other in a circle.
#
# The layers (ARCHITECTURE.md "Layout"; data flows one way):
#   group     may use view, log, smc, sst, control, config, transport, util
#   view      may use log, smc, sst, control, transport, util
#   log       may use sst, transport, util
#   smc       may use sst, transport, util
#   sst       may use transport, util
#   control   may use util                (beside the data path)
#   transport may use util                (a backend: its own folder and the
#                                          contract, transport/transport.h;
#                                          nothing else sees a backend's folder)
#   config    may use util
#   util      may use util only
# Public headers (<spindle/...>) may be used everywhere.
#
# Usage: sh scripts/check-layers.sh [source-root]   (default: the repository)
set -eu
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

allowed() {
    case $1 in
    group) echo "group view log smc sst control config transport util" ;;
    view) echo "view log smc sst control transport util" ;;
    log) echo "log sst transport util" ;;
    smc) echo "smc sst transport util" ;;
    sst) echo "sst transport util" ;;
    control) echo "control util" ;;
    transport) echo "transport util" ;;
    config) echo "config util" ;;
    util) echo "util" ;;
    *) echo "" ;;
    esac
}

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
status=0
for file in $(find src -name '*.[ch]' | sort); do
    layer=$(echo "$file" | cut -d/ -f2)
    ok=$(allowed "$layer")
    if [ -z "$ok" ]; then
        echo "check-layers: $file: folder src/$layer is not a known layer" >&2
        status=1
        continue
    fi
    # Quoted includes name a path under src/.
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
        target=$(echo "$inc" | cut -d/ -f1)
        case " $ok " in
        *" $target "*) ;;
        *)
            echo "check-layers: $file includes \"$inc\": $layer may not use $target" >&2
            status=1
            ;;
        esac
        # Backends are plug-ins: the layers above see only the contract
        # (transport/transport.h), and a backend sees only its own folder.
        case $inc in
        transport/transport.h) ;;
        transport/*)
            backend=$(echo "$inc" | cut -d/ -f2)
            case $file in
            src/transport/"$backend"/*) ;;
            *)
                echo "check-layers: $file includes \"$inc\": only the $backend backend may" >&2
                status=1
                ;;
            esac
            ;;
        esac
        case $file in *.h) echo "${file#src/} $inc" >>"$edges" ;; esac
    done
done

# Circles among headers: depth-first search over "header includes header".
cycles=$(awk '
    { out[$1] = out[$1] " " $2; node[$1] = 1; node[$2] = 1 }
    function visit(n,    parts, count, i, m) {
        state[n] = 1; path[++depth] = n
        count = split(out[n], parts, " ")
        for (i = 1; i <= count; i++) {
            m = parts[i]
            if (state[m] == 1) {
                for (k = depth; k >= 1 && path[k] != m; k--)
                    ;
                line = path[k]
                for (j = k + 1; j <= depth; j++) line = line " -> " path[j]
                print line " -> " m
            } else if (state[m] == 0) {
                visit(m)
            }
        }
        state[n] = 2; depth--
    }
    END { for (n in node) if (state[n] == 0) visit(n) }
' "$edges")
if [ -n "$cycles" ]; then
    echo "check-layers: headers include each other in a circle:" >&2
    echo "$cycles" | sed 's/^/    /' >&2
    status=1
fi
[ "$status" -eq 0 ] && echo "check-layers: $(find src -name '*.[ch]' | wc -l) files, layers point one way, no include circle"
exit "$status"
