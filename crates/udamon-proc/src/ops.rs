//! [`ProcOps`]: the vaddr operations set over live processes, in user space.

use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use udamon_core::schemes::{Action, Damos};
use udamon_core::softdirty::{SoftDirtyReset, WindowEstimator};
use udamon_core::{AddrRange, ApplyOutcome, Operations, SampleWindow, Target};

use crate::act::{live_parts, madvise_advice, pid_reused, Pidfd};
use crate::stat::start_time;

use crate::idle::{IdleBitmap, KpageFlags};
use crate::maps::{monitoring_ranges, read_maps};
use crate::pagemap::Pagemap;
use crate::Error;

/// How accesses are detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessMode {
    /// Idle page tracking: PFNs from pagemap, idle bits from the bitmap.
    /// Sees reads and writes, like the kernel's paddr checks. Needs root.
    IdlePage,
    /// Soft-dirty: `4` written to `clear_refs`, bit 55 of pagemap read back.
    /// **Write-only**: reads are never seen. Needs CONFIG_MEM_SOFT_DIRTY;
    /// clears the soft-dirty state of the whole process each sample.
    SoftDirtyWriteOnly,
}

/// Per-target state.
#[derive(Debug)]
struct ProcTarget {
    pid: u32,
    pagemap: Option<Pagemap>,
    /// Held from the start (on the machine's own /proc): the process
    /// itself, not whatever process has its pid later. Every action goes
    /// through it or checks it around the use.
    pidfd: Option<Pidfd>,
    /// The process's start time (`/proc/PID/stat` field 22) when it was
    /// chosen: tells a recycled pid from the process where no pidfd is.
    start_time: Option<u64>,
    /// Why the target ended, once it has.
    ended: Option<TargetEnd>,
    /// Execs seen since the last [`ProcOps::take_execs`].
    execs: u32,
    /// The maps read for the apply pass at this engine time: one read of
    /// `/proc/PID/maps` per pass, not per region acted on.
    pass_maps: Option<(u64, Vec<crate::Mapping>)>,
}

impl ProcTarget {
    /// Opens what `mode` needs of process `pid` under `root`.
    fn open(root: &Path, pid: u32, mode: AccessMode) -> Result<ProcTarget, Error> {
        let pagemap = Pagemap::open(root, pid)?;
        if mode == AccessMode::SoftDirtyWriteOnly {
            let p = clear_refs_path(root, pid);
            if !p.exists() {
                return Err(Error::Missing {
                    primitive: "soft-dirty reset file",
                    path: p,
                    provides: "CONFIG_PROC_PAGE_MONITOR and CONFIG_MEM_SOFT_DIRTY",
                });
            }
        }
        // Fake trees (tests) name pids of this tree, not the machine's:
        // nothing is ever sent to the machine's process of that pid.
        let real = root == Path::new("/");
        Ok(ProcTarget {
            pid,
            pagemap: Some(pagemap),
            pidfd: if real { Pidfd::open(pid).ok() } else { None },
            start_time: start_time(root, pid),
            ended: None,
            execs: 0,
            pass_maps: None,
        })
    }
}

/// How a target stopped being the process that was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetEnd {
    /// The process exited.
    Exited,
    /// The process exited and its pid now names another process.
    Replaced,
}

impl TargetEnd {
    /// The summary's `ended_by`.
    pub fn label(self) -> &'static str {
        match self {
            TargetEnd::Exited => "target exited",
            TargetEnd::Replaced => "target replaced",
        }
    }
}

/// The operations set for live processes: `target_ranges` from
/// `/proc/PID/maps`, access checks through pagemap and the idle page bitmap
/// (or soft-dirty bits). Every path is under `root` ("/" in production).
///
/// The engine's primitives cannot fail, so an I/O error makes the affected
/// samples count as not accessed and is kept for [`take_error`](Self::take_error).
#[derive(Debug)]
pub struct ProcOps {
    root: PathBuf,
    mode: AccessMode,
    targets: Vec<ProcTarget>,
    bitmap: Option<IdleBitmap>,
    /// Maps sampled PFNs to their folio's head (idle mode); `None` where the
    /// kernel has no kpageflags, then PFNs are used as they are.
    kpageflags: Option<KpageFlags>,
    /// PFN of each region's sampling page marked idle at prepare time
    /// (`None`: not present, counts as not accessed).
    pending: Vec<Option<u64>>,
    /// Soft-dirty reset once per window or less often (`None`: before
    /// every sample).
    sd_window: Option<SoftDirtyWindows>,
    /// Passes of `clear_refs` so far.
    sd_resets: u64,
    /// A residency scan found no `PAGEMAP_SCAN` in the kernel.
    no_residency: bool,
    error: Option<Error>,
}

/// How soft-dirty mode reset the bits: `resets` passes of `clear_refs`
/// over the targets; the period (in windows) at the end, and its smallest
/// and largest (0: reset before every sample, the kernel's estimator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftDirtyStats {
    pub resets: u64,
    pub period: u32,
    pub period_min: u32,
    pub period_max: u32,
}

/// Soft-dirty reset per window: the schedule, and what sets its period.
#[derive(Debug)]
struct SoftDirtyWindows {
    est: WindowEstimator,
    /// The smallest and largest period used.
    period_min: u32,
    period_max: u32,
    /// Choose the period from the reset's cost.
    auto: bool,
    /// Wall time of the last reset, and when the current window began.
    last_reset: Duration,
    window_start: Option<Instant>,
}

/// `--softdirty-reset auto` keeps the resets under this share of the
/// monitor's time.
const AUTO_RESET_SHARE: f64 = 0.10;
/// ... resetting at least every this many windows.
const AUTO_MAX_PERIOD: u32 = 100;

impl ProcOps {
    /// Opens the primitives `mode` needs for `pids` (target `i` is `pids[i]`)
    /// and fails with a precise error when one is missing.
    pub fn new(root: impl Into<PathBuf>, pids: &[u32], mode: AccessMode) -> Result<Self, Error> {
        let root = root.into();
        let bitmap = match mode {
            AccessMode::IdlePage => Some(IdleBitmap::open(&root)?),
            AccessMode::SoftDirtyWriteOnly => None,
        };
        let kpageflags = match mode {
            AccessMode::IdlePage => KpageFlags::open(&root).ok(),
            AccessMode::SoftDirtyWriteOnly => None,
        };
        let mut targets = Vec::with_capacity(pids.len());
        for &pid in pids {
            targets.push(ProcTarget::open(&root, pid, mode)?);
        }
        Ok(Self {
            root,
            mode,
            targets,
            bitmap,
            kpageflags,
            pending: Vec::new(),
            sd_window: None,
            sd_resets: 0,
            no_residency: false,
            error: None,
        })
    }

    pub fn mode(&self) -> AccessMode {
        self.mode
    }

