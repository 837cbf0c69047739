//! The simulator as an operations set under udamon's engine.

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use udamon_core::schemes::{Damos, QuotaGoal};
use udamon_core::softdirty::{SoftDirtyReset, WindowEstimator};
use udamon_core::{
    vaddr, AddrRange, ApplyOutcome, Operations, SampleWindow, Target, MIN_REGION_SZ,
};

use crate::machine::{Machine, SimMetrics};
use crate::model::{Model, Piece};

/// vaddr-like primitives over a simulated space: the three-region rule on
/// the spec's objects, and an access check drawn from the exact Poisson
/// probability of the sampled page being touched in the sampling interval.
/// Cost per sample: O(regions x log(spec ranges)), whatever the space's size.
///
/// Underneath runs the simulated machine (`[machine]` in the spec): every
/// check advances it to the end of the sampling interval, schemes' actions
/// change it, and [`SimOps::metrics`] reads what it measured. Whether a
/// sampled page was accessed never depends on the machine's state.
pub struct SimOps {
    model: Arc<Model>,
    rng: Pcg64Mcg,
    pieces: Vec<Piece>,
    /// One whole cycle's pieces, when a soft-dirty interval is folded.
    cycle_pieces: Vec<Piece>,
    machine: Machine,
    /// Soft-dirty reset once per window (or less often): each check then
    /// draws for the time since the last reset, and the engine's counts
    /// are converted at each window's end. `None`: every check draws for
    /// its own interval, as accessed bits (or a reset every sample) do.
    soft_dirty: Option<SoftDirty>,
}

struct SoftDirty {
    est: WindowEstimator,
    reset_us: u64,
}

impl SimOps {
    /// `seed` drives the access draws (the engine has its own generator).
    pub fn new(model: Arc<Model>, seed: u64) -> SimOps {
        SimOps {
            rng: Pcg64Mcg::seed_from_u64(seed ^ 0x5eed_0fac_ce55),
            pieces: Vec::new(),
            cycle_pieces: Vec::new(),
            machine: Machine::new(&model.workload),
            model,
            soft_dirty: None,
        }
    }

    /// Simulates soft-dirty monitoring that resets the bits as `reset`
    /// says (every access counts as a write). `Sample` is what the
    /// simulator does anyway; `Auto` resets every window (a simulated
    /// reset costs nothing).
    pub fn set_soft_dirty_reset(&mut self, reset: SoftDirtyReset) {
        self.soft_dirty = reset.first_period().map(|n| SoftDirty {
            est: WindowEstimator::new(n),
            reset_us: 0,
        });
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// What the simulated machine measured so far (RSS, faults, runtime...).
    pub fn metrics(&self) -> SimMetrics {
        self.machine.metrics()
    }

    #[cfg(test)]
    pub(crate) fn nr_cells(&self) -> usize {
        self.machine.nr_cells()
    }

    /// Runs the NUMAB-2-like policy (a model of NUMA balancing's tiering
    /// mode, see `numab.rs`) on the machine from now on.
    pub fn enable_numab2(&mut self, p: crate::Numab2Params) {
        self.machine.numab = Some(crate::machine::numab::Numab2::new(p));
    }

    /// Resident bytes inside `ranges` (sorted, disjoint): in total, and on
    /// `node`.
    pub fn resident_on(&self, ranges: &[AddrRange], node: u32) -> (u64, u64) {
        let (all, on) = self.machine.resident_on(ranges, node);
        let p = self.model.workload.page_size as f64;
        ((all * p).round() as u64, (on * p).round() as u64)
    }

    /// Brings the simulated machine to `now_us` without sampling (the
    /// engine does this through `check_accesses`).
    pub fn advance_to(&mut self, now_us: u64) {
        self.machine.advance_to(&self.model, now_us);
    }
}

impl Operations for SimOps {
    fn target_ranges(&mut self, _idx: usize, _target: &Target) -> Option<Vec<AddrRange>> {
        Some(vaddr::monitoring_ranges(
            &self.model.workload.mappings(),
            MIN_REGION_SZ,
        ))
    }

    /// Populated memory (resident or paged out) at the machine's current
    /// time, as a live process's pagemap tells it.
    fn resident_ranges(&mut self, _idx: usize, ranges: &[AddrRange]) -> Option<Vec<AddrRange>> {
        Some(self.machine.populated_ranges(ranges))
    }

    fn prepare_access_checks(&mut self, _targets: &[Target], window: SampleWindow) {
        // Nothing to clear: each check draws for exactly its own interval,
        // or for the time since soft-dirty's last reset.
        if let Some(sd) = self.soft_dirty.as_mut() {
            if sd.est.take_reset() {
                sd.reset_us = window.start_us;
            }
        }
    }

    fn check_accesses(
        &mut self,
        targets: &[Target],
        window: SampleWindow,
        accessed: &mut Vec<bool>,
    ) {
        accessed.clear();
        // The sampling interval is bounded (`check_bounds`); the time since
        // soft-dirty's last reset (windows:N of them) is not: its whole
        // cycles are folded when it spans too many.
        let cycles = match self.soft_dirty.as_ref() {
            None => {
                self.model
                    .pieces(window.start_us, window.end_us, &mut self.pieces);
                0
            }
            Some(sd) => self.model.pieces_folded(
                sd.reset_us,
                window.end_us,
                &mut self.pieces,
                &mut self.cycle_pieces,
            ),
        };
        let w = &self.model.workload;
        let page_size = w.page_size;
        for r in targets.iter().flat_map(|t| &t.regions) {
            let page = r.sampling_addr / page_size * page_size;
            let h = if !w.is_mapped(page) {
                0.0
            } else if cycles == 0 {
                self.model.hazard(page, &self.pieces)
            } else {
                self.model.hazard(page, &self.pieces)
                    + cycles as f64 * self.model.hazard(page, &self.cycle_pieces)
            };
            let hit = h > 0.0 && self.rng.random::<f64>() < -(-h).exp_m1();
            accessed.push(hit);
        }
        self.machine.advance_to(&self.model, window.end_us);
        if let Some(sd) = self.soft_dirty.as_mut() {
            sd.est.sampled();
        }
    }

    fn end_window(&mut self, counts: &mut [u32]) {
        if let Some(sd) = self.soft_dirty.as_mut() {
            sd.est.end_window(counts);
        }
    }

    fn apply_scheme(
        &mut self,
        _idx: usize,
        range: AddrRange,
        scheme: &Damos,
        now_us: u64,
    ) -> ApplyOutcome {
        self.machine.apply(&self.model, range, scheme, now_us)
    }

    fn goal_metric(&mut self, _idx: usize, goal: &QuotaGoal, now_us: u64) -> Option<u64> {
        self.machine.advance_to(&self.model, now_us);
        self.machine.goal_metric(goal)
    }

    fn node_bytes(&mut self, _idx: usize, range: AddrRange, nid: u32) -> Option<(u64, u64)> {
        let (all, on) = self.resident_on(&[range], nid);
        Some((on, all))
    }

    fn free_mem_rate(&mut self, now_us: u64) -> Option<u32> {
        self.machine.advance_to(&self.model, now_us);
        Some(self.machine.free_mem_rate())
    }
}
