//! What the simulator's specs read beyond `udamon_core::units` (where
//! sizes and durations are read): latencies ("100ns", finer than a
//! microsecond), costs per amount of memory ("10us/4K") and bandwidths
//! ("40GB/s").

use udamon_core::units::{parse_duration_us, parse_size, Fraction};

/// Parses a latency into microseconds, with sub-microsecond resolution:
/// a number with ns, us, ms or s ("100ns", "25us").
pub(crate) fn parse_latency_us(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| format!("latency \"{s}\" has no unit (expected ns, us, ms or s)"))?;
    let (num, unit) = t.split_at(split);
    let mult = match unit {
        "ns" => 1e-3,
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        _ => {
            return Err(format!(
                "unknown unit \"{unit}\" in latency \"{s}\" (expected ns, us, ms or s)"
            ))
        }
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("\"{s}\" is not a latency (expected a number and a unit, like 25us)")
    })?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("latency \"{s}\" is out of range"));
    }
    Ok(v * mult)
}

/// Parses a cost per amount of memory, "TIME/SIZE" ("10us/4K", "200us/2M"),
/// into microseconds per byte.
pub(crate) fn parse_cost_us_per_byte(s: &str) -> Result<f64, String> {
    let (t, sz) = s
        .split_once('/')
        .ok_or_else(|| format!("cost \"{s}\" is not TIME/SIZE (like \"10us/4K\")"))?;
    let us = parse_latency_us(t)?;
    let bytes = parse_size(sz, Fraction::Round).map_err(|e| e.to_string())?;
    if bytes == 0 {
        return Err(format!("cost \"{s}\" is per 0 bytes"));
    }
    Ok(us / bytes as f64)
}

/// Parses a bandwidth, "SIZE/DURATION" ("40GB/s", "256M/s", "1G/100ms";
/// a duration without a number is one of its unit), into bytes per second.
/// Sizes and durations are read with `udamon_core::units`' grammar (sizes
/// in powers of 1024).
pub(crate) fn parse_bandwidth(s: &str) -> Result<f64, String> {
    let (sz, t) = s.split_once('/').ok_or_else(|| {
        format!("bandwidth \"{s}\" is not SIZE/DURATION (like \"40GB/s\" or \"256M/s\")")
    })?;
    let bytes = parse_size(sz, Fraction::Round).map_err(|e| e.to_string())?;
    let t = t.trim();
    let one;
    let t = if !t.is_empty() && t.chars().all(|c| c.is_alphabetic()) {
        one = format!("1{t}");
        one.as_str()
    } else {
        t
    };
    let us = parse_duration_us(t, Fraction::Round).map_err(|e| e.to_string())?;
    if bytes == 0 || us == 0 {
        return Err(format!(
            "bandwidth \"{s}\" is 0 (leave it out for unlimited)"
        ));
    }
    Ok(bytes as f64 * 1e6 / us as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_and_costs() {
        assert_eq!(parse_latency_us("100ns"), Ok(0.1));
        assert_eq!(parse_latency_us("25us"), Ok(25.0));
        assert_eq!(parse_latency_us("1.5ms"), Ok(1500.0));
        assert!(parse_latency_us("3").unwrap_err().contains("no unit"));
        assert!(parse_latency_us("3h").unwrap_err().contains("unknown unit"));
        assert_eq!(parse_cost_us_per_byte("8us/4K"), Ok(8.0 / 4096.0));
        assert!(parse_cost_us_per_byte("8us").is_err());
        assert!(parse_cost_us_per_byte("8us/0").is_err());
        assert_eq!(parse_bandwidth("40GB/s"), Ok(40.0 * (1u64 << 30) as f64));
        assert_eq!(parse_bandwidth("256M/s"), Ok(256.0 * (1u64 << 20) as f64));
        assert_eq!(parse_bandwidth("1G/100ms"), Ok(10.0 * (1u64 << 30) as f64));
        assert_eq!(parse_bandwidth("4096/1s"), Ok(4096.0));
        assert!(parse_bandwidth("40G")
            .unwrap_err()
            .contains("SIZE/DURATION"));
        assert!(parse_bandwidth("0/s").unwrap_err().contains("is 0"));
        assert!(parse_bandwidth("1G/0s").unwrap_err().contains("is 0"));
        assert!(parse_bandwidth("1G/x").is_err());
    }
}
