//! `udamon tune`: the DAOS auto-tuning runtime over a simulated workload, or
//! over a replayed record with one confirming real run; and the tuning
//! benchmark ([`bench_tune`], `udamon bench --only tune`).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use clap::Args;
use serde::Serialize;
use udamon_core::schemes::Damos;
use udamon_scheme_file::{parse_file, to_json, to_toml};
use udamon_tune::replay::{from_record, from_snapshots, ReplayOptions};
use udamon_tune::score::{parse_expr, parse_sla, parse_weights};
use udamon_tune::{
    classify, default_threads, replay_tune, sweep, tune, Domain, Formula, Knob, Metric, Metrics,
    Runner, Sample, ScoreFn, SimRunner, Sla, Source, TuneConfig, Tuned,
};

use super::record::read_spec;
use super::record::{attrs_from, duration_arg, run_duration};
use crate::cli::AttrsArgs;
use crate::output::{check_output, print_json, Progress, WholeFile};
use crate::UsageError;

/// How runs are scored (the DAOS paper's Listing 2 by default).
#[derive(Args, Debug, Clone)]
pub struct ScoreArgs {
    /// Weights of the default score: WEIGHT x relative gain of the
    /// performance and of the memory metric
    #[arg(long, value_name = "perf=W,mem=W", default_value = "perf=0.5,mem=0.5")]
    pub weights: String,
    /// Largest slowdown of the performance metric; a run at or above it
    /// scores the worst score seen so far (Listing 2), `none` to disable
    /// [default: 10%, none with --score-expr or --score-cmd]
    #[arg(long, value_name = "PERCENT")]
    pub sla: Option<String>,
    /// Performance metric of the default score and the SLA (runtime,
    /// faults, refaults, stall, psi_some, ...)
    #[arg(long, value_name = "METRIC", default_value = "runtime")]
    pub perf_metric: String,
    /// Memory metric of the default score (rss_avg, rss_peak, ...)
    #[arg(long, value_name = "METRIC", default_value = "rss_avg")]
    pub mem_metric: String,
    /// Score expression over the metrics instead of the default formula,
    /// e.g. "0.7 * (1 - runtime / base_runtime) + 0.3 * (1 - rss_avg /
    /// base_rss_avg)"; variables: runtime, rss_avg, rss_peak, faults,
    /// refaults, stall, psi_some, swapped, huge, reclaimed, action, each also
    /// as base_* for the scheme-less run, and knob
    #[arg(long, value_name = "EXPR", conflicts_with = "score_cmd")]
    pub score_expr: Option<String>,
    /// Command that prints the score (run by sh; metrics in UDAMON_RUNTIME_S,
    /// UDAMON_RSS_AVG_BYTES, ..., UDAMON_BASE_*, UDAMON_KNOB)
    #[arg(long, value_name = "CMD")]
    pub score_cmd: Option<String>,
}

/// Tune one number of a scheme for a workload (DAOS auto-tuning).
#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Scheme file to tune: one-line text, TOML or JSON (see docs/schemes.md)
    pub schemes: PathBuf,
    /// Simulated workload to tune on (TOML spec, see docs/sim-spec.md)
    #[arg(long, value_name = "SPEC", required_unless_present = "replay")]
    pub sim: Option<PathBuf>,
    /// Tune on a replay of this record: every --step value is predicted, the
    /// best is confirmed by one real run (on --sim, or the record's own
    /// spec for simulator records)
    #[arg(long, value_name = "RECORD")]
    pub replay: Option<PathBuf>,
    /// The number to tune, [INDEX.]FIELD: min_sz, max_sz, min_freq,
    /// max_freq, min_age, max_age, quota.ms, quota.sz or
    /// quota.reset_interval of scheme INDEX (default 0), e.g. 1.quota.sz
    #[arg(long, default_value = "min_age")]
    pub knob: String,
    /// Values to try, START..END in the knob's unit (0s..60s, 0..1G, 0%..5%)
    /// [default: 0s..60s for ages]
    #[arg(long, value_name = "START..END")]
    pub range: Option<String>,
    /// Grid of the values tried, in the knob's unit [default: 1/60 of the range]
    #[arg(long, value_name = "STEP")]
    pub step: Option<String>,
    /// Runs with schemes to estimate the curve from [default: 10]
    #[arg(long, value_name = "N", conflicts_with_all = ["time_limit", "unit_time"])]
    pub samples: Option<usize>,
    /// Time budget of the tuning: samples = TIME_LIMIT / UNIT_TIME
    #[arg(long, value_name = "DURATION", requires = "unit_time")]
    pub time_limit: Option<String>,
    /// What one run of the workload takes (with --time-limit)
    #[arg(long, value_name = "DURATION", requires = "time_limit")]
    pub unit_time: Option<String>,
    /// Seed of the sampling and of the simulated workload [default: the
    /// spec's (or the record's) seed, else 0]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration of the real runs [default: the spec's]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub attrs: AttrsArgs,
    #[command(flatten)]
    pub score: ScoreArgs,
    /// Apply the fitted curve's peak even when its confirming run scores
    /// below the best sample (the paper's behaviour)
    #[arg(long)]
    pub trust_fit: bool,
    /// Runs at once in a replay sweep [default: the number of CPUs]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Print the samples, the fit and the choice as JSON
    #[arg(long)]
    pub json: bool,
    /// Write the tuned schemes here (TOML, for `udamon apply`)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw the samples, the fitted curve and the choice (.png or .svg)
    #[arg(long, value_name = "IMAGE")]
    pub plot: Option<PathBuf>,
}

