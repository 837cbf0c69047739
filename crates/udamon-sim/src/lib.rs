//! A simulated address space with exact ground truth.
//!
//! Roles: [`Workload`] is a parsed spec (objects, gaps, phases of Poisson
//! accesses, sweeps, and the `[machine]` under them as [`MachineSpec`]);
//! [`Model`] indexes it to answer "how likely was this page touched in this
//! interval" in O(log ranges); [`SimOps`] plugs that into udamon-core's
//! [`Engine`](udamon_core::Engine) as an operations set, and runs the
//! simulated machine underneath (residency, huge pages, NUMA nodes, LRU,
//! memory limit: kept as ranges with expected page counts, never per page),
//! which DAMOS actions change and which measures what the workload pays
//! ([`SimMetrics`]: RSS, faults, refaults, stalls, runtime); [`build_engine`]
//! gives the engine to install schemes on; [`FullScan`] is the exact
//! every-page baseline as a [`Monitor`](udamon_core::Monitor); [`accuracy`]
//! compares any monitor's snapshots with the truth. The `udamon` binary
//! picks among them.
//!
//! ```
//! use std::sync::Arc;
//! use udamon_core::{Attrs, Monitor};
//! use udamon_sim::{accuracy, build_monitor, AccuracyOptions, MonitorKind, Model, Workload};
//!
//! let spec = r#"
//!     duration = "3s"
//!     [[layout]]
//!     object = "a"
//!     size = "64M"
//!     [[phase]]
//!     duration = "3s"
//!     [[phase.access]]
//!     object = "a"
//!     range = ["0%", "10%"]
//!     rate = 500
//! "#;
//! let model = Arc::new(Model::new(Workload::from_toml(spec, "doc").unwrap()));
//! let mut mon = build_monitor(&model, Attrs::default(), 7, MonitorKind::Adaptive).unwrap();
//! let mut snaps = Vec::new();
//! while mon.now_us() < model.workload.duration_us {
//!     snaps.extend(mon.next_snapshot().unwrap());
//! }
//! let acc = accuracy(&model, &snaps, AccuracyOptions::default());
//! assert!(acc.hot_f1 > 0.8, "{acc:?}");
//! ```

mod bounds;
mod fullscan;
mod machine;
mod machine_spec;
mod model;
mod ops;
mod spec;
mod tier;
mod truth;
mod units;

use std::sync::Arc;

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use udamon_core::{Adaptation, Attrs, Engine, Monitor, Target};

pub use bounds::{check_bounds, BoundsError, MAX_STEPS_PER_SAMPLE, MODEL_MEMORY_BOUND};
pub use fullscan::{FullScan, MAX_FULL_SCAN_PAGES};
pub use machine::numab::Numab2Params;
pub use machine::SimMetrics;
pub use machine_spec::{MachineSpec, NodeSpec, Placement, ThpMode, HUGE_PAGE};
pub use model::Model;
pub use ops::SimOps;
pub use spec::{Access, Object, Phase, Sweep, Workload, DEFAULT_BASE};
pub use tier::{run_tiering, Shift, TierOptions, TierPolicy, TierReport};
pub use truth::{accuracy, Accuracy, AccuracyAcc, AccuracyOptions};

/// The built-in demo spec (Daptrace figure 4: eight objects touched one
/// after another, plus a small always-hot area in a large cold mapping).
pub const DEMO_SPEC: &str = include_str!("../../../examples/specs/demo.toml");

/// Which monitor runs over the simulated space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorKind {
    /// DAMON's adaptive regions.
    Adaptive,
    /// The enhanced adaptation mode (`--mode enhanced`): adaptive regions
    /// fitted to populated memory, following steadily moving windows.
    Enhanced,
    /// N static regions (the papers' "Miniature-like" sampling).
    FixedRegions(u32),
    /// Every page checked at every sample.
    FullScan,
}

