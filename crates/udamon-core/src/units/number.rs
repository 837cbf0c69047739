//! Decimal numbers as written, read exactly (no floating point), and what
//! becomes of a fraction of the unit a value is kept in.

use super::error::UnitErrorKind as K;

/// What becomes of a value that is not a whole number of the unit it is
/// kept in (`1.3K` bytes, `1.5us` in microseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fraction {
    /// Refused ([`super::UnitErrorKind::NotWhole`]): nothing is rounded
    /// silently. Scheme files.
    Refuse,
    /// Dropped: damo prints sizes rounded to three decimals (`1.333 MiB`).
    Floor,
    /// Rounded to the nearest, halves up. The command line, service
    /// configs, workload specs and eval suites have always rounded.
    Round,
}

/// A non-negative decimal number as written: digits with optional comma
/// groups (`1,024`, as damo prints them), an optional fraction (`1.5`,
/// `.5`, `5.`), an optional sign (`+5`; `-0` is 0, anything else below
/// zero is refused) and, where the caller allows, an exponent (`2e3`).
/// Its value is `mant * 10^exp`, exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal {
    mant: u128,
    exp: i32,
}

fn pow10(k: u32) -> Option<u128> {
    10u128.checked_pow(k)
}

impl Decimal {
    /// Reads all of `s` (already trimmed) as a number; `exponent` allows
    /// `e` and `E` exponents.
    pub fn parse(s: &str, exponent: bool) -> Result<Decimal, K> {
        let (negative, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let (digits, exp) = match body.find(['e', 'E']) {
            Some(i) if exponent => {
                let e = &body[i + 1..];
                let e_digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if e_digits.is_empty() || !e_digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(K::Syntax);
                }
                // Beyond any value of u64 either way; saturated, not wrapped.
                let v: i32 = e_digits.parse().unwrap_or(i32::MAX / 2).min(i32::MAX / 2);
                (&body[..i], if e.starts_with('-') { -v } else { v })
            }
            _ => (body, 0),
        };
        if digits.ends_with(',') {
            return Err(K::Syntax);
        }
        // Trailing zeros of a fraction change nothing: left out, so that
        // `1.000000000000000000000000000000000000000` is not too large.
        let digits = match digits.find('.') {
            Some(_) => digits.trim_end_matches('0'),
            None => digits,
        };
        let (mut mant, mut frac, mut n, mut dot) = (0u128, 0i32, 0u32, false);
        for c in digits.chars() {
            match c {
                '0'..='9' => {
                    mant = mant
                        .checked_mul(10)
                        .and_then(|m| m.checked_add(u128::from(c as u8 - b'0')))
                        .ok_or(K::TooLarge)?;
                    n += 1;
                    if dot {
                        frac += 1;
                    }
                }
                ',' if n > 0 && !dot => {}
                '.' if !dot => dot = true,
                _ => return Err(K::Syntax),
            }
        }
        // `1.` trimmed of its zeros (`1.000`) is still a number; `.` is not.
        if n == 0 && !(dot && body.bytes().any(|b| b.is_ascii_digit())) {
            return Err(K::Syntax);
        }
        if negative && mant != 0 {
            return Err(K::Negative);
        }
        Ok(Decimal {
            mant,
            exp: exp.saturating_sub(frac),
        })
    }

    /// Whether the number is 0.
    pub fn is_zero(&self) -> bool {
        self.mant == 0
    }

    /// `mant / 10^decimals`, as read without an exponent (whose values
    /// are never above their digits).
    pub(crate) fn parts(&self) -> (u128, u32) {
        debug_assert!(self.exp <= 0, "read without an exponent");
        (self.mant, self.exp.min(0).unsigned_abs())
    }

    /// `mant / 10^decimals`.
    pub(crate) fn from_parts(mant: u128, decimals: u32) -> Decimal {
        Decimal {
            mant,
            exp: -(decimals.min(i32::MAX as u32) as i32),
        }
    }

    /// `self * mult / div` as a whole number, its fraction taken as
    /// `fraction` says. [`K::TooLarge`] when it does not fit in a u128.
    pub fn ratio(&self, mult: u128, div: u128, fraction: Fraction) -> Result<u128, K> {
        let mut num = self.mant.checked_mul(mult).ok_or(K::TooLarge)?;
        let mut den = div;
        if self.exp >= 0 {
            if num != 0 {
                let p = pow10(self.exp.unsigned_abs()).ok_or(K::TooLarge)?;
                num = num.checked_mul(p).ok_or(K::TooLarge)?;
            }
        } else {
            let k = self.exp.unsigned_abs();
            match pow10(k).and_then(|p| den.checked_mul(p)) {
                Some(d) => den = d,
                // The divisor does not fit: one decimal digit at a time.
                // The last digit dropped decides the rounding (what is
                // below it is less than a tenth).
                None => {
                    let (mut q, mut exact, mut top) = (num / den, num % den == 0, 0);
                    for _ in 0..k.min(40) {
                        exact &= top == 0;
                        top = q % 10;
                        q /= 10;
                    }
                    if k > 40 {
                        (exact, top) = (exact && top == 0, 0);
                    }
                    return match fraction {
                        _ if exact && top == 0 => Ok(q),
                        Fraction::Refuse => Err(K::NotWhole),
                        Fraction::Floor => Ok(q),
                        Fraction::Round => Ok(q + u128::from(top >= 5)),
                    };
                }
            }
        }
        let (q, r) = (num / den, num % den);
        match fraction {
            _ if r == 0 => Ok(q),
            Fraction::Refuse => Err(K::NotWhole),
            Fraction::Floor => Ok(q),
            Fraction::Round if r >= den - r => q.checked_add(1).ok_or(K::TooLarge),
            Fraction::Round => Ok(q),
        }
    }

    /// `self * mult` as a whole number.
    pub fn scaled(&self, mult: u128, fraction: Fraction) -> Result<u128, K> {
        self.ratio(mult, 1, fraction)
    }
}

/// Splits `"1.5 GiB"` into `("1.5", "GiB")`: the number is the longest
/// start of signs, digits, dots and commas (then an exponent if
/// `exponent`, when one follows: `2e3`, not the `e` of `2e` or `2eb`),
/// the unit the rest, its leading blanks dropped.
pub(crate) fn split_number(s: &str, exponent: bool) -> (&str, &str) {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i = 1;
    }
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b',') {
        i += 1;
    }
    if exponent && i > 0 && matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if b.get(j).is_some_and(u8::is_ascii_digit) {
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            i = j;
        }
    }
    (&s[..i], s[i..].trim_start())
}
