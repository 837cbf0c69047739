# budget: 420
# needs: host-root
# objects-real: `udamon report objects` on Debian's Redis and SQLite
# (docs/objects.md), recorded with --alloc-sites. The programs run from
# the host's root (shared at /host) through its dynamic loader, so that
# the library udamon preloads loads into them and the paths the reports
# name are the guest's view of the host's files.
#   redis: 50,000 SETs of 1 KiB values on 50,000 keys, then 200,000 GETs
#          on 2,000 of them (redis-benchmark), then shutdown;
#   sqlite: a 400,000-row table of 200-byte blobs, then 2,000,000 lookups
#          of 20,000 of its rows with a 200 MB page cache (the eval-real
#          workload).
# On kernel DAMON where it monitors processes, else the engine.
. /scenarios/lib.sh "$@"
need_flag record --alloc-sites
loopback_up
[ -x /host/usr/bin/redis-server ] || skip "no host root with redis-server at /host"
program_paths
P=$(echo "$paths" | cut -d' ' -f1)
echo "$P" > ops.txt
LD=/host/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
LP=/host/usr/lib/x86_64-linux-gnu
host() { "$LD" --library-path "$LP" "$@"; }

# Redis
run_stamped redis "$UD" record --ops "$P" --alloc-sites --min-regions 100 --duration 300s \
    -o redis.udr --json -- "$LD" --library-path "$LP" /host/usr/bin/redis-server \
    --port 6390 --save '' --appendonly no &
RPID=$!
for i in $(seq 60); do
    host /host/usr/bin/redis-cli -p 6390 ping 2>/dev/null | grep -q PONG && break
    sleep 1
done
log "redis up after $i s"
echo "load=$(up)" >> redis.phases
host /host/usr/bin/redis-benchmark -p 6390 -t set -n 50000 -r 50000 -d 1024 -q > redis.bench-set 2>&1
echo "get=$(up)" >> redis.phases
host /host/usr/bin/redis-benchmark -p 6390 -t get -n 200000 -r 2000 -q > redis.bench-get 2>&1
echo "end=$(up)" >> redis.phases
host /host/usr/bin/redis-cli -p 6390 shutdown nosave
wait $RPID
"$UD" report objects redis.udr > redis.objects.txt 2>&1
"$UD" report objects redis.udr --json -n 0 > redis.objects.json 2>&1
"$UD" report hot redis.udr --aggregate -n 10 > redis.hot.txt 2>&1
ls -la redis.udr* > redis.files

# SQLite
rm -f /tmp/o.db
host /host/usr/bin/sqlite3 /tmp/o.db 'create table t(id integer primary key, k integer, v blob); with recursive c(i) as (select 1 union all select i+1 from c where i < 400000) insert into t select i, abs(random()) % 1000, randomblob(200) from c;'
run_stamped sqlite "$UD" record --ops "$P" --alloc-sites --min-regions 100 --duration 300s \
    -o sqlite.udr --json -- "$LD" --library-path "$LP" /host/usr/bin/sqlite3 /tmp/o.db \
    'pragma cache_size=-200000; select sum(length(v)) from t; with recursive c(i) as (select 1 union all select i+1 from c where i < 2000000) select sum((select length(v) from t where id = 1 + (i * 7919) % 20000)) from c;'
"$UD" report objects sqlite.udr > sqlite.objects.txt 2>&1
"$UD" report objects sqlite.udr --json -n 0 > sqlite.objects.json 2>&1
"$UD" report hot sqlite.udr --aggregate -n 10 > sqlite.hot.txt 2>&1
ls -la sqlite.udr* > sqlite.files
rm -f /tmp/o.db
ran
