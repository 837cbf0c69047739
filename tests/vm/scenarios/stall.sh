# budget: 150
# stall: kernel DAMON pages out 768 MiB of cold memory at once (no quota)
# into zram; under TCG one aggregation then lasts seconds. udamon must record
# and report every such window as a gap: the summary's count, the record's
# `gap` entries and the windows themselves agree.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
have_swap
need_flag apply --ops
echo "4K max  0 0  1s max  pageout" > po.txt
start_workload hold.log hold 768 0
wait_ready hold.log "$WL_PID" 150
run_timed apply "$UD" apply po.txt --ops kdamond --pid "$WL_PID" --duration 25s -o apply.udr --json
[ "$RC" = 0 ] || error "udamon apply --ops kdamond exited $RC: $(tail -n 3 apply.err | tr '\n' ' ')"
"$UD" report raw apply.udr > apply.raw.jsonl 2> apply.raw.err ||
    error "udamon report raw failed: $(head -c 300 apply.raw.err)"
"$UD" report summary apply.udr > summary.txt 2>&1
kill -9 "$WL_PID" 2>/dev/null
ran
