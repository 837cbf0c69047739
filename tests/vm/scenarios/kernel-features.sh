# budget: 240
# kernel-features: kernel DAMON's 6.17-7.2 features as udamon drives them,
# each read back from the kernel's own files (docs/schemes.md, "Kernel
# DAMON 6.15 to 7.3"). On a process holding 256 MiB (16 MiB hot):
#  1. `udamon apply --ops kdamond` of a scheme file with weighted dests
#     (6.17: hot memory interleaved 1:1 over nodes 0 and 1), a fail charge
#     ratio (7.2), max_nr_snapshots (7.0) and goals on active_mem_bp,
#     inactive_mem_bp (7.0) and node_memcg_used_bp (6.19); the kernel's
#     files (dests/, quotas/, stats/, refresh_ms) are read while it runs,
#     twice, with whether udamon's trace instance takes the per-scheme
#     statistics tracepoint (7.0); hold reports where its hot pages are.
#     Kernel DAMON publishes
#     no goal's current value, so each goal is set to be met once the
#     kernel measures 0.01%: its scheme then stops (the temporal tuner),
#     which check.py compares with /proc/meminfo's LRU lists.
#  2. node_eligible_mem_bp (7.2, paddr only): `udamon apply --paddr` with
#     such a goal (met at 0.01% of idle memory on node 0), and its refusal
#     on a process.
#  3. pause and resume (7.2) through the service: `udamon ctl pause JOB`,
#     the context's pause file and the kdamond's pid read, nr_snapshots
#     standing still, `udamon ctl resume JOB`, it moving again.
#  4. DAMON_STAT (6.17), where the kernel has the module: enabled here (the
#     guest boots with it off; it runs alone, so after the kdamonds above
#     are gone), then `udamon damon-stat --json`, the metrics of a service
#     whose job is a simulation, and the module's files read in one go,
#     twice.
# check.py judges the figures.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
have_two_nodes
need_flag "schemes check" --damo
need_flag "ctl pause" --socket
admin=/sys/kernel/mm/damon/admin/kdamonds
ctx=$admin/0/contexts/0
loopback_up

cat > features.toml <<'EOF'
# 0: hot memory interleaved 1:1 over nodes 0 and 1 (dests, 6.17), a failed
# migration charging the quota a quarter of its size (7.2)
[[scheme]]
action = "migrate_hot"
access_pattern = { sz = ["4K", "max"], freq = ["10%", "max"], age = ["0s", "max"] }
dests = [{ node = 0, weight = 1 }, { node = 1, weight = 1 }]

[scheme.quota]
size = "256M"
reset_interval = "1s"
fail_charge = "1/4"

# 1: stops after 5 passes (max_nr_snapshots, 7.0)
[[scheme]]
action = "stat"
max_nr_snapshots = 5

# 2-4: goals met as soon as the kernel measures 0.01% (the temporal tuner
# then stops the scheme): the active and the inactive LRU lists (7.0), the
# root cgroup's share of node 0 (6.19)
[[scheme]]
action = "stat"

[scheme.quota]
size = "1G"
reset_interval = "1s"
goal_tuner = "temporal"

[[scheme.quota.goals]]
metric = "active_mem_bp"
target = 1

[[scheme]]
action = "stat"

[scheme.quota]
size = "1G"
reset_interval = "1s"
goal_tuner = "temporal"

[[scheme.quota.goals]]
metric = "inactive_mem_bp"
target = 1

[[scheme]]
action = "stat"

[scheme.quota]
size = "1G"
reset_interval = "1s"
goal_tuner = "temporal"

[[scheme.quota.goals]]
metric = "node_memcg_used_bp"
target = 1
nid = 0
path = "/"

# 5, 6: the fail charge ratio's effect (7.2): migrating cold memory to node
# 0, where it is, moves nothing (the kernel skips a folio already on its
# node), so every try fails; charged a quarter of it, scheme 6 tries up to
# four times what scheme 5 does under the same quota
[[scheme]]
action = "migrate_cold"
access_pattern = { sz = ["4K", "max"], freq = ["0%", "0%"], age = ["1s", "max"] }
dests = [{ node = 0, weight = 1 }]

[scheme.quota]
size = "32M"
reset_interval = "1s"

[[scheme]]
action = "migrate_cold"
access_pattern = { sz = ["4K", "max"], freq = ["0%", "0%"], age = ["1s", "max"] }
dests = [{ node = 0, weight = 1 }]

