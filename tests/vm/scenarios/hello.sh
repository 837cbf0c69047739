# budget: 60
# hello: what the guest kernel offers, as udamon sees it and as the kernel says.
. /scenarios/lib.sh "$@"

"$UD" --version > version.txt 2>&1 || error "udamon does not run in the guest: $(head -c 300 version.txt)"
{
    echo "uname=$(uname -r)"
    echo "nodes=$(cat /sys/devices/system/node/online 2>/dev/null)"
    for n in /sys/devices/system/node/node[0-9]*; do
        [ -d "$n" ] || continue
        echo "${n##*/}.cpulist=$(cat "$n/cpulist")"
        echo "${n##*/}.memtotal_kb=$(awk '/MemTotal/ {print $4}' "$n/meminfo")"
    done
    for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
        [ -d "$t" ] && echo "${t##*/}.nodelist=$(cat "$t/nodelist" 2>/dev/null)"
    done
    echo "demotion_enabled=$(cat /sys/kernel/mm/numa/demotion_enabled 2>/dev/null)"
    echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
    echo "page_idle_bitmap=$([ -e /sys/kernel/mm/page_idle/bitmap ] && echo yes || echo no)"
    echo "damon_admin=$([ -d /sys/kernel/mm/damon/admin ] && echo yes || echo no)"
    echo "damon_stat=$(cat /sys/module/damon_stat/parameters/enabled 2>/dev/null || echo absent)"
    echo "kdamond_threads=$(for d in /proc/[0-9]*; do read -r c 2>/dev/null < $d/comm && case $c in kdamond*) printf '%s ' "$c";; esac; done)"
    echo "swaps=$(tail -n +2 /proc/swaps | awk '{printf "%s:%skB ", $1, $3}')"
    echo "lru_gen=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null)"
    echo "numa_balancing=$(cat /proc/sys/kernel/numa_balancing 2>/dev/null)"
} > guest.txt
cat guest.txt
ran
