//! Monitoring and schemes on live processes: the binary's side of a
//! [`Session`] (stop requests from signals, progress; the summary is
//! printed by `output::print_summary`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use udamon_cli::LiveArgs;
use udamon_core::schemes::Damos;
use udamon_core::Attrs;
use udamon_record::Writer;
use udamon_session::{Event, Recorder, Session, Spec};
pub use udamon_session::{LiveSummary, LiveTarget, OpsChoice};

use crate::output::Progress;
use crate::stop;
use crate::UsageError;
use udamon_core::softdirty::SoftDirtyReset;

/// How a live run from the command line runs: a dry run, with a progress
/// line, sampling the command's allocations.
#[derive(Default)]
pub struct How {
    pub dry_run: bool,
    pub progress: bool,
    pub alloc_sites: Option<udamon_session::AllocSites>,
    pub hints: Vec<udamon_preload::HintLine>,
}

/// A live run to perform.
pub struct LiveRun<'a> {
    pub target: LiveTarget,
    pub ops: OpsChoice,
    /// "/" in production; a fake tree in tests.
    pub root: &'a Path,
    pub attrs: Attrs,
    pub schemes: Vec<Damos>,
    /// Perform no action: our engine counts what would have been done;
    /// kernel DAMON, which has no dry run, runs the schemes as `stat`.
    pub dry_run: bool,
    pub duration_us: Option<u64>,
    pub progress: bool,
    /// End the run when the process execs (default: follow the new program).
    pub stop_on_exec: bool,
    /// When the soft-dirty path resets the bits.
    pub softdirty_reset: SoftDirtyReset,
    /// Sample the command's allocations (`record --alloc-sites`).
    pub alloc_sites: Option<udamon_session::AllocSites>,
    /// Placement hints for the command (`record --hints`).
    pub hints: Vec<udamon_preload::HintLine>,
}

/// Runs a live monitor (with `run.schemes`, possibly none), writing a
/// record to `out`. SIGINT, SIGTERM and SIGHUP end it; a second signal
/// removes our kdamond and exits.
pub fn run_live(run: &LiveRun, out: Option<&Path>) -> Result<LiveSummary> {
    stop::install();
    let spec = Spec {
        target: run.target.clone(),
        ops: run.ops,
        root: run.root.to_path_buf(),
        attrs: run.attrs,
        schemes: run.schemes.clone(),
        dry_run: run.dry_run,
        duration_us: run.duration_us,
        stop_on_exec: run.stop_on_exec,
        softdirty_reset: run.softdirty_reset,
        alloc_sites: run.alloc_sites.clone(),
        hints: run.hints.clone(),
        kdamonds: None,
        warn: udamon_session::Warner::default(),
    };
    let mut session = Session::start(&spec)?;
    if session.kdamond_pid().is_some() {
        // A second signal forces the exit, but never leaves our kdamond.
        let root = run.root.to_path_buf();
        stop::on_force(Some(Box::new(move || {
            use udamon_kdamon::claim;
            let me = std::process::id();
            let verdict = claim::judge(&root, &|pid| udamon_proc::start_time(&root, pid));
            if matches!(verdict, claim::Verdict::Running(c) if c.udamon_pid == me) {
                let _ = claim::remove_kdamond(&root, me);
            }
        })));
    }
    let writer = match out {
        Some(p) => Some(
            Writer::create(p, &session.header())
                .with_context(|| format!("cannot write {}", p.display()))?,
        ),
        None => None,
    };
    let setup_cpu_s = udamon_session::self_cpu_s();
    let info = session.info().clone();
    let what = if info.pid == 0 || session.is_program() {
        info.command.clone()
    } else {
        format!("pid {} ({})", info.pid, info.command)
    };
    eprintln!(
        "udamon: monitoring {what} with {} ({}); sees {}; snapshots from {}",
        info.path, info.chosen_because, info.access, info.source
    );
    let mut progress = run
        .duration_us
        .filter(|_| run.progress)
        .map(|d| Progress::new(d, "monitoring"));
    let mut recorder = Recorder::new(&session, writer);
    let ended_by = loop {
        let ev = session.next(&stop::requested)?;
        if let Event::Exec { at_us, exe } = &ev {
            eprintln!(
                "udamon: pid {} exec'd {exe} at {:.1}s: monitoring the new program from fresh \
                 regions (--stop-on-exec ends the run instead)",
                info.pid,
                *at_us as f64 / 1e6
            );
        }
        recorder.push(&mut session, &ev)?;
        match ev {
            Event::End(why) => break why,
            Event::Snapshot(s) => {
                if let Some(p) = progress.as_mut() {
                    p.set(s.end_us);
                }
            }
            Event::Exec { .. } | Event::Targets(_) => {}
        }
    };
    // udamon's whole run up to its tear-down, set-up included.
    let cpu = udamon_session::CpuSpent {
        total_s: udamon_session::self_cpu_s(),
        wall_s: crate::output::since_start().as_secs_f64(),
        setup_s: setup_cpu_s,
    };
    let output = out.map(|p| p.display().to_string());
    let summary = recorder.finish(&mut session, ended_by, output, cpu)?;
    stop::on_force(None);
    if let Some(p) = progress {
        p.finish();
    }
    Ok(summary)
}