    /// Adds process `pid` as the next target (position `len`), opened as
    /// [`new`](Self::new) opens its targets. With `start`, the process must
    /// still be the one that started then (a pid reused since it was seen
    /// is refused as gone).
    pub fn add_target(&mut self, pid: u32, start: Option<u64>) -> Result<(), Error> {
        let t = ProcTarget::open(&self.root, pid, self.mode)?;
        if start.is_some() && t.start_time != start {
            let path = self.proc_dir(pid);
            return Err(Error::Gone { pid, path });
        }
        self.targets.push(t);
        Ok(())
    }

    /// Drops target `i`; the targets after it move down one position (as
    /// the engine's `remove_target` moves its targets).
    pub fn remove_target(&mut self, i: usize) {
        if i < self.targets.len() {
            self.targets.remove(i);
        }
    }

    /// The number of targets.
    pub fn nr_targets(&self) -> usize {
        self.targets.len()
    }

    /// The pid and start time target `i` was opened with.
    pub fn identity(&self, i: usize) -> Option<(u32, Option<u64>)> {
        self.targets.get(i).map(|t| (t.pid, t.start_time))
    }

    /// When soft-dirty mode resets the bits (idle mode ignores it).
    /// `Sample` resets before every sample; the others at the start of
    /// every Nth window, and convert counts at each window's end
    /// ([`udamon_core::softdirty`]); `Auto` picks the period at each
    /// window's end so that resets take at most a tenth of the time.
    pub fn set_soft_dirty_reset(&mut self, reset: SoftDirtyReset) {
        self.sd_window = reset.first_period().map(|n| SoftDirtyWindows {
            est: WindowEstimator::new(n),
            period_min: n,
            period_max: n,
            auto: reset == SoftDirtyReset::Auto,
            last_reset: Duration::ZERO,
            window_start: None,
        });
    }

    /// How soft-dirty mode reset the bits so far (`None` in idle mode).
    pub fn soft_dirty_stats(&self) -> Option<SoftDirtyStats> {
        let (period, period_min, period_max) = self
            .sd_window
            .as_ref()
            .map_or((0, 0, 0), |w| (w.est.period(), w.period_min, w.period_max));
        (self.mode == AccessMode::SoftDirtyWriteOnly).then_some(SoftDirtyStats {
            resets: self.sd_resets,
            period,
            period_min,
            period_max,
        })
    }

    /// Resets the soft-dirty bits of every live target.
    fn clear_soft_dirty(&mut self, nr: usize) {
        self.sd_resets += 1;
        for i in 0..nr.min(self.targets.len()) {
            if !self.alive(i) {
                continue;
            }
            let p = clear_refs_path(&self.root, self.targets[i].pid);
            // Never created: a process that vanished mid-sample
            // must not get a file back (nor a fake tree a stray one).
            let reset = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&p)
                .and_then(|mut f| std::io::Write::write_all(&mut f, b"4"));
            if let Err(e) = reset {
                if self.alive(i) {
                    self.note(Error::io("writing", &p, e));
                }
            }
        }
    }

    /// The first error since the last call, if any.
    pub fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    /// Whether a residency scan (the enhanced mode's) found the kernel
    /// without `PAGEMAP_SCAN`: the mode then monitors whole mappings.
    pub fn residency_unavailable(&self) -> bool {
        self.no_residency
    }

    fn note(&mut self, e: Error) {
        self.error.get_or_insert(e);
    }

    fn proc_dir(&self, pid: u32) -> PathBuf {
        self.root.join(format!("proc/{pid}"))
    }

    /// Pagemap entries of the sampling addresses of each target, read for
    /// every target in one batch ([`crate::pagemap::entries_many`]); `None`
    /// for a target that has ended, and for one whose read failed (its
    /// error noted, and the target marked gone, when its process vanished).
    /// Whether a process still runs is asked only when its read fails: the
    /// pagemap opened at the start reads the address space of that process
    /// alone, and reads nothing once it exited, so a sample never needs the
    /// check (one system call per target per sample saved).
    fn sample_entries(&mut self, targets: &[Target]) -> Vec<Option<Vec<crate::PagemapEntry>>> {
        let addrs: Vec<Vec<u64>> = targets
            .iter()
            .map(|t| t.regions.iter().map(|r| r.sampling_addr).collect())
            .collect();
        let mut read = Vec::with_capacity(targets.len());
        let mut items = Vec::with_capacity(targets.len());
        for (i, a) in addrs.iter().enumerate() {
            let Some(t) = self.targets.get(i) else {
                continue;
            };
            if let (None, Some(pm)) = (t.ended, t.pagemap.as_ref()) {
                read.push(i);
                items.push((pm, &a[..]));
            }
        }
        let got = crate::pagemap::entries_many(&items);
        let mut out: Vec<Option<Vec<crate::PagemapEntry>>> = vec![None; targets.len()];
        for (i, r) in read.into_iter().zip(got) {
            match r {
                Ok(e) => out[i] = Some(e),
                Err(e) => {
                    if self.alive(i) {
                        self.note(e);
                    }
                }
            }
        }
        out
    }

    /// Whether target `i` is still the process that was chosen; marks it
    /// ended (exited, or its pid reused) when it is not.
    /// `move_pages` of `parts` of target `idx` to weighted destinations,
    /// each page to the node the kernel's interleave gives its page offset
    /// in its mapping (the file offset for file mappings, the address for
    /// anonymous ones, as a fresh anonymous mapping's offset is). When a
    /// destination has less room than its share, every share shrinks
    /// alike: user space never fills a node.
    fn move_weighted(
        &mut self,
        idx: usize,
        parts: &[AddrRange],
        dests: &[udamon_core::schemes::Dest],
    ) -> std::io::Result<u64> {
        const PAGE: u64 = 4096;
        let total: u64 = parts.iter().map(AddrRange::sz).sum();
        let weights: u64 = dests.iter().map(|d| u64::from(d.weight)).sum();
        if total == 0 || weights == 0 {
            return Ok(0);
        }
        let mut allowed = total;
        for d in dests.iter().filter(|d| d.weight > 0) {
            let share = (u128::from(total) * u128::from(d.weight) / u128::from(weights)) as u64;
            if let Some(room) = node_room(&self.root, d.node) {
                if room < share {
                    allowed = allowed.min(
                        (u128::from(total) * u128::from(room) / u128::from(share.max(1))) as u64,
                    );
                }
            }
        }
        let parts = first_bytes(parts, allowed);
        let maps = self.targets[idx]
            .pass_maps
            .as_ref()
            .map(|(_, m)| m.clone())
            .unwrap_or_default();
        let node_of = |addr: u64| {
            let index = match maps
                .iter()
                .find(|m| m.range.start <= addr && addr < m.range.end)
            {
                Some(m) if m.inode != 0 => m.offset / PAGE + (addr - m.range.start) / PAGE,
                _ => addr / PAGE,
            };
            udamon_core::schemes::dest_index(dests, index).map_or(0, |i| dests[i].node)
        };
        let fd = self.targets[idx]
            .pidfd
            .as_ref()
            .expect("checked by the caller");
        fd.move_to_nodes(&parts, node_of)
    }

    fn alive(&mut self, i: usize) -> bool {
        if self.targets.get(i).is_none_or(|t| t.ended.is_some()) {
            return false;
        }
        let end = self.end_now(i);
        if let Some(e) = end {
            self.targets[i].ended = Some(e);
        }
        end.is_none()
    }

    /// Whether (and how) target `i` has stopped being the chosen process,
    /// looked up now.
    fn end_now(&self, i: usize) -> Option<TargetEnd> {
        let t = self.targets.get(i)?;
        // Read only when needed: this runs at every sample.
        let now = || start_time(&self.root, t.pid);
        match (&t.pidfd, t.start_time) {
            // A pidfd turns readable when its process exits; until then the
            // pid cannot be reused.
            (Some(fd), _) if !fd.exited() => None,
            (Some(_), _) => Some(match now() {
                Some(_) => TargetEnd::Replaced,
                None => TargetEnd::Exited,
            }),
            (None, Some(st)) => match now() {
                Some(n) if n == st => None,
                Some(_) => Some(TargetEnd::Replaced),
                None => Some(TargetEnd::Exited),
            },
            (None, None) => (!self.proc_dir(t.pid).exists()).then_some(TargetEnd::Exited),
        }
    }

    /// How target `i` ended, if it has.
    pub fn ended(&self, i: usize) -> Option<TargetEnd> {
        self.targets
            .get(i)
            .and_then(|t| t.ended)
            .or_else(|| self.end_now(i))
    }

    /// Execs of target `i` seen since the last call. An exec replaces the
    /// address space: the pagemap opened before it reads nothing, so it is
    /// reopened, and whoever runs the monitor should start the target's
    /// regions afresh (their ages describe the old program).
    pub fn take_execs(&mut self, i: usize) -> u32 {
        self.targets
            .get_mut(i)
            .map_or(0, |t| std::mem::take(&mut t.execs))
    }

    /// Checks whether target `i` exec'd (its pagemap reads nothing any
    /// more) and if so reopens its pagemap. Returns true on an exec.
    fn check_exec(&mut self, i: usize) -> bool {
        if !self.alive(i) {
            return false;
        }
        let t = &self.targets[i];
        let stale = t.pagemap.as_ref().is_some_and(|pm| pm.stale());
        if !stale {
            return false;
        }
        match Pagemap::open(&self.root, t.pid) {
            // A new program's pagemap reads; one that reads nothing either
            // belongs to a process on its way out, not to an exec.
            Ok(pm) if pm.stale() => false,
            Ok(pm) => {
                let t = &mut self.targets[i];
                t.pagemap = Some(pm);
                t.pass_maps = None;
                t.execs += 1;
                true
            }
            Err(e) => {
                if self.alive(i) {
                    self.note(e);
                }
                false
            }
        }
    }
}

