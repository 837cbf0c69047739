# Helpers for the guest-side scenario scripts (busybox sh). A scenario runs as
#   sh /scenarios/NAME.sh /out/NAME
# and sources this file first. It writes what it measured into /out/NAME and
# one line into /out/NAME/status:
#   RAN                 measurements are there; tests/vm/check.py judges them
#   SKIP <reason>       the kernel lacks what the scenario needs
#   ERROR <reason>      the scenario could not run (e.g. udamon lacks a flag)
# A scenario's first lines may hold "# budget: SECONDS" (its time limit).

OUT=$1
NAME=$(basename "$OUT")
mkdir -p "$OUT"
cd "$OUT" || exit 1
UD=/usr/bin/udamon
export PATH=/opt/bin:/usr/bin:/bin:/sbin:/usr/sbin

BG_PIDS=
cleanup() {
    for p in $BG_PIDS; do kill -9 "$p" 2>/dev/null; done
}
trap cleanup EXIT

up() { read -r u _ < /proc/uptime; echo "$u"; }
log() { echo "[$(up)] $*"; }
status() { echo "$*" > "$OUT/status"; }
skip() { status "SKIP $*"; log "SKIP $*"; exit 0; }
error() { status "ERROR $*"; log "ERROR $*"; exit 1; }
ran() { status "RAN"; log "RAN"; exit 0; }

# need_flag SUBCOMMAND FLAG: ERROR unless `udamon SUBCOMMAND --help` lists FLAG
need_flag() {
    "$UD" $1 --help 2>&1 | grep -q -e "$2[ ,=<]" -e "$2\$" ||
        error "udamon $1 has no $2 flag (this udamon build cannot run the scenario yet)"
}

# features.json from `udamon features --json`, once per scenario
features() {
    [ -s "$OUT/features.json" ] || "$UD" features --json > "$OUT/features.json" 2> "$OUT/features.err" ||
        error "udamon features --json failed: $(head -c 300 "$OUT/features.err")"
}

# feature NAME: prints true or false (false when the name is unknown)
feature() {
    features
    v=$(tr -d '\n' < "$OUT/features.json" | tr '{' '\n' | grep "\"name\": *\"$1\"" |
        grep -o '"available": *[a-z]*' | grep -o '[a-z]*$' | head -n 1)
    echo "${v:-false}"
}

# feature_detail NAME: the feature's detail string
feature_detail() {
    features
    tr -d '\n' < "$OUT/features.json" | tr '{' '\n' | grep "\"name\": *\"$1\"" |
        sed -n 's/.*"detail": *"\([^"]*\)".*/\1/p' | head -n 1
}

# feature_known NAME: true when `udamon features` reports NAME at all
feature_known() {
    features
    tr -d '\n' < "$OUT/features.json" | tr '{' '\n' | grep -q "\"name\": *\"$1\""
}

# kdamond_unavailable: prints why kernel DAMON cannot monitor a process
# (nothing when it can). udamon has reported vaddr support either as a
# feature of its own (kernel_damon_vaddr) or in the list of DAMON
# operations sets (damon_operations); both are understood.
kdamond_unavailable() {
    if [ ! -d /sys/kernel/mm/damon/admin ]; then
        echo "no /sys/kernel/mm/damon/admin: kernel built without CONFIG_DAMON_SYSFS"
    elif feature_known kernel_damon_vaddr; then
        [ "$(feature kernel_damon_vaddr)" = true ] ||
            echo "kernel DAMON cannot monitor a process: $(feature_detail kernel_damon_vaddr)"
    elif feature_known damon_operations; then
        feature_detail damon_operations | grep -qw vaddr ||
            echo "kernel DAMON has no vaddr operations set: $(feature_detail damon_operations)"
    fi
}

have_kdamond_vaddr() {
    why=$(kdamond_unavailable)
    [ -z "$why" ] || skip "$why"
}

have_idle_bitmap() {
    [ -e /sys/kernel/mm/page_idle/bitmap ] ||
        skip "no /sys/kernel/mm/page_idle/bitmap: kernel built without CONFIG_IDLE_PAGE_TRACKING"
}

have_soft_dirty() {
    [ "$(feature soft_dirty)" = true ] ||
        skip "no soft-dirty bits: $(feature_detail soft_dirty)"
}

