//! The tuning loops: the DAOS runtime over real runs ([`tune`]), a dense
//! sweep ([`sweep`]), and the dense sweep over a replayed record with one
//! confirming real run ([`replay_tune`]).

use serde::Serialize;
use udamon_core::schemes::Damos;

use crate::error::{Error, Result};
use crate::fit::{degree_for, polyfit, Fit, Peak};
use crate::knob::{Domain, Knob};
use crate::runner::{run_all, Runner};
use crate::sample::{Sampler, Stage};
use crate::score::{Metrics, ScoreFn};

/// Points of the grid the fitted curve's derivative is checked on.
pub const PEAK_GRID: usize = 2001;

/// What to tune and how much it may cost.
#[derive(Clone, Copy, Debug)]
pub struct TuneConfig {
    pub knob: Knob,
    pub domain: Domain,
    /// Runs with schemes for the estimate (the scheme-less run and the
    /// confirming run come on top).
    pub samples: usize,
    /// Seeds the sampling; the runner has its own (the workload's) seed.
    pub seed: u64,
    /// Apply the fitted curve's peak even when its confirming run scores
    /// below the best sample (the paper's behaviour).
    pub trust_fit: bool,
}

/// One measured (or, in a replay, predicted) run.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// 1-based order of the run.
    pub index: usize,
    /// `global`, `local`, `sweep` or `confirm`.
    pub stage: &'static str,
    /// The knob's value, in its unit.
    pub value: f64,
    /// The value with its unit (`17s`).
    pub display: String,
    pub metrics: Metrics,
    /// The score after the SLA rule.
    pub score: f64,
    /// The formula's value before the SLA rule.
    pub raw_score: f64,
    pub sla_ok: bool,
}

/// Where the chosen value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The fitted curve's highest peak (confirmed by a run).
    FitPeak,
    /// The best sample: the fit's peak measured worse, or there was no fit.
    BestSample,
    /// The best predicted value of a replay sweep.
    Replay,
}

/// The value applied, with what was predicted and what a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Choice {
    pub value: f64,
    pub display: String,
    pub source: Source,
    /// The fitted (or replay-predicted) score at the value.
    pub predicted_score: Option<f64>,
    /// The confirming run (or the sample itself for `best_sample`).
    pub measured: Option<Sample>,
}

/// The outcome of a tuning.
#[derive(Clone, Debug, Serialize)]
pub struct Tuned {
    /// `samples` (real runs, fitted) or `replay` (predicted sweep).
    pub mode: &'static str,
    pub knob: String,
    pub scheme: usize,
    pub domain: Domain,
    pub seed: u64,
    pub workload: String,
    /// The scheme-less run the samples' scores are relative to (in a
    /// replay: the synthetic workload's).
    pub baseline: Metrics,
    pub samples: Vec<Sample>,
    pub fit: Option<Fit>,
    /// Local maxima of the fit, highest first.
    pub peaks: Vec<Peak>,
    /// The fit's highest peak and its confirming run, when there is a fit.
    pub fit_peak: Option<Choice>,
    pub chosen: Choice,
    /// Replay only: the real scheme-less run the confirming run is scored
    /// against.
    pub confirm_baseline: Option<Metrics>,
    /// The schemes with the chosen value.
    #[serde(skip)]
    pub schemes: Vec<Damos>,
}

impl Tuned {
    /// The tuned field's name without its scheme index (`min_age`).
    pub fn field_name(&self) -> String {
        self.knob
            .rsplit('.')
            .next()
            .unwrap_or(&self.knob)
            .to_string()
    }

    /// Where the chosen value came from, in words, with its measured score.
    pub fn source_text(&self) -> String {
        let measured = self
            .chosen
            .measured
            .as_ref()
            .map(|m| format!(", measured score {:.4}", m.score))
            .unwrap_or_default();
        match self.chosen.source {
            Source::FitPeak => format!("the fitted curve's peak{measured}"),
            Source::BestSample => format!("the best sample{measured}"),
            Source::Replay => format!(
                "best predicted by replay, score {:.4}{measured}",
                self.chosen.predicted_score.unwrap_or(f64::NAN)
            ),
        }
    }

