//! What a monitor reports at every aggregation boundary.

use serde::{Deserialize, Serialize};

use crate::region::Addr;

/// A region as reported at an aggregation boundary: the finished window's
/// count and the region's age, as the kernel's `damon_aggregated` tracepoint
/// reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionSnapshot {
    pub start: Addr,
    pub end: Addr,
    pub nr_accesses: u32,
    pub age: u32,
}

impl RegionSnapshot {
    pub const fn sz(&self) -> u64 {
        self.end - self.start
    }
}

/// The regions of one target at an aggregation boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSnapshot {
    /// The target's index in the monitoring context.
    pub target_idx: u32,
    pub regions: Vec<RegionSnapshot>,
}

/// All targets' regions at one aggregation boundary (after merge, before reset
/// and split), with the intervals in force during the window. The default
/// is an empty snapshot at time 0, a buffer to decode or cut into.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Start of the aggregation window, in microseconds since monitoring began.
    pub start_us: u64,
    /// End of the aggregation window (the boundary), in microseconds.
    pub end_us: u64,
    /// Sampling interval in force during the window.
    pub sample_us: u64,
    /// Aggregation interval in force during the window.
    pub aggr_us: u64,
    pub targets: Vec<TargetSnapshot>,
}

impl Snapshot {
    /// The largest `nr_accesses` a region can have in this window.
    pub fn max_nr_accesses(&self) -> u32 {
        crate::attrs::max_nr_accesses(self.sample_us, self.aggr_us)
    }

    /// Number of regions over all targets.
    pub fn nr_regions(&self) -> usize {
        self.targets.iter().map(|t| t.regions.len()).sum()
    }
}
