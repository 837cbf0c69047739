//! A tuning as one call: what to tune, on what, how long ([`Plan`]), run
//! by [`run`]; and the choice of the runners a replay predicts and
//! confirms with ([`synthetic_runner`], [`real_runner`]), which `udamon
//! tune --replay` and `udamon replay --check` share.
//!
//! ```
//! use udamon_core::Attrs;
//! use udamon_tune::plan::{self, Budget, Mode, Plan, Spec};
//!
//! let spec = "duration = \"4s\"\n[[layout]]\nobject = \"a\"\nsize = \"16M\"\n\
//!             [[phase]]\nduration = \"4s\"\n[[phase.access]]\nobject = \"a\"\nrate = 10\n";
//! let schemes = udamon_scheme_file::parse("4K max min min 5s max pageout", "doc", None)?;
//! let (knob, domain) = plan::knob_and_domain(&schemes, "doc", "min_age", Some("0s..4s"), Some("1s"))?;
//! let p = Plan {
//!     budget: Budget::Samples(3),
//!     ..Plan::new(schemes, knob, domain, Mode::Sim(Spec::text(spec, "doc")))
//! };
//! let tuned = plan::run(p, &mut |_, _| {})?;
//! assert_eq!(tuned.samples.len(), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::PathBuf;

use udamon_core::schemes::Damos;
use udamon_core::units::{parse_duration_us, Fraction};
use udamon_core::Attrs;
use udamon_record::Reader;
use udamon_session::sim;

use crate::error::{Error, Result};
use crate::knob::{Domain, Knob};
use crate::replay::{from_record, Replay, ReplayOptions};
use crate::runner::{default_threads, Runner, SimRunner};
use crate::score::ScoreFn;
use crate::tune::{check, replay_tune, tune, TuneConfig, Tuned};

/// A workload spec: a file to read, or text at hand.
#[derive(Clone, Debug)]
pub enum Spec {
    File(PathBuf),
    Text { text: String, origin: String },
}

impl Spec {
    pub fn text(text: &str, origin: &str) -> Spec {
        Spec::Text {
            text: text.to_string(),
            origin: origin.to_string(),
        }
    }

    /// The spec's text and the name messages give it (a file's path).
    pub fn load(&self) -> Result<(String, String)> {
        match self {
            Spec::File(p) => std::fs::read_to_string(p)
                .map(|t| (t, p.display().to_string()))
                .map_err(|e| Error::Usage(format!("cannot read spec {}: {e}", p.display()))),
            Spec::Text { text, origin } => Ok((text.clone(), origin.clone())),
        }
    }
}

/// The knob `knob` names (`[INDEX.]FIELD`) and the values tried: `range`
/// (`START..END` in the knob's unit) in steps of `step` (defaults: the
/// knob's), checked against `schemes` (from `origin`, for messages).
pub fn knob_and_domain(
    schemes: &[Damos],
    origin: &str,
    knob: &str,
    range: Option<&str>,
    step: Option<&str>,
) -> Result<(Knob, Domain)> {
    if schemes.is_empty() {
        return Err(Error::usage(format!(
            "{origin}: no scheme in the file (expected at least one scheme to tune)"
        )));
    }
    let knob = Knob::parse(knob)?;
    knob.check_scheme(schemes)?;
    let (lo, hi) = match range {
        Some(r) => knob.parse_range(r)?,
        None => knob.default_range().ok_or_else(|| {
            Error::usage(format!(
                "--knob {} has no default range (expected --range, e.g. --range {})",
                knob.name(),
                knob.example_range()
            ))
        })?,
    };
    let step = match step {
        Some(s) => {
            let v = knob
                .parse_value(s)
                .map_err(|e| Error::usage(format!("--step {s}: {e}")))?;
            if v <= 0.0 {
                return Err(Error::usage(format!(
                    "--step {s}: the step is 0 (expected a step above 0, e.g. {})",
                    knob.format(knob.default_step(lo, hi))
                )));
            }
            v
        }
        None => knob.default_step(lo, hi),
    };
    let domain = Domain::new(lo, hi, step)?;
    check(schemes, &knob, &domain)?;
    Ok((knob, domain))
}

/// How many sampled runs a tuning makes (real runs; a replay predicts every
/// step value instead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Budget {
    Samples(usize),
    /// As many as `limit / unit` (durations as given: `2h`, `10m`): a time
    /// budget and what one run takes.
    Time {
        limit: String,
        unit: String,
    },
}

impl Default for Budget {
    fn default() -> Self {
        Budget::Samples(10)
    }
}

impl Budget {
    /// The number of samples, at least 1.
    pub fn samples(&self) -> Result<usize> {
        match self {
            Budget::Time { limit, unit } => {
                let us = |flag: &str, s: &str| {
                    parse_duration_us(s, Fraction::Round)
                        .map_err(|e| Error::usage(format!("--{flag}: {e}")))
                };
                let t_us = us("time-limit", limit)?;
                let u_us = us("unit-time", unit)?;
                if u_us == 0 {
                    return Err(Error::usage(
                        "--unit-time 0: a run takes some time (expected e.g. 60s)",
                    ));
                }
                let n = (t_us / u_us) as usize;
                if n == 0 {
                    return Err(Error::usage(format!(
                        "--time-limit {limit} is shorter than one --unit-time {unit} (expected a limit of several runs)"
                    )));
                }
                Ok(n)
            }
            Budget::Samples(0) => Err(Error::usage(
                "--samples 0: nothing to fit (expected 1 or more, e.g. 10)",
            )),
            Budget::Samples(n) => Ok(*n),
        }
    }
}

