//! The trace's events as udamon reads them, whether from the text pipe's
//! lines (trace.rs) or from the binary pages (raw.rs).

use udamon_core::schemes::DamosStats;
use udamon_core::RegionSnapshot;

/// One `damon_aggregated` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggregatedEvent {
    /// The ftrace timestamp in microseconds, when the line has one.
    pub time_us: Option<u64>,
    /// The thread that emitted it (ftrace's `comm-PID` column), when the
    /// line has one: the kdamond, so events of other kdamonds can be told
    /// apart from ours.
    pub pid: Option<u32>,
    pub target_id: u64,
    pub nr_regions: u32,
    pub region: RegionSnapshot,
}

/// One `damos_stat_after_apply_interval` event: a scheme's cumulative
/// statistics after one of its apply intervals, e.g. `kdamond.0-812 [001]
/// ..... 12.345678: damos_stat_after_apply_interval: ctx_idx=0
/// scheme_idx=1 nr_tried=3 sz_tried=12288 nr_applied=1 sz_applied=4096
/// sz_ops_filter_passed=0 qt_exceeds=0 nr_snapshots=2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemeStatEvent {
    /// The kdamond that emitted it, when the line says.
    pub pid: Option<u32>,
    pub ctx_idx: u32,
    pub scheme_idx: u32,
    pub stats: DamosStats,
}