/// `ROOT/proc/PID/clear_refs`.
pub fn clear_refs_path(root: &Path, pid: u32) -> PathBuf {
    root.join(format!("proc/{pid}/clear_refs"))
}

impl Operations for ProcOps {
    fn target_ranges(&mut self, idx: usize, _target: &Target) -> Option<Vec<AddrRange>> {
        let pid = self.targets.get(idx)?.pid;
        self.check_exec(idx);
        let maps = read_maps(&self.root, pid);
        // Read, then checked: maps of a process that has since exited (and
        // whose pid may be another's now) are not used.
        if !self.alive(idx) {
            return None;
        }
        match maps {
            Ok(m) => Some(monitoring_ranges(&m)),
            Err(Error::Gone { .. }) => None,
            Err(e) => {
                self.note(e);
                None
            }
        }
    }

    /// Populated pages (present or swapped) from `PAGEMAP_SCAN`; `None`
    /// where the kernel has no such request (before 6.7), which
    /// [`ProcOps::residency_unavailable`] then says.
    fn resident_ranges(&mut self, idx: usize, ranges: &[AddrRange]) -> Option<Vec<AddrRange>> {
        if !self.alive(idx) {
            return None;
        }
        let pm = self.targets.get(idx)?.pagemap.as_ref()?;
        match pm.populated(ranges) {
            Ok(Some(r)) => Some(r),
            Ok(None) => {
                self.no_residency = true;
                None
            }
            Err(e) => {
                if self.alive(idx) {
                    self.note(e);
                }
                None
            }
        }
    }

    fn prepare_access_checks(&mut self, targets: &[Target], _window: SampleWindow) {
        self.pending.clear();
        match self.mode {
            AccessMode::IdlePage => {
                let entries = self.sample_entries(targets);
                for (t, e) in targets.iter().zip(entries) {
                    match e {
                        Some(e) => self.pending.extend(e.iter().map(|e| e.pfn())),
                        None => self.pending.extend(t.regions.iter().map(|_| None)),
                    }
                }
                let pfns: Vec<u64> = self.pending.iter().flatten().copied().collect();
                if pfns.is_empty() {
                    return;
                }
                if pfns.iter().all(|&p| p == 0) {
                    let path = crate::pagemap::pagemap_path(&self.root, self.targets[0].pid);
                    self.note(Error::PfnHidden { path });
                    self.pending.iter_mut().for_each(|p| *p = None);
                    return;
                }
                if let Some(k) = &self.kpageflags {
                    let vaddrs: Vec<u64> = targets
                        .iter()
                        .flat_map(|t| t.regions.iter().map(|r| r.sampling_addr))
                        .zip(&self.pending)
                        .filter_map(|(a, p)| p.map(|_| a))
                        .collect();
                    match k.lru_heads(&pfns, &vaddrs) {
                        Ok(heads) => {
                            let mut it = heads.into_iter();
                            for p in self.pending.iter_mut().filter(|p| p.is_some()) {
                                *p = it.next().expect("one head per pfn");
                            }
                        }
                        Err(e) => self.note(e),
                    }
                }
                let bm = self.bitmap.as_ref().expect("idle mode opens the bitmap");
                if let Err(e) = bm.mark_pending(&mut self.pending) {
                    self.note(e);
                }
            }
            AccessMode::SoftDirtyWriteOnly => {
                let due = self.sd_window.as_mut().map(|w| {
                    w.window_start.get_or_insert_with(Instant::now);
                    w.est.take_reset()
                });
                match due {
                    None => self.clear_soft_dirty(targets.len()),
                    Some(true) => {
                        let t = Instant::now();
                        self.clear_soft_dirty(targets.len());
                        if let Some(w) = self.sd_window.as_mut() {
                            w.last_reset = t.elapsed();
                        }
                    }
                    Some(false) => {}
                }
            }
        }
    }

