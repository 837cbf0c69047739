# budget: 150
# kdamond-eight: kernel DAMON (vaddr, through sysfs) driven by udamon record on
# the eight-objects workload; check.py follows the hottest object over time.
. /scenarios/lib.sh "$@"
have_kdamond_vaddr
record_eight kdamond 22 rec
ran
