# budget: 150
# kdamond-prcl: proactive reclamation by kernel DAMOS (pageout of regions idle
# for 5 s), set up by udamon apply on a process holding 256 MiB of which 16 MiB
# stay hot; check.py wants VmRSS down by half and the cold part in swap.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
have_swap
need_flag apply --ops
need_flag apply --pid
echo "4K max  0 0  5s max  pageout" > prcl.txt
start_workload hold.log hold 256 16 100
wait_ready hold.log "$WL_PID" 120
proc_snapshot "$WL_PID" before
hold_ticker "$WL_PID"
timeline "$WL_PID" timeline.txt
run_timed apply "$UD" apply prcl.txt --ops kdamond --pid "$WL_PID" --duration 20s -o apply.udr --json
kill "$TICKER_PID" 2>/dev/null
sleep 1
hold_report "$WL_PID" hold.log
proc_snapshot "$WL_PID" after
[ -s apply.udr ] && "$UD" report raw apply.udr > apply.raw.jsonl 2>/dev/null
[ "$RC" = 0 ] || error "udamon apply --ops kdamond exited $RC: $(tail -n 3 apply.err | tr '\n' ' ')"
ran