    fn check_accesses(
        &mut self,
        targets: &[Target],
        _window: SampleWindow,
        accessed: &mut Vec<bool>,
    ) {
        accessed.clear();
        match self.mode {
            AccessMode::IdlePage => {
                let nr: usize = targets.iter().map(|t| t.regions.len()).sum();
                if self.pending.len() != nr {
                    accessed.resize(nr, false);
                    return;
                }
                let bm = self.bitmap.as_ref().expect("idle mode opens the bitmap");
                if let Err(e) = bm.read_pending(&self.pending, accessed) {
                    self.note(e);
                }
            }
            AccessMode::SoftDirtyWriteOnly => {
                let entries = self.sample_entries(targets);
                for (t, e) in targets.iter().zip(entries) {
                    match e {
                        Some(e) => accessed.extend(e.iter().map(|e| e.present() && e.soft_dirty())),
                        None => accessed.extend(t.regions.iter().map(|_| false)),
                    }
                }
                if let Some(w) = self.sd_window.as_mut() {
                    w.est.sampled();
                }
            }
        }
    }

    fn end_window(&mut self, counts: &mut [u32]) {
        let Some(w) = self.sd_window.as_mut() else {
            return;
        };
        w.est.end_window(counts);
        let window = w.window_start.replace(Instant::now()).map(|t| t.elapsed());
        if let (true, Some(window)) = (w.auto, window) {
            // One reset per period may take AUTO_RESET_SHARE of the
            // period's time (windows as long as this one).
            let budget = window.as_secs_f64() * AUTO_RESET_SHARE;
            let period = if budget > 0.0 {
                (w.last_reset.as_secs_f64() / budget).ceil() as u32
            } else {
                1
            };
            let period = period.clamp(1, AUTO_MAX_PERIOD);
            w.est.set_period(period);
            w.period_min = w.period_min.min(period);
            w.period_max = w.period_max.max(period);
        }
    }

    fn target_valid(&self, idx: usize) -> bool {
        self.targets
            .get(idx)
            .is_some_and(|t| t.ended.is_none() && self.end_now(idx).is_none())
    }

    /// `process_madvise` (pageout, cold, willneed, collapse) or
    /// `move_pages` (migrate_hot/cold to `target_nid`) on the parts of
    /// `range` still mapped right now. Ops filters are not evaluated here:
    /// callers refuse schemes that have them (see [`unsupported_reason`]).
    fn apply_scheme(
        &mut self,
        idx: usize,
        range: AddrRange,
        scheme: &Damos,
        now_us: u64,
    ) -> ApplyOutcome {
        let started = Instant::now();
        // Never act on a process the run did not verify at this moment: not
        // after it exited (its pid may be another's), not on a program it
        // exec'd into (the regions describe the old one), not on a fake
        // tree's pid (it names no process of this machine).
        if self.check_exec(idx) || !self.alive(idx) {
            return ApplyOutcome::default();
        }
        let pid = self.targets[idx].pid;
        if self.targets[idx].pidfd.is_none() {
            self.note(Error::Action {
                what: format!("{} of pid {pid}", scheme.action.name()),
                source: std::io::Error::other(
                    "no pidfd (a fake /proc tree, or a kernel before 5.3): nothing is done",
                ),
            });
            return ApplyOutcome::default();
        }
        // The mappings as they are in this pass (one read per pass: the
        // regions of a pass are acted on within the same moment).
        let cached = self.targets[idx]
            .pass_maps
            .as_ref()
            .filter(|(at, _)| *at == now_us)
            .map(|(_, m)| live_parts(range, m));
        let parts = match cached {
            Some(p) => p,
            None => match read_maps(&self.root, pid) {
                Ok(m) if self.alive(idx) => {
                    let p = live_parts(range, &m);
                    self.targets[idx].pass_maps = Some((now_us, m));
                    p
                }
                Ok(_) | Err(Error::Gone { .. }) => return ApplyOutcome::default(),
                Err(e) => {
                    self.note(e);
                    return ApplyOutcome::default();
                }
            },
        };
        let passed: u64 = parts.iter().map(AddrRange::sz).sum();
        let fd = self.targets[idx].pidfd.as_ref();
        let result = match (scheme.action, madvise_advice(scheme.action), fd) {
            (_, _, None) => Ok(0),
            (_, Some(advice), Some(fd)) => fd.madvise(&parts, advice),
            // move_pages takes a pid: the pidfd is checked around every call
            // (act.rs says what that proves); the kernel has no pidfd form.
            (Action::MigrateHot | Action::MigrateCold, _, Some(_)) if !scheme.dests.is_empty() => {
                self.move_weighted(idx, &parts, &scheme.dests)
            }
            (Action::MigrateHot | Action::MigrateCold, _, Some(fd)) => match scheme.target_nid {
                // Never fill the destination: the kernel's reclaim backs its
                // own migrations up, user space has no such backstop.
                Some(nid) => match node_room(&self.root, nid) {
                    Some(room) => fd.move_to_node(&first_bytes(&parts, room), nid),
                    None => fd.move_to_node(&parts, nid),
                },
                None => Ok(0),
            },
            _ => Ok(0),
        };
        let sz_applied = match result {
            Ok(n) => n,
            Err(e) => {
                // A call that may have reached another process is said even
                // though the target is gone.
                if pid_reused(&e) || self.alive(idx) {
                    let what = format!("{} of pid {pid}", scheme.action.name());
                    self.note(Error::Action { what, source: e });
                }
                0
            }
        };
        ApplyOutcome {
            sz_applied,
            sz_ops_filter_passed: passed,
            cost_us: started.elapsed().as_micros().min(u128::from(u64::MAX)) as u64,
        }
    }

    /// Live goal metrics: `rss_bp` from `/proc/PID/status` and the mapped
    /// size in maps; node metrics from the node's `meminfo`; `some_mem_psi_us`
    /// as the cumulative `some total=` of `/proc/pressure/memory`; refaults
    /// as the cumulative `workingset_refault_anon` + `_file` of `/proc/vmstat`.
    fn goal_metric(
        &mut self,
        idx: usize,
        goal: &udamon_core::schemes::QuotaGoal,
        _now_us: u64,
    ) -> Option<u64> {
        use udamon_core::schemes::GoalMetric;
        let read = |p: &str| std::fs::read_to_string(self.root.join(p)).ok();
        match goal.metric {
            GoalMetric::RssBp => {
                let pid = self.targets.get(idx)?.pid;
                let rss = proc_field(&read(&format!("proc/{pid}/status"))?, "VmRSS:")? * 1024;
                let mapped: u64 = read_maps(&self.root, pid)
                    .ok()?
                    .iter()
                    .map(|m| m.range.sz())
                    .sum();
                (mapped > 0).then(|| rss * 10_000 / mapped)
            }
            GoalMetric::SomeMemPsiUs => {
                let text = read("proc/pressure/memory")?;
                let some = text.lines().find(|l| l.starts_with("some"))?;
                some.split_whitespace()
                    .find_map(|w| w.strip_prefix("total=")?.parse().ok())
            }
            GoalMetric::RefaultRate => {
                let text = read("proc/vmstat")?;
                Some(
                    proc_field(&text, "workingset_refault_anon")?
                        + proc_field(&text, "workingset_refault_file").unwrap_or(0),
                )
            }
            // node_mem_*, node_memcg_*, active/inactive; None for the rest.
            _ => machine_goal_value(&self.root, goal),
        }
    }