have_swap() {
    [ "$(wc -l < /proc/swaps)" -gt 1 ] ||
        skip "no swap device: zram is neither built in nor loadable (pageout has nowhere to go)"
}

have_two_nodes() {
    [ -d /sys/devices/system/node/node1 ] ||
        skip "no NUMA node 1 in the guest (kernel without CONFIG_NUMA, or QEMU started without two nodes)"
}

# pick_user_ops: sets OPS to the user-space engine's primitive this kernel
# offers, idle page bitmap first, then soft-dirty; SKIP when neither.
# Writes it to ops.txt.
pick_user_ops() {
    if [ "$(feature idle_page_bitmap)" = true ]; then OPS=idle
    elif [ "$(feature soft_dirty)" = true ]; then OPS=softdirty
    else skip "neither the idle page bitmap nor soft-dirty: $(feature_detail idle_page_bitmap); $(feature_detail soft_dirty)"
    fi
    echo "$OPS" > ops.txt
}

# start_workload LOGFILE CMD ARGS...: runs CMD in the background; sets WL_PID
start_workload() {
    wl_log=$1; shift
    "$@" > "$wl_log" 2>&1 &
    WL_PID=$!
    BG_PIDS="$BG_PIDS $WL_PID"
    log "started $* (pid $WL_PID)"
}

# wait_ready LOGFILE PID SECONDS: waits for the workload's "ready" line
wait_ready() {
    n=0
    while ! grep -q '^ready' "$1"; do
        kill -0 "$2" 2>/dev/null || error "workload $2 died before ready: $(tail -n 3 "$1" | tr '\n' ' ')"
        n=$((n + 1))
        [ $n -gt $(($3 * 5)) ] && error "workload $2 not ready after $3 s"
        sleep 0.2
    done
    log "workload $2 ready"
}

# hold_report PID LOGFILE: asks hold for a report (SIGUSR1) and waits for it
hold_report() {
    before=$(grep -c '^report ' "$2")
    kill -USR1 "$1"
    n=0
    while [ "$(grep -c '^report ' "$2")" -lt $((before + 2)) ] && [ $n -lt 100 ]; do
        sleep 0.1; n=$((n + 1))
    done
}

# hold_ticker PID: asks hold for a report every 5 s while it lives (a
# timeline of where its pages are)
hold_ticker() {
    (
        while kill -0 "$1" 2>/dev/null; do
            sleep 5
            kill -USR1 "$1" 2>/dev/null
        done
    ) &
    BG_PIDS="$BG_PIDS $!"
    TICKER_PID=$!
}

# proc_snapshot PID TAG: copies /proc/PID/{status,numa_maps,smaps_rollup}
proc_snapshot() {
    cat "/proc/$1/status" > "status-$2.txt" 2>/dev/null
    cat "/proc/$1/numa_maps" > "numa_maps-$2.txt" 2>/dev/null
    cat "/proc/$1/smaps_rollup" > "smaps_rollup-$2.txt" 2>/dev/null
    grep -E '^(MemFree|SwapTotal|SwapFree)' /proc/meminfo > "meminfo-$2.txt"
}

# timeline PID FILE: every 2 s, uptime VmRSS VmSwap (kB) of PID, until PID is gone
timeline() {
    (
        while [ -d "/proc/$1" ]; do
            r=$(awk '/^VmRSS/ {r=$2} /^VmSwap/ {s=$2} END {print r+0, s+0}' "/proc/$1/status" 2>/dev/null)
            echo "$(up) $r"
            sleep 2
        done
    ) > "$2" &
    BG_PIDS="$BG_PIDS $!"
}

# run_timed TAG CMD ARGS...: runs CMD with busybox time; CPU and wall time go
# to cpu-TAG.txt ("wall user sys maxrss_kb"), output to TAG.out/TAG.err;
# sets RC
run_timed() {
    tag=$1; shift
    log "run: $*"
    echo "$*" > "cmd-$tag.txt"
    time -f "%e %U %S %M" -o "cpu-$tag.txt" "$@" > "$tag.out" 2> "$tag.err"
    RC=$?
    log "exit $RC: $(cat "cpu-$tag.txt" 2>/dev/null | tail -n 1) (wall user sys maxrss)"
}

