//! The units: size suffixes (powers of 1024) and time units.

/// The multiplier of a size suffix: powers of 1024 whatever the spelling
/// (`K`, `KB`, `KiB`, any case); `""`, `B` (and `iB`, as the simulator's
/// specs always took it) are bytes.
pub fn size_suffix(u: &str) -> Option<u64> {
    let shift = match u.to_ascii_lowercase().as_str() {
        "" | "b" | "ib" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        "e" | "eb" | "eib" => 60,
        _ => return None,
    };
    Some(1u64 << shift)
}

/// A unit of time. Durations are read into, and written from, whole
/// counts of one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
    M,
    H,
    D,
}

impl TimeUnit {
    /// Every unit, shortest first.
    pub const ALL: [TimeUnit; 7] = [
        TimeUnit::Ns,
        TimeUnit::Us,
        TimeUnit::Ms,
        TimeUnit::S,
        TimeUnit::M,
        TimeUnit::H,
        TimeUnit::D,
    ];

    /// Nanoseconds in one unit.
    pub const fn ns(self) -> u128 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
            TimeUnit::M => 60_000_000_000,
            TimeUnit::H => 3_600_000_000_000,
            TimeUnit::D => 86_400_000_000_000,
        }
    }

    /// The unit as durations are written: `ns`, `us`, `ms`, `s`, `m`, `h`,
    /// `d`.
    pub const fn suffix(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
            TimeUnit::M => "m",
            TimeUnit::H => "h",
            TimeUnit::D => "d",
        }
    }

    /// A suffix as read: the written ones, and `µs`, `sec`, `min`
    /// (case-sensitive: `M` is no unit of time).
    pub fn from_suffix(u: &str) -> Option<TimeUnit> {
        Some(match u {
            "ns" => TimeUnit::Ns,
            "us" | "µs" => TimeUnit::Us,
            "ms" => TimeUnit::Ms,
            "s" | "sec" => TimeUnit::S,
            "m" | "min" => TimeUnit::M,
            "h" => TimeUnit::H,
            "d" => TimeUnit::D,
            _ => return None,
        })
    }

    /// The unit's name in the plural, for messages: `microseconds`.
    pub const fn plural(self) -> &'static str {
        match self {
            TimeUnit::Ns => "nanoseconds",
            TimeUnit::Us => "microseconds",
            TimeUnit::Ms => "milliseconds",
            TimeUnit::S => "seconds",
            TimeUnit::M => "minutes",
            TimeUnit::H => "hours",
            TimeUnit::D => "days",
        }
    }
}