    /// The tuned schemes as a TOML scheme file (for `udamon apply`), after
    /// a comment line saying what was tuned.
    pub fn schemes_toml(&self) -> String {
        format!(
            "# tuned by udamon tune: {} = {} ({})\n{}",
            self.knob,
            self.chosen.display,
            self.source_text(),
            udamon_scheme_file::to_toml(&self.schemes)
        )
    }

    /// The outcome as JSON: its fields, how to evaluate the fit
    /// (`x_normalisation`), the knob's `unit`, and the tuned `schemes`.
    pub fn to_json(&self, knob: &Knob) -> Result<serde_json::Value> {
        let mut v = serde_json::to_value(self).map_err(|e| Error::Run(e.to_string()))?;
        if let Some(m) = v.as_object_mut() {
            m.insert(
                "x_normalisation".into(),
                serde_json::json!("u = 2 * (x - fit.x_lo) / (fit.x_hi - fit.x_lo) - 1; score = sum(coeffs[k] * u^k)"),
            );
            m.insert("unit".into(), serde_json::json!(knob.unit_name()));
            m.insert("schemes".into(), udamon_scheme_file::to_json(&self.schemes));
        }
        Ok(v)
    }
}

fn sample(
    index: usize,
    stage: &'static str,
    knob: &Knob,
    value: f64,
    metrics: Metrics,
    scorer: &mut ScoreFn,
    base: &Metrics,
) -> Result<Sample> {
    let s = scorer.score(&metrics, base, value)?;
    Ok(Sample {
        index,
        stage,
        value,
        display: knob.format(value),
        metrics,
        score: s.score,
        raw_score: s.raw,
        sla_ok: s.sla_ok,
    })
}

/// Checks the knob and range against the schemes.
pub fn check(schemes: &[Damos], knob: &Knob, domain: &Domain) -> Result<()> {
    if schemes.is_empty() {
        return Err(Error::usage(
            "the scheme file has no scheme (expected at least one scheme to tune)",
        ));
    }
    knob.check_scheme(schemes)?;
    knob.check_range(schemes, domain.lo, domain.hi)
}

