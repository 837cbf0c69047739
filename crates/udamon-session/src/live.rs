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
use udamon_core::schemes::{Action, Damos, DamosStats};
use udamon_core::softdirty::SoftDirtyReset;
use udamon_core::{Attrs, Engine, Mode, Monitor, Operations, Snapshot, Target};
use udamon_kdamon::trace::{Assembler, TraceEvent, TraceSession};
use udamon_kdamon::{KTarget, KdamonConfig, KdamonDriver, OpsKind};
use udamon_proc::{
    proc_field, system_ram, unsupported_reason, AccessMode, Paced, PaddrOps, ProcOps,
};
use udamon_record::{Header, SimInfo, TargetEvent, TargetInfo};
use udamon_sim::{MonitorKind, SimOps};

use crate::features::{probe, Features};
pub use crate::program::cmdline;
use crate::program::{describe, target_info, Change, Follow};
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
    /// A whole program: given processes, their descendants and a cgroup's
    /// processes ([`udamon_proc::Program`]), each process one target,
    /// followed as they come and go; with `command`, udamon starts it and
    /// it is one of the given processes.
    Program {
        program: udamon_proc::Program,
        command: Option<Vec<String>>,
    },
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
    /// Sample the allocations of the command udamon starts (its whole
    /// tree), with the preloaded library of `udamon_preload`.
    pub alloc_sites: Option<AllocSites>,
    /// Placement hints the preloaded library applies in the command udamon
    /// starts (`record --hints`).
    pub hints: Vec<udamon_preload::HintLine>,
    /// The kdamonds of this process's set ([`KdamondSet`]), when it made
    /// one: kernel DAMON then runs on a free kdamond of the set (none free:
    /// the path is not available), never on a kdamond of its own.
    pub kdamonds: Option<std::sync::Arc<udamon_kdamon::KdamondSet>>,
    /// Where warnings go.
    pub warn: crate::Warner,
}

/// Allocation sampling for a command udamon starts: its side files are
/// `prefix.PID` (see `udamon_preload`).
#[derive(Clone, Debug)]
pub struct AllocSites {
    pub prefix: PathBuf,
    pub options: udamon_preload::Options,
}

/// The preloaded library of a session's command, installed in a private
/// directory removed when the session is.
struct Preloaded {
    _dir: tempfile::TempDir,
    sites: Option<AllocSites>,
    hints: usize,
}

