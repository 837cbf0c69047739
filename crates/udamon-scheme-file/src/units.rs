//! What the scheme formats add to the units of `udamon_core::units`
//! (sizes and times, read and written there): the `min`/`max`/`null`
//! placeholders, the words that are only a unit (`7 s`), access
//! frequencies and per-mille values.
//!
//! Numbers are decimal with an optional fraction and optional comma digit
//! groups (`1,024`, as damo prints them); a result must be whole in the unit
//! of the field it lands in (bytes, microseconds, basis points), so nothing
//! is rounded silently.

use udamon_core::units::{size_suffix, Decimal, Fraction, TimeUnit, UnitErrorKind};

pub(crate) const SIZE_EXPECTED: &str = "a size like 4K, 2M, 2MB, min or max";
pub(crate) const FREQ_EXPECTED: &str =
    "an access frequency in percent of the maximum like 5, 5% or 12.5%, min or max";
pub(crate) const TIME_EXPECTED: &str = "a time like 100ms, 5s, 2m or 1h, min or max";

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

/// What is wrong with a frequency or a ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RatioError {
    /// Not a number (with `%`).
    Syntax,
    /// Does not fit the field.
    TooLarge,
    /// A percentage with more than two decimals (finer than a basis point).
    TooFine,
    /// A percentage above 100.
    Above100,
}

fn is_num_char(c: char) -> bool {
    c.is_ascii_digit() || c == '.' || c == ','
}

/// An unsigned decimal (no sign, no exponent), as frequencies and ratios
/// are written.
fn decimal(s: &str) -> Result<Decimal, RatioError> {
    if s.starts_with(['+', '-']) {
        return Err(RatioError::Syntax);
    }
    Decimal::parse(s, false).map_err(|k| match k {
        UnitErrorKind::TooLarge => RatioError::TooLarge,
        _ => RatioError::Syntax,
    })
}

/// `decimal * mult`, finer than the unit being [`RatioError::TooFine`].
fn scaled(d: Decimal, mult: u128) -> Result<u128, RatioError> {
    d.scaled(mult, Fraction::Refuse).map_err(|k| match k {
        UnitErrorKind::NotWhole => RatioError::TooFine,
        _ => RatioError::TooLarge,
    })
}

/// Nanoseconds in a time unit.
pub(crate) fn time_unit(u: &str) -> Option<u128> {
    TimeUnit::from_suffix(u).map(TimeUnit::ns)
}

/// A word that is only a unit, so that `7 s` (as the DAOS paper prints it)
/// reads as `7s`. `min` is left out: it is the placeholder.
pub(crate) fn is_unit_word(w: &str) -> bool {
    w == "%"
        || (w != "min" && (time_unit(w).is_some() || (!w.is_empty() && size_suffix(w).is_some())))
}

/// A bare decimal number such as `7` or `1.5`.
pub(crate) fn is_bare_number(w: &str) -> bool {
    !w.is_empty() && w.chars().all(is_num_char) && w.chars().any(|c| c.is_ascii_digit())
}

/// Percent to basis points: `5`, `5%`, `5 %`, `12.5%`, at most 100.
pub(crate) fn parse_percent_bp(s: &str) -> Result<u32, RatioError> {
    let s = s.trim();
    let num = s.strip_suffix('%').unwrap_or(s).trim_end();
    let bp = scaled(decimal(num)?, 100)?;
    if bp > 10_000 {
        return Err(RatioError::Above100);
    }
    Ok(bp as u32)
}

/// A ratio in `per` parts of one (1000 for per-mille, 10000 for basis
/// points): a plain number is already in those parts, `50%` is converted.
pub(crate) fn parse_ratio(s: &str, per: u128) -> Result<u64, RatioError> {
    let s = s.trim();
    let v = match s.strip_suffix('%') {
        Some(num) => scaled(decimal(num.trim_end())?, per / 100)?,
        // A plain ratio is already in its parts: a fraction of one is no
        // ratio at all.
        None => decimal(s)?
            .scaled(1, Fraction::Refuse)
            .map_err(|k| match k {
                UnitErrorKind::TooLarge => RatioError::TooLarge,
                _ => RatioError::Syntax,
            })?,
    };
    u64::try_from(v).map_err(|_| RatioError::TooLarge)
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

#[cfg(test)]
mod tests {
    use super::*;
    use RatioError::*;

    #[test]
    fn percents_and_ratios() {
        let cases: &[(&str, Result<u32, RatioError>)] = &[
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
        for bp in [0, 1, 10, 99, 500, 550, 1250, 10_000] {
            assert_eq!(parse_percent_bp(&fmt_percent(bp)), Ok(bp), "{bp}");
        }
        assert_eq!(fmt_percent(550), "5.5%");
        assert_eq!(fmt_percent(1), "0.01%");
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