# watch_kdamonds FILE: every second, "uptime pid comm utime stime" of every
# kdamond thread, until stop_watch
watch_kdamonds() {
    rm -f "$OUT/.stop-watch"
    (
        while [ ! -e "$OUT/.stop-watch" ]; do
            for d in /proc/[0-9]*; do
                read -r c 2>/dev/null < "$d/comm" || continue
                case $c in
                    kdamond*)
                        read -r st 2>/dev/null < "$d/stat" || continue
                        set -- ${st#*) }
                        echo "$(up) ${d#/proc/} $c ${12} ${13}"
                        ;;
                esac
            done
            sleep 1
        done
    ) > "$1" &
    WATCH_PID=$!
    BG_PIDS="$BG_PIDS $WATCH_PID"
}
stop_watch() {
    touch "$OUT/.stop-watch"
    wait "$WATCH_PID" 2>/dev/null
    rm -f "$OUT/.stop-watch"
}

# record_eight OPS SECONDS TAG [FLAGS...]: the eight-objects workload under
# udamon record (FLAGS added to its command line)
record_eight() {
    ops=$1 secs=$2 tag=$3
    shift 3
    need_flag record --ops
    need_flag record --pid
    start_workload wl.log eight_objects 64 2
    wait_ready wl.log "$WL_PID" 180
    run_timed "$tag" "$UD" record --ops "$ops" --pid "$WL_PID" -o "$tag.udr" --duration "${secs}s" "$@"
    kill -9 "$WL_PID" 2>/dev/null
    [ "$RC" = 0 ] || error "udamon record --ops $ops exited $RC: $(tail -n 3 "$tag.err" | tr '\n' ' ')"
    [ -s "$tag.udr" ] || error "udamon record --ops $ops wrote no record"
    "$UD" report raw "$tag.udr" > "$tag.raw.jsonl" 2> "$tag.raw.err" ||
        error "udamon report raw failed: $(head -c 300 "$tag.raw.err")"
    "$UD" report heatmap "$tag.udr" > "$tag.heatmap.txt" 2>&1
    "$UD" report wss "$tag.udr" --json > "$tag.wss.json" 2>&1
    "$UD" report summary "$tag.udr" --json > "$tag.summary.json" 2>&1
}

# every scenario starts with udamon's view of the kernel (in this shell, so a
# failure ends the scenario)
features

# loopback_up: the guest has no network; `udamon run`'s endpoint is on lo
loopback_up() {
    ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
}

# get_metrics: the body of GET http://127.0.0.1:$PORT/metrics. With nc:
# busybox wget segfaults in these guests (not on the host).
get_metrics() {
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' | nc 127.0.0.1 "$PORT" 2>&1 |
        tr -d '\r' | sed '1,/^$/d'
}

# scrape_every SECONDS FILE [EXTRA]: in the background until .stop-scrape
# exists, every SECONDS a "# scrape UPTIME" line (followed by what the
# command EXTRA prints, when given) and then the metrics, into FILE. Sets
# SCRAPER and adds it to BG_PIDS; stop it with `touch .stop-scrape; wait
# "$SCRAPER"`.
scrape_every() {
    local every=$1 file=$2 extra=${3:-}
    rm -f .stop-scrape
    (
        while [ ! -e .stop-scrape ]; do
            if [ -n "$extra" ]; then echo "# scrape $(up) $($extra)"; else echo "# scrape $(up)"; fi
            get_metrics
            i=0
            while [ $i -lt $((every * 2)) ] && [ ! -e .stop-scrape ]; do sleep 0.5; i=$((i + 1)); done
        done
    ) > "$file" &
    SCRAPER=$!
    BG_PIDS="$BG_PIDS $SCRAPER"
}

# kread FILE: a DAMON sysfs file; its reads fail (EBUSY) while udamon holds
# DAMON's sysfs lock for a command of its own, so they are retried
kread() {
    i=0
    while [ $i -lt 20 ]; do
        v=$(cat "$1" 2>/dev/null) && [ -n "$v" ] && { echo "$v"; return; }
        i=$((i + 1))
        sleep 0.05
    done
}

