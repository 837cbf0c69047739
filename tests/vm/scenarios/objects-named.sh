# budget: 240
# objects-named: `udamon report objects` on a program of eight named
# objects (workloads/named_objects.c): four globals, named by their data
# symbols, and four heap objects, each from its own allocation site, named
# by it when udamon records allocation sites (--alloc-sites). Three phases
# of SECS seconds, each with its own hot set. Recorded on every path that
# monitors a process here; each phase's objects report (its middle part:
# 2 s after its start to 1 s before its end) is judged against the phase's
# hot set (precision and recall, tests/vm/check.py). At least 50 regions
# (--min-regions): the objects are 2-8 MiB of a process of about 40 MiB,
# and the default 10 let one region straddle a hot and a cold neighbour.
. /scenarios/lib.sh "$@"
need_flag report objects
program_paths
SECS=8
ALLOC=
"$UD" record --help 2>&1 | grep -q -e '--alloc-sites' && ALLOC=--alloc-sites
echo "$ALLOC" > alloc.txt
: > runs.txt
for p in $paths; do
    export NAMED_OBJECTS_LOG="$OUT/$p.log"
    run_stamped "$p" "$UD" record --ops "$p" $ALLOC --min-regions 50 --duration $((3 * SECS + 4))s -o "$p.udr" --json -- named_objects "$SECS" 1
    unset NAMED_OBJECTS_LOG
    echo "$p" >> runs.txt
    [ -s "$p.udr" ] || continue
    "$UD" report objects "$p.udr" --json -n 0 > "$p.all.json" 2> "$p.all.err"
    "$UD" report objects "$p.udr" > "$p.all.txt" 2>&1
    "$UD" report hot "$p.udr" --aggregate > "$p.hot.txt" 2>&1
    for ph in 0 1 2; do
        s=$(sed -n "s/^phase $ph start_us=\([0-9]*\) .*/\1/p" "$p.log" | head -n 1)
        [ -n "$s" ] || continue
        a=$((s / 1000 + 2000))
        b=$((s / 1000 + SECS * 1000 - 1000))
        echo "${a}ms-${b}ms" > "$p.phase$ph.range"
        "$UD" report objects "$p.udr" --json -n 0 --time-range "${a}ms-${b}ms" > "$p.phase$ph.json" 2> "$p.phase$ph.err"
    done
done
ran
