//! Sizes and times written back: exactly, as scheme files write them (and
//! [`super::parse_size`] and [`super::parse_duration`] read them back), or
//! for people.

use super::unit::TimeUnit;

/// Power-of-1024 suffixes as [`fmt_size`] writes them, largest first.
const SIZE_UNITS: [(u32, &str); 6] = [
    (60, "E"),
    (50, "P"),
    (40, "T"),
    (30, "G"),
    (20, "M"),
    (10, "K"),
];

/// `4K`, `128M`, `4097B`, `0B`: the largest power-of-1024 unit that
/// divides, exactly, as scheme files write sizes.
pub fn fmt_size(v: u64) -> String {
    if v != 0 {
        for (shift, unit) in SIZE_UNITS {
            if v.trailing_zeros() >= shift {
                return format!("{}{unit}", v >> shift);
            }
        }
    }
    format!("{v}B")
}

/// [`fmt_size`] when a unit divides; otherwise one decimal in the largest
/// unit of which there are at least ten (`12.0K` for 12,289 bytes), else
/// bytes: the auto-tuner's knob values.
pub fn fmt_size_approx(v: u64) -> String {
    if v != 0 && v.trailing_zeros() >= 10 {
        return fmt_size(v);
    }
    for (shift, unit) in SIZE_UNITS {
        let m = 1u64 << shift;
        if v / 10 >= m {
            return format!("{:.1}{unit}", v as f64 / m as f64);
        }
    }
    format!("{v}B")
}

/// `2m`, `100ms`, `7us`, `0s`: `v` counts of `unit` in the largest of h,
/// m, s, ms, us and ns that divides, exactly, as scheme files write times.
pub fn fmt_time(v: u64, unit: TimeUnit) -> String {
    const UNITS: [TimeUnit; 6] = [
        TimeUnit::H,
        TimeUnit::M,
        TimeUnit::S,
        TimeUnit::Ms,
        TimeUnit::Us,
        TimeUnit::Ns,
    ];
    let ns = u128::from(v) * unit.ns();
    if ns == 0 {
        return "0s".into();
    }
    let u = UNITS
        .into_iter()
        .find(|u| ns.is_multiple_of(u.ns()))
        .unwrap_or(TimeUnit::Ns);
    format!("{}{}", ns / u.ns(), u.suffix())
}

/// [`fmt_time`] of microseconds: `1500us`, `100ms`, `90s`, `2m`, `0s`.
pub fn fmt_time_us(us: u64) -> String {
    fmt_time(us, TimeUnit::Us)
}

/// Seconds where a time is a second or more, to the millisecond (`5s`,
/// `16.5s`, `120s`), else `250ms` or `7us`: the auto-tuner's knob values,
/// plotted in seconds.
pub fn fmt_time_us_approx(us: u64) -> String {
    if us == 0 {
        "0s".into()
    } else if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us >= 1_000_000 {
        let s = format!("{:.3}", us as f64 / 1e6);
        format!("{}s", s.trim_end_matches('0').trim_end_matches('.'))
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// How a size is written for people: binary units, a space, `B` below
/// 1 KiB in every style. The styles differ in decimals; each is what its
/// readers have always seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Human {
    /// One decimal: `1.0 KiB`, `64.0 MiB`, `16.0 EiB` (reports, the
    /// command line, the service: [`fmt_bytes`]).
    OneDecimal,
    /// One decimal below ten units, none above: `4.0 KiB`, `128 MiB`
    /// (scheme descriptions).
    Short,
    /// Whole units bare, else one decimal: `1 GiB`, `21.5 GiB` (the
    /// simulator's bounds).
    Trimmed,
}

const HUMAN_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// `bytes` for people, in `style`.
pub fn human_size(bytes: u128, style: Human) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    match style {
        Human::OneDecimal => {
            let mut v = bytes as f64 / 1024.0;
            let mut i = 1;
            // Switch unit before rounding would print "1024.0".
            while v >= 1023.95 && i + 1 < HUMAN_UNITS.len() {
                v /= 1024.0;
                i += 1;
            }
            format!("{v:.1} {}", HUMAN_UNITS[i])
        }
        Human::Short => {
            let mut x = bytes as f64;
            let mut i = 0;
            while x >= 1024.0 && i + 1 < HUMAN_UNITS.len() {
                x /= 1024.0;
                i += 1;
            }
            if x < 10.0 {
                format!("{x:.1} {}", HUMAN_UNITS[i])
            } else {
                format!("{x:.0} {}", HUMAN_UNITS[i])
            }
        }
        Human::Trimmed => {
            let (mut i, mut scale) = (0, 1u128);
            while i + 1 < HUMAN_UNITS.len() && bytes >= scale << 10 {
                scale <<= 10;
                i += 1;
            }
            if bytes.is_multiple_of(scale) {
                return format!("{} {}", bytes / scale, HUMAN_UNITS[i]);
            }
            let v = format!("{:.1}", bytes as f64 / scale as f64);
            format!("{} {}", v.strip_suffix(".0").unwrap_or(&v), HUMAN_UNITS[i])
        }
    }
}

/// A byte count for people, [`Human::OneDecimal`]: `512 B`, `4.0 KiB`,
/// `1.5 GiB`.
pub fn fmt_bytes(bytes: u64) -> String {
    human_size(bytes.into(), Human::OneDecimal)
}