/// What a tuning's runs are.
pub enum Mode<'a> {
    /// Real runs of a simulated workload.
    Sim(Spec),
    /// Every step value predicted on a replay of a record (`name`: its
    /// path, for messages), the best confirmed by one real run on `check`,
    /// else on the record's own spec (simulator records), else not at all.
    Replay {
        record: &'a Reader,
        name: String,
        check: Option<Spec>,
    },
    /// Real runs of the caller's runner.
    Runner(&'a mut dyn Runner),
}

/// A tuning to perform.
pub struct Plan<'a> {
    /// The schemes whose knob is tuned.
    pub schemes: Vec<Damos>,
    pub knob: Knob,
    /// The range and step of the values tried.
    pub domain: Domain,
    pub mode: Mode<'a>,
    /// Seed of the sampling and of the simulated workload [default: the
    /// spec's (or the record's) seed, else 0].
    pub seed: Option<u64>,
    /// Simulated duration of the real runs [default: the spec's].
    pub duration_us: Option<u64>,
    /// Attributes of the real runs on a spec (a record's own spec runs
    /// with the record's).
    pub attrs: Attrs,
    /// Sampled runs (not a replay's, which predicts every step value).
    pub budget: Budget,
    /// Runs at once in a replay sweep.
    pub threads: usize,
    /// Apply the fitted curve's peak even when its confirming run scores
    /// below the best sample (the paper's behaviour).
    pub trust_fit: bool,
    pub score: ScoreFn,
}

impl<'a> Plan<'a> {
    /// Ten samples, the seed of the workload, default attributes, the
    /// machine's parallelism, Listing 2's score.
    pub fn new(schemes: Vec<Damos>, knob: Knob, domain: Domain, mode: Mode<'a>) -> Plan<'a> {
        Plan {
            schemes,
            knob,
            domain,
            mode,
            seed: None,
            duration_us: None,
            attrs: Attrs::default(),
            budget: Budget::default(),
            threads: default_threads(),
            trust_fit: false,
            score: ScoreFn::default(),
        }
    }
}

/// The runner of a record's replay: its synthetic workload, monitored with
/// the record's attributes, at `seed`.
pub fn synthetic_runner(replay: &Replay, record: &str, seed: u64) -> SimRunner {
    SimRunner::new(
        replay.workload.clone(),
        replay.attrs,
        seed,
        &format!("replay of {record}"),
    )
}

/// The real workload a replay is confirmed or checked on: `spec` (with
/// `attrs`), else the record's own spec (simulator records, with the
/// record's attributes), else none.
pub fn real_runner(
    replay: &Replay,
    record: &str,
    spec: Option<&Spec>,
    seed: u64,
    duration_us: Option<u64>,
    attrs: Attrs,
) -> Result<Option<SimRunner>> {
    Ok(match (spec, &replay.spec_toml) {
        (Some(s), _) => {
            let (text, origin) = s.load()?;
            Some(SimRunner::from_spec(
                &text,
                &origin,
                Some(seed),
                duration_us,
                attrs,
            )?)
        }
        (None, Some(own)) => Some(SimRunner::from_spec(
            own,
            &format!("{record} (its spec)"),
            Some(seed),
            duration_us,
            replay.attrs,
        )?),
        (None, None) => None,
    })
}

/// Runs the tuning. `progress(done, total)` is called after every run.
pub fn run(plan: Plan, progress: &mut dyn FnMut(u64, u64)) -> Result<Tuned> {
    let Plan {
        schemes,
        knob,
        domain,
        mode,
        seed,
        duration_us,
        attrs,
        budget,
        threads,
        trust_fit,
        mut score,
    } = plan;
    let threads = threads.max(1);
    let mut sampled = |runner: &mut dyn Runner, seed: u64| {
        let cfg = TuneConfig {
            knob,
            domain,
            samples: budget.samples()?,
            seed,
            trust_fit,
        };
        let total = cfg.samples as u64 + 2;
        tune(&schemes, &cfg, runner, &mut score, &mut |d, _| {
            progress(d as u64, total)
        })
    };
    match mode {
        Mode::Sim(spec) => {
            let (text, origin) = spec.load()?;
            let mut runner = SimRunner::from_spec(&text, &origin, seed, duration_us, attrs)?;
            let seed = seed.unwrap_or(runner.seed());
            sampled(&mut runner, seed)
        }
        Mode::Runner(runner) => sampled(runner, seed.unwrap_or(0)),
        Mode::Replay {
            record,
            name,
            check,
        } => {
            let replay = from_record(record, &name, &ReplayOptions::default())?;
            let seed = sim::seed(seed, replay.seed);
            let mut synthetic = synthetic_runner(&replay, &name, seed);
            let mut real = real_runner(&replay, &name, check.as_ref(), seed, duration_us, attrs)?;
            let total = domain.len() as u64 + 3;
            replay_tune(
                &schemes,
                &knob,
                &domain,
                seed,
                &mut synthetic,
                real.as_mut().map(|r| r as &mut dyn Runner),
                &score,
                threads,
                &mut |d, _| progress(d as u64, total),
            )
        }
    }
}
