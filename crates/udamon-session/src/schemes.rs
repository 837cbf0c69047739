//! What a session reports of its schemes.

use serde::{Deserialize, Serialize};
use udamon_core::schemes::{DamosStats, SchemeState};

/// Statistics of one scheme at the end of a run (also the `schemes` entries
/// of a record, taken every second).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SchemeReport {
    pub index: usize,
    pub action: String,
    #[serde(default)]
    pub description: String,
    #[serde(flatten)]
    pub stats: DamosStats,
    /// The current window's effective size quota; null when unlimited (or
    /// when the backend cannot tell: see `not_available`).
    pub effective_quota_bytes: Option<u64>,
    /// Regions tried in the scheme's last apply pass, and their bytes (the
    /// kernel's `tried_regions` and `tried_regions/total_bytes`); null
    /// where the backend cannot tell.
    #[serde(default)]
    pub nr_tried_regions: Option<usize>,
    #[serde(default)]
    pub tried_regions_bytes: Option<u64>,
    /// Whether the watermarks let the scheme run; null where the backend
    /// cannot tell (kernel DAMON does not say).
    pub active: Option<bool>,
    /// The quota goals' current values, in order (schemes with goals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_values: Option<Vec<u64>>,
    /// Figures this backend cannot report, each with why (shown as n/a).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_available: Vec<String>,
    /// Dry runs: the distinct bytes the action would have been applied to
    /// (`sz_applied` counts them again at every pass that chose them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub would_apply_bytes: Option<u64>,
    /// A program's: the statistics of each process monitored now, by its
    /// target index (udamon's engine; kernel DAMON counts per scheme only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_target: Vec<TargetStats>,
}

/// A scheme's statistics on one target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetStats {
    pub target_idx: u32,
    #[serde(flatten)]
    pub stats: DamosStats,
}

/// Statistics of installed schemes, in the order given.
pub fn scheme_reports(states: &[SchemeState]) -> Vec<SchemeReport> {
    states
        .iter()
        .enumerate()
        .map(|(index, st)| SchemeReport {
            index,
            action: st.scheme.action.name().to_string(),
            description: udamon_scheme_file::describe(&st.scheme),
            stats: st.stats,
            effective_quota_bytes: st.effective_quota(),
            nr_tried_regions: Some(st.tried_regions.len()),
            tried_regions_bytes: Some(st.tried_regions.iter().map(|r| r.sz()).sum()),
            active: Some(st.active),
            goal_values: (!st.scheme.quota.goals.is_empty()).then(|| st.goal_values.clone()),
            not_available: Vec::new(),
            would_apply_bytes: st.dry_run.then(|| st.dry_run_bytes()),
            per_target: if st.target_stats.len() > 1 {
                st.target_stats
                    .iter()
                    .map(|(&target_idx, &stats)| TargetStats { target_idx, stats })
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect()
}
