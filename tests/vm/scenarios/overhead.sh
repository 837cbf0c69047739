# budget: 330
# overhead: udamon's CPU time per second of monitoring, default attributes,
# for each monitoring path the kernel offers, on one eight-objects workload;
# for kdamond also the kernel thread's CPU time; for every path (and for no
# monitoring at all) the minor faults the workload takes meanwhile (soft-dirty
# makes it fault on its first write to each page after every sample).
. /scenarios/lib.sh "$@"
need_flag record --ops
need_flag record --pid
paths=
why=$(kdamond_unavailable)
if [ -z "$why" ]; then paths="$paths kdamond"
else echo "kdamond: $why" >> unavailable.txt; fi
if [ -e /sys/kernel/mm/page_idle/bitmap ]; then paths="$paths idle"
else echo "idle: no /sys/kernel/mm/page_idle/bitmap (CONFIG_IDLE_PAGE_TRACKING)" >> unavailable.txt; fi
if [ "$(feature soft_dirty)" = true ]; then paths="$paths softdirty"
else echo "softdirty: $(feature_detail soft_dirty)" >> unavailable.txt; fi
[ -n "$paths" ] || skip "no monitoring path available: $(cat unavailable.txt | tr '\n' ' ')"
echo $paths > paths.txt
start_workload wl.log eight_objects 64 2
wait_ready wl.log "$WL_PID" 180
secs=20
# minflt: field 10 of /proc/PID/stat
minflt() { read -r st < "/proc/$WL_PID/stat"; set -- ${st#*) }; echo "$8"; }
f0=$(minflt); sleep "$secs"; echo "$f0 $(minflt)" > faults-none.txt
for p in $paths; do
    f0=$(minflt)
    watch_kdamonds "kdamond-$p.txt"
    run_timed "$p" "$UD" record --ops "$p" --pid "$WL_PID" -o "$p.udr" --duration "${secs}s" --json
    stop_watch
    echo "$f0 $(minflt)" > "faults-$p.txt"
    echo "$RC" > "rc-$p.txt"
    if [ "$RC" = 0 ]; then
        "$UD" report raw "$p.udr" > "$p.raw.jsonl" 2> "$p.raw.err"
    fi
    kill -0 "$WL_PID" 2>/dev/null || error "the workload died during $p"
done
echo "$secs" > duration.txt
ran