impl Preloaded {
    /// Installs the library (and the hints file, when there are hints) and
    /// says what to set on the command.
    fn install(
        sites: Option<&AllocSites>,
        hints: &[udamon_preload::HintLine],
    ) -> Result<(Self, Vec<(std::ffi::OsString, std::ffi::OsString)>)> {
        let dir = tempfile::Builder::new()
            .prefix("udamon-preload-")
            .tempdir()
            .map_err(|e| Error::failed("making a directory for the preloaded library", e))?;
        let lib = udamon_preload::install(dir.path())
            .map_err(|e| Error::failed("installing the preloaded library", e))?;
        let mut opts = sites.map(|s| s.options.clone()).unwrap_or_default();
        if !hints.is_empty() {
            let path = dir.path().join("hints.txt");
            udamon_preload::write_hints(&path, hints).map_err(|e| {
                Error::Usage(format!("the hints cannot be given to the program: {e}"))
            })?;
            opts.hints = Some(path);
            // What the hints did, one line per process at its exit.
            opts.hints_verbose = true;
        }
        let env = udamon_preload::env(&lib, sites.map(|s| s.prefix.as_path()), &opts);
        Ok((
            Self {
                _dir: dir,
                sites: sites.cloned(),
                hints: hints.len(),
            },
            env,
        ))
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (the clock of `Instant` on Linux,
/// and of the allocation sampler's side files).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
    /// Processes of a program arrived or left (each arrival takes the
    /// next target index; see [`TargetEvent`]).
    Targets(Vec<TargetEvent>),
    /// The session is over, and why: "duration", "target exited", "target
    /// replaced" (its pid names another process now), "target exec'd"
    /// (with `stop_on_exec`), "interrupted"; for a program, "target
    /// exited" when its last process is gone.
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
        self.take_execs_of(0)
    }

    fn take_execs_of(&mut self, i: usize) -> u32 {
        match self {
            LiveOps::Proc(o) => o.take_execs(i),
            LiveOps::Phys(_) => 0,
        }
    }

    fn proc_mut(&mut self) -> Option<&mut ProcOps> {
        match self {
            LiveOps::Proc(o) => Some(o),
            LiveOps::Phys(_) => None,
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
    fn node_bytes(
        &mut self,
        idx: usize,
        r: udamon_core::AddrRange,
        nid: u32,
    ) -> Option<(u64, u64)> {
        delegate!(self, o => o.node_bytes(idx, r, nid))
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
            let present = why.is_empty();
            let before = why.len();
            why.extend(modules_holding_damon(f));
            // This process's own set of kdamonds is not in the way: its
            // sessions take a free one (start_kernel).
            let me = std::process::id();
            let others = f
                .foreign_kdamonds
                .iter()
                .filter(|k| !(k.udamon_pid == Some(me) && k.udamon_running == Some(true)));
            why.extend(others.map(|k| {
                if let (Some(u), Some(false)) = (k.udamon_pid, k.udamon_running) {
                    return format!(
                        "kdamond {} was left by a udamon run (pid {u}) that died: \
                         `udamon cleanup` removes it",
                        k.index
                    );
                }
                if let (Some(u), Some(true)) = (k.udamon_pid, k.udamon_running) {
                    return format!(
                        "kdamond {} is another udamon's (pid {u}, running: a service or a \
                         record); the kernel adds no kdamond while one runs, so this run \
                         cannot have one of its own: end that run, or use --ops idle or \
                         --ops softdirty",
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
            if present && why.len() > before {
                // The kernel has DAMON; something else holds it.
                why.insert(0, "kernel DAMON is present but occupied".to_string());
            }
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
                "--ops {} {} (kernel {}): {why}",
                asked.name(),
                if why.starts_with("kernel DAMON is present but occupied") {
                    "cannot be used now"
                } else {
                    "is not available on this machine"
                },
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

/// `VmRSS` and `VmSwap` of a process, in kB.
pub fn rss_swap_kb(root: &Path, pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(s) = std::fs::read_to_string(root.join(format!("proc/{pid}/status"))) else {
        return (None, None);
    };
    (proc_field(&s, "VmRSS:"), proc_field(&s, "VmSwap:"))
}

/// A process's resident set in kB, from `/proc/PID/statm` (its second
/// field, in pages: the same count as `VmRSS`). Far cheaper to read than
/// `status`, which a service would otherwise read for every process of a
/// program every second.
pub fn rss_kb(root: &Path, pid: u32) -> Option<u64> {
    let mut buf = Vec::new();
    udamon_proc::read_proc_file(&root.join(format!("proc/{pid}/statm")), &mut buf, true).ok()?;
    let pages: u64 = std::str::from_utf8(&buf)
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    Some(pages * page / 1024)
}

/// CPU seconds (user + system: stat fields 14 and 15) of a thread or
/// process.
pub fn stat_cpu_s(root: &Path, pid: u32) -> Option<f64> {
    let st = udamon_proc::ProcStat::read(root, pid)?;
    let ticks = st.field(14)? + st.field(15)?;
    Some(ticks as f64 / udamon_proc::clock_ticks_per_s())
}

/// Kernel DAMON: the driver, and the tracefs session its snapshots come
/// from (else tried-regions snapshots of a `stat` scheme).
struct Kernel {
    driver: KdamonDriver,
    /// "/" in production; a fake tree in tests.
    root: PathBuf,
    trace: Option<(TraceSession, Assembler)>,
    /// What it monitors (kept for online commits).
    targets: Vec<KTarget>,
    /// The kdamond's thread, once it runs.
    pid: Option<u32>,
    /// Snapshots assembled from trace lines read after the one a call
    /// returned, for the next calls.
    ready: std::collections::VecDeque<Snapshot>,
    /// Each target's regions in the last snapshot, by position (a
    /// program's targets only): what a commit that moves a target to
    /// another position gives the kernel as its regions.
    last_regions: Vec<Vec<udamon_core::AddrRange>>,
    /// Where warnings go.
    warn: crate::Warner,
    /// CPU seconds of kdamond threads before a restart, less the new
    /// thread's at its start: added to the thread's own count.
    cpu_offset: f64,
    /// Each scheme's statistics from the trace's
    /// `damos_stat_after_apply_interval` events (Linux 7.0+), by index:
    /// read without a sysfs command.
    trace_stats: Vec<Option<DamosStats>>,
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

/// Starts `argv`, with a thread that reaps it as soon as it exits.
fn spawn_child(argv: &[String], env: &[(std::ffi::OsString, std::ffi::OsString)]) -> Result<Child> {
    let mut c = Command::new(&argv[0])
        .args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
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
    Ok(Child {
        pid,
        exited,
        reaper,
    })
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

/// How [`Session::pause`] paused a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Paused {
    /// Kernel DAMON's context pause (Linux 7.2+): the kdamond stays, with
    /// its regions and their ages, and neither samples nor acts.
    Kernel,
    /// udamon's engine is not stepped: its regions and their ages wait in
    /// memory, and nothing is sampled or applied.
    Engine,
    /// A kernel before 7.2 cannot pause a context: its kdamond goes on
    /// monitoring (regions and ages kept) while the schemes only count
    /// what they would do, as the guardrails pause actions.
    ActionsOnly,
}

impl Paused {
    /// What the pause keeps and stops, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Paused::Kernel => {
                "kernel DAMON's context paused (Linux 7.2+): the kdamond, its regions and \
                 their ages are kept; nothing is sampled or applied"
            }
            Paused::Engine => {
                "monitoring paused: the regions and their ages are kept; nothing is sampled or \
                 applied"
            }
            Paused::ActionsOnly => {
                "actions paused: this kernel cannot pause a context (Linux 7.2+ can), so its \
                 kdamond goes on monitoring while the schemes only count what they would do"
            }
        }
    }

    /// Whether the session produces no events while paused (the caller
    /// must not step it).
    pub fn stops_monitoring(self) -> bool {
        self != Paused::ActionsOnly
    }
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
    /// How the session is paused, if it is ([`Session::pause`]).
    paused: Option<Paused>,
    stop_on_exec: bool,
    deadline_us: Option<u64>,
    started: Instant,
    child: Option<Child>,
    kcpu0: Option<f64>,
    rss_start_kb: Option<u64>,
    finished: bool,
    warn: crate::Warner,
    /// A program's processes, followed (`None`: one process, physical
    /// memory or a simulation).
    follow: Option<Follow>,
    /// The targets at the start, for the record's header (a program's).
    initial: Vec<TargetInfo>,
    /// `CLOCK_MONOTONIC` when `started` was taken (ns): the origin of the
    /// allocation sampler's times in the record's.
    mono_start_ns: u64,
    /// The allocation sampler of the command udamon started.
    preloaded: Option<Preloaded>,
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
    if ops == OpsChoice::Kdamond && !phys {
        let eligible = schemes.iter().enumerate().find(|(_, s)| {
            s.quota
                .goals
                .iter()
                .any(|g| g.metric == udamon_core::schemes::GoalMetric::NodeEligibleMemBp)
        });
        if let Some((i, _)) = eligible {
            return Err(Error::Usage(format!(
                "scheme {i}: quota goal node_eligible_mem_bp is measured by kernel DAMON on \
                 physical memory only (paddr, Linux 7.2+): monitor it with --paddr or --node, \
                 or use another metric for a process"
            )));
        }
    }
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

/// Kernel DAMON's targets for `pids` (none: physical memory, or NUMA
/// `node`'s).
fn kernel_targets(spec: &Spec, pids: &[u32], node: Option<u32>) -> Result<Vec<KTarget>> {
    if !pids.is_empty() {
        return Ok(pids
            .iter()
            .map(|&p| KTarget {
                pid: Some(p),
                ..KTarget::default()
            })
            .collect());
    }
    let root = spec.root.as_path();
    let regions = match node {
        Some(n) => udamon_proc::node_ram(root, n),
        None => system_ram(root),
    }
    .map_err(|e| Error::Capability(e.to_string()))?;
    Ok(vec![KTarget {
        pid: None,
        regions,
        ..KTarget::default()
    }])
}

/// Kernel DAMON on `targets`: the kdamond started, its tracepoint opened
/// first; with where its snapshots come from. `positional`: a program's
/// targets, whose list changes, named in the trace by their position.
fn start_kernel(spec: &Spec, targets: Vec<KTarget>, positional: bool) -> Result<(Live, String)> {
    let root = spec.root.as_path();
    let phys = targets.iter().all(|t| t.pid.is_none());
    let mut source = "tracefs damon:damon_aggregated".to_string();
    if spec.dry_run {
        spec.warn.warn(
            "kernel DAMON has no dry run: the schemes run as stat, which counts \
             what they try but not what they would apply",
        );
    }
    let mut config = KdamonConfig {
        ops: if phys { OpsKind::Paddr } else { OpsKind::Vaddr },
        targets: targets.clone(),
        attrs: spec.attrs,
        schemes: kernel_schemes(&spec.schemes, spec.dry_run),
        snapshots: true,
    };
    // In this process's set of kdamonds, a free one (the set's own
    // sessions hold the others).
    let slot = match &spec.kdamonds {
        Some(set) => Some(set.take().ok_or_else(|| {
            Error::Capability(format!(
                "the {} kdamonds this process made are all in use, and the kernel adds \
                 kdamonds only while none runs: give this job ops = \"idle\" or \
                 \"softdirty\", or restart the service so that it makes one more",
                set.nr()
            ))
        })?),
        None => None,
    };
    let index = slot.as_ref().map_or(0, udamon_kdamon::Slot::index);
    // The tracepoint first, so no aggregation is missed.
    let trace = match TraceSession::open_for(root, index) {
        Ok(t) => {
            if let Some(why) = t.text_why() {
                source.push_str(&format!(" (text: {why})"));
            }
            Some(t)
        }
        Err(e) if positional => {
            return Err(Error::Capability(format!(
                "monitoring a program's processes on kernel DAMON needs the \
                 damon:damon_aggregated tracepoint, and tracefs cannot be used: {e}; \
                 give --ops idle or --ops softdirty"
            )))
        }
        Err(e) => {
            source = format!("tried-regions snapshots (no tracefs: {e})");
            None
        }
    };
    config.snapshots = trace.is_none();
    let mut d = match slot {
        Some(slot) => KdamonDriver::in_set(slot, config),
        None => KdamonDriver::new(root.to_path_buf(), config),
    };
    d.claim_as(udamon_proc::start_time(Path::new("/"), std::process::id()));
    d.start().map_err(|e| {
        // A module enabled since the probe (the kernel then says
        // EBUSY): name it and the way out.
        let also: String = modules_holding_damon(&probe(root))
            .map(|m| format!("; {m}"))
            .collect();
        Error::Capability(format!("cannot start kernel DAMON: {e}{also}"))
    })?;
    let nr = targets.len();
    let mut asm = if positional {
        Assembler::positional(nr, spec.attrs.sample_us, spec.attrs.aggr_us)
    } else {
        Assembler::new(nr, spec.attrs.sample_us, spec.attrs.aggr_us)
    };
    // Events of other kdamonds (a DAMON module's) are not ours.
    let kpid = d.kdamond_pid();
    asm.only_from(kpid);
    let live = Live::Kernel(Box::new(Kernel {
        driver: d,
        root: root.to_path_buf(),
        trace: trace.map(|t| (t, asm)),
        targets,
        pid: kpid,
        ready: Default::default(),
        unread: true,
        last_regions: Vec::new(),
        trace_stats: Vec::new(),
        warn: spec.warn.clone(),
        cpu_offset: 0.0,
    }));
    Ok((live, source))
}

/// udamon's engine on `pids` (none: physical memory, or NUMA `node`'s)
/// over /proc, through the idle page bitmap or soft-dirty (`ops`);
/// `command` names the target. With `members` (a program's processes,
/// with their start times), those that are gone by now are left out: the
/// pids it monitors are returned.
fn start_engine(
    spec: &Spec,
    pids: &[u32],
    node: Option<u32>,
    ops: OpsChoice,
    command: &str,
    members: Option<&[udamon_proc::Member]>,
) -> Result<(Live, Vec<u32>)> {
    let root = spec.root.as_path();
    let phys = pids.is_empty() && members.is_none();
    let mode = if ops == OpsChoice::Idle {
        AccessMode::IdlePage
    } else {
        AccessMode::SoftDirtyWriteOnly
    };
    let cannot = |e: udamon_proc::Error| match e {
        udamon_proc::Error::Gone { .. } => Error::Usage(e.to_string()),
        e => Error::Capability(e.to_string()),
    };
    let mut pids = pids.to_vec();
    let p = if phys {
        LiveOps::Phys(PaddrOps::with_node(root, node).map_err(cannot)?)
    } else {
        let mut o = match members {
            None => ProcOps::new(root, &pids, mode).map_err(cannot)?,
            Some(members) => {
                let mut o = ProcOps::new(root, &[], mode).map_err(cannot)?;
                pids.clear();
                for m in members {
                    match o.add_target(m.pid, Some(m.start)) {
                        Ok(()) => pids.push(m.pid),
                        Err(udamon_proc::Error::Gone { .. }) => {}
                        Err(e) => return Err(cannot(e)),
                    }
                }
                if pids.is_empty() {
                    return Err(Error::Usage(format!(
                        "cannot monitor {command}: its processes exited as monitoring started"
                    )));
                }
                o
            }
        };
        o.set_soft_dirty_reset(spec.softdirty_reset);
        LiveOps::Proc(o)
    };
    let targets = if phys {
        vec![Target::new(0)]
    } else {
        pids.iter().map(|&p| Target::new(p)).collect()
    };
    let mut e = Engine::new(
        spec.attrs,
        Paced::new(p),
        targets,
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
    Ok((Live::Engine(Box::new(e), 0), pids))
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
        let command = match &spec.target {
            LiveTarget::Command(argv)
            | LiveTarget::Program {
                command: Some(argv),
                ..
            } => Some(argv),
            _ => None,
        };
        let preload = spec.alloc_sites.is_some() || !spec.hints.is_empty();
        let (preloaded, env) = match (preload, command) {
            (false, _) => (None, Vec::new()),
            (true, None) => {
                return Err(Error::Usage(
                    "--alloc-sites and --hints need a command udamon starts (record -- CMD): \
                     they work through a library preloaded into it, which a running process \
                     cannot be given"
                        .into(),
                ))
            }
            (true, Some(_)) => {
                let (p, env) = Preloaded::install(spec.alloc_sites.as_ref(), &spec.hints)?;
                (Some(p), env)
            }
        };
        let child = match command {
            Some(argv) => Some(spawn_child(argv, &env)?),
            None => None,
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
        let started = match &spec.target {
            LiveTarget::Program { program, .. } => {
                let mut program = program.clone();
                if let Some(c) = &child {
                    program.pids.insert(0, c.pid);
                }
                Self::start_program(spec, program, ops, because, &features)
            }
            _ => Self::start_live(spec, pid, node, ops, because, &features),
        };
        match started {
            Ok(mut s) => {
                s.child = child;
                s.preloaded = preloaded;
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

    /// A program's processes, each a target of one monitor, followed as
    /// they come and go.
    fn start_program(
        spec: &Spec,
        program: udamon_proc::Program,
        ops: OpsChoice,
        because: String,
        features: &Features,
    ) -> Result<Session> {
        let root = spec.root.as_path();
        let every = Duration::from_micros(spec.attrs.update_us);
        let what = describe(&program);
        let (mut follow, mut members) = Follow::start(root, program, every)?;
        for m in &members {
            check_target(root, m.pid)?;
        }
        let (live, source) = match ops {
            OpsChoice::Kdamond => {
                let pids: Vec<u32> = members.iter().map(|m| m.pid).collect();
                start_kernel(spec, kernel_targets(spec, &pids, None)?, true)?
            }
            _ => {
                let (live, kept) = start_engine(spec, &[], None, ops, &what, Some(&members))?;
                // Those gone since the scan are left out; they never were
                // targets.
                members.retain(|m| kept.contains(&m.pid));
                (live, "udamon engine".to_string())
            }
        };
        follow.begin(&members);
        if ops == OpsChoice::Softdirty {
            warn_softdirty(spec);
        }
        let initial: Vec<TargetInfo> = members.iter().map(|m| target_info(root, m)).collect();
        let rss_start_kb = members
            .iter()
            .map(|m| rss_swap_kb(root, m.pid).0)
            .sum::<Option<u64>>();
        let info = SessionInfo {
            pid: members[0].pid,
            command: format!(
                "{what} ({} process{} at the start)",
                members.len(),
                if members.len() == 1 { "" } else { "es" }
            ),
            ops,
            path: ops.name(),
            chosen_because: because,
            access: ops.access(),
            source,
            kernel: features.kernel.clone(),
        };
        let mut s = Self::live_session(spec, live, info, rss_start_kb);
        s.stop_on_exec = false;
        s.follow = Some(follow);
        s.initial = initial;
        Ok(s)
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
            paused: None,
            stop_on_exec: false,
            // Simulated time.
            deadline_us: spec.duration_us,
            started: Instant::now(),
            mono_start_ns: monotonic_ns(),
            preloaded: None,
            child: None,
            kcpu0: None,
            rss_start_kb: None,
            finished: false,
            warn: spec.warn.clone(),
            follow: None,
            initial: Vec::new(),
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
        let pids: Vec<u32> = if phys { Vec::new() } else { vec![pid] };
        let (live, source) = match ops {
            OpsChoice::Kdamond => start_kernel(spec, kernel_targets(spec, &pids, node)?, false)?,
            _ => (
                start_engine(spec, &pids, node, ops, &command, None)?.0,
                "udamon engine".to_string(),
            ),
        };
        if ops == OpsChoice::Softdirty {
            warn_softdirty(spec);
        }
        let info = SessionInfo {
            pid,
            command,
            ops,
            path: ops.name(),
            chosen_because: because,
            access: ops.access(),
            source,
            kernel: features.kernel.clone(),
        };
        Ok(Self::live_session(spec, live, info, rss_start_kb))
    }

    /// A live session over `live`, its monitor's deadline set and the
    /// kdamond's CPU time so far taken.
    fn live_session(
        spec: &Spec,
        live: Live,
        info: SessionInfo,
        rss_start_kb: Option<u64>,
    ) -> Session {
        let mut s = Session {
            live,
            info,
            root: spec.root.clone(),
            attrs: spec.attrs,
            schemes: spec.schemes.clone(),
            dry_run: spec.dry_run,
            paused: None,
            stop_on_exec: spec.stop_on_exec,
            deadline_us: spec.duration_us,
            started: Instant::now(),
            mono_start_ns: monotonic_ns(),
            preloaded: None,
            child: None,
            kcpu0: None,
            rss_start_kb,
            finished: false,
            warn: spec.warn.clone(),
            follow: None,
            initial: Vec::new(),
        };
        s.monitor().set_deadline(spec.duration_us);
        s.kcpu0 = s.kdamond_pid().and_then(|k| stat_cpu_s(&spec.root, k));
        s
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
        let offset = match &self.live {
            Live::Kernel(k) => k.cpu_offset,
            _ => 0.0,
        };
        Some(now + offset - self.kcpu0?)
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

    /// The processes monitored now: a program's, or the one process (none
    /// for physical memory and simulations).
    pub fn pids(&self) -> Vec<u32> {
        match &self.follow {
            Some(f) => f.slots.iter().map(|s| s.pid).collect(),
            None if self.info.pid != 0 => vec![self.info.pid],
            None => Vec::new(),
        }
    }

    /// The monitored processes now, each with its target index in the
    /// record and, for a program's process, its size at the last scan
    /// (none for physical memory and simulations).
    pub(crate) fn target_pids(&self) -> Vec<crate::maps::Watched> {
        use crate::maps::Watched;
        match &self.follow {
            Some(f) => f
                .slots
                .iter()
                .map(|s| Watched {
                    idx: s.id,
                    pid: s.pid,
                    vsize: Some(s.vsize),
                })
                .collect(),
            None if self.info.pid != 0 => vec![Watched {
                idx: 0,
                pid: self.info.pid,
                vsize: None,
            }],
            None => Vec::new(),
        }
    }

    /// A simulated workload's objects, as the mappings of its one target.
    pub fn sim_maps(&self) -> Option<Vec<udamon_record::MapInfo>> {
        match &self.live {
            Live::Sim(sim) => Some(crate::maps::layout_maps(&sim.engine.ops().model().workload)),
            _ => None,
        }
    }

    /// The root the session reads `/proc` under.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Whether this session follows a program's processes (each a target,
    /// announced by [`Event::Targets`]).
    pub fn is_program(&self) -> bool {
        self.follow.is_some()
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
                targets: vec![TargetInfo::new(0, i.command.clone())],
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
        let targets = if self.follow.is_some() {
            self.initial.clone()
        } else {
            vec![TargetInfo::new(i.pid, i.command.clone())]
        };
        Header {
            kind: i.ops.name().to_string(),
            targets,
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
                "monotonic_start_ns": self.mono_start_ns,
                "alloc_sites": self.preloaded.as_ref().and_then(|p| p.sites.as_ref()).map(|s| serde_json::json!({
                    // The side files' name, beside the record.
                    "prefix": s.prefix.file_name().map(|n| n.to_string_lossy().into_owned()),
                    "threshold": s.options.threshold,
                    "sample_interval": s.options.sample_interval,
                })),
                "hints": self.preloaded.as_ref().map_or(0, |p| p.hints),
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
                // Paused actions stay paused through a reload.
                let dry = dry_run || self.paused == Some(Paused::ActionsOnly);
                // The schemes by index may be others now.
                k.trace_stats.clear();
                k.driver
                    .commit(attrs, targets, kernel_schemes(&schemes, dry))
                    .map_err(|e| Error::failed("committing to kernel DAMON", e))?;
                // Snapshot times go on from where they were.
                if let Some((_, asm)) = k.trace.as_mut() {
                    asm.retarget(k.targets.len(), attrs.sample_us, attrs.aggr_us);
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

    /// Pauses the session, keeping what it learned: kernel DAMON's
    /// context pause where the kernel has it (the kdamond stays, with its
    /// regions and ages), actions only on older kernels (monitoring goes
    /// on), and udamon's engine by not being stepped. While it is paused
    /// in a way that [`stops_monitoring`](Paused::stops_monitoring),
    /// [`next`](Self::next) must not be called. Pausing twice is a no-op.
    pub fn pause(&mut self) -> Result<Paused> {
        if let Some(p) = self.paused {
            return Ok(p);
        }
        let can_pause = match &mut self.live {
            Live::Kernel(k) => k.driver.can_pause(),
            _ => false,
        };
        let how = match &mut self.live {
            Live::Kernel(k) if can_pause => {
                k.driver
                    .set_paused(true)
                    .map_err(|e| Error::failed("pausing kernel DAMON's context", e))?;
                Paused::Kernel
            }
            Live::Kernel(k) => {
                k.driver
                    .commit(
                        self.attrs,
                        k.targets.clone(),
                        kernel_schemes(&self.schemes, true),
                    )
                    .map_err(|e| Error::failed("pausing kernel DAMON's actions", e))?;
                Paused::ActionsOnly
            }
            Live::Engine(..) | Live::Sim(_) => Paused::Engine,
        };
        self.paused = Some(how);
        Ok(how)
    }

    /// Resumes a paused session where it was; a no-op when it is not
    /// paused.
    pub fn resume(&mut self) -> Result<()> {
        let Some(how) = self.paused else {
            return Ok(());
        };
        if let Live::Kernel(k) = &mut self.live {
            match how {
                Paused::Kernel => k
                    .driver
                    .set_paused(false)
                    .map_err(|e| Error::failed("resuming kernel DAMON's context", e))?,
                _ => k
                    .driver
                    .commit(
                        self.attrs,
                        k.targets.clone(),
                        kernel_schemes(&self.schemes, self.dry_run),
                    )
                    .map_err(|e| Error::failed("resuming kernel DAMON's actions", e))?,
            }
        }
        self.paused = None;
        Ok(())
    }

    /// How the session is paused, if it is.
    pub fn paused(&self) -> Option<Paused> {
        self.paused
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
        // The trace's statistics events (7.0+) when every scheme has one:
        // no sysfs command (each takes DAMON's sysfs lock and waits for
        // the kdamond); else the statistics files, refreshed first.
        let n = self.schemes.len();
        let traced: Option<Vec<DamosStats>> = (n > 0 && k.trace_stats.len() >= n)
            .then(|| {
                k.trace_stats[..n]
                    .iter()
                    .copied()
                    .collect::<Option<Vec<_>>>()
            })
            .flatten();
        let stats = match traced {
            Some(s) => s,
            None => k
                .driver
                .stats()
                .map_err(|e| Error::failed("reading kernel DAMON's scheme statistics", e))?,
        };
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
                    na.push(if self.schemes.iter().any(|s| s.max_nr_snapshots != 0) {
                        "tried_regions_bytes: not asked for while a scheme stops at \
                         max_nr_snapshots (the kernel's walk would wait for ever)"
                            .to_string()
                    } else {
                        format!(
                            "tried_regions_bytes: kernel {kernel} lacks tried_regions/total_bytes \
                             (6.6)"
                        )
                    });
                }
                na.push("nr_tried_regions: read only with tried-regions snapshots".into());
                let has_goals = !s.quota.goals.is_empty();
                if has_goals && x.goal_values.is_none() {
                    na.push(format!(
                        "goal_values: kernel {kernel} lacks quotas/goals/N/current_value (6.8)"
                    ));
                }
                // The kernel publishes current values of user_input goals
                // only (the others read 0): the machine's goals are read
                // where the kernel reads them (a node's meminfo, a
                // cgroup's numa_stat, the LRU lists); the rest are said.
                let goal_values = x.goal_values.filter(|_| has_goals).map(|mut v| {
                    use udamon_core::schemes::GoalMetric;
                    for (val, g) in v.iter_mut().zip(&s.quota.goals) {
                        if let Some(n) = udamon_proc::machine_goal_value(&root, g) {
                            *val = n;
                        } else if g.metric != GoalMetric::UserInput {
                            na.push(format!(
                                "goal_values: kernel DAMON does not publish {}'s current value \
                                 (shown as 0)",
                                g.metric.name()
                            ));
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
                    per_target: Vec::new(),
                }
            })
            .collect())
    }

    /// One event: a snapshot, an exec, or the end and why. `stop` is
    /// asked between samples (our engine) or at least every 100 ms (kernel
    /// DAMON, whose trace is waited for with poll(2)), so a stop request or
    /// a vanished target is seen promptly.
    pub fn next(&mut self, stop: &dyn Fn() -> bool) -> Result<Event> {
        if self.paused.is_some_and(Paused::stops_monitoring) {
            return Err(Error::Usage(
                "the session is paused: resume it before stepping it".into(),
            ));
        }
        let (started, deadline_us) = (self.started, self.deadline_us);
        // A program goes on after the command udamon started exits, while
        // it has processes.
        let child = self.child.as_ref().filter(|_| self.follow.is_none());
        let mut follow = self.follow.as_mut();
        match &mut self.live {
            Live::Kernel(k) => {
                let commit = (self.attrs, kernel_schemes(&self.schemes, self.dry_run));
                k.next(
                    stop,
                    child,
                    started,
                    deadline_us,
                    follow.map(|f| (f, commit)),
                )
            }
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
                match follow {
                    Some(ref mut f) => {
                        let at_us = started.elapsed().as_micros() as u64;
                        follow_engine(e, f, at_us, &self.root);
                        let events = f.take_events();
                        if !events.is_empty() {
                            return Ok(Event::Targets(events));
                        }
                        if e.targets().is_empty() {
                            return Ok(Event::End("target exited"));
                        }
                    }
                    None if !e.ops().target_valid(0) => {
                        return Ok(Event::End(e.ops().inner().ended()));
                    }
                    None => {}
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
                if follow.is_none() && e.ops_mut().inner_mut().take_execs() > 0 {
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
        let (rss_end_kb, swap_end_kb) = if let Some(f) = &self.follow {
            // A program's: summed over the processes it has at the end.
            let each: Vec<_> = f
                .slots
                .iter()
                .map(|s| rss_swap_kb(&self.root, s.pid))
                .collect();
            (
                each.iter().map(|x| x.0).sum::<Option<u64>>(),
                each.iter().map(|x| x.1).sum::<Option<u64>>(),
            )
        } else if self.info.pid == 0 {
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

/// Our engine's side of a program's changes: a process that exec'd leaves
/// and comes back as a new target (its regions described the old
/// program); when a scan is due, processes that exited or left the
/// program leave and new members join at the end.
fn follow_engine(
    e: &mut Engine<Paced<LiveOps>, Pcg64Mcg>,
    f: &mut Follow,
    at_us: u64,
    root: &Path,
) {
    let leave = |e: &mut Engine<Paced<LiveOps>, Pcg64Mcg>, f: &mut Follow, pos, why| {
        e.remove_target(pos);
        if let Some(o) = e.ops_mut().inner_mut().proc_mut() {
            o.remove_target(pos);
        }
        f.leave(pos, why, at_us);
    };
    let change = if f.due() { f.scan() } else { Change::default() };
    for &(pos, why) in &change.gone {
        leave(e, f, pos, why);
    }
    let mut arrived = change.arrived;
    for pos in (0..e.targets().len()).rev() {
        if e.ops_mut().inner_mut().take_execs_of(pos) == 0 {
            continue;
        }
        let slot = f.slots[pos].clone();
        leave(e, f, pos, "exec");
        let st = udamon_proc::ProcStat::read(root, slot.pid);
        arrived.push(udamon_proc::Member {
            pid: slot.pid,
            start: slot.start,
            vsize: st.as_ref().and_then(|s| s.field(23)).unwrap_or(0),
            comm: st.map_or_else(String::new, |s| s.comm),
        });
    }
    for m in &arrived {
        let Some(o) = e.ops_mut().inner_mut().proc_mut() else {
            return;
        };
        // Gone already: it never was a target.
        if o.add_target(m.pid, Some(m.start)).is_err() {
            continue;
        }
        let id = e.add_target(Target::new(m.pid));
        let fid = f.arrive(m, at_us);
        debug_assert_eq!(id, fid, "the engine and the program number targets alike");
    }
}

/// What [`Session::finish`] measured at the end.
#[derive(Clone, Copy, Debug, Default)]
pub struct Finished {
    pub rss_end_kb: Option<u64>,
    pub swap_end_kb: Option<u64>,
    pub kdamond_cpu_s: Option<f64>,
}

/// Scans and commits of a program's changed targets in a row, before the
/// next ops update, when processes keep leaving in between.
const COMMIT_TRIES: usize = 3;

/// The attributes and schemes a kdamond runs, as committed again when a
/// program's targets change.
type Committed = (Attrs, Vec<Damos>);

impl Kernel {
    fn next(
        &mut self,
        stop: &dyn Fn() -> bool,
        child: Option<&Child>,
        started: Instant,
        deadline_us: Option<u64>,
        mut follow: Option<(&mut Follow, Committed)>,
    ) -> Result<Event> {
        if self.trace.is_none() {
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
                self.read_trace(follow.as_ref().map(|(f, _)| &**f))?;
                self.unread = false;
            }
            if let Some(s) = self.ready.pop_front() {
                return Ok(Event::Snapshot(s));
            }
            if let Some(why) = end_now(stop, child, started, deadline_us) {
                return Ok(Event::End(why));
            }
            // The kernel turns the kdamond off once its target is gone.
            if let Some((f, (attrs, schemes))) = follow.as_mut() {
                if f.due() {
                    let at_us = started.elapsed().as_micros() as u64;
                    self.follow(f, at_us, *attrs, schemes)?;
                    let events = f.take_events();
                    if !events.is_empty() {
                        return Ok(Event::Targets(events));
                    }
                }
            }
            if last_state_check.elapsed() > Duration::from_millis(500) {
                last_state_check = Instant::now();
                let state = self
                    .driver
                    .state()
                    .map_err(|e| Error::failed("reading kernel DAMON's state", e))?;
                if state == "off" {
                    // A program's processes may be there still: the kernel
                    // stopped after a change (below).
                    if let Some((f, (attrs, _))) = follow.as_mut() {
                        let at_us = started.elapsed().as_micros() as u64;
                        if self.restart(f, at_us, *attrs)? {
                            let events = f.take_events();
                            if !events.is_empty() {
                                return Ok(Event::Targets(events));
                            }
                            continue;
                        }
                    }
                    return Ok(Event::End("target exited"));
                }
            }
            // Sleep until kdamond writes (it does once per aggregation), at
            // most 100 ms so a stop request or the deadline is seen soon.
            let mut wait = Duration::from_millis(100);
            if let Some(d) = deadline_us {
                wait = wait.min(Duration::from_micros(d).saturating_sub(started.elapsed()));
            }
            let (session, _) = self.trace.as_ref().expect("checked above");
            self.unread = session.wait(wait).map_err(be)?;
        }
    }
}

impl Kernel {
    /// Reads the trace's lines so far into snapshots, for the next calls;
    /// a program's targets named by `f`'s positions.
    fn read_trace(&mut self, f: Option<&Follow>) -> Result<()> {
        let Some((session, asm)) = self.trace.as_mut() else {
            return Ok(());
        };
        let ready = &mut self.ready;
        let last_regions = &mut self.last_regions;
        let trace_stats = &mut self.trace_stats;
        let pid = self.pid;
        session
            .for_each_event(|ev| match ev {
                TraceEvent::SchemeStat(ev) => {
                    // Ours only: the kdamond's thread, its one context.
                    if ev.ctx_idx == 0 && (pid.is_none() || ev.pid == pid) {
                        let i = ev.scheme_idx as usize;
                        if i < 1024 {
                            if trace_stats.len() <= i {
                                trace_stats.resize(i + 1, None);
                            }
                            trace_stats[i] = Some(ev.stats);
                        }
                    }
                }
                TraceEvent::Aggregated(ev) => {
                    if let Some(mut s) = asm.push(ev) {
                        if let Some(f) = f {
                            name_targets(&mut s, f, last_regions);
                        }
                        ready.push_back(s);
                    }
                }
            })
            .map_err(|e| Error::failed("reading the damon_aggregated trace", e))
    }

    /// Kernels before 6.19 stop the kdamond when a commit fails inside it,
    /// and a commit fails when one of its processes exited in the moment
    /// between udamon's last look and the kernel's (`find_get_pid`): a
    /// program whose processes come and go meets that sooner or later. The
    /// kdamond is then started again over the program's processes now,
    /// their regions and ages afresh, and said so. Returns false when the
    /// program has no process left (the run ends).
    fn restart(&mut self, f: &mut Follow, at_us: u64, attrs: Attrs) -> Result<bool> {
        let change = f.scan();
        f.apply(&change, at_us);
        if f.slots.is_empty() {
            return Ok(false);
        }
        let targets: Vec<KTarget> = f
            .slots
            .iter()
            .map(|s| KTarget {
                pid: Some(s.pid),
                ..KTarget::default()
            })
            .collect();
        let failed = |e| Error::failed("starting kernel DAMON again", e);
        self.driver.stop().map_err(failed)?;
        self.driver.set_targets(targets.clone()).map_err(failed)?;
        // The schemes may have changed since the start (a reload).
        // The driver keeps the attributes and schemes committed last.
        let old_cpu = self.pid.and_then(|p| stat_cpu_s(&self.root, p));
        self.driver.start().map_err(failed)?;
        self.pid = self.driver.kdamond_pid();
        // The kdamond's CPU time goes on from the old thread's.
        let new_cpu = self.pid.and_then(|p| stat_cpu_s(&self.root, p));
        self.cpu_offset += old_cpu.unwrap_or(0.0) - new_cpu.unwrap_or(0.0);
        if let Some((_, asm)) = self.trace.as_mut() {
            asm.retarget(targets.len(), attrs.sample_us, attrs.aggr_us);
            asm.only_from(self.pid);
        }
        self.ready.clear();
        self.targets = targets;
        self.last_regions.clear();
        self.warn.warn(&format!(
            "kernel DAMON stopped after the program's processes changed (this kernel \
             stops a kdamond whose commit fails, as when a process exits at that very \
             moment; Linux 6.19+ removes targets without that risk): started again over \
             the {} processes there are now, their regions and ages afresh",
            f.slots.len()
        ));
        Ok(true)
    }
}

/// The regions kernel DAMON starts a process with when it starts (the
/// three regions of its mappings split evenly into `min_nr_regions`,
/// `damon_va_init`), for a process that joins a running kdamond: given no
/// regions, the kernel would give it the three regions alone at its next
/// ops update, and a short-lived process would end before splitting found
/// its working set. Empty (the kernel's choice) when its maps cannot be
/// read.
fn initial_regions(root: &Path, pid: u32, min_nr_regions: u32) -> Vec<udamon_core::AddrRange> {
    let Ok(maps) = udamon_proc::read_maps(root, pid) else {
        return Vec::new();
    };
    let ranges = udamon_proc::maps::monitoring_ranges(&maps);
    udamon_core::vaddr::even_regions(&ranges, min_nr_regions, udamon_core::MIN_REGION_SZ)
        .iter()
        .map(|r| r.ar)
        .collect()
}

/// A program's snapshot from kernel DAMON, whose trace names targets by
/// their position: each target gets its record index, and its regions are
/// kept for a commit that moves it.
fn name_targets(s: &mut Snapshot, f: &Follow, last: &mut Vec<Vec<udamon_core::AddrRange>>) {
    last.resize(f.slots.len(), Vec::new());
    s.targets
        .retain(|t| (t.target_idx as usize) < f.slots.len());
    for t in &mut s.targets {
        let pos = t.target_idx as usize;
        last[pos] = t
            .regions
            .iter()
            .map(|r| udamon_core::AddrRange::new(r.start, r.end))
            .collect();
        t.target_idx = f.id(pos).unwrap_or(t.target_idx);
    }
}

impl Kernel {
    /// Scans the program and commits its new target list to the running
    /// kdamond (online): processes that left are removed where the kernel
    /// can (`obsolete_target`, 6.19+: the others keep their regions and
    /// ages), otherwise dropped from the list, and the targets after them,
    /// which move down one position, are given their regions of the last
    /// snapshot (the kernel matches targets by position: each keeps its
    /// boundaries, the counts and ages of the regions it overlaps at its
    /// new position); arrivals join at the end. A process gone between the
    /// scan and the commit (seen just before it, or refused by the kernel)
    /// sends the program back to be scanned again at once, up to
    /// [`COMMIT_TRIES`] times, then at the next ops update: a short-lived
    /// process is not left out for a whole update because another exited.
    fn follow(
        &mut self,
        f: &mut Follow,
        at_us: u64,
        attrs: Attrs,
        schemes: &[Damos],
    ) -> Result<()> {
        for tries_left in (0..COMMIT_TRIES).rev() {
            let change = f.scan();
            if change.is_empty() {
                return Ok(());
            }
            match self.commit_change(f, &change, attrs, schemes) {
                Ok(true) => {
                    self.took(f, &change, at_us, attrs)?;
                    return Ok(());
                }
                Ok(false) => {}
                Err(e) if tries_left == 0 => self.warn.warn(&format!(
                    "the program's new targets were not committed to kernel DAMON ({e}); \
                     trying again at the next scan"
                )),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Commits the target list `change` makes; `Ok(false)` without trying
    /// when one of its processes is gone since the scan: the kernel would
    /// refuse the commit, and kernels before 6.19 stop the kdamond when a
    /// commit fails inside it.
    fn commit_change(
        &mut self,
        f: &Follow,
        change: &Change,
        attrs: Attrs,
        schemes: &[Damos],
    ) -> std::result::Result<bool, udamon_kdamon::Error> {
        let gone: Vec<usize> = change.gone.iter().map(|g| g.0).collect();
        let gone_since = f
            .slots
            .iter()
            .enumerate()
            .filter(|(pos, _)| !gone.contains(pos))
            .map(|(_, s)| (s.pid, s.start))
            .chain(change.arrived.iter().map(|m| (m.pid, m.start)))
            .any(|(pid, start)| udamon_proc::start_time(&self.root, pid) != Some(start));
        if gone_since {
            return Ok(false);
        }
        let obsolete = self.driver.can_remove_targets();
        let mut list: Vec<KTarget> = Vec::new();
        for (pos, t) in self.targets.iter().enumerate() {
            if gone.contains(&pos) {
                if obsolete {
                    // The kernel looks the pid up even for a target it then
                    // removes: ours exists, and the target is never run.
                    list.push(KTarget {
                        pid: Some(std::process::id()),
                        regions: Vec::new(),
                        obsolete: true,
                    });
                }
                continue;
            }
            let mut t = t.clone();
            if list.len() != pos {
                t.regions = self.last_regions.get(pos).cloned().unwrap_or_default();
            }
            list.push(t);
        }
        list.extend(change.arrived.iter().map(|m| KTarget {
            pid: Some(m.pid),
            regions: initial_regions(&self.root, m.pid, attrs.min_nr_regions),
            obsolete: false,
        }));
        self.driver.commit(attrs, list.clone(), schemes.to_vec())?;
        // From now on the kernel keeps each target's regions itself.
        self.targets = list
            .into_iter()
            .filter(|t| !t.obsolete)
            .map(|t| KTarget {
                regions: Vec::new(),
                ..t
            })
            .collect();
        Ok(true)
    }

    /// After `change` was committed: what the kernel wrote before the
    /// commit took effect is read with the old positions, then the program
    /// and the trace take the new list.
    fn took(&mut self, f: &mut Follow, change: &Change, at_us: u64, attrs: Attrs) -> Result<()> {
        self.read_trace(Some(f))?;
        for &(pos, _) in &change.gone {
            if pos < self.last_regions.len() {
                self.last_regions.remove(pos);
            }
        }
        f.apply(change, at_us);
        if let Some((_, asm)) = self.trace.as_mut() {
            asm.retarget(self.targets.len(), attrs.sample_us, attrs.aggr_us);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_set_from_statm_is_the_one_status_gives() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("proc/9");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("statm"), "1000 300 20 5 0 90 0\n").unwrap();
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        assert_eq!(rss_kb(t.path(), 9), Some(300 * page / 1024));
        assert_eq!(rss_kb(t.path(), 10), None);
        // This process, both ways (it may grow a little in between).
        let me = std::process::id();
        let by_status = rss_swap_kb(Path::new("/"), me).0.unwrap();
        let by_statm = rss_kb(Path::new("/"), me).unwrap();
        assert!(
            by_statm.abs_diff(by_status) <= 1024 + by_status / 10,
            "{by_statm} kB against {by_status}"
        );
    }

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
