//! [`KdamonDriver`]: one kdamond, created, configured, read and removed by us.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use udamon_core::schemes::{AccessPattern, Action, Damos, DamosStats, GoalMetric};
use udamon_core::{AddrRange, Attrs, Monitor, RegionSnapshot, Snapshot, TargetSnapshot};

use crate::error::{needs_for_entry, needs_for_keyword};
use crate::set::Slot;
use crate::sysfs::{FsIo, Sysfs};
use crate::translate::{pattern_writes, scheme_writes, FilterDirs};
use crate::Error;

/// The kernel's operations sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpsKind {
    Vaddr,
    Fvaddr,
    Paddr,
}

impl OpsKind {
    pub fn name(self) -> &'static str {
        match self {
            OpsKind::Vaddr => "vaddr",
            OpsKind::Fvaddr => "fvaddr",
            OpsKind::Paddr => "paddr",
        }
    }
}

/// One monitoring target: a pid (vaddr, fvaddr) and initial regions
/// (required for paddr and fvaddr; vaddr may leave them empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KTarget {
    pub pid: Option<u32>,
    pub regions: Vec<AddrRange>,
    /// Remove the running context's target at this position on the next
    /// `commit` (`obsolete_target`, Linux 6.19+; see
    /// [`KdamonDriver::can_remove_targets`]).
    pub obsolete: bool,
}

/// What the kernel reports of a scheme besides its statistics; `None`
/// where this kernel lacks the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemeExtras {
    /// The effective size quota of the current window; 0 means none.
    pub effective_bytes: Option<u64>,
    /// Bytes of the regions the last apply pass tried.
    pub tried_bytes: Option<u64>,
    /// Current values of the quota goals, in order.
    pub goal_values: Option<Vec<u64>>,
}

/// What to set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KdamonConfig {
    pub ops: OpsKind,
    pub targets: Vec<KTarget>,
    pub attrs: Attrs,
    pub schemes: Vec<Damos>,
    /// Append a `stat` scheme matching every region, whose tried regions
    /// are read as snapshots (as damo does).
    pub snapshots: bool,
}

impl KdamonConfig {
    /// The schemes written to the kernel: the user's, then the snapshot
    /// `stat` scheme matching every region when `snapshots` is on.
    fn all_schemes(&self) -> Vec<Damos> {
        let mut s = self.schemes.clone();
        if self.snapshots {
            s.push(Damos::new(AccessPattern::default(), Action::Stat));
        }
        s
    }

    /// What can be checked without the kernel, before anything is
    /// written: the attributes, and that every scheme translates.
    fn check(&self) -> Result<(), Error> {
        self.attrs.validate()?;
        for s in &self.all_schemes() {
            scheme_writes(s, &self.attrs, FilterDirs::Split)?;
            let eligible = s
                .quota
                .goals
                .iter()
                .any(|g| g.metric == GoalMetric::NodeEligibleMemBp);
            if eligible && self.ops != OpsKind::Paddr {
                return Err(Error::NoKernelEquivalent {
                    what: format!(
                        "quota goal metric node_eligible_mem_bp on {}",
                        self.ops.name()
                    ),
                    fix: "kernel DAMON measures it on paddr only (Linux 7.2+): monitor the \
                          physical space, or use udamon's engine (the simulator measures it)",
                });
            }
        }
        Ok(())
    }
}

/// How often (ms) the kernel refreshes our kdamond's sysfs figures, where
/// it can (`refresh_ms`, Linux 6.17+).
pub const REFRESH_MS: u32 = 1000;

