# budget: 560
# tiering: where a shifting hot set lives under three placements, on the
# same program in the same guest. `tiershift` maps 9 x 96 MiB, six objects
# preferring node 0 (cold, read one page in 64 every 10 s) and three
# preferring node 1; each of its three 28 s hot periods writes one of the
# node-1 objects without pause, and every second it logs the share of the
# current hot object's pages on node 0 (move_pages) and both nodes' free
# memory. Runs, one after another, each on a fresh tiershift:
#   none    numa_balancing 0, demotion_enabled false: nothing moves
#   numab2  numa_balancing 2 (NUMA balancing's tiering mode), demotion on,
#           zone_reclaim_mode 7: the kernel's own tiering
#   udamon  numa_balancing 0, demotion off; `udamon run` of a job with
#           target "paddr", ops "kdamond" and the tiering preset
#           (migrate_cold to node 1, migrate_hot to node 0), metrics
#           scraped every 5 s; SIGTERM at the end
#   engine  (only where the kernel has the idle page bitmap) the same
#           preset on udamon's own engine: target { comm = "tiershift" },
#           ops "idle", pages moved with move_pages; its files carry
#           "-engine" where the udamon run's have none
# /proc/vmstat's pgpromote/pgdemote/pgmigrate counters are kept before and
# after each run, and the kernel log is searched for the OOM killer. Under
# TCG both nodes are equally fast: this judges placement, not speed.
# SKIPs with one memory tier, or without kernel DAMON paddr and
# migrate_hot/migrate_cold (Linux 6.11+, CONFIG_DAMON_PADDR).
. /scenarios/lib.sh "$@"
have_two_nodes

# the workload's shape: MiB per object, objects, objects on node 0, period
# (s), periods
OBJ_MIB=96 NOBJ=9 ON0=6 PERIOD=28 NPERIODS=3
echo "obj_mib=$OBJ_MIB nobj=$NOBJ on_node0=$ON0 period_s=$PERIOD periods=$NPERIODS" > shape.txt

ntiers=0
for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
    [ -n "$(cat "$t/nodelist" 2>/dev/null)" ] && ntiers=$((ntiers + 1))
done
ls /sys/devices/virtual/memory_tiering/ > tiers.txt 2>&1
[ "$ntiers" -ge 2 ] || skip "the guest has $ntiers memory tier(s): node 1 is not a slower tier (tests/vm/run --no-tiers, or no HMAT), so there is nothing to tier"
[ -d /sys/kernel/mm/damon/admin ] || skip "no /sys/kernel/mm/damon/admin: kernel built without CONFIG_DAMON_SYSFS"
feature_detail damon_operations | grep -qw paddr ||
    skip "kernel DAMON has no paddr operations set (CONFIG_DAMON_PADDR): $(feature_detail damon_operations)"
[ "$(feature damon_migrate_actions)" = true ] ||
    skip "kernel DAMON has no migrate_hot/migrate_cold (target_nid, Linux 6.11+): $(feature_detail damon_migrate_actions)"
need_flag run --check

"$UD" topology > udamon-topology.txt 2>&1
"$UD" topology --json > udamon-topology.json 2> udamon-topology.err
"$UD" topology --tiering-schemes tiering-schemes.toml > tiering-schemes.out 2>&1
echo "tiering_schemes_rc=$?" > tiering-schemes.rc

admin=/sys/kernel/mm/damon/admin
kdamond_of_scrape() { echo "kdamond_pid=$(kread $admin/kdamonds/0/pid)"; }
tracing=/sys/kernel/tracing
[ -d $tracing/instances ] || tracing=/sys/kernel/debug/tracing
PORT=9788
SOCK=/tmp/udamon-tier.sock
loopback_up
kdamond_threads() {
    for d in /proc/[0-9]*; do
        read -r c 2>/dev/null < "$d/comm" || continue
        case $c in kdamond*) echo "${d#/proc/}:$c" ;; esac
    done | tr '\n' ' '
}
vmstat_items() {
    grep -E '^(pgpromote|pgdemote|pgmigrate|numa_|pswpout|pswpin|oom_kill|pgsteal_kswapd|pgsteal_direct)' /proc/vmstat
}
nodes_free() {
    for n in 0 1; do
        echo "node$n.free_kb=$(awk '/MemFree/ {print $4}' /sys/devices/system/node/node$n/meminfo)"
    done
}
set_sys() {
    # set_sys FILE VALUE: writes it when the file exists; notes what took
    if [ -e "$1" ]; then
        echo "$2" > "$1" 2>/dev/null || echo "write $2 > $1 failed" >&2
    fi
}
policy() {
    case $1 in
        numab2)
            set_sys /proc/sys/kernel/numa_balancing 2
            set_sys /sys/kernel/mm/numa/demotion_enabled 1
            set_sys /proc/sys/vm/zone_reclaim_mode 7
            ;;
        *)
            set_sys /proc/sys/kernel/numa_balancing 0
            set_sys /sys/kernel/mm/numa/demotion_enabled false
            set_sys /proc/sys/vm/zone_reclaim_mode 0
            ;;
    esac
    {
        echo "numa_balancing=$(cat /proc/sys/kernel/numa_balancing 2>/dev/null)"
        echo "demotion_enabled=$(cat /sys/kernel/mm/numa/demotion_enabled 2>/dev/null)"
        echo "zone_reclaim_mode=$(cat /proc/sys/vm/zone_reclaim_mode 2>/dev/null || echo absent)"
        echo "promote_rate_limit_MBps=$(cat /proc/sys/kernel/numa_balancing_promote_rate_limit_MBps 2>/dev/null || echo absent)"
    }
}

