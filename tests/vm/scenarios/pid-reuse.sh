# budget: 150
# pid-reuse: inside a PID namespace, `udamon apply prcl` acts on a process
# that holds 64 MiB of cold memory; the process is killed and its pid handed
# to a new one (ns_last_pid) holding the same kind of memory. No action may
# reach the new process, and the run ends ("target exited" or "target
# replaced", whichever udamon saw first).
. /scenarios/lib.sh "$@"
have_swap
pick_user_ops
need_flag apply --ops
echo "4K max  0 0  2s max  pageout" > prcl.txt
cat > inner.sh <<'INNER'
# runs as pid 1 of a new PID namespace; $1 = ops
ready() { n=0; while ! grep -q '^ready' "$1"; do n=$((n + 1)); [ $n -gt 600 ] && return 1; sleep 0.2; done; }
hold 64 0 > first.log 2>&1 &
P=$!
ready first.log || { echo "first hold not ready" > inner.err; exit 1; }
/usr/bin/udamon apply prcl.txt --ops "$1" --pid "$P" --sample 20ms --aggr 400ms --duration 40s \
    -o r.udr --json > apply.out 2> apply.err &
U=$!
sleep 8
kill -9 "$P"
wait "$P" 2>/dev/null
echo $((P - 1)) > /proc/sys/kernel/ns_last_pid
hold 64 0 > second.log 2>&1 &
Q=$!
echo "$P $Q" > pids.txt
ready second.log || { echo "second hold not ready" > inner.err; exit 1; }
sleep 8
kill -USR1 "$Q"
sleep 2
wait "$U"
echo $? > apply.rc
kill -9 "$Q" 2>/dev/null
INNER
unshare -p -f --mount-proc sh inner.sh "$OPS" || error "the PID namespace run failed: $(cat inner.err 2>/dev/null)"
[ -s pids.txt ] || error "no pids recorded: $(cat inner.err 2>/dev/null)"
ran
