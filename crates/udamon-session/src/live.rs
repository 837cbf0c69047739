//! [`Session`]: kernel DAMON through sysfs (`kdamond`), our engine over
//! `/proc` primitives paced by the real clock (`idle`, `softdirty`), or our
//! engine over the simulator (paced at a chosen speed, or as fast as it
//! goes).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use udamon_core::schemes::{Action, Damos};
use udamon_core::softdirty::SoftDirtyReset;
use udamon_core::{Attrs, Engine, Mode, Monitor, Operations, Snapshot, Target};
use udamon_kdamon::trace::{parse_aggregated, Assembler, TraceSession};
use udamon_kdamon::{KTarget, KdamonConfig, KdamonDriver, OpsKind};
use udamon_proc::{
    proc_field, system_ram, unsupported_reason, AccessMode, Paced, PaddrOps, ProcOps,
};
use udamon_record::{Header, SimInfo, TargetInfo};
use udamon_sim::{MonitorKind, SimOps};

use crate::features::{probe, Features};
use crate::schemes::{scheme_reports, SchemeReport};
use crate::sim;
use crate::Error;

type Result<T> = std::result::Result<T, Error>;

/// How a live process is monitored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// Whether a run with this choice may end up on the soft-dirty path
    /// (`phys`: it watches physical memory, which soft-dirty cannot).
    pub fn may_take_softdirty(self, phys: bool) -> bool {
        !phys && matches!(self, OpsChoice::Auto | OpsChoice::Softdirty)
    }

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
    /// Started by udamon, followed until it exits, ended when the session
    /// ends first.
    Command(Vec<String>),
    /// The physical address space (System RAM).
    Phys,
    /// The memory of one NUMA node (its physical addresses).
    Node(u32),
    /// A simulated workload (a spec's text), run `speed` times faster
    /// than real time, or as fast as it goes when `speed` is `None`.
    Sim {
        spec_text: String,
        origin: String,
        seed: Option<u64>,
        speed: Option<f64>,
    },
}

/// A session to start.
#[derive(Clone, Debug)]
pub struct Spec {
    pub target: LiveTarget,
    pub ops: OpsChoice,
    /// "/" in production; a fake tree in tests.
    pub root: PathBuf,
    pub attrs: Attrs,
    pub schemes: Vec<Damos>,
    /// Perform no action: our engine counts what would have been done;
    /// kernel DAMON, which has no dry run, runs the schemes as `stat`.
    pub dry_run: bool,
    /// End after this long (us; the simulator's time for a simulation).
    pub duration_us: Option<u64>,
    /// End the session when the process execs (default: follow the new
    /// program).
    pub stop_on_exec: bool,
    /// When the soft-dirty path resets the bits (other paths ignore it).
    pub softdirty_reset: SoftDirtyReset,
    /// Where warnings go.
    pub warn: crate::Warner,
}

/// What a session watches and how, fixed at its start.
#[derive(Clone, Debug, Serialize)]
pub struct SessionInfo {
    /// 0 for physical memory and simulations.
    pub pid: u32,
    /// The process's command line, "physical memory", or the workload's
    /// name.
    pub command: String,
    pub ops: OpsChoice,
    /// "kdamond", "idle", "softdirty" or "sim".
    pub path: &'static str,
    /// Why `--ops auto` picked this path.
    pub chosen_because: String,
    pub access: &'static str,
    /// Where snapshots come from.
    pub source: String,
    pub kernel: String,
}

