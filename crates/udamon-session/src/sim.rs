//! Simulated runs, driven to their end: the one driver behind `udamon
//! record --sim`, `apply --sim`, `demo`, `bench`, the simulated workloads
//! of `eval`, and the tuner's runs (`udamon_tune::SimRunner`).
//!
//! Two layers:
//!
//! - the preparation every simulated run shares, a stepped [`Session`]
//!   included: a spec's text into a [`Workload`] with `--duration`'s
//!   override and the seed rule ([`Prepared`], [`seed`]), and the monitor
//!   over it with its schemes, dry run and soft-dirty reset ([`Setup`],
//!   [`engine`], [`monitor`]);
//! - the run loop ([`run`], [`run_prepared`]): snapshots until the
//!   workload's duration, written to a record with the schemes' statistics
//!   and the machine's figures once a simulated second and at every phase
//!   end, optionally scored against the simulator's truth.
//!
//! Nothing here prints or catches signals: progress, the stop request and
//! what to do with each snapshot are the caller's [`Hooks`].
//!
//! ```
//! use udamon_session::sim::{self, Hooks, SimRun};
//!
//! let run = SimRun::new(udamon_sim::DEMO_SPEC, "demo");
//! let s = sim::run(&SimRun { duration_us: Some(2_000_000), ..run }, None, Hooks::default())?;
//! assert_eq!(s.ended_by, "duration");
//! assert!(s.snapshots > 0 && s.machine.is_some());
//! # Ok::<(), udamon_session::sim::SimError>(())
//! ```
//!
//! [`Session`]: crate::Session

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use udamon_core::schemes::Damos;
use udamon_core::softdirty::SoftDirtyReset;
use udamon_core::{Attrs, Engine, Monitor, Snapshot};
use udamon_record::{Header, SimInfo, TargetInfo, Writer};
use udamon_sim::{
    build_engine, build_monitor, Accuracy, AccuracyAcc, AccuracyOptions, Model, MonitorKind,
    SimMetrics, SimOps, Workload,
};

use crate::schemes::{scheme_reports, SchemeReport};

/// Why a simulated run could not be made or finished. Each variant keeps
/// the message (and, where it had one, the cause) the run used to give, so
/// a caller can map it to its own error kinds.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The spec could not be used.
    #[error(transparent)]
    Spec(#[from] udamon_sim::Error),
    /// What was asked does not fit together (schemes on the full-scan
    /// monitor, ...): the user's to fix.
    #[error("{0}")]
    Usage(String),
    /// The monitor could not be built over the workload (attributes or a
    /// workload the bounds refuse): "cannot monitor NAME: ...".
    #[error("cannot monitor {name}: {error}")]
    Build {
        name: String,
        error: udamon_core::Error,
    },
    /// The monitor failed while running.
    #[error(transparent)]
    Monitor(udamon_core::Error),
    /// The record could not be created.
    #[error("cannot write {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: udamon_record::Error,
    },
    /// Writing the record failed.
    #[error(transparent)]
    Record(#[from] udamon_record::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl SimError {
    /// The spec, a request that does not fit together or a monitor that
    /// cannot be built over the workload: bad input. A record error says
    /// its own kind; the monitor's error too.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        use udamon_core::ErrorKind as K;
        match self {
            SimError::Spec(e) => e.kind(),
            SimError::Usage(_) | SimError::Build { .. } => K::Usage,
            SimError::Monitor(e) => e.kind(),
            SimError::Create { source, .. } => source.kind(),
            SimError::Record(e) => e.kind(),
            SimError::Json(_) => K::Failure,
        }
    }
}

pub type Result<T, E = SimError> = std::result::Result<T, E>;

/// The seed rule of every simulated run: the one asked for, else the
/// spec's (or the record's), else 0.
pub fn seed(asked: Option<u64>, spec: Option<u64>) -> u64 {
    asked.or(spec).unwrap_or(0)
}

/// A workload ready to run: its model, with the duration and seed settled.
#[derive(Clone)]
pub struct Prepared {
    pub model: Arc<Model>,
    pub seed: u64,
    /// The spec's text, kept in a record's header (empty for a workload
    /// not made from a spec).
    pub spec_text: String,
    /// What messages call the workload ("cannot monitor NAME: ...").
    pub name: String,
}

