//! The kdamond loop on a logical clock.

use rand::{Rng, RngExt};

use crate::adapt;
use crate::enhanced;
use crate::feedback;
use crate::ops::{Operations, SampleWindow};
use crate::region::{AddrRange, Target};
use crate::schemes::{self, Damos, SchemeState};
use crate::snapshot::{RegionSnapshot, Snapshot, TargetSnapshot};
use crate::vaddr;
use crate::{Attrs, Error, Mode, Monitor, MIN_REGION_SZ};

/// How regions change over time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adaptation {
    /// DAMON's adaptive regions: merge similar neighbours, split at random.
    Adaptive,
    /// Static sampling, the papers' baseline: about this many equal regions,
    /// never merged or split (ages are still kept).
    Fixed(u32),
    /// DAMON's adaptive regions plus the enhanced mode's residency-fitted
    /// ranges and moving-window prediction ([`crate::enhanced`]).
    Enhanced,
}

impl Adaptation {
    /// What runs when the attributes say `mode`: adaptive regions are
    /// enhanced under [`Mode::Enhanced`]; the others stay as they are.
    fn with_mode(self, mode: Mode) -> Adaptation {
        match (self, mode) {
            (Adaptation::Adaptive, Mode::Enhanced) => Adaptation::Enhanced,
            (a, _) => a,
        }
    }

    /// How many even regions a target starts with.
    fn initial_regions(self, attrs: &Attrs) -> u32 {
        match self {
            Adaptation::Adaptive | Adaptation::Enhanced => attrs.min_nr_regions,
            Adaptation::Fixed(n) => n.max(1),
        }
    }
}

/// Our implementation of DAMON's monitor: one context, its targets, and the
/// tick counters of the kernel's main loop (section 2 of the spec), counted
/// in sampling intervals ("sis").
pub struct Engine<O, R> {
    attrs: Attrs,
    ops: O,
    targets: Vec<Target>,
    /// Each target's index in the snapshots (`targets[i]` is reported as
    /// `ids[i]`): its position at the start, then one more for each target
    /// added, never reused, so that a target removed from the middle does
    /// not rename the others.
    ids: Vec<u32>,
    next_id: u32,
    rng: R,
    /// What runs: `base_adaptation` under the attributes' mode.
    adaptation: Adaptation,
    /// The adaptation the engine was built with.
    base_adaptation: Adaptation,
    min_sz: u64,
    /// Sampling intervals passed since start.
    passed: u64,
    next_aggr: u64,
    next_update: u64,
    next_tune: u64,
    /// `aggr / sample` fixed when the user set the attributes; interval tuning
    /// keeps it constant.
    aggr_samples: u64,
    sz_limit: u64,
    last_nr_regions: usize,
    now_us: u64,
    window_start_us: u64,
    accessed: Vec<bool>,
    /// Regions' counts handed to `Operations::end_window` (kept to reuse).
    window_counts: Vec<u32>,
    schemes: Vec<SchemeState>,
    deadline_us: Option<u64>,
    /// The enhanced mode's moving-window follower.
    movement: enhanced::Movement,
}

impl<O: Operations, R: Rng> Engine<O, R> {
    /// Builds a monitor over `targets` with adaptive regions. Targets without
    /// regions get the ranges their ops report, split evenly into about
    /// `min_nr_regions` regions.
    pub fn new(attrs: Attrs, ops: O, targets: Vec<Target>, rng: R) -> Result<Self, Error> {
        Self::with_adaptation(attrs, ops, targets, rng, Adaptation::Adaptive)
    }

    pub fn with_adaptation(
        attrs: Attrs,
        mut ops: O,
        mut targets: Vec<Target>,
        rng: R,
        adaptation: Adaptation,
    ) -> Result<Self, Error> {
        attrs.validate()?;
        let base_adaptation = adaptation;
        let adaptation = adaptation.with_mode(attrs.mode);
        let min_sz = MIN_REGION_SZ;
        for (i, t) in targets.iter_mut().enumerate() {
            if t.regions.is_empty() {
                if let Some(regions) = fresh_regions(&mut ops, i, t, adaptation, &attrs) {
                    t.regions = regions;
                }
            }
        }
        if targets.iter().all(|t| t.regions.is_empty()) {
            return Err(Error::NoRegions);
        }
        let nr = targets.len() as u32;
        let mut engine = Self {
            attrs,
            ops,
            targets,
            ids: (0..nr).collect(),
            next_id: nr,
            rng,
            adaptation,
            base_adaptation,
            min_sz,
            passed: 0,
            next_aggr: attrs.aggr_samples(),
            next_update: attrs.update_samples(),
            next_tune: attrs.aggr_samples() * u64::from(attrs.intervals_goal.aggrs),
            aggr_samples: attrs.aggr_samples(),
            sz_limit: 0,
            last_nr_regions: 0,
            now_us: 0,
            window_start_us: 0,
            accessed: Vec::new(),
            window_counts: Vec::new(),
            schemes: Vec::new(),
            deadline_us: None,
            movement: enhanced::Movement::default(),
        };
        engine.sz_limit = engine.region_size_limit();
        Ok(engine)
    }