/// Drives one kdamond through `ROOT/sys/kernel/mm/damon/admin`.
///
/// Before any write it checks that no kdamond exists that it did not create
/// itself, and refuses otherwise. Implements [`Monitor`] by taking
/// tried-regions snapshots of its `stat` scheme.
pub struct KdamonDriver {
    root: PathBuf,
    admin: PathBuf,
    io: Box<dyn Sysfs>,
    config: KdamonConfig,
    /// This driver wrote `nr_kdamonds` = 1 and kdamond 0 is ours, or it
    /// drives a kdamond of this process's set.
    owned: bool,
    running: bool,
    /// The context is paused (`pause`, Linux 7.2+).
    paused: bool,
    /// The kernel refreshes our kdamond's statistics and effective quotas
    /// itself (`refresh_ms`, Linux 6.17+).
    refreshing: bool,
    started_at: Option<Instant>,
    last_end_us: u64,
    deadline_us: Option<u64>,
    /// This process's start time, to write a claim with
    /// ([`claim_as`](Self::claim_as)); no claim without it.
    claim_start: Option<u64>,
    /// The kdamond of a set this driver drives (else kdamond 0, which it
    /// creates and removes itself).
    slot: Option<Slot>,
}

impl std::fmt::Debug for KdamonDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KdamonDriver")
            .field("admin", &self.admin)
            .field("owned", &self.owned)
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

/// `ROOT/sys/kernel/mm/damon/admin`.
pub fn admin_dir(root: &Path) -> PathBuf {
    root.join("sys/kernel/mm/damon/admin")
}

impl KdamonDriver {
    /// A driver on the real file system under `root` ("/" in production).
    /// Nothing is read or written until [`start`](Self::start).
    pub fn new(root: PathBuf, config: KdamonConfig) -> Self {
        Self::with_io(root, config, Box::new(FsIo))
    }

    /// A driver whose file operations go through `io`.
    pub fn with_io(root: PathBuf, config: KdamonConfig, io: Box<dyn Sysfs>) -> Self {
        Self {
            admin: admin_dir(&root),
            root,
            io,
            config,
            owned: false,
            running: false,
            paused: false,
            refreshing: false,
            started_at: None,
            last_end_us: 0,
            deadline_us: None,
            claim_start: None,
            slot: None,
        }
    }

    /// A driver of `slot`'s kdamond, one of a [`KdamondSet`](crate::KdamondSet)
    /// (kdamond I of the set's root): it never changes `nr_kdamonds`, and
    /// [`stop`](Self::stop) turns the kdamond off and leaves it.
    pub fn in_set(slot: Slot, config: KdamonConfig) -> Self {
        Self::in_set_with_io(slot, config, Box::new(FsIo))
    }

    /// [`in_set`](Self::in_set) with its file operations through `io`.
    pub fn in_set_with_io(slot: Slot, config: KdamonConfig, io: Box<dyn Sysfs>) -> Self {
        let mut d = Self::with_io(slot.set().root().to_path_buf(), config, io);
        d.owned = true;
        d.slot = Some(slot);
        d
    }

    /// The index of this driver's kdamond (`kdamonds/INDEX`).
    pub fn index(&self) -> usize {
        self.slot.as_ref().map_or(0, Slot::index)
    }

    /// Claims the kdamond this driver creates for this process, whose
    /// start time (`/proc/self/stat` field 22) is `start`, so that a later
    /// udamon can prove it udamon's if this run dies ([`crate::claim`]).
    pub fn claim_as(&mut self, start: Option<u64>) {
        self.claim_start = start;
    }

    pub fn admin(&self) -> &Path {
        &self.admin
    }

    fn kdamond(&self) -> PathBuf {
        self.admin.join(format!("kdamonds/{}", self.index()))
    }

    fn ctx(&self) -> PathBuf {
        self.kdamond().join("contexts/0")
    }

    fn scheme_dir(&self, i: usize) -> PathBuf {
        self.ctx().join(format!("schemes/{i}"))
    }

    /// Index of the snapshot scheme.
    fn snapshot_idx(&self) -> usize {
        self.config.schemes.len()
    }

