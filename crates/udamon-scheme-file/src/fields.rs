//! Field values shared by every format: the same words mean the same thing
//! and fail with the same message in the text form, TOML, JSON and damo's
//! JSON. The callers add the position and the token.

use udamon_core::schemes::{AccessPattern, Action};
pub(crate) use udamon_core::units::TimeUnit;
use udamon_core::units::{
    fmt_size, fmt_time_us, parse_duration, parse_number, parse_size, Fraction, UnitErrorKind,
};

use crate::error::quote;
use crate::units::{self, RatioError, Side, FREQ_EXPECTED, SIZE_EXPECTED, TIME_EXPECTED};

/// What is wrong with one value, before it is placed in the file.
#[derive(Debug)]
pub(crate) struct Problem {
    pub msg: String,
    pub expected: String,
}

impl Problem {
    pub fn new(msg: impl Into<String>, expected: impl Into<String>) -> Self {
        Self {
            msg: msg.into(),
            expected: expected.into(),
        }
    }
}

pub(crate) const ACTION_EXPECTED: &str = "one of willneed, cold, pageout, hugepage, nohugepage, \
     collapse, lru_prio, lru_deprio, migrate_hot, migrate_cold, stat, mlock";

/// Action names: the kernel's, the seeds' (`page_out`, `thp`, `nothp`,
/// `madv_*`), any case, `-` for `_`.
pub(crate) fn action(tok: &str) -> Result<Action, Problem> {
    let word = tok.trim().to_ascii_lowercase().replace('-', "_");
    let (madv, name) = match word.strip_prefix("madv_") {
        Some(rest) => (true, rest),
        None => (false, word.as_str()),
    };
    let name = match name {
        "page_out" => "pageout",
        "thp" => "hugepage",
        "nothp" => "nohugepage",
        n => n,
    };
    // `madv_` only before madvise(2)'s advice.
    let advice = |a: Action| {
        use Action::*;
        matches!(
            a,
            Willneed | Cold | Pageout | Hugepage | Nohugepage | Collapse
        )
    };
    match Action::from_name(name) {
        Some(a) if !madv || advice(a) => Ok(a),
        _ => Err(Problem::new(
            format!("unknown action {}", quote(tok)),
            ACTION_EXPECTED,
        )),
    }
}

/// A region size bound (or any other size: `side` None).
pub(crate) fn size(tok: &str, side: Option<Side>, what: &str) -> Result<u64, Problem> {
    size_with(tok, side, what, false)
}

/// As [`size`]; with `floor`, fractions of a byte are dropped (damo's
/// rounded sizes).
pub(crate) fn size_with(
    tok: &str,
    side: Option<Side>,
    what: &str,
    floor: bool,
) -> Result<u64, Problem> {
    if let Some(high) = units::placeholder(tok, side) {
        return Ok(if high { u64::MAX } else { 0 });
    }
    let fraction = if floor {
        Fraction::Floor
    } else {
        Fraction::Refuse
    };
    parse_size(tok, fraction).map_err(|e| match e.kind {
        UnitErrorKind::NotWhole => Problem::new(
            format!("{what} {} is not a whole number of bytes", quote(tok)),
            "a size like 4K, 1.5M or 4096",
        ),
        UnitErrorKind::TooLarge => Problem::new(
            format!("{what} {} is too large", quote(tok)),
            "at most 16 EiB minus one byte, or max",
        ),
        _ => Problem::new(format!("bad {what} {}", quote(tok)), SIZE_EXPECTED),
    })
}

/// An access frequency bound, percent of the maximum, in basis points.
pub(crate) fn freq(tok: &str, side: Option<Side>) -> Result<u32, Problem> {
    if let Some(high) = units::placeholder(tok, side) {
        return Ok(if high { 10_000 } else { 0 });
    }
    units::parse_percent_bp(tok).map_err(|e| match e {
        RatioError::TooFine => Problem::new(
            format!("frequency {} is finer than 0.01%", quote(tok)),
            "a percentage with at most two decimals",
        ),
        RatioError::Above100 | RatioError::TooLarge => Problem::new(
            format!("frequency {} is above 100%", quote(tok)),
            "0 to 100 percent",
        ),
        _ => Problem::new(format!("bad frequency {}", quote(tok)), FREQ_EXPECTED),
    })
}

