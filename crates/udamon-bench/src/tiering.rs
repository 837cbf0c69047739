//! `udamon bench --only tiering`: tiering judged in the simulator with its
//! ground truth. Three two-node workloads (examples/specs/tier-*.toml)
//! under three policies in the same model: `none` (first-touch placement
//! stays), `numab2-model` (a model of NUMA balancing's tiering mode,
//! udamon-sim's numab.rs) and `udamon` (the engine with the self-tuned
//! tiering preset, interval auto-tuning on as in the seed).

use std::sync::Arc;

use serde::Serialize;
use udamon_core::{Attrs, IntervalsGoal};
use udamon_session::topology::{sim_topology, tiering_schemes, Space, TieringParams};
use udamon_sim::{run_tiering, Model, Numab2Params, TierOptions, TierPolicy, TierReport, Workload};

use crate::error::{Error, Result};
use crate::Sink;

pub const SPECS: &[(&str, &str)] = &[
    (
        "tier-static",
        include_str!("../../../examples/specs/tier-static.toml"),
    ),
    (
        "tier-shift",
        include_str!("../../../examples/specs/tier-shift.toml"),
    ),
    (
        "tier-large",
        include_str!("../../../examples/specs/tier-large.toml"),
    ),
];

#[derive(Serialize, Debug)]
pub struct TieringRow {
    pub spec: String,
    #[serde(flatten)]
    pub report: TierReport,
    /// Runtime over the `none` run's, minus one.
    pub runtime_change: f64,
}

/// The seed's attributes: the defaults with interval auto-tuning (4% of
/// the accesses over 3 aggregations, sampling between 5 ms and 10 s).
pub fn seed_attrs() -> Attrs {
    Attrs {
        intervals_goal: IntervalsGoal::recommended(400, Attrs::default().sample_us),
        ..Attrs::default()
    }
}

/// The policies for a workload: none, the NUMA-balancing-like model, and
/// udamon's tiering: the preset (the temporal tuner), then with the seed's
/// consist tuner and with udamon's fast one.
pub fn policies(w: &Workload) -> Result<Vec<TierPolicy>> {
    let topo = sim_topology(&w.machine, w.mapped_bytes());
    let schemes =
        tiering_schemes(&topo, Space::Virtual, &TieringParams::default()).map_err(Error::msg)?;
    let with_tuner = |tuner| {
        tiering_schemes(
            &topo,
            Space::Virtual,
            &TieringParams {
                tuner,
                ..TieringParams::default()
            },
        )
        .map_err(Error::msg)
    };
    use udamon_core::schemes::GoalTuner;
    Ok(vec![
        TierPolicy::None,
        TierPolicy::Numab2(Numab2Params::default()),
        TierPolicy::Damos {
            attrs: seed_attrs(),
            schemes,
        },
        TierPolicy::Damos {
            attrs: seed_attrs(),
            schemes: with_tuner(GoalTuner::Consist)?,
        },
        TierPolicy::Damos {
            attrs: seed_attrs(),
            schemes: with_tuner(GoalTuner::Fast)?,
        },
    ])
}

/// Every workload under every policy, each row reported as it is
/// measured; `quick` runs shorter workloads.
pub fn table(quick: bool, sink: &mut dyn Sink) -> Result<Vec<TieringRow>> {
    sink.line("");
    sink.line(
        "tiering on the simulator (node 0: 1 GiB, 100 ns; node 1: 4 GiB, 250 ns; first-touch placement)",
    );
    sink.line(&format!(
        "  {:<11} {:<12} {:>6} {:>6} {:>9} {:>9} {:>9} {:>13} {:>14} {:>9} {:>7}",
        "spec",
        "policy",
        "fast%",
        "hot%",
        "converge",
        "promoted",
        "demoted",
        "free<0.5%",
        "used>99.7%",
        "runtime",
        "change"
    ));
    let mut rows = Vec::new();
    for (name, text) in SPECS {
        let w = Workload::from_toml(text, name)?;
        // --quick: two phases of tier-shift (one shift), 30 s of the others.
        let duration_us = if quick {
            w.duration_us.min(if *name == "tier-shift" {
                120_000_000
            } else {
                30_000_000
            })
        } else {
            w.duration_us
        };
        let seed = w.seed.unwrap_or(0);
        let pols = policies(&w)?;
        let model = Arc::new(Model::new(w));
        let opts = TierOptions {
            duration_us,
            seed,
            ..TierOptions::default()
        };
        let mut base_rt = None;
        for (i, p) in pols.iter().enumerate() {
            let r = run_tiering(&model, p, &opts)?;
            let rt0 = *base_rt.get_or_insert(r.runtime_s);
            let mut r = r;
            match i {
                3 => r.policy = "udamon-consist".into(),
                4 => r.policy = "udamon-fast".into(),
                _ => {}
            }
            let row = TieringRow {
                spec: name.to_string(),
                runtime_change: r.runtime_s / rt0 - 1.0,
                report: r,
            };
            sink.line(&row_line(&row));
            rows.push(row);
        }
    }
    Ok(rows)
}

fn row_line(row: &TieringRow) -> String {
    let r = &row.report;
    let conv = match r.mean_converge_s {
        Some(c) => format!("{c:.1}s {}/{}", r.shifts_converged, r.shifts.len()),
        None => format!("- 0/{}", r.shifts.len()),
    };
    let hot_end = r.hot_on_fast_per_s.last().copied().unwrap_or(0.0);
    format!(
        "  {:<11} {:<15} {:>5.1}% {:>5.1}% {:>9} {:>9} {:>9} {:>4.0}% {:>5.2}% {:>4.0}% {:>6.2}% {:>8.2}s {:>+6.1}%",
        row.spec,
        r.policy,
        r.fast_access_share * 100.0,
        hot_end * 100.0,
        conv,
        udamon_report::fmt_bytes(r.promoted_bytes),
        udamon_report::fmt_bytes(r.demoted_bytes),
        r.free_below_goal_share * 100.0,
        r.min_free_bp / 100.0,
        r.used_above_goal_share * 100.0,
        r.max_used_bp / 100.0,
        r.runtime_s,
        row.runtime_change * 100.0
    )
}