    /// Free memory per mille of the total, from `/proc/meminfo`.
    fn free_mem_rate(&mut self, _now_us: u64) -> Option<u32> {
        meminfo_free_rate(&self.root)
    }
}

/// The current value of a goal on the machine's memory, read where the
/// kernel reads it: a node's `meminfo` (`node_mem_*_bp`), a cgroup's
/// `memory.numa_stat` over its node (`node_memcg_*_bp`), `/proc/meminfo`'s
/// LRU lists (`active_mem_bp`, `inactive_mem_bp`). `None` for the other
/// metrics, or where the files cannot be read. Kernel DAMON does not
/// publish these (its `current_value` file holds user input only), so
/// udamon reports this reading for its kdamonds' goals too.
pub fn machine_goal_value(root: &Path, goal: &udamon_core::schemes::QuotaGoal) -> Option<u64> {
    use udamon_core::schemes::GoalMetric as M;
    match goal.metric {
        M::NodeMemUsedBp | M::NodeMemFreeBp => {
            node_mem_bp(root, goal.nid, goal.metric == M::NodeMemFreeBp)
        }
        M::NodeMemcgUsedBp | M::NodeMemcgFreeBp => node_memcg_bp(
            root,
            goal.nid,
            goal.path.as_deref().unwrap_or("/"),
            goal.metric == M::NodeMemcgFreeBp,
        ),
        M::ActiveMemBp | M::InactiveMemBp => {
            let text = std::fs::read_to_string(root.join("proc/meminfo")).ok()?;
            let active = proc_field(&text, "Active:")?;
            let inactive = proc_field(&text, "Inactive:")?;
            let part = if goal.metric == M::ActiveMemBp {
                active
            } else {
                inactive
            };
            Some(part * 10_000 / (active + inactive).max(1))
        }
        _ => None,
    }
}

/// The number after the word `name` on the first line that has that word:
/// `VmRSS:` in `/proc/PID/status` ("VmRSS:\t 4096 kB" gives 4096),
/// `MemFree:` in `/proc/meminfo` or a node's `meminfo` ("Node 1 MemFree:
/// 250 kB"), `workingset_refault_anon` in `/proc/vmstat`.
pub fn proc_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        words.by_ref().find(|w| *w == name)?;
        words.next()?.parse().ok()
    })
}

/// `MemFree` per mille of `MemTotal` in `ROOT/proc/meminfo`.
pub(crate) fn meminfo_free_rate(root: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(root.join("proc/meminfo")).ok()?;
    let (total, free) = (
        proc_field(&text, "MemTotal:")?,
        proc_field(&text, "MemFree:")?,
    );
    (total > 0).then(|| (free * 1000 / total) as u32)
}

/// Node `nid`'s free (or used) memory in basis points of its total, from
/// its `meminfo`: the kernel's `node_mem_free_bp` and `node_mem_used_bp`.
pub fn node_mem_bp(root: &Path, nid: u32, free: bool) -> Option<u64> {
    let text =
        std::fs::read_to_string(root.join(format!("sys/devices/system/node/node{nid}/meminfo")))
            .ok()?;
    let (total, free_kb) = (
        proc_field(&text, "MemTotal:")?,
        proc_field(&text, "MemFree:")?,
    );
    if total == 0 {
        return None;
    }
    Some(if free {
        free_kb * 10_000 / total
    } else {
        (total - free_kb.min(total)) * 10_000 / total
    })
}

/// The kernel's `node_memcg_used_bp` (or `_free_bp`): the LRU pages of
/// memory cgroup `path` on node `nid` (the `active_*` and `inactive_*`
/// lines of its `memory.numa_stat`) in basis points of the node's total,
/// or the rest. A cgroup that does not exist uses nothing, as in the
/// kernel.
pub fn node_memcg_bp(root: &Path, nid: u32, path: &str, free: bool) -> Option<u64> {
    let node =
        std::fs::read_to_string(root.join(format!("sys/devices/system/node/node{nid}/meminfo")))
            .ok()?;
    let total = proc_field(&node, "MemTotal:")? * 1024;
    if total == 0 {
        return None;
    }
    let cg = root
        .join("sys/fs/cgroup")
        .join(path.trim_start_matches('/'))
        .join("memory.numa_stat");
    let used = match std::fs::read_to_string(cg) {
        Ok(text) => {
            let key = format!("N{nid}=");
            text.lines()
                .filter(|l| {
                    [
                        "active_anon ",
                        "inactive_anon ",
                        "active_file ",
                        "inactive_file ",
                    ]
                    .iter()
                    .any(|k| l.starts_with(k))
                })
                .filter_map(|l| {
                    l.split_whitespace()
                        .find_map(|w| w.strip_prefix(key.as_str())?.parse::<u64>().ok())
                })
                .sum::<u64>()
        }
        Err(_) => 0,
    };
    let used = used.min(total);
    Some(if free { total - used } else { used } * 10_000 / total)
}

/// The share of a node (basis points) that migrations by udamon's engine
/// leave free: a floor under the node's free memory.
pub const NODE_FREE_FLOOR_BP: u64 = 50;

/// Bytes that may still be migrated onto node `nid` before its free memory
/// falls to [`NODE_FREE_FLOOR_BP`] of its total; `None` when its meminfo
/// cannot be read.
pub fn node_room(root: &Path, nid: u32) -> Option<u64> {
    let text =
        std::fs::read_to_string(root.join(format!("sys/devices/system/node/node{nid}/meminfo")))
            .ok()?;
    let total = proc_field(&text, "MemTotal:")? * 1024;
    let free = proc_field(&text, "MemFree:")? * 1024;
    Some(free.saturating_sub(total / 10_000 * NODE_FREE_FLOOR_BP))
}

/// The first `bytes` of `parts`, whole pages.
fn first_bytes(parts: &[AddrRange], bytes: u64) -> Vec<AddrRange> {
    let mut left = bytes / 4096 * 4096;
    let mut out = Vec::new();
    for p in parts {
        if left == 0 {
            break;
        }
        let take = p.sz().min(left);
        out.push(AddrRange::new(p.start, p.start + take));
        left -= take;
    }
    out
}

