//! `udamon replay`: what-if analysis. A record's snapshots become a
//! simulated workload (docs/tuning.md), and schemes run on it predict the
//! resident set, faults and runtime they would give, without rerunning the
//! recorded workload.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use udamon_tune::replay::{from_record, ReplayOptions, ReplayStats};
use udamon_tune::{Metrics, Runner, ScoreFn, SimRunner};

use super::record::{attrs_from, run_duration};
use super::tune::{score_fn, ue, ScoreArgs};
use crate::cli::AttrsArgs;
use crate::output::print_json;
use crate::UsageError;

/// Predict what schemes would do to a recorded workload.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Record file to replay (see `udamon record`)
    pub record: PathBuf,
    /// Scheme file to try: one-line text, TOML or JSON (see docs/schemes.md)
    #[arg(long, value_name = "FILE", required = true)]
    pub schemes: PathBuf,
    /// Also run the real workload (the record's own spec for simulator
    /// records, or --sim) and show how far the prediction is
    #[arg(long)]
    pub check: bool,
    /// The real workload for --check (TOML spec)
    #[arg(long, value_name = "SPEC", requires = "check")]
    pub sim: Option<PathBuf>,
    /// Seed of the replay (and of --check's run) [default: the record's]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated duration of --check's real runs [default: the spec's]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    #[command(flatten)]
    pub attrs: AttrsArgs,
    #[command(flatten)]
    pub score: ScoreArgs,
    /// Print the prediction as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Side {
    without_schemes: Metrics,
    with_schemes: Metrics,
    score: f64,
    raw_score: f64,
    sla_ok: bool,
}

#[derive(Serialize)]
struct Report {
    record: String,
    replay: ReplayStats,
    seed: u64,
    predicted: Side,
    /// With --check: the real runs.
    real: Option<Side>,
}

fn side(
    runner: &mut dyn Runner,
    schemes: &[udamon_core::schemes::Damos],
    scorer: &ScoreFn,
) -> Result<Side> {
    let base = runner.run(&[]).map_err(ue)?;
    let with = runner.run(schemes).map_err(ue)?;
    let mut sc = scorer.fresh();
    sc.score(&base, &base, 0.0).map_err(ue)?;
    let s = sc.score(&with, &base, 0.0).map_err(ue)?;
    Ok(Side {
        without_schemes: base,
        with_schemes: with,
        score: s.score,
        raw_score: s.raw,
        sla_ok: s.sla_ok,
    })
}

pub fn run(a: ReplayArgs) -> Result<()> {
    // The attribute flags are checked as `record` checks them, whether or
    // not a run uses them.
    let attrs = attrs_from(&a.attrs)?;
    let schemes = super::apply::read_schemes(&a.schemes)?;
    let scorer = score_fn(&a.score)?;
    // A damaged record replays its readable part: `open` says so.
    let reader = super::report::open(&a.record)?;
    let replay = from_record(
        &reader,
        &a.record.display().to_string(),
        &ReplayOptions::default(),
    )
    .map_err(ue)?;
    let seed = a.seed.or(replay.seed).unwrap_or(0);
    let rec = a.record.display().to_string();
    let mut synthetic = SimRunner::new(
        replay.workload.clone(),
        replay.attrs,
        seed,
        &format!("replay of {rec}"),
    );
    let predicted = side(&mut synthetic, &schemes, &scorer)?;
    let real = if a.check {
        let duration_us = run_duration(a.duration.as_deref())?;
        let mut runner = match (&a.sim, &replay.spec_toml) {
            (Some(p), _) => {
                let text = super::record::read_spec(p)?;
                SimRunner::from_spec(
                    &text,
                    &p.display().to_string(),
                    Some(seed),
                    duration_us,
                    attrs,
                )
                .map_err(ue)?
            }
            (None, Some(spec)) => SimRunner::from_spec(
                spec,
                &format!("{rec} (its spec)"),
                Some(seed),
                duration_us,
                replay.attrs,
            )
            .map_err(ue)?,
            (None, None) => {
                return Err(UsageError(format!(
                    "--check: {rec} is not a simulator record, so there is no workload to check \
                     against (expected --sim SPEC)"
                ))
                .into())
            }
        };
        Some(side(&mut runner, &schemes, &scorer)?)
    } else {
        None
    };
    let report = Report {
        record: rec,
        replay: replay.stats,
        seed,
        predicted,
        real,
    };
    if a.json {
        return print_json(&report);
    }
    print_report(&report);
    Ok(())
}

/// A printed figure: label, getter, formatter.
type Row = (&'static str, fn(&Metrics) -> f64, fn(f64) -> String);

fn print_report(r: &Report) {
    let st = &r.replay;
    println!(
        "replay of {}: {} snapshots as {} phases, {} access ranges over {} cells of {} ({:.1}s)",
        r.record,
        st.snapshots,
        st.phases,
        st.accesses,
        st.cells,
        udamon_report::fmt_bytes(st.cell_bytes),
        st.duration_us as f64 / 1e6
    );
    let p = &r.predicted;
    let rows: [Row; 4] = [
        (
            "rss average",
            |m| m.rss_avg_bytes,
            |v| udamon_report::fmt_bytes(v.max(0.0) as u64),
        ),
        (
            "rss peak",
            |m| m.rss_peak_bytes,
            |v| udamon_report::fmt_bytes(v.max(0.0) as u64),
        ),
        ("runtime", |m| m.runtime_s, |v| format!("{v:.3}s")),
        ("faults", |m| m.faults, |v| format!("{}", v as u64)),
    ];
    let change = |w: f64, b: f64| {
        if b != 0.0 {
            format!("{:+.1}%", (w / b - 1.0) * 100.0)
        } else {
            "-".into()
        }
    };
    match &r.real {
        None => {
            println!(
                "{:<12} {:>13} {:>13} {:>8}",
                "predicted", "without", "with schemes", "change"
            );
            for (label, get, fmt) in rows {
                let (b, w) = (get(&p.without_schemes), get(&p.with_schemes));
                println!(
                    "{label:<12} {:>13} {:>13} {:>8}",
                    fmt(b),
                    fmt(w),
                    change(w, b)
                );
            }
            println!(
                "predicted score {:.4}{}",
                p.score,
                if p.sla_ok { "" } else { " (sla broken)" }
            );
        }
        Some(q) => {
            println!(
                "{:<12} {:>13} {:>13} {:>8} | {:>13} {:>13} {:>8}",
                "", "predicted", "with schemes", "change", "real", "with schemes", "change"
            );
            for (label, get, fmt) in rows {
                let (b, w) = (get(&p.without_schemes), get(&p.with_schemes));
                let (rb, rw) = (get(&q.without_schemes), get(&q.with_schemes));
                println!(
                    "{label:<12} {:>13} {:>13} {:>8} | {:>13} {:>13} {:>8}",
                    fmt(b),
                    fmt(w),
                    change(w, b),
                    fmt(rb),
                    fmt(rw),
                    change(rw, rb)
                );
            }
            println!(
                "score: predicted {:.4}{}, real {:.4}{} (error {:+.4})",
                p.score,
                if p.sla_ok { "" } else { " (sla broken)" },
                q.score,
                if q.sla_ok { "" } else { " (sla broken)" },
                p.score - q.score
            );
        }
    }
}
