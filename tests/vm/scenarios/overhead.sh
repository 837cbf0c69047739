# budget: 480
# overhead: udamon's CPU time per second of monitoring, for each monitoring
# path the kernel offers, on one eight-objects workload, at default
# attributes and at 1,000 regions; the idle path also with io_uring turned
# off (UDAMON_IO_URING=0) and at 100 regions (does it keep 5 ms samples?);
# for kdamond also the kernel thread's CPU time; for every run (and for no
# monitoring at all) the minor faults the workload takes meanwhile (soft-dirty
# makes it fault on its first write to each page after every sample) and its
# own speed (pages written per second, read with SIGUSR1).
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
secs=12
# minflt: field 10 of /proc/PID/stat
minflt() { read -r st < "/proc/$WL_PID/stat"; set -- ${st#*) }; echo "$8"; }
# touches: "PAGES MONO_US", the workload's pages written so far (SIGUSR1)
touches() {
    n0=$(grep -c '^touches ' wl.log); kill -USR1 "$WL_PID"; i=0
    while [ "$(grep -c '^touches ' wl.log)" = "$n0" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    grep '^touches ' wl.log | tail -n 1 | sed 's/^touches \([0-9]*\) mono_us=\([0-9]*\).*/\1 \2/'
}
# unmonitored: 20 s, every object at least twice
f0=$(minflt); t0=$(touches); sleep 20
echo "$f0 $(minflt)" > faults-none.txt; echo "$t0 $(touches)" > touches-none.txt; echo 20 > none-duration.txt
# measure TAG OPS [ARGS...]: one record; TAG=idle-sync turns io_uring off
measure() {
    tag=$1 ops=$2; shift 2
    echo "$tag" >> runs.txt
    f0=$(minflt); t0=$(touches)
    watch_kdamonds "kdamond-$tag.txt"
    case $tag in
        *-sync*) run_timed "$tag" env UDAMON_IO_URING=0 "$UD" record --ops "$ops" --pid "$WL_PID" -o "$tag.udr" --duration "${secs}s" --json "$@" ;;
        *) run_timed "$tag" "$UD" record --ops "$ops" --pid "$WL_PID" -o "$tag.udr" --duration "${secs}s" --json "$@" ;;
    esac
    stop_watch
    echo "$f0 $(minflt)" > "faults-$tag.txt"; echo "$t0 $(touches)" > "touches-$tag.txt"
    echo "$RC" > "rc-$tag.txt"
    if [ "$RC" = 0 ]; then
        "$UD" report raw "$tag.udr" > "$tag.raw.jsonl" 2> "$tag.raw.err"
    fi
    kill -0 "$WL_PID" 2>/dev/null || error "the workload died during $tag"
}
for p in $paths; do measure "$p" "$p"; done
case " $paths " in *" softdirty "*)
    measure softdirty-auto softdirty --softdirty-reset auto ;;
esac
case " $paths " in *" idle "*)
    measure idle-sync idle
    # can the idle path keep a 5 ms sampling interval at 100 regions?
    measure idle-100 idle --min-regions 100
    measure idle-sync-100 idle --min-regions 100 ;;
esac
for p in $paths; do measure "$p-1000" "$p" --min-regions 1000; done
# unmonitored again at the end, for the workload's speed (TCG's drifts)
t0=$(touches); sleep 20; echo "$t0 $(touches)" > touches-none-end.txt
echo "$secs" > duration.txt
ran