    fn read(&mut self, path: &Path) -> Result<String, Error> {
        match self.io.read(path) {
            Ok(s) => Ok(s.trim().to_string()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(missing(path)),
            Err(source) => Err(Error::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    fn read_u64(&mut self, path: &Path) -> Result<u64, Error> {
        let v = self.read(path)?;
        v.parse().map_err(|_| Error::Parse {
            path: path.to_path_buf(),
            value: v,
        })
    }

    fn write(&mut self, path: &Path, value: &str) -> Result<(), Error> {
        match self.io.write(path, value) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(missing(path)),
            Err(e)
                if e.kind() == io::ErrorKind::InvalidInput
                    && needs_for_keyword(value).is_some() =>
            {
                Err(Error::Unsupported {
                    path: path.to_path_buf(),
                    value: value.to_string(),
                    needs: format!("{value} needs {}", needs_for_keyword(value).unwrap_or("")),
                })
            }
            Err(source) => Err(Error::Write {
                path: path.to_path_buf(),
                value: value.to_string(),
                source,
            }),
        }
    }

    /// Reads `nr_kdamonds` and each kdamond's `state` and `pid`; fails with
    /// [`Error::Foreign`] if a kdamond exists that this driver did not
    /// create. Writes nothing.
    pub fn check_not_foreign(&mut self) -> Result<(), Error> {
        let nr_path = self.admin.join("kdamonds/nr_kdamonds");
        let nr = self.read_u64(&nr_path)?;
        let ours = self.slot.as_ref().map_or(1, |s| s.set().nr() as u64);
        if (nr == 0 && self.slot.is_none()) || (self.owned && nr == ours) {
            return Ok(());
        }
        let first_foreign = if self.owned { ours.min(nr) } else { 0 };
        let dir = self.admin.join(format!("kdamonds/{first_foreign}"));
        let state = self.read(&dir.join("state")).unwrap_or_else(|_| "?".into());
        let pid = self.read(&dir.join("pid")).unwrap_or_else(|_| "?".into());
        Err(Error::Foreign {
            path: dir,
            state,
            pid,
        })
    }

    /// The targets the next [`start`](Self::start) sets up (the driver's
    /// kdamond must not run: [`stop`](Self::stop) it first).
    pub fn set_targets(&mut self, targets: Vec<KTarget>) -> Result<(), Error> {
        if self.running {
            return Err(Error::Running);
        }
        self.config.targets = targets;
        Ok(())
    }

    /// Creates kdamond 0, writes the whole configuration and turns it on.
    /// On error after the kdamond was created, removes it again.
    pub fn start(&mut self) -> Result<(), Error> {
        self.check_not_foreign()?;
        if self.running {
            return Ok(());
        }
        // Before writing anything, so bad attributes or untranslatable
        // schemes leave the tree untouched.
        self.config.check()?;
        if self.slot.is_some() {
            // A kdamond of our set is off between sessions; one that runs
            // was not started by this driver.
            let k = self.kdamond();
            let state = self.read(&k.join("state"))?;
            if state != "off" {
                return Err(Error::Foreign {
                    state,
                    pid: self.read(&k.join("pid")).unwrap_or_else(|_| "?".into()),
                    path: k,
                });
            }
        } else if !self.owned {
            self.write(&self.admin.join("kdamonds/nr_kdamonds"), "1")?;
            // Another tool may have created a kdamond between our read of
            // nr_kdamonds and this write (sysfs has no compare-and-swap):
            // only a fresh kdamond (off, no context) is taken as ours; any
            // other is left exactly as it is.
            let k = self.kdamond();
            let fresh = self.read(&k.join("state")).is_ok_and(|s| s == "off")
                && self
                    .read(&k.join("contexts/nr_contexts"))
                    .is_ok_and(|n| n == "0");
            if !fresh {
                return Err(Error::Foreign {
                    state: self.read(&k.join("state")).unwrap_or_else(|_| "?".into()),
                    pid: self.read(&k.join("pid")).unwrap_or_else(|_| "?".into()),
                    path: k,
                });
            }
            self.owned = true;
        }
        match self.setup() {
            Ok(()) => {
                self.running = true;
                self.started_at = Some(Instant::now());
                self.last_end_us = 0;
                self.write_claim();
                Ok(())
            }
            Err(e) => {
                let _ = self.remove();
                Err(e)
            }
        }
    }

    fn setup(&mut self) -> Result<(), Error> {
        let k = self.kdamond();
        // Linux 6.17+ refreshes the statistics, effective quotas and tuned
        // intervals in sysfs by itself: whoever reads our kdamond's files
        // (an administrator, damo) sees them current. udamon still asks
        // for fresh figures before it reads them.
        let refresh = k.join("refresh_ms");
        self.refreshing = self.io.exists(&refresh);
        if self.refreshing {
            self.write(&refresh, &REFRESH_MS.to_string())?;
        }
        self.write(&k.join("contexts/nr_contexts"), "1")?;
        let c = self.ctx();
        let ops = self.config.ops.name();
        let avail = c.join("avail_operations");
        if self.io.exists(&avail) {
            let list = self.read(&avail)?;
            if !list.split_whitespace().any(|o| o == ops) {
                return Err(Error::Unsupported {
                    path: avail,
                    value: ops.into(),
                    needs: format!(
                        "operations set {ops} is not built in (available: {list}); it needs {}",
                        needs_for_keyword(ops).unwrap_or("a newer kernel")
                    ),
                });
            }
        } else if self.config.ops == OpsKind::Fvaddr {
            return Err(missing(&avail));
        }
        self.write(&c.join("operations"), ops)?;
        self.write_context()?;
        self.write(&k.join("state"), "on")
    }

    /// Writes the monitoring attributes, targets and every scheme of
    /// `self.config` into context 0, everything but the operations set and
    /// the `state` command: the part [`start`](Self::start) and
    /// [`commit`](Self::commit) share. Writing `nr_targets` and
    /// `nr_schemes` makes the kernel recreate those directories, so every
    /// file of every target and scheme is written each time.
    fn write_context(&mut self) -> Result<(), Error> {
        let c = self.ctx();
        self.write_attrs()?;

        let targets = self.config.targets.clone();
        self.write(&c.join("targets/nr_targets"), &targets.len().to_string())?;
        for (i, t) in targets.iter().enumerate() {
            let d = c.join(format!("targets/{i}"));
            if let Some(pid) = t.pid {
                self.write(&d.join("pid_target"), &pid.to_string())?;
            }
            let obsolete = d.join("obsolete_target");
            if t.obsolete || self.io.exists(&obsolete) {
                self.write(&obsolete, if t.obsolete { "Y" } else { "N" })?;
            }
            // 0 regions: the kernel picks them (vaddr) at `on`, and keeps
            // the current ones at `commit`.
            self.write(&d.join("regions/nr_regions"), &t.regions.len().to_string())?;
            for (j, r) in t.regions.iter().enumerate() {
                let rd = d.join(format!("regions/{j}"));
                self.write(&rd.join("start"), &r.start.to_string())?;
                self.write(&rd.join("end"), &r.end.to_string())?;
            }
        }

        let schemes = self.config.all_schemes();
        self.write(&c.join("schemes/nr_schemes"), &schemes.len().to_string())?;
        let dirs = if self.io.exists(&self.scheme_dir(0).join("core_filters")) {
            FilterDirs::Split
        } else {
            FilterDirs::Legacy
        };
        let attrs = self.config.attrs;
        for (i, s) in schemes.iter().enumerate() {
            let d = self.scheme_dir(i);
            for (rel, v) in scheme_writes(s, &attrs, dirs)? {
                self.write(&d.join(rel), &v)?;
            }
        }
        if self.config.snapshots {
            let tr = self.scheme_dir(self.snapshot_idx()).join("tried_regions");
            if !self.io.exists(&tr) {
                return Err(missing(&tr));
            }
        }
        Ok(())
    }

    fn write_attrs(&mut self) -> Result<(), Error> {
        let a = self.config.attrs;
        let m = self.ctx().join("monitoring_attrs");
        self.write(&m.join("intervals/sample_us"), &a.sample_us.to_string())?;
        self.write(&m.join("intervals/aggr_us"), &a.aggr_us.to_string())?;
        self.write(&m.join("intervals/update_us"), &a.update_us.to_string())?;
        let g = a.intervals_goal;
        let gd = m.join("intervals/intervals_goal");
        // A goal with aggrs 0 is written only over one that tunes (an
        // online commit turning tuning off), so kernels before 6.15 work.
        let tuning = self.read_u64(&gd.join("aggrs")).is_ok_and(|n| n != 0);
        if g.aggrs != 0 || tuning {
            self.write(&gd.join("access_bp"), &g.access_bp.to_string())?;
            self.write(&gd.join("aggrs"), &g.aggrs.to_string())?;
            self.write(&gd.join("min_sample_us"), &g.min_sample_us.to_string())?;
            self.write(&gd.join("max_sample_us"), &g.max_sample_us.to_string())?;
        }
        self.write(&m.join("nr_regions/min"), &a.min_nr_regions.to_string())?;
        self.write(&m.join("nr_regions/max"), &a.max_nr_regions.to_string())
    }

    /// Writes a command to the kdamond's `state` file (`commit`,
    /// `update_schemes_stats`, `update_schemes_tried_regions`, ...).
    pub fn state_command(&mut self, cmd: &str) -> Result<(), Error> {
        self.check_not_foreign()?;
        if !self.owned {
            return Err(Error::NotStarted);
        }
        self.write(&self.kdamond().join("state"), cmd)
    }

    /// The kdamond's `state` ("on" or "off").
    pub fn state(&mut self) -> Result<String, Error> {
        self.read(&self.kdamond().join("state"))
    }

    /// Reconfigures the running kdamond online (`commit` on its `state`
    /// file): same kdamond, same pid, its monitoring results kept where the
    /// kernel keeps them. Targets are matched by index; a target with no
    /// regions keeps the kernel's current ones. The snapshot `stat` scheme
    /// follows the new schemes when the config takes snapshots.
    ///
    /// Fails with [`Error::NotStarted`] unless this driver's kdamond
    /// runs. The attributes are validated and every scheme translated
    /// before anything is written, so a bad configuration leaves the
    /// kdamond and its files untouched. On success the driver's config
    /// holds the new attributes, targets and schemes ([`stats`](Self::stats)
    /// and [`scheme_extras`](Self::scheme_extras) then report the new
    /// schemes) and the claim is rewritten. If a write or the `commit`
    /// itself fails, the kdamond goes on with its previous configuration,
    /// which is written back to its files (best effort) and kept.
    pub fn commit(
        &mut self,
        attrs: Attrs,
        targets: Vec<KTarget>,
        schemes: Vec<Damos>,
    ) -> Result<(), Error> {
        self.check_not_foreign()?;
        if !self.owned || !self.running {
            return Err(Error::NotStarted);
        }
        let new = KdamonConfig {
            attrs,
            targets,
            schemes,
            ..self.config.clone()
        };
        new.check()?;
        let old = std::mem::replace(&mut self.config, new);
        let r = self
            .write_context()
            .and_then(|()| self.write(&self.kdamond().join("state"), "commit"));
        match r {
            Ok(()) => self.write_claim(),
            Err(_) => {
                self.config = old;
                let _ = self.write_context();
            }
        }
        r
    }

    /// Whether this kernel removes a target marked
    /// [`obsolete`](KTarget::obsolete) at a commit, keeping the others as
    /// they are (Linux 6.19+). Without it, targets are matched by position:
    /// removing one from the middle hands each later target the regions of
    /// the one before it.
    pub fn can_remove_targets(&mut self) -> bool {
        self.io
            .exists(&self.ctx().join("targets/0/obsolete_target"))
    }

    /// The sampling and aggregation intervals (us) the kernel's interval
    /// auto-tuning has reached, refreshed first (`update_tuned_intervals`,
    /// Linux 6.15+). `None` when this config does not tune (goal `aggrs`
    /// 0), or the kernel has no `intervals_goal` or does not know the
    /// command. The driver's own attributes are not changed.
    pub fn tuned_intervals(&mut self) -> Result<Option<(u64, u64)>, Error> {
        self.check_not_foreign()?;
        if !self.owned || !self.running {
            return Err(Error::NotStarted);
        }
        let iv = self.ctx().join("monitoring_attrs/intervals");
        if self.config.attrs.intervals_goal.aggrs == 0
            || !self.io.exists(&iv.join("intervals_goal"))
        {
            return Ok(None);
        }
        let state = self.kdamond().join("state");
        match self.io.write(&state, "update_tuned_intervals") {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
                ) =>
            {
                return Ok(None)
            }
            Err(source) => {
                return Err(Error::Write {
                    path: state,
                    value: "update_tuned_intervals".into(),
                    source,
                })
            }
        }
        let sample_us = self.read_u64(&iv.join("sample_us"))?;
        let aggr_us = self.read_u64(&iv.join("aggr_us"))?;
        Ok(Some((sample_us, aggr_us)))
    }

    /// Whether the running kernel can pause this driver's context
    /// (`contexts/0/pause`, Linux 7.2+).
    pub fn can_pause(&mut self) -> bool {
        self.owned && self.io.exists(&self.ctx().join("pause"))
    }

    /// Whether the context is paused by [`set_paused`](Self::set_paused).
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Pauses or resumes the running context with an online commit
    /// (`contexts/0/pause`, Linux 7.2+). Paused, the kdamond stays, with
    /// its regions and their ages, but neither samples nor applies
    /// schemes; resumed, it goes on from there. A kernel without the file
    /// is refused with the version that has it, and nothing is written.
    pub fn set_paused(&mut self, paused: bool) -> Result<(), Error> {
        self.check_not_foreign()?;
        if !self.owned || !self.running {
            return Err(Error::NotStarted);
        }
        let p = self.ctx().join("pause");
        if !self.io.exists(&p) {
            return Err(missing(&p));
        }
        self.write(&p, if paused { "Y" } else { "N" })?;
        if let Err(e) = self.write(&self.kdamond().join("state"), "commit") {
            let _ = self.write(&p, if self.paused { "Y" } else { "N" });
            return Err(e);
        }
        self.paused = paused;
        Ok(())
    }

    /// The pid of this driver's kdamond (`kdamonds/0/pid`), while it runs;
    /// `None` before [`start`](Self::start), after [`stop`](Self::stop)
    /// or when the file is unreadable.
    pub fn kdamond_pid(&mut self) -> Option<u32> {
        if !self.owned || !self.running {
            return None;
        }
        self.read(&self.kdamond().join("pid")).ok()?.parse().ok()
    }

    /// Refreshes and reads the statistics of the user's schemes, in order
    /// (with refresh_ms the kernel keeps the files current itself, at most
    /// [`REFRESH_MS`] old, and no command takes DAMON's sysfs lock).
    pub fn stats(&mut self) -> Result<Vec<DamosStats>, Error> {
        if self.refreshing {
            self.check_not_foreign()?;
            if !self.owned {
                return Err(Error::NotStarted);
            }
        } else {
            self.state_command("update_schemes_stats")?;
        }
        (0..self.config.schemes.len())
            .map(|i| self.read_stats(i))
            .collect()
    }

    fn read_stats(&mut self, i: usize) -> Result<DamosStats, Error> {
        let d = self.scheme_dir(i).join("stats");
        let mut get = |name: &str, optional: bool| match self.read_u64(&d.join(name)) {
            Err(Error::Missing { .. }) if optional => Ok(0),
            r => r,
        };
        Ok(DamosStats {
            nr_tried: get("nr_tried", false)?,
            sz_tried: get("sz_tried", false)?,
            nr_applied: get("nr_applied", false)?,
            sz_applied: get("sz_applied", false)?,
            sz_ops_filter_passed: get("sz_ops_filter_passed", true)?,
            qt_exceeds: get("qt_exceeds", false)?,
            nr_snapshots: get("nr_snapshots", true)?,
        })
    }

    /// What the kernel says of each user scheme beyond its statistics,
    /// refreshed first: the effective size quota (`quotas/effective_bytes`,
    /// Linux 6.9+), the bytes its last pass tried (`tried_regions/
    /// total_bytes`, 6.6+) and its goals' current values (6.8+). A field is
    /// `None` where the kernel lacks its file.
    pub fn scheme_extras(&mut self) -> Result<Vec<SchemeExtras>, Error> {
        let k = self.kdamond().join("state");
        let cmd = |d: &mut Self, c: &str| d.io.write(&k, c).is_ok();
        // With refresh_ms the kernel keeps effective_bytes current itself.
        let has_quota = if self.refreshing {
            self.io
                .exists(&self.scheme_dir(0).join("quotas/effective_bytes"))
        } else {
            cmd(self, "update_schemes_effective_quotas")
        };
        // The tried bytes come from a walk of every scheme's next pass: a
        // scheme stopped at max_nr_snapshots never makes one, and the
        // command would hold DAMON's sysfs lock for ever.
        let stops = self.config.schemes.iter().any(|s| s.max_nr_snapshots != 0);
        let has_tried = !stops && cmd(self, "update_schemes_tried_bytes");
        (0..self.config.schemes.len())
            .map(|i| {
                let d = self.scheme_dir(i);
                let effective_bytes = if has_quota {
                    self.read_u64(&d.join("quotas/effective_bytes")).ok()
                } else {
                    None
                };
                let tried_bytes = if has_tried {
                    self.read_u64(&d.join("tried_regions/total_bytes")).ok()
                } else {
                    None
                };
                let nr_goals = self.config.schemes[i].quota.goals.len();
                let goal_values = (0..nr_goals)
                    .map(|g| {
                        self.read_u64(&d.join(format!("quotas/goals/{g}/current_value")))
                            .ok()
                    })
                    .collect::<Option<Vec<u64>>>();
                Ok(SchemeExtras {
                    effective_bytes,
                    tried_bytes,
                    goal_values,
                })
            })
            .collect()
    }

    /// Reads `tried_regions/<N>/` of scheme `i`, in index order.
    pub fn tried_regions(&mut self, i: usize) -> Result<Vec<RegionSnapshot>, Error> {
        let d = self.scheme_dir(i).join("tried_regions");
        let names = self.io.list(&d).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => missing(&d),
            _ => Error::Read {
                path: d.clone(),
                source,
            },
        })?;
        let mut idx: Vec<u64> = names.iter().filter_map(|n| n.parse().ok()).collect();
        idx.sort_unstable();
        let mut out = Vec::with_capacity(idx.len());
        for n in idx {
            let r = d.join(n.to_string());
            let u32_of = |v: u64| v.min(u64::from(u32::MAX)) as u32;
            out.push(RegionSnapshot {
                start: self.read_u64(&r.join("start"))?,
                end: self.read_u64(&r.join("end"))?,
                nr_accesses: u32_of(self.read_u64(&r.join("nr_accesses"))?),
                age: u32_of(self.read_u64(&r.join("age"))?),
            });
        }
        Ok(out)
    }