/// Turns the tuner's errors into the binary's: bad input exits with 2.
pub fn ue(e: udamon_tune::Error) -> anyhow::Error {
    match e {
        udamon_tune::Error::Usage(m) | udamon_tune::Error::Record(m) => UsageError(m).into(),
        other => anyhow!(other),
    }
}

/// The score function the flags describe.
pub fn score_fn(a: &ScoreArgs) -> Result<ScoreFn> {
    let perf = Metric::parse("perf-metric", &a.perf_metric).map_err(ue)?;
    let mem = Metric::parse("mem-metric", &a.mem_metric).map_err(ue)?;
    let custom = a.score_expr.is_some() || a.score_cmd.is_some();
    let sla = match &a.sla {
        Some(s) => parse_sla(s).map_err(ue)?,
        None if custom => None,
        None => Some(0.10),
    };
    let formula = if let Some(e) = &a.score_expr {
        parse_expr(e).map_err(ue)?
    } else if let Some(c) = &a.score_cmd {
        if c.trim().is_empty() {
            return Err(UsageError(
                "--score-cmd is empty (expected a command that prints a number)".into(),
            )
            .into());
        }
        Formula::Cmd(c.clone())
    } else {
        let (w_perf, w_mem) = parse_weights(&a.weights).map_err(ue)?;
        Formula::Weighted {
            perf,
            mem,
            w_perf,
            w_mem,
        }
    };
    Ok(ScoreFn::new(
        formula,
        sla.map(|max_slowdown| Sla {
            max_slowdown,
            metric: perf,
        }),
    ))
}

/// The knob, its domain and the schemes, checked against each other.
fn knob_and_domain(a: &TuneArgs, schemes: &[Damos]) -> Result<(Knob, Domain)> {
    if schemes.is_empty() {
        return Err(UsageError(format!(
            "{}: no scheme in the file (expected at least one scheme to tune)",
            a.schemes.display()
        ))
        .into());
    }
    let knob = Knob::parse(&a.knob).map_err(ue)?;
    knob.check_scheme(schemes).map_err(ue)?;
    let (lo, hi) = match &a.range {
        Some(r) => knob.parse_range(r).map_err(ue)?,
        None => knob.default_range().ok_or_else(|| {
            UsageError(format!(
                "--knob {} has no default range (expected --range, e.g. --range {})",
                knob.name(),
                knob.example_range()
            ))
        })?,
    };
    let step = match &a.step {
        Some(s) => {
            let v = knob
                .parse_value(s)
                .map_err(|e| UsageError(format!("--step {s}: {e}")))?;
            if v <= 0.0 {
                return Err(UsageError(format!(
                    "--step {s}: the step is 0 (expected a step above 0, e.g. {})",
                    knob.format(knob.default_step(lo, hi))
                ))
                .into());
            }
            v
        }
        None => knob.default_step(lo, hi),
    };
    let domain = Domain::new(lo, hi, step).map_err(ue)?;
    udamon_tune::check(schemes, &knob, &domain).map_err(ue)?;
    Ok((knob, domain))
}

