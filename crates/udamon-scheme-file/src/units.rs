//! Units shared by every format: sizes, times, access frequencies and
//! per-mille values, read from text and written back in the normalised
//! spelling.
//!
//! Numbers are decimal with an optional fraction and optional comma digit
//! groups (`1,024`, as damo prints them); a result must be whole in the unit
//! of the field it lands in (bytes, microseconds, basis points), so nothing
//! is rounded silently.

pub(crate) const SIZE_EXPECTED: &str = "a size like 4K, 2M, 2MB, min or max";
pub(crate) const FREQ_EXPECTED: &str =
    "an access frequency in percent of the maximum like 5, 5% or 12.5%, min or max";
pub(crate) const TIME_EXPECTED: &str = "a time like 100ms, 5s, 2m or 1h, min or max";

pub(crate) const NS_PER_US: u128 = 1_000;
pub(crate) const NS_PER_MS: u128 = 1_000_000;

/// Which end of a `[min, max]` range a value bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Lower,
    Upper,
}

/// `min` and `max` name the lowest and highest value of the field, on either
/// side; `null` and `na` (as in the seeds) mean "unbounded on this side", so
/// they need a side. Returns whether the placeholder means the highest value.
pub(crate) fn placeholder(s: &str, side: Option<Side>) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "min" => Some(false),
        "max" => Some(true),
        "null" | "na" => side.map(|s| s == Side::Upper),
        _ => None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnitError {
    /// Not a number with a known unit.
    Syntax,
    /// A fraction of the field's unit (half a byte, 1.5 microseconds).
    NotWhole,
    /// Does not fit the field.
    TooLarge,
    /// A percentage with more than two decimals (finer than a basis point).
    TooFine,
    /// A percentage above 100.
    Above100,
}

struct Decimal {
    mant: u128,
    frac: u32,
}

impl Decimal {
    /// `mant / 10^frac * mult`, if whole.
    fn scaled(&self, mult: u128) -> Result<u128, UnitError> {
        let scaled = self.mant.checked_mul(mult).ok_or(UnitError::TooLarge)?;
        let div = 10u128.checked_pow(self.frac).ok_or(UnitError::TooLarge)?;
        if scaled % div != 0 {
            return Err(UnitError::NotWhole);
        }
        Ok(scaled / div)
    }
}

fn is_num_char(c: char) -> bool {
    c.is_ascii_digit() || c == '.' || c == ','
}

fn parse_decimal(s: &str) -> Result<Decimal, UnitError> {
    let (mut mant, mut frac, mut digits, mut dot) = (0u128, 0u32, 0u32, false);
    if s.ends_with(',') {
        return Err(UnitError::Syntax);
    }
    for c in s.chars() {
        match c {
            '0'..='9' => {
                let d = u128::from(c as u8 - b'0');
                mant = mant
                    .checked_mul(10)
                    .and_then(|m| m.checked_add(d))
                    .ok_or(UnitError::TooLarge)?;
                digits += 1;
                if dot {
                    frac += 1;
                }
            }
            ',' if digits > 0 && !dot => {}
            '.' if !dot => dot = true,
            _ => return Err(UnitError::Syntax),
        }
    }
    if digits == 0 {
        return Err(UnitError::Syntax);
    }
    Ok(Decimal { mant, frac })
}

/// Splits `"1.5 GiB"` into `("1.5", "GiB")`.
fn split_num_unit(s: &str) -> (&str, &str) {
    let end = s.find(|c| !is_num_char(c)).unwrap_or(s.len());
    (&s[..end], s[end..].trim_start())
}

fn size_unit(u: &str) -> Option<u128> {
    let shift = match u.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        "e" | "eb" | "eib" => 60,
        _ => return None,
    };
    Some(1u128 << shift)
}

/// Nanoseconds in a time unit.
pub(crate) fn time_unit(u: &str) -> Option<u128> {
    Some(match u {
        "ns" => 1,
        "us" | "µs" => NS_PER_US,
        "ms" => NS_PER_MS,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return None,
    })
}

/// A word that is only a unit, so that `7 s` (as the DAOS paper prints it)
/// reads as `7s`. `min` is left out: it is the placeholder.
pub(crate) fn is_unit_word(w: &str) -> bool {
    w == "%"
        || (w != "min" && (time_unit(w).is_some() || (!w.is_empty() && size_unit(w).is_some())))
}