/// Why user-space operations cannot run `scheme`, if they cannot: actions
/// only the kernel has (LRU sorting, `hugepage`/`nohugepage` of another
/// process, `mlock`), migrations without a target node, and ops filters
/// (anon, memcg, young, hugepage_size, unmapped), which need the kernel's
/// page walk.
pub fn unsupported_reason(scheme: &Damos) -> Option<String> {
    let a = scheme.action;
    if !crate::act::supported(a) {
        return Some(format!(
            "action {} cannot be done from user space on another process \
             (process_madvise takes only pageout, cold, willneed and collapse; \
             move_pages does migrate_hot/cold); use --ops kdamond on a kernel with DAMON",
            a.name()
        ));
    }
    if matches!(a, Action::MigrateHot | Action::MigrateCold) && !scheme.has_destination() {
        return Some(format!(
            "action {} needs a target node (target_nid) or weighted destinations (dests)",
            a.name()
        ));
    }
    if let Some(f) = scheme.filters.iter().find(|f| !f.kind.is_core()) {
        return Some(format!(
            "filter {:?} needs the kernel's page walk; user-space operations evaluate only \
             address and target filters (use --ops kdamond)",
            f.kind
        ));
    }
    None
}

/// Runs an operations set at the pace of a real clock: `check_accesses`
/// waits until the sampling window, which starts when
/// `prepare_access_checks` returns, has really passed. The engine above
/// keeps counting on its logical clock.
#[derive(Debug)]
pub struct Paced<O> {
    inner: O,
    prepared: Option<Instant>,
}

impl<O> Paced<O> {
    pub fn new(inner: O) -> Self {
        Self {
            inner,
            prepared: None,
        }
    }

    pub fn inner(&self) -> &O {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut O {
        &mut self.inner
    }
}

impl<O: Operations> Operations for Paced<O> {
    fn target_ranges(&mut self, idx: usize, target: &Target) -> Option<Vec<AddrRange>> {
        self.inner.target_ranges(idx, target)
    }

    fn resident_ranges(&mut self, idx: usize, ranges: &[AddrRange]) -> Option<Vec<AddrRange>> {
        self.inner.resident_ranges(idx, ranges)
    }

    fn node_bytes(&mut self, idx: usize, range: AddrRange, nid: u32) -> Option<(u64, u64)> {
        self.inner.node_bytes(idx, range, nid)
    }

    fn prepare_access_checks(&mut self, targets: &[Target], window: SampleWindow) {
        self.inner.prepare_access_checks(targets, window);
        self.prepared = Some(Instant::now());
    }

    fn check_accesses(
        &mut self,
        targets: &[Target],
        window: SampleWindow,
        accessed: &mut Vec<bool>,
    ) {
        if let Some(t) = self.prepared.take() {
            let len = Duration::from_micros(window.end_us.saturating_sub(window.start_us));
            if let Some(rest) = len.checked_sub(t.elapsed()) {
                std::thread::sleep(rest);
            }
        }
        self.inner.check_accesses(targets, window, accessed);
    }

    fn end_window(&mut self, counts: &mut [u32]) {
        self.inner.end_window(counts)
    }

    fn target_valid(&self, idx: usize) -> bool {
        self.inner.target_valid(idx)
    }

    fn apply_scheme(
        &mut self,
        idx: usize,
        range: AddrRange,
        scheme: &Damos,
        now_us: u64,
    ) -> ApplyOutcome {
        self.inner.apply_scheme(idx, range, scheme, now_us)
    }

    fn goal_metric(
        &mut self,
        idx: usize,
        goal: &udamon_core::schemes::QuotaGoal,
        now_us: u64,
    ) -> Option<u64> {
        self.inner.goal_metric(idx, goal, now_us)
    }

    fn free_mem_rate(&mut self, now_us: u64) -> Option<u32> {
        self.inner.free_mem_rate(now_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idle::tests::{fake_bitmap, word};
    use crate::PagemapEntry;
    use std::os::unix::fs::FileExt;
    use udamon_core::softdirty::SoftDirtyReset;
    use udamon_core::Region;

    const P: u64 = PagemapEntry::PRESENT;

    fn fake_proc(root: &Path, pid: u32, entries: &[(u64, u64)]) {
        let dir = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("maps"),
            "00010000-00020000 r-xp 00000000 00:00 0 /bin/x\n\
             00100000-00110000 rw-p 00000000 00:00 0 [heap]\n\
             00400000-00410000 rw-p 00000000 00:00 0 [stack]\n",
        )
        .unwrap();
        std::fs::write(dir.join("clear_refs"), "").unwrap();
        let f = std::fs::File::create(dir.join("pagemap")).unwrap();
        for &(page, e) in entries {
            f.write_all_at(&e.to_ne_bytes(), page * 8).unwrap();
        }
    }

    fn target(pid: u32, samples: &[u64]) -> Target {
        let mut t = Target::new(pid);
        for &a in samples {
            let mut r = Region::new(a, a + 0x1000);
            r.sampling_addr = a;
            t.regions.push(r);
        }
        t
    }

    const W: SampleWindow = SampleWindow {
        start_us: 0,
        end_us: 5000,
    };

    #[test]
    fn idle_mode_marks_then_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Pages 0x10, 0x100 present at PFNs 70, 3; page 0x400 not present.
        fake_proc(root, 42, &[(0x10, P | 70), (0x100, P | 3)]);
        fake_bitmap(root, 128);
        let mut ops = ProcOps::new(root, &[42], AccessMode::IdlePage).unwrap();
        let t = [target(42, &[0x10_000, 0x100_000, 0x400_000])];
        assert_eq!(
            ops.target_ranges(0, &t[0]).unwrap(),
            vec![
                AddrRange::new(0x10000, 0x20000),
                AddrRange::new(0x100000, 0x110000),
                AddrRange::new(0x400000, 0x410000)
            ]
        );
        ops.prepare_access_checks(&t, W);
        assert_eq!(word(root, 0), 1 << 3);
        assert_eq!(word(root, 1), 1 << 6);
        assert_eq!(
            ops.soft_dirty_stats(),
            None,
            "idle mode never resets soft-dirty"
        );
        // The "kernel" sees PFN 70 accessed: its idle bit is cleared.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(crate::idle::bitmap_path(root))
            .unwrap();
        f.write_all_at(&0u64.to_ne_bytes(), 8).unwrap();
        let mut acc = Vec::new();
        ops.check_accesses(&t, W, &mut acc);
        assert_eq!(
            acc,
            vec![true, false, false],
            "non-present counts as not accessed"
        );
        assert!(ops.take_error().is_none());
        assert!(ops.target_valid(0));
    }

