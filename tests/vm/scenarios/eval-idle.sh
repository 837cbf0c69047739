# budget: 10800
# needs: host-root
# eval-idle: the programs of eval-real.toml under udamon's own engine
# (ops = "idle": the idle page bitmap, as on kernels without DAMON vaddr),
# three repeats: orig, rec, prec, ethp, prcl and tuned-prcl on SQLite,
# Redis, 7-Zip and numpy; orig, rec, thp and ethp on numpy-thp. Needs a
# kernel with the bitmap (../shared/kernels/bzImage-7.3.4-idle); about
# two and a half hours under TCG, not in `all`. docs/evaluation.md holds
# its table.
. /scenarios/lib.sh "$@"
[ -e /sys/kernel/mm/page_idle/bitmap ] || skip "this kernel has no idle page bitmap (run with --kernel ../shared/kernels/bzImage-7.3.4-idle)"
EVAL_OPS=idle run_eval --workload sqlite,redis,7zip,numpy --config orig,rec,prec,ethp,prcl,tuned-prcl
EVAL_OPS=idle run_eval --workload numpy-thp --config orig,rec,thp,ethp
ran
