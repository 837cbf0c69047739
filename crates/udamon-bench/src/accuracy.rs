//! Accuracy against the simulator's exact truth: every spec under the
//! adaptive monitor, the enhanced mode, fixed regions (as many as the
//! adaptive run used, and 1,000) and the full scan; and the soft-dirty
//! reset policies, each scored the same way.

use serde::Serialize;
use udamon_core::softdirty::SoftDirtyReset;
use udamon_core::Attrs;
use udamon_session::sim::RunSummary;
use udamon_sim::MonitorKind;

use crate::error::{chain, Result};
use crate::sim::{bench_run, run};
use crate::Sink;

const SPECS: &[(&str, &str)] = &[
    ("demo", udamon_sim::DEMO_SPEC),
    ("swap", include_str!("../../../examples/specs/swap.toml")),
    ("sweep", include_str!("../../../examples/specs/sweep.toml")),
    (
        "sparse-hot",
        include_str!("../../../examples/specs/sparse-hot.toml"),
    ),
];
/// The accuracy table's extra spec: where only `--mode enhanced` sees.
const SPARSE_RESIDENT: (&str, &str) = (
    "sparse-resident",
    include_str!("../../../examples/specs/sparse-resident.toml"),
);

/// One monitor's (or reset policy's) scores on one spec; a run that could
/// not be made has none, and a note saying why.
#[derive(Serialize, Debug, Clone)]
pub struct AccuracyRow {
    pub spec: String,
    pub monitor: String,
    pub freq_mae: Option<f64>,
    pub hot_f1: Option<f64>,
    pub wss_error: Option<f64>,
    pub avg_nr_regions: Option<f64>,
    pub elapsed_s: Option<f64>,
    pub note: Option<String>,
}

/// The accuracy table: the specs' whole durations (20 s when `quick`).
pub fn accuracy(quick: bool, sink: &mut dyn Sink) -> Result<Vec<AccuracyRow>> {
    let duration = quick.then_some(20_000_000);
    sink.line(
        "accuracy against the exact truth (default attrs; warm-up 10 windows; hot = frequency >= 0.2)",
    );
    sink.line(&header("monitor"));
    let mut out = Vec::new();
    for &(name, spec) in SPECS.iter().chain([&SPARSE_RESIDENT]) {
        let attrs = Attrs::default();
        let r = bench_run(spec, name, duration, attrs, MonitorKind::Adaptive, true);
        let adaptive = run(&r, None, sink)?;
        let own = adaptive.avg_nr_regions.round().max(1.0) as u32;
        let mut rows = vec![row(name, adaptive)];
        for kind in [
            MonitorKind::Enhanced,
            MonitorKind::FixedRegions(own),
            MonitorKind::FixedRegions(1000),
            MonitorKind::FullScan,
        ] {
            let r = bench_run(spec, name, duration, attrs, kind, true);
            match run(&r, None, sink) {
                Ok(s) => rows.push(row(name, s)),
                Err(e) => rows.push(AccuracyRow {
                    spec: name.to_string(),
                    monitor: kind.label(),
                    freq_mae: None,
                    hot_f1: None,
                    wss_error: None,
                    avg_nr_regions: None,
                    elapsed_s: None,
                    note: Some(chain(&e)),
                }),
            }
        }
        for r in rows {
            sink.line(&row_line(&r));
            out.push(r);
        }
    }
    Ok(out)
}

/// Soft-dirty reset every sample (the kernel's estimator, which the
/// simulator's checks are anyway), every window, and every 4th and 16th
/// window (what `auto` does for processes whose reset is dear), scored
/// against the truth: what a cheaper reset costs in accuracy.
pub fn softdirty(quick: bool, sink: &mut dyn Sink) -> Result<Vec<AccuracyRow>> {
    let duration = quick.then_some(20_000_000);
    sink.line(
        "soft-dirty reset against the exact truth (adaptive, default attrs; every access \
         counts as a write)",
    );
    sink.line(&header("reset"));
    let mut out = Vec::new();
    for (name, spec) in SPECS {
        for reset in [
            SoftDirtyReset::Sample,
            SoftDirtyReset::Windows(1),
            SoftDirtyReset::Windows(4),
            SoftDirtyReset::Windows(16),
        ] {
            let mut r = bench_run(
                spec,
                name,
                duration,
                Attrs::default(),
                MonitorKind::Adaptive,
                true,
            );
            r.setup.softdirty_reset = reset;
            let s = run(&r, None, sink)?;
            let mut r = row(name, s);
            r.monitor = format!("reset {reset}");
            sink.line(&row_line(&r));
            out.push(r);
        }
    }
    Ok(out)
}

/// An accuracy table's header; `what` names the second column.
fn header(what: &str) -> String {
    format!(
        "  {:<15} {:<19} {:>9} {:>7} {:>9} {:>9} {:>9}",
        "spec", what, "freq_mae", "hot_f1", "wss_error", "regions", "time"
    )
}

/// One line of an accuracy table ("refused" for a run that could not be
/// made).
fn row_line(r: &AccuracyRow) -> String {
    let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |v| format!("{v:.p$}"));
    format!(
        "  {:<15} {:<19} {:>9} {:>7} {:>9} {:>9} {:>9}",
        r.spec,
        r.monitor,
        f(r.freq_mae, 4),
        f(r.hot_f1, 3),
        f(r.wss_error, 3),
        f(r.avg_nr_regions, 0),
        r.elapsed_s.map_or("refused".into(), |t| format!("{t:.2}s"))
    )
}

fn row(spec: &str, s: RunSummary) -> AccuracyRow {
    let acc = s.accuracy.expect("scored runs carry their accuracy");
    AccuracyRow {
        spec: spec.to_string(),
        monitor: s.monitor.clone(),
        freq_mae: Some(acc.freq_mae),
        hot_f1: Some(acc.hot_f1),
        wss_error: Some(acc.wss_error),
        avg_nr_regions: Some(acc.avg_nr_regions),
        elapsed_s: Some(s.elapsed_s),
        note: None,
    }
}
