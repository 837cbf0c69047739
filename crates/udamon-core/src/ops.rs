//! The primitives under the engine: what a backend (simulator, live process,
//! physical memory) must provide. Policy (sampling, counting, region
//! adaptation, aging) stays in the engine.

use crate::region::{AddrRange, Target};
use crate::schemes::{Damos, QuotaGoal};

/// What applying an action to an address range did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// Bytes the action took effect on (0 when unsupported or failed).
    pub sz_applied: u64,
    /// Bytes that passed the scheme's ops filters.
    pub sz_ops_filter_passed: u64,
    /// Time the action took, in microseconds; the time quota is charged
    /// with it.
    pub cost_us: u64,
}

/// The sampling interval being checked: access state was cleared at
/// `start_us` ("make old") and is read back at `end_us`, both on the
/// monitor's logical clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleWindow {
    pub start_us: u64,
    pub end_us: u64,
}

/// An operations set, in the kernel's sense: a table of primitives.
///
/// The engine calls, per sampling interval: [`prepare_access_checks`] with
/// every region's `sampling_addr` already chosen, then [`check_accesses`].
/// At start and at every ops update it asks [`target_ranges`] for the ranges
/// to monitor.
///
/// [`prepare_access_checks`]: Operations::prepare_access_checks
/// [`check_accesses`]: Operations::check_accesses
/// [`target_ranges`]: Operations::target_ranges
pub trait Operations {
    /// The address ranges to monitor for target `idx`, sorted and disjoint
    /// (vaddr: the three regions of its current mappings). `None`, or an
    /// empty list at an update (a process without mappings), keeps the
    /// target's regions as they are (fvaddr, paddr, or a failed lookup).
    fn target_ranges(&mut self, _idx: usize, _target: &Target) -> Option<Vec<AddrRange>> {
        None
    }

    /// The parts of `ranges` (target `idx`'s monitoring ranges) whose pages
    /// are resident, sorted and disjoint, in any granularity: asked at start
    /// and at every ops update by the enhanced adaptation mode
    /// ([`crate::enhanced`]), which then monitors those parts. `None` where
    /// the operations set cannot tell; the mode then monitors `ranges` whole.
    fn resident_ranges(&mut self, _idx: usize, _ranges: &[AddrRange]) -> Option<Vec<AddrRange>> {
        None
    }

    /// Clears the accessed state of every region's `sampling_addr`.
    fn prepare_access_checks(&mut self, targets: &[Target], window: SampleWindow);

    /// Reports, for every region of every target in order, whether its
    /// `sampling_addr` was accessed during `window`. `accessed` is cleared
    /// and filled with one entry per region.
    fn check_accesses(
        &mut self,
        targets: &[Target],
        window: SampleWindow,
        accessed: &mut Vec<bool>,
    );

    /// At the end of every aggregation window, before regions are merged:
    /// each region's count of positive samples in the window, target by
    /// target and region by region. An operations set whose samples do not
    /// each stand for one sampling interval (soft-dirty reset once per
    /// window: [`crate::softdirty`]) turns them into the kernel's measure
    /// here. The default leaves them as they are.
    fn end_window(&mut self, _counts: &mut [u32]) {}

    /// Whether target `idx` still exists (a process may exit).
    fn target_valid(&self, _idx: usize) -> bool {
        true
    }

    /// Applies `scheme.action` to `range` of target `idx` at time `now_us`,
    /// evaluating the scheme's ops filters (every filter that is not
    /// [`core`](crate::schemes::FilterKind::is_core)) page by page, first
    /// match wins, default as in the kernel. The default applies nothing:
    /// unsupported actions are still "tried".
    fn apply_scheme(
        &mut self,
        _idx: usize,
        _range: AddrRange,
        _scheme: &Damos,
        _now_us: u64,
    ) -> ApplyOutcome {
        ApplyOutcome::default()
    }

    /// The current value of a quota goal's metric, or `None` where this
    /// operations set cannot measure it. `some_mem_psi_us` and
    /// `refault_rate` are returned as cumulative counters (stall
    /// microseconds, refaults) since start; the engine turns them into
    /// per-window figures. `user_input` never reaches the ops.
    fn goal_metric(&mut self, _idx: usize, _goal: &QuotaGoal, _now_us: u64) -> Option<u64> {
        None
    }

    /// Of `range` of target `idx`, the bytes on NUMA node `nid` and the
    /// bytes on any node (resident ones where the space is virtual), for
    /// the `node_eligible_mem_bp` goal; `None` where the operations set
    /// cannot tell.
    fn node_bytes(&mut self, _idx: usize, _range: AddrRange, _nid: u32) -> Option<(u64, u64)> {
        None
    }

    /// Free memory in per-mille of the total, for watermarks; `None` where
    /// unknown (schemes with a `free_mem_rate` watermark then stay off).
    fn free_mem_rate(&mut self, _now_us: u64) -> Option<u32> {
        None
    }
}