/// The DAOS runtime: a scheme-less run, `samples` runs at values from the
/// 60/40 [`Sampler`], a polynomial of degree `samples / 3` through the
/// scores, its highest peak confirmed by one more run. `progress(done,
/// total)` is called after every run.
pub fn tune(
    schemes: &[Damos],
    cfg: &TuneConfig,
    runner: &mut dyn Runner,
    scorer: &mut ScoreFn,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Tuned> {
    check(schemes, &cfg.knob, &cfg.domain)?;
    let knob = cfg.knob;
    let mut sampler = Sampler::new(cfg.domain, cfg.samples, cfg.seed);
    let (g, l) = sampler.plan();
    let total = g + l + 2;
    let base = runner.run(&[])?;
    // The scheme-less run is the first score Listing 2 sees (0 for it).
    scorer.score(&base, &base, knob.get(schemes)?)?;
    progress(1, total);
    let mut samples: Vec<Sample> = Vec::new();
    let mut seen: Vec<(f64, f64)> = Vec::new();
    while let Some((x, stage)) = sampler.next(&seen) {
        let m = runner.run(&knob.apply(schemes, x)?)?;
        let stage = match stage {
            Stage::Global => "global",
            Stage::Local => "local",
        };
        let s = sample(samples.len() + 1, stage, &knob, x, m, scorer, &base)?;
        seen.push((x, s.score));
        samples.push(s);
        progress(samples.len() + 1, total);
    }
    let best = samples
        .iter()
        .cloned()
        .reduce(|a, b| if b.score > a.score { b } else { a })
        .ok_or_else(|| Error::usage("no sample to tune with (expected --samples 1 or more)"))?;
    let xs: Vec<f64> = samples.iter().map(|s| s.value).collect();
    let ys: Vec<f64> = samples.iter().map(|s| s.score).collect();
    let mut distinct = xs.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let degree = degree_for(samples.len(), distinct.len());
    let (mut fit, mut peaks) = (None, Vec::new());
    if degree >= 1 {
        let f = polyfit(&xs, &ys, degree, cfg.domain.lo, cfg.domain.hi)?;
        peaks = f.peaks(PEAK_GRID);
        fit = Some(f);
    }
    let mut fit_peak = None;
    let mut chosen = Choice {
        value: best.value,
        display: best.display.clone(),
        source: Source::BestSample,
        predicted_score: fit.as_ref().map(|f| f.eval(best.value)),
        measured: Some(best.clone()),
    };
    if let (Some(f), Some(p)) = (&fit, peaks.first()) {
        let x = cfg.domain.snap(p.x);
        let m = runner.run(&knob.apply(schemes, x)?)?;
        let confirm = sample(samples.len() + 1, "confirm", &knob, x, m, scorer, &base)?;
        let c = Choice {
            value: x,
            display: knob.format(x),
            source: Source::FitPeak,
            predicted_score: Some(f.eval(x)),
            measured: Some(confirm.clone()),
        };
        if cfg.trust_fit || confirm.score >= best.score {
            chosen = c.clone();
        }
        fit_peak = Some(c);
    }
    progress(total, total);
    Ok(Tuned {
        mode: "samples",
        knob: knob.name(),
        scheme: knob.scheme,
        domain: cfg.domain,
        seed: cfg.seed,
        workload: runner.describe(),
        baseline: base,
        schemes: knob.apply(schemes, chosen.value)?,
        samples,
        fit,
        peaks,
        fit_peak,
        chosen,
        confirm_baseline: None,
    })
}

/// Runs every value of `values` (in parallel where the runner can fork)
/// and scores them in `values` order with `scorer`, against `base`.
#[allow(clippy::too_many_arguments)]
pub fn sweep(
    schemes: &[Damos],
    knob: &Knob,
    values: &[f64],
    runner: &mut dyn Runner,
    scorer: &mut ScoreFn,
    base: &Metrics,
    threads: usize,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Sample>> {
    let jobs = values
        .iter()
        .map(|&x| knob.apply(schemes, x))
        .collect::<Result<Vec<_>>>()?;
    let metrics = run_all(runner, &jobs, threads, progress)?;
    values
        .iter()
        .zip(metrics)
        .enumerate()
        .map(|(i, (&x, m))| sample(i + 1, "sweep", knob, x, m, scorer, base))
        .collect()
}

/// Score differences a replay prediction does not resolve: values whose
/// predicted scores are within this of the best are taken as equally good.
pub const REPLAY_TIE: f64 = 0.001;

/// The index of the best score, after a moving average over `±half`
/// neighbours (truncated at the ends; 0 for none). Scores within `tie` of
/// the best count as equal; among them the middle of the longest run of
/// neighbouring values is taken (the flattest optimum).
pub fn smoothed_best(scores: &[f64], half: usize, tie: f64) -> Option<usize> {
    if scores.is_empty() {
        return None;
    }
    let sm: Vec<f64> = (0..scores.len())
        .map(|i| {
            let a = i.saturating_sub(half);
            let b = (i + half + 1).min(scores.len());
            scores[a..b].iter().sum::<f64>() / (b - a) as f64
        })
        .collect();
    let max = sm.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tol = tie.max(1e-9 * max.abs().max(1e-9));
    let (mut best, mut best_len) = ((0, 0), 0);
    let mut i = 0;
    while i < sm.len() {
        if sm[i] >= max - tol {
            let mut j = i;
            while j + 1 < sm.len() && sm[j + 1] >= max - tol {
                j += 1;
            }
            if j - i + 1 > best_len {
                best = (i, j);
                best_len = j - i + 1;
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    Some((best.0 + best.1) / 2)
}

/// Tuning by replay: every grid value runs on `synthetic` (a replayed
/// record), scored against its scheme-less run; the best predicted value is
/// chosen (not smoothed: every replay run uses the same seed, so
/// neighbouring predictions differ by the schemes, not by noise; scores
/// within [`REPLAY_TIE`] of the best are equal, and the middle of the
/// longest run of them is taken) and, when `real` is given, confirmed by one
/// real run (plus the real scheme-less run its score needs).
#[allow(clippy::too_many_arguments)]
pub fn replay_tune(
    schemes: &[Damos],
    knob: &Knob,
    domain: &Domain,
    seed: u64,
    synthetic: &mut dyn Runner,
    real: Option<&mut dyn Runner>,
    scorer: &ScoreFn,
    threads: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Tuned> {
    check(schemes, knob, domain)?;
    let values = domain.grid();
    let total = values.len() + 1 + if real.is_some() { 2 } else { 0 };
    let base = synthetic.run(&[])?;
    let mut sc = scorer.fresh();
    sc.score(&base, &base, knob.get(schemes)?)?;
    progress(1, total);
    let predicted = sweep(
        schemes,
        knob,
        &values,
        synthetic,
        &mut sc,
        &base,
        threads,
        &mut |n| progress(1 + n, total),
    )?;
    let scores: Vec<f64> = predicted.iter().map(|s| s.score).collect();
    let i = smoothed_best(&scores, 0, REPLAY_TIE)
        .ok_or_else(|| Error::usage("the range has no value"))?;
    let x = values[i];
    let mut chosen = Choice {
        value: x,
        display: knob.format(x),
        source: Source::Replay,
        predicted_score: Some(scores[i]),
        measured: None,
    };
    let mut confirm_baseline = None;
    let mut workload = synthetic.describe();
    if let Some(r) = real {
        let rb = r.run(&[])?;
        let mut rs = scorer.fresh();
        rs.score(&rb, &rb, knob.get(schemes)?)?;
        let m = r.run(&knob.apply(schemes, x)?)?;
        chosen.measured = Some(sample(
            values.len() + 1,
            "confirm",
            knob,
            x,
            m,
            &mut rs,
            &rb,
        )?);
        confirm_baseline = Some(rb);
        workload = format!("{workload}; confirmed on {}", r.describe());
    }
    progress(total, total);
    Ok(Tuned {
        mode: "replay",
        knob: knob.name(),
        scheme: knob.scheme,
        domain: *domain,
        seed,
        workload,
        baseline: base,
        schemes: knob.apply(schemes, x)?,
        samples: predicted,
        fit: None,
        peaks: Vec::new(),
        fit_peak: None,
        chosen,
        confirm_baseline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoothing_picks_robust_maxima() {
        assert_eq!(smoothed_best(&[0.0, 1.0, 5.0, 1.0, 0.0], 0, 0.0), Some(2));
        // a lone spike next to a cliff loses to a broad plateau when smoothed
        let s = [0.0, 0.0, 3.0, -5.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        assert_eq!(smoothed_best(&s, 2, 0.0), Some(7));
        assert_eq!(smoothed_best(&s, 0, 0.0), Some(2));
        // a flat plateau: its middle
        assert_eq!(
            smoothed_best(&[-3.0, 0.0, 0.0, 0.0, 0.0, 0.0], 0, 0.0),
            Some(3)
        );
        // a blip within the tie tolerance loses to the longer plateau
        let s = [-0.5, -0.1, 0.0007, 0.0, -0.01, 0.0, 0.0, 0.0, 0.0, 0.0];
        assert_eq!(smoothed_best(&s, 0, 0.001), Some(7));
        assert_eq!(smoothed_best(&s, 0, 0.0), Some(2));
        assert_eq!(smoothed_best(&[], 2, 0.0), None);
    }
}