/// What the next step of a session gave.
#[derive(Debug)]
pub enum Event {
    Snapshot(Snapshot),
    /// The process exec'd (at this time since the start, us, running
    /// `exe`); monitoring goes on over the new program, from fresh
    /// regions.
    Exec {
        at_us: u64,
        exe: String,
    },
    /// The session is over, and why: "duration", "target exited", "target
    /// replaced" (its pid names another process now), "target exec'd"
    /// (with `stop_on_exec`), "interrupted".
    End(&'static str),
}

/// The operations under our engine: a process's virtual space or the
/// physical one.
#[derive(Debug)]
enum LiveOps {
    Proc(ProcOps),
    Phys(PaddrOps),
}

impl LiveOps {
    fn take_error(&mut self) -> Option<udamon_proc::Error> {
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
    fn resident_ranges(
        &mut self,
        idx: usize,
        r: &[udamon_core::AddrRange],
    ) -> Option<Vec<udamon_core::AddrRange>> {
        delegate!(self, o => o.resident_ranges(idx, r))
    }
    fn prepare_access_checks(&mut self, t: &[Target], w: udamon_core::SampleWindow) {
        delegate!(self, o => o.prepare_access_checks(t, w))
    }
    fn check_accesses(&mut self, t: &[Target], w: udamon_core::SampleWindow, a: &mut Vec<bool>) {
        delegate!(self, o => o.check_accesses(t, w, a))
    }
    fn end_window(&mut self, c: &mut [u32]) {
        delegate!(self, o => o.end_window(c))
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
pub fn path_blocker(f: &Features, ops: OpsChoice, phys: bool) -> Option<String> {
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
pub fn choose(
    f: &Features,
    asked: OpsChoice,
    phys: bool,
    mode: Mode,
) -> Result<(OpsChoice, String)> {
    let enhanced = mode == Mode::Enhanced;
    if enhanced && asked == OpsChoice::Kdamond {
        return Err(Error::Usage(
            "--mode enhanced runs udamon's own engine, and kernel DAMON (--ops kdamond) adapts \
             its regions itself: give --ops idle or --ops softdirty (or auto), or --mode kernel"
                .into(),
        ));
    }
    if phys && asked == OpsChoice::Softdirty {
        return Err(Error::Usage(
            "--ops softdirty watches processes (soft-dirty bits live in page tables); \
             --paddr needs --ops kdamond or --ops idle"
                .into(),
        ));
    }
    if asked != OpsChoice::Auto {
        return match path_blocker(f, asked, phys) {
            None => Ok((asked, "asked for with --ops".into())),
            Some(why) => Err(Error::Capability(format!(
                "--ops {} is not available on this machine (kernel {}): {why}",
                asked.name(),
                f.kernel
            ))),
        };
    }
    let mut why_not = Vec::new();
    let paths: &[OpsChoice] = match (phys, enhanced) {
        (true, false) => &[OpsChoice::Kdamond, OpsChoice::Idle],
        (false, false) => &[OpsChoice::Kdamond, OpsChoice::Idle, OpsChoice::Softdirty],
        // kernel DAMON adapts its own regions
        (true, true) => &[OpsChoice::Idle],
        (false, true) => &[OpsChoice::Idle, OpsChoice::Softdirty],
    };
    if enhanced {
        why_not.push("kdamond (--mode enhanced runs udamon's engine)".to_string());
    }
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
    Err(Error::Capability(format!(
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
    )))
}

/// Checks that `pid` exists and that we may read its page map (the
/// kernel's ptrace access check).
fn check_target(root: &Path, pid: u32) -> Result<()> {
    let dir = root.join(format!("proc/{pid}"));
    if !dir.exists() {
        return Err(Error::Usage(format!(
            "process {pid} does not exist ({} is missing); give the pid of a running process",
            dir.display()
        )));
    }
    let pm = dir.join("pagemap");
    if let Err(e) = std::fs::File::open(&pm) {
        return Err(Error::Capability(format!(
            "cannot monitor process {pid}: opening {} failed: {e}; reading another process's \
             memory needs the right to ptrace it (same user and kernel.yama.ptrace_scope \
             allowing it, or CAP_SYS_PTRACE; run as root)",
            pm.display()
        )));
    }
    Ok(())
}

/// A process's command line, its words joined by spaces.
pub fn cmdline(root: &Path, pid: u32) -> Option<String> {
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
pub fn stat_cpu_s(root: &Path, pid: u32) -> Option<f64> {
    let st = udamon_proc::ProcStat::read(root, pid)?;
    let ticks = st.field(14)? + st.field(15)?;
    Some(ticks as f64 / udamon_proc::clock_ticks_per_s())
}

/// The pid of kdamond 0's thread, when it runs.
pub fn kdamond_pid(root: &Path) -> Option<u32> {
    std::fs::read_to_string(root.join("sys/kernel/mm/damon/admin/kdamonds/0/pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Kernel DAMON: the driver, and the tracefs session its snapshots come
/// from (else tried-regions snapshots of a `stat` scheme).
struct Kernel {
    driver: KdamonDriver,
    trace: Option<(TraceSession, Assembler)>,
    /// What it monitors (kept for online commits).
    targets: Vec<KTarget>,
    /// The kdamond's thread, once it runs.
    pid: Option<u32>,
    /// Snapshots assembled from trace lines read after the one a call
    /// returned, for the next calls.
    ready: std::collections::VecDeque<Snapshot>,
    /// Whether the trace pipe may hold lines not read yet (false after a
    /// read emptied it, until poll(2) says otherwise).
    unread: bool,
}

/// A command udamon started: its pid, and whether it exited (and was
/// reaped: a zombie would still look alive to kernel DAMON and to /proc).
struct Child {
    pid: u32,
    exited: Arc<AtomicBool>,
    reaper: std::thread::JoinHandle<()>,
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

/// A simulated workload under our engine.
struct Sim {
    engine: Engine<SimOps, Pcg64Mcg>,
    /// Simulated seconds per wall second; `None`: as fast as it goes.
    speed: Option<f64>,
    spec_text: String,
    seed: u64,
}

enum Live {
    Kernel(Box<Kernel>),
    /// The engine, and the wall-clock end of its last snapshot (us).
    Engine(Box<Engine<Paced<LiveOps>, Pcg64Mcg>>, u64),
    /// The engine over the simulator.
    Sim(Box<Sim>),
}

/// One monitoring session. Start it with [`Session::start`], step it with
/// [`Session::next`] until [`Event::End`], then [`Session::finish`] it (a
/// session dropped without `finish` still removes its kdamond and ends
/// the command it started).
pub struct Session {
    live: Live,
    info: SessionInfo,
    root: PathBuf,
    attrs: Attrs,
    /// The schemes as given (before a dry run turns kernel ones into stat).
    schemes: Vec<Damos>,
    dry_run: bool,
    stop_on_exec: bool,
    deadline_us: Option<u64>,
    started: Instant,
    child: Option<Child>,
    kcpu0: Option<f64>,
    rss_start_kb: Option<u64>,
    finished: bool,
    warn: crate::Warner,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Why the session ends now, if it does: a stop request, the command it
/// started exiting, or the duration passing on its one clock.
fn end_now(
    stop: &dyn Fn() -> bool,
    child: Option<&Child>,
    started: Instant,
    deadline_us: Option<u64>,
) -> Option<&'static str> {
    if stop() {
        Some("interrupted")
    } else if child.is_some_and(|c| c.exited.load(Ordering::SeqCst)) {
        Some("target exited")
    } else if deadline_us.is_some_and(|d| started.elapsed() >= Duration::from_micros(d)) {
        Some("duration")
    } else {
        None
    }
}

/// The schemes kernel DAMON runs for a dry run: all as `stat`.
fn kernel_schemes(schemes: &[Damos], dry_run: bool) -> Vec<Damos> {
    let mut schemes = schemes.to_vec();
    if dry_run {
        for s in &mut schemes {
            s.action = Action::Stat;
        }
    }
    schemes
}

/// Refuses schemes the chosen path cannot run: physical memory acted on
/// from user space, actions user space lacks, and `auto` falling back to
/// write-only monitoring for schemes that act.
fn check_schemes(
    schemes: &[Damos],
    asked: OpsChoice,
    ops: OpsChoice,
    because: &str,
    phys: bool,
) -> Result<()> {
    // Soft-dirty bits see writes only: read-hot memory looks idle. `auto`
    // never falls back to that for schemes that act on memory; asking for
    // `--ops softdirty` by name accepts it.
    if asked == OpsChoice::Auto && ops == OpsChoice::Softdirty {
        if let Some((i, s)) = schemes
            .iter()
            .enumerate()
            .find(|(_, s)| s.action != Action::Stat)
        {
            return Err(Error::Capability(format!(
                "--ops auto would act with softdirty ({because}), which sees writes only: \
                 memory that is only read would look idle to scheme {i} ({}). Free a path \
                 that sees reads, or give --ops softdirty to accept write-only monitoring",
                s.action.name()
            )));
        }
    }
    // (`choose` already refused kernel DAMON without the operations set the
    // target needs: it is one of the kdamond path's blockers.)
    if ops != OpsChoice::Kdamond {
        for (i, s) in schemes.iter().enumerate() {
            let why = if phys && s.action != Action::Stat {
                Some(format!(
                    "action {} on physical memory needs the kernel (--ops kdamond); \
                     user space can only watch it (stat)",
                    s.action.name()
                ))
            } else {
                unsupported_reason(s)
            };
            if let Some(why) = why {
                return Err(Error::Capability(format!("scheme {i}: {why}")));
            }
        }
    }
    Ok(())
}

/// The path `spec` would take on this machine and why, without starting
/// anything (what `udamon run --check` shows).
pub fn plan(spec: &Spec, features: &Features) -> Result<(&'static str, String)> {
    if let LiveTarget::Sim { .. } = spec.target {
        return Ok(("sim", "a simulated workload runs on udamon's engine".into()));
    }
    let phys = matches!(spec.target, LiveTarget::Phys | LiveTarget::Node(_));
    let (ops, because) = choose(features, spec.ops, phys, spec.attrs.mode)?;
    check_schemes(&spec.schemes, spec.ops, ops, &because, phys)?;
    Ok((ops.name(), because))
}

/// Kernel DAMON on `pid` (0: physical memory, or NUMA `node`'s): the
/// kdamond started, its tracepoint opened first; with where its snapshots
/// come from.
fn start_kernel(spec: &Spec, pid: u32, node: Option<u32>) -> Result<(Live, String)> {
    let root = spec.root.as_path();
    let phys = pid == 0;
    let ram = || {
        match node {
            Some(n) => udamon_proc::node_ram(root, n),
            None => system_ram(root),
        }
        .map_err(|e| Error::Capability(e.to_string()))
    };
    let mut source = "tracefs damon:damon_aggregated".to_string();
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
    if spec.dry_run {
        spec.warn.warn(
            "kernel DAMON has no dry run: the schemes run as stat, which counts \
             what they try but not what they would apply",
        );
    }
    let mut config = KdamonConfig {
        ops: if phys { OpsKind::Paddr } else { OpsKind::Vaddr },
        targets: vec![target.clone()],
        attrs: spec.attrs,
        schemes: kernel_schemes(&spec.schemes, spec.dry_run),
        snapshots: true,
    };
    // The tracepoint first, so no aggregation is missed.
    let trace = match TraceSession::open(root) {
        Ok(t) => Some(t),
        Err(e) => {
            source = format!("tried-regions snapshots (no tracefs: {e})");
            None
        }
    };
    config.snapshots = trace.is_none();
    let mut d = KdamonDriver::new(root.to_path_buf(), config);
    d.claim_as(udamon_proc::start_time(Path::new("/"), std::process::id()));
    d.start().map_err(|e| {
        // A module enabled since the probe (the kernel then says
        // EBUSY): name it and the way out.
        let also: String = modules_holding_damon(&probe(root))
            .map(|m| format!("; {m}"))
            .collect();
        Error::Capability(format!("cannot start kernel DAMON: {e}{also}"))
    })?;
    let mut asm = Assembler::new(1, spec.attrs.sample_us, spec.attrs.aggr_us);
    // Events of other kdamonds (a DAMON module's) are not ours.
    let kpid = kdamond_pid(root);
    asm.only_from(kpid);
    let live = Live::Kernel(Box::new(Kernel {
        driver: d,
        trace: trace.map(|t| (t, asm)),
        targets: vec![target],
        pid: kpid,
        ready: Default::default(),
        unread: true,
    }));
    Ok((live, source))
}

/// udamon's engine on `pid` (0: physical memory, or NUMA `node`'s) over
/// /proc, through the idle page bitmap or soft-dirty (`ops`); `command`
/// names the target.
fn start_engine(
    spec: &Spec,
    pid: u32,
    node: Option<u32>,
    ops: OpsChoice,
    command: &str,
) -> Result<Live> {
    let root = spec.root.as_path();
    let phys = pid == 0;
    let mode = if ops == OpsChoice::Idle {
        AccessMode::IdlePage
    } else {
        AccessMode::SoftDirtyWriteOnly
    };
    let cannot = |e: udamon_proc::Error| match e {
        udamon_proc::Error::Gone { .. } => Error::Usage(e.to_string()),
        e => Error::Capability(e.to_string()),
    };
    let p = if phys {
        LiveOps::Phys(PaddrOps::with_node(root, node).map_err(cannot)?)
    } else {
        let mut o = ProcOps::new(root, &[pid], mode).map_err(cannot)?;
        o.set_soft_dirty_reset(spec.softdirty_reset);
        LiveOps::Proc(o)
    };
    let mut e = Engine::new(
        spec.attrs,
        Paced::new(p),
        vec![Target::new(pid)],
        Pcg64Mcg::seed_from_u64(seed_from_clock()),
    )
    .map_err(|e| Error::Usage(format!("cannot monitor {command}: {e}")))?;
    if spec.attrs.mode == Mode::Enhanced {
        match e.ops().inner() {
            LiveOps::Proc(o) if o.residency_unavailable() => spec.warn.warn(
                "--mode enhanced: this kernel has no PAGEMAP_SCAN (Linux 6.7+), so \
                 regions cover whole mappings, as kernel DAMON's do; windows that \
                 move are still followed",
            ),
            LiveOps::Phys(_) => spec.warn.warn(
                "--mode enhanced on physical memory follows windows that move; \
                 it does not leave free memory out (processes only)",
            ),
            _ => {}
        }
    }
    e.set_schemes(spec.schemes.clone());
    e.set_dry_run(spec.dry_run);
    Ok(Live::Engine(Box::new(e), 0))
}

/// What soft-dirty monitoring does to the process, said before it starts.
fn warn_softdirty(spec: &Spec) {
    let when = match spec.softdirty_reset {
        SoftDirtyReset::Sample => "every sample".to_string(),
        SoftDirtyReset::Windows(1) => "every aggregation window".to_string(),
        SoftDirtyReset::Windows(n) => format!("every {n} aggregation windows"),
        SoftDirtyReset::Auto => {
            "every aggregation window or less often (--softdirty-reset auto)".to_string()
        }
    };
    spec.warn.warn(&format!(
        "soft-dirty monitoring clears the whole process's soft-dirty bits {when} \
         (tools that rely on them, such as CRIU's incremental dumps, lose them), and the \
         process takes a fault on its first write to a page after each"
    ));
}

fn seed_from_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Session {
    /// Picks the path (probing this machine, under `spec.root`), refuses
    /// what it cannot run, starts the command for [`LiveTarget::Command`],
    /// and sets up the monitor. Warnings (soft-dirty's side effects,
    /// kernel DAMON's lack of a dry run) go to stderr.
    pub fn start(spec: &Spec) -> Result<Session> {
        if let LiveTarget::Sim {
            spec_text,
            origin,
            seed,
            speed,
        } = &spec.target
        {
            return Self::start_sim(spec, spec_text, origin, *seed, *speed);
        }
        let features = probe(&spec.root);
        let phys = matches!(spec.target, LiveTarget::Phys | LiveTarget::Node(_));
        let (ops, because) = choose(&features, spec.ops, phys, spec.attrs.mode)?;
        check_schemes(&spec.schemes, spec.ops, ops, &because, phys)?;
        let child = match &spec.target {
            LiveTarget::Command(argv) => {
                let mut c = Command::new(&argv[0])
                    .args(&argv[1..])
                    .spawn()
                    .map_err(|e| Error::Usage(format!("cannot start {:?}: {e}", argv[0])))?;
                let exited = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&exited);
                // Reap the command as soon as it exits, so monitoring ends then.
                let pid = c.id();
                let reaper = std::thread::spawn(move || {
                    let _ = c.wait();
                    flag.store(true, Ordering::SeqCst);
                });
                Some(Child {
                    pid,
                    exited,
                    reaper,
                })
            }
            _ => None,
        };
        let pid = match (&spec.target, &child) {
            (LiveTarget::Pid(p), _) => *p,
            (_, Some(c)) => c.pid,
            _ => 0,
        };
        let node = match spec.target {
            LiveTarget::Node(n) => Some(n),
            _ => None,
        };
        match Self::start_live(spec, pid, node, ops, because, &features) {
            Ok(mut s) => {
                s.child = child;
                Ok(s)
            }
            Err(e) => {
                if let Some(c) = child {
                    end_child(c.pid, &c.exited, CHILD_GRACE);
                    let _ = c.reaper.join();
                }
                Err(e)
            }
        }
    }

    fn start_sim(
        spec: &Spec,
        text: &str,
        origin: &str,
        seed: Option<u64>,
        speed: Option<f64>,
    ) -> Result<Session> {
        if spec.ops != OpsChoice::Auto {
            return Err(Error::Usage(format!(
                "ops = \"{}\" names a live path; a simulated workload runs on udamon's engine",
                spec.ops.name()
            )));
        }
        if speed.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
            return Err(Error::Usage(format!(
                "speed {} for {origin}: give a positive number (1 is real time, 60 a simulated \
                 minute per second)",
                speed.unwrap_or_default()
            )));
        }
        let usage = |e: &dyn std::fmt::Display| Error::Usage(e.to_string());
        let prepared = sim::Prepared::from_spec(text, origin, seed, None).map_err(|e| usage(&e))?;
        let setup = sim::Setup {
            schemes: spec.schemes.clone(),
            dry_run: spec.dry_run,
            softdirty_reset: spec.softdirty_reset,
            ..sim::Setup::adaptive(spec.attrs)
        };
        let e = sim::engine(&prepared, &setup).map_err(|e| usage(&e))?;
        let (seed, name) = (prepared.seed, prepared.workload().name.clone());
        Ok(Session {
            live: Live::Sim(Box::new(Sim {
                engine: e,
                speed,
                spec_text: text.to_string(),
                seed,
            })),
            info: SessionInfo {
                pid: 0,
                command: name,
                ops: OpsChoice::Auto,
                path: "sim",
                chosen_because: "a simulated workload runs on udamon's engine".into(),
                access: "reads and writes (the simulator's truth, sampled)",
                source: "udamon engine over the simulator".into(),
                kernel: String::new(),
            },
            root: spec.root.clone(),
            attrs: spec.attrs,
            schemes: spec.schemes.clone(),
            dry_run: spec.dry_run,
            stop_on_exec: false,
            // Simulated time.
            deadline_us: spec.duration_us,
            started: Instant::now(),
            child: None,
            kcpu0: None,
            rss_start_kb: None,
            finished: false,
            warn: spec.warn.clone(),
        })
    }

    fn start_live(
        spec: &Spec,
        pid: u32,
        node: Option<u32>,
        ops: OpsChoice,
        because: String,
        features: &Features,
    ) -> Result<Session> {
        let root = spec.root.as_path();
        let phys = pid == 0;
        let command = if let Some(n) = node {
            format!("NUMA node {n}'s memory")
        } else if phys {
            "physical memory".to_string()
        } else {
            check_target(root, pid)?;
            cmdline(root, pid).unwrap_or_else(|| format!("pid {pid}"))
        };
        let rss_start_kb = rss_swap_kb(root, pid).0;
        let (live, source) = match ops {
            OpsChoice::Kdamond => start_kernel(spec, pid, node)?,
            _ => (
                start_engine(spec, pid, node, ops, &command)?,
                "udamon engine".to_string(),
            ),
        };
        if ops == OpsChoice::Softdirty {
            warn_softdirty(spec);
        }
        let mut s = Session {
            live,
            info: SessionInfo {
                pid,
                command,
                ops,
                path: ops.name(),
                chosen_because: because,
                access: ops.access(),
                source,
                kernel: features.kernel.clone(),
            },
            root: root.to_path_buf(),
            attrs: spec.attrs,
            schemes: spec.schemes.clone(),
            dry_run: spec.dry_run,
            stop_on_exec: spec.stop_on_exec,
            deadline_us: spec.duration_us,
            started: Instant::now(),
            child: None,
            kcpu0: None,
            rss_start_kb,
            finished: false,
            warn: spec.warn.clone(),
        };
        s.monitor().set_deadline(spec.duration_us);
        s.kcpu0 = s.kdamond_pid().and_then(|k| stat_cpu_s(root, k));
        Ok(s)
    }

    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// Where this session's warnings go.
    pub fn warner(&self) -> &crate::Warner {
        &self.warn
    }

    /// The attributes committed last (the intervals as given; see
    /// [`intervals`](Self::intervals) for tuned ones).
    pub fn attrs(&self) -> Attrs {
        self.attrs
    }

    /// The schemes as given.
    pub fn installed_schemes(&self) -> &[Damos] {
        &self.schemes
    }

    /// The wall time since the session started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Our kdamond's thread (kernel DAMON only).
    pub fn kdamond_pid(&self) -> Option<u32> {
        match &self.live {
            Live::Kernel(k) => k.pid,
            _ => None,
        }
    }

    /// The kdamond thread's CPU seconds since the start (kernel DAMON
    /// only).
    pub fn kdamond_cpu_s(&self) -> Option<f64> {
        let now = stat_cpu_s(&self.root, self.kdamond_pid()?)?;
        Some(now - self.kcpu0?)
    }

    /// How the soft-dirty path reset the bits so far (our engine in
    /// soft-dirty mode only).
    pub fn soft_dirty_stats(&self) -> Option<udamon_proc::SoftDirtyStats> {
        match &self.live {
            Live::Engine(e, _) => match e.ops().inner() {
                LiveOps::Proc(o) => o.soft_dirty_stats(),
                LiveOps::Phys(_) => None,
            },
            _ => None,
        }
    }

    /// The target's resident set at the start (kB).
    pub fn rss_start_kb(&self) -> Option<u64> {
        self.rss_start_kb
    }

    /// The record header for this session.
    pub fn header(&self) -> Header {
        let i = &self.info;
        if let Live::Sim(sim) = &self.live {
            return Header {
                kind: "sim".into(),
                targets: vec![TargetInfo {
                    pid: 0,
                    label: i.command.clone(),
                }],
                sim: Some(SimInfo {
                    spec_toml: sim.spec_text.clone(),
                    seed: sim.seed,
                    monitor: MonitorKind::adaptive(self.attrs.mode).label(),
                }),
                params: serde_json::json!({
                    "nr_accesses": "window",
                    "schemes": udamon_scheme_file::to_json(&self.schemes),
                }),
                ..Header::new("sim", self.attrs)
            };
        }
        Header {
            kind: i.ops.name().to_string(),
            targets: vec![TargetInfo {
                pid: i.pid,
                label: i.command.clone(),
            }],
            params: serde_json::json!({
                "ops": i.ops.name(),
                "access": i.access,
                "write_only": i.ops == OpsChoice::Softdirty,
                "source": i.source,
                // Tried regions carry the kernel's moving sum, not a window's
                // count (see docs/record-format.md).
                "nr_accesses": if i.ops == OpsChoice::Kdamond && !i.source.starts_with("tracefs") {
                    "moving_sum"
                } else {
                    "window"
                },
                "kernel": i.kernel,
                "duration_us": self.deadline_us,
                "schemes": udamon_scheme_file::to_json(&self.schemes),
            }),
            ..Header::new(i.ops.name(), self.attrs)
        }
    }

    fn monitor(&mut self) -> &mut dyn Monitor {
        match &mut self.live {
            Live::Kernel(k) => &mut k.driver,
            Live::Engine(e, _) => e.as_mut(),
            Live::Sim(sim) => &mut sim.engine,
        }
    }

    /// The sampling and aggregation intervals in use (us): the tuned ones
    /// when interval auto-tuning runs and the path can tell.
    pub fn intervals(&mut self) -> (u64, u64) {
        let given = (self.attrs.sample_us, self.attrs.aggr_us);
        match &mut self.live {
            Live::Kernel(k) => k.driver.tuned_intervals().ok().flatten().unwrap_or(given),
            Live::Engine(e, _) => {
                let a = e.attrs();
                (a.sample_us, a.aggr_us)
            }
            Live::Sim(sim) => {
                let a = sim.engine.attrs();
                (a.sample_us, a.aggr_us)
            }
        }
    }

    /// The number of regions the monitor holds now.
    pub fn nr_regions(&self) -> Option<usize> {
        match &self.live {
            Live::Kernel(_) => None,
            Live::Engine(e, _) => Some(e.nr_regions()),
            Live::Sim(sim) => Some(sim.engine.nr_regions()),
        }
    }

    /// Applies new attributes and schemes without restarting monitoring:
    /// kernel DAMON's online `commit` (same kdamond), or the engine's
    /// commit and new schemes (regions and their history kept; the
    /// schemes' statistics start again from zero). Invalid attributes or
    /// schemes the path cannot run leave the session as it was.
    pub fn commit(&mut self, attrs: Attrs, schemes: Vec<Damos>, dry_run: bool) -> Result<()> {
        attrs.validate().map_err(|e| Error::Usage(e.to_string()))?;
        let phys =
            matches!(&self.live, Live::Engine(e, _) if matches!(e.ops().inner(), LiveOps::Phys(_)));
        match &mut self.live {
            Live::Kernel(k) => {
                let targets = k.targets.clone();
                k.driver
                    .commit(attrs, targets, kernel_schemes(&schemes, dry_run))
                    .map_err(|e| Error::failed("committing to kernel DAMON", e))?;
                if let Some((_, asm)) = k.trace.as_mut() {
                    let mut fresh = Assembler::new(1, attrs.sample_us, attrs.aggr_us);
                    fresh.only_from(k.pid);
                    *asm = fresh;
                }
            }
            Live::Engine(e, _) => {
                check_schemes(&schemes, self.info.ops, self.info.ops, "", phys)?;
                e.commit(attrs).map_err(|e| Error::Usage(e.to_string()))?;
                e.set_schemes(schemes.clone());
                e.set_dry_run(dry_run);
            }
            Live::Sim(sim) => {
                let e = &mut sim.engine;
                e.commit(attrs).map_err(|e| Error::Usage(e.to_string()))?;
                e.set_schemes(schemes.clone());
                e.set_dry_run(dry_run);
            }
        }
        self.attrs = attrs;
        self.schemes = schemes;
        self.dry_run = dry_run;
        Ok(())
    }

    /// The schemes' statistics and state, as the backend reports them;
    /// kernel DAMON's figures are read back from sysfs, and what this
    /// kernel does not expose is named in `not_available`.
    pub fn schemes(&mut self) -> Result<Vec<SchemeReport>> {
        let kernel = self.info.kernel.clone();
        let root = self.root.clone();
        let k = match &mut self.live {
            Live::Engine(e, _) => return Ok(scheme_reports(e.schemes())),
            Live::Sim(sim) => return Ok(scheme_reports(sim.engine.schemes())),
            Live::Kernel(k) => k,
        };
        let stats = k
            .driver
            .stats()
            .map_err(|e| Error::failed("reading kernel DAMON's scheme statistics", e))?;
        let extras = k.driver.scheme_extras().unwrap_or_default();
        Ok(stats
            .into_iter()
            .zip(&self.schemes)
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
                // The kernel publishes current values of user_input goals
                // only (the others read 0): node goals are read where the
                // kernel reads them, the node's meminfo.
                let goal_values = x.goal_values.filter(|_| has_goals).map(|mut v| {
                    use udamon_core::schemes::GoalMetric;
                    for (val, g) in v.iter_mut().zip(&s.quota.goals) {
                        let free = match g.metric {
                            GoalMetric::NodeMemFreeBp => true,
                            GoalMetric::NodeMemUsedBp => false,
                            _ => continue,
                        };
                        if let Some(n) = udamon_proc::node_mem_bp(&root, g.nid, free) {
                            *val = n;
                        }
                    }
                    v
                });
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
                    goal_values,
                    not_available: na,
                    would_apply_bytes: None,
                }
            })
            .collect())
    }

    /// One event: a snapshot, an exec, or the end and why. `stop` is
    /// asked between samples (our engine) or at least every 100 ms (kernel
    /// DAMON, whose trace is waited for with poll(2)), so a stop request or
    /// a vanished target is seen promptly.
    pub fn next(&mut self, stop: &dyn Fn() -> bool) -> Result<Event> {
        let (started, deadline_us) = (self.started, self.deadline_us);
        let child = self.child.as_ref();
        match &mut self.live {
            Live::Kernel(k) => k.next(stop, child, started, deadline_us),
            Live::Sim(sim) => loop {
                let e = &mut sim.engine;
                if stop() {
                    return Ok(Event::End("interrupted"));
                }
                if deadline_us.is_some_and(|d| e.now_us() >= d) {
                    return Ok(Event::End("duration"));
                }
                let snap = e.tick();
                if let Some(s) = sim.speed {
                    let due = Duration::from_secs_f64(e.now_us() as f64 / 1e6 / s);
                    let ahead = due.saturating_sub(started.elapsed());
                    if !ahead.is_zero() {
                        std::thread::sleep(ahead);
                    }
                }
                if let Some(s) = snap {
                    return Ok(Event::Snapshot(s));
                }
            },
            Live::Engine(e, last_end_us) => loop {
                if let Some(why) = end_now(stop, child, started, deadline_us) {
                    return Ok(Event::End(why));
                }
                if !e.ops().target_valid(0) {
                    return Ok(Event::End(e.ops().inner().ended()));
                }
                let snap = e.tick();
                if let Some(err) = e.ops_mut().inner_mut().take_error() {
                    if matches!(
                        err,
                        udamon_proc::Error::PfnHidden { .. } | udamon_proc::Error::Denied { .. }
                    ) {
                        return Err(Error::Capability(err.to_string()));
                    }
                    self.warn.warn(&err.to_string());
                }
                if e.ops_mut().inner_mut().take_execs() > 0 {
                    if self.stop_on_exec {
                        return Ok(Event::End("target exec'd"));
                    }
                    e.restart_target(0);
                    let pid = self.info.pid;
                    let exe = std::fs::read_link(self.root.join(format!("proc/{pid}/exe")))
                        .map_or_else(|_| "?".into(), |p| p.display().to_string());
                    return Ok(Event::Exec {
                        at_us: started.elapsed().as_micros() as u64,
                        exe,
                    });
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
                    return Ok(Event::Snapshot(s));
                }
            },
        }
    }

    /// Ends the session: removes our kdamond, ends the command udamon
    /// started. Returns the target's resident set and swap at the end (kB)
    /// and the kdamond's CPU seconds.
    pub fn finish(&mut self) -> Result<Finished> {
        if self.finished {
            return Ok(Finished::default());
        }
        self.finished = true;
        let kdamond_cpu_s = self.kdamond_cpu_s();
        let (rss_end_kb, swap_end_kb) = if self.info.pid == 0 {
            (None, None)
        } else {
            rss_swap_kb(&self.root, self.info.pid)
        };
        let mut result = Ok(());
        if let Live::Kernel(k) = &mut self.live {
            k.trace = None;
            result = k
                .driver
                .stop()
                .map_err(|e| Error::failed("stopping kernel DAMON", e));
        }
        if let Some(c) = self.child.take() {
            // udamon started the command, so udamon ends it when monitoring
            // stops before it exits (duration passed, Ctrl-C).
            end_child(c.pid, &c.exited, CHILD_GRACE);
            let _ = c.reaper.join();
        }
        result.map(|()| Finished {
            rss_end_kb,
            swap_end_kb,
            kdamond_cpu_s,
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            self.warn.warn(&e.to_string());
        }
    }
}

/// What [`Session::finish`] measured at the end.
#[derive(Clone, Copy, Debug, Default)]
pub struct Finished {
    pub rss_end_kb: Option<u64>,
    pub swap_end_kb: Option<u64>,
    pub kdamond_cpu_s: Option<f64>,
}

impl Kernel {
    fn next(
        &mut self,
        stop: &dyn Fn() -> bool,
        child: Option<&Child>,
        started: Instant,
        deadline_us: Option<u64>,
    ) -> Result<Event> {
        let Some((session, asm)) = self.trace.as_mut() else {
            return match self.driver.next_snapshot() {
                Ok(Some(s)) => Ok(Event::Snapshot(s)),
                Ok(None) => Ok(Event::End(
                    end_now(stop, child, started, deadline_us).unwrap_or("duration"),
                )),
                Err(e) => Err(Error::failed("reading kernel DAMON", e)),
            };
        };
        let be = |e: std::io::Error| Error::failed("reading the damon_aggregated trace", e);
        let mut last_state_check = Instant::now();
        loop {
            // Lines after the one completing a snapshot wait in the
            // assembler's queue for the next call.
            if let Some(s) = self.ready.pop_front() {
                return Ok(Event::Snapshot(s));
            }
            if self.unread {
                let ready = &mut self.ready;
                session
                    .for_each_line(|line| {
                        if let Some(ev) = parse_aggregated(line) {
                            if let Some(s) = asm.push(ev) {
                                ready.push_back(s);
                            }
                        }
                    })
                    .map_err(be)?;
                self.unread = false;
            }
            if let Some(s) = self.ready.pop_front() {
                return Ok(Event::Snapshot(s));
            }
            if let Some(why) = end_now(stop, child, started, deadline_us) {
                return Ok(Event::End(why));
            }
            // The kernel turns the kdamond off once its target is gone.
            if last_state_check.elapsed() > Duration::from_millis(500) {
                last_state_check = Instant::now();
                let state = self
                    .driver
                    .state()
                    .map_err(|e| Error::failed("reading kernel DAMON's state", e))?;
                if state == "off" {
                    return Ok(Event::End("target exited"));
                }
            }
            // Sleep until kdamond writes (it does once per aggregation), at
            // most 100 ms so a stop request or the deadline is seen soon.
            let mut wait = Duration::from_millis(100);
            if let Some(d) = deadline_us {
                wait = wait.min(Duration::from_micros(d).saturating_sub(started.elapsed()));
            }
            self.unread = session.wait(wait).map_err(be)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command that ignores SIGTERM is killed after the grace period.
    #[test]
    fn a_child_that_ignores_sigterm_is_killed() {
        let mut c = Command::new("sh")
            .args(["-c", "trap '' TERM; while :; do sleep 0.05; done"])
            .spawn()
            .unwrap();
        let pid = c.id();
        let exited = Arc::new(AtomicBool::new(false));
        let e = Arc::clone(&exited);
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
