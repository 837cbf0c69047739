//! `udamon record`: run a monitor over a workload and write a record.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use udamon_core::schemes::Damos;
use udamon_core::softdirty::SoftDirtyReset;
use udamon_core::{Attrs, Engine, IntervalsGoal, Mode, Monitor};
use udamon_record::{Header, SimInfo, TargetInfo, Writer};
use udamon_sim::units::parse_duration_us;
use udamon_sim::{build_engine, build_monitor, Model, MonitorKind, SimOps, Workload};

pub use udamon_session::{scheme_reports, SchemeReport};

use crate::cli::{AttrsArgs, RecordArgs};
use crate::cmd::live::{print_summary, refuse_ops_with_sim, run_from_args};
use crate::output::{print_json, Progress};
use crate::UsageError;

pub fn duration_arg(flag: &str, s: &str) -> Result<u64> {
    parse_duration_us(s).map_err(|m| UsageError(format!("--{flag}: {m}")).into())
}

/// `--duration`, when given: a positive duration (a spec refuses 0 too).
pub fn run_duration(s: Option<&str>) -> Result<Option<u64>> {
    let Some(s) = s else { return Ok(None) };
    match duration_arg("duration", s)? {
        0 => Err(UsageError(format!(
            "--duration {s}: a run needs a positive duration, like 10s"
        ))
        .into()),
        d => Ok(Some(d)),
    }
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
        mode: a.mode,
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
    /// Schemes to apply (adaptive and fixed-region monitors only).
    pub schemes: Vec<Damos>,
    /// Score every snapshot against the simulator's truth as it comes (the
    /// default accuracy options), without keeping the snapshots.
    pub score: bool,
    pub progress: bool,
    /// SIGINT, SIGTERM and SIGHUP end the run early, its record complete up
    /// to there (`ended_by: "interrupted"`); otherwise they kill the process.
    pub interruptible: bool,
    /// Perform no action; count what the schemes would have done.
    pub dry_run: bool,
    /// Simulate soft-dirty monitoring reset this way (`Sample`: the
    /// simulator's own per-interval checks, which it is anyway).
    pub softdirty_reset: SoftDirtyReset,
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
    /// "duration" (the whole simulated duration ran) or "interrupted".
    pub ended_by: String,
    /// The simulated machine's figures (RSS, runtime, faults, ...); absent
    /// for the full-scan baseline, which runs no machine.
    #[serde(flatten)]
    pub metrics: serde_json::Map<String, serde_json::Value>,
    pub schemes: Vec<SchemeReport>,
    /// With [`SimRun::score`]: the run's accuracy against the truth.
    #[serde(skip)]
    pub accuracy: Option<udamon_sim::Accuracy>,
    #[serde(skip)]
    pub model: Option<Arc<Model>>,
}

enum Mon {
    Engine(Box<Engine<SimOps, Pcg64Mcg>>),
    Other(Box<dyn Monitor>),
}

impl Mon {
    fn monitor(&mut self) -> &mut dyn Monitor {
        match self {
            Mon::Engine(e) => e.as_mut(),
            Mon::Other(m) => m.as_mut(),
        }
    }

