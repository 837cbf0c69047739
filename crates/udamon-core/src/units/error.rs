//! What is wrong with a value read from text, and the message that says so.

use std::fmt;

use super::unit::TimeUnit;

/// What a text was read as; it picks the words of the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// Bytes (a hex address read through [`super::parse_size`] too).
    Size,
    /// A time, kept in whole counts of the unit given.
    Duration(TimeUnit),
    /// A hex address (`0x7f00...`); decimal addresses are sizes.
    Address,
    /// A plain number: no unit, decimal or hex.
    Number,
}

/// What is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitErrorKind {
    /// Not a number (with a unit).
    Syntax,
    /// A unit the quantity does not have, as written.
    UnknownUnit(String),
    /// A duration with no unit, where the caller takes none.
    NoUnit,
    /// A fraction of the unit the value is kept in, and the caller refuses
    /// fractions ([`super::Fraction::Refuse`]).
    NotWhole,
    /// Below zero (`-0` reads as 0).
    Negative,
    /// Does not fit in 64 bits (or has more than 38 digits).
    TooLarge,
    /// A range without its `-` (`START-END`).
    NotARange,
    /// A range whose start is not below its end.
    EmptyRange,
}

/// A value that could not be read: the text as given, what it was read
/// as, and what is wrong. Its message names the value and what to give
/// instead (`unknown unit "q" in duration "60q" (expected us, ms, s, m or
/// h)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError {
    pub kind: UnitErrorKind,
    pub quantity: Quantity,
    /// The text as the caller gave it (untrimmed; for a range, the whole
    /// range).
    pub input: String,
}

impl UnitError {
    /// A unit in a value is the user's input: always bad input.
    pub fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::Usage
    }

    pub(crate) fn new(kind: UnitErrorKind, quantity: Quantity, input: &str) -> Self {
        Self {
            kind,
            quantity,
            input: input.to_string(),
        }
    }
}

impl std::error::Error for UnitError {}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Quantity as Q;
        use UnitErrorKind as K;
        let s = &self.input;
        match (&self.kind, self.quantity) {
            (K::NotARange, _) => write!(f, "{s}: expected START-END"),
            (K::EmptyRange, _) => write!(f, "{s}: the start is not below the end"),
            (_, Q::Address) => write!(f, "\"{s}\" is not a hex address"),
            (K::UnknownUnit(u), Q::Size) => write!(
                f,
                "unknown unit \"{u}\" in size \"{s}\" (expected K, M, G, T, P or E)"
            ),
            (K::NotWhole, Q::Size) => write!(f, "size \"{s}\" is not a whole number of bytes"),
            (K::Negative | K::TooLarge, Q::Size) => write!(f, "size \"{s}\" is out of range"),
            (K::Syntax | K::NoUnit, Q::Size) => write!(
                f,
                "\"{s}\" is not a size (expected a number with K, M, G or T)"
            ),
            (K::UnknownUnit(u), Q::Duration(_)) => write!(
                f,
                "unknown unit \"{u}\" in duration \"{s}\" (expected us, ms, s, m or h)"
            ),
            (K::NoUnit, Q::Duration(_)) => write!(
                f,
                "duration \"{s}\" has no unit (expected us, ms, s, m or h)"
            ),
            (K::NotWhole, Q::Duration(u)) => write!(
                f,
                "duration \"{s}\" is not a whole number of {}",
                u.plural()
            ),
            (K::Negative | K::TooLarge, Q::Duration(_)) => {
                write!(f, "duration \"{s}\" is out of range")
            }
            (K::Syntax, Q::Duration(_)) => write!(
                f,
                "\"{s}\" is not a duration (expected a number and a unit, like 2s)"
            ),
            (K::NotWhole, Q::Number) => write!(f, "\"{s}\" is not a whole number"),
            (K::Negative | K::TooLarge, Q::Number) => write!(f, "number \"{s}\" is out of range"),
            (_, Q::Number) => write!(
                f,
                "\"{s}\" is not a number (expected digits, or hex digits after 0x)"
            ),
        }
    }
}
