# budget: 150
# idle-eight: udamon's own engine over the idle page bitmap, driven by
# udamon record on the eight-objects workload; same check as kdamond-eight.
. /scenarios/lib.sh "$@"
have_idle_bitmap
record_eight idle 22 rec
ran