/// A bare decimal number such as `7` or `1.5`.
pub(crate) fn is_bare_number(w: &str) -> bool {
    !w.is_empty() && w.chars().all(is_num_char) && w.chars().any(|c| c.is_ascii_digit())
}

/// Bytes: `4096`, `4K`, `4 KiB`, `2MB`, `1.5G`, `0x1000`; units are powers of
/// 1024 whatever their spelling, case-insensitive.
#[cfg(test)]
pub(crate) fn parse_size(s: &str) -> Result<u64, UnitError> {
    parse_size_with(s, false)
}

/// As [`parse_size`]; with `floor`, a fraction of a byte is dropped instead
/// of refused (damo prints sizes rounded to three decimals: `1.333 MiB`).
pub(crate) fn parse_size_with(s: &str, floor: bool) -> Result<u64, UnitError> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return parse_hex(hex);
    }
    let (num, unit) = split_num_unit(s);
    let mult = size_unit(unit).ok_or(UnitError::Syntax)?;
    let d = parse_decimal(num)?;
    let v = match d.scaled(mult) {
        Err(UnitError::NotWhole) if floor => {
            let div = 10u128.checked_pow(d.frac).ok_or(UnitError::TooLarge)?;
            d.mant.checked_mul(mult).ok_or(UnitError::TooLarge)? / div
        }
        r => r?,
    };
    u64::try_from(v).map_err(|_| UnitError::TooLarge)
}

fn parse_hex(hex: &str) -> Result<u64, UnitError> {
    if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(UnitError::Syntax);
    }
    u64::from_str_radix(hex, 16).map_err(|_| UnitError::TooLarge)
}

/// A whole unsigned number: `42`, `1,024`, `500.000`, `0x2a`.
pub(crate) fn parse_uint(s: &str) -> Result<u64, UnitError> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return parse_hex(hex);
    }
    let v = parse_decimal(s)?.scaled(1)?;
    u64::try_from(v).map_err(|_| UnitError::TooLarge)
}

/// A time in nanoseconds: `100ms`, `5 s`, `1.5h`, or damo's `2 m 30 s`. A
/// bare number counts in `bare_ns` nanoseconds.
pub(crate) fn parse_time_ns(s: &str, bare_ns: u128) -> Result<u128, UnitError> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(UnitError::Syntax);
    }
    let mut total = 0u128;
    let mut parts = 0;
    while !rest.is_empty() {
        let num_end = rest.find(|c| !is_num_char(c)).unwrap_or(rest.len());
        if num_end == 0 {
            return Err(UnitError::Syntax);
        }
        let num = &rest[..num_end];
        rest = rest[num_end..].trim_start();
        let unit_end = rest
            .find(|c: char| !(c.is_ascii_alphabetic() || c == 'µ'))
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = rest[unit_end..].trim_start();
        let mult = if unit.is_empty() {
            if parts > 0 || !rest.is_empty() {
                return Err(UnitError::Syntax);
            }
            bare_ns
        } else {
            time_unit(unit).ok_or(UnitError::Syntax)?
        };
        let ns = parse_decimal(num)?.scaled(mult)?;
        total = total.checked_add(ns).ok_or(UnitError::TooLarge)?;
        parts += 1;
    }
    Ok(total)
}

/// Nanoseconds to a whole count of `unit_ns`.
pub(crate) fn ns_to(ns: u128, unit_ns: u128) -> Result<u64, UnitError> {
    if !ns.is_multiple_of(unit_ns) {
        return Err(UnitError::NotWhole);
    }
    u64::try_from(ns / unit_ns).map_err(|_| UnitError::TooLarge)
}

/// Percent to basis points: `5`, `5%`, `5 %`, `12.5%`, at most 100.
pub(crate) fn parse_percent_bp(s: &str) -> Result<u32, UnitError> {
    let s = s.trim();
    let num = s.strip_suffix('%').unwrap_or(s).trim_end();
    let bp = match parse_decimal(num)?.scaled(100) {
        Err(UnitError::NotWhole) => return Err(UnitError::TooFine),
        r => r?,
    };
    if bp > 10_000 {
        return Err(UnitError::Above100);
    }
    Ok(bp as u32)
}

