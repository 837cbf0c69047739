//! The engine's and the simulator's CPU cost at 1,000 regions, over 1 GiB
//! and over 64 TiB: the cost per sample must not depend on the space's size.

use serde::Serialize;
use udamon_core::Attrs;
use udamon_sim::MonitorKind;

use crate::error::{Context, Result};
use crate::sim::{bench_run, run};
use crate::Sink;

pub(crate) const COST_1G: &str = include_str!("../../../examples/specs/cost-1g.toml");
const COST_64T: &str = include_str!("../../../examples/specs/cost-64t.toml");

#[derive(Serialize, Debug, Clone)]
pub struct CostRow {
    pub spec: String,
    pub mapped_bytes: u64,
    pub simulated_s: f64,
    pub cpu_s: f64,
    pub cpu_ms_per_simulated_s: f64,
    pub avg_nr_regions: f64,
    pub ns_per_region_sample: f64,
}

/// What the cost part measured.
#[derive(Debug, Default)]
pub struct Cost {
    /// cost-1g, then cost-64t: each one's best of three.
    pub rows: Vec<CostRow>,
    /// The 64 TiB run's CPU time over the 1 GiB one's.
    pub ratio_64t_over_1g: Option<f64>,
}

/// Both workloads, 120 simulated seconds each (20 when `quick`), three
/// times in turn; the table as it is measured.
pub fn cost(quick: bool, sink: &mut dyn Sink) -> Result<Cost> {
    // 1,000 regions throughout: min = max = 1000 keeps the count there while
    // the adaptation code still runs every window.
    let attrs = Attrs {
        min_nr_regions: 1000,
        max_nr_regions: 1000,
        ..Attrs::default()
    };
    let duration = if quick { 20_000_000 } else { 120_000_000 };
    sink.line(&format!(
        "engine + simulator cost at 1,000 regions ({}s simulated each)",
        duration / 1_000_000
    ));
    sink.line(&format!(
        "  {:<10} {:>12} {:>16} {:>10} {:>18}",
        "spec", "mapped", "CPU ms per sim. s", "regions", "ns/region/sample"
    ));
    // Alternate the two specs and keep each one's best of three, so both see
    // the same machine noise.
    let mut best: [Option<CostRow>; 2] = [None, None];
    for _ in 0..3 {
        for (i, (name, spec)) in [("cost-1g", COST_1G), ("cost-64t", COST_64T)]
            .into_iter()
            .enumerate()
        {
            let cpu0 = udamon_session::self_cpu_s();
            let r = bench_run(
                spec,
                name,
                Some(duration),
                attrs,
                MonitorKind::Adaptive,
                false,
            );
            let mut s = run(&r, None, sink)?;
            // CPU time, not wall time: a short run on a shared machine is at
            // the mercy of the scheduler.
            s.elapsed_s = udamon_session::self_cpu_s() - cpu0;
            let model = s.model.as_ref().context("model")?;
            let samples = s.simulated_s * 1e6 / attrs.sample_us as f64;
            let row = CostRow {
                spec: name.into(),
                mapped_bytes: model.workload.mapped_bytes(),
                simulated_s: s.simulated_s,
                cpu_s: s.elapsed_s,
                cpu_ms_per_simulated_s: s.elapsed_s * 1e3 / s.simulated_s,
                avg_nr_regions: s.avg_nr_regions,
                ns_per_region_sample: s.elapsed_s * 1e9 / (samples * s.avg_nr_regions),
            };
            if best[i].as_ref().is_none_or(|b| row.cpu_s < b.cpu_s) {
                best[i] = Some(row);
            }
        }
    }
    let mut out = Cost::default();
    for row in best.into_iter().flatten() {
        sink.line(&format!(
            "  {:<10} {:>12} {:>16.1} {:>10.0} {:>18.1}",
            row.spec,
            udamon_report::fmt_bytes(row.mapped_bytes),
            row.cpu_ms_per_simulated_s,
            row.avg_nr_regions,
            row.ns_per_region_sample
        ));
        out.rows.push(row);
    }
    if let [small, big] = &out.rows[..] {
        let ratio = big.cpu_s / small.cpu_s;
        out.ratio_64t_over_1g = Some(ratio);
        sink.line(&format!("  64 TiB / 1 GiB CPU time ratio: {ratio:.2}"));
        sink.line("");
    }
    Ok(out)
}
