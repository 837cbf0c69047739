//! The seeds' scheme configurations (DAOS section 5) on the simulator:
//! each workload's RSS, runtime and faults under orig, rec, thp, ethp and
//! prcl, with the changes against orig.

use serde::Serialize;
use udamon_core::Attrs;
use udamon_sim::MonitorKind;

use crate::error::Result;
use crate::sim::{bench_run, run};
use crate::Sink;

/// The seeds' configurations (DAOS section 5): thp = every region huge,
/// ethp and prcl = the schemes of its Listing 3.
const CONFIGS: &[(&str, &str)] = &[
    ("orig", ""),
    ("rec", ""),
    ("thp", include_str!("../../../examples/schemes/thp.txt")),
    ("ethp", include_str!("../../../examples/schemes/ethp.txt")),
    ("prcl", include_str!("../../../examples/schemes/prcl.txt")),
];
const SCHEME_SPECS: &[(&str, &str)] = &[
    ("demo", udamon_sim::DEMO_SPEC),
    (
        "machine",
        include_str!("../../../examples/specs/machine.toml"),
    ),
    (
        "sparse-hot",
        include_str!("../../../examples/specs/sparse-hot.toml"),
    ),
];

#[derive(Serialize, Debug, Clone)]
pub struct SchemeRow {
    pub spec: String,
    pub config: String,
    pub rss_avg_bytes: f64,
    pub runtime_s: f64,
    pub faults: f64,
    pub rss_change: f64,
    pub runtime_change: f64,
}

/// Every configuration on every workload (20 s of each when `quick`).
pub fn schemes(quick: bool, sink: &mut dyn Sink) -> Result<Vec<SchemeRow>> {
    let duration = quick.then_some(20_000_000);
    sink.line("");
    sink.line(
        "the seeds' scheme configurations on the simulator (default attrs; changes against orig)",
    );
    sink.line(&format!(
        "  {:<11} {:<5} {:>12} {:>8} {:>11} {:>8} {:>9}",
        "spec", "conf", "rss avg", "change", "runtime", "change", "faults"
    ));
    let mut rows = Vec::new();
    for (name, spec) in SCHEME_SPECS {
        let mut orig: Option<(f64, f64)> = None;
        for (config, text) in CONFIGS {
            let schemes = udamon_scheme_file::parse(text, config, None)?;
            // orig: no monitoring at all; rec: monitoring, no scheme. The
            // simulator charges monitoring no cost, so both run the engine.
            let mut r = bench_run(
                spec,
                name,
                duration,
                Attrs::default(),
                MonitorKind::Adaptive,
                false,
            );
            r.setup.schemes = schemes;
            let s = run(&r, None, sink)?;
            let num = |k: &str| s.metrics.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
            let (rss, rt) = (num("rss_avg_bytes"), num("runtime_s"));
            let (rss0, rt0) = *orig.get_or_insert((rss, rt));
            let row = SchemeRow {
                spec: name.to_string(),
                config: config.to_string(),
                rss_avg_bytes: rss,
                runtime_s: rt,
                faults: num("faults"),
                rss_change: rss / rss0 - 1.0,
                runtime_change: rt / rt0 - 1.0,
            };
            sink.line(&format!(
                "  {:<11} {:<5} {:>12} {:>+7.1}% {:>10.3}s {:>+7.2}% {:>9}",
                row.spec,
                row.config,
                udamon_report::fmt_bytes(rss as u64),
                row.rss_change * 100.0,
                rt,
                row.runtime_change * 100.0,
                row.faults as u64
            ));
            rows.push(row);
        }
    }
    Ok(rows)
}