    /// Asks for fresh tried regions of the snapshot scheme (the kernel
    /// blocks the write until one apply interval passed) and reads them.
    pub fn take_snapshot(&mut self) -> Result<Snapshot, Error> {
        if !self.config.snapshots {
            return Err(Error::NoSnapshots);
        }
        // A paused kdamond applies nothing: the request would wait for
        // ever.
        if self.paused {
            return Err(Error::Paused);
        }
        self.start()?;
        self.state_command("update_schemes_tried_regions")?;
        let regions = self.tried_regions(self.snapshot_idx())?;
        let end_us = self.now_us().max(self.last_end_us);
        let a = self.config.attrs;
        let snap = Snapshot {
            start_us: self.last_end_us,
            end_us,
            sample_us: a.sample_us,
            aggr_us: a.aggr_us,
            targets: split_targets(regions),
        };
        self.last_end_us = end_us;
        Ok(snap)
    }

    /// Turns the kdamond off and removes it (`nr_kdamonds` 0).
    pub fn stop(&mut self) -> Result<(), Error> {
        if !self.owned {
            return Ok(());
        }
        self.check_not_foreign()?;
        if self.running {
            // Already off when turned off from outside to end a blocked
            // request (claim::turn_off_own).
            if self.state().map_or(true, |s| s == "on") {
                self.write(&self.kdamond().join("state"), "off")?;
            }
            self.running = false;
        }
        self.paused = false;
        self.remove()
    }

