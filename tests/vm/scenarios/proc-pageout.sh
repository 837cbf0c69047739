# budget: 150
# proc-pageout: udamon's own engine (idle page bitmap, or soft-dirty when the
# kernel has no bitmap) applies a pageout scheme with process_madvise; on a
# process holding 256 MiB of which 16 MiB stay hot.
# Attributes 20 ms / 400 ms and 30 s, not the defaults and 20 s: under TCG
# udamon's own engine cannot sample every 5 ms (each check is a few
# syscalls, each costly with pti=on; soft-dirty clears the whole process),
# so its aggregations stretch and ages, counted in aggregations, reach "3 s"
# only after 10 s or more of wall time.
. /scenarios/lib.sh "$@"
have_swap
pick_user_ops
need_flag apply --ops
need_flag apply --pid
echo "4K max  0 0  3s max  pageout" > schemes.txt
start_workload hold.log hold 256 16 100
wait_ready hold.log "$WL_PID" 120
proc_snapshot "$WL_PID" before
hold_ticker "$WL_PID"
timeline "$WL_PID" timeline.txt
run_timed apply "$UD" apply schemes.txt --ops "$OPS" --pid "$WL_PID" --duration 30s --sample 20ms --aggr 400ms -o apply.udr --json
kill "$TICKER_PID" 2>/dev/null
sleep 1
hold_report "$WL_PID" hold.log
proc_snapshot "$WL_PID" after
[ -s apply.udr ] && "$UD" report raw apply.udr > apply.raw.jsonl 2>/dev/null
[ "$RC" = 0 ] || error "udamon apply --ops $OPS exited $RC: $(tail -n 3 apply.err | tr '\n' ' ')"
ran