impl Prepared {
    /// A spec's text: `duration_us` replaces the spec's duration, and
    /// `seed` its seed ([`seed`]).
    pub fn from_spec(
        text: &str,
        origin: &str,
        seed: Option<u64>,
        duration_us: Option<u64>,
    ) -> Result<Prepared, udamon_sim::Error> {
        let mut workload = Workload::from_toml(text, origin)?;
        if let Some(d) = duration_us {
            workload.duration_us = d;
        }
        let seed = self::seed(seed, workload.seed);
        Ok(Prepared {
            model: Arc::new(Model::new(workload)),
            seed,
            spec_text: text.to_string(),
            name: origin.to_string(),
        })
    }

    /// A workload made otherwise (a record's replay), at `seed`.
    pub fn from_workload(workload: Workload, seed: u64, name: &str) -> Prepared {
        Prepared {
            model: Arc::new(Model::new(workload)),
            seed,
            spec_text: String::new(),
            name: name.to_string(),
        }
    }

    pub fn workload(&self) -> &Workload {
        &self.model.workload
    }
}

/// The monitor of a run and what it does.
#[derive(Clone, Debug)]
pub struct Setup {
    pub attrs: Attrs,
    pub kind: MonitorKind,
    /// Schemes to apply (adaptive and fixed-region monitors only).
    pub schemes: Vec<Damos>,
    /// Perform no action; count what the schemes would have done.
    pub dry_run: bool,
    /// Simulate soft-dirty monitoring reset this way (`Sample`: the
    /// simulator's own per-interval checks, which it is anyway).
    pub softdirty_reset: SoftDirtyReset,
}

impl Setup {
    /// The adaptive monitor of `attrs`' mode, without schemes.
    pub fn adaptive(attrs: Attrs) -> Setup {
        Setup {
            attrs,
            kind: MonitorKind::adaptive(attrs.mode),
            schemes: Vec::new(),
            dry_run: false,
            softdirty_reset: SoftDirtyReset::default(),
        }
    }
}

/// Our engine over the workload, its schemes installed (`setup.kind` is an
/// engine's: adaptive, enhanced or fixed regions).
pub fn engine(p: &Prepared, setup: &Setup) -> Result<Engine<SimOps, Pcg64Mcg>> {
    let mut e = build_engine(&p.model, setup.attrs, p.seed, setup.kind).map_err(|error| {
        SimError::Build {
            name: p.name.clone(),
            error,
        }
    })?;
    e.ops_mut().set_soft_dirty_reset(setup.softdirty_reset);
    e.set_schemes(setup.schemes.clone());
    e.set_dry_run(setup.dry_run);
    Ok(e)
}

/// The monitor a run watches the workload with: our engine, or the
/// full-scan baseline (which takes no schemes and runs no machine).
pub enum SimMonitor {
    Engine(Box<Engine<SimOps, Pcg64Mcg>>),
    Other(Box<dyn Monitor>),
}

/// The monitor `setup` asks for over the workload.
pub fn monitor(p: &Prepared, setup: &Setup) -> Result<SimMonitor> {
    if setup.kind != MonitorKind::FullScan {
        return Ok(SimMonitor::Engine(Box::new(engine(p, setup)?)));
    }
    if !setup.schemes.is_empty() {
        return Err(SimError::Usage(
            "schemes need the adaptive or fixed-region monitor, not --full-scan".into(),
        ));
    }
    if setup.softdirty_reset.per_window() {
        return Err(SimError::Usage(
            "--softdirty-reset needs the adaptive or fixed-region monitor, not --full-scan".into(),
        ));
    }
    let m = build_monitor(&p.model, setup.attrs, p.seed, setup.kind).map_err(|error| {
        SimError::Build {
            name: p.name.clone(),
            error,
        }
    })?;
    Ok(SimMonitor::Other(m))
}

impl SimMonitor {
    pub fn monitor(&mut self) -> &mut dyn Monitor {
        match self {
            SimMonitor::Engine(e) => e.as_mut(),
            SimMonitor::Other(m) => m.as_mut(),
        }
    }

    /// The simulated machine's figures; `None` for the full-scan baseline.
    pub fn machine(&self) -> Option<SimMetrics> {
        match self {
            SimMonitor::Engine(e) => Some(e.ops().metrics()),
            SimMonitor::Other(_) => None,
        }
    }

    /// [`SimMonitor::machine`] as a JSON object (empty without a machine).
    pub fn metrics(&self) -> serde_json::Map<String, serde_json::Value> {
        machine_json(self.machine().as_ref())
    }

    pub fn schemes(&self) -> Vec<SchemeReport> {
        match self {
            SimMonitor::Engine(e) => scheme_reports(e.schemes()),
            SimMonitor::Other(_) => Vec::new(),
        }
    }
}