impl MonitorKind {
    /// The adaptive monitor of `mode`: DAMON's, or the enhanced mode's.
    pub fn adaptive(mode: udamon_core::Mode) -> MonitorKind {
        match mode {
            udamon_core::Mode::Kernel => MonitorKind::Adaptive,
            udamon_core::Mode::Enhanced => MonitorKind::Enhanced,
        }
    }

    /// The label stored in records: "adaptive", "fixed-regions N", "full-scan".
    pub fn label(&self) -> String {
        match self {
            MonitorKind::Adaptive => "adaptive".into(),
            MonitorKind::Enhanced => "enhanced".into(),
            MonitorKind::FixedRegions(n) => format!("fixed-regions {n}"),
            MonitorKind::FullScan => "full-scan".into(),
        }
    }
}

/// Builds the monitor of `kind` over the model. `seed` makes the run
/// reproducible: the same seed gives the same snapshots.
pub fn build_monitor(
    model: &Arc<Model>,
    attrs: Attrs,
    seed: u64,
    kind: MonitorKind,
) -> Result<Box<dyn Monitor>, udamon_core::Error> {
    Ok(match kind {
        MonitorKind::FullScan => Box::new(FullScan::new(Arc::clone(model), attrs, seed)?),
        kind => Box::new(build_engine(model, attrs, seed, kind)?),
    })
}

/// The engine over the simulator for the adaptive or fixed-region monitor,
/// with the same generators as [`build_monitor`] (so the same snapshots).
/// Install schemes on it, run it, and read the simulated machine's figures
/// with `engine.ops().metrics()`. `FullScan` is not an engine: an error.
/// Attributes [`check_bounds`] refuses are refused here, before anything
/// is allocated.
pub fn build_engine(
    model: &Arc<Model>,
    attrs: Attrs,
    seed: u64,
    kind: MonitorKind,
) -> Result<Engine<SimOps, Pcg64Mcg>, udamon_core::Error> {
    check_bounds(&model.workload, &attrs).map_err(bounds_error)?;
    let rng = Pcg64Mcg::seed_from_u64(seed);
    let ops = SimOps::new(Arc::clone(model), seed);
    // The attributes' mode is what the engine follows.
    let attrs = match kind {
        MonitorKind::Enhanced => Attrs {
            mode: udamon_core::Mode::Enhanced,
            ..attrs
        },
        _ => attrs,
    };
    let adaptation = match kind {
        MonitorKind::Adaptive => Adaptation::Adaptive,
        MonitorKind::Enhanced => Adaptation::Enhanced,
        MonitorKind::FixedRegions(n) => Adaptation::Fixed(n),
        MonitorKind::FullScan => {
            return Err(udamon_core::Error::Backend(
                "the full-scan monitor is not an engine: it runs no schemes".into(),
            ))
        }
    };
    Engine::with_adaptation(attrs, ops, vec![Target::new(0)], rng, adaptation)
}

/// A [`BoundsError`] as the engine's error: about the attributes, or
/// about the workload.
pub(crate) fn bounds_error(e: BoundsError) -> udamon_core::Error {
    if e.what == "workload" {
        udamon_core::Error::Backend(e.to_string())
    } else {
        udamon_core::Error::InvalidAttrs(e.to_string())
    }
}

/// A spec that could not be used, with where and why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("spec {origin}{}: {msg}", if *.line > 0 { format!(" line {}, column {}", .line, .col) } else { String::new() })]
pub struct Error {
    pub origin: String,
    /// 1-based; 0 when the error is about the spec as a whole.
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

impl Error {
    /// A spec is the user's input: always bad input.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        udamon_core::ErrorKind::Usage
    }

    pub(crate) fn at(origin: &str, line: usize, col: usize, msg: String) -> Self {
        Self {
            origin: origin.to_string(),
            line,
            col,
            msg,
        }
    }
}

#[cfg(test)]
mod tests;
