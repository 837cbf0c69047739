//! `udamon damon-stat`: what the kernel's DAMON_STAT module says of all
//! physical memory, read from its parameters. Read-only: udamon never
//! enables the module nor changes its parameters.

use std::path::Path;

use anyhow::Result;
use udamon_cli::DamonStatArgs;
use udamon_core::units::fmt_bytes;
use udamon_kdamon::damon_stat::{self, DamonStat, ENABLE_HINT, NEEDS, PARAMETERS};

use crate::output::print_json;
use crate::CapabilityError;

/// The percentiles shown in text (JSON has all 101).
const SHOWN: [usize; 11] = [0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 100];

pub fn run(a: DamonStatArgs) -> Result<()> {
    let Some(s) = damon_stat::read(&a.root)? else {
        let kernel = std::fs::read_to_string(a.root.join("proc/sys/kernel/osrelease"))
            .map_or("unknown".into(), |k| k.trim().to_string());
        return Err(CapabilityError(format!(
            "DAMON_STAT is not available here: no /{PARAMETERS} (DAMON_STAT needs {NEEDS}; \
             this kernel is {kernel}; `udamon features` says more)"
        ))
        .into());
    };
    if a.json {
        return print_json(&s);
    }
    if !s.enabled {
        println!(
            "DAMON_STAT is present but disabled: its figures are not updated.\n\
             udamon never enables it; an administrator can, with:\n  {ENABLE_HINT}"
        );
        return Ok(());
    }
    print!("{}", text(&s, &a.root));
    Ok(())
}

/// The figures for people.
fn text(s: &DamonStat, root: &Path) -> String {
    let mut out = String::new();
    let has = |f: &str| root.join(PARAMETERS).join(f).exists();
    let pid = match s.kdamond_pid {
        Some(p) => format!("kdamond pid {p}"),
        None if has("kdamond_pid") => "kdamond not running".into(),
        None => "kdamond pid not reported (Linux 7.2+ reports it)".into(),
    };
    out += &format!(
        "DAMON_STAT: enabled, {pid} (udamon only reads it; refreshed at most every 5 s)\n"
    );
    out += &format!(
        "estimated memory bandwidth: {}/s\n",
        fmt_bytes(s.estimated_memory_bandwidth)
    );
    out += &match s.aggr_interval_us {
        Some(us) => format!("aggregation interval: {}\n", human_us(us)),
        None => "aggregation interval: not reported (Linux 6.18+ reports it)\n".into(),
    };
    out += "idle time of physical memory by size: pN is how long N% of memory (by size) has \
            at most been idle; \"hot for\" is memory accessed in the last aggregation interval, \
            for that long\n";
    for p in SHOWN {
        let Some(ms) = s.idle_ms(p) else { continue };
        out += &format!("  {:<5} {}\n", format!("p{p}"), idle(ms));
    }
    out
}

/// An idle time as DAMON_STAT gives it: idle for that long, or (negative)
/// accessed and hot for that long.
fn idle(ms: i64) -> String {
    let abs = ms.unsigned_abs();
    let t = match abs {
        ..1000 => format!("{abs} ms"),
        _ => human_us(abs.saturating_mul(1000)),
    };
    if ms < 0 {
        format!("hot for {t} (accessed)")
    } else {
        format!("idle {t}")
    }
}

/// A duration for people: `750 us`, `100 ms`, `4.7 s`, `2.5 min`, `3.0 h`.
fn human_us(us: u64) -> String {
    let ms = us as f64 / 1e3;
    if us < 1000 {
        format!("{us} us")
    } else if us < 1_000_000 {
        if us.is_multiple_of(1000) {
            format!("{} ms", us / 1000)
        } else {
            format!("{ms:.1} ms")
        }
    } else if ms < 60_000.0 {
        format!("{:.1} s", ms / 1e3)
    } else if ms < 3_600_000.0 {
        format!("{:.1} min", ms / 60e3)
    } else {
        format!("{:.1} h", ms / 3_600e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_for_people() {
        assert_eq!(human_us(999), "999 us");
        assert_eq!(human_us(100_000), "100 ms");
        assert_eq!(human_us(1_500), "1.5 ms");
        assert_eq!(human_us(4_700_000), "4.7 s");
        assert_eq!(human_us(150_000_000), "2.5 min");
        assert_eq!(human_us(3 * 3_600_000_000), "3.0 h");
        assert_eq!(idle(-300), "hot for 300 ms (accessed)");
        assert_eq!(idle(0), "idle 0 ms");
        assert_eq!(idle(90_000), "idle 1.5 min");
    }
}
