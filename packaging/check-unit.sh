#!/usr/bin/env bash
# Check packaging/udamon.service with systemd-analyze.
#
#   packaging/check-unit.sh PATH-TO-UDAMON [UNIT-FILE]
#
# `systemd-analyze verify` refuses a unit whose ExecStart= binary does not
# exist, so the unit is copied to a scratch directory with /usr/bin/udamon
# replaced by PATH-TO-UDAMON. verify exits 0 even for an unknown key or an
# unparsable value (it only prints "..., ignoring"), so its output is read:
# every line must be one of the known remarks about the environment (no
# systemd running as PID 1, no D-Bus, no cgroup hierarchy: a container or a
# CI runner); anything else, in particular every "FILE:LINE: ..." remark on
# the unit's syntax, fails the check.
#
# Exit: 0 the unit is clean; 1 it is not; 2 usage error; 3 no systemd-analyze.
set -euo pipefail

die() { echo "check-unit: $*" >&2; exit "${2:-2}"; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: check-unit.sh PATH-TO-UDAMON [UNIT-FILE]"
bin=$1
unit=${2:-"$(dirname "$0")/udamon.service"}
[ -f "$unit" ] || die "no unit file at $unit"
[ -x "$bin" ] && [ -f "$bin" ] || die "$bin is not an executable file (give the installed udamon binary)"
bin=$(realpath "$bin")
command -v systemd-analyze >/dev/null 2>&1 ||
    die "systemd-analyze is not installed (apt-get install systemd)" 3
grep -q '^ExecStart=/usr/bin/udamon ' "$unit" ||
    die "$unit has no 'ExecStart=/usr/bin/udamon ...' line to point at $bin" 1

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Same file name: verify derives the unit name from it.
copy=$scratch/udamon.service
bin_sed=$(printf '%s' "$bin" | sed 's/[&|\\]/\\&/g')
sed "s|^\(Exec[A-Za-z]*=[-@:+!]*\)/usr/bin/udamon\b|\1$bin_sed|" "$unit" >"$copy"

# --man=no: the man page is generated at install time, its absence here says
# nothing about the unit.
set +e
out=$(SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$copy" 2>&1)
rc=$?
set -e

# Remarks about the machine, not about the unit.
env_re='System has not been booted with systemd|Failed to connect to (the )?(system |user )?(scope )?bus|Failed to (create|allocate|set ?up|initialize|open|mount|determine|read|get) .*(cgroup|bus|manager|namespace|/proc/|/sys/fs/cgroup|/dev/kmsg|/dev/tty|watchdog|credentials)|Cannot determine cgroup|cgroup.*(not|No such)|Running in chroot, ignoring|No such file or directory.*(/run/systemd|/sys/fs/cgroup)|Failed to set up .*(unit|transient|scope)|Unit .*\.(slice|target|socket) not found|Failed to load configuration for .*\.(target|slice)|-\.slice|system\.slice|Manager .* not running'

bad=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    if [[ $line == "$copy:"* || $line == "udamon.service:"* ]]; then
        # About the unit itself: never acceptable.
        echo "check-unit: unit: ${line/#$copy/$unit}" >&2
        bad=1
    elif [[ $line =~ $env_re ]]; then
        echo "check-unit: environment (accepted): $line" >&2
    else
        echo "check-unit: unexpected: $line" >&2
        bad=1
    fi
done <<<"$out"

if [ $bad = 0 ] && [ $rc != 0 ]; then
    # A failure that printed only environment remarks: verify could not load
    # the unit at all, so nothing was checked.
    echo "check-unit: systemd-analyze verify exited $rc; nothing was checked" >&2
    bad=1
fi

# The exposure score, as a guard against a hardening line lost in an edit
# (offline analysis exists from systemd 250 on). 2.6 with systemd 252 when
# written (3.0 before IPAddressDeny=, PrivateMounts= and ~@privileged).
if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
    set +e
    sec=$(systemd-analyze security --offline=yes --threshold=29 "$copy" 2>&1)
    src=$?
    set -e
    overall=$(grep -o 'Overall exposure level.*' <<<"$sec" | head -n1)
    echo "check-unit: ${overall:-no exposure level printed}" >&2
    if [ $src != 0 ]; then
        echo "check-unit: exposure above 2.9 (systemd-analyze security --offline=yes $unit)" >&2
        bad=1
    fi
fi

if [ $bad != 0 ]; then
    echo "check-unit: FAIL $unit" >&2
    exit 1
fi
echo "check-unit: ok $unit (systemd-analyze verify, ExecStart=$bin)"
