# budget: 200
# trace-cost: what kernel DAMON's pageout gets done per kdamond CPU-second
# with udamon's damon_aggregated tracepoint on (snapshots from the trace, the
# default) and off (tracefs unmounted: tried-regions snapshots instead), on
# the same fresh workload each time: 256 MiB, 16 MiB of it hot.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
have_swap
need_flag apply --ops
echo "4K max  0 0  5s max  pageout" > prcl.txt
one() {
    tag=$1
    start_workload "hold-$tag.log" hold 256 16 100
    wait_ready "hold-$tag.log" "$WL_PID" 120
    watch_kdamonds "kdamond-$tag.txt"
    run_timed "$tag" "$UD" apply prcl.txt --ops kdamond --pid "$WL_PID" --duration 20s --json
    stop_watch
    grep VmSwap "/proc/$WL_PID/status" > "swap-$tag.txt"
    kill -9 "$WL_PID"; wait "$WL_PID" 2>/dev/null
    [ "$RC" = 0 ] || error "udamon apply ($tag) exited $RC: $(tail -n 3 "$tag.err" | tr '\n' ' ')"
    sleep 2
}
one trace
# tracefs is also reachable through debugfs (an automount): hide both.
umount /sys/kernel/tracing || error "cannot unmount tracefs"
umount /sys/kernel/debug/tracing 2>/dev/null
debugfs=no
if grep -q ' /sys/kernel/debug ' /proc/mounts; then
    umount /sys/kernel/debug && debugfs=yes
fi
one notrace
mount -t tracefs tracefs /sys/kernel/tracing
[ $debugfs = yes ] && mount -t debugfs debugfs /sys/kernel/debug
ran