/// A ratio in `per` parts of one (1000 for per-mille, 10000 for basis
/// points): a plain number is already in those parts, `50%` is converted.
pub(crate) fn parse_ratio(s: &str, per: u128) -> Result<u64, UnitError> {
    let s = s.trim();
    let v = match s.strip_suffix('%') {
        Some(num) => match parse_decimal(num.trim_end())?.scaled(per / 100) {
            Err(UnitError::NotWhole) => return Err(UnitError::TooFine),
            r => r?,
        },
        None => parse_decimal(s)?.scaled(1)?,
    };
    u64::try_from(v).map_err(|_| UnitError::TooLarge)
}

/// `4K`, `128M`, `4097B`: the largest power-of-1024 unit that divides.
pub(crate) fn fmt_size(v: u64) -> String {
    const UNITS: [(u32, &str); 6] = [
        (60, "E"),
        (50, "P"),
        (40, "T"),
        (30, "G"),
        (20, "M"),
        (10, "K"),
    ];
    if v != 0 {
        for (shift, unit) in UNITS {
            if v.trailing_zeros() >= shift {
                return format!("{}{unit}", v >> shift);
            }
        }
    }
    format!("{v}B")
}

/// `2m`, `100ms`, `7us`, `0s`: the largest unit that divides.
pub(crate) fn fmt_time_ns(ns: u128) -> String {
    const UNITS: [(u128, &str); 6] = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (NS_PER_MS, "ms"),
        (NS_PER_US, "us"),
        (1, "ns"),
    ];
    if ns == 0 {
        return "0s".into();
    }
    for (mult, unit) in UNITS {
        if ns.is_multiple_of(mult) {
            return format!("{}{unit}", ns / mult);
        }
    }
    unreachable!("every count of nanoseconds divides by one")
}

pub(crate) fn fmt_time_us(us: u64) -> String {
    fmt_time_ns(u128::from(us) * NS_PER_US)
}

pub(crate) fn fmt_time_ms(ms: u64) -> String {
    fmt_time_ns(u128::from(ms) * NS_PER_MS)
}

/// `5%`, `5.5%`, `0.01%`.
pub(crate) fn fmt_percent(bp: u32) -> String {
    let (whole, frac) = (bp / 100, bp % 100);
    match frac {
        0 => format!("{whole}%"),
        f if f % 10 == 0 => format!("{whole}.{}%", f / 10),
        f => format!("{whole}.{f:02}%"),
    }
}

