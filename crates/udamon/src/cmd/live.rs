//! Monitoring and schemes on live processes: kernel DAMON through sysfs
//! (`--ops kdamond`), or our engine over `/proc` primitives paced by the
//! real clock (`--ops idle`, `--ops softdirty`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::ValueEnum;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use udamon_core::schemes::Damos;
use udamon_core::{Attrs, Engine, Monitor, Operations, Snapshot, Target};
use udamon_kdamon::trace::{parse_aggregated, Assembler, TraceSession};
use udamon_kdamon::{KTarget, KdamonConfig, KdamonDriver, OpsKind};
use udamon_proc::{
    proc_field, system_ram, unsupported_reason, AccessMode, Paced, PaddrOps, ProcError, ProcOps,
};
use udamon_record::{Header, TargetInfo, Writer};

use crate::cli::LiveArgs;
use crate::cmd::record::{scheme_reports, SchemeReport};
use crate::features::{probe, Features};
use crate::output::Progress;
use crate::stop;
use crate::{CapabilityError, UsageError};

/// How a live process is monitored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpsChoice {
    /// The best available: kdamond, else idle, else softdirty
    #[default]
    Auto,
    /// Kernel DAMON (vaddr) through sysfs; needs CONFIG_DAMON_SYSFS and
    /// CONFIG_DAMON_VADDR
    Kdamond,
    /// udamon's engine; accesses from the idle page bitmap (reads and
    /// writes); needs CONFIG_IDLE_PAGE_TRACKING and root
    Idle,
    /// udamon's engine; accesses from soft-dirty bits: WRITES ONLY; needs
    /// CONFIG_MEM_SOFT_DIRTY
    Softdirty,
}

impl OpsChoice {
    pub fn name(self) -> &'static str {
        match self {
            OpsChoice::Auto => "auto",
            OpsChoice::Kdamond => "kdamond",
            OpsChoice::Idle => "idle",
            OpsChoice::Softdirty => "softdirty",
        }
    }

    /// What the path sees, for headers and summaries.
    pub fn access(self) -> &'static str {
        match self {
            OpsChoice::Softdirty => "writes only (soft-dirty): reads are not seen",
            _ => "reads and writes (accessed bits)",
        }
    }
}

/// What to monitor.
#[derive(Clone, Debug)]
pub enum LiveTarget {
    Pid(u32),
    /// Started by udamon, followed until it exits.
    Command(Vec<String>),
    /// The physical address space (System RAM).
    Phys,
}

/// The operations under our engine: a process's virtual space or the
/// physical one.
#[derive(Debug)]
enum LiveOps {
    Proc(ProcOps),
    Phys(PaddrOps),
}

impl LiveOps {
    fn take_error(&mut self) -> Option<ProcError> {
        match self {
            LiveOps::Proc(o) => o.take_error(),
            LiveOps::Phys(o) => o.take_error(),
        }
    }

    /// Why the process stopped being the target ("target exited", "target
    /// replaced" when its pid names another process now).
    fn ended(&self) -> &'static str {
        match self {
            LiveOps::Proc(o) => o.ended(0).map_or("target exited", |e| e.label()),
            LiveOps::Phys(_) => "target exited",
        }
    }

    fn take_execs(&mut self) -> u32 {
        match self {
            LiveOps::Proc(o) => o.take_execs(0),
            LiveOps::Phys(_) => 0,
        }
    }
}

macro_rules! delegate {
    ($self:ident, $o:ident => $e:expr) => {
        match $self {
            LiveOps::Proc($o) => $e,
            LiveOps::Phys($o) => $e,
        }
    };
}

impl Operations for LiveOps {
    fn target_ranges(&mut self, idx: usize, t: &Target) -> Option<Vec<udamon_core::AddrRange>> {
        delegate!(self, o => o.target_ranges(idx, t))
    }
    fn prepare_access_checks(&mut self, t: &[Target], w: udamon_core::SampleWindow) {
        delegate!(self, o => o.prepare_access_checks(t, w))
    }
    fn check_accesses(&mut self, t: &[Target], w: udamon_core::SampleWindow, a: &mut Vec<bool>) {
        delegate!(self, o => o.check_accesses(t, w, a))
    }
    fn target_valid(&self, idx: usize) -> bool {
        delegate!(self, o => o.target_valid(idx))
    }
    fn apply_scheme(
        &mut self,
        idx: usize,
        r: udamon_core::AddrRange,
        s: &Damos,
        now: u64,
    ) -> udamon_core::ApplyOutcome {
        delegate!(self, o => o.apply_scheme(idx, r, s, now))
    }
    fn goal_metric(
        &mut self,
        idx: usize,
        g: &udamon_core::schemes::QuotaGoal,
        now: u64,
    ) -> Option<u64> {
        delegate!(self, o => o.goal_metric(idx, g, now))
    }
    fn free_mem_rate(&mut self, now: u64) -> Option<u32> {
        delegate!(self, o => o.free_mem_rate(now))
    }
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
}

