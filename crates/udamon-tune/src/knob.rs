//! The knob: which number of which scheme is tuned, its units, its range
//! and the grid of values tried.
//!
//! A knob is written `[INDEX.]FIELD`: `min_age` (scheme 0), `1.quota.sz`
//! (scheme 1). Fields are the access pattern's bounds and the quota's
//! numbers. Values are kept as `f64` in the field's own unit (bytes, basis
//! points of the maximum access frequency, microseconds, or milliseconds for
//! the quota's time and reset interval) and written with units: `5s`,
//! `128M`, `5%`, `10ms`.

use serde::Serialize;
use udamon_core::schemes::Damos;
use udamon_core::units::{
    fmt_size_approx, fmt_time_us_approx, parse_duration_us, parse_size, Fraction,
};

use crate::error::{Error, Result};

/// A tunable number of a scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    MinSz,
    MaxSz,
    MinFreq,
    MaxFreq,
    MinAge,
    MaxAge,
    /// `quota.ms`: action time per reset interval.
    QuotaMs,
    /// `quota.sz`: bytes per reset interval.
    QuotaSz,
    /// `quota.reset_interval`.
    QuotaResetInterval,
}

/// The unit family of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Bytes.
    Size,
    /// Basis points of the maximum access count (10,000 = every sample).
    Freq,
    /// Microseconds.
    TimeUs,
    /// Milliseconds (the quota's time and reset interval).
    TimeMs,
}

const FIELDS: &[(&str, Field)] = &[
    ("min_sz", Field::MinSz),
    ("min_size", Field::MinSz),
    ("max_sz", Field::MaxSz),
    ("max_size", Field::MaxSz),
    ("min_freq", Field::MinFreq),
    ("max_freq", Field::MaxFreq),
    ("min_age", Field::MinAge),
    ("max_age", Field::MaxAge),
    ("quota.ms", Field::QuotaMs),
    ("quota.time", Field::QuotaMs),
    ("quota.sz", Field::QuotaSz),
    ("quota.size", Field::QuotaSz),
    ("quota.reset_interval", Field::QuotaResetInterval),
];

impl Field {
    /// The canonical name (`min_age`, `quota.sz`).
    pub fn name(self) -> &'static str {
        match self {
            Field::MinSz => "min_sz",
            Field::MaxSz => "max_sz",
            Field::MinFreq => "min_freq",
            Field::MaxFreq => "max_freq",
            Field::MinAge => "min_age",
            Field::MaxAge => "max_age",
            Field::QuotaMs => "quota.ms",
            Field::QuotaSz => "quota.sz",
            Field::QuotaResetInterval => "quota.reset_interval",
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Field::MinSz | Field::MaxSz | Field::QuotaSz => Kind::Size,
            Field::MinFreq | Field::MaxFreq => Kind::Freq,
            Field::MinAge | Field::MaxAge => Kind::TimeUs,
            Field::QuotaMs | Field::QuotaResetInterval => Kind::TimeMs,
        }
    }
}

/// A field of one scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Knob {
    /// Index of the scheme in the file (0 = first).
    pub scheme: usize,
    pub field: Field,
}

impl Default for Knob {
    /// The DAOS paper's knob: the first scheme's `min_age`.
    fn default() -> Self {
        Knob {
            scheme: 0,
            field: Field::MinAge,
        }
    }
}

/// The values tried: `lo..=hi` in steps of `step`, in the knob's unit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Domain {
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
}