    fn remove(&mut self) -> Result<(), Error> {
        if self.slot.is_some() {
            // The set's kdamond stays, off, for its next session.
            if self.read(&self.kdamond().join("state"))? == "on" {
                self.write(&self.kdamond().join("state"), "off")?;
            }
            self.running = false;
            crate::claim::remove_index(&self.root, self.index());
            return Ok(());
        }
        self.write(&self.admin.join("kdamonds/nr_kdamonds"), "0")?;
        self.owned = false;
        self.running = false;
        crate::claim::remove(&self.root);
        Ok(())
    }

    /// Records that this process created kdamond 0, so that a later udamon
    /// can prove it udamon's if this run dies without removing it
    /// ([`crate::claim`]). Best effort: without a claim a leftover kdamond
    /// is simply not provably udamon's.
    fn write_claim(&mut self) {
        let me = std::process::id();
        let Some(udamon_start) = self.claim_start else {
            return;
        };
        let kdamond_pid = self.kdamond_pid();
        let c = crate::claim::Claim {
            udamon_pid: me,
            udamon_start,
            kdamond_pid,
            ops: self.config.ops.name().into(),
            target_pids: self.config.targets.iter().filter_map(|t| t.pid).collect(),
            sample_us: self.config.attrs.sample_us,
            aggr_us: self.config.attrs.aggr_us,
            intervals_tuned: self.config.attrs.intervals_goal.aggrs != 0,
            index: self.index(),
        };
        let _ = c.write(&self.root);
    }

