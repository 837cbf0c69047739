# budget: 200
# program-churn: a process tree that forks and loses workers all the time.
# `udamon record --duration 20s -- forker 4 20 churn`: four worker slots,
# each worker living a random 0.5-2 s (the same lifetimes on every path:
# FORKER_SEED) and replaced when it exits, about 15 workers a slot over the
# run; on kernel DAMON where it monitors processes and on udamon's engine
# (idle, else softdirty). The forker's log has each worker's start and exit
# (uptime); udamon's stderr, stamped with the uptime (run_stamped), dates
# the record's clock, so check.py can compare each arrival and exit the
# record marks with the worker's own.
. /scenarios/lib.sh "$@"
need_flag record --children
need_flag record --no-children
program_paths
echo "$paths" > paths.txt
: > runs.txt
for p in $paths; do
    tag=churn-$p
    rm -f "$tag.forker.log"
    export FORKER_LOG="$OUT/$tag.forker.log" FORKER_SEED=28
    # As in program-tree: soft-dirty resets once a window or less often.
    sd=
    [ "$p" = softdirty ] && sd="--softdirty-reset auto"
    run_stamped "$tag" "$UD" record --ops "$p" $sd --duration 20s -o "$tag.udr" --json -- forker 4 20 churn
    unset FORKER_LOG FORKER_SEED
    forker_stop "$tag.forker.log"
    echo "$p" > "$tag.ops"
    echo "$tag" >> runs.txt
    if [ "$RC" = 0 ] && [ -s "$tag.udr" ]; then
        "$UD" report raw "$tag.udr" > "$tag.raw.jsonl" 2> "$tag.raw.err"
        "$UD" report summary "$tag.udr" --json > "$tag.summary.json" 2>&1
    fi
done
ran
