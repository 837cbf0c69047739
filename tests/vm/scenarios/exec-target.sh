# budget: 150
# exec-target: `udamon apply prcl -- CMD` where CMD idles 4 s and then execs
# eight_objects (16 MiB objects, each written for 1 s in turn). Our engine
# must notice the exec, mark it in the record, follow the new program from
# fresh regions (accesses keep being seen) and never page out the new
# program's hot object on the old program's ages.
. /scenarios/lib.sh "$@"
need_flag record --stop-on-exec
pick_user_ops
echo "4K max  0 0  3s max  pageout" > prcl.txt
run_timed rec "$UD" apply prcl.txt --ops "$OPS" --sample 20ms --aggr 400ms --duration 16s \
    -o rec.udr --json -- sh -c 'sleep 4; exec eight_objects 16 1 > wl.log'
[ "$RC" = 0 ] || error "udamon apply -- CMD exited $RC: $(tail -n 3 rec.err | tr '\n' ' ')"
"$UD" report raw rec.udr > rec.raw.jsonl 2> rec.raw.err ||
    error "udamon report raw failed: $(head -c 300 rec.raw.err)"
# With --stop-on-exec the run ends at the exec.
run_timed stop "$UD" record --ops "$OPS" --sample 20ms --aggr 400ms --duration 30s -o stop.udr \
    --json --stop-on-exec \
    -- sh -c 'sleep 3; exec eight_objects 16 1 > wl2.log'
ran
