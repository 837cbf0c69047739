# budget: 1500
# objects-lock: the seeds' out-of-core case study, live (docs/objects.md):
# a program's hot objects found by a record, then kept in memory by the
# preloaded library from `udamon hints`, under a cgroup v2 memory.max of
# 70% of the program's peak memory with zram swap (Daptrace's setting).
# For each program:
#   1. `udamon record --alloc-sites` in a cgroup without a limit: the
#      record, and the cgroup's memory.peak;
#   2. `udamon hints --max-bytes` (60% of the limit);
#   3. three rounds, each the program under the limit without hints, then
#      with `--hints`, both monitored the same way (`udamon record`); each
#      does fixed work, so its wall time (cpu-TAG.txt) is the figure.
# Programs: lockwork (tests/vm/workloads/lockwork.c: a hot global and a
# hot heap index, a streamed history) in two shapes, `stream` (192 MiB of
# history, 4,096 random touches per iteration) and `hot` (64 MiB, 16,384
# touches), and SQLite from the host (lookups of 30,000 of 300,000 rows;
# needs the host root, skipped without it). By hand: too long for CI.
# needs: host-root
. /scenarios/lib.sh "$@"
need_flag record --hints
have_swap
program_paths
P=$(echo "$paths" | cut -d' ' -f1)
echo "$P" > ops.txt
CG=/sys/fs/cgroup
if [ ! -e "$CG/cgroup.controllers" ]; then
    mkdir -p "$CG" && mount -t cgroup2 none "$CG" 2>/dev/null ||
        skip "no cgroup v2"
fi
echo +memory > "$CG/cgroup.subtree_control" 2>/dev/null
: > runs.txt

# lock_case NAME CMD...: the case study for one program
lock_case() {
    name=$1; shift
    cg=$CG/udlock-$name
    rmdir "$cg" 2>/dev/null; mkdir -p "$cg" || error "cannot make $cg"
    in_cg="echo \$\$ > $cg/cgroup.procs && exec \"\$@\""
    run_stamped "$name-rec" "$UD" record --ops "$P" --alloc-sites --min-regions 100 --duration 600s \
        -o "$name.udr" --json -- sh -c "$in_cg" sh "$@"
    peak=$(cat "$cg/memory.peak" 2>/dev/null || echo 0)
    [ "$peak" -gt 0 ] || { echo "$name: no memory.peak" >> problems.txt; return; }
    limit=$((peak * 7 / 10))
    budget=$((limit * 6 / 10))
    echo "$name peak=$peak limit=$limit budget=$budget" >> runs.txt
    "$UD" hints "$name.udr" -o "$name.hints.toml" --max-bytes "$budget" --json > "$name.hints.json" 2> "$name.hints.err"
    "$UD" report objects "$name.udr" > "$name.objects.txt" 2>&1
    echo "$limit" > "$cg/memory.max"
    for r in 1 2 3; do
        for how in plain hints; do
            h=
            [ "$how" = hints ] && h="--hints $name.hints.toml"
            tag=$name-$how-$r
            run_stamped "$tag" "$UD" record --ops "$P" $h --min-regions 100 --duration 900s \
                -o "$tag.udr" --json -- sh -c "$in_cg" sh "$@"
            echo "$tag $(cat "$cg/memory.swap.events" 2>/dev/null | tr '\n' ' ')" >> runs.txt
            rm -f "$tag.udr"
        done
    done
    echo max > "$cg/memory.max"
}

lock_case stream lockwork 300 4096 192
lock_case hot lockwork 200 16384 64
if [ -x /host/usr/bin/sqlite3 ]; then
    LD=/host/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
    LP=/host/usr/lib/x86_64-linux-gnu
    rm -f /tmp/l.db
    "$LD" --library-path "$LP" /host/usr/bin/sqlite3 /tmp/l.db 'create table t(id integer primary key, k integer, v blob); with recursive c(i) as (select 1 union all select i+1 from c where i < 300000) insert into t select i, abs(random()) % 1000, randomblob(200) from c;'
    lock_case sqlite "$LD" --library-path "$LP" /host/usr/bin/sqlite3 /tmp/l.db \
        'pragma cache_size=-100000; select sum(length(v)) from t; with recursive c(i) as (select 1 union all select i+1 from c where i < 200000) select sum((select length(v) from t where id = 1 + (i * 7919) % 30000)) from c;'
    rm -f /tmp/l.db
fi
ran
