# budget: 10800
# needs: host-root
# eval-full: every workload of eval-real.toml under every configuration,
# three repeats (hours under TCG; not in `all`: run it with --scenario
# eval-full). docs/evaluation.md holds its tables.
. /scenarios/lib.sh "$@"
run_eval
ran