dmesg > dmesg-start.txt 2>&1

# run_tiershift RUN: the workload under the current policy, to its end
run_tiershift() {
    r=$1
    start_workload "wl-$r.log" tiershift $OBJ_MIB $NOBJ $ON0 $PERIOD $NPERIODS
    echo "$WL_PID" > "wl-$r.pid"
    wait_ready "wl-$r.log" "$WL_PID" 120
    echo "ready_uptime=$(up)" >> "run-$r.txt"
    limit=$((PERIOD * NPERIODS + 60))
    n=0
    while kill -0 "$WL_PID" 2>/dev/null && [ $n -lt $((limit * 2)) ]; do
        sleep 0.5
        n=$((n + 1))
        [ $((n % 20)) = 0 ] && cat "/proc/$WL_PID/numa_maps" > "numa_maps-$r.txt" 2>/dev/null
    done
    if kill -0 "$WL_PID" 2>/dev/null; then
        echo "workload=timeout" >> "run-$r.txt"
        kill -9 "$WL_PID" 2>/dev/null
    fi
    wait "$WL_PID" 2>/dev/null
    echo "workload_rc=$?" >> "run-$r.txt"
    echo "end_uptime=$(up)" >> "run-$r.txt"
    log "$r: $(grep -c '^tick' "wl-$r.log") ticks; last: $(grep '^tick' "wl-$r.log" | tail -n 1)"
}

runs="none numab2 udamon"
[ -e /sys/kernel/mm/page_idle/bitmap ] && runs="$runs engine"
echo "runs=$runs" >> shape.txt
for r in $runs; do
    # the service runs' files: the udamon run's as they always were, the
    # engine run's with a suffix
    case $r in udamon) sfx= ;; engine) sfx=-engine ;; *) sfx=none ;; esac
    log "run $r"
    policy "$r" > "run-$r.txt" 2> "policy-$r.err"
    {
        echo "start_uptime=$(up)"
        nodes_free | sed 's/^/before./'
        echo "kdamonds_before=$(kdamond_threads)"
    } >> "run-$r.txt"
    vmstat_items > "vmstat-$r-before.txt"
    dmesg > "dmesg-$r-before.txt" 2>&1
    SVC=
    if [ "$sfx" != none ]; then
        if [ "$r" = udamon ]; then
            cat > "tier$sfx.toml" <<EOF
listen = "127.0.0.1:$PORT"
socket = "$SOCK"

[[jobs]]
name = "tiering"
target = "paddr"
ops = "kdamond"
schemes = [{ preset = "tiering" }]
EOF
        else
            # the workload starts after the service: the job follows
            # processes of that name as they come
            cat > "tier$sfx.toml" <<EOF
listen = "127.0.0.1:$PORT"
socket = "$SOCK"

