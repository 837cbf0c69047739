# budget: 120
# softdirty-writer: udamon's own engine over soft-dirty bits (writes only)
# on a process that writes one half of a 32 MiB buffer and only reads the other.
# Sampling is 20 ms, not 5 ms: every sample clears the soft-dirty bits of the
# whole process (clear_refs), after which each write faults once; under TCG
# the writer needs far longer than 5 ms to dirty its half again.
. /scenarios/lib.sh "$@"
have_soft_dirty
need_flag record --ops
need_flag record --pid
start_workload wl.log writer 32 50
wait_ready wl.log "$WL_PID" 120
run_timed rec "$UD" record --ops softdirty --pid "$WL_PID" -o rec.udr --duration 20s --sample 20ms --aggr 400ms
kill -9 "$WL_PID" 2>/dev/null
[ "$RC" = 0 ] || error "udamon record --ops softdirty exited $RC: $(tail -n 3 rec.err | tr '\n' ' ')"
"$UD" report raw rec.udr > rec.raw.jsonl 2> rec.raw.err ||
    error "udamon report raw failed: $(head -c 300 rec.raw.err)"
"$UD" report heatmap rec.udr > rec.heatmap.txt 2>&1
ran
