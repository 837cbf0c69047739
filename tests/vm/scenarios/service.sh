# budget: 360
# service: `udamon run` with two jobs at once for more than two minutes, on
# two processes holding 256 MiB each (16 MiB hot): job A pages out through
# kernel DAMON (ops kdamond, target by pid), job B through udamon's engine
# (ops idle, or softdirty without the idle bitmap; target by comm). Metrics
# over HTTP on the loopback, a ctl socket under /tmp. `run --check` first;
# in the middle two reloads (SIGHUP, then `udamon ctl reload`) change both
# jobs' min_age: kernel DAMON takes them online (same kdamond pid, the new
# age in sysfs), the engine too (`ctl status --json`). Then SIGTERM: exit 0,
# nothing of udamon's left. Then `udamon record --ops kdamond` of job A's
# process for 30 s, for its CPU cost next to the service's.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
have_swap
need_flag run --check
need_flag ctl --socket
if [ -e /sys/kernel/mm/page_idle/bitmap ]; then OPS=idle
elif [ "$(feature soft_dirty)" = true ]; then OPS=softdirty
else skip "neither the idle page bitmap nor soft-dirty for job B: $(feature_detail soft_dirty)"
fi
echo "$OPS" > ops.txt

admin=/sys/kernel/mm/damon/admin/kdamonds
agemin=$admin/0/contexts/0/schemes/0/access_pattern/age/min
tracing=/sys/kernel/tracing
[ -d $tracing/instances ] || tracing=/sys/kernel/debug/tracing
PORT=9788
SOCK=/tmp/udamon-svc.sock
URL=http://127.0.0.1:$PORT/metrics
# the guest has no network, but the endpoint is on the loopback (one wget
# try is kept in wget-try.txt: get_metrics says why it uses nc)
loopback_up

# min_age of job A's and job B's scheme (s) for the start and each reload
A_AGES="30 10 20"
B_AGES="5 3 4"
nth() { echo "$2" | cut -d' ' -f"$(($1 + 1))"; }

# write_config N: the config with the N-th ages (each version kept as svc-N.toml)
write_config() {
    cat > svc.toml.new <<EOF
listen = "127.0.0.1:$PORT"
socket = "$SOCK"

[[jobs]]
name = "A"
target = { pid = $A_PID }
ops = "kdamond"
schemes = [ { inline = "4K max 0 0 $(nth "$1" "$A_AGES")s max pageout" } ]
[jobs.attrs]
sample = "5ms"
aggr = "100ms"

[[jobs]]
name = "B"
target = { comm = "holdb" }
ops = "$OPS"
schemes = [ { inline = "4K max 0 0 $(nth "$1" "$B_AGES")s max pageout" } ]
[jobs.attrs]
sample = "20ms"
aggr = "400ms"
EOF
    cp svc.toml.new "svc-$1.toml"
    mv svc.toml.new svc.toml
}

# the two workloads: A is `hold`, B a copy named holdb (its comm)
cp /opt/bin/hold /tmp/holdb
start_workload holda.log hold 256 16 100
A_PID=$WL_PID
wait_ready holda.log "$A_PID" 120
start_workload holdb.log /tmp/holdb 256 16 100
B_PID=$WL_PID
wait_ready holdb.log "$B_PID" 120
echo "$A_PID $B_PID" > pids.txt
proc_snapshot "$A_PID" a-before
proc_snapshot "$B_PID" b-before
hold_ticker "$A_PID"
hold_ticker "$B_PID"

write_config 0
# 1. the plan, touching nothing
"$UD" run --check svc.toml > check.txt 2> check.err
echo $? > check.rc
"$UD" run --check --json svc.toml > check.json 2>> check.err
log "run --check: exit $(cat check.rc)"
[ "$(cat check.rc)" = 0 ] || error "udamon run --check exited $(cat check.rc): $(head -c 300 check.txt check.err | tr '\n' ' ')"

# 2. the service
watch_kdamonds kdamond.txt
"$UD" run svc.toml > svc.out 2> svc.err &
SVC=$!
BG_PIDS="$BG_PIDS $SVC"
echo "$SVC" > svc.pid
log "udamon run: pid $SVC"
status_json() { "$UD" ctl --socket "$SOCK" status --json > "$1" 2> "$1.err"; }
n=0
while :; do
    kill -0 "$SVC" 2>/dev/null || error "udamon run exited early: $(tail -n 3 svc.err | tr '\n' ' ')"
    status_json status-start.json
    [ "$(grep -c '"state": "running"' status-start.json)" -ge 2 ] && break
    n=$((n + 1))
    [ $n -gt 120 ] && error "the two jobs were not both running after 60 s: $(tr -d '\n ' < status-start.json | head -c 400)"
    sleep 0.5
done
T_UP=$(up)
echo "$T_UP" > up-time.txt
log "both jobs running"

# every 10 s: the metrics, kdamond 0's pid and its scheme's age/min
scrape_extra() { echo "kdamond_pid=$(kread $admin/0/pid) age_min=$(kread $agemin)"; }
scrape_every 10 metrics.txt scrape_extra

