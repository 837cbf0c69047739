# budget: 150
# coexist: kernel DAMON shared with others. (1) DAMON_STAT (built into
# Debian's 7.3 kernel) holds kernel DAMON while it runs (starting another
# kdamond fails with EBUSY): `udamon features` names it, `--ops kdamond`
# refuses naming it and how to disable it, `--ops auto` moves on to another
# path. With it off, udamon's record of a process holds only that
# process's regions. (2) An idle kdamond left behind (as `damo stop`
# leaves one): `--ops kdamond` refuses and says how to clear it, `--ops auto`
# never acts through write-only soft-dirty, `udamon cleanup` leaves it alone,
# and nothing of it is changed.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
need_flag cleanup --json
stat=/sys/module/damon_stat/parameters
start_workload wl.log eight_objects 16 1
wait_ready wl.log "$WL_PID" 120
cat "/proc/$WL_PID/maps" > maps.txt
if [ -e $stat/enabled ]; then
    # DAMON_STAT running: it holds kernel DAMON, and udamon must say so.
    echo Y > $stat/enabled 2>/dev/null
    cat $stat/enabled > stat-enabled.txt
    "$UD" features --json > features2.json 2> features2.err
    "$UD" record --ops kdamond --pid "$WL_PID" --duration 2s -o busy.udr > busy.out 2> busy.err
    echo $? > busy.rc
    "$UD" record --pid "$WL_PID" --duration 2s -o busyauto.udr --json > busyauto.out 2> busyauto.err
    echo $? > busyauto.rc
    echo N > $stat/enabled
fi
run_timed rec "$UD" record --ops kdamond --pid "$WL_PID" --duration 10s -o rec.udr --json
[ "$RC" = 0 ] || error "udamon record --ops kdamond exited $RC: $(tail -n 3 rec.err | tr '\n' ' ')"
"$UD" report raw rec.udr > rec.raw.jsonl 2> rec.raw.err ||
    error "udamon report raw failed: $(head -c 300 rec.raw.err)"

# (2) an idle kdamond of someone else's
admin=/sys/kernel/mm/damon/admin/kdamonds
echo 1 > $admin/nr_kdamonds
echo "4K max  0 0  5s max  pageout" > prcl.txt
"$UD" record --ops kdamond --pid "$WL_PID" --duration 2s -o k.udr > k.out 2> k.err
echo $? > k.rc
"$UD" apply prcl.txt --pid "$WL_PID" --duration 3s --json > auto.out 2> auto.err
echo $? > auto.rc
"$UD" cleanup --json > cleanup.json 2> cleanup.err
echo "$(cat $admin/nr_kdamonds) $(cat $admin/0/state)" > leftover-after.txt
echo 0 > $admin/nr_kdamonds
kill -9 "$WL_PID" 2>/dev/null
ran