fn nr_samples(a: &TuneArgs) -> Result<usize> {
    if let (Some(t), Some(u)) = (&a.time_limit, &a.unit_time) {
        let t_us = duration_arg("time-limit", t)?;
        let u_us = duration_arg("unit-time", u)?;
        if u_us == 0 {
            return Err(UsageError(
                "--unit-time 0: a run takes some time (expected e.g. 60s)".into(),
            )
            .into());
        }
        let n = (t_us / u_us) as usize;
        if n == 0 {
            return Err(UsageError(format!(
                "--time-limit {t} is shorter than one --unit-time {u} (expected a limit of several runs)"
            ))
            .into());
        }
        return Ok(n);
    }
    match a.samples {
        Some(0) => Err(UsageError(
            "--samples 0: nothing to fit (expected 1 or more, e.g. 10)".into(),
        )
        .into()),
        Some(n) => Ok(n),
        None => Ok(10),
    }
}

pub fn run(a: TuneArgs) -> Result<()> {
    let schemes = parse_file(&a.schemes)?;
    let (knob, domain) = knob_and_domain(&a, &schemes)?;
    let attrs = attrs_from(&a.attrs)?;
    let duration_us = run_duration(a.duration.as_deref())?;
    // Tuning can take hours: make sure its results can be written first.
    let inputs: Vec<&Path> = [
        Some(a.schemes.as_path()),
        a.sim.as_deref(),
        a.replay.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some(p) = &a.plot {
        udamon_tune::plot::is_png(p).map_err(ue)?;
        check_output("--plot", p, &inputs, a.output.as_deref().as_slice())?;
    }
    if let Some(p) = &a.output {
        check_output("--output", p, &inputs, a.plot.as_deref().as_slice())?;
    }
    let mut scorer = score_fn(&a.score)?;
    let threads = a.threads.unwrap_or_else(default_threads).max(1);
    let tuned = if let Some(rec) = &a.replay {
        if a.samples.is_some() || a.time_limit.is_some() {
            return Err(UsageError(
                "--samples and --time-limit count real runs; with --replay every --step value is \
                 predicted (expected --step to change how many)"
                    .into(),
            )
            .into());
        }
        let reader = super::report::open(rec)?;
        let replay = from_record(
            &reader,
            &rec.display().to_string(),
            &ReplayOptions::default(),
        )
        .map_err(ue)?;
        let seed = a.seed.or(replay.seed).unwrap_or(0);
        let mut synthetic = SimRunner::new(
            replay.workload.clone(),
            replay.attrs,
            seed,
            &format!("replay of {}", rec.display()),
        );
        let mut real: Option<SimRunner> = match (&a.sim, &replay.spec_toml) {
            (Some(p), _) => Some(
                SimRunner::from_spec(
                    &read_spec(p)?,
                    &p.display().to_string(),
                    Some(seed),
                    duration_us,
                    attrs,
                )
                .map_err(ue)?,
            ),
            (None, Some(spec)) => Some(
                SimRunner::from_spec(
                    spec,
                    &format!("{} (its spec)", rec.display()),
                    Some(seed),
                    duration_us,
                    replay.attrs,
                )
                .map_err(ue)?,
            ),
            (None, None) => None,
        };
        let total = domain.len() as u64 + 3;
        let mut bar = (!a.json).then(|| Progress::new(total, "tuning by replay"));
        let t = replay_tune(
            &schemes,
            &knob,
            &domain,
            seed,
            &mut synthetic,
            real.as_mut().map(|r| r as &mut dyn Runner),
            &scorer,
            threads,
            &mut |d, _| {
                if let Some(b) = bar.as_mut() {
                    b.set(d as u64);
                }
            },
        )
        .map_err(ue)?;
        if let Some(b) = bar {
            b.finish();
        }
        t
    } else {
        let spec_path = a.sim.as_ref().context("--sim SPEC or --replay RECORD")?;
        let mut runner = SimRunner::from_spec(
            &read_spec(spec_path)?,
            &spec_path.display().to_string(),
            a.seed,
            duration_us,
            attrs,
        )
        .map_err(ue)?;
        let seed = a.seed.unwrap_or(runner.seed());
        let cfg = TuneConfig {
            knob,
            domain,
            samples: nr_samples(&a)?,
            seed,
            trust_fit: a.trust_fit,
        };
        let mut bar = (!a.json).then(|| Progress::new(cfg.samples as u64 + 2, "tuning"));
        let t = tune(&schemes, &cfg, &mut runner, &mut scorer, &mut |d, _| {
            if let Some(b) = bar.as_mut() {
                b.set(d as u64);
            }
        })
        .map_err(ue)?;
        if let Some(b) = bar {
            b.finish();
        }
        t
    };
    if a.json {
        let mut v = serde_json::to_value(&tuned)?;
        if let Some(m) = v.as_object_mut() {
            m.insert(
                "x_normalisation".into(),
                serde_json::json!("u = 2 * (x - fit.x_lo) / (fit.x_hi - fit.x_lo) - 1; score = sum(coeffs[k] * u^k)"),
            );
            m.insert("unit".into(), serde_json::json!(unit_name(&knob)));
            m.insert("schemes".into(), to_json(&tuned.schemes));
            m.insert(
                "output".into(),
                serde_json::json!(a.output.as_ref().map(|p| p.display().to_string())),
            );
            m.insert(
                "plot".into(),
                serde_json::json!(a.plot.as_ref().map(|p| p.display().to_string())),
            );
        }
        print_json(&v)?;
    } else {
        print_tuned(&tuned, &knob, &schemes);
    }
    // The results are on stdout before the files are written, so a failed
    // write loses nothing.
    if let Some(p) = &a.output {
        let text = format!(
            "# tuned by udamon tune: {} = {} ({})\n{}",
            tuned.knob,
            tuned.chosen.display,
            source_text(&tuned),
            to_toml(&tuned.schemes)
        );
        crate::output::write_whole(p, text.as_bytes())?;
    }
    if let Some(p) = &a.plot {
        let png = udamon_tune::plot::is_png(p).map_err(ue)?;
        let (out, file) = WholeFile::create(p)?;
        drop(file);
        udamon_tune::plot::write_as(&tuned, &knob, &[], out.path(), png)
            .map_err(ue)
            .with_context(|| format!("cannot write {}", p.display()))?;
        out.commit()?;
    }
    if !a.json {
        for p in [&a.output, &a.plot].into_iter().flatten() {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn unit_name(k: &Knob) -> &'static str {
    match k.kind() {
        udamon_tune::Kind::Size => "bytes",
        udamon_tune::Kind::Freq => "basis points of the maximum access frequency",
        udamon_tune::Kind::TimeUs => "microseconds",
        udamon_tune::Kind::TimeMs => "milliseconds",
    }
}

fn source_text(t: &Tuned) -> String {
    let measured = t
        .chosen
        .measured
        .as_ref()
        .map(|m| format!(", measured score {:.4}", m.score))
        .unwrap_or_default();
    match t.chosen.source {
        Source::FitPeak => format!("the fitted curve's peak{measured}"),
        Source::BestSample => format!("the best sample{measured}"),
        Source::Replay => format!(
            "best predicted by replay, score {:.4}{measured}",
            t.chosen.predicted_score.unwrap_or(f64::NAN)
        ),
    }
}

fn fmt_mib(b: f64) -> String {
    udamon_report::fmt_bytes(b.max(0.0) as u64)
}

fn print_sample_row(s: &Sample) {
    println!(
        "{:>3}  {:<7} {:>10} {:>10.3}s {:>11} {:>9} {:>9.4}{}",
        s.index,
        s.stage,
        s.display,
        s.metrics.runtime_s,
        fmt_mib(s.metrics.rss_avg_bytes),
        s.metrics.refaults as u64,
        s.score,
        if s.sla_ok { "" } else { "  sla broken" }
    );
}

fn print_tuned(t: &Tuned, knob: &Knob, schemes: &[Damos]) {
    println!(
        "tuning {} of scheme {} ({}) over {}..{} on {}",
        t.field_name(),
        t.scheme,
        udamon_scheme_file::describe(&schemes[t.scheme]),
        knob.format(t.domain.lo),
        knob.format(t.domain.hi),
        t.workload
    );
    let what = if t.mode == "replay" { "predicted " } else { "" };
    println!(
        "{what}without schemes: runtime {:.3}s, rss avg {}",
        t.baseline.runtime_s,
        fmt_mib(t.baseline.rss_avg_bytes)
    );
    println!(
        "{:>3}  {:<7} {:>10} {:>11} {:>11} {:>9} {:>9}",
        "#",
        "stage",
        t.field_name(),
        "runtime",
        "rss avg",
        "refaults",
        "score"
    );
    for s in &t.samples {
        print_sample_row(s);
    }
    if let Some(f) = &t.fit {
        println!(
            "fit: degree {} in u = 2 (x - {}) / {} - 1, rmse {:.4}, coefficients {}",
            f.degree,
            knob.format(f.x_lo),
            knob.format(f.x_hi - f.x_lo),
            f.rmse,
            f.coeffs
                .iter()
                .map(|c| format!("{c:.4}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let peaks: Vec<String> = t
            .peaks
            .iter()
            .map(|p| format!("{} ({:.4})", knob.format(p.x), p.y))
            .collect();
        println!(
            "peaks: {}",
            if peaks.is_empty() {
                "none".into()
            } else {
                peaks.join(", ")
            }
        );
    }
    if let Some(p) = &t.fit_peak {
        if let Some(m) = &p.measured {
            println!(
                "fit peak {}: predicted {:.4}, measured {:.4} (runtime {:.3}s, rss avg {}){}",
                p.display,
                p.predicted_score.unwrap_or(f64::NAN),
                m.score,
                m.metrics.runtime_s,
                fmt_mib(m.metrics.rss_avg_bytes),
                if m.sla_ok { "" } else { ", sla broken" }
            );
        }
    }
    if t.mode == "replay" {
        if let (Some(m), Some(b)) = (&t.chosen.measured, &t.confirm_baseline) {
            println!(
                "confirmed by a real run: runtime {:.3}s (without schemes {:.3}s), rss avg {} (without {}), score {:.4}{}",
                m.metrics.runtime_s,
                b.runtime_s,
                fmt_mib(m.metrics.rss_avg_bytes),
                fmt_mib(b.rss_avg_bytes),
                m.score,
                if m.sla_ok { "" } else { ", sla broken" }
            );
        } else {
            println!("no real workload to confirm on (give --sim SPEC)");
        }
    }
    println!(
        "chosen {} = {}: {}",
        t.knob,
        t.chosen.display,
        source_text(t)
    );
}

trait FieldName {
    fn field_name(&self) -> String;
}

impl FieldName for Tuned {
    fn field_name(&self) -> String {
        self.knob
            .rsplit('.')
            .next()
            .unwrap_or(&self.knob)
            .to_string()
    }
}

// ---------------------------------------------------------------------------
// The benchmark.

/// The workloads of the tuning benchmark and the pattern each is built for.
pub const BENCH_SPECS: &[(&str, &str)] = &[
    (
        "tune-cold",
        include_str!("../../../../examples/specs/tune-cold.toml"),
    ),
    (
        "machine",
        include_str!("../../../../examples/specs/machine.toml"),
    ),
    (
        "tune-warm",
        include_str!("../../../../examples/specs/tune-warm.toml"),
    ),
    (
        "tune-periodic",
        include_str!("../../../../examples/specs/tune-periodic.toml"),
    ),
    (
        "tune-mixed",
        include_str!("../../../../examples/specs/tune-mixed.toml"),
    ),
];
const BENCH_SCHEMES: &str = include_str!("../../../../examples/schemes/tune-prcl.txt");
/// The seed of the 10-sample tune in the table (run twice: the samples must
/// repeat), and the further seeds tried to show how often it lands.
const BENCH_TUNE_SEED: u64 = 1;
const BENCH_MORE_SEEDS: std::ops::RangeInclusive<u64> = 2..=5;

#[derive(Serialize)]
struct BenchRow {
    spec: String,
    pattern: Option<u8>,
    pattern_text: String,
    sweep_points: usize,
    sweep_best_s: f64,
    sweep_best_score: f64,
    tune_s: f64,
    tune_score: f64,
    tune_source: Source,
    fit_peak_s: Option<f64>,
    fit_peak_predicted: Option<f64>,
    fit_peak_score: Option<f64>,
    tune_gap: f64,
    tune_ok: bool,
    tune_reproducible: bool,
    /// Gaps of the tunes with seeds 1..=5 (seed 1 first).
    tune_gaps_by_seed: Vec<f64>,
    /// Gaps of the fit's peak alone (no best-sample fallback), seeds 1..=5.
    fit_peak_gaps_by_seed: Vec<f64>,
    replay_s: f64,
    replay_predicted: f64,
    replay_score: f64,
    replay_gap: f64,
    replay_ok: bool,
    replay_phases: usize,
    replay_accesses: usize,
    /// Errors of the replay's predictions over the whole sweep.
    pred: PredError,
    elapsed_s: f64,
}

/// How far the replay's predictions are from the real runs, over a sweep.
#[derive(Serialize, Default)]
struct PredError {
    /// Scheme-less runs: predicted vs real (relative).
    base_runtime_err: f64,
    base_rss_err: f64,
    /// Mean and largest |predicted - real| of runtime / runtime without
    /// schemes, and of rss / rss without schemes.
    runtime_ratio_mae: f64,
    runtime_ratio_max: f64,
    rss_ratio_mae: f64,
    rss_ratio_max: f64,
    /// Mean and largest |predicted - real| raw (pre-SLA) score.
    score_mae: f64,
    score_max: f64,
}

/// The gap of `got` below `best`, relative to |best| (absolute when |best|
/// is under 0.01, against 0.01).
fn gap(best: f64, got: f64) -> f64 {
    (best - got).max(0.0) / best.abs().max(0.01)
}

fn pred_error(pred: &[Sample], pb: &Metrics, real: &[Sample], rb: &Metrics) -> PredError {
    let mut e = PredError {
        base_runtime_err: pb.runtime_s / rb.runtime_s - 1.0,
        base_rss_err: pb.rss_avg_bytes / rb.rss_avg_bytes - 1.0,
        ..PredError::default()
    };
    let n = pred.len().min(real.len()).max(1) as f64;
    for (p, r) in pred.iter().zip(real) {
        let dr = (p.metrics.runtime_s / pb.runtime_s - r.metrics.runtime_s / rb.runtime_s).abs();
        let dm = (p.metrics.rss_avg_bytes / pb.rss_avg_bytes
            - r.metrics.rss_avg_bytes / rb.rss_avg_bytes)
            .abs();
        let ds = (p.raw_score - r.raw_score).abs();
        e.runtime_ratio_mae += dr / n;
        e.rss_ratio_mae += dm / n;
        e.score_mae += ds / n;
        e.runtime_ratio_max = e.runtime_ratio_max.max(dr);
        e.rss_ratio_max = e.rss_ratio_max.max(dm);
        e.score_max = e.score_max.max(ds);
    }
    e
}

fn bench_one(name: &str, spec: &str, quick: bool) -> Result<BenchRow> {
    let started = std::time::Instant::now();
    let schemes = udamon_scheme_file::parse(BENCH_SCHEMES, "tune-prcl.txt", None)?;
    let knob = Knob::default();
    let step = if quick { 2e6 } else { 1e6 };
    let domain = Domain::new(0.0, 60e6, step).map_err(ue)?;
    let attrs = udamon_core::Attrs::default();
    let mut real = SimRunner::from_spec(spec, name, None, None, attrs).map_err(ue)?;
    let threads = default_threads();
    // The exhaustive sweep.
    let (base, snaps) = real.run_keep(&[]).map_err(ue)?;
    let mut sc = ScoreFn::default();
    sc.score(&base, &base, 0.0).map_err(ue)?;
    let values = domain.grid();
    let swept = sweep(
        &schemes,
        &knob,
        &values,
        &mut real,
        &mut sc,
        &base,
        threads,
        &mut |_| {},
    )
    .map_err(ue)?;
    let best = swept
        .iter()
        .cloned()
        .reduce(|a, b| if b.score > a.score { b } else { a })
        .context("empty sweep")?;
    // Figure 3's pattern, on the formula's score (no SLA), from the least
    // aggressive min_age (the range's end) to the most aggressive (0).
    let raw: Vec<f64> = swept.iter().rev().map(|s| s.raw_score).collect();
    let pattern = classify(&raw);
    // The 10-sample tune, twice with the same seed.
    let cfg = TuneConfig {
        knob,
        domain,
        samples: 10,
        seed: BENCH_TUNE_SEED,
        trust_fit: false,
    };
    let t1 = tune(
        &schemes,
        &cfg,
        &mut real,
        &mut ScoreFn::default(),
        &mut |_, _| {},
    )
    .map_err(ue)?;
    let t2 = tune(
        &schemes,
        &cfg,
        &mut real,
        &mut ScoreFn::default(),
        &mut |_, _| {},
    )
    .map_err(ue)?;
    let key = |t: &Tuned| -> Vec<(u64, u64)> {
        t.samples
            .iter()
            .map(|s| (s.value.to_bits(), s.score.to_bits()))
            .collect()
    };
    let reproducible = key(&t1) == key(&t2);
    let tm = t1.chosen.measured.as_ref().context("tune measured")?;
    let fit_gap = |t: &Tuned| {
        t.fit_peak
            .as_ref()
            .and_then(|p| p.measured.as_ref())
            .or(t.chosen.measured.as_ref())
            .map_or(f64::NAN, |m| gap(best.score, m.score))
    };
    let mut tune_gaps = vec![gap(best.score, tm.score)];
    let mut fit_gaps = vec![fit_gap(&t1)];
    if !quick {
        for seed in BENCH_MORE_SEEDS {
            let c = TuneConfig { seed, ..cfg };
            let t = tune(
                &schemes,
                &c,
                &mut real,
                &mut ScoreFn::default(),
                &mut |_, _| {},
            )
            .map_err(ue)?;
            let m = t.chosen.measured.as_ref().context("tune measured")?;
            tune_gaps.push(gap(best.score, m.score));
            fit_gaps.push(fit_gap(&t));
        }
    }
    // Tuning by replay of a scheme-less record of the same run.
    let (workload, stats) = from_snapshots(
        &snaps,
        Some(&real.model().workload),
        &format!("replay of {name}"),
        &ReplayOptions::default(),
    )
    .map_err(ue)?;
    let mut synthetic = SimRunner::new(workload, attrs, real.seed(), &format!("replay of {name}"));
    let rt = replay_tune(
        &schemes,
        &knob,
        &domain,
        real.seed(),
        &mut synthetic,
        Some(&mut real),
        &ScoreFn::default(),
        threads,
        &mut |_, _| {},
    )
    .map_err(ue)?;
    let rm = rt.chosen.measured.as_ref().context("replay measured")?;
    let tune_gap = gap(best.score, tm.score);
    let replay_gap = gap(best.score, rm.score);
    Ok(BenchRow {
        spec: name.into(),
        pattern: pattern.map(|p| p.number()),
        pattern_text: pattern.map_or("unclear".into(), |p| p.describe().to_string()),
        sweep_points: swept.len(),
        sweep_best_s: best.value / 1e6,
        sweep_best_score: best.score,
        tune_s: t1.chosen.value / 1e6,
        tune_score: tm.score,
        tune_source: t1.chosen.source,
        fit_peak_s: t1.fit_peak.as_ref().map(|p| p.value / 1e6),
        fit_peak_predicted: t1.fit_peak.as_ref().and_then(|p| p.predicted_score),
        fit_peak_score: t1
            .fit_peak
            .as_ref()
            .and_then(|p| p.measured.as_ref().map(|m| m.score)),
        tune_gap,
        tune_ok: tune_gap <= 0.05,
        tune_reproducible: reproducible,
        tune_gaps_by_seed: tune_gaps,
        fit_peak_gaps_by_seed: fit_gaps,
        replay_s: rt.chosen.value / 1e6,
        replay_predicted: rt.chosen.predicted_score.unwrap_or(f64::NAN),
        replay_score: rm.score,
        replay_gap,
        replay_ok: replay_gap <= 0.10,
        replay_phases: stats.phases,
        replay_accesses: stats.accesses,
        pred: pred_error(&rt.samples, &rt.baseline, &swept, &base),
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// The tuning benchmark (`udamon bench --only tune`): for each workload of
/// [`BENCH_SPECS`], an exhaustive 1-second sweep of the prcl scheme's
/// min_age over 0-60 s, a 10-sample tune (twice, to check the samples
/// repeat), and a replay tune of a scheme-less record with one confirming
/// run. Prints the table unless `json`; returns the rows.
// Called by `udamon bench --only tune` (cmd/bench.rs).
pub fn bench_tune(quick: bool, json: bool) -> Result<serde_json::Value> {
    if !json {
        println!(
            "auto-tuning (min_age of `{}` over 0-60 s, Listing 2 score; {} sweep, 10-sample tune with seed {BENCH_TUNE_SEED}, replay tune + 1 real run)",
            BENCH_SCHEMES.lines().rfind(|l| !l.trim().is_empty() && !l.starts_with('#')).unwrap_or("").trim(),
            if quick { "2 s" } else { "1 s" },
        );
        println!(
            "  {:<14} {:<3} {:>14} {:>21} {:>5} {:>21} {:>5} {:>16}",
            "spec",
            "pat",
            "sweep best",
            "10-sample tune",
            "gap",
            "replay (pred/real)",
            "gap",
            "pred. err score"
        );
    }
    let mut rows = Vec::new();
    for (name, spec) in BENCH_SPECS {
        let r = bench_one(name, spec, quick)?;
        if !json {
            println!(
                "  {:<14} {:<3} {:>4.0}s {:>8.4} {:>4.0}s {:>8.4}{:<1} {:>6} {:>5.1}% {:>4.0}s {:>7.4}/{:>7.4} {:>5.1}% {:>7.4} (max {:.3})",
                r.spec,
                r.pattern.map_or("?".into(), |p| p.to_string()),
                r.sweep_best_s,
                r.sweep_best_score,
                r.tune_s,
                r.tune_score,
                if r.tune_reproducible { "" } else { "!" },
                if r.tune_ok { "ok" } else { "MISS" },
                r.tune_gap * 100.0,
                r.replay_s,
                r.replay_predicted,
                r.replay_score,
                r.replay_gap * 100.0,
                r.pred.score_mae,
                r.pred.score_max,
            );
        }
        rows.push(r);
    }
    if !json {
        println!("  patterns (DAOS Figure 3, raw score by increasing aggressiveness):");
        for r in &rows {
            println!(
                "    {:<14} {} ({}); fit peak {} measured {}; replay {} phases, {} ranges; {:.1}s",
                r.spec,
                r.pattern.map_or("?".into(), |p| p.to_string()),
                r.pattern_text,
                r.fit_peak_s.map_or("-".into(), |s| format!("{s:.0}s")),
                r.fit_peak_score.map_or("-".into(), |s| format!("{s:.4}")),
                r.replay_phases,
                r.replay_accesses,
                r.elapsed_s
            );
        }
        println!("  replay prediction error over the sweep (predicted - real, relative to each one's scheme-less run):");
        for r in &rows {
            let p = &r.pred;
            println!(
                "    {:<14} baseline runtime {:+.2}% rss {:+.2}%; runtime ratio mae {:.4} (max {:.4}); rss ratio mae {:.4} (max {:.4})",
                r.spec,
                p.base_runtime_err * 100.0,
                p.base_rss_err * 100.0,
                p.runtime_ratio_mae,
                p.runtime_ratio_max,
                p.rss_ratio_mae,
                p.rss_ratio_max
            );
        }
        println!("  10-sample tunes by sampling seed (gap below the sweep's best; fit peak alone = the paper's rule, --trust-fit):");
        for r in &rows {
            let f = |v: &[f64]| {
                v.iter()
                    .map(|g| format!("{:.1}%", g * 100.0))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let within = |v: &[f64]| v.iter().filter(|g| **g <= 0.05).count();
            println!(
                "    {:<14} tune {} ({} of {} within 5%); fit peak alone {} ({} of {})",
                r.spec,
                f(&r.tune_gaps_by_seed),
                within(&r.tune_gaps_by_seed),
                r.tune_gaps_by_seed.len(),
                f(&r.fit_peak_gaps_by_seed),
                within(&r.fit_peak_gaps_by_seed),
                r.fit_peak_gaps_by_seed.len()
            );
        }
        let ok = rows.iter().filter(|r| r.tune_ok).count();
        let rok = rows.iter().filter(|r| r.replay_ok).count();
        println!(
            "  10-sample tune within 5% of the sweep's best: {ok} of {}; replay tune within 10%: {rok} of {}; samples reproducible: {}\n",
            rows.len(),
            rows.len(),
            if rows.iter().all(|r| r.tune_reproducible) { "yes" } else { "no" }
        );
    }
    Ok(serde_json::to_value(&rows)?)
}