# keep_eval: copy run_eval's figures and the monitors' messages out of the
# results directory (records stay behind)
keep_eval() {
    mkdir -p eval/runs
    cp "$H/tmp/eval/suite.toml" "$H/tmp/eval/results.jsonl" "$H/tmp/eval/results.tsv" "$H/tmp/eval/"*.svg eval/ 2>/dev/null
    cp "$H/tmp/eval/runs/"*.err "$H/tmp/eval/runs/"*.out eval/runs/ 2>/dev/null
    if [ -d "$H/tmp/eval/tuned" ]; then
        mkdir -p eval/tuned && cp "$H/tmp/eval/tuned/"* eval/tuned/
    fi
}

# checkpoint: send this scenario's directory as it is now to the host
# (results.sh; init's final block overwrites it)
. /scenarios/results.sh
checkpoint() {
    [ -e /proc/self/fd/3 ] || return 0
    send_out "$NAME"
}

# run_eval ARGS...: `udamon eval` of eval-real.toml (real programs from the
# host's root), with ARGS (--workload, --config, --repeats); results in
# $OUT/eval. EVAL_OPS=idle (or softdirty) runs udamon's monitors on that
# path instead of kernel DAMON. The results directory lives on the host root's tmpfs so that
# damo, which runs in the chroot, can write its records there.
run_eval() {
    H=/host
    [ -d "$H/usr" ] || skip "no host root in the guest (tests/vm/run shares it over virtiofs for this scenario)"
    need_flag eval --repeats
    for p in sqlite3 redis-server redis-benchmark redis-cli 7zz python3; do
        [ -x "$H/usr/bin/$p" ] || skip "the host has no /usr/bin/$p (apt-get install sqlite3 redis-server redis-tools 7zip python3-numpy)"
    done
    chroot "$H" /usr/bin/python3 -c 'import numpy' 2>/dev/null ||
        skip "the host's python3 has no numpy (apt-get install python3-numpy)"
    cp /scenarios/eval-shift.py /scenarios/eval-thp.py "$H/tmp/"
    # Redis and its benchmark talk over TCP on lo.
    loopback_up
    # damo runs from the host's virtualenv in the chroot; its -o path is
    # given as the guest sees it (/host/tmp/...) and mapped to the chroot's.
    DAMO=$(sed -n 's/^damo=//p' /run/udamon-host)
    if [ -n "$DAMO" ] && [ -x "$H$DAMO" ]; then
        # damo sometimes leaves its kdamond behind, turned off, when it
        # stops (`damo stop` does the same); udamon rightly refuses a
        # kdamond it did not create, so the wrapper removes an all-off set
        # after damo ends (in this throw-away guest only). SIGINT reaches
        # damo (the monitor's process group) while the wrapper waits.
        cat > /tmp/damo <<EOS
#!/bin/sh
n=0; for a in "\$@"; do n=\$((n+1)); case \$a in /host/*) a=\${a#/host};; esac; set -- "\$@" "\$a"; done; shift \$n
trap : INT TERM
chroot $H /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp PYTHONDONTWRITEBYTECODE=1 TMPDIR=/tmp "$DAMO" "\$@"
rc=\$?
k=/sys/kernel/mm/damon/admin/kdamonds
if [ "\$(cat \$k/nr_kdamonds 2>/dev/null)" != 0 ] && ! grep -qvx off \$k/*/state 2>/dev/null; then
    echo 0 > \$k/nr_kdamonds && echo "eval: removed the kdamond damo left (off)" >&2
fi
exit \$rc
EOS
        chmod +x /tmp/damo
    fi
    cp /scenarios/eval-real.toml "$OUT/suite.toml"
    if [ -n "${EVAL_OPS:-}" ]; then
        sed -i "s/^ops = \"kdamond\"/ops = \"$EVAL_OPS\"/" "$OUT/suite.toml"
        grep -q "^ops = \"$EVAL_OPS\"" "$OUT/suite.toml" || error "eval-real.toml: cannot set ops = $EVAL_OPS"
    fi
    # EVAL_RESUME=DIR: the eval/ directory an earlier boot sent back (a
    # host path, e.g. REPO/target/vm-out/RUN/eval-full.try1/eval,
    # read through the host root): its runs are taken as done and the
    # tuned schemes reused, so a boot lost to a guest crash is not redone.
    if [ -n "${EVAL_RESUME:-}" ] && [ ! -s "$H/tmp/eval/results.jsonl" ]; then
        [ -s "$H$EVAL_RESUME/results.jsonl" ] && [ -s "$H$EVAL_RESUME/suite.toml" ] ||
            error "EVAL_RESUME=$EVAL_RESUME: no results.jsonl and suite.toml there"
        mkdir -p "$H/tmp/eval"
        # udamon eval refuses them if that suite differs from this one
        cp "$H$EVAL_RESUME/suite.toml" "$H$EVAL_RESUME/results.jsonl" "$H/tmp/eval/"
        [ -d "$H$EVAL_RESUME/tuned" ] && cp -r "$H$EVAL_RESUME/tuned" "$H/tmp/eval/"
        log "resuming from $EVAL_RESUME ($(wc -l < "$H/tmp/eval/results.jsonl") runs)"
    fi
    log "udamon eval $*"
    "$UD" eval "$OUT/suite.toml" -o "$H/tmp/eval" --json "$@" > eval.json 2> eval.err &
    ep=$!
    # Each finished run is sent to the host as it lands (an evaluation
    # takes hours; a guest crash would otherwise lose all of it).
    seen=
    while kill -0 "$ep" 2>/dev/null; do
        sleep 5
        n=$(wc -c < "$H/tmp/eval/results.jsonl" 2>/dev/null)
        if [ -n "$n" ] && [ "$n" != "$seen" ]; then
            seen=$n
            keep_eval
            checkpoint
        fi
    done
    wait "$ep"
    echo $? > eval.rc
    keep_eval
    cat /proc/meminfo > meminfo.txt
    cat /sys/kernel/mm/transparent_hugepage/enabled > thp.txt 2>/dev/null
}