    /// Installs schemes (replacing any), applied from now on.
    pub fn set_schemes(&mut self, schemes: Vec<Damos>) {
        self.schemes = schemes
            .into_iter()
            .map(|d| {
                let mut st = SchemeState::new(d, &self.attrs);
                st.on_attrs(&self.attrs, self.passed);
                st
            })
            .collect();
    }

    /// Starts target `idx`'s regions afresh from its current ranges, as at
    /// the start (even regions, no counts, no age): for a process that
    /// exec'd, whose regions describe a program that is gone, so that no
    /// scheme acts on the new program by the old one's ages. Leaves them
    /// when the target has no ranges now.
    pub fn restart_target(&mut self, idx: usize) {
        let Some(t) = self.targets.get(idx) else {
            return;
        };
        if let Some(regions) = fresh_regions(&mut self.ops, idx, t, self.adaptation, &self.attrs)
            .filter(|r| !r.is_empty())
        {
            self.targets[idx].regions = regions;
            self.sz_limit = self.region_size_limit();
        }
    }

    /// Adds a target at the end of the context, as kernel DAMON's online
    /// commit of a longer target list does: the operations set must already
    /// know it at the next position (`targets().len()`). Its regions are its
    /// ranges split evenly, as at the start, unless it comes with regions;
    /// a target without ranges yet gets them at an ops update. The other
    /// targets' regions, counts and ages are untouched; the region budget
    /// (`max_nr_regions`, the size limit from `min_nr_regions`) is shared
    /// with the new target from the next window on. Returns its index in
    /// the snapshots.
    pub fn add_target(&mut self, mut t: Target) -> u32 {
        let idx = self.targets.len();
        if t.regions.is_empty() {
            if let Some(regions) =
                fresh_regions(&mut self.ops, idx, &t, self.adaptation, &self.attrs)
            {
                t.regions = regions;
            }
        }
        self.targets.push(t);
        let id = self.next_id;
        self.ids.push(id);
        self.next_id += 1;
        self.sz_limit = self.region_size_limit();
        id
    }

    /// Removes target `idx` (a position in [`targets`](Self::targets)) from
    /// the context, as the kernel removes an `obsolete_target`: the targets
    /// after it move down one position (the operations set must drop it at
    /// the same position), keep their regions, counts, ages and snapshot
    /// indices. Schemes forget where their quota stopped in it and what a
    /// dry run counted there.
    pub fn remove_target(&mut self, idx: usize) {
        if idx >= self.targets.len() {
            return;
        }
        self.targets.remove(idx);
        let id = self.ids.remove(idx);
        for s in &mut self.schemes {
            s.forget_target(idx);
            s.target_stats.remove(&id);
        }
        self.movement.remove_target(idx);
        self.sz_limit = self.region_size_limit();
    }

    /// The snapshot index of the target at position `idx`.
    pub fn target_id(&self, idx: usize) -> Option<u32> {
        self.ids.get(idx).copied()
    }

    /// Makes every installed scheme a dry run (see
    /// [`SchemeState::dry_run`](crate::schemes::SchemeState)): nothing is
    /// done, what would have been done is counted.
    pub fn set_dry_run(&mut self, dry_run: bool) {
        for st in &mut self.schemes {
            st.dry_run = dry_run;
        }
    }

    /// The installed schemes with their statistics and quota state.
    pub fn schemes(&self) -> &[SchemeState] {
        &self.schemes
    }

    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    pub fn ops(&self) -> &O {
        &self.ops
    }

    pub fn ops_mut(&mut self) -> &mut O {
        &mut self.ops
    }

