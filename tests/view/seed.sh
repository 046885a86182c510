#!/bin/bash
# Sourced by the fault scripts (faults.sh, faults_partition.sh, join.sh,
# soak.sh): seed_random NAME VAR seeds $RANDOM from the environment variable
# named VAR, or from the clock when it is not set, sets SEED and prints how
# to repeat the run; pick_mode draws a run's delivery mode.
seed_random() {
    local name=$1 var=$2
    if [ -n "${!var:-}" ]; then
        SEED=${!var}
    else
        SEED=$(($(date +%s%N) % 2147483647))
    fi
    echo "$name: seed $SEED (rerun with $var=$SEED)"
    RANDOM=$SEED
}

# pick_mode MODE sets RUN_MODE, the delivery mode of one run: MODE itself
# (atomic or unordered), or for mixed one of the two drawn from $RANDOM (so
# the seed replays the choice). Any other MODE is a usage error (exit 2).
# shellcheck disable=SC2034 # RUN_MODE is read by the scripts that source this
pick_mode() {
    case $1 in
    atomic | unordered) RUN_MODE=$1 ;;
    mixed) if ((RANDOM % 2)); then RUN_MODE=unordered; else RUN_MODE=atomic; fi ;;
    *)
        echo "mode '$1' must be atomic, unordered or mixed" >&2
        exit 2
        ;;
    esac
}