impl Domain {
    /// A domain; `step` must be positive, `lo <= hi`.
    pub fn new(lo: f64, hi: f64, step: f64) -> Result<Domain> {
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err(Error::usage(format!(
                "range {lo}..{hi} is empty (expected START..END with START <= END)"
            )));
        }
        if !(step.is_finite() && step > 0.0) {
            return Err(Error::usage(format!(
                "step {step} is not positive (expected a step above 0)"
            )));
        }
        Ok(Domain { lo, hi, step })
    }

    pub fn span(&self) -> f64 {
        self.hi - self.lo
    }

    /// Every grid value, `lo` first, `hi` last (also when `hi - lo` is not
    /// a multiple of the step).
    pub fn grid(&self) -> Vec<f64> {
        let n = (self.span() / self.step + 1e-9).floor() as usize;
        let mut v: Vec<f64> = (0..=n)
            .map(|k| (self.lo + k as f64 * self.step).round().min(self.hi))
            .collect();
        if v.last().is_some_and(|&l| l < self.hi) {
            v.push(self.hi);
        }
        v.dedup();
        v
    }

    /// The grid value nearest to `x` (clamped to the range).
    pub fn snap(&self, x: f64) -> f64 {
        let x = x.clamp(self.lo, self.hi);
        let k = ((x - self.lo) / self.step).round();
        let v = (self.lo + k * self.step).round();
        // `hi` is a grid value even off the step: take it when nearer.
        if (self.hi - x).abs() < (v - x).abs() || v > self.hi {
            self.hi
        } else {
            v
        }
    }

    /// Number of grid values.
    pub fn len(&self) -> usize {
        self.grid().len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

impl std::str::FromStr for Knob {
    type Err = Error;

    fn from_str(s: &str) -> Result<Knob> {
        Knob::parse(s)
    }
}

impl Knob {
    /// Parses `[INDEX.]FIELD`.
    pub fn parse(s: &str) -> Result<Knob> {
        let t = s.trim();
        let (scheme, field) = match t.split_once('.') {
            Some((i, rest)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => {
                let idx = i.parse::<usize>().map_err(|_| {
                    Error::usage(format!(
                        "--knob {s}: scheme index \"{i}\" is too large (expected a small number like 0 or 1)"
                    ))
                })?;
                (idx, rest)
            }
            _ => (0, t),
        };
        let f = field.to_ascii_lowercase().replace('-', "_");
        let found = FIELDS.iter().find(|(n, _)| *n == f).map(|&(_, f)| f);
        match found {
            Some(field) => Ok(Knob { scheme, field }),
            None => Err(Error::usage(format!(
                "--knob {s}: unknown field \"{field}\" (expected one of min_sz, max_sz, min_freq, \
                 max_freq, min_age, max_age, quota.ms, quota.sz, quota.reset_interval, optionally \
                 after a scheme index like 1.quota.sz)"
            ))),
        }
    }

    /// `min_age` for scheme 0, `1.quota.sz` otherwise.
    pub fn name(&self) -> String {
        if self.scheme == 0 {
            self.field.name().to_string()
        } else {
            format!("{}.{}", self.scheme, self.field.name())
        }
    }

    pub fn kind(&self) -> Kind {
        self.field.kind()
    }

    /// Checks that the scheme exists.
    pub fn check_scheme(&self, schemes: &[Damos]) -> Result<()> {
        if self.scheme >= schemes.len() {
            return Err(Error::usage(format!(
                "--knob {}: scheme index {} is past the last scheme (the file has {} scheme{}, \
                 indexes 0..{})",
                self.name(),
                self.scheme,
                schemes.len(),
                if schemes.len() == 1 { "" } else { "s" },
                schemes.len().saturating_sub(1)
            )));
        }
        Ok(())
    }

    /// The knob's current value in `schemes`.
    pub fn get(&self, schemes: &[Damos]) -> Result<f64> {
        self.check_scheme(schemes)?;
        let s = &schemes[self.scheme];
        let p = &s.pattern;
        Ok(match self.field {
            Field::MinSz => p.min_sz as f64,
            Field::MaxSz => p.max_sz as f64,
            Field::MinFreq => f64::from(p.min_freq_bp),
            Field::MaxFreq => f64::from(p.max_freq_bp),
            Field::MinAge => p.min_age_us as f64,
            Field::MaxAge => p.max_age_us as f64,
            Field::QuotaMs => s.quota.ms as f64,
            Field::QuotaSz => s.quota.sz as f64,
            Field::QuotaResetInterval => s.quota.reset_interval_ms as f64,
        })
    }

    /// A copy of `schemes` with the knob set to `v` (rounded to its unit).
    pub fn apply(&self, schemes: &[Damos], v: f64) -> Result<Vec<Damos>> {
        self.check_scheme(schemes)?;
        let mut out = schemes.to_vec();
        let s = &mut out[self.scheme];
        let n = v.round().max(0.0);
        let u = n as u64;
        let bp = n.min(10_000.0) as u32;
        match self.field {
            Field::MinSz => s.pattern.min_sz = u,
            Field::MaxSz => s.pattern.max_sz = u,
            Field::MinFreq => s.pattern.min_freq_bp = bp,
            Field::MaxFreq => s.pattern.max_freq_bp = bp,
            Field::MinAge => s.pattern.min_age_us = u,
            Field::MaxAge => s.pattern.max_age_us = u,
            Field::QuotaMs => s.quota.ms = u,
            Field::QuotaSz => s.quota.sz = u,
            Field::QuotaResetInterval => s.quota.reset_interval_ms = u,
        }
        Ok(out)
    }

    /// Checks that every value of `lo..=hi` keeps the scheme valid: the
    /// other bound of a pattern pair is not crossed, frequencies stay within
    /// 100%.
    pub fn check_range(&self, schemes: &[Damos], lo: f64, hi: f64) -> Result<()> {
        self.check_scheme(schemes)?;
        let p = &schemes[self.scheme].pattern;
        let name = self.name();
        let above = |other: &str, bound: f64| {
            Error::usage(format!(
                "--range: end {} is above scheme {}'s {other} {} (expected a range within the \
                 scheme's other bound, or change {other} in the scheme file)",
                self.format(hi),
                self.scheme,
                self.format(bound)
            ))
        };
        let below = |other: &str, bound: f64| {
            Error::usage(format!(
                "--range: start {} is below scheme {}'s {other} {} (expected a range within the \
                 scheme's other bound, or change {other} in the scheme file)",
                self.format(lo),
                self.scheme,
                self.format(bound)
            ))
        };
        match self.field {
            Field::MinSz if hi > p.max_sz as f64 => return Err(above("max_sz", p.max_sz as f64)),
            Field::MaxSz if lo < p.min_sz as f64 => return Err(below("min_sz", p.min_sz as f64)),
            Field::MinFreq if hi > f64::from(p.max_freq_bp) => {
                return Err(above("max_freq", f64::from(p.max_freq_bp)))
            }
            Field::MaxFreq if lo < f64::from(p.min_freq_bp) => {
                return Err(below("min_freq", f64::from(p.min_freq_bp)))
            }
            Field::MinAge if hi > p.max_age_us as f64 => {
                return Err(above("max_age", p.max_age_us as f64))
            }
            Field::MaxAge if lo < p.min_age_us as f64 => {
                return Err(below("min_age", p.min_age_us as f64))
            }
            _ => {}
        }
        if self.kind() == Kind::Freq && hi > 10_000.0 {
            return Err(Error::usage(format!(
                "--range: end {} of {name} is above 100% (expected frequencies from 0% to 100%)",
                self.format(hi)
            )));
        }
        Ok(())
    }

    /// Parses one value in the knob's unit: a size (`4K`, `1.5G`, `0`), a
    /// frequency (`5%`, `5`, `max`), a time (`30s`, `100ms`, `0`).
    pub fn parse_value(&self, s: &str) -> Result<f64> {
        let t = s.trim();
        match self.kind() {
            Kind::Size => match t {
                "min" => Ok(0.0),
                _ => parse_size(t, Fraction::Round)
                    .map(|v| v as f64)
                    .map_err(|m| {
                        Error::usage(format!("bad size \"{s}\" for {}: {m}", self.name()))
                    }),
            },
            Kind::Freq => {
                let num = match t {
                    "min" => "0",
                    "max" => "100",
                    _ => t.strip_suffix('%').unwrap_or(t).trim(),
                };
                match num.parse::<f64>() {
                    Ok(v) if (0.0..=100.0).contains(&v) => Ok((v * 100.0).round()),
                    _ => Err(Error::usage(format!(
                        "\"{s}\" is not a frequency (expected a percentage from 0% to 100% for {})",
                        self.name()
                    ))),
                }
            }
            Kind::TimeUs | Kind::TimeMs => {
                let us = if t == "0" || t == "min" {
                    0
                } else {
                    parse_duration_us(t, Fraction::Round).map_err(|m| {
                        Error::usage(format!("bad time \"{s}\" for {}: {m}", self.name()))
                    })?
                };
                if self.kind() == Kind::TimeMs {
                    if us % 1000 != 0 {
                        return Err(Error::usage(format!(
                            "\"{s}\" is not a whole number of milliseconds (expected a time like \
                             10ms or 1s for {})",
                            self.name()
                        )));
                    }
                    Ok((us / 1000) as f64)
                } else {
                    Ok(us as f64)
                }
            }
        }
    }

    /// Parses `START..END`.
    pub fn parse_range(&self, s: &str) -> Result<(f64, f64)> {
        let (a, b) = s.split_once("..").ok_or_else(|| {
            Error::usage(format!(
                "--range {s}: no \"..\" (expected START..END, e.g. {})",
                self.example_range()
            ))
        })?;
        let wrap = |e: Error| Error::usage(format!("--range {s}: {e}"));
        let lo = self.parse_value(a).map_err(wrap)?;
        let hi = self.parse_value(b).map_err(wrap)?;
        if lo > hi {
            return Err(Error::usage(format!(
                "--range {s}: start is above end (expected START..END with START <= END)"
            )));
        }
        Ok((lo, hi))
    }

    /// The unit of the knob's values in JSON output.
    pub fn unit_name(&self) -> &'static str {
        match self.kind() {
            Kind::Size => "bytes",
            Kind::Freq => "basis points of the maximum access frequency",
            Kind::TimeUs => "microseconds",
            Kind::TimeMs => "milliseconds",
        }
    }

    /// An example range for error messages.
    pub fn example_range(&self) -> &'static str {
        match self.kind() {
            Kind::Size => "0..1G",
            Kind::Freq => "0%..10%",
            Kind::TimeUs => "0s..60s",
            Kind::TimeMs => "1ms..100ms",
        }
    }

    /// The default range: 0 s to 60 s for ages (the DAOS paper's sweep);
    /// other knobs need `--range`.
    pub fn default_range(&self) -> Option<(f64, f64)> {
        match self.field {
            Field::MinAge | Field::MaxAge => Some((0.0, 60e6)),
            _ => None,
        }
    }

    /// The default step: 1/60 of the range (1 s over 0-60 s), whole units,
    /// whole 4 KiB pages for sizes of a page or more.
    pub fn default_step(&self, lo: f64, hi: f64) -> f64 {
        let mut step = ((hi - lo) / 60.0).round().max(1.0);
        if self.kind() == Kind::Size && step >= 4096.0 {
            step = (step / 4096.0).round() * 4096.0;
        }
        step
    }

    /// A value with its unit, as the scheme file would write it (`max` for
    /// the highest value).
    pub fn format(&self, v: f64) -> String {
        let max_or = |x: u64, fmt: fn(u64) -> String| match x {
            u64::MAX => "max".to_string(),
            x => fmt(x),
        };
        match self.kind() {
            Kind::Size => max_or(v.round().max(0.0) as u64, fmt_size_approx),
            Kind::Freq => {
                let pct = v / 100.0;
                if pct.fract() == 0.0 {
                    format!("{pct:.0}%")
                } else {
                    format!("{pct}%")
                }
            }
            Kind::TimeUs => max_or(v.round().max(0.0) as u64, fmt_time_us_approx),
            Kind::TimeMs => max_or(v.round().max(0.0) as u64 * 1000, fmt_time_us_approx),
        }
    }

    /// The plot axis: (label, divisor from the knob's unit to the axis unit).
    pub fn axis(&self, hi: f64) -> (String, f64) {
        let name = self.name();
        match self.kind() {
            Kind::TimeUs => (format!("{name} (s)"), 1e6),
            Kind::TimeMs => (format!("{name} (ms)"), 1.0),
            Kind::Freq => (format!("{name} (%)"), 100.0),
            Kind::Size => {
                let (unit, div) = if hi >= (1u64 << 30) as f64 {
                    ("GiB", (1u64 << 30) as f64)
                } else if hi >= (1u64 << 20) as f64 {
                    ("MiB", (1u64 << 20) as f64)
                } else if hi >= 1024.0 {
                    ("KiB", 1024.0)
                } else {
                    ("bytes", 1.0)
                };
                (format!("{name} ({unit})"), div)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schemes() -> Vec<Damos> {
        udamon_scheme_file::parse(
            "4K max min min 5s max pageout\n2M max 5% max 1s 30s hugepage\n",
            "t.txt",
            None,
        )
        .unwrap()
    }

    #[test]
    fn parses_knob_names() {
        assert_eq!(Knob::parse("min_age").unwrap(), Knob::default());
        assert_eq!(
            Knob::parse("1.quota.sz").unwrap(),
            Knob {
                scheme: 1,
                field: Field::QuotaSz
            }
        );
        assert_eq!(
            Knob::parse("0.quota.reset_interval").unwrap().field,
            Field::QuotaResetInterval
        );
        assert_eq!(Knob::parse("max-freq").unwrap().field, Field::MaxFreq);
        assert_eq!(Knob::parse("quota.time").unwrap().field, Field::QuotaMs);
        let e = Knob::parse("min_agee").unwrap_err().to_string();
        assert!(
            e.starts_with("--knob min_agee: unknown field \"min_agee\" (expected one of min_sz"),
            "{e}"
        );
        let e = Knob::parse("2.min_age")
            .unwrap()
            .check_scheme(&schemes())
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--knob 2.min_age: scheme index 2 is past the last scheme (the file has 2 schemes, indexes 0..1)"
        );
    }

    #[test]
    fn parses_ranges_in_units() {
        let age = Knob::default();
        assert_eq!(age.parse_range("0s..60s").unwrap(), (0.0, 60e6));
        assert_eq!(age.parse_range("0..1m").unwrap(), (0.0, 60e6));
        assert_eq!(age.parse_range("500ms..2s").unwrap(), (5e5, 2e6));
        let e = age.parse_range("0s..60q").unwrap_err().to_string();
        assert_eq!(
            e,
            "--range 0s..60q: bad time \"60q\" for min_age: unknown unit \"q\" in duration \"60q\" \
             (expected us, ms, s, m or h)"
        );
        let e = age.parse_range("60s..0s").unwrap_err().to_string();
        assert_eq!(
            e,
            "--range 60s..0s: start is above end (expected START..END with START <= END)"
        );
        let e = age.parse_range("60s").unwrap_err().to_string();
        assert_eq!(
            e,
            "--range 60s: no \"..\" (expected START..END, e.g. 0s..60s)"
        );

        let sz = Knob::parse("1.quota.sz").unwrap();
        assert_eq!(sz.parse_range("0..1G").unwrap(), (0.0, (1u64 << 30) as f64));
        assert_eq!(sz.format(128.0 * 1048576.0), "128M");
        let fr = Knob::parse("max_freq").unwrap();
        assert_eq!(fr.parse_range("0%..12.5%").unwrap(), (0.0, 1250.0));
        assert_eq!(fr.format(1250.0), "12.5%");
        assert!(fr.parse_range("0..150%").is_err());
        let ms = Knob::parse("quota.ms").unwrap();
        assert_eq!(ms.parse_range("1ms..1s").unwrap(), (1.0, 1000.0));
        let e = ms.parse_range("0..1500us").unwrap_err().to_string();
        assert!(e.contains("not a whole number of milliseconds"), "{e}");
        assert_eq!(ms.format(1000.0), "1s");
        assert_eq!(age.format(16.5e6), "16.5s");
        assert_eq!(age.format(250e3), "250ms");
    }

    #[test]
    fn ranges_respect_the_other_bound() {
        let s = schemes();
        let k = Knob::parse("1.min_age").unwrap();
        assert!(k.check_range(&s, 0.0, 30e6).is_ok());
        let e = k.check_range(&s, 0.0, 60e6).unwrap_err().to_string();
        assert_eq!(
            e,
            "--range: end 60s is above scheme 1's max_age 30s (expected a range within the \
             scheme's other bound, or change max_age in the scheme file)"
        );
        let k = Knob::parse("1.max_age").unwrap();
        assert!(k.check_range(&s, 0.0, 60e6).is_err());
    }

    #[test]
    fn applies_values_to_a_copy() {
        let s = schemes();
        let t = Knob::parse("1.quota.sz")
            .unwrap()
            .apply(&s, 4096.4)
            .unwrap();
        assert_eq!(t[1].quota.sz, 4096);
        assert_eq!(s[1].quota.sz, 0);
        let t = Knob::default().apply(&s, 17e6).unwrap();
        assert_eq!(t[0].pattern.min_age_us, 17_000_000);
        assert_eq!(Knob::default().get(&t).unwrap(), 17e6);
        let t = Knob::parse("min_freq").unwrap().apply(&s, 250.0).unwrap();
        assert_eq!(t[0].pattern.min_freq_bp, 250);
    }

    #[test]
    fn grid_and_snap() {
        let d = Domain::new(0.0, 60e6, 1e6).unwrap();
        let g = d.grid();
        assert_eq!(g.len(), 61);
        assert_eq!((g[0], g[60]), (0.0, 60e6));
        assert_eq!(d.snap(16.4e6), 16e6);
        assert_eq!(d.snap(-3.0), 0.0);
        assert_eq!(d.snap(99e6), 60e6);
        let d = Domain::new(0.0, 10.0, 3.0).unwrap();
        assert_eq!(d.grid(), vec![0.0, 3.0, 6.0, 9.0, 10.0]);
        assert_eq!(d.snap(9.8), 10.0);
        assert_eq!(Knob::default().default_step(0.0, 60e6), 1e6);
        assert_eq!(
            Knob::parse("quota.sz")
                .unwrap()
                .default_step(0.0, (1u64 << 30) as f64),
            17_895_424.0
        );
        assert!(Domain::new(5.0, 1.0, 1.0).is_err());
        assert!(Domain::new(0.0, 1.0, 0.0).is_err());
    }
}