    /// Total regions over all targets.
    pub fn nr_regions(&self) -> usize {
        self.targets.iter().map(|t| t.regions.len()).sum()
    }

    /// `sum of region sizes / min_nr_regions`, at least one page: merges never
    /// build a region bigger than this, which keeps at least about
    /// `min_nr_regions` regions.
    fn region_size_limit(&self) -> u64 {
        let total: u64 = self.targets.iter().map(Target::sz_regions).sum();
        (total / u64::from(self.attrs.min_nr_regions)).max(self.min_sz)
    }

    fn adaptive(&self) -> bool {
        !matches!(self.adaptation, Adaptation::Fixed(_))
    }

    /// The enhanced mode's moving-window follower (its prediction count).
    pub fn movement(&self) -> &enhanced::Movement {
        &self.movement
    }

    /// One sampling interval. Returns the snapshot when it ends an
    /// aggregation window.
    pub fn tick(&mut self) -> Option<Snapshot> {
        let (na, nu) = (self.next_aggr, self.next_update);

        // With schemes installed and every one of them switched off by its
        // watermarks, nothing is sampled (and nothing ages) until the wait ends.
        let wait = schemes::update_watermarks(&mut self.schemes, &mut self.ops, self.now_us);
        if wait > 0 {
            self.now_us += wait.min(
                self.deadline_us
                    .map_or(u64::MAX, |d| d.saturating_sub(self.now_us))
                    .max(1),
            );
            return None;
        }

        // Prepare: one random address per region.
        for r in self.targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
            r.sampling_addr = self.rng.random_range(r.ar.start..r.ar.end);
        }
        let window = SampleWindow {
            start_us: self.now_us,
            end_us: self.now_us + self.attrs.sample_us,
        };
        self.ops.prepare_access_checks(&self.targets, window);
        self.now_us = window.end_us;
        self.passed += 1;