# --- whole programs (forker: several processes, memory known) -----------------

# engine_ops: prints the primitive udamon's own engine would use here (idle,
# else softdirty, else nothing); each one missing is noted in unavailable.txt
# program_paths: sets $paths to "kdamond" where kernel DAMON monitors
# processes, then the engine's path ($ENGINE, see engine_ops); SKIPs the
# scenario when there is none (the reasons are in unavailable.txt)
program_paths() {
    paths=
    _why=$(kdamond_unavailable)
    if [ -z "$_why" ]; then paths=kdamond; else echo "kdamond: $_why" >> unavailable.txt; fi
    ENGINE=$(engine_ops)
    paths=$(echo $paths $ENGINE)
    [ -n "$paths" ] || skip "no path monitors a process here: $(tr '\n' ' ' < unavailable.txt)"
}

engine_ops() {
    if [ -e /sys/kernel/mm/page_idle/bitmap ]; then
        echo idle
        return
    fi
    echo "idle: no /sys/kernel/mm/page_idle/bitmap (CONFIG_IDLE_PAGE_TRACKING)" >> unavailable.txt
    if [ "$(feature soft_dirty)" = true ]; then
        echo softdirty
    else
        echo "softdirty: $(feature_detail soft_dirty)" >> unavailable.txt
    fi
}

# stamp: stdin to stdout, each line prefixed with the uptime it was read at
stamp() {
    while IFS= read -r _line || [ -n "$_line" ]; do echo "$(up) $_line"; done
}

# run_stamped TAG CMD ARGS...: as run_timed (busybox time into cpu-TAG.txt,
# stdout into TAG.out), but each line CMD writes to stderr goes to TAG.err
# prefixed with the uptime it arrived at (udamon's "udamon: monitoring ..."
# line then dates the start of the record's clock), TAG.times holds the
# uptimes of the launch and of the exit, and the exit status goes to
# rc-TAG.txt. Sets RC. Safe to run in the background (&).
run_stamped() {
    tag=$1; shift
    log "run: $*"
    echo "$*" > "cmd-$tag.txt"
    echo "launch=$(up)" > "$tag.times"
    { time -f "%e %U %S %M" -o "cpu-$tag.txt" "$@" 2>&1 > "$tag.out"; echo $? > "rc-$tag.txt"; } |
        stamp > "$tag.err"
    echo "exit=$(up)" >> "$tag.times"
    RC=$(cat "rc-$tag.txt" 2>/dev/null)
    log "exit $RC: $(tail -n 1 "cpu-$tag.txt" 2>/dev/null) (wall user sys maxrss)"
}

