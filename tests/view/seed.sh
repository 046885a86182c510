#!/bin/bash
# Sourced by the fault scripts (faults.sh, faults_partition.sh, join.sh,
# soak.sh): seed_random NAME VAR seeds $RANDOM from the environment variable
# named VAR, or from the clock when it is not set, sets SEED and prints how
# to repeat the run.
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
