//! What the simulator's specs read beyond `udamon_core::units` (where
//! sizes and durations are read): latencies ("100ns", finer than a
//! microsecond) and costs per amount of memory ("10us/4K").

use udamon_core::units::{parse_size, Fraction};

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
    }
}
