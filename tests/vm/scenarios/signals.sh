# budget: 180
# signals: SIGTERM during `udamon apply --ops kdamond` ends the run like its
# duration (exit 0, ended_by interrupted, record readable) and leaves no
# kdamond and no tracefs instance of udamon's; then `udamon record` killed
# with SIGKILL after 10 s keeps at least 9 s, leaves its kdamond, which
# `udamon features` proves udamon's and `udamon cleanup` removes.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
need_flag apply --ops
need_flag cleanup --json
echo "4K max  0 0  5s max  pageout" > prcl.txt
tracing=/sys/kernel/tracing
[ -d $tracing/instances ] || tracing=/sys/kernel/debug/tracing
start_workload wl.log eight_objects 16 1
wait_ready wl.log "$WL_PID" 120

# 1. SIGTERM after 6 s.
"$UD" apply prcl.txt --ops kdamond --pid "$WL_PID" --duration 60s -o term.udr --json \
    > term.out 2> term.err &
UDP=$!
sleep 6
kill -TERM "$UDP"
wait "$UDP"
echo "$?" > term.rc
cat /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds > term.nr_kdamonds
ls "$tracing/instances" > term.instances 2>&1
"$UD" report summary term.udr --json > term.summary.json 2> term.summary.err

# 2. SIGKILL after 10 s, then cleanup.
"$UD" record --ops kdamond --pid "$WL_PID" --duration 60s -o kill.udr > kill.out 2> kill.err &
UDP=$!
# The 10 s count from the kdamond's start: udamon's own set-up (slow under
# TCG on a loaded host) is no part of what a kill may lose.
n=0
while [ $n -lt 100 ] && [ "$(cat /sys/kernel/mm/damon/admin/kdamonds/0/state 2>/dev/null)" != on ]; do
    sleep 0.1
    n=$((n + 1))
done
echo "on_uptime=$(up)" > kill.window
sleep 10
kill -9 "$UDP"
echo "kill_uptime=$(up)" >> kill.window
wait "$UDP"
cat /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds > kill.nr_kdamonds.before
"$UD" features --json > kill.features.json 2> kill.features.err
"$UD" cleanup --json > kill.cleanup.json 2> kill.cleanup.err
cat /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds > kill.nr_kdamonds.after
ls "$tracing/instances" > kill.instances 2>&1
"$UD" report raw kill.udr > kill.raw.jsonl 2> kill.raw.err
kill -9 "$WL_PID" 2>/dev/null
ran