/// What `--pid`, `--children`, `--cgroup`, `--paddr` or `-- CMD` name: one
/// process, the physical space, or a program of several processes.
fn live_target(a: &LiveArgs) -> Result<LiveTarget> {
    if a.paddr {
        return Ok(LiveTarget::Phys);
    }
    let command = !a.command.is_empty();
    if a.children && a.pid.is_empty() {
        return Err(UsageError(
            "--children follows the descendants of --pid PID (`-- CMD` follows its own by \
             default): give --pid"
                .into(),
        )
        .into());
    }
    if !command && a.pid.is_empty() && a.cgroup.is_none() {
        return Err(UsageError(
            "give --sim SPEC, --pid PID, --cgroup PATH, --paddr or -- CMD ARGS".into(),
        )
        .into());
    }
    // One process: the old way, exec included (--stop-on-exec).
    let single = a.cgroup.is_none() && !a.children;
    match (&a.pid[..], command) {
        ([p], false) if single => return Ok(LiveTarget::Pid(*p)),
        ([], true) if a.no_children || a.stop_on_exec => {
            return Ok(LiveTarget::Command(a.command.clone()))
        }
        _ => {}
    }
    if a.stop_on_exec {
        return Err(UsageError(
            "--stop-on-exec ends the run when one process execs: give one --pid, or -- CMD \
             (its own process)"
                .into(),
        )
        .into());
    }
    Ok(LiveTarget::Program {
        program: udamon_proc::Program {
            pids: a.pid.clone(),
            children: a.children || command,
            cgroup: a.cgroup.clone(),
            matching: None,
        },
        command: command.then(|| a.command.clone()),
    })
}

/// Runs the live target that `--pid`, `--paddr` or `-- CMD` names (the
/// hidden `--root` points /proc and /sys at a fake tree in tests).
pub fn run_from_args(
    a: &LiveArgs,
    attrs: Attrs,
    schemes: Vec<Damos>,
    how: How,
    duration_us: Option<u64>,
    out: Option<&Path>,
) -> Result<LiveSummary> {
    let How {
        dry_run,
        progress,
        alloc_sites,
        hints,
    } = how;
    let target = live_target(a)?;
    if a.softdirty_reset.per_window() && !a.ops.may_take_softdirty(a.paddr) {
        return Err(UsageError(format!(
            "--softdirty-reset {} applies to the soft-dirty path; {} does not reset \
             soft-dirty bits (drop the flag, or monitor a process with --ops softdirty or auto)",
            a.softdirty_reset,
            if a.paddr {
                "--paddr".to_string()
            } else {
                format!("--ops {}", a.ops.name())
            }
        ))
        .into());
    }
    let root = a.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    let run = LiveRun {
        target,
        ops: a.ops,
        root: &root,
        attrs,
        schemes,
        dry_run,
        duration_us,
        progress,
        stop_on_exec: a.stop_on_exec,
        softdirty_reset: a.softdirty_reset,
        alloc_sites,
        hints,
    };
    run_live(&run, out)
}
