//! `udamon record`: run a monitor over a workload and write a record.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use udamon_core::{Attrs, IntervalsGoal, Snapshot};
use udamon_record::{Header, SimInfo, TargetInfo, Writer};
use udamon_sim::units::parse_duration_us;
use udamon_sim::{build_monitor, Model, MonitorKind, Workload};

use crate::cli::{AttrsArgs, RecordArgs};
use crate::output::{print_json, Progress};
use crate::UsageError;

pub fn duration_arg(flag: &str, s: &str) -> Result<u64> {
    parse_duration_us(s).map_err(|m| UsageError(format!("--{flag}: {m}")).into())
}

/// Resolves the attribute flags into validated attributes.
pub fn attrs_from(a: &AttrsArgs) -> Result<Attrs> {
    let sample_us = duration_arg("sample", &a.sample)?;
    let mut attrs = Attrs {
        sample_us,
        aggr_us: duration_arg("aggr", &a.aggr)?,
        update_us: duration_arg("update", &a.update)?,
        min_nr_regions: a.min_regions,
        max_nr_regions: a.max_regions,
        intervals_goal: IntervalsGoal::default(),
    };
    if let Some(bp) = a.intervals_goal {
        attrs.intervals_goal = IntervalsGoal {
            access_bp: bp,
            aggrs: 3,
            min_sample_us: sample_us.min(1_000),
            max_sample_us: 10_000_000,
        };
    }
    attrs.validate().map_err(|e| UsageError(e.to_string()))?;
    Ok(attrs)
}

/// A simulated run to perform.
pub struct SimRun<'a> {
    pub spec_text: &'a str,
    pub origin: &'a str,
    pub seed: Option<u64>,
    pub duration_us: Option<u64>,
    pub attrs: Attrs,
    pub kind: MonitorKind,
    /// Keep the snapshots in memory too (for reports right after).
    pub keep: bool,
    pub progress: bool,
}

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
    #[serde(skip)]
    pub kept: Vec<Snapshot>,
    #[serde(skip)]
    pub model: Option<Arc<Model>>,
}

/// Runs a simulated workload under a monitor, writing a record to `out`.
pub fn run_sim(run: &SimRun, out: Option<&Path>) -> Result<RunSummary> {
    let mut workload = Workload::from_toml(run.spec_text, run.origin)?;
    if let Some(d) = run.duration_us {
        workload.duration_us = d;
    }
    let seed = run.seed.or(workload.seed).unwrap_or(0);
    let duration_us = workload.duration_us;
    let name = workload.name.clone();
    let model = Arc::new(Model::new(workload));
    let mut monitor = build_monitor(&model, run.attrs, seed, run.kind)
        .map_err(|e| UsageError(format!("cannot monitor {}: {e}", run.origin)))?;
    let header = Header {
        version: udamon_record::VERSION,
        created_by: format!("udamon {}", env!("CARGO_PKG_VERSION")),
        kind: "sim".into(),
        attrs: run.attrs,
        targets: vec![TargetInfo {
            pid: 0,
            label: name.clone(),
        }],
        sim: Some(SimInfo {
            spec_toml: run.spec_text.to_string(),
            seed,
            monitor: run.kind.label(),
        }),
        params: serde_json::json!({ "duration_us": duration_us }),
    };
    let mut writer = match out {
        Some(p) => Some(
            Writer::create(p, &header).with_context(|| format!("cannot write {}", p.display()))?,
        ),
        None => None,
    };
    let started = Instant::now();
    let mut progress = run
        .progress
        .then(|| Progress::new(duration_us, "recording"));
    let (mut snapshots, mut regions) = (0u64, 0u64);
    let mut kept = Vec::new();
    while monitor.now_us() < duration_us {
        let Some(s) = monitor.next_snapshot()? else {
            break;
        };
        snapshots += 1;
        regions += s.nr_regions() as u64;
        if let Some(w) = writer.as_mut() {
            w.push_snapshot(&s)?;
        }
        if let Some(p) = progress.as_mut() {
            p.set(monitor.now_us().min(duration_us));
        }
        if run.keep {
            kept.push(s);
        }
    }
    let record_bytes = match writer {
        Some(w) => {
            let bytes = w.bytes_written();
            w.finish()?;
            bytes
        }
        None => 0,
    };
    if let Some(p) = progress {
        p.finish();
    }
    Ok(RunSummary {
        output: out.map(|p| p.display().to_string()),
        workload: name,
        monitor: run.kind.label(),
        seed,
        simulated_s: monitor.now_us() as f64 / 1e6,
        snapshots,
        avg_nr_regions: if snapshots > 0 {
            regions as f64 / snapshots as f64
        } else {
            0.0
        },
        record_bytes,
        elapsed_s: started.elapsed().as_secs_f64(),
        kept,
        model: Some(model),
    })
}

pub fn monitor_kind(fixed: Option<u32>, full_scan: bool) -> Result<MonitorKind> {
    Ok(match (fixed, full_scan) {
        (Some(0), _) => {
            return Err(UsageError("--fixed-regions 0: give at least 1 region".into()).into())
        }
        (Some(n), _) => MonitorKind::FixedRegions(n),
        (None, true) => MonitorKind::FullScan,
        (None, false) => MonitorKind::Adaptive,
    })
}

pub fn run(a: RecordArgs) -> Result<()> {
    let spec_text = std::fs::read_to_string(&a.sim)
        .map_err(|e| UsageError(format!("cannot read spec {}: {e}", a.sim.display())))?;
    let duration_us = a
        .duration
        .as_deref()
        .map(|d| duration_arg("duration", d))
        .transpose()?;
    let run = SimRun {
        spec_text: &spec_text,
        origin: &a.sim.display().to_string(),
        seed: a.seed,
        duration_us,
        attrs: attrs_from(&a.attrs)?,
        kind: monitor_kind(a.fixed_regions, a.full_scan)?,
        keep: false,
        progress: true,
    };
    let s = run_sim(&run, Some(&a.output))?;
    if a.json {
        return print_json(&s);
    }
    println!(
        "recorded {} ({}, seed {}): {:.1}s simulated, {} snapshots, {:.0} regions on average",
        s.workload, s.monitor, s.seed, s.simulated_s, s.snapshots, s.avg_nr_regions
    );
    println!(
        "wrote {} ({}) in {:.2}s",
        a.output.display(),
        udamon_report::fmt_bytes(s.record_bytes),
        s.elapsed_s
    );
    Ok(())
}