        // Check and count.
        self.ops
            .check_accesses(&self.targets, window, &mut self.accessed);
        let len = self.attrs.max_nr_accesses().max(1);
        let mut max_nr = 0;
        let mut acc = self.accessed.iter();
        for r in self.targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
            let hit = *acc.next().unwrap_or(&false);
            // Pseudo moving sum: drop 1/len of the last window's total, add this sample.
            r.nr_accesses_bp = r
                .nr_accesses_bp
                .saturating_sub(r.last_nr_accesses.saturating_mul(10_000) / len);
            if hit {
                r.nr_accesses_bp = r.nr_accesses_bp.saturating_add(10_000);
                r.nr_accesses += 1;
            }
            max_nr = max_nr.max(r.nr_accesses);
        }

        let mut snapshot = None;
        if self.passed >= na {
            let mut counts = std::mem::take(&mut self.window_counts);
            if self.end_window(&mut counts) {
                max_nr = counts.iter().copied().max().unwrap_or(0);
            }
            self.window_counts = counts;
            if self.adaptive() {
                adapt::merge_regions(
                    &mut self.targets,
                    max_nr,
                    self.sz_limit,
                    self.attrs.max_nr_regions,
                    self.attrs.max_nr_accesses(),
                );
            } else {
                adapt::age_regions(&mut self.targets, max_nr);
            }
        }
        if !self.schemes.is_empty() {
            let mut ctx = schemes::Ctx {
                attrs: &self.attrs,
                ops: &mut self.ops,
                targets: &mut self.targets,
                ids: &self.ids,
                passed: self.passed,
                now_us: self.now_us,
            };
            schemes::apply_schemes(&mut self.schemes, &mut ctx);
        }
        if self.passed >= na {
            if self.attrs.intervals_goal.aggrs != 0 && self.passed >= self.next_tune {
                self.next_tune += self.aggr_samples * u64::from(self.attrs.intervals_goal.aggrs);
                self.tune_intervals();
            }
            self.next_aggr = na + self.attrs.aggr_samples();
            // Taken after tuning, like the kernel's tracepoint: ages are then in
            // the new aggregation interval, which the snapshot carries.
            snapshot = Some(self.take_snapshot());
            self.reset_aggregated();
            if self.adaptive() {
                self.last_nr_regions = adapt::split_regions(
                    &mut self.targets,
                    self.attrs.max_nr_regions,
                    self.last_nr_regions,
                    self.min_sz,
                    &mut self.rng,
                );
            }
            if self.adaptation == Adaptation::Enhanced {
                self.movement.observe(
                    &mut self.targets,
                    max_nr,
                    self.attrs.max_nr_regions as usize,
                    self.min_sz,
                );
            }
        }
        if self.passed >= nu {
            self.next_update = nu + self.attrs.update_samples();
            self.update_ranges();
        }
        snapshot
    }

    /// Lets the operations set convert the window's counts (see
    /// [`Operations::end_window`]); a changed count restarts the region's
    /// moving sum from it, as the window's reset would. Returns whether
    /// any count changed.
    fn end_window(&mut self, counts: &mut Vec<u32>) -> bool {
        let mut changed = false;
        counts.clear();
        counts.extend(
            self.targets
                .iter()
                .flat_map(|t| &t.regions)
                .map(|r| r.nr_accesses),
        );
        self.ops.end_window(counts);
        for (r, &c) in self
            .targets
            .iter_mut()
            .flat_map(|t| t.regions.iter_mut())
            .zip(counts.iter())
        {
            if r.nr_accesses != c {
                r.nr_accesses = c;
                r.nr_accesses_bp = c.saturating_mul(10_000);
                changed = true;
            }
        }
        changed
    }

    fn take_snapshot(&mut self) -> Snapshot {
        let attrs = self.attrs;
        let snap = Snapshot {
            start_us: self.window_start_us,
            end_us: self.now_us,
            sample_us: attrs.sample_us,
            aggr_us: attrs.aggr_us,
            targets: self
                .targets
                .iter()
                .zip(&self.ids)
                // A target without regions (none yet, or none left) has
                // nothing to report.
                .filter(|(t, _)| !t.regions.is_empty())
                .map(|(t, &id)| TargetSnapshot {
                    target_idx: id,
                    regions: t
                        .regions
                        .iter()
                        .map(|r| RegionSnapshot {
                            start: r.ar.start,
                            end: r.ar.end,
                            nr_accesses: r.nr_accesses,
                            age: r.age,
                        })
                        .collect(),
                })
                .collect(),
        };
        self.window_start_us = self.now_us;
        snap
    }

    fn reset_aggregated(&mut self) {
        for r in self.targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
            // Wipe the moving sum's rounding residue, as the kernel does.
            r.nr_accesses_bp = r.nr_accesses.saturating_mul(10_000);
            r.last_nr_accesses = r.nr_accesses;
            r.nr_accesses = 0;
        }
    }

    /// The ops update: fits each target's regions to its current ranges.
    /// No ranges (a process without mappings, such as a zombie) keeps the
    /// regions, as the kernel's vaddr update does when it cannot build the
    /// three regions.
    fn update_ranges(&mut self) {
        for i in 0..self.targets.len() {
            match monitoring_ranges(
                &mut self.ops,
                i,
                &self.targets[i],
                self.adaptation,
                &self.attrs,
            ) {
                Some(ranges) if !ranges.is_empty() => {
                    adapt::set_regions(&mut self.targets[i], &ranges, self.min_sz);
                }
                _ => {}
            }
        }
        self.sz_limit = self.region_size_limit();
    }

    /// Monitoring intervals auto-tuning (spec section 7): scale the sampling
    /// interval so the observed share of access events approaches
    /// `access_bp`, keeping `aggr / sample` constant.
    fn tune_intervals(&mut self) {
        let goal = self.attrs.intervals_goal;
        let (mut max_events, mut events) = (0u128, 0u128);
        for r in self.targets.iter().flat_map(|t| t.regions.iter()) {
            max_events += u128::from(r.sz()) * u128::from(self.aggr_samples);
            events += u128::from(r.sz()) * u128::from(r.nr_accesses);
        }
        let target = (max_events * u128::from(goal.access_bp) / 10_000).max(1);
        let score_bp = (events * 10_000 / target).min(u128::from(u64::MAX)) as u64;
        let mut adapt_bp = feedback::next_input(100_000_000, score_bp) / 10_000;
        if adapt_bp <= 10_000 {
            adapt_bp = 5_000 + adapt_bp / 2;
        }
        if adapt_bp == 10_000 {
            return;
        }
        let sample = (u128::from(self.attrs.sample_us) * u128::from(adapt_bp) / 10_000) as u64;
        let sample = sample.clamp(goal.min_sample_us, goal.max_sample_us).max(1);
        let new = Attrs {
            sample_us: sample,
            aggr_us: sample * self.aggr_samples,
            ..self.attrs
        };
        self.apply_attrs(new, true);
    }

    /// Installs validated attributes online. Results are rescaled to keep
    /// their meaning: counts as a share of the new maximum, ages in wall-clock
    /// time. At an aggregation boundary the finished window is converted,
    /// otherwise the partial window is dropped.
    fn apply_attrs(&mut self, new: Attrs, at_boundary: bool) {
        let old = self.attrs;
        let (old_max, new_max) = (old.max_nr_accesses(), new.max_nr_accesses());
        let conv = |nr: u32| -> u32 {
            if old_max == 0 || new_max == 0 {
                return nr;
            }
            let bp = u64::from(nr) * 10_000 / u64::from(old_max);
            (bp * u64::from(new_max) / 10_000) as u32
        };
        for r in self.targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
            if at_boundary {
                r.nr_accesses = conv(r.nr_accesses);
                r.nr_accesses_bp = r.nr_accesses.saturating_mul(10_000);
            } else {
                r.last_nr_accesses = conv(r.last_nr_accesses);
                r.nr_accesses_bp = r.last_nr_accesses.saturating_mul(10_000);
                r.nr_accesses = 0;
            }
            if old.aggr_us != 0 && new.aggr_us != 0 {
                r.age = (u64::from(r.age) * old.aggr_us / new.aggr_us) as u32;
            }
        }
        self.attrs = new;
        self.adaptation = self.base_adaptation.with_mode(new.mode);
        for st in &mut self.schemes {
            st.on_attrs(&new, self.passed);
        }
        self.next_aggr = self.passed + new.aggr_samples();
        self.next_update = self.passed + new.update_samples();
        if !at_boundary {
            self.aggr_samples = new.aggr_samples();
            self.window_start_us = self.now_us;
        }
    }
}

