# budget: 300
# needs: host-root
# damo-peer: the PyPI package damo (which no one here wrote) and udamon each
# record the same eight-objects process through the same kernel DAMON, one
# after the other; udamon imports damo's record and check.py compares the
# two working-set sizes. damo runs from the host's root, shared read-only
# over virtiofs (python, the damo virtualenv, trace-cmd), inside a chroot.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
H=/host
[ -d "$H/usr" ] || skip "no host root in the guest (tests/vm/run shares it over virtiofs for this scenario)"
DAMO=$(sed -n 's/^damo=//p' /run/udamon-host)
[ -n "$DAMO" ] && [ -x "$H$DAMO" ] || skip "no damo virtualenv on the host (tests/vm/run makes one with pip; see its log)"
[ -x "$H/usr/bin/trace-cmd" ] || [ -x "$H/usr/bin/perf" ] ||
    skip "damo records through perf or trace-cmd, and the host has neither (apt-get install trace-cmd)"
need_flag import --json

start_workload wl.log eight_objects 64 2
wait_ready wl.log "$WL_PID" 180

# damo first (it creates and removes its own kdamond), in the host's root;
# the chroot sees the guest's /proc, /sys and tracefs (mounted by init).
IN_HOST="chroot $H /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp PYTHONDONTWRITEBYTECODE=1 TMPDIR=/tmp"
$IN_HOST "$DAMO" version > damo-version.txt 2>&1
log "damo $(cat damo-version.txt)"
run_timed damo $IN_HOST "$DAMO" record --timeout 20 --do_record access \
    --output_type json_compressed -o /tmp/damo.data "$WL_PID"
cp "$H/tmp/damo.data" damo.data 2>/dev/null
[ -s damo.data ] || error "damo record wrote nothing (exit $RC): $(tail -n 3 damo.err damo.out | tr '\n' ' ')"
kill -0 "$WL_PID" 2>/dev/null || error "the workload died during damo's record"
# damo has turned its kdamond off and removed it; udamon's own next
run_timed udamon "$UD" record --ops kdamond --pid "$WL_PID" -o udamon.udr --duration 20s
kill -9 "$WL_PID" 2>/dev/null
[ "$RC" = 0 ] || error "udamon record exited $RC: $(tail -n 3 udamon.err | tr '\n' ' ')"
"$UD" import damo.data -o damo.udr --json > import.json 2> import.err ||
    error "udamon import of damo's record failed: $(head -c 300 import.err)"
"$UD" report wss damo.udr --json > damo.wss.json 2>&1
"$UD" report wss udamon.udr --json > udamon.wss.json 2>&1
"$UD" report heatmap damo.udr > damo.heatmap.txt 2>&1
ran