[scheme.quota]
size = "32M"
reset_interval = "1s"
fail_charge = "1/4"
EOF
"$UD" schemes check features.toml > features.check 2>&1 || error "schemes check: $(tail -n 2 features.check)"

# sread FILE: a DAMON sysfs file that may be empty (a goal's path); its
# reads fail (EBUSY) while DAMON's sysfs lock is held, so they are retried
sread() {
    i=0
    while [ $i -lt 40 ]; do
        v=$(cat "$1" 2>/dev/null) && { echo "$v"; return; }
        [ -e "$1" ] || return
        i=$((i + 1))
        sleep 0.05
    done
}

# dump_schemes FILE: every file of every scheme the run's kdamond has
dump_schemes() {
    {
        echo "refresh_ms=$(sread $admin/0/refresh_ms)"
        for e in /sys/kernel/tracing/instances/udamon-*/events/damon/damos_stat_after_apply_interval/enable; do
            [ -e "$e" ] && echo "stat_event=$(cat "$e")"
        done
        echo "pause=$(sread $ctx/pause)"
        echo "kdamond_pid=$(sread $admin/0/pid)"
        for s in $ctx/schemes/[0-9]*; do
            i=${s##*/}
            for f in action dests/nr_dests quotas/fail_charge_num quotas/fail_charge_denom \
                quotas/goal_tuner quotas/goals/nr_goals quotas/effective_bytes stats/nr_tried \
                stats/sz_tried stats/sz_applied stats/qt_exceeds stats/nr_snapshots stats/max_nr_snapshots; do
                echo "s$i.$f=$(sread "$s/$f")"
            done
            for d in $s/dests/[0-9]*; do
                [ -d "$d" ] || continue
                echo "s$i.dest.${d##*/}=$(sread "$d/id"):$(sread "$d/weight")"
            done
            for g in $s/quotas/goals/[0-9]*; do
                [ -d "$g" ] || continue
                j=${g##*/}
                for f in target_metric target_value current_value nid path; do
                    echo "s$i.goal.$j.$f=$(sread "$g/$f")"
                done
            done
        done
    } > "$1"
}

# the per-scheme statistics tracepoint (7.0), its format as this kernel has it
for t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
    f=$t/events/damon/damos_stat_after_apply_interval/format
    [ -e $f ] && { cat $f > tp-format.txt; break; }
done

# 1. schemes on vaddr. NUMA balancing would move the hot pages on node 1
# back to the CPUs' node 0: off for this scenario.
nb=$(cat /proc/sys/kernel/numa_balancing 2>/dev/null)
[ -n "$nb" ] && echo 0 > /proc/sys/kernel/numa_balancing
start_workload hold.log hold 256 16 10
wait_ready hold.log "$WL_PID" 120
proc_snapshot "$WL_PID" before
"$UD" apply features.toml --ops kdamond --pid "$WL_PID" --duration 30s -o apply.udr --json \
    > apply.out 2> apply.err &
APPLY=$!
BG_PIDS="$BG_PIDS $APPLY"
sleep 12
dump_schemes sysfs-1.txt
grep -E '^(Active|Inactive):' /proc/meminfo > lru-1.txt
sleep 6
dump_schemes sysfs-2.txt
grep -E '^(Active|Inactive):' /proc/meminfo > lru-2.txt
wait "$APPLY"
echo "$?" > apply.rc
hold_report "$WL_PID" hold.log
proc_snapshot "$WL_PID" after
[ -n "$nb" ] && echo "$nb" > /proc/sys/kernel/numa_balancing
log "apply exit $(cat apply.rc)"

# 2. node_eligible_mem_bp on the physical space
cat > eligible.toml <<'EOF'
[[scheme]]
action = "stat"
access_pattern = { sz = ["4K", "max"], freq = ["0%", "0%"], age = ["1s", "max"] }

[scheme.quota]
size = "1G"
reset_interval = "1s"
goal_tuner = "temporal"

[[scheme.quota.goals]]
metric = "node_eligible_mem_bp"
target = 1
nid = 0

EOF
"$UD" apply eligible.toml --ops kdamond --paddr --duration 20s --json > eligible.out 2> eligible.err &
ELIG=$!
BG_PIDS="$BG_PIDS $ELIG"
sleep 7
dump_schemes sysfs-eligible.txt
sleep 4
dump_schemes sysfs-eligible-2.txt
wait "$ELIG"
echo "$?" > eligible.rc
# udamon refuses it off paddr, before writing anything
"$UD" apply eligible.toml --ops kdamond --pid "$WL_PID" --duration 2s > eligible-vaddr.out 2>&1
echo "$?" > eligible-vaddr.rc

# 3. pause and resume through the service; 4. DAMON_STAT beside it
PORT=9791
SOCK=/tmp/udamon-kf.sock
cat > svc.toml <<EOF
listen = "127.0.0.1:$PORT"
socket = "$SOCK"

[[jobs]]
name = "kf"
target = { pid = $WL_PID }
ops = "kdamond"
schemes = [ { inline = "4K max 0 max 0s max stat" } ]
EOF
"$UD" run svc.toml > svc.out 2> svc.err &
SVC=$!
BG_PIDS="$BG_PIDS $SVC"
n=0
until [ -d $ctx/schemes/0 ] && [ "$(kread $admin/0/state)" = on ]; do
    n=$((n + 1)); [ $n -gt 100 ] && error "the service's kdamond did not start: $(tail -n 3 svc.err | tr '\n' ' ')"
    sleep 0.2
done
sleep 4
dump_schemes sysfs-running.txt
run_timed pause "$UD" ctl --socket "$SOCK" pause kf
echo "$RC" > pause.rc
# the statistics files lag by up to refresh_ms (1 s)
sleep 2
dump_schemes sysfs-paused-1.txt
sleep 4
dump_schemes sysfs-paused-2.txt
"$UD" ctl --socket "$SOCK" status --json > status-paused.json 2>&1
run_timed resume "$UD" ctl --socket "$SOCK" resume kf
echo "$RC" > resume.rc
sleep 4
dump_schemes sysfs-resumed.txt
"$UD" ctl --socket "$SOCK" pause nosuchjob > pause-unknown.out 2>&1
echo "$?" > pause-unknown.rc

kill -TERM "$SVC"
wait "$SVC"
echo "$?" > svc.rc

# DAMON_STAT runs alone (another kdamond makes it fail with EBUSY, and it
# makes theirs fail): with udamon's kdamonds gone, enabled for this step
# only, and read by a service whose job is a simulation (no kdamond).
stat=/sys/module/damon_stat/parameters
# stat_files: the module's parameters as "name=value" lines
stat_files() {
    for f in enabled estimated_memory_bandwidth memory_idle_ms_percentiles aggr_interval_us kdamond_pid; do
        [ -e $stat/$f ] && echo "$f=$(cat $stat/$f)"
    done
}
if [ -d $stat ]; then
    cat > tiny.toml <<'EOF2'
name = "tiny"
duration = "10m"
seed = 1
[[layout]]
object = "a"
size = "64M"
[[phase]]
duration = "10m"
[[phase.access]]
object = "a"
rate = 100
EOF2
    cat > svc2.toml <<EOF2
listen = "127.0.0.1:$PORT"
socket = "$SOCK"

[[jobs]]
name = "sim"
target = { sim = "$OUT/tiny.toml" }
EOF2
    echo Y > $stat/enabled || error "cannot enable DAMON_STAT: $(cat $stat/enabled)"
    "$UD" run svc2.toml > svc2.out 2> svc2.err &
    SVC2=$!
    BG_PIDS="$BG_PIDS $SVC2"
    sleep 12
    for k in 1 2; do
        # the module's files, udamon's reading and the service's scrape
        # in one go: the module refreshes at most every 5 s, so the same
        # files before and after mean all three saw one state
        stat_files > stat-files-$k-a.txt
        "$UD" damon-stat --json > damon-stat-$k.json 2> damon-stat-$k.err
        get_metrics > metrics-$k.txt
        stat_files > stat-files-$k-b.txt
        "$UD" damon-stat > damon-stat-$k.txt 2>&1
        sleep 6
    done
    kill -TERM "$SVC2"
    wait "$SVC2"
    echo N > $stat/enabled
else
    echo "no damon_stat module" > stat-absent.txt
    "$UD" damon-stat > damon-stat-absent.txt 2>&1
    echo "$?" > damon-stat-absent.rc
fi
kdamonds_sysfs kdamonds-after.txt
ran
