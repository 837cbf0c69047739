# budget: 600
# memory: 6G
# softdirty-size: what soft-dirty monitoring costs as the target grows, at
# the same region count. For an eight_objects of 256 MiB, then one of 4 GiB
# (base pages, nothp; NUMA balancing off, whose hinting faults would swamp
# the faults monitoring causes): 5 s unmonitored; 8 s each of
# `udamon record` on the other paths the kernel has (kdamond, idle); the
# time of one clear_refs write (the whole-process reset soft-dirty does at
# every sample; 20 writes timed); 8 s of `--ops softdirty` and 8 s of
# `--ops softdirty --softdirty-reset auto`. All held at 16 regions;
# udamon's CPU and the target's minor faults around each.
. /scenarios/lib.sh "$@"
need_flag record --ops
[ "$(feature soft_dirty)" = true ] || skip "no soft-dirty: $(feature_detail soft_dirty)"
# Soft-dirty last: its resets write-protect the target's pages, which
# then fault once each when next written, whatever monitors them then.
paths=
[ -z "$(kdamond_unavailable)" ] && paths="$paths kdamond"
[ "$(feature idle_page_bitmap)" = true ] && paths="$paths idle"
paths="$paths softdirty softdirty-auto"
echo "$paths" > paths.txt
minflt() { read -r st < "/proc/$WL_PID/stat"; set -- ${st#*) }; echo "$8"; }
echo 0 > /proc/sys/kernel/numa_balancing 2>/dev/null
for mib in 32 512; do
    sz=$((mib * 8))
    start_workload "wl-$sz.log" eight_objects "$mib" 2 8 nothp
    wait_ready "wl-$sz.log" "$WL_PID" 300
    echo "$sz" >> sizes.txt
    grep -E '^(VmRSS|RssAnon)' "/proc/$WL_PID/status" > "status-$sz.txt"
    f0=$(minflt); sleep 5; echo "$f0 $(minflt)" > "faults-none-$sz.txt"
    for p in $paths; do
        tag=$p-$sz
        if [ "$p" = softdirty ]; then
            time -f "%e %U %S" -o "clear-$sz.txt" sh -c "i=0; while [ \$i -lt 20 ]; do echo 4 > /proc/$WL_PID/clear_refs; i=\$((i + 1)); done"
            log "clear_refs x20 at $sz MiB: $(cat "clear-$sz.txt") (wall user sys)"
        fi
        f0=$(minflt)
        watch_kdamonds "kdamond-$tag.txt"
        case $p in
            softdirty-auto) set -- --ops softdirty --softdirty-reset auto ;;
            *) set -- --ops "$p" ;;
        esac
        run_timed "$tag" "$UD" record "$@" --pid "$WL_PID" -o "$tag.udr" --duration 8s --json --min-regions 16 --max-regions 16
        stop_watch
        echo "$f0 $(minflt)" > "faults-$tag.txt"
        echo "$RC" > "rc-$tag.txt"
        kill -0 "$WL_PID" 2>/dev/null || error "the workload died during $tag"
    done
    kill "$WL_PID"; wait "$WL_PID" 2>/dev/null
    rm -f ./*.udr
done
ran