/// The machine's figures as a JSON object (empty without a machine).
fn machine_json(m: Option<&SimMetrics>) -> serde_json::Map<String, serde_json::Value> {
    match m.map(serde_json::to_value) {
        Some(Ok(serde_json::Value::Object(m))) => m,
        _ => serde_json::Map::new(),
    }
}

/// A simulated run to perform, from a spec's text.
#[derive(Clone, Debug)]
pub struct SimRun<'a> {
    pub spec_text: &'a str,
    /// Where the spec came from (its path), for messages.
    pub origin: &'a str,
    /// The seed [default: the spec's, else 0].
    pub seed: Option<u64>,
    /// Replaces the spec's duration.
    pub duration_us: Option<u64>,
    /// The monitor and what it does.
    pub setup: Setup,
    /// Score every snapshot against the simulator's truth as it comes (the
    /// default accuracy options), without keeping the snapshots.
    pub score: bool,
}

impl<'a> SimRun<'a> {
    /// The spec as it is: its seed and duration, default attributes, the
    /// adaptive monitor, no schemes, no scoring.
    pub fn new(spec_text: &'a str, origin: &'a str) -> SimRun<'a> {
        SimRun {
            spec_text,
            origin,
            seed: None,
            duration_us: None,
            setup: Setup::adaptive(Attrs::default()),
            score: false,
        }
    }
}

/// What a run did.
#[derive(Serialize)]
pub struct RunSummary {
    pub output: Option<String>,
    pub workload: String,
    pub monitor: String,
    pub seed: u64,
    pub simulated_s: f64,
    pub snapshots: u64,
    pub avg_nr_regions: f64,
    pub record_bytes: u64,
    pub elapsed_s: f64,
    /// "duration" (the whole simulated duration ran) or "interrupted".
    pub ended_by: String,
    /// The simulated machine's figures (RSS, runtime, faults, ...); absent
    /// for the full-scan baseline, which runs no machine.
    #[serde(flatten)]
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub schemes: Vec<SchemeReport>,
    /// The same figures, typed (`None` for the full-scan baseline).
    #[serde(skip)]
    pub machine: Option<SimMetrics>,
    /// With [`SimRun::score`]: the run's accuracy against the truth.
    #[serde(skip)]
    pub accuracy: Option<Accuracy>,
    #[serde(skip)]
    pub model: Option<Arc<Model>>,
}

/// What the caller sees of a run while it goes.
#[derive(Default)]
pub struct Hooks<'a> {
    /// Called with (simulated microseconds so far, the run's duration):
    /// once before the first snapshot, then after each.
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Asked after each snapshot: `true` ends the run there, its record
    /// complete up to then (`ended_by: "interrupted"`).
    pub stop: Option<&'a dyn Fn() -> bool>,
    /// Given each snapshot once it is written and scored.
    pub snapshot: Option<&'a mut dyn FnMut(Snapshot)>,
}

/// Runs a simulated workload under a monitor, writing a record to `out`.
pub fn run(run: &SimRun, out: Option<&Path>, hooks: Hooks) -> Result<RunSummary> {
    let p = Prepared::from_spec(run.spec_text, run.origin, run.seed, run.duration_us)?;
    run_prepared(&p, &run.setup, run.score, out, hooks)
}