#[derive(Debug, Serialize)]
pub struct LiveSummary {
    pub output: Option<String>,
    pub pid: u32,
    pub command: String,
    pub ops: OpsChoice,
    /// Why `--ops auto` picked this path.
    pub chosen_because: String,
    pub access: &'static str,
    /// Where snapshots came from.
    pub source: String,
    pub kernel: String,
    pub monitored_s: f64,
    pub snapshots: u64,
    pub avg_nr_regions: f64,
    /// udamon's own CPU time (user + system) over its whole run, set-up and
    /// tear-down included, and per second of that run's wall time.
    pub udamon_cpu_s: f64,
    pub udamon_cpu_s_per_s: f64,
    /// The kdamond thread's CPU time per second (kernel DAMON only).
    pub kdamond_cpu_s_per_s: Option<f64>,
    /// The target's resident set at the start and the end (kB, VmRSS).
    pub rss_start_kb: Option<u64>,
    pub rss_end_kb: Option<u64>,
    pub swap_end_kb: Option<u64>,
    /// Why monitoring ended: "duration", "target exited", "target replaced"
    /// (its pid names another process now), "target exec'd" (with
    /// --stop-on-exec), "interrupted".
    pub ended_by: String,
    /// Execs of the target seen (our engine; kernel DAMON follows an exec
    /// by itself): each is an `exec` entry in the record.
    pub execs: u64,
    /// Windows much longer than the aggregation interval (the kernel's
    /// aggregations stalled, or udamon could not keep up): how many, and
    /// the longest. Each is also a `gap` entry in the record.
    pub gaps: u64,
    pub longest_gap_s: f64,
    pub record_bytes: u64,
    pub schemes: Vec<SchemeReport>,
}

/// A command udamon started has exited (and was reaped: a zombie would
/// still look alive to the kernel's DAMON and to /proc).
static CHILD_EXITED: AtomicBool = AtomicBool::new(false);

/// How often a live run's record is flushed (a frame at least this often).
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Snapshot windows far longer than the aggregation interval.
#[derive(Default)]
struct Gaps {
    count: u64,
    longest_us: u64,
}

impl Gaps {
    /// A window at least three aggregation intervals and one second longer
    /// than it should be is a gap (slow windows from a busy machine, about
    /// twice the interval, are not).
    fn check(&mut self, s: &Snapshot, aggr_us: u64) -> Option<serde_json::Value> {
        let len = s.end_us.saturating_sub(s.start_us);
        if len < 3 * aggr_us || len < aggr_us + 1_000_000 {
            return None;
        }
        self.count += 1;
        self.longest_us = self.longest_us.max(len);
        Some(serde_json::json!({
            "start_us": s.start_us,
            "end_us": s.end_us,
            "expected_us": aggr_us,
        }))
    }
}

fn feature<'a>(f: &'a Features, name: &str) -> (bool, &'a str) {
    f.features
        .iter()
        .find(|x| x.name == name)
        .map_or((false, "not probed"), |x| (x.available, x.detail.as_str()))
}

/// Why kernel DAMON does not offer operations set `op`; `None` when it
/// does, or when nothing says (the driver then reads avail_operations
/// before using a set and names what lacks).
fn damon_lacks(f: &Features, op: &str) -> Option<String> {
    let set = f.damon_ops.as_ref()?.iter().find(|s| s.name == op)?;
    (!set.offered).then(|| format!("damon_operations: {op} needs {}", set.needs))
}

/// DAMON modules that are enabled, each as a blocker of the kdamond path: a
/// running module holds kernel DAMON, and another kdamond fails to start
/// with EBUSY (seen with DAMON_STAT on Linux 7.3).
fn modules_holding_damon(f: &Features) -> impl Iterator<Item = String> + '_ {
    f.damon_modules.iter().filter(|m| m.enabled).map(|m| {
        format!(
            "{} is enabled and holds kernel DAMON ({})",
            m.module.to_uppercase(),
            m.disable_hint()
        )
    })
}

/// Why each path is or is not usable here; `None` when usable.
fn path_blocker(f: &Features, ops: OpsChoice, phys: bool) -> Option<String> {
    let need = |names: &[&str]| {
        let missing: Vec<String> = names
            .iter()
            .filter_map(|n| {
                let (ok, detail) = feature(f, n);
                (!ok).then(|| format!("{n}: {detail}"))
            })
            .collect();
        (!missing.is_empty()).then(|| missing.join("; "))
    };
    match ops {
        // Every blocker, so that clearing one is not mistaken for a fix.
        OpsChoice::Kdamond => {
            let mut why: Vec<String> = need(&["kernel_damon_sysfs"]).into_iter().collect();
            why.extend(damon_lacks(f, if phys { "paddr" } else { "vaddr" }));
            why.extend(modules_holding_damon(f));
            why.extend(f.foreign_kdamonds.iter().map(|k| {
                if let (Some(u), Some(false)) = (k.udamon_pid, k.udamon_running) {
                    return format!(
                        "kdamond {} was left by a udamon run (pid {u}) that died: \
                         `udamon cleanup` removes it",
                        k.index
                    );
                }
                let clear = if k.state == "off" {
                    "an idle kdamond, as `damo stop` leaves one: if nothing of yours \
                     needs it, `echo 0 > /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds` \
                     removes it"
                } else {
                    "it runs for another tool: stop that tool to free kernel DAMON"
                };
                format!(
                    "kdamond {} (state {}, pid {}) exists and was not created by udamon \
                     ({clear}); udamon never takes over a kdamond it did not create",
                    k.index,
                    k.state,
                    k.pid.map_or("-".into(), |p| p.to_string())
                )
            }));
            (!why.is_empty()).then(|| why.join("; "))
        }
        // Physical addresses need no pagemap translation.
        OpsChoice::Idle if phys => need(&["idle_page_bitmap"]),
        OpsChoice::Idle => need(&["idle_page_bitmap", "pagemap_pfn"]),
        OpsChoice::Softdirty => need(&["soft_dirty"]),
        OpsChoice::Auto => None,
    }
}