/// Target `idx`'s ranges to monitor: its operations set's, fitted to its
/// resident memory in the enhanced mode (leaving out up to
/// `min_nr_regions - 1` non-resident gaps, so that the region floor is
/// unchanged), where the operations set can tell.
/// Target `idx`'s regions as at the start: its monitoring ranges split
/// evenly into the adaptation's initial count; `None` when the operations
/// set gives no ranges.
fn fresh_regions<O: Operations>(
    ops: &mut O,
    idx: usize,
    t: &Target,
    adaptation: Adaptation,
    attrs: &Attrs,
) -> Option<Vec<crate::Region>> {
    let ranges = monitoring_ranges(ops, idx, t, adaptation, attrs)?;
    Some(vaddr::even_regions(
        &ranges,
        adaptation.initial_regions(attrs),
        MIN_REGION_SZ,
    ))
}

fn monitoring_ranges<O: Operations>(
    ops: &mut O,
    idx: usize,
    t: &Target,
    adaptation: Adaptation,
    attrs: &Attrs,
) -> Option<Vec<AddrRange>> {
    let ranges = ops.target_ranges(idx, t)?;
    if adaptation != Adaptation::Enhanced || ranges.is_empty() {
        return Some(ranges);
    }
    let Some(resident) = ops.resident_ranges(idx, &ranges) else {
        return Some(ranges);
    };
    let max = (attrs.min_nr_regions as usize).max(3);
    Some(enhanced::fit_resident(
        &ranges,
        &resident,
        max,
        MIN_REGION_SZ,
    ))
}

impl<O: Operations, R: Rng> Monitor for Engine<O, R> {
    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, Error> {
        loop {
            if self.deadline_us.is_some_and(|d| self.now_us >= d) {
                return Ok(None);
            }
            if (0..self.targets.len()).all(|i| !self.ops.target_valid(i)) {
                return Ok(None);
            }
            if let Some(s) = self.tick() {
                return Ok(Some(s));
            }
        }
    }

    fn commit(&mut self, attrs: Attrs) -> Result<(), Error> {
        attrs.validate()?;
        self.apply_attrs(attrs, false);
        self.next_tune = self.passed + self.aggr_samples * u64::from(attrs.intervals_goal.aggrs);
        Ok(())
    }

    fn attrs(&self) -> Attrs {
        self.attrs
    }

    fn now_us(&self) -> u64 {
        self.now_us
    }

    fn set_deadline(&mut self, deadline_us: Option<u64>) {
        self.deadline_us = deadline_us;
    }
}

#[cfg(test)]
mod tests;