[[jobs]]
name = "tiering"
target = { comm = "tiershift" }
ops = "idle"
schemes = [{ preset = "tiering" }]
EOF
        fi
        "$UD" run --check "tier$sfx.toml" > "check$sfx.txt" 2> "check$sfx.err"
        echo "check_rc=$?" >> "run-$r.txt"
        "$UD" run --check --json "tier$sfx.toml" > "check$sfx.json" 2>> "check$sfx.err"
        "$UD" run "tier$sfx.toml" > "svc$sfx.out" 2> "svc$sfx.err" &
        SVC=$!
        BG_PIDS="$BG_PIDS $SVC"
        echo "svc_pid=$SVC" >> "run-$r.txt"
        n=0 up_ok=
        while [ $n -lt 120 ]; do
            kill -0 "$SVC" 2>/dev/null || break
            "$UD" ctl --socket "$SOCK" status --json > "status-start$sfx.json" 2> "status-start$sfx.err"
            # a process set's job is up once the service answers for it
            # (its sessions come with the processes)
            if [ "$r" = engine ]; then
                grep -q '"name": "tiering"' "status-start$sfx.json" && { up_ok=1; break; }
            else
                grep -q '"state": "running"' "status-start$sfx.json" && { up_ok=1; break; }
            fi
            n=$((n + 1))
            sleep 0.5
        done
        echo "svc_up=${up_ok:-no} svc_up_uptime=$(up)" >> "run-$r.txt"
        if [ -z "$up_ok" ]; then
            log "udamon run did not come up: $(tail -n 3 "svc$sfx.err" | tr '\n' ' ')"
        elif [ "$r" = engine ]; then
            scrape_every 5 "metrics$sfx.txt"
        else
            # the schemes as kernel DAMON holds them
            for s in "$admin"/kdamonds/0/contexts/0/schemes/[0-9]*; do
                echo "${s##*/} action=$(kread "$s/action") target_nid=$(kread "$s/target_nid" 2>/dev/null)" \
                    "filters=$(ls "$s/filters" "$s/core_filters" "$s/ops_filters" 2>/dev/null | tr '\n' ' ')"
            done > damon-schemes.txt
            scrape_every 5 metrics.txt kdamond_of_scrape
            watch_kdamonds kdamond.txt
        fi
    fi
    run_tiershift "$r"
    vmstat_items > "vmstat-$r-after.txt"
    dmesg > "dmesg-$r-after.txt" 2>&1
    {
        nodes_free | sed 's/^/after./'
        echo "oom_lines=$(grep -ciE 'out of memory|invoked oom-killer|oom-kill:' "dmesg-$r-after.txt")"
        echo "oom_lines_before=$(grep -ciE 'out of memory|invoked oom-killer|oom-kill:' "dmesg-$r-before.txt")"
    } >> "run-$r.txt"
    if [ -n "$SVC" ]; then
        if [ -n "$up_ok" ]; then
            { echo "# scrape $(up) $(kdamond_of_scrape)"; get_metrics; } > "metrics-last$sfx.txt"
            "$UD" ctl --socket "$SOCK" status --json > "status-end$sfx.json" 2> "status-end$sfx.err"
            "$UD" ctl --socket "$SOCK" status > "status-end$sfx.txt" 2>&1
            touch .stop-scrape
            wait "$SCRAPER" 2>/dev/null
            if [ "$r" = udamon ]; then stop_watch; fi
        fi
        { echo "nr_kdamonds_before=$(kread $admin/kdamonds/nr_kdamonds)"; echo "threads_before=$(kdamond_threads)"; } > "term$sfx.txt"
        # a watchdog: what udamon's threads and the kdamond are doing 20 s
        # after SIGTERM if udamon has not exited yet, SIGKILL after 120 s.
        # Stopping waits for the kdamond's apply pass in progress (the final
        # statistics and turning it off both do), and under TCG a pass that
        # migrates up to the 200 MiB quota once took over 70 s.
        KD=$(kread $admin/kdamonds/0/pid)
        (
            sleep 20
            kill -0 "$SVC" 2>/dev/null || exit 0
            {
                echo "## $(up): udamon $SVC still running 20 s after SIGTERM"
                for t in /proc/"$SVC"/task/*; do
                    echo "# task ${t##*/} comm=$(cat "$t/comm" 2>/dev/null) state=$(sed 's/.*) //' "$t/stat" 2>/dev/null | cut -d' ' -f1) wchan=$(cat "$t/wchan" 2>/dev/null) syscall=$(cat "$t/syscall" 2>/dev/null)"
                    cat "$t/stack" 2>/dev/null
                done
                echo "## kdamond $KD: state $(kread $admin/kdamonds/0/state) comm=$(cat /proc/$KD/comm 2>/dev/null) wchan=$(cat /proc/$KD/wchan 2>/dev/null)"
                cat "/proc/$KD/stack" 2>/dev/null
                ls -l /proc/"$SVC"/fd 2>/dev/null
            } > "term-diag$sfx.txt" 2>&1
            sleep 100
            kill -9 "$SVC" 2>/dev/null && echo "killed=yes" >> "term$sfx.txt"
        ) &
        WD=$!
        t0=$(up)
        kill -TERM "$SVC" 2>/dev/null
        wait "$SVC"
        rc=$?
        t1=$(up)
        kill "$WD" 2>/dev/null
        sleep 1
        {
            echo "rc=$rc"
            echo "seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
            echo "nr_kdamonds=$(kread $admin/kdamonds/nr_kdamonds)"
            echo "threads=$(kdamond_threads)"
            echo "claim=$([ -e /run/udamon/kdamond.claim ] && echo yes || echo no)"
            echo "instances=$(ls $tracing/instances 2>/dev/null | grep '^udamon-' | tr '\n' ' ')"
        } >> "term$sfx.txt"
        log "SIGTERM: $(tr '\n' ' ' < "term$sfx.txt")"
        if grep -q '^killed=yes' "term$sfx.txt" || [ "$(kread $admin/kdamonds/nr_kdamonds)" != 0 ]; then
            # leave the guest clean for whatever runs next in it
            "$UD" cleanup --json > "cleanup$sfx.json" 2> "cleanup$sfx.err"
            echo "cleanup_rc=$? nr_kdamonds_after_cleanup=$(kread $admin/kdamonds/nr_kdamonds)" >> "cleanup$sfx.txt"
        fi
    fi
    policy none > "policy-after-$r.txt" 2>> "policy-$r.err"
done
dmesg > dmesg-end.txt 2>&1
ran
