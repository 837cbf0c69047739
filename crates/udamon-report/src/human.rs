//! Human-readable sizes, durations and addresses.

/// Byte counts for people (`"512 B"`, `"4.0 KiB"`, `"1.5 GiB"`): the
/// core's, which the command line, the session and the service print too.
pub use udamon_core::units::fmt_bytes;

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
