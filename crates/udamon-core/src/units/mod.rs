//! Units, once for every crate: sizes, durations and addresses read from
//! text (the command line, service configs, workload specs, eval suites,
//! scheme files), and sizes and times written back, exactly or for
//! people.
//!
//! One grammar each:
//! - sizes ([`parse_size`]): `4096`, `4K`, `4 KiB`, `2MB`, `1.5G`, `1,024`,
//!   `2e3`, `0x1000`; suffixes are powers of 1024;
//! - durations ([`parse_duration`], [`parse_duration_us`]): `100ms`, `5 s`,
//!   `1.5h`, `10µs`, `2 m 30 s`;
//! - addresses ([`parse_address`]): hex or a size; ranges `START-END`
//!   ([`parse_range`], [`parse_address_range`]).
//!
//! Numbers are read exactly (no floating point). Where the callers always
//! differed the choice is theirs and explicit: what a fraction of the unit
//! becomes ([`Fraction`]: refused in scheme files, floored for damo's
//! rounded sizes, rounded elsewhere), and whether a duration may have no
//! unit (a scheme file's field has one; the command line refuses to
//! guess). Errors ([`UnitError`]) name the value and what to give.

mod error;
mod fmt;
mod number;
mod parse;
mod unit;

pub use error::{Quantity, UnitError, UnitErrorKind};
pub use fmt::{
    fmt_bytes, fmt_size, fmt_size_approx, fmt_time, fmt_time_us, fmt_time_us_approx, human_size,
    Human,
};
pub use number::{Decimal, Fraction};
pub use parse::{
    parse_address, parse_address_range, parse_duration, parse_duration_us, parse_number,
    parse_range, parse_size,
};
pub use unit::{size_suffix, TimeUnit};

#[cfg(test)]
mod tests;
