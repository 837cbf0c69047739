# budget: 420
# program-service: the service's process set on one kdamond. `forker 16`
# (a parent and sixteen workers, all with comm "forker"; 32 MiB of hot sets
# and 128 MiB of cold ones in all) runs throughout. Two runs of `udamon run`,
# each with one job on kernel DAMON at the same region budget (min_regions
# = max_regions = 100) and no schemes:
#   set:    target = { comm = "forker" }   (17 processes)
#   single: target = { pid = W }           (one of the workers)
# Each: the job waits to see its targets in DAMON's sysfs (at most 60 s),
# 5 s to settle, then 40 s measured: the service's CPU (utime+stime of its
# whole thread group from /proc) and the kdamond threads' (from /proc), at
# the start and the end of the 40 s, the metrics at both ends; then `udamon
# ctl status --json` and text, DAMON's sysfs (kdamonds, contexts, targets),
# SIGTERM. A third run, "two", has two jobs needing different attributes
# in one service: the set (5 ms / 100 ms, 100 regions) and physical memory
# (paddr; 20 ms / 400 ms, 10-200 regions). Each should get a kdamond of its
# own; once both run, a reload adds a third job (ops auto, one worker) that
# finds no free kdamond and takes udamon's engine; then SIGTERM, after which
# no kdamond and no claim is left.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
need_flag record --children
need_flag run --check
need_flag ctl --socket
loopback_up
PORT=9791
SOCK=/tmp/udamon-prog.sock
REGIONS=100
MEASURE=40

FORKER_TOTAL_HOT_MIB=32 FORKER_TOTAL_COLD_MIB=128 FORKER_LOG="$OUT/forker.log" forker 16 900 > forker.out 2>&1 &
BG_PIDS="$BG_PIDS $!"
forker_ready forker.log 16 180
W=$(forker_workers forker.log | head -n 1)
# every process whose comm is forker (the set the job should find)
comms=
for d in /proc/[0-9]*; do
    read -r c 2>/dev/null < "$d/comm" || continue
    [ "$c" = forker ] && comms="$comms ${d#/proc/}"
done
echo $comms > comm-pids.txt
echo "$W" > single-pid.txt
log "processes named forker: $(echo $comms | wc -w); single: $W"

status_json() { "$UD" ctl --socket "$SOCK" status --json > "$1" 2> "$1.err"; }
# sysfs_targets FILE: the targets of every context of every kdamond, summed
sysfs_targets() { kdamonds_sysfs "$1"; sed -n 's/^kdamond\.[0-9]*\.context\.[0-9]*\.nr_targets=//p' "$1" | awk '{s += $1} END {print s + 0}'; }

# service_run TAG TARGET WANT: a job on TARGET, measured once WANT targets
# show in sysfs (or after 60 s)
service_run() {
    tag=$1 target=$2 want=$3
    cat > "svc-$tag.toml" <<EOF
listen = "127.0.0.1:$PORT"
socket = "$SOCK"

[[jobs]]
name = "$tag"
target = $target
ops = "kdamond"
[jobs.attrs]
min_regions = $REGIONS
max_regions = $REGIONS
EOF
    "$UD" run --check "svc-$tag.toml" > "check-$tag.txt" 2>&1
    echo $? > "check-$tag.rc"
    "$UD" run "svc-$tag.toml" > "svc-$tag.out" 2> "svc-$tag.err" &
    SVC=$!
    BG_PIDS="$BG_PIDS $SVC"
    log "udamon run ($tag): pid $SVC"
    t_start=$(up)
    n=0 seen=0
    while [ $n -lt 120 ]; do
        kill -0 "$SVC" 2>/dev/null || break
        seen=$(sysfs_targets "sysfs-$tag-wait.txt")
        [ "$seen" -ge "$want" ] && break
        sleep 0.5
        n=$((n + 1))
    done
    {
        echo "started=$t_start"
        echo "targets_seen=$seen"
        echo "want=$want"
        echo "waited_s=$(awk -v a="$t_start" -v b="$(up)" 'BEGIN {printf "%.1f", b - a}')"
    } > "wait-$tag.txt"
    log "$tag: $seen targets in sysfs (want $want)"
    kill -0 "$SVC" 2>/dev/null || { echo "alive=no" >> "wait-$tag.txt"; return; }
    sleep 5
    status_json "status-$tag-start.json"
    echo "$(up) $(cpu_ticks "$SVC") $(kdamond_ticks)" > "cpu-$tag.txt"
    get_metrics > "metrics-$tag-0.txt"
    sleep $MEASURE
    echo "$(up) $(cpu_ticks "$SVC") $(kdamond_ticks)" >> "cpu-$tag.txt"
    get_metrics > "metrics-$tag-1.txt"
    status_json "status-$tag.json"
    "$UD" ctl --socket "$SOCK" status > "status-$tag.txt" 2>&1
    sysfs_targets "sysfs-$tag.txt" > /dev/null
    ( sleep 60; kill -9 "$SVC" 2>/dev/null && echo "killed=yes" >> "term-$tag.txt" ) &
    wd=$!
    t0=$(up)
    kill -TERM "$SVC"
    wait "$SVC"
    rc=$?
    kill "$wd" 2>/dev/null
    {
        echo "rc=$rc"
        echo "seconds=$(awk -v a="$t0" -v b="$(up)" 'BEGIN {printf "%.2f", b - a}')"
        echo "nr_kdamonds=$(kread /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds)"
    } >> "term-$tag.txt"
    log "$tag: SIGTERM: $(tr '\n' ' ' < "term-$tag.txt")"
}

