//! Sizes, durations, addresses, address ranges and plain numbers read from
//! text.

use super::error::{Quantity, UnitError, UnitErrorKind as K};
use super::number::{split_number, Decimal, Fraction};
use super::unit::{size_suffix, TimeUnit};

fn parse_hex(hex: &str) -> Result<u64, K> {
    // A sign after 0x (`0x+ff`), as `--address-range` always took it.
    let digits = hex.strip_prefix('+').unwrap_or(hex);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(K::Syntax);
    }
    u64::from_str_radix(digits, 16).map_err(|_| K::TooLarge)
}

fn strip_hex_prefix(s: &str) -> Option<&str> {
    s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))
}

fn size_as(s: &str, fraction: Fraction, hex: Quantity) -> Result<u64, UnitError> {
    let t = s.trim();
    if let Some(h) = strip_hex_prefix(t) {
        return parse_hex(h).map_err(|k| UnitError::new(k, hex, s));
    }
    let err = |k| UnitError::new(k, Quantity::Size, s);
    let (num, unit) = split_number(t, true);
    // The unit first: `x` is an unknown unit rather than no number.
    let mult = size_suffix(unit).ok_or_else(|| err(K::UnknownUnit(unit.to_string())))?;
    let v = Decimal::parse(num, true)
        .and_then(|d| d.scaled(mult.into(), fraction))
        .map_err(err)?;
    u64::try_from(v).map_err(|_| err(K::TooLarge))
}

/// Bytes: `4096`, `4K`, `4 KiB`, `2MB`, `1.5G`, `1,024`, `2e3`, `0x1000`.
/// Suffixes are powers of 1024 whatever their spelling, any case, up to
/// `E` ([`super::size_suffix`]); a fraction of a byte is taken as
/// `fraction` says.
///
/// This is the one size grammar: it takes everything the scheme files took
/// (commas, hex, `E`, `b`) and everything the command line, service
/// configs and workload specs took (a sign, exponents, `iB`), with the same
/// values; they differed only on fractions of a byte, hence `fraction`.
pub fn parse_size(s: &str, fraction: Fraction) -> Result<u64, UnitError> {
    size_as(s, fraction, Quantity::Size)
}

/// An address: hex (`0x7f0000001000`, `0X...`) or a size (`64M`, fractions
/// of a byte rounded), as `--address-range` and a spec's `base` read it.
/// A bad hex address says so (`"0xg" is not a hex address`).
pub fn parse_address(s: &str) -> Result<u64, UnitError> {
    size_as(s, Fraction::Round, Quantity::Address)
}

/// A plain number with no unit and no sign: `42`, `1,024`, `500.000`,
/// `0x2a` (the scheme files' counts).
pub fn parse_number(s: &str, fraction: Fraction) -> Result<u64, UnitError> {
    let t = s.trim();
    let err = |k| UnitError::new(k, Quantity::Number, s);
    if t.starts_with(['+', '-']) || strip_hex_prefix(t).is_some_and(|h| h.starts_with('+')) {
        return Err(err(K::Syntax));
    }
    if let Some(h) = strip_hex_prefix(t) {
        return parse_hex(h).map_err(err);
    }
    let v = Decimal::parse(t, false)
        .and_then(|d| d.scaled(1, fraction))
        .map_err(err)?;
    u64::try_from(v).map_err(|_| err(K::TooLarge))
}

/// A duration as a whole count of `unit`: `100ms`, `5 s`, `1.5h`, `10µs`,
/// `2min`, or damo's `2 m 30 s`. Units are case-sensitive
/// ([`TimeUnit::from_suffix`]); a bare number counts in `bare`, and with
/// `bare` None it is refused ([`K::NoUnit`]), as the command line, service
/// configs and specs do rather than guess. A fraction of `unit` is taken
/// as `fraction` says.
pub fn parse_duration(
    s: &str,
    unit: TimeUnit,
    bare: Option<TimeUnit>,
    fraction: Fraction,
) -> Result<u64, UnitError> {
    let err = |k| UnitError::new(k, Quantity::Duration(unit), s);
    let mut rest = s.trim();
    if bare.is_none() && !rest.bytes().any(|b| b.is_ascii_alphabetic()) {
        return Err(err(K::NoUnit));
    }
    // The sum of the parts, num / (10^frac * unit), exactly.
    let (mut num, mut frac) = (0u128, 0u32);
    let mut parts = 0;
    if rest.is_empty() {
        return Err(err(K::Syntax));
    }
    while !rest.is_empty() {
        let (n, after) = split_number(rest, false);
        // Signs only before the first part.
        if parts > 0 && n.starts_with(['+', '-']) {
            return Err(err(K::Syntax));
        }
        let unit_end = after
            .find(|c: char| !(c.is_ascii_alphabetic() || c == 'µ'))
            .unwrap_or(after.len());
        let u = &after[..unit_end];
        rest = after[unit_end..].trim_start();
        let part_unit = if u.is_empty() {
            if parts > 0 || !rest.is_empty() || n.is_empty() {
                return Err(err(K::Syntax));
            }
            bare.ok_or_else(|| err(K::NoUnit))?
        } else {
            TimeUnit::from_suffix(u).ok_or_else(|| err(K::UnknownUnit(u.to_string())))?
        };
        let d = Decimal::parse(n, false).map_err(err)?;
        // Brought to 10^-f of a nanosecond, f the most decimals so far.
        let (p_num, p_frac) = d.parts();
        let p_num = p_num
            .checked_mul(part_unit.ns())
            .ok_or_else(|| err(K::TooLarge))?;
        let f = frac.max(p_frac);
        let up = |v: u128, by: u32| {
            10u128
                .checked_pow(by)
                .and_then(|p| v.checked_mul(p))
                .ok_or_else(|| err(K::TooLarge))
        };
        num = up(num, f - frac)?
            .checked_add(up(p_num, f - p_frac)?)
            .ok_or_else(|| err(K::TooLarge))?;
        frac = f;
        parts += 1;
    }
    let v = Decimal::from_parts(num, frac)
        .ratio(1, unit.ns(), fraction)
        .map_err(err)?;
    u64::try_from(v).map_err(|_| err(K::TooLarge))
}

/// A duration in microseconds, with a unit ([`parse_duration`]).
pub fn parse_duration_us(s: &str, fraction: Fraction) -> Result<u64, UnitError> {
    parse_duration(s, TimeUnit::Us, None, fraction)
}

/// `START-END`, each side read by `side`, the start below the end: the
/// `--address-range` (with [`parse_address`]) and `--time-range` (with a
/// duration) of reports. The error of a side is the side's; a range
/// without `-`, or whose start is not below its end, is
/// [`K::NotARange`] or [`K::EmptyRange`] for the whole text.
pub fn parse_range(
    s: &str,
    side: impl Fn(&str) -> Result<u64, UnitError>,
) -> Result<(u64, u64), UnitError> {
    let whole = |k, q| UnitError::new(k, q, s);
    let Some((a, b)) = s.split_once('-') else {
        return Err(whole(K::NotARange, Quantity::Number));
    };
    let (a, b) = (side(a)?, side(b)?);
    if a >= b {
        return Err(whole(K::EmptyRange, Quantity::Number));
    }
    Ok((a, b))
}

/// `START-END` of addresses ([`parse_address`]).
pub fn parse_address_range(s: &str) -> Result<(u64, u64), UnitError> {
    parse_range(s, parse_address)
}
