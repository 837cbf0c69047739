# budget: 300
# program-tree: a program of nine processes recorded whole. `forker 8`: a
# parent and eight workers, worker i with a hot set of i+1 MiB written every
# 20 ms and 16 MiB written once (workloads/forker.c), recorded four ways for
# 20 s each:
#   tree-kdamond, tree-idle|tree-softdirty: `udamon record -- forker 8 25`
#     (the command's whole process tree, the default), on kernel DAMON and
#     on udamon's engine (idle, else softdirty, which sees writes only: the
#     hot sets are written, so it sees them too);
#   cgroup: `--cgroup /sys/fs/cgroup/udtest` (cgroup2 mounted there if it
#     is not yet) of a forker that moved itself in; a second forker of two
#     workers joins the cgroup 5 s into the record and leaves 6 s later
#     (followed as they come and go). Skipped, with the reason in
#     cgroup-skip.txt, where the kernel has no cgroup v2;
#   pids: `--pid P --pid W1 ... --pid W8` of a running forker.
# The last two on kernel DAMON where it monitors processes, else on the
# engine. Each forker's log names its processes, their hot and cold ranges
# and when they started, got ready and exited; each run's stderr is stamped
# with the uptime (run_stamped), which dates the record's clock.
. /scenarios/lib.sh "$@"
need_flag record --children
need_flag record --cgroup
need_flag record --no-children
program_paths
MAIN=$(echo "$paths" | cut -d' ' -f1)
# The region limits are the monitor's, shared by all its targets (as in
# the kernel): ten regions at least for each of the nine to twelve
# processes, or a 1 MiB hot set may stay inside a region that is mostly
# cold (docs/live.md, "Whole programs").
MINR="--min-regions 100"
echo "$paths" > paths.txt
echo "$MAIN" > main-ops.txt
: > runs.txt

# finish_run TAG OPS: the record as JSON lines and its summary
finish_run() {
    echo "$2" > "$1.ops"
    echo "$1" >> runs.txt
    if [ "$(cat "rc-$1.txt" 2>/dev/null)" = 0 ] && [ -s "$1.udr" ]; then
        "$UD" report raw "$1.udr" > "$1.raw.jsonl" 2> "$1.raw.err"
        "$UD" report summary "$1.udr" --json > "$1.summary.json" 2>&1
    fi
}

# 1. record -- CMD: the command's tree, on each path
for p in $paths; do
    tag=tree-$p
    rm -f "$tag.forker.log"
    export FORKER_LOG="$OUT/$tag.forker.log"
    # Soft-dirty's default resets every process's bits before every
    # sample (one clear_refs per process per sample): auto resets once a
    # window or less often, and keeps pace with nine processes.
    sd=
    [ "$p" = softdirty ] && sd="--softdirty-reset auto"
    run_stamped "$tag" "$UD" record --ops "$p" $sd $MINR --duration 20s -o "$tag.udr" --json -- forker 8 25
    unset FORKER_LOG
    # udamon ends the command when the duration passes; make sure
    forker_stop "$tag.forker.log"
    finish_run "$tag" "$p"
done

# wait_monitoring TAG: until the run of TAG says it monitors (or its record
# has begun, or it ended), at most 90 s
wait_monitoring() {
    n=0
    while [ $n -lt 450 ]; do
        grep -q 'udamon: monitoring' "$1.err" 2>/dev/null && return 0
        [ -s "$1.udr" ] && return 0
        [ -s "rc-$1.txt" ] && return 0
        sleep 0.2
        n=$((n + 1))
    done
}

# 2. --cgroup
CG=/sys/fs/cgroup
cg_why= mounted=0
if grep -q "^[^ ]* $CG cgroup2 " /proc/mounts; then
    :
elif grep -q "^[^ ]* $CG " /proc/mounts; then
    cg_why="$CG holds a $(awk -v m=$CG '$2 == m {print $3; exit}' /proc/mounts) mount, not cgroup v2"
elif [ ! -d $CG ]; then
    cg_why="no $CG: kernel without CONFIG_CGROUPS"
elif mount -t cgroup2 cgroup2 $CG 2> cgroup-mount.err; then
    mounted=1
else
    cg_why="cannot mount cgroup2 on $CG: $(head -c 200 cgroup-mount.err)"
fi
if [ -z "$cg_why" ]; then
    rmdir $CG/udtest 2>/dev/null
    mkdir $CG/udtest 2> cgroup-mkdir.err || cg_why="cannot create $CG/udtest: $(head -c 200 cgroup-mkdir.err)"
fi
if [ -n "$cg_why" ]; then
    echo "$cg_why" > cgroup-skip.txt
    log "cgroup part skipped: $cg_why"
else
    echo "mounted_by_scenario=$mounted" > cgroup.info
    FORKER_CGROUP=$CG/udtest FORKER_LOG="$OUT/cgroup.forker.log" forker 8 90 > cgroup.forker.out 2>&1 &
    BG_PIDS="$BG_PIDS $!"
    forker_ready cgroup.forker.log 8 120
    cat $CG/udtest/cgroup.procs > cgroup.procs-before.txt
    run_stamped cgroup "$UD" record --ops "$MAIN" $MINR --cgroup $CG/udtest --duration 20s -o cgroup.udr --json &
    RP=$!
    wait_monitoring cgroup
    sleep 5
    # the late one: a forker of two workers joins, lives 6 s, leaves
    FORKER_CGROUP=$CG/udtest FORKER_LOG="$OUT/cgroup-late.forker.log" forker 2 6 > cgroup-late.forker.out 2>&1 &
    LP=$!
    BG_PIDS="$BG_PIDS $LP"
    forker_ready cgroup-late.forker.log 2 30
    cat $CG/udtest/cgroup.procs > cgroup.procs-late.txt
    wait "$LP"
    cat $CG/udtest/cgroup.procs > cgroup.procs-after-late.txt
    wait "$RP"
    forker_stop cgroup.forker.log
    finish_run cgroup "$MAIN"
    rmdir $CG/udtest 2>> cgroup.info || echo "rmdir failed: $(cat $CG/udtest/cgroup.procs 2>/dev/null | tr '\n' ' ')" >> cgroup.info
    [ $mounted = 1 ] && umount $CG 2>> cgroup.info
fi

# 3. several --pid
FORKER_LOG="$OUT/pids.forker.log" forker 8 90 > pids.forker.out 2>&1 &
BG_PIDS="$BG_PIDS $!"
forker_ready pids.forker.log 8 120
given="$(forker_parent pids.forker.log) $(forker_workers pids.forker.log | tr '\n' ' ')"
echo $given > pids-given.txt
args=
for p in $given; do args="$args --pid $p"; done
run_stamped pids "$UD" record --ops "$MAIN" $MINR $args --duration 20s -o pids.udr --json
forker_stop pids.forker.log
finish_run pids "$MAIN"
ran