service_run set '{ comm = "forker" }' "$(echo $comms | wc -w)"
service_run single "{ pid = $W }" 1

# two jobs with different attributes: a kdamond each
two_config() {
    cat <<EOF
listen = "127.0.0.1:$PORT"
socket = "$SOCK"

[[jobs]]
name = "set"
target = { comm = "forker" }
ops = "kdamond"
[jobs.attrs]
min_regions = $REGIONS
max_regions = $REGIONS

[[jobs]]
name = "ram"
target = "paddr"
ops = "kdamond"
[jobs.attrs]
sample = "20ms"
aggr = "400ms"
min_regions = 10
max_regions = 200
EOF
}
two_config > svc-two.toml
"$UD" run --check svc-two.toml > check-two.txt 2>&1
echo $? > check-two.rc
"$UD" run svc-two.toml > svc-two.out 2> svc-two.err &
SVC=$!
BG_PIDS="$BG_PIDS $SVC"
n=0
while [ $n -lt 120 ]; do
    kill -0 "$SVC" 2>/dev/null || break
    kdamonds_sysfs sysfs-two-wait.txt
    [ "$(grep -c '^kdamond\.[0-9]*\.state=on$' sysfs-two-wait.txt)" -ge 2 ] && break
    sleep 0.5
    n=$((n + 1))
done
sleep 3
kdamonds_sysfs sysfs-two.txt
for k in /sys/kernel/mm/damon/admin/kdamonds/[0-9]*; do
    [ -d "$k/contexts/0" ] || continue
    echo "${k##*/} $(kread "$k/contexts/0/operations") $(kread "$k/contexts/0/monitoring_attrs/intervals/sample_us") $(kread "$k/contexts/0/monitoring_attrs/intervals/aggr_us")"
done > attrs-two.txt
ls /run/udamon > claims-two.txt 2>&1
status_json status-two.json
# a third job on auto: no kdamond is free, and none can be added now
{ two_config; cat <<EOF

[[jobs]]
name = "late"
target = { pid = $W }
ops = "auto"
[jobs.attrs]
sample = "10ms"
EOF
} > svc-two.toml
"$UD" ctl --socket "$SOCK" reload > reload-two.txt 2>&1
n=0
while [ $n -lt 60 ]; do
    status_json status-two-late.json
    grep -q '"late"' status-two-late.json && grep -q '"running"' status-two-late.json && break
    sleep 0.5
    n=$((n + 1))
done
sleep 3
status_json status-two-late.json
kdamonds_sysfs sysfs-two-late.txt
kill -TERM "$SVC"
wait "$SVC"
echo "rc=$?" > term-two.txt
echo "nr_kdamonds=$(kread /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds)" >> term-two.txt
echo "claims=$(ls /run/udamon 2>/dev/null | grep -c claim)" >> term-two.txt
log "two: $(tr '\n' ' ' < attrs-two.txt); $(tr '\n' ' ' < term-two.txt)"
forker_stop forker.log
ran
