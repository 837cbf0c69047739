//! Human-readable sizes, durations and addresses.

/// Formats a byte count with binary units: `"512 B"`, `"4.0 KiB"`,
/// `"64.0 MiB"`, `"1.5 GiB"`, up to EiB, one decimal above bytes.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    // Switch unit before rounding would print "1024.0".
    while v >= 1023.95 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Formats a duration given in microseconds: `"250 us"`, `"12.5 ms"`,
/// `"3.20 s"`, `"125.0 s"`.
pub fn fmt_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us} us")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1e3)
    } else if us < 100_000_000 {
        format!("{:.2} s", us as f64 / 1e6)
    } else {
        format!("{:.1} s", us as f64 / 1e6)
    }
}

/// Formats an address in lowercase hex with a `0x` prefix.
pub fn fmt_addr(addr: u64) -> String {
    format!("{addr:#x}")
}

/// Formats microseconds as seconds with the given number of decimals
/// (used by axis labels, where units are in the axis title).
pub(crate) fn secs(us: f64, decimals: usize) -> String {
    format!("{:.*}", decimals, us / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_table() {
        for (v, want) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1536, "1.5 KiB"),
            (64 << 20, "64.0 MiB"),
            ((1 << 30) - 1, "1.0 GiB"),
            (3 << 39, "1.5 TiB"),
            (u64::MAX, "16.0 EiB"),
        ] {
            assert_eq!(fmt_bytes(v), want, "{v}");
        }
    }

    #[test]
    fn us_table() {
        for (v, want) in [
            (0, "0 us"),
            (999, "999 us"),
            (12_500, "12.5 ms"),
            (3_200_000, "3.20 s"),
            (125_000_000, "125.0 s"),
        ] {
            assert_eq!(fmt_us(v), want, "{v}");
        }
        assert_eq!(fmt_addr(0x7f00_dead_b000), "0x7f00deadb000");
    }
}