/// [`run`] over a prepared workload.
pub fn run_prepared(
    p: &Prepared,
    setup: &Setup,
    score: bool,
    out: Option<&Path>,
    mut hooks: Hooks,
) -> Result<RunSummary> {
    let model = &p.model;
    let duration_us = model.workload.duration_us;
    let name = model.workload.name.clone();
    let mut mon = monitor(p, setup)?;
    mon.monitor().set_deadline(Some(duration_us));
    let mut writer =
        match out {
            Some(path) => Some(Writer::create(path, &header(p, setup)).map_err(|source| {
                SimError::Create {
                    path: path.to_path_buf(),
                    source,
                }
            })?),
            None => None,
        };
    if let Some(w) = writer.as_mut() {
        // The workload's objects are its mappings: reports name regions
        // by them as they name a process's by its mappings.
        let maps = udamon_record::MapsEvent {
            at_us: 0,
            idx: 0,
            maps: crate::maps::layout_maps(&model.workload),
        };
        // Plain numbers and strings: always representable as JSON.
        let v = serde_json::to_value(&maps).unwrap_or_default();
        w.push_json(udamon_record::MAPS_EVENT, &v)?;
    }
    let started = Instant::now();
    if let Some(f) = hooks.progress.as_mut() {
        f(0, duration_us);
    }
    let (mut snapshots, mut regions) = (0u64, 0u64);
    let mut scorer = score.then(|| AccuracyAcc::new(AccuracyOptions::default()));
    let mut next_stats_us = 0;
    let mut ended_by = "duration";
    // Frames end at the workload's phase boundaries too, so a run killed
    // without warning keeps every finished phase (simulated time: the same
    // seed still gives the same bytes).
    let mut phase_ends = model.workload.phases.iter().scan(0u64, |t, ph| {
        *t += ph.duration_us;
        Some(*t)
    });
    let mut next_phase_end = phase_ends.next();
    while let Some(s) = mon.monitor().next_snapshot().map_err(SimError::Monitor)? {
        snapshots += 1;
        regions += s.nr_regions() as u64;
        if let Some(w) = writer.as_mut() {
            w.push_snapshot(&s)?;
            // Scheme statistics and the machine's figures, once a second.
            if s.end_us >= next_stats_us {
                next_stats_us = s.end_us + 1_000_000;
                push_status(w, s.end_us, &mon)?;
            }
            if next_phase_end.is_some_and(|e| s.end_us >= e) {
                w.flush_frame()?;
                while next_phase_end.is_some_and(|e| s.end_us >= e) {
                    next_phase_end = phase_ends.next();
                }
            }
        }
        if let Some(f) = hooks.progress.as_mut() {
            f(s.end_us.min(duration_us), duration_us);
        }
        if let Some(acc) = scorer.as_mut() {
            acc.push(model, &s);
        }
        if let Some(f) = hooks.snapshot.as_mut() {
            f(s);
        }
        if hooks.stop.is_some_and(|stop| stop()) {
            ended_by = "interrupted";
            break;
        }
    }
    let now_us = mon.monitor().now_us();
    let machine = mon.machine();
    let mut summary = RunSummary {
        output: out.map(|p| p.display().to_string()),
        workload: name,
        monitor: setup.kind.label(),
        seed: p.seed,
        simulated_s: now_us as f64 / 1e6,
        snapshots,
        avg_nr_regions: if snapshots > 0 {
            regions as f64 / snapshots as f64
        } else {
            0.0
        },
        record_bytes: 0,
        elapsed_s: started.elapsed().as_secs_f64(),
        ended_by: ended_by.into(),
        metrics: machine_json(machine.as_ref()),
        schemes: mon.schemes(),
        machine,
        accuracy: scorer.map(|a| a.finish()),
        model: Some(Arc::clone(model)),
    };
    if let Some(mut w) = writer {
        push_status(&mut w, now_us, &mon)?;
        // The record keeps what the run computed, not how this host ran it,
        // so the same seed gives the same record, byte for byte.
        let mut stored = serde_json::to_value(&summary)?;
        if let Some(m) = stored.as_object_mut() {
            for k in ["output", "elapsed_s", "record_bytes"] {
                m.remove(k);
            }
        }
        w.push_json("summary", &stored)?;
        w.flush_frame()?;
        summary.record_bytes = w.bytes_written();
        w.finish()?;
    }
    Ok(summary)
}

/// The header of a simulated run's record.
fn header(p: &Prepared, setup: &Setup) -> Header {
    Header {
        version: udamon_record::VERSION,
        created_by: format!("udamon {}", env!("CARGO_PKG_VERSION")),
        kind: "sim".into(),
        attrs: setup.attrs,
        targets: vec![TargetInfo::new(0, p.model.workload.name.clone())],
        sim: Some(SimInfo {
            spec_toml: p.spec_text.clone(),
            seed: p.seed,
            monitor: setup.kind.label(),
        }),
        params: serde_json::json!({
            "nr_accesses": "window",
            "duration_us": p.model.workload.duration_us,
            "schemes": udamon_scheme_file::to_json(&setup.schemes),
        }),
    }
}

/// The schemes' statistics and the machine's figures at `end_us`, as
/// "schemes" and "sim_metrics" entries (each when there is any).
fn push_status(
    w: &mut Writer<std::io::BufWriter<std::fs::File>>,
    end_us: u64,
    mon: &SimMonitor,
) -> Result<()> {
    let schemes = mon.schemes();
    if !schemes.is_empty() {
        w.push_json(
            "schemes",
            &serde_json::json!({ "end_us": end_us, "schemes": schemes }),
        )?;
    }
    let metrics = mon.metrics();
    if !metrics.is_empty() {
        w.push_json(
            "sim_metrics",
            &serde_json::json!({ "end_us": end_us, "metrics": metrics }),
        )?;
    }
    Ok(())
}
