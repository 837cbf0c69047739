# budget: 21600
# needs: host-root
# eval-idle: the programs of eval-real.toml under udamon's own engine
# (ops = "idle": the idle page bitmap, as on kernels without DAMON vaddr),
# three repeats: every configuration of the suite on SQLite, Redis, 7-Zip
# and numpy (damo's through the kernel's DAMON, which this kernel also
# has); orig, rec, thp and ethp on numpy-thp. Needs a kernel with the
# bitmap (../shared/kernels/bzImage-7.3.4-idle); about five hours under
# TCG, not in `all`. docs/evaluation.md holds its tables, measured in
# parts.
. /scenarios/lib.sh "$@"
[ -e /sys/kernel/mm/page_idle/bitmap ] || skip "this kernel has no idle page bitmap (run with --kernel ../shared/kernels/bzImage-7.3.4-idle)"
EVAL_OPS=idle run_eval --workload sqlite,redis,7zip,numpy --config orig,rec,prec,thp,ethp,prcl,tuned-prcl,damo-rec,damo-prcl
EVAL_OPS=idle run_eval --workload numpy-thp --config orig,rec,thp,ethp
ran