/// Picks the path: the one asked for, or the best available for `auto`.
fn choose(f: &Features, asked: OpsChoice, phys: bool) -> Result<(OpsChoice, String)> {
    if phys && asked == OpsChoice::Softdirty {
        return Err(UsageError(
            "--ops softdirty watches processes (soft-dirty bits live in page tables); \
             --paddr needs --ops kdamond or --ops idle"
                .into(),
        )
        .into());
    }
    if asked != OpsChoice::Auto {
        return match path_blocker(f, asked, phys) {
            None => Ok((asked, "asked for with --ops".into())),
            Some(why) => Err(CapabilityError(format!(
                "--ops {} is not available on this machine (kernel {}): {why}",
                asked.name(),
                f.kernel
            ))
            .into()),
        };
    }
    let mut why_not = Vec::new();
    let paths: &[OpsChoice] = if phys {
        &[OpsChoice::Kdamond, OpsChoice::Idle]
    } else {
        &[OpsChoice::Kdamond, OpsChoice::Idle, OpsChoice::Softdirty]
    };
    for &o in paths {
        match path_blocker(f, o, phys) {
            None => {
                let because = if why_not.is_empty() {
                    "the best path, available".to_string()
                } else {
                    format!("not {}", why_not.join(", not "))
                };
                return Ok((o, because));
            }
            Some(w) => why_not.push(format!("{} ({w})", o.name())),
        }
    }
    Err(CapabilityError(format!(
        "cannot monitor {} on this machine (kernel {}): no access-check primitive \
         is available. {}. Run `udamon features` for details; the simulator (--sim SPEC) \
         works everywhere",
        if phys {
            "physical memory"
        } else {
            "a live process"
        },
        f.kernel,
        paths
            .iter()
            .map(|&o| format!(
                "{}: {}",
                o.name(),
                path_blocker(f, o, phys).unwrap_or_default()
            ))
            .collect::<Vec<_>>()
            .join(". ")
    ))
    .into())
}

/// Checks that `pid` exists and that we may read its page map (the
/// kernel's ptrace access check).
fn check_target(root: &Path, pid: u32) -> Result<()> {
    let dir = root.join(format!("proc/{pid}"));
    if !dir.exists() {
        return Err(UsageError(format!(
            "process {pid} does not exist ({} is missing); give the pid of a running process",
            dir.display()
        ))
        .into());
    }
    let pm = dir.join("pagemap");
    if let Err(e) = std::fs::File::open(&pm) {
        return Err(CapabilityError(format!(
            "cannot monitor process {pid}: opening {} failed: {e}; reading another process's \
             memory needs the right to ptrace it (same user and kernel.yama.ptrace_scope \
             allowing it, or CAP_SYS_PTRACE; run as root)",
            pm.display()
        ))
        .into());
    }
    Ok(())
}

fn comm(root: &Path, pid: u32) -> String {
    std::fs::read(root.join(format!("proc/{pid}/cmdline")))
        .ok()
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("pid {pid}"))
}

/// `VmRSS` and `VmSwap` of a process, in kB.
pub fn rss_swap_kb(root: &Path, pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(s) = std::fs::read_to_string(root.join(format!("proc/{pid}/status"))) else {
        return (None, None);
    };
    (proc_field(&s, "VmRSS:"), proc_field(&s, "VmSwap:"))
}

