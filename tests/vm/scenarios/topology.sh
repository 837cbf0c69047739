# budget: 60
# topology: the guest's NUMA and memory-tier layout as the kernel reports it
# (groundwork for tiering tests). Node 1 is CPU-less; with QEMU's HMAT
# (tests/vm/run's default, --tiers) it is slower than node 0, and the kernel
# puts it in a lower memory tier. SKIPs when the guest has one tier
# (tests/vm/run --no-tiers, or a kernel that ignores HMAT).
#
# topology.txt holds key=value lines for check.py; the other files are the
# raw dumps. Nothing here changes the guest except demotion_enabled, which is
# switched on, read back, and restored.
. /scenarios/lib.sh "$@"
have_two_nodes

# the value of a sysfs file on one line (newlines as spaces)
val() { tr '\n' ' ' < "$1" 2>/dev/null | sed 's/ *$//'; }

{
    echo "uname=$(uname -r)"
    echo "nodes_online=$(val /sys/devices/system/node/online)"
    echo "nodes_has_memory=$(val /sys/devices/system/node/has_memory)"
    echo "nodes_has_cpu=$(val /sys/devices/system/node/has_cpu)"
    echo "numa_balancing=$(val /proc/sys/kernel/numa_balancing)"
    echo "block_size_bytes=$(val /sys/devices/system/memory/block_size_bytes)"
    echo "demotion_enabled=$(val /sys/kernel/mm/numa/demotion_enabled)"
    for n in /sys/devices/system/node/node[0-9]*; do
        [ -d "$n" ] || continue
        k=${n##*/}
        echo "$k.cpulist=$(val "$n/cpulist")"
        echo "$k.distance=$(val "$n/distance")"
        echo "$k.memtotal_kb=$(awk '/MemTotal/ {print $4}' "$n/meminfo")"
        # memory blocks: how many, the first and last index, how many online
        blocks=$(ls -d "$n"/memory[0-9]* 2>/dev/null | sed 's/.*memory//' | sort -n)
        echo "$k.memory_blocks=$(echo "$blocks" | grep -c .)"
        echo "$k.memory_block_range=$(echo "$blocks" | head -n 1)-$(echo "$blocks" | tail -n 1)"
        on=0
        for b in $blocks; do
            [ "$(cat /sys/devices/system/memory/memory$b/online 2>/dev/null)" = 1 ] && on=$((on + 1))
        done
        echo "$k.memory_blocks_online=$on"
        # HMAT-derived performance, per access class (access0: any
        # initiator, access1: CPUs only) and the initiator nodes
        for a in "$n"/access[0-9]*; do
            [ -d "$a" ] || continue
            ak=$k.${a##*/}
            for f in read_latency write_latency read_bandwidth write_bandwidth; do
                [ -f "$a/initiators/$f" ] && echo "$ak.$f=$(val "$a/initiators/$f")"
            done
            echo "$ak.initiators=$(ls "$a/initiators" 2>/dev/null | grep '^node' | tr '\n' ' ' | sed 's/ *$//')"
            echo "$ak.targets=$(ls "$a/targets" 2>/dev/null | grep '^node' | tr '\n' ' ' | sed 's/ *$//')"
        done
        if [ -d "$n/memory_side_cache" ]; then
            for c in "$n"/memory_side_cache/index*; do
                [ -d "$c" ] || continue
                for f in "$c"/*; do
                    [ -f "$f" ] && echo "$k.cache.${c##*/}.${f##*/}=$(val "$f")"
                done
            done
        fi
    done
    for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
        [ -d "$t" ] || continue
        echo "${t##*/}.nodelist=$(val "$t/nodelist")"
    done
} > topology.txt

# raw dumps: every readable file under the nodes' access and cache
# directories and the tiers, the memory blocks, the zones, the kernel's
# messages about the firmware tables and tiers
{
    for f in $(find /sys/devices/system/node/node*/access* /sys/devices/system/node/node*/memory_side_cache \
            /sys/devices/virtual/memory_tiering -type f 2>/dev/null | sort); do
        case $f in */uevent|*/power/*) continue ;; esac
        echo "$f: $(val "$f")"
    done
    for f in $(find /sys/devices/system/node/node*/access* -type l 2>/dev/null | sort); do
        echo "$f -> $(readlink "$f")"
    done
} > sysfs.txt
for n in /sys/devices/system/node/node[0-9]*; do
    ls -d "$n"/memory[0-9]* 2>/dev/null | sed 's/.*memory//' | sort -n | tr '\n' ' ' | sed "s/^/${n##*/}: /"
    echo
done > memory-blocks.txt
for b in /sys/devices/system/memory/memory[0-9]*; do
    echo "${b##*/} online=$(val "$b/online") state=$(val "$b/state") zones=$(val "$b/valid_zones") removable=$(val "$b/removable")"
done > memory-block-states.txt
grep -E '^Node|^ +(present|managed) ' /proc/zoneinfo > zones.txt
dmesg > dmesg.txt 2>&1
grep -iE 'hmat|srat|slit|numa|memory.tier|demotion|node [01]' dmesg.txt > dmesg-topology.txt
# the demotion paths the kernel built ("Demotion targets for Node 0:
# preferred: 1, fallback: 1"; nothing when the kernel prints no such line)
sed -n 's/.*Demotion targets for Node \([0-9]*\): \(.*\)/node\1.demotion_targets=\2/p' dmesg.txt >> topology.txt
cat topology.txt

# the tiers: SKIP when the kernel sees one (no HMAT data for node 1)
ntiers=$(grep -c '^memory_tier[0-9]*\.nodelist=' topology.txt)
if [ ! -d /sys/devices/virtual/memory_tiering ]; then
    skip "no /sys/devices/virtual/memory_tiering: kernel without memory tiers"
fi
if [ "$ntiers" -lt 2 ]; then
    skip "the guest has $ntiers memory tier ($(grep '^memory_tier' topology.txt | tr '\n' ' ' | sed 's/ *$//')): node 1 has no slower HMAT latency and bandwidth (tests/vm/run --no-tiers, or an HMAT this kernel ignores)"
fi

# demotion_enabled: on, read back, restored
dem=/sys/kernel/mm/numa/demotion_enabled
if [ -f "$dem" ]; then
    orig=$(cat "$dem")
    if echo true > "$dem" 2> demotion.err; then
        echo "demotion_write=ok" >> topology.txt
    else
        echo "demotion_write=failed $(tr '\n' ' ' < demotion.err)" >> topology.txt
    fi
    echo "demotion_readback=$(cat "$dem")" >> topology.txt
    case $orig in true|1|y|Y) ;; *) echo false > "$dem" ;; esac
    echo "demotion_restored=$(cat "$dem")" >> topology.txt
else
    echo "demotion_write=absent" >> topology.txt
fi

# udamon's own view (check.py compares it with the kernel's)
if "$UD" topology --help > /dev/null 2>&1; then
    "$UD" topology --json > udamon-topology.json 2> udamon-topology.err
    echo "udamon_topology_rc=$?" >> topology.txt
    "$UD" topology > udamon-topology.txt 2>&1
else
    echo "udamon_topology_rc=absent" >> topology.txt
fi
ran