/// A time in `unit`; a bare number counts in that unit too.
pub(crate) fn time(
    tok: &str,
    side: Option<Side>,
    what: &str,
    unit: TimeUnit,
) -> Result<u64, Problem> {
    if let Some(high) = units::placeholder(tok, side) {
        return Ok(if high { u64::MAX } else { 0 });
    }
    parse_duration(tok, unit, Some(unit), Fraction::Refuse).map_err(|e| match e.kind {
        UnitErrorKind::NotWhole => Problem::new(
            format!(
                "{what} {} is not a whole number of {}",
                quote(tok),
                unit.plural()
            ),
            TIME_EXPECTED,
        ),
        UnitErrorKind::TooLarge => Problem::new(
            format!("{what} {} is too large", quote(tok)),
            "a shorter time, or max",
        ),
        _ => Problem::new(format!("bad {what} {}", quote(tok)), TIME_EXPECTED),
    })
}

/// A whole number that fits `max`.
pub(crate) fn uint(tok: &str, what: &str, max: u64) -> Result<u64, Problem> {
    match parse_number(tok, Fraction::Refuse) {
        Ok(v) if v <= max => Ok(v),
        Ok(_) => Err(Problem::new(
            format!("{what} {} is too large", quote(tok)),
            format!("at most {max}"),
        )),
        Err(e) if e.kind == UnitErrorKind::TooLarge => Err(Problem::new(
            format!("{what} {} is too large", quote(tok)),
            format!("at most {max}"),
        )),
        Err(_) => Err(Problem::new(
            format!("bad {what} {}", quote(tok)),
            "a whole number",
        )),
    }
}

/// A ratio in `per` parts (1000: per-mille, 10000: basis points); `50%`
/// converts.
pub(crate) fn ratio(tok: &str, what: &str, per: u128, max: u64) -> Result<u64, Problem> {
    let expected = if per == 1000 {
        "a per-mille value like 500, or a percentage like 50%"
    } else {
        "basis points like 2000, or a percentage like 20%"
    };
    match units::parse_ratio(tok, per) {
        Ok(v) if v <= max => Ok(v),
        Ok(_) | Err(RatioError::TooLarge) => Err(Problem::new(
            format!("{what} {} is too large", quote(tok)),
            format!("at most {max}"),
        )),
        Err(RatioError::TooFine) => Err(Problem::new(
            format!("{what} {} is finer than the unit", quote(tok)),
            expected,
        )),
        Err(_) => Err(Problem::new(format!("bad {what} {}", quote(tok)), expected)),
    }
}

/// Which bound of a pattern is out of order, if any: (what, max as written
/// normalised, min as written normalised).
pub(crate) fn check_pattern(p: &AccessPattern) -> Result<(), (usize, Problem)> {
    let bad = |i: usize, what: &str, min: String, max: String| {
        Err((
            i,
            Problem::new(
                format!("max {what} {max} is below min {what} {min}"),
                "a max at least the min",
            ),
        ))
    };
    if p.min_sz > p.max_sz {
        return bad(0, "size", fmt_size(p.min_sz), fmt_size(p.max_sz));
    }
    if p.min_freq_bp > p.max_freq_bp {
        return bad(
            1,
            "frequency",
            units::fmt_percent(p.min_freq_bp),
            units::fmt_percent(p.max_freq_bp),
        );
    }
    if p.min_age_us > p.max_age_us {
        return bad(
            2,
            "age",
            fmt_time_us(p.min_age_us),
            fmt_time_us(p.max_age_us),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_spellings() {
        let cases = [
            ("pageout", Action::Pageout),
            ("page_out", Action::Pageout),
            ("PAGEOUT", Action::Pageout),
            ("madv_pageout", Action::Pageout),
            ("thp", Action::Hugepage),
            ("madv_hugepage", Action::Hugepage),
            ("nothp", Action::Nohugepage),
            ("madv_nohugepage", Action::Nohugepage),
            ("madv_willneed", Action::Willneed),
            ("madv_cold", Action::Cold),
            ("lru-prio", Action::LruPrio),
            ("lru_deprio", Action::LruDeprio),
            ("migrate_hot", Action::MigrateHot),
            ("migrate_cold", Action::MigrateCold),
            ("collapse", Action::Collapse),
            ("madv_collapse", Action::Collapse),
            ("stat", Action::Stat),
            ("mlock", Action::Mlock),
        ];
        for (s, a) in cases {
            assert_eq!(action(s).ok(), Some(a), "{s}");
        }
        for a in Action::ALL {
            assert_eq!(action(a.name()).ok(), Some(a));
        }
        for s in ["madv_stat", "madv_mlock", "pagout", "", "na"] {
            assert!(action(s).is_err(), "{s}");
        }
        let names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(ACTION_EXPECTED, format!("one of {}", names.join(", ")));
    }
}
