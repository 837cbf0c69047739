# budget: 150
# proc-migrate: udamon's own engine applies migrate_cold to node 1 (move_pages)
# on a process holding 256 MiB on node 0 of which 16 MiB stay hot; node 1 is a
# CPU-less, slower memory tier (QEMU HMAT).
# Attributes 20 ms / 400 ms and 30 s, not the defaults and 20 s: under TCG
# udamon's own engine cannot sample every 5 ms (each check is a few
# syscalls, each costly with pti=on; soft-dirty clears the whole process),
# so its aggregations stretch and ages, counted in aggregations, reach "3 s"
# only after 10 s or more of wall time.
. /scenarios/lib.sh "$@"
have_two_nodes
pick_user_ops
need_flag apply --ops
need_flag apply --pid
cat > schemes.toml <<'TOML'
# migrate regions idle for 3 s or more to node 1
[[scheme]]
action = "migrate_cold"
target_nid = 1
access_pattern = { sz = ["4K", "max"], freq = ["0%", "0%"], age = ["3s", "max"] }
TOML
start_workload hold.log hold 256 16 100
wait_ready hold.log "$WL_PID" 120
proc_snapshot "$WL_PID" before
hold_ticker "$WL_PID"
run_timed apply "$UD" apply schemes.toml --ops "$OPS" --pid "$WL_PID" --duration 30s --sample 20ms --aggr 400ms -o apply.udr --json
kill "$TICKER_PID" 2>/dev/null
sleep 1
hold_report "$WL_PID" hold.log
proc_snapshot "$WL_PID" after
[ -s apply.udr ] && "$UD" report raw apply.udr > apply.raw.jsonl 2>/dev/null
[ "$RC" = 0 ] || error "udamon apply --ops $OPS exited $RC: $(tail -n 3 apply.err | tr '\n' ' ')"
ran