    fn metrics(&self) -> serde_json::Map<String, serde_json::Value> {
        match self {
            Mon::Engine(e) => match serde_json::to_value(e.ops().metrics()) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => serde_json::Map::new(),
            },
            Mon::Other(_) => serde_json::Map::new(),
        }
    }

    fn schemes(&self) -> Vec<SchemeReport> {
        match self {
            Mon::Engine(e) => scheme_reports(e.schemes()),
            Mon::Other(_) => Vec::new(),
        }
    }
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
    let cannot = |e: udamon_core::Error| UsageError(format!("cannot monitor {}: {e}", run.origin));
    let mut mon = match run.kind {
        MonitorKind::FullScan => {
            if !run.schemes.is_empty() {
                return Err(UsageError(
                    "schemes need the adaptive or fixed-region monitor, not --full-scan".into(),
                )
                .into());
            }
            if run.softdirty_reset.per_window() {
                return Err(UsageError(
                    "--softdirty-reset needs the adaptive or fixed-region monitor, not --full-scan"
                        .into(),
                )
                .into());
            }
            Mon::Other(build_monitor(&model, run.attrs, seed, run.kind).map_err(cannot)?)
        }
        kind => {
            let mut e = build_engine(&model, run.attrs, seed, kind).map_err(cannot)?;
            e.ops_mut().set_soft_dirty_reset(run.softdirty_reset);
            e.set_schemes(run.schemes.clone());
            e.set_dry_run(run.dry_run);
            Mon::Engine(Box::new(e))
        }
    };
    mon.monitor().set_deadline(Some(duration_us));
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
        params: serde_json::json!({
            "nr_accesses": "window",
            "duration_us": duration_us,
            "schemes": udamon_scheme_file::to_json(&run.schemes),
        }),
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
    let mut scorer = run
        .score
        .then(|| udamon_sim::AccuracyAcc::new(udamon_sim::AccuracyOptions::default()));
    let mut next_stats_us = 0;
    if run.interruptible {
        crate::stop::install();
    }
    let mut ended_by = "duration";
    // Frames end at the workload's phase boundaries too, so a run killed
    // without warning keeps every finished phase (simulated time: the same
    // seed still gives the same bytes).
    let mut phase_ends = model.workload.phases.iter().scan(0u64, |t, p| {
        *t += p.duration_us;
        Some(*t)
    });
    let mut next_phase_end = phase_ends.next();
    while let Some(s) = mon.monitor().next_snapshot()? {
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
        if let Some(p) = progress.as_mut() {
            p.set(s.end_us.min(duration_us));
        }
        if let Some(acc) = scorer.as_mut() {
            acc.push(&model, &s);
        }
        if run.interruptible && crate::stop::requested() {
            ended_by = "interrupted";
            break;
        }
    }
    let now_us = mon.monitor().now_us();
    let mut summary = RunSummary {
        output: out.map(|p| p.display().to_string()),
        workload: name,
        monitor: run.kind.label(),
        seed,
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
        metrics: mon.metrics(),
        schemes: mon.schemes(),
        accuracy: scorer.map(|a| a.finish()),
        model: Some(model),
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
    if let Some(p) = progress {
        p.finish();
    }
    Ok(summary)
}