/// CPU seconds (user + system: stat fields 14 and 15) of a thread or
/// process.
fn stat_cpu_s(root: &Path, pid: u32) -> Option<f64> {
    let ticks = udamon_proc::stat_field(root, pid, 14)? + udamon_proc::stat_field(root, pid, 15)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

fn self_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Kernel DAMON: the driver, and the tracefs session its snapshots come
/// from (else tried-regions snapshots of a `stat` scheme).
struct Kernel {
    driver: KdamonDriver,
    trace: Option<(TraceSession, Assembler)>,
}

/// What the next step of a live run gave.
enum Next {
    Snapshot(Snapshot),
    /// The process exec'd (at this time since the start, us); monitoring
    /// goes on over the new program, from fresh regions.
    Exec(u64),
    /// The run is over, and why (the summary's `ended_by`).
    End(&'static str),
}

/// Why a run that has produced nothing more ends now, if it does: a stop
/// request, the command udamon started exiting, or the duration passing on
/// the run's one clock.
fn end_now(started: Instant, deadline_us: Option<u64>) -> Option<&'static str> {
    if stop::requested() {
        Some("interrupted")
    } else if CHILD_EXITED.load(Ordering::SeqCst) {
        Some("target exited")
    } else if deadline_us.is_some_and(|d| started.elapsed() >= Duration::from_micros(d)) {
        Some("duration")
    } else {
        None
    }
}

impl Kernel {
    fn next(&mut self, started: Instant, deadline_us: Option<u64>) -> Result<Next> {
        let Some((session, asm)) = self.trace.as_mut() else {
            return Ok(match self.driver.next_snapshot()? {
                Some(s) => Next::Snapshot(s),
                None => Next::End(end_now(started, deadline_us).unwrap_or("duration")),
            });
        };
        let be = |e: std::io::Error| anyhow::anyhow!("reading the damon_aggregated trace: {e}");
        let mut last_state_check = Instant::now();
        loop {
            for line in session.read_lines().map_err(be)? {
                if let Some(ev) = parse_aggregated(&line) {
                    if let Some(s) = asm.push(ev) {
                        return Ok(Next::Snapshot(s));
                    }
                }
            }
            if let Some(why) = end_now(started, deadline_us) {
                return Ok(Next::End(why));
            }
            // The kernel turns the kdamond off once its target is gone.
            if last_state_check.elapsed() > Duration::from_millis(200) {
                last_state_check = Instant::now();
                if self.driver.state()? == "off" {
                    return Ok(Next::End("target exited"));
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

enum Live {
    Kernel(Box<Kernel>),
    /// The engine, and the wall-clock end of its last snapshot (us).
    Engine(Box<Engine<Paced<LiveOps>, Pcg64Mcg>>, u64),
}

impl Live {
    fn monitor(&mut self) -> &mut dyn Monitor {
        match self {
            Live::Kernel(k) => &mut k.driver,
            Live::Engine(e, _) => e.as_mut(),
        }
    }

    /// The schemes' statistics and state, as the backend reports them;
    /// kernel DAMON's figures are read back from sysfs, and what this
    /// kernel does not expose is named in `not_available`.
    fn schemes(&mut self, installed: &[Damos], kernel: &str) -> Result<Vec<SchemeReport>> {
        let k = match self {
            Live::Engine(e, _) => return Ok(scheme_reports(e.schemes())),
            Live::Kernel(k) => k,
        };
        let stats = k
            .driver
            .stats()
            .map_err(|e| anyhow::anyhow!("reading kernel DAMON's scheme statistics: {e}"))?;
        let extras = k.driver.scheme_extras().unwrap_or_default();
        Ok(stats
            .into_iter()
            .zip(installed)
            .enumerate()
            .map(|(index, (stats, s))| {
                let x = extras.get(index).cloned().unwrap_or_default();
                let mut na = vec!["active: kernel DAMON does not report watermark state".into()];
                if x.effective_bytes.is_none() {
                    na.push(format!(
                        "effective_quota_bytes: kernel {kernel} lacks quotas/effective_bytes (6.9)"
                    ));
                }
                if x.tried_bytes.is_none() {
                    na.push(format!(
                        "tried_regions_bytes: kernel {kernel} lacks tried_regions/total_bytes (6.6)"
                    ));
                }
                na.push("nr_tried_regions: read only with tried-regions snapshots".into());
                let has_goals = !s.quota.goals.is_empty();
                if has_goals && x.goal_values.is_none() {
                    na.push(format!(
                        "goal_values: kernel {kernel} lacks quotas/goals/N/current_value (6.8)"
                    ));
                }
                SchemeReport {
                    index,
                    action: s.action.name().to_string(),
                    description: udamon_scheme_file::describe(s),
                    stats,
                    // The kernel's 0 is "no quota".
                    effective_quota_bytes: x.effective_bytes.filter(|&b| b != 0),
                    nr_tried_regions: None,
                    tried_regions_bytes: x.tried_bytes,
                    active: None,
                    goal_values: x.goal_values.filter(|_| has_goals),
                    not_available: na,
                    would_apply_bytes: None,
                }
            })
            .collect())
    }

    /// One snapshot, or the end and why; the engine is stepped here so
    /// that a stop request or a vanished target is seen within one sample.
    fn next(
        &mut self,
        started: Instant,
        deadline_us: Option<u64>,
        stop_on_exec: bool,
    ) -> Result<Next> {
        match self {
            Live::Kernel(k) => k.next(started, deadline_us),
            Live::Engine(e, last_end_us) => loop {
                if let Some(why) = end_now(started, deadline_us) {
                    return Ok(Next::End(why));
                }
                if !e.ops().target_valid(0) {
                    return Ok(Next::End(e.ops().inner().ended()));
                }
                let snap = e.tick();
                if let Some(err) = e.ops_mut().inner_mut().take_error() {
                    if matches!(err, ProcError::PfnHidden { .. } | ProcError::Denied { .. }) {
                        return Err(CapabilityError(err.to_string()).into());
                    }
                    eprintln!("udamon: warning: {err}");
                }
                if e.ops_mut().inner_mut().take_execs() > 0 {
                    if stop_on_exec {
                        return Ok(Next::End("target exec'd"));
                    }
                    e.restart_target(0);
                    return Ok(Next::Exec(started.elapsed().as_micros() as u64));
                }
                // Watermark waits advance the logical clock without sampling:
                // keep the wall clock in step.
                let ahead = Duration::from_micros(e.now_us()).saturating_sub(started.elapsed());
                if !ahead.is_zero() {
                    std::thread::sleep(ahead);
                }
                if let Some(mut s) = snap {
                    // Live snapshots carry wall-clock times, as the kernel's
                    // tracepoint does: a sample takes its interval plus the
                    // work, so windows last longer than aggr_us.
                    let now = started.elapsed().as_micros() as u64;
                    s.start_us = *last_end_us;
                    s.end_us = now.max(*last_end_us);
                    *last_end_us = s.end_us;
                    return Ok(Next::Snapshot(s));
                }
            },
        }
    }
}

fn kdamond_pid(root: &Path) -> Option<u32> {
    std::fs::read_to_string(root.join("sys/kernel/mm/damon/admin/kdamonds/0/pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Runs a live monitor (with `run.schemes`, possibly none), writing a
/// record to `out`.
pub fn run_live(run: &LiveRun, out: Option<&Path>) -> Result<LiveSummary> {
    let features = probe(run.root);
    let phys = matches!(run.target, LiveTarget::Phys);
    let (ops, because) = choose(&features, run.ops, phys)?;
    // Soft-dirty bits see writes only: read-hot memory looks idle. `auto`
    // never falls back to that for schemes that act on memory; asking for
    // `--ops softdirty` by name accepts it.
    if run.ops == OpsChoice::Auto && ops == OpsChoice::Softdirty {
        if let Some((i, s)) = run
            .schemes
            .iter()
            .enumerate()
            .find(|(_, s)| s.action != udamon_core::schemes::Action::Stat)
        {
            return Err(CapabilityError(format!(
                "--ops auto would act with softdirty ({because}), which sees writes only: \
                 memory that is only read would look idle to scheme {i} ({}). Free a path \
                 that sees reads, or give --ops softdirty to accept write-only monitoring",
                s.action.name()
            ))
            .into());
        }
    }
    // (`choose` already refused kernel DAMON without the operations set the
    // target needs: it is one of the kdamond path's blockers.)
    if ops != OpsChoice::Kdamond {
        for (i, s) in run.schemes.iter().enumerate() {
            let why = if phys && s.action != udamon_core::schemes::Action::Stat {
                Some(format!(
                    "action {} on physical memory needs the kernel (--ops kdamond); \
                     user space can only watch it (stat)",
                    s.action.name()
                ))
            } else {
                unsupported_reason(s)
            };
            if let Some(why) = why {
                return Err(CapabilityError(format!("scheme {i}: {why}")).into());
            }
        }
    }
    stop::install();
    let mut child: Option<(u32, std::thread::JoinHandle<()>)> = None;
    let pid = match &run.target {
        LiveTarget::Phys => 0,
        LiveTarget::Pid(p) => *p,
        LiveTarget::Command(argv) => {
            let mut c = Command::new(&argv[0])
                .args(&argv[1..])
                .spawn()
                .map_err(|e| UsageError(format!("cannot start {:?}: {e}", argv[0])))?;
            let p = c.id();
            CHILD_EXITED.store(false, Ordering::SeqCst);
            // Reap the command as soon as it exits, so monitoring ends then.
            let reaper = std::thread::spawn(move || {
                let _ = c.wait();
                CHILD_EXITED.store(true, Ordering::SeqCst);
            });
            child = Some((p, reaper));
            p
        }
    };
    let result = monitor_pid(run, out, pid, ops, because, &features);
    if let Some((p, reaper)) = child {
        // udamon started the command, so udamon ends it when monitoring
        // stops before it exits (duration passed, Ctrl-C).
        end_child(p, &CHILD_EXITED, CHILD_GRACE);
        let _ = reaper.join();
    }
    result
}

/// How long a command udamon started has to exit after SIGTERM before it
/// gets SIGKILL.
const CHILD_GRACE: Duration = Duration::from_secs(5);

/// Ends a child that a reaper thread waits for (`exited` turns true when
/// it has reaped it): SIGTERM, then SIGKILL after `grace`.
fn end_child(pid: u32, exited: &AtomicBool, grace: Duration) {
    let signal = |sig| {
        if !exited.load(Ordering::SeqCst) {
            // SAFETY: kill has no memory effects. The reaper has not reaped
            // the child, so the pid is still the child's (a zombie's pid is
            // not reused).
            unsafe { libc::kill(pid as libc::pid_t, sig) };
        }
    };
    signal(libc::SIGTERM);
    let t = Instant::now();
    while !exited.load(Ordering::SeqCst) && t.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(libc::SIGKILL);
}

fn monitor_pid(
    run: &LiveRun,
    out: Option<&Path>,
    pid: u32,
    ops: OpsChoice,
    because: String,
    features: &Features,
) -> Result<LiveSummary> {
    let phys = pid == 0;
    let command = if phys {
        "physical memory".to_string()
    } else {
        check_target(run.root, pid)?;
        comm(run.root, pid)
    };
    let (rss_start_kb, _) = rss_swap_kb(run.root, pid);
    let ram = || system_ram(run.root).map_err(|e| CapabilityError(e.to_string()));
    let mut source = match ops {
        OpsChoice::Kdamond => "tracefs damon:damon_aggregated".to_string(),
        _ => "udamon engine".to_string(),
    };
    // Our kdamond's thread (kernel DAMON only), once it runs.
    let mut kpid = None;
    let mut live = match ops {
        OpsChoice::Kdamond => {
            let target = if phys {
                KTarget {
                    pid: None,
                    regions: ram()?,
                }
            } else {
                KTarget {
                    pid: Some(pid),
                    regions: Vec::new(),
                }
            };
            let mut schemes = run.schemes.clone();
            if run.dry_run {
                eprintln!(
                    "udamon: kernel DAMON has no dry run: the schemes run as stat, which counts \
                     what they try but not what they would apply"
                );
                for s in &mut schemes {
                    s.action = udamon_core::schemes::Action::Stat;
                }
            }
            let mut config = KdamonConfig {
                ops: if phys { OpsKind::Paddr } else { OpsKind::Vaddr },
                targets: vec![target],
                attrs: run.attrs,
                schemes,
                snapshots: true,
            };
            // The tracepoint first, so no aggregation is missed.
            let trace = match TraceSession::open(run.root) {
                Ok(t) => Some(t),
                Err(e) => {
                    source = format!("tried-regions snapshots (no tracefs: {e})");
                    None
                }
            };
            config.snapshots = trace.is_none();
            let mut d = KdamonDriver::new(run.root.to_path_buf(), config);
            d.claim_as(udamon_proc::start_time(Path::new("/"), std::process::id()));
            d.start().map_err(|e| {
                // A module enabled since the probe (the kernel then says
                // EBUSY): name it and the way out.
                let also: String = modules_holding_damon(&probe(run.root))
                    .map(|m| format!("; {m}"))
                    .collect();
                CapabilityError(format!("cannot start kernel DAMON: {e}{also}"))
            })?;
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
            let mut asm = Assembler::new(1, run.attrs.sample_us, run.attrs.aggr_us);
            // Events of other kdamonds (a DAMON module's) are not ours.
            kpid = kdamond_pid(run.root);
            asm.only_from(kpid);
            Live::Kernel(Box::new(Kernel {
                driver: d,
                trace: trace.map(|t| (t, asm)),
            }))
        }
        _ => {
            let mode = if ops == OpsChoice::Idle {
                AccessMode::IdlePage
            } else {
                AccessMode::SoftDirtyWriteOnly
            };
            let cannot = |e: ProcError| match e {
                ProcError::Gone { .. } => anyhow::Error::from(UsageError(e.to_string())),
                e => CapabilityError(e.to_string()).into(),
            };
            let p = if phys {
                LiveOps::Phys(PaddrOps::new(run.root).map_err(cannot)?)
            } else {
                LiveOps::Proc(ProcOps::new(run.root, &[pid], mode).map_err(cannot)?)
            };
            let seed = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let mut e = Engine::new(
                run.attrs,
                Paced::new(p),
                vec![Target::new(pid)],
                Pcg64Mcg::seed_from_u64(seed),
            )
            .map_err(|e| UsageError(format!("cannot monitor {command}: {e}")))?;
            e.set_schemes(run.schemes.clone());
            e.set_dry_run(run.dry_run);
            Live::Engine(Box::new(e), 0)
        }
    };
    live.monitor().set_deadline(run.duration_us);

    let header = Header {
        kind: ops.name().to_string(),
        targets: vec![TargetInfo {
            pid,
            label: command.clone(),
        }],
        params: serde_json::json!({
            "ops": ops.name(),
            "access": ops.access(),
            "write_only": ops == OpsChoice::Softdirty,
            "source": source,
            // Tried regions carry the kernel's moving sum, not a window's
            // count (see docs/record-format.md).
            "nr_accesses": if ops == OpsChoice::Kdamond && !source.starts_with("tracefs") {
                "moving_sum"
            } else {
                "window"
            },
            "kernel": features.kernel,
            "duration_us": run.duration_us,
            "schemes": udamon_scheme_file::to_json(&run.schemes),
        }),
        ..Header::new(ops.name(), run.attrs)
    };
    let mut writer = match out {
        Some(p) => Some(
            Writer::create(p, &header).with_context(|| format!("cannot write {}", p.display()))?,
        ),
        None => None,
    };
    let what = if phys {
        command.clone()
    } else {
        format!("pid {pid} ({command})")
    };
    eprintln!(
        "udamon: monitoring {what} with {} ({because}); sees {}; snapshots from {source}",
        ops.name(),
        ops.access()
    );
    if ops == OpsChoice::Softdirty {
        eprintln!(
            "udamon: warning: soft-dirty monitoring clears the whole process's soft-dirty bits \
             every sample (tools that rely on them, such as CRIU's incremental dumps, lose \
             them), and the process takes a fault on its first write to a page after each"
        );
    }
    let kstat = |k: Option<u32>| k.and_then(|k| stat_cpu_s(run.root, k));
    let kcpu0 = kstat(kpid);
    let started = Instant::now();
    let mut progress = run
        .duration_us
        .filter(|_| run.progress)
        .map(|d| Progress::new(d, "monitoring"));
    let (mut snapshots, mut regions) = (0u64, 0u64);
    let mut next_stats_us = 0;
    let mut last_flush = Instant::now();
    let mut gaps = Gaps::default();
    let mut execs = 0u64;
    let ended_by = loop {
        let s = match live.next(started, run.duration_us, run.stop_on_exec)? {
            Next::Snapshot(s) => s,
            Next::End(why) => break why,
            Next::Exec(at_us) => {
                execs += 1;
                let exe = std::fs::read_link(run.root.join(format!("proc/{pid}/exe")))
                    .map_or_else(|_| "?".into(), |p| p.display().to_string());
                eprintln!(
                    "udamon: pid {pid} exec'd {exe} at {:.1}s: monitoring the new program \
                     from fresh regions (--stop-on-exec ends the run instead)",
                    at_us as f64 / 1e6
                );
                if let Some(w) = writer.as_mut() {
                    w.push_json("exec", &serde_json::json!({ "at_us": at_us, "exe": exe }))?;
                }
                continue;
            }
        };
        snapshots += 1;
        regions += s.nr_regions() as u64;
        let gap = gaps.check(&s, run.attrs.aggr_us);
        if let Some(w) = writer.as_mut() {
            w.push_snapshot(&s)?;
            if let Some(g) = &gap {
                w.push_json("gap", g)?;
            }
            if !run.schemes.is_empty() && s.end_us >= next_stats_us {
                next_stats_us = s.end_us + 1_000_000;
                match live.schemes(&run.schemes, &features.kernel) {
                    Ok(reports) => {
                        let entry = serde_json::json!({ "end_us": s.end_us, "schemes": reports });
                        w.push_json("schemes", &entry)?;
                    }
                    Err(e) => eprintln!("udamon: warning: {e:#}"),
                }
            }
            // A run killed without warning loses at most about a second.
            if last_flush.elapsed() >= FLUSH_EVERY {
                w.flush_frame()?;
                last_flush = Instant::now();
            }
        }
        if let Some(p) = progress.as_mut() {
            p.set(s.end_us);
        }
    };
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    let schemes = if run.schemes.is_empty() {
        Vec::new()
    } else {
        live.schemes(&run.schemes, &features.kernel)
            .unwrap_or_else(|e| {
                eprintln!("udamon: warning: {e:#}; the summary has no scheme statistics");
                Vec::new()
            })
    };
    let kcpu1 = kstat(kpid);
    let (rss_end_kb, swap_end_kb) = rss_swap_kb(run.root, pid);
    if let Live::Kernel(k) = &mut live {
        k.trace = None;
        k.driver
            .stop()
            .map_err(|e| anyhow::anyhow!("stopping kernel DAMON: {e}"))?;
        stop::on_force(None);
    }
    // udamon's whole run, set-up and tear-down included.
    let (cpu, wall) = (self_cpu_s(), crate::output::since_start().as_secs_f64());
    let mut summary = LiveSummary {
        output: out.map(|p| p.display().to_string()),
        pid,
        command,
        ops,
        chosen_because: because,
        access: ops.access(),
        source,
        kernel: features.kernel.clone(),
        monitored_s: elapsed,
        snapshots,
        avg_nr_regions: if snapshots > 0 {
            regions as f64 / snapshots as f64
        } else {
            0.0
        },
        udamon_cpu_s: cpu,
        udamon_cpu_s_per_s: cpu / wall.max(1e-9),
        kdamond_cpu_s_per_s: kcpu0.zip(kcpu1).map(|(a, b)| (b - a) / elapsed),
        rss_start_kb,
        rss_end_kb,
        swap_end_kb,
        ended_by: ended_by.into(),
        execs,
        gaps: gaps.count,
        longest_gap_s: gaps.longest_us as f64 / 1e6,
        record_bytes: 0,
        schemes,
    };
    if gaps.count > 0 {
        eprintln!(
            "udamon: warning: {} gap(s) in the aggregations, the longest {:.1}s: no snapshot \
             covers those times as one window (the record marks each)",
            gaps.count,
            gaps.longest_us as f64 / 1e6
        );
    }
    if let Some(mut w) = writer {
        if !summary.schemes.is_empty() {
            w.push_json(
                "schemes",
                &serde_json::json!({ "end_us": (elapsed * 1e6) as u64, "schemes": summary.schemes }),
            )?;
        }
        // The file's size is known only once it is written: the stored
        // summary leaves it out rather than say 0.
        let mut stored = serde_json::to_value(&summary)?;
        if let Some(m) = stored.as_object_mut() {
            m.remove("record_bytes");
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

/// The one-paragraph human summary of a live run.
pub fn print_summary(s: &LiveSummary) {
    let kb = |v: Option<u64>| v.map_or("?".into(), |k| udamon_report::fmt_bytes(k * 1024));
    let what = if s.pid == 0 {
        s.command.clone()
    } else {
        format!("pid {} ({})", s.pid, s.command)
    };
    println!(
        "monitored {what} with {} for {:.1}s ({}): {} snapshots, {:.0} regions on average",
        s.ops.name(),
        s.monitored_s,
        s.ended_by,
        s.snapshots,
        s.avg_nr_regions
    );
    println!(
        "  access checks see {}; snapshots from {}",
        s.access, s.source
    );
    print!(
        "  udamon CPU: {:.4} s per second of monitoring",
        s.udamon_cpu_s_per_s
    );
    match s.kdamond_cpu_s_per_s {
        Some(k) => println!("; kdamond: {k:.4} s/s"),
        None => println!(),
    }
    if s.rss_start_kb.is_some() || s.rss_end_kb.is_some() {
        println!(
            "  target RSS {} -> {}; swap {}",
            kb(s.rss_start_kb),
            kb(s.rss_end_kb),
            kb(s.swap_end_kb)
        );
    }
    if let Some(o) = &s.output {
        println!("wrote {o} ({})", udamon_report::fmt_bytes(s.record_bytes));
    }
}

/// Runs the live target that `--pid`, `--paddr` or `-- CMD` names (the
/// hidden `--root` points /proc and /sys at a fake tree in tests).
pub fn run_from_args(
    a: &LiveArgs,
    attrs: Attrs,
    schemes: Vec<Damos>,
    dry_run: bool,
    duration_us: Option<u64>,
    progress: bool,
    out: Option<&Path>,
) -> Result<LiveSummary> {
    let target = if a.paddr {
        LiveTarget::Phys
    } else {
        match (a.pid, a.command.is_empty()) {
            (Some(p), _) => LiveTarget::Pid(p),
            (None, false) => LiveTarget::Command(a.command.clone()),
            (None, true) => {
                return Err(
                    UsageError("give --sim SPEC, --pid PID, --paddr or -- CMD ARGS".into()).into(),
                )
            }
        }
    };
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
    };
    run_live(&run, out)
}

/// `--ops` names a live path, which `--sim` does not take; `what` says what
/// the live path does ("watches", "acts on").
pub fn refuse_ops_with_sim(ops: OpsChoice, what: &str) -> Result<()> {
    if ops == OpsChoice::Auto {
        return Ok(());
    }
    Err(UsageError(format!(
        "--ops {} {what} a live process (--pid or -- CMD); --sim runs the simulator",
        ops.name()
    ))
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(start_us: u64, end_us: u64) -> Snapshot {
        Snapshot {
            start_us,
            end_us,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: Vec::new(),
        }
    }

    /// A window far longer than the aggregation interval is a gap; a slow
    /// one (a busy machine: about twice the interval) is not.
    #[test]
    fn gaps_are_long_stalls_only() {
        let mut g = Gaps::default();
        assert!(g.check(&window(0, 190_000), 100_000).is_none());
        assert!(g.check(&window(0, 1_000_000), 100_000).is_none());
        let e = g.check(&window(1_000_000, 31_000_000), 100_000).unwrap();
        assert_eq!(e["expected_us"], 100_000);
        assert!(g.check(&window(0, 2_500_000), 1_000_000).is_none());
        assert!(g.check(&window(0, 3_000_000), 1_000_000).is_some());
        assert_eq!((g.count, g.longest_us), (2, 30_000_000));
    }

    /// A command that ignores SIGTERM is killed after the grace period.
    #[test]
    fn a_child_that_ignores_sigterm_is_killed() {
        let mut c = Command::new("sh")
            .args(["-c", "trap '' TERM; while :; do sleep 0.05; done"])
            .spawn()
            .unwrap();
        let pid = c.id();
        let exited = std::sync::Arc::new(AtomicBool::new(false));
        let e = std::sync::Arc::clone(&exited);
        let reaper = std::thread::spawn(move || {
            let st = c.wait().unwrap();
            e.store(true, Ordering::SeqCst);
            st
        });
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        end_child(pid, &exited, Duration::from_millis(300));
        let st = reaper.join().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(libc::SIGKILL));
        assert!(t.elapsed() >= Duration::from_millis(300));
    }
}
