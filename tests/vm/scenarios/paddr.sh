# budget: 150
# paddr: the physical address space (record --paddr) while eight_objects
# keeps 64 MiB hot: through kernel DAMON's paddr set, and through udamon's
# engine over the idle bitmap where the kernel has one. check.py wants
# System RAM covered and a working set between the hot object and the RAM.
. /scenarios/lib.sh "$@"
need_flag record --paddr
paths=
[ "$(feature kernel_damon_sysfs)" = true ] && feature_detail damon_operations | grep -qw paddr && paths="$paths kdamond"
[ -e /sys/kernel/mm/page_idle/bitmap ] && paths="$paths idle"
[ -n "$paths" ] || skip "neither kernel DAMON paddr nor the idle page bitmap"
echo $paths > paths.txt
grep "System RAM" /proc/iomem > iomem.txt
start_workload wl.log eight_objects 64 2
wait_ready wl.log "$WL_PID" 180
for p in $paths; do
    # sampled every 20 ms: physical memory has many regions under TCG
    run_timed "$p" "$UD" record --paddr --ops "$p" -o "$p.udr" --duration 12s --sample 20ms --aggr 400ms --json
    echo "$RC" > "rc-$p.txt"
    [ "$RC" = 0 ] || error "udamon record --paddr --ops $p exited $RC: $(tail -n 3 "$p.err" | tr '\n' ' ')"
    "$UD" report raw "$p.udr" > "$p.raw.jsonl" 2> "$p.raw.err"
    "$UD" report wss "$p.udr" --json > "$p.wss.json" 2>&1
done
ran
