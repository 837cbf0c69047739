# budget: 90
# cmd-exit: udamon starts a command itself (record -- CMD, --ops auto) and
# follows it until it exits by itself; check.py wants the record finished
# and readable, ended by the target's exit, with the path auto picked named.
. /scenarios/lib.sh "$@"
need_flag record --ops
# the command: a shell that runs a workload for 6 s, then ends it and exits
run_timed rec "$UD" record -o rec.udr --json -- sh -c 'eight_objects 16 0.2 >wl.log & sleep 6; kill $!'
[ "$RC" = 0 ] || error "udamon record -- CMD exited $RC: $(tail -n 3 rec.err | tr '\n' ' ')"
"$UD" report summary rec.udr > summary.txt 2>&1 || error "udamon report summary failed: $(head -c 300 summary.txt)"
"$UD" report raw rec.udr > rec.raw.jsonl 2> rec.raw.err || error "udamon report raw failed: $(head -c 300 rec.raw.err)"
ran
