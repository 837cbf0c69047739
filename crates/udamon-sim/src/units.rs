//! Sizes ("64M", "10T", "4096") and durations ("2s", "100ms").

/// Parses a size: a number with an optional K, M, G or T suffix (powers of
/// 1024; a trailing "B" or "iB" is accepted). Fractions are allowed with a
/// suffix ("1.5G").
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                'P' => 1 << 50,
                _ => {
                    return Err(format!(
                        "unknown unit \"{c}\" in size \"{s}\" (expected K, M, G, T or P)"
                    ))
                }
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("\"{s}\" is not a size (expected a number with K, M, G or T)"))?;
    if v.is_nan() || v < 0.0 || v * mult as f64 >= u64::MAX as f64 {
        return Err(format!("size \"{s}\" is out of range"));
    }
    Ok((v * mult as f64).round() as u64)
}

/// Parses a duration into microseconds: a number with us, ms, s, m or h.
pub fn parse_duration_us(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| format!("duration \"{s}\" has no unit (expected us, ms, s, m or h)"))?;
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" | "min" => 60e6,
        "h" => 3600e6,
        _ => {
            return Err(format!(
                "unknown unit \"{unit}\" in duration \"{s}\" (expected us, ms, s, m or h)"
            ))
        }
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("\"{s}\" is not a duration (expected a number and a unit, like 2s)")
    })?;
    if v.is_nan() || v < 0.0 || v * mult >= u64::MAX as f64 {
        return Err(format!("duration \"{s}\" is out of range"));
    }
    Ok((v * mult).round() as u64)
}

/// Parses a latency into microseconds, with sub-microsecond resolution:
/// a number with ns, us, ms or s ("100ns", "25us").
pub fn parse_latency_us(s: &str) -> Result<f64, String> {
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
pub fn parse_cost_us_per_byte(s: &str) -> Result<f64, String> {
    let (t, sz) = s
        .split_once('/')
        .ok_or_else(|| format!("cost \"{s}\" is not TIME/SIZE (like \"10us/4K\")"))?;
    let us = parse_latency_us(t)?;
    let bytes = parse_size(sz)?;
    if bytes == 0 {
        return Err(format!("cost \"{s}\" is per 0 bytes"));
    }
    Ok(us / bytes as f64)
}

/// A duration in microseconds in the largest of h, m, s, ms and us that
/// writes it exactly ("1000000h", "100ms", "1500us"): as a config writes it.
pub fn format_duration_us(us: u64) -> String {
    for (unit, n) in [
        ("h", 3_600_000_000u64),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
    ] {
        if us >= n && us.is_multiple_of(n) {
            return format!("{}{unit}", us / n);
        }
    }
    format!("{us}us")
}

/// A byte count in binary units with one decimal where it helps
/// ("1 GiB", "21.5 GiB", "512 B").
pub fn format_bytes(b: u128) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut i = 0;
    let mut scale: u128 = 1;
    while i + 1 < UNITS.len() && b >= scale << 10 {
        scale <<= 10;
        i += 1;
    }
    if b.is_multiple_of(scale) || i == 0 {
        return format!("{} {}", b / scale, UNITS[i]);
    }
    let v = format!("{:.1}", b as f64 / scale as f64);
    format!("{} {}", v.strip_suffix(".0").unwrap_or(&v), UNITS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(format_duration_us(3_600_000_000_000_000), "1000000h");
        assert_eq!(format_duration_us(100_000), "100ms");
        assert_eq!(format_duration_us(1_500), "1500us");
        assert_eq!(format_duration_us(90_000_000), "90s");
        assert_eq!(format_duration_us(0), "0us");
        for s in ["2m", "5us", "1h", "7s"] {
            assert_eq!(format_duration_us(parse_duration_us(s).unwrap()), s);
        }
        assert_eq!(format_bytes(1 << 30), "1 GiB");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
        assert_eq!(format_bytes(u128::MAX), format_bytes(u128::MAX)); // no panic
        assert!(format_bytes(u128::from(u64::MAX)).ends_with("EiB"));
    }

    #[test]
    fn sizes() {
        let ok = [
            ("4K", 4096),
            ("64M", 64 << 20),
            ("10T", 10 << 40),
            ("2MB", 2 << 20),
            ("1.5G", 3 << 29),
            ("4096", 4096),
            ("1GiB", 1 << 30),
        ];
        for (s, want) in ok {
            assert_eq!(parse_size(s), Ok(want), "{s}");
        }
        for bad in ["", "x", "4Q", "-1M", "1e30T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("4Q").unwrap_err().contains("unknown unit \"Q\""));
    }

    #[test]
    fn durations() {
        let ok = [
            ("5us", 5),
            ("100ms", 100_000),
            ("2s", 2_000_000),
            ("1.5s", 1_500_000),
            ("2m", 120_000_000),
            ("1h", 3_600_000_000),
        ];
        for (s, want) in ok {
            assert_eq!(parse_duration_us(s), Ok(want), "{s}");
        }
        assert!(parse_duration_us("2sx")
            .unwrap_err()
            .contains("unknown unit \"sx\""));
        assert!(parse_duration_us("10").unwrap_err().contains("no unit"));
        assert!(parse_duration_us("fast").is_err());
    }

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