# forker_ready LOG N SECONDS: waits until N workers in forker's LOG are ready
forker_ready() {
    _fr=0
    while :; do
        # (no log yet: grep prints nothing)
        _frn=$(grep -c '^worker [0-9]* ready ' "$1" 2>/dev/null)
        [ "${_frn:-0}" -ge "$2" ] && break
        _fr=$((_fr + 1))
        [ $_fr -gt $(($3 * 5)) ] &&
            error "forker: ${_frn:-0} of $2 workers ready after $3 s: $(tail -n 2 "$1" 2>/dev/null | tr '\n' ' ')"
        sleep 0.2
    done
    log "forker: $2 workers ready ($1)"
}

# forker_parent LOG: the parent's pid; forker_workers LOG: the pids of the
# workers that got ready, one a line
forker_parent() { sed -n 's/^forker \([0-9]*\) start .*/\1/p' "$1" | head -n 1; }
forker_workers() { sed -n 's/^worker \([0-9]*\) ready .*/\1/p' "$1"; }

# forker_stop LOG: SIGTERM to the forker of LOG (it ends its workers within
# 2 s) and waits for it, at most 15 s, then SIGKILL (its workers die with it)
forker_stop() {
    _fp=$(forker_parent "$1")
    [ -n "$_fp" ] || return 0
    kill -TERM "$_fp" 2>/dev/null
    _fn=0
    while [ $_fn -lt 75 ]; do
        # gone, or a zombie of this shell's
        _fst=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$_fp/status" 2>/dev/null)
        [ -z "$_fst" ] || [ "$_fst" = Z ] && break
        sleep 0.2
        _fn=$((_fn + 1))
    done
    kill -9 "$_fp" 2>/dev/null
    wait "$_fp" 2>/dev/null
    return 0
}

# cpu_ticks PID: utime+stime of PID's whole thread group (ticks of 1/100 s)
cpu_ticks() {
    read -r _st 2>/dev/null < "/proc/$1/stat" || { echo 0; return; }
    set -- ${_st#*) }
    echo $((${12} + ${13}))
}

# kdamond_ticks: utime+stime of every kdamond thread now, summed, and their
# count ("TICKS N")
kdamond_ticks() {
    _t=0 _k=0
    for _d in /proc/[0-9]*; do
        read -r _c 2>/dev/null < "$_d/comm" || continue
        case $_c in
            kdamond*)
                read -r _st 2>/dev/null < "$_d/stat" || continue
                set -- ${_st#*) }
                _t=$((_t + ${12} + ${13})); _k=$((_k + 1))
                ;;
        esac
    done
    echo "$_t $_k"
}

# kdamonds_sysfs FILE: every kdamond of DAMON's sysfs interface: its state,
# pid, and per context its operations and number of targets
# remove_damo_kdamonds: damo may leave its kdamonds behind, off; udamon
# rightly refuses kdamonds it did not create, so a set that is all off is
# removed (these throw-away guests only). Says so in the log and in
# damo-left-kdamond.txt; returns 1 when there was none to remove.
remove_damo_kdamonds() {
    _k=/sys/kernel/mm/damon/admin/kdamonds
    [ "$(cat $_k/nr_kdamonds 2>/dev/null)" != 0 ] && ! grep -qvx off $_k/*/state 2>/dev/null || return 1
    echo 0 > $_k/nr_kdamonds && log "removed the kdamond damo left (off)" && echo removed >> damo-left-kdamond.txt
}

kdamonds_sysfs() {
    _a=/sys/kernel/mm/damon/admin/kdamonds
    {
        echo "nr_kdamonds=$(kread $_a/nr_kdamonds)"
        for _k in $_a/[0-9]*; do
            [ -d "$_k" ] || continue
            _i=${_k##*/}
            echo "kdamond.$_i.state=$(kread "$_k/state")"
            echo "kdamond.$_i.pid=$(kread "$_k/pid")"
            echo "kdamond.$_i.nr_contexts=$(kread "$_k/contexts/nr_contexts")"
            for _c in "$_k"/contexts/[0-9]*; do
                [ -d "$_c" ] || continue
                _j=${_c##*/}
                echo "kdamond.$_i.context.$_j.operations=$(kread "$_c/operations")"
                echo "kdamond.$_i.context.$_j.nr_targets=$(kread "$_c/targets/nr_targets")"
            done
        done
    } > "$1"
}