    #[test]
    fn hidden_pfns_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path(), 42, &[(0x10, P)]);
        fake_bitmap(dir.path(), 128);
        let mut ops = ProcOps::new(dir.path(), &[42], AccessMode::IdlePage).unwrap();
        let t = [target(42, &[0x10_000])];
        ops.prepare_access_checks(&t, W);
        let mut acc = Vec::new();
        ops.check_accesses(&t, W, &mut acc);
        assert_eq!(acc, vec![false]);
        let e = ops.take_error().unwrap();
        assert!(e.to_string().contains("needs root or CAP_SYS_ADMIN"), "{e}");
    }

    #[test]
    fn soft_dirty_mode_clears_and_reads_bit_55() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sd = PagemapEntry::SOFT_DIRTY;
        fake_proc(root, 42, &[(0x10, P | sd | 1), (0x100, P | 2), (0x400, sd)]);
        let mut ops = ProcOps::new(root, &[42], AccessMode::SoftDirtyWriteOnly).unwrap();
        let t = [target(42, &[0x10_000, 0x100_000, 0x400_000])];
        ops.prepare_access_checks(&t, W);
        assert_eq!(
            std::fs::read_to_string(clear_refs_path(root, 42)).unwrap(),
            "4"
        );
        let mut acc = Vec::new();
        ops.check_accesses(&t, W, &mut acc);
        assert_eq!(acc, vec![true, false, false]);
        let st = ops.soft_dirty_stats().unwrap();
        assert_eq!(
            (st.resets, st.period, st.period_min, st.period_max),
            (1, 0, 0, 0)
        );
    }

    #[test]
    fn soft_dirty_reset_per_window_clears_at_window_starts_and_converts_counts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sd = PagemapEntry::SOFT_DIRTY;
        fake_proc(root, 42, &[(0x10, P | sd | 1), (0x100, P | 2)]);
        let mut ops = ProcOps::new(root, &[42], AccessMode::SoftDirtyWriteOnly).unwrap();
        ops.set_soft_dirty_reset(SoftDirtyReset::Windows(2));
        let t = [target(42, &[0x10_000, 0x100_000])];
        let cr = clear_refs_path(root, 42);
        let mut resets = Vec::new();
        for window in 0..4 {
            let mut counts = [0u32; 2];
            for _ in 0..20 {
                std::fs::write(&cr, "").unwrap();
                ops.prepare_access_checks(&t, W);
                resets.push(std::fs::read_to_string(&cr).unwrap() == "4");
                let mut acc = Vec::new();
                ops.check_accesses(&t, W, &mut acc);
                for (c, a) in counts.iter_mut().zip(acc) {
                    *c += u32::from(a);
                }
            }
            ops.end_window(&mut counts);
            // Written at every sample since the reset: the most there is;
            // never written: nothing.
            assert_eq!(counts, [20, 0], "window {window}");
        }
        let at: Vec<usize> = resets
            .iter()
            .enumerate()
            .filter(|(_, r)| **r)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            at,
            vec![0, 40],
            "a reset at the start of every second window"
        );
        let st = ops.soft_dirty_stats().unwrap();
        assert_eq!(st.period, 2);
        assert_eq!(
            (st.resets, st.period, st.period_min, st.period_max),
            (2, 2, 2, 2)
        );
    }

    /// Four targets sampled in one batch: 41 and 45 read as they would
    /// alone; 43's pagemap cannot be read (a directory in its place), so its
    /// regions count as not accessed and the error is noted; 44 has ended,
    /// so it is not read (its deleted pagemap, still open, would read
    /// present and soft-dirty) and counts as not accessed. Results stay
    /// target by target, region by region.
    #[test]
    fn targets_are_sampled_together_each_on_its_own() {
        let sd = PagemapEntry::SOFT_DIRTY;
        for mode in [AccessMode::IdlePage, AccessMode::SoftDirtyWriteOnly] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            fake_proc(root, 41, &[(0x10, P | sd | 70), (0x100, P | 3)]);
            fake_proc(root, 43, &[]);
            std::fs::remove_file(root.join("proc/43/pagemap")).unwrap();
            std::fs::create_dir(root.join("proc/43/pagemap")).unwrap();
            fake_proc(root, 44, &[(0x10, P | sd | 9), (0x100, P | sd | 9)]);
            fake_proc(root, 45, &[(0x10, P | sd | 5)]);
            fake_bitmap(root, 128);
            let mut ops = ProcOps::new(root, &[41, 43, 44, 45], mode).unwrap();
            let t = [
                target(41, &[0x10_000, 0x100_000, 0x400_000]),
                target(43, &[0x10_000, 0x100_000]),
                target(44, &[0x10_000, 0x100_000]),
                target(45, &[0x10_000]),
            ];
            std::fs::remove_dir_all(root.join("proc/44")).unwrap();
            assert_eq!(ops.target_ranges(2, &t[2]), None);
            assert_eq!(ops.ended(2), Some(TargetEnd::Exited));
            ops.prepare_access_checks(&t, W);
            let e = ops.take_error().map(|e| e.to_string()).unwrap_or_default();
            let mut acc = Vec::new();
            if mode == AccessMode::IdlePage {
                assert!(e.contains("proc/43/pagemap"), "{mode:?}: {e}");
                // PFNs 3, 5 (word 0) and 70 (word 1) marked; 9 (44's) not.
                assert_eq!(word(root, 0), (1 << 3) | (1 << 5));
                assert_eq!(word(root, 1), 1 << 6);
                // The "kernel" sees PFNs 3 and 5 accessed.
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(crate::idle::bitmap_path(root))
                    .unwrap();
                f.write_all_at(&0u64.to_ne_bytes(), 0).unwrap();
                ops.check_accesses(&t, W, &mut acc);
                assert_eq!(
                    acc,
                    [false, true, false, false, false, false, false, true],
                    "{mode:?}"
                );
            } else {
                ops.check_accesses(&t, W, &mut acc);
                let e = ops.take_error().unwrap().to_string();
                assert!(e.contains("proc/43/pagemap"), "{mode:?}: {e}");
                assert_eq!(
                    acc,
                    [true, false, false, false, false, false, false, true],
                    "{mode:?}"
                );
            }
            assert!(ops.take_error().is_none());
            assert!(ops.target_valid(0) && ops.target_valid(1) && ops.target_valid(3));
        }
    }

    #[test]
    fn vanished_process_becomes_invalid() {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path(), 42, &[(0x10, P | 9)]);
        fake_bitmap(dir.path(), 128);
        let mut ops = ProcOps::new(dir.path(), &[42], AccessMode::IdlePage).unwrap();
        std::fs::remove_dir_all(dir.path().join("proc/42")).unwrap();
        assert!(!ops.target_valid(0));
        let t = [target(42, &[0x10_000])];
        assert_eq!(ops.target_ranges(0, &t[0]), None);
        ops.prepare_access_checks(&t, W);
        let mut acc = Vec::new();
        ops.check_accesses(&t, W, &mut acc);
        assert_eq!(acc, vec![false]);
    }

    #[test]
    fn goal_metrics_read_live_files() {
        use udamon_core::schemes::{GoalMetric, QuotaGoal};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fake_proc(root, 42, &[]);
        // Three mappings of 64 KiB each: 192 KiB mapped, 48 KiB resident.
        std::fs::write(
            root.join("proc/42/status"),
            "Name:\tx\nVmRSS:\t      48 kB\n",
        )
        .unwrap();
        let node = root.join("sys/devices/system/node/node1");
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(
            node.join("meminfo"),
            "Node 1 MemTotal:        1000 kB\nNode 1 MemFree:          250 kB\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("proc/pressure")).unwrap();
        std::fs::write(
            root.join("proc/pressure/memory"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=1234\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=99\n",
        )
        .unwrap();
        std::fs::write(
            root.join("proc/meminfo"),
            "MemTotal: 2000 kB\nMemFree: 500 kB\n",
        )
        .unwrap();
        let mut ops = ProcOps::new(root, &[42], AccessMode::SoftDirtyWriteOnly).unwrap();
        let goal = |metric, nid| QuotaGoal {
            metric,
            target_value: 0,
            current_value: 0,
            nid,
            path: None,
        };
        assert_eq!(
            ops.goal_metric(0, &goal(GoalMetric::RssBp, 0), 0),
            Some(2500)
        );
        assert_eq!(
            ops.goal_metric(0, &goal(GoalMetric::NodeMemFreeBp, 1), 0),
            Some(2500)
        );
        assert_eq!(
            ops.goal_metric(0, &goal(GoalMetric::NodeMemUsedBp, 1), 0),
            Some(7500)
        );
        assert_eq!(
            ops.goal_metric(0, &goal(GoalMetric::NodeMemUsedBp, 5), 0),
            None
        );
        assert_eq!(
            ops.goal_metric(0, &goal(GoalMetric::SomeMemPsiUs, 0), 0),
            Some(1234)
        );
        assert_eq!(ops.free_mem_rate(0), Some(250));

        // The LRU lists, from /proc/meminfo's Active: and Inactive:.
        let mut meminfo = std::fs::read_to_string(root.join("proc/meminfo")).unwrap_or_default();
        meminfo.push_str(
            "Active:          300 kB\nInactive:        100 kB\nActive(anon):     10 kB\n",
        );
        std::fs::write(root.join("proc/meminfo"), meminfo).unwrap();
        assert_eq!(
            ops.goal_metric(0, &goal(GoalMetric::ActiveMemBp, 0), 0),
            Some(7500)
        );
        assert_eq!(
            ops.goal_metric(0, &goal(GoalMetric::InactiveMemBp, 0), 0),
            Some(2500)
        );

        // A cgroup's LRU pages on node 1 (bytes in memory.numa_stat) over
        // the node's 1000 kB; a cgroup that does not exist uses nothing.
        let cg = root.join("sys/fs/cgroup/work/a");
        std::fs::create_dir_all(&cg).unwrap();
        std::fs::write(
            cg.join("memory.numa_stat"),
            "anon N0=999999 N1=409600\nactive_anon N0=5 N1=102400\ninactive_anon N0=5 N1=51200\n\
             active_file N0=0 N1=0\ninactive_file N0=0 N1=51200\nfile N1=51200\n",
        )
        .unwrap();
        let memcg = |metric, path: &str| QuotaGoal {
            path: Some(path.into()),
            ..goal(metric, 1)
        };
        assert_eq!(
            ops.goal_metric(0, &memcg(GoalMetric::NodeMemcgUsedBp, "/work/a"), 0),
            Some(2000),
            "200 KiB of 1000 kB"
        );
        assert_eq!(
            ops.goal_metric(0, &memcg(GoalMetric::NodeMemcgFreeBp, "/work/a"), 0),
            Some(8000)
        );
        assert_eq!(
            ops.goal_metric(0, &memcg(GoalMetric::NodeMemcgUsedBp, "/gone"), 0),
            Some(0)
        );
    }

    #[test]
    fn proc_field_reads_the_number_after_a_whole_word() {
        let status = "Name:\tx\nVmRSS:\t    4096 kB\nVmSwap:\t 12 kB\n";
        assert_eq!(proc_field(status, "VmRSS:"), Some(4096));
        assert_eq!(proc_field(status, "VmSwap:"), Some(12));
        let node = "Node 1 MemTotal:  1000 kB\nNode 1 HugePages_Free: 3\nNode 1 MemFree: 250 kB\n";
        assert_eq!(proc_field(node, "MemFree:"), Some(250), "whole words only");
        let vmstat = "workingset_refault_anon_x 1\nworkingset_refault_anon 7\n";
        assert_eq!(proc_field(vmstat, "workingset_refault_anon"), Some(7));
        assert_eq!(proc_field(vmstat, "nr_free_pages"), None);
    }

    #[test]
    fn missing_primitives_are_named() {
        let dir = tempfile::tempdir().unwrap();
        fake_proc(dir.path(), 42, &[]);
        let e = ProcOps::new(dir.path(), &[42], AccessMode::IdlePage).unwrap_err();
        assert!(e.to_string().contains("CONFIG_IDLE_PAGE_TRACKING"), "{e}");
        std::fs::remove_file(clear_refs_path(dir.path(), 42)).unwrap();
        let e = ProcOps::new(dir.path(), &[42], AccessMode::SoftDirtyWriteOnly).unwrap_err();
        assert!(e.to_string().contains("CONFIG_MEM_SOFT_DIRTY"), "{e}");
    }

    #[test]
    fn migrations_leave_a_floor_of_free_memory_on_the_destination() {
        const MIB: u64 = 1 << 20;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sys/devices/system/node/node1");
        std::fs::create_dir_all(&p).unwrap();
        // 1 GiB node, 8 MiB free: the floor is 0.5% (about 5 MiB).
        std::fs::write(
            p.join("meminfo"),
            "Node 1 MemTotal:       1048576 kB\nNode 1 MemFree:         8192 kB\n",
        )
        .unwrap();
        let room = node_room(dir.path(), 1).unwrap();
        assert_eq!(room, 8 * MIB - (1 << 30) / 10_000 * NODE_FREE_FLOOR_BP);
        assert_eq!(node_room(dir.path(), 7), None);
        let parts = [AddrRange::new(0, 2 * MIB), AddrRange::new(4 * MIB, 8 * MIB)];
        assert_eq!(
            first_bytes(&parts, 3 * MIB + 100),
            vec![AddrRange::new(0, 2 * MIB), AddrRange::new(4 * MIB, 5 * MIB)]
        );
        assert!(first_bytes(&parts, 0).is_empty());
    }
}
