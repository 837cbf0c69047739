//! `udamon record`: run a monitor over a workload and write a record.

use anyhow::{Context, Result};
use udamon_cli::RecordArgs;
use udamon_core::Mode;
use udamon_session::sim::{RunSummary, Setup, SimRun};
use udamon_sim::MonitorKind;

use crate::inputs::{read_spec, refuse_ops_with_sim, run_duration};
use crate::live::{run_from_args, How};
use crate::output::{print_json, print_summary, run_sim};
use crate::UsageError;

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

pub fn run(a: RecordArgs) -> Result<()> {
    let duration_us = run_duration(a.duration.as_deref())?;
    let Some(sim) = &a.sim else {
        return record_live(&a, duration_us);
    };
    refuse_ops_with_sim(a.live.ops, "watches")?;
    let spec_text = read_spec(sim)?;
    let attrs = a.attrs.attrs()?;
    let kind = monitor_kind(a.fixed_regions, a.full_scan, attrs.mode)?;
    crate::output::prepare("--output", &a.output, &[sim], &[])?;
    let origin = sim.display().to_string();
    let run = SimRun {
        seed: a.seed,
        duration_us,
        setup: Setup {
            kind,
            softdirty_reset: a.live.softdirty_reset,
            ..Setup::adaptive(attrs)
        },
        ..SimRun::new(&spec_text, &origin)
    };
    // SIGINT, SIGTERM and SIGHUP end the run early, its record complete up
    // to there (`ended_by: "interrupted"`).
    crate::stop::install();
    let s = run_sim(&run, Some(&a.output), Some(&crate::stop::requested))?;
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
    let attrs = a.attrs.attrs()?;
    let alloc_sites = a.alloc_sites()?;
    let hints = match &a.hints {
        Some(path) => crate::inputs::read_hints(path)?,
        None => Vec::new(),
    };
    crate::output::prepare("--output", &a.output, &[], &[])?;
    if let Some(sites) = &alloc_sites {
        // The previous record's side files go with it (they would mix with
        // this run's where a pid comes again).
        for old in udamon_preload::SideFile::paths(&sites.prefix).unwrap_or_default() {
            std::fs::remove_file(&old)
                .with_context(|| format!("cannot remove the old side file {}", old.display()))?;
        }
    }
    let s = run_from_args(
        &a.live,
        attrs,
        Vec::new(),
        How {
            dry_run: false,
            progress: !a.json,
            alloc_sites,
            hints,
        },
        duration_us,
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