scrape() { echo "# scrape $(up) $(scrape_extra)" > "$1"; get_metrics >> "$1"; }
scrape metrics-first.txt
{ wget -q -T 5 -O - "$URL" > wget-try.out 2>&1; echo "busybox wget exit $?: $(head -c 200 wget-try.out)"; } > wget-try.txt 2>&1
sleep_until() { while awk -v a="$(up)" -v b="$1" 'BEGIN {exit !(a < b)}'; do sleep 1; done; }

# reload N HOW: new config, then SIGHUP or `ctl reload`; waits up to 20 s
# for the new age in sysfs and for B's new scheme in ctl status
reload() {
    k=$1 how=$2
    want_age=$(( $(nth "$k" "$A_AGES") * 10 ))   # aggregation intervals of 100 ms
    want_b="idle for $(nth "$k" "$B_AGES")s.."
    {
        echo "how=$how"
        echo "a_min_age_s=$(nth "$k" "$A_AGES")"
        echo "want_age_min=$want_age"
        echo "b_min_age_s=$(nth "$k" "$B_AGES")"
        echo "pid_before=$(kread $admin/0/pid)"
        echo "age_min_before=$(kread $agemin)"
        echo "nr_kdamonds_before=$(kread $admin/nr_kdamonds)"
    } > "reload-$k.txt"
    status_json "status-before-$k.json"
    write_config "$k"
    t0=$(up)
    echo "t0=$t0" >> "reload-$k.txt"
    if [ "$how" = sighup ]; then
        kill -HUP "$SVC"
    else
        "$UD" ctl --socket "$SOCK" reload > "ctl-reload-$k.out" 2> "ctl-reload-$k.err"
        echo "ctl_rc=$?" >> "reload-$k.txt"
        "$UD" ctl --socket "$SOCK" reload --json > "ctl-reload-$k-again.json" 2>> "ctl-reload-$k.err"
    fi
    n=0 seen_age= seen_b=
    while [ $n -lt 40 ]; do
        a=$(kread $agemin)
        [ -z "$seen_age" ] && [ "$a" = "$want_age" ] && seen_age=$(up)
        status_json "status-after-$k.json"
        [ -z "$seen_b" ] && grep -qF "$want_b" "status-after-$k.json" && seen_b=$(up)
        [ -n "$seen_age" ] && [ -n "$seen_b" ] && break
        sleep 0.5
        n=$((n + 1))
    done
    {
        echo "age_seen_at=$seen_age"
        echo "b_seen_at=$seen_b"
        echo "pid_after=$(kread $admin/0/pid)"
        echo "age_min_after=$(kread $agemin)"
        echo "nr_kdamonds_after=$(kread $admin/nr_kdamonds)"
    } >> "reload-$k.txt"
    log "reload $k ($how): $(tr '\n' ' ' < "reload-$k.txt")"
}

sleep_until "$(awk -v t="$T_UP" 'BEGIN {print t + 50}')"
reload 1 sighup
sleep_until "$(awk -v t="$T_UP" 'BEGIN {print t + 85}')"
reload 2 ctl
sleep_until "$(awk -v t="$T_UP" 'BEGIN {print t + 135}')"
scrape metrics-last.txt
status_json status-end.json
"$UD" ctl --socket "$SOCK" status > status-end.txt 2>&1
touch .stop-scrape
wait "$SCRAPER" 2>/dev/null
proc_snapshot "$A_PID" a-after
proc_snapshot "$B_PID" b-after
hold_report "$A_PID" holda.log
hold_report "$B_PID" holdb.log

# 3. SIGTERM, at most 60 s
{
    echo "nr_kdamonds_before=$(kread $admin/nr_kdamonds)"
    echo "claim_before=$([ -e /run/udamon/kdamond.claim ] && echo yes || echo no)"
    echo "instances_before=$(ls $tracing/instances 2>/dev/null | grep '^udamon-' | tr '\n' ' ')"
    echo "socket_before=$([ -S $SOCK ] && echo yes || echo no)"
} > term.txt
( sleep 60; kill -9 "$SVC" 2>/dev/null && echo "killed=yes" >> term.txt ) &
WD=$!
t0=$(up)
kill -TERM "$SVC"
wait "$SVC"
rc=$?
t1=$(up)
kill "$WD" 2>/dev/null
stop_watch
{
    echo "rc=$rc"
    echo "seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
    echo "nr_kdamonds=$(kread $admin/nr_kdamonds)"
    echo "claim=$([ -e /run/udamon/kdamond.claim ] && echo yes || echo no)"
    echo "run_udamon=$(ls -A /run/udamon 2>/dev/null | tr '\n' ' ')"
    echo "instances=$(ls $tracing/instances 2>/dev/null | grep '^udamon-' | tr '\n' ' ')"
    echo "socket=$([ -e $SOCK ] && echo yes || echo no)"
    echo "metrics_answer=$(get_metrics | grep -q '^udamon_' && echo yes || echo no)"
    echo "service_alive=$(kill -0 "$SVC" 2>/dev/null && echo yes || echo no)"
} >> term.txt
log "SIGTERM: $(tr '\n' ' ' < term.txt)"

# 4. the same process under `udamon record --ops kdamond` for 30 s
watch_kdamonds kdamond-rec.txt
run_timed rec "$UD" record --ops kdamond --pid "$A_PID" --duration 30s -o rec.udr --json
stop_watch
echo "$RC" > rec.rc
kill -9 "$A_PID" "$B_PID" 2>/dev/null
ran
