//! What-if analysis (`udamon replay`): a record's replay predicts what
//! schemes would do to the recorded workload, optionally checked against
//! real runs of it.

use serde::Serialize;
use udamon_core::schemes::Damos;
use udamon_core::Attrs;
use udamon_record::Reader;
use udamon_session::sim;

use crate::error::{Error, Result};
use crate::plan::{real_runner, synthetic_runner, Spec};
use crate::replay::{from_record, ReplayOptions, ReplayStats};
use crate::runner::Runner;
use crate::score::{Metrics, ScoreFn};

/// A prediction to make.
pub struct WhatIf<'a> {
    pub record: &'a Reader,
    /// The record's name in messages and the report (its path).
    pub name: &'a str,
    pub schemes: &'a [Damos],
    pub score: &'a ScoreFn,
    /// Seed of the replay (and of the check's runs) [default: the
    /// record's, else 0].
    pub seed: Option<u64>,
    /// Also run the real workload and show how far the prediction is.
    pub check: Option<Check>,
}

/// The real workload of a check: `spec`, else the record's own spec
/// (simulator records).
pub struct Check {
    pub spec: Option<Spec>,
    /// Simulated duration of the real runs [default: the spec's].
    pub duration_us: Option<u64>,
    /// Attributes of the runs on `spec`.
    pub attrs: Attrs,
}

/// One workload without and with the schemes, scored.
#[derive(Serialize)]
pub struct Side {
    pub without_schemes: Metrics,
    pub with_schemes: Metrics,
    pub score: f64,
    pub raw_score: f64,
    pub sla_ok: bool,
}

/// What the replay predicts, and what the real runs gave.
#[derive(Serialize)]
pub struct Prediction {
    pub record: String,
    pub replay: ReplayStats,
    pub seed: u64,
    pub predicted: Side,
    /// With a check: the real runs.
    pub real: Option<Side>,
}

fn side(runner: &mut dyn Runner, schemes: &[Damos], scorer: &ScoreFn) -> Result<Side> {
    let base = runner.run(&[])?;
    let with = runner.run(schemes)?;
    let mut sc = scorer.fresh();
    sc.score(&base, &base, 0.0)?;
    let s = sc.score(&with, &base, 0.0)?;
    Ok(Side {
        without_schemes: base,
        with_schemes: with,
        score: s.score,
        raw_score: s.raw,
        sla_ok: s.sla_ok,
    })
}

/// Replays the record without and with the schemes, then (with a check)
/// runs the real workload the same two ways.
pub fn predict(w: &WhatIf) -> Result<Prediction> {
    let replay = from_record(w.record, w.name, &ReplayOptions::default())?;
    let seed = sim::seed(w.seed, replay.seed);
    let mut synthetic = synthetic_runner(&replay, w.name, seed);
    let predicted = side(&mut synthetic, w.schemes, w.score)?;
    let real = match &w.check {
        Some(c) => {
            let runner = real_runner(
                &replay,
                w.name,
                c.spec.as_ref(),
                seed,
                c.duration_us,
                c.attrs,
            )?;
            let Some(mut runner) = runner else {
                return Err(Error::usage(format!(
                    "--check: {} is not a simulator record, so there is no workload to check \
                     against (expected --sim SPEC)",
                    w.name
                )));
            };
            Some(side(&mut runner, w.schemes, w.score)?)
        }
        None => None,
    };
    Ok(Prediction {
        record: w.name.to_string(),
        replay: replay.stats,
        seed,
        predicted,
        real,
    })
}
