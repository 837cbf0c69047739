# budget: 600
# needs: host-root
# program-cost: does monitoring cost grow with processes or with regions?
# forker N for N = 1, 8 and 32, always 32 MiB of hot sets (written every
# 100 ms) and 128 MiB of cold ones in all (FORKER_TOTAL_HOT_MIB,
# FORKER_TOTAL_COLD_MIB: split evenly over the N workers), so the three
# workloads touch the same memory at the same rate. Each is recorded for
# 20 s with `--pid W1 ... --pid WN` (its workers, not the parent) at the
# same region budget (--min-regions R --max-regions R, R = 256: above the
# three regions a vaddr target needs at least, times 32, with room for each
# worker's hot/cold split), on kernel DAMON where it monitors processes and
# on udamon's engine (idle, else softdirty). Measured per run: udamon's CPU
# (busybox time, and udamon's own --json account), the kdamond threads' CPU
# (watch_kdamonds), the workers' own CPU (/proc, before and after), the
# snapshots and regions (report raw). runs.txt: "TAG PATH N" a line.
# For comparison, where the host's root holds damo's virtualenv (as
# program-damo uses it), damo 3.4.3 records the same workers the same way
# (one --target_pid each, -n/-m R, 20 s): its whole command's CPU (python
# and its tracer, start-up included) and the kdamond's.
. /scenarios/lib.sh "$@"
need_flag record --children
need_flag record --min-regions
need_flag record --max-regions
REGIONS=${PROGRAM_COST_REGIONS:-256}
# Each hot set written every 100 ms: 32 processes waking every 20 ms load a
# 2-vCPU TCG guest so much that every program in it, the monitor too, runs
# slower, which is the guest's cost, not the monitor's.
PERIOD=${PROGRAM_COST_PERIOD_MS:-100}
SECS=20
program_paths
# damo, where it can run (else the udamon paths alone)
H=/host
DAMO=$(sed -n 's/^damo=//p' /run/udamon-host 2>/dev/null)
IN_HOST="chroot $H /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp LC_ALL=C TMPDIR=/tmp PYTHONDONTWRITEBYTECODE=1"
if [ -z "$(kdamond_unavailable)" ] && [ -n "$DAMO" ] && [ -x "$H$DAMO" ] &&
    { [ -x "$H/usr/bin/trace-cmd" ] || [ -x "$H/usr/bin/perf" ]; }; then
    paths="$paths damo"
    chmod 1777 "$H/tmp" 2>/dev/null
else
    echo "damo: no damo virtualenv or tracer in the host's root" >> unavailable.txt
fi
echo "$paths" > paths.txt
{
    echo "regions=$REGIONS"
    echo "seconds=$SECS"
    echo "total_hot_mib=32"
    echo "total_cold_mib=128"
    echo "period_ms=$PERIOD"
} > params.txt
: > runs.txt

# wl_ticks: CPU ticks of the current forker's workers, summed
wl_ticks() {
    t=0
    for w in $WORKERS; do t=$((t + $(cpu_ticks "$w"))); done
    echo "$t"
}

for nproc in 1 8 32; do
    rm -f "forker-$nproc.log"
    FORKER_TOTAL_HOT_MIB=32 FORKER_TOTAL_COLD_MIB=128 FORKER_PERIOD_MS=$PERIOD \
        FORKER_LOG="$OUT/forker-$nproc.log" \
        forker "$nproc" 900 > "forker-$nproc.out" 2>&1 &
    BG_PIDS="$BG_PIDS $!"
    forker_ready "forker-$nproc.log" "$nproc" 180
    WORKERS=$(forker_workers "forker-$nproc.log" | tr '\n' ' ')
    args=
    for w in $WORKERS; do args="$args --pid $w"; done
    # settle: the last worker's first passes
    sleep 2
    for p in $paths; do
        tag=$p-$nproc
        echo "$tag $p $nproc" >> runs.txt
        w0=$(wl_ticks); u0=$(up)
        watch_kdamonds "kdamond-$tag.txt"
        if [ "$p" = damo ]; then
            targs=
            for w in $WORKERS; do targs="$targs --target_pid $w"; done
            rm -f "$H/tmp/damo-cost.data"
            run_timed "$tag" $IN_HOST "$DAMO" record --ops vaddr $targs --exclude_child_tasks \
                -s 5000 -a 100000 -n "$REGIONS" -m "$REGIONS" --timeout "$SECS" \
                --do_record access --output_type json_compressed -o /tmp/damo-cost.data
            stop_watch
            remove_damo_kdamonds
            [ -s "$H/tmp/damo-cost.data" ] &&
                "$UD" import "$H/tmp/damo-cost.data" -o "$tag.udr" > /dev/null 2> "import-$tag.err"
        else
            run_timed "$tag" "$UD" record --ops "$p" $args --duration "${SECS}s" \
                --min-regions "$REGIONS" --max-regions "$REGIONS" -o "$tag.udr" --json
            stop_watch
        fi
        echo "$RC" > "rc-$tag.txt"
        echo "$u0 $w0 $(up) $(wl_ticks)" > "wl-$tag.txt"
        if [ "$RC" = 0 ] && [ -s "$tag.udr" ]; then
            "$UD" report raw "$tag.udr" > "$tag.raw.jsonl" 2> "$tag.raw.err"
        fi
        rm -f "$tag.udr"
    done
    forker_stop "forker-$nproc.log"
done
ran