fn push_status(
    w: &mut Writer<std::io::BufWriter<std::fs::File>>,
    end_us: u64,
    mon: &Mon,
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

pub fn monitor_kind(fixed: Option<u32>, full_scan: bool, mode: Mode) -> Result<MonitorKind> {
    if mode == Mode::Enhanced && (fixed.is_some() || full_scan) {
        return Err(UsageError(format!(
            "--mode enhanced adapts regions; {} does not: give one or the other",
            if full_scan {
                "--full-scan"
            } else {
                "--fixed-regions"
            }
        ))
        .into());
    }
    Ok(match (fixed, full_scan) {
        (Some(0), _) => {
            return Err(UsageError("--fixed-regions 0: give at least 1 region".into()).into())
        }
        (Some(n), _) => MonitorKind::FixedRegions(n),
        (None, true) => MonitorKind::FullScan,
        (None, false) if mode == Mode::Enhanced => MonitorKind::Enhanced,
        (None, false) => MonitorKind::Adaptive,
    })
}

/// Reads a workload spec file; a failure is a usage error naming the file.
pub fn read_spec(p: &Path) -> Result<String> {
    std::fs::read_to_string(p)
        .map_err(|e| UsageError(format!("cannot read spec {}: {e}", p.display())).into())
}

/// The per-scheme statistics table, then one description line per scheme.
pub fn print_scheme_table(reports: &[SchemeReport]) {
    println!(
        "{:>2}  {:<12} {:>9} {:>11} {:>10} {:>11} {:>9} {:>11}",
        "#", "action", "nr_tried", "sz_tried", "nr_applied", "sz_applied", "qt_exceed", "quota"
    );
    for r in reports {
        println!(
            "{:>2}  {:<12} {:>9} {:>11} {:>10} {:>11} {:>9} {:>11}",
            r.index,
            r.action,
            r.stats.nr_tried,
            udamon_report::fmt_bytes(r.stats.sz_tried),
            r.stats.nr_applied,
            udamon_report::fmt_bytes(r.stats.sz_applied),
            r.stats.qt_exceeds,
            if r.not_available
                .iter()
                .any(|n| n.starts_with("effective_quota_bytes"))
            {
                "n/a".into()
            } else {
                r.effective_quota_bytes
                    .map_or("unlimited".into(), udamon_report::fmt_bytes)
            }
        );
    }
    for r in reports {
        println!("    {}: {}", r.index, r.description);
        if let Some(b) = r.would_apply_bytes {
            println!(
                "       dry run: {} would have been applied to {} of distinct memory",
                r.action,
                udamon_report::fmt_bytes(b)
            );
        }
    }
    println!(
        "    (tried and applied add up over every apply pass, so they can exceed the memory's size)"
    );
    let mut na: Vec<&String> = reports.iter().flat_map(|r| &r.not_available).collect();
    na.sort();
    na.dedup();
    for n in na {
        println!("    n/a: {n}");
    }
}

pub fn run(a: RecordArgs) -> Result<()> {
    let duration_us = run_duration(a.duration.as_deref())?;
    let Some(sim) = &a.sim else {
        return record_live(&a, duration_us);
    };
    refuse_ops_with_sim(a.live.ops, "watches")?;
    let spec_text = read_spec(sim)?;
    let attrs = attrs_from(&a.attrs)?;
    let kind = monitor_kind(a.fixed_regions, a.full_scan, attrs.mode)?;
    crate::output::prepare("--output", &a.output, &[sim], &[])?;
    let run = SimRun {
        spec_text: &spec_text,
        origin: &sim.display().to_string(),
        seed: a.seed,
        duration_us,
        attrs,
        kind,
        schemes: Vec::new(),
        score: false,
        progress: true,
        interruptible: true,
        dry_run: false,
        softdirty_reset: a.live.softdirty_reset,
    };
    let s = run_sim(&run, Some(&a.output))?;
    if s.ended_by == "interrupted" {
        eprintln!(
            "udamon: interrupted after {:.1}s simulated; the record holds everything until then",
            s.simulated_s
        );
    }
    if a.json {
        return print_json(&s);
    }
    print_machine(&s);
    println!(
        "recorded {} ({}, seed {}): {:.1}s simulated{}, {} snapshots, {:.0} regions on average",
        s.workload,
        s.monitor,
        s.seed,
        s.simulated_s,
        if s.ended_by == "interrupted" {
            " (interrupted)"
        } else {
            ""
        },
        s.snapshots,
        s.avg_nr_regions
    );
    println!(
        "wrote {} ({}) in {:.2}s",
        a.output.display(),
        udamon_report::fmt_bytes(s.record_bytes),
        s.elapsed_s
    );
    Ok(())
}

fn record_live(a: &RecordArgs, duration_us: Option<u64>) -> Result<()> {
    if a.fixed_regions.is_some() || a.full_scan || a.seed.is_some() {
        return Err(UsageError(
            "--fixed-regions, --full-scan and --seed apply to the simulator (--sim) only".into(),
        )
        .into());
    }
    let attrs = attrs_from(&a.attrs)?;
    crate::output::prepare("--output", &a.output, &[], &[])?;
    let s = run_from_args(
        &a.live,
        attrs,
        Vec::new(),
        false,
        duration_us,
        !a.json,
        Some(&a.output),
    )?;
    if a.json {
        return print_json(&s);
    }
    print_summary(&s);
    Ok(())
}

/// One line of the simulated machine's figures, when there are any.
pub fn print_machine(s: &RunSummary) {
    let m = &s.metrics;
    let num = |k: &str| m.get(k).and_then(|v| v.as_f64());
    if let (Some(rss), Some(peak), Some(rt), Some(faults)) = (
        num("rss_avg_bytes"),
        num("rss_peak_bytes"),
        num("runtime_s"),
        num("faults"),
    ) {
        println!(
            "machine: rss {} on average, {} at peak; runtime {:.2}s; {} faults",
            udamon_report::fmt_bytes(rss as u64),
            udamon_report::fmt_bytes(peak as u64),
            rt,
            faults as u64
        );
    }
}