    fn commit_attrs(&mut self, attrs: Attrs) -> Result<(), Error> {
        attrs.validate()?;
        let old = self.config.attrs;
        self.config.attrs = attrs;
        if !self.running {
            return Ok(());
        }
        let r = (|| {
            self.check_not_foreign()?;
            self.write_attrs()?;
            // Access patterns are in kernel units, which depend on the attrs.
            for (i, s) in self.config.all_schemes().iter().enumerate() {
                let d = self.scheme_dir(i);
                for (rel, v) in pattern_writes(s, &attrs) {
                    self.write(&d.join(rel), &v)?;
                }
            }
            self.write(&self.kdamond().join("state"), "commit")
        })();
        if r.is_err() {
            self.config.attrs = old;
        }
        r
    }
}

impl Drop for KdamonDriver {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Splits tried regions, listed target after target, where the address
/// goes down (the kernel does not name the target of a tried region).
fn split_targets(regions: Vec<RegionSnapshot>) -> Vec<TargetSnapshot> {
    let mut out: Vec<TargetSnapshot> = Vec::new();
    let mut prev_end = u64::MAX;
    for r in regions {
        if out.is_empty() || r.start < prev_end {
            out.push(TargetSnapshot {
                target_idx: out.len() as u32,
                regions: Vec::new(),
            });
        }
        prev_end = r.end;
        out.last_mut().expect("pushed").regions.push(r);
    }
    out
}

fn missing(path: &Path) -> Error {
    let comps: Vec<String> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let (feature, needs) = comps
        .iter()
        .rev()
        .find_map(|c| needs_for_entry(c).map(|n| (c.clone(), n)))
        .unwrap_or_else(|| {
            (
                comps.last().cloned().unwrap_or_default(),
                "a kernel with this DAMON sysfs file (see the DAMON sysfs documentation)",
            )
        });
    Error::Missing {
        path: path.to_path_buf(),
        feature,
        needs,
    }
}

impl Monitor for KdamonDriver {
    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, udamon_core::Error> {
        let be = |e: Error| udamon_core::Error::Backend(e.to_string());
        if self.deadline_us.is_some_and(|d| self.now_us() >= d) {
            return Ok(None);
        }
        if self.running && self.state().map_err(be)? == "off" {
            // The kernel stops a kdamond once every target is gone.
            return Ok(None);
        }
        self.take_snapshot().map(Some).map_err(be)
    }

    fn commit(&mut self, attrs: Attrs) -> Result<(), udamon_core::Error> {
        self.commit_attrs(attrs).map_err(|e| match e {
            Error::Attrs(e) => e,
            e => udamon_core::Error::Backend(e.to_string()),
        })
    }

    fn attrs(&self) -> Attrs {
        self.config.attrs
    }

    fn now_us(&self) -> u64 {
        self.started_at.map_or(0, |t| {
            t.elapsed().as_micros().min(u128::from(u64::MAX)) as u64
        })
    }

    fn set_deadline(&mut self, deadline_us: Option<u64>) {
        self.deadline_us = deadline_us;
    }
}
