# budget: 900
# needs: host-root
# eval-real: `udamon eval` on real programs (SQLite and Redis from the
# host's Debian packages), one repeat of orig, rec and prcl: the reduced
# form of eval-full that CI runs. check.py checks that every run ended
# well, that rec measured the monitor, and that prcl saved memory.
. /scenarios/lib.sh "$@"
run_eval --workload sqlite,redis --config orig,rec,prcl --repeats 1
ran