/// For people: `512 B`, `4.0 KiB`, `128 MiB` (one decimal below ten units).
pub(crate) fn human_size(v: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if v < 1024 {
        return format!("{v} B");
    }
    let mut x = v as f64;
    let mut i = 0;
    while x >= 1024.0 && i + 1 < UNITS.len() {
        x /= 1024.0;
        i += 1;
    }
    if x < 10.0 {
        format!("{x:.1} {}", UNITS[i])
    } else {
        format!("{x:.0} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use UnitError::*;

    #[test]
    fn sizes() {
        let cases: &[(&str, Result<u64, UnitError>)] = &[
            ("4096", Ok(4096)),
            ("4K", Ok(4096)),
            ("4k", Ok(4096)),
            ("4 KiB", Ok(4096)),
            ("2MB", Ok(2 << 20)),
            ("2M", Ok(2 << 20)),
            ("500M", Ok(500 << 20)),
            ("1.5G", Ok(3 << 29)),
            ("4.000 KiB", Ok(4096)),
            ("1,024", Ok(1024)),
            ("0x1000", Ok(4096)),
            ("16E", Err(TooLarge)),
            ("15E", Ok(15 << 60)),
            ("1.3K", Err(NotWhole)),
            ("0.5B", Err(NotWhole)),
            ("4Q", Err(Syntax)),
            ("K", Err(Syntax)),
            ("", Err(Syntax)),
            ("-4K", Err(Syntax)),
            ("1..2K", Err(Syntax)),
            (",1", Err(Syntax)),
            ("1,", Err(Syntax)),
            ("0xfffffffffffffffff", Err(TooLarge)),
            ("0xg", Err(Syntax)),
            ("99999999999999999999999999999999999999999", Err(TooLarge)),
        ];
        for (s, want) in cases {
            assert_eq!(parse_size(s), *want, "{s:?}");
        }
        assert_eq!(parse_size_with("1.333 MiB", true), Ok(1_397_751));
        assert_eq!(parse_size_with("1.333 MiB", false), Err(NotWhole));
    }

    #[test]
    fn times() {
        let us = |s: &str| parse_time_ns(s, NS_PER_US).and_then(|ns| ns_to(ns, NS_PER_US));
        let cases: &[(&str, Result<u64, UnitError>)] = &[
            ("5s", Ok(5_000_000)),
            ("7 s", Ok(7_000_000)),
            ("100ms", Ok(100_000)),
            ("2m", Ok(120_000_000)),
            ("2min", Ok(120_000_000)),
            ("1h", Ok(3_600_000_000)),
            ("1d", Ok(86_400_000_000)),
            ("10us", Ok(10)),
            ("10µs", Ok(10)),
            ("1.5s", Ok(1_500_000)),
            ("2 m 30 s", Ok(150_000_000)),
            ("0 ns", Ok(0)),
            ("1000ns", Ok(1)),
            ("1500ns", Err(NotWhole)),
            ("42", Ok(42)),
            ("5q", Err(Syntax)),
            ("5S", Err(Syntax)),
            ("s", Err(Syntax)),
            ("5 5s", Err(Syntax)),
            ("5s 5", Err(Syntax)),
            ("999999999999999999999d", Err(TooLarge)),
        ];
        for (s, want) in cases {
            assert_eq!(us(s), *want, "{s:?}");
        }
    }

    #[test]
    fn percents_and_ratios() {
        let cases: &[(&str, Result<u32, UnitError>)] = &[
            ("5", Ok(500)),
            ("5%", Ok(500)),
            ("5 %", Ok(500)),
            ("12.5%", Ok(1250)),
            ("0.01%", Ok(1)),
            ("0.001%", Err(TooFine)),
            ("100", Ok(10_000)),
            ("100.5", Err(Above100)),
            ("150%", Err(Above100)),
            ("5x", Err(Syntax)),
            ("%", Err(Syntax)),
        ];
        for (s, want) in cases {
            assert_eq!(parse_percent_bp(s), *want, "{s:?}");
        }
        assert_eq!(parse_ratio("500", 1000), Ok(500));
        assert_eq!(parse_ratio("50%", 1000), Ok(500));
        assert_eq!(parse_ratio("50 %", 1000), Ok(500));
        assert_eq!(parse_ratio("0.05%", 1000), Err(TooFine));
        assert_eq!(parse_ratio("500.000000", 1000), Ok(500));
        assert_eq!(parse_ratio("20%", 10_000), Ok(2000));
    }

    #[test]
    fn spelling_round_trips() {
        for v in [0, 1, 4095, 4096, 2 << 20, 3 << 29, u64::MAX, 15 << 60] {
            assert_eq!(parse_size(&fmt_size(v)), Ok(v), "{v}");
        }
        for us in [
            0,
            1,
            999,
            1000,
            100_000,
            120_000_000,
            3_600_000_000,
            u64::MAX - 1,
        ] {
            let s = fmt_time_us(us);
            assert_eq!(
                parse_time_ns(&s, 1).and_then(|ns| ns_to(ns, NS_PER_US)),
                Ok(us),
                "{s}"
            );
        }
        for bp in [0, 1, 10, 99, 500, 550, 1250, 10_000] {
            assert_eq!(parse_percent_bp(&fmt_percent(bp)), Ok(bp), "{bp}");
        }
        assert_eq!(fmt_size(4096), "4K");
        assert_eq!(fmt_size(4097), "4097B");
        assert_eq!(fmt_time_us(120_000_000), "2m");
        assert_eq!(fmt_percent(550), "5.5%");
        assert_eq!(fmt_percent(1), "0.01%");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(4096), "4.0 KiB");
        assert_eq!(human_size(128 << 20), "128 MiB");
        assert_eq!(human_size(3 << 29), "1.5 GiB");
        assert_eq!(human_size(u64::MAX), "16 EiB");
    }

    #[test]
    fn placeholders_and_unit_words() {
        assert_eq!(placeholder("min", None), Some(false));
        assert_eq!(placeholder("MAX", Some(Side::Lower)), Some(true));
        assert_eq!(placeholder("na", Some(Side::Lower)), Some(false));
        assert_eq!(placeholder("null", Some(Side::Upper)), Some(true));
        assert_eq!(placeholder("null", None), None);
        for w in ["s", "ms", "K", "MiB", "%", "m", "h"] {
            assert!(is_unit_word(w), "{w}");
        }
        for w in ["min", "max", "na", "5", "", "pageout"] {
            assert!(!is_unit_word(w), "{w}");
        }
    }
}
