# budget: 200
# enhanced-live: the enhanced adaptation mode against the kernel's, on
# udamon's engine over the idle page bitmap. 1. sparse_hot (a 4 MiB object
# written every 20 ms, in the middle of 256 MiB populated in a 64 GiB
# reservation), recorded 20 s with --mode kernel, then 20 s with --mode
# enhanced; 2. the eight-objects staircase, 22 s with --mode enhanced (the
# kernel mode's is idle-eight).
. /scenarios/lib.sh "$@"
have_idle_bitmap
need_flag record --mode
start_workload sparse.log sparse_hot 64 256 4 20
wait_ready sparse.log "$WL_PID" 120
for m in kernel enhanced; do
    run_timed "sparse-$m" "$UD" record --ops idle --mode "$m" --pid "$WL_PID" -o "sparse-$m.udr" --duration 20s
    [ "$RC" = 0 ] || error "udamon record --mode $m exited $RC: $(tail -n 3 "sparse-$m.err" | tr '\n' ' ')"
    "$UD" report raw "sparse-$m.udr" > "sparse-$m.raw.jsonl" 2> "sparse-$m.raw.err" ||
        error "udamon report raw failed: $(head -c 300 "sparse-$m.raw.err")"
    "$UD" report summary "sparse-$m.udr" --json > "sparse-$m.summary.json" 2>&1
done
kill -9 "$WL_PID" 2>/dev/null
wait "$WL_PID" 2>/dev/null
record_eight idle 22 enh --mode enhanced
ran
