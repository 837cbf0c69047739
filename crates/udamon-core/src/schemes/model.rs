//! The scheme model: "regions of this size, this access frequency, for this
//! long: do this action", with quotas, goals, watermarks and filters.
//!
//! Patterns are kept in the user's units (access frequency as a share of the
//! maximum, age as time) so one scheme file works under any monitoring
//! attributes; [`AccessPattern::resolve`] turns them into the kernel's units
//! (samples per aggregation window, aggregation intervals) for the attributes
//! in force.

use serde::{Deserialize, Serialize};

use crate::{Addr, Attrs};

/// DAMOS actions. `Mlock` goes beyond the kernel (planned in the DAMON
/// patchset appendix): pin the region against reclaim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Willneed,
    Cold,
    Pageout,
    Hugepage,
    Nohugepage,
    Collapse,
    LruPrio,
    LruDeprio,
    MigrateHot,
    MigrateCold,
    Stat,
    Mlock,
}

impl Action {
    pub const ALL: [Action; 12] = [
        Action::Willneed,
        Action::Cold,
        Action::Pageout,
        Action::Hugepage,
        Action::Nohugepage,
        Action::Collapse,
        Action::LruPrio,
        Action::LruDeprio,
        Action::MigrateHot,
        Action::MigrateCold,
        Action::Stat,
        Action::Mlock,
    ];

    /// The action's keyword: the kernel's (sysfs `action` file, damo's
    /// `--damos_action`), udamon's own for `mlock`.
    pub const fn name(self) -> &'static str {
        match self {
            Action::Willneed => "willneed",
            Action::Cold => "cold",
            Action::Pageout => "pageout",
            Action::Hugepage => "hugepage",
            Action::Nohugepage => "nohugepage",
            Action::Collapse => "collapse",
            Action::LruPrio => "lru_prio",
            Action::LruDeprio => "lru_deprio",
            Action::MigrateHot => "migrate_hot",
            Action::MigrateCold => "migrate_cold",
            Action::Stat => "stat",
            Action::Mlock => "mlock",
        }
    }

    /// The action named `name` exactly ([`Action::name`]).
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The kernel's keyword; None for what only udamon's engine does.
    pub const fn kernel_name(self) -> Option<&'static str> {
        match self {
            Action::Mlock => None,
            a => Some(a.name()),
        }
    }

    /// Which built-in priority score ranks regions for this action's quota
    /// (spec 8.3): colder first for reclaim-like actions, hotter first for
    /// promotion-like ones, none for the rest.
    pub fn scorer(self) -> Scorer {
        match self {
            Action::Pageout | Action::LruDeprio | Action::MigrateCold => Scorer::Cold,
            Action::LruPrio | Action::MigrateHot => Scorer::Hot,
            _ => Scorer::None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scorer {
    Hot,
    Cold,
    /// Every region scores the maximum (no prioritisation).
    None,
}

/// Which regions a scheme acts on; closed intervals. Frequencies are in
/// basis points of the maximum `nr_accesses` (10,000 = every sample), ages
/// in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessPattern {
    pub min_sz: u64,
    pub max_sz: u64,
    pub min_freq_bp: u32,
    pub max_freq_bp: u32,
    pub min_age_us: u64,
    pub max_age_us: u64,
}

impl Default for AccessPattern {
    /// Matches every region.
    fn default() -> Self {
        Self {
            min_sz: 0,
            max_sz: u64::MAX,
            min_freq_bp: 0,
            max_freq_bp: 10_000,
            min_age_us: 0,
            max_age_us: u64::MAX,
        }
    }
}

/// An access pattern in the kernel's units for given attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelPattern {
    pub min_sz: u64,
    pub max_sz: u64,
    pub min_nr_accesses: u32,
    pub max_nr_accesses: u32,
    pub min_age: u32,
    pub max_age: u32,
}

impl AccessPattern {
    /// Converts to samples per window and aggregation intervals the way damo
    /// does (`int(percent * max / 100)`, `int(age_us / aggr_us)`); the upper
    /// bounds at their maximum stay unbounded.
    pub fn resolve(&self, attrs: &Attrs) -> KernelPattern {
        let max_nr = u64::from(attrs.max_nr_accesses());
        let nr = |bp: u32| (u64::from(bp) * max_nr / 10_000) as u32;
        let age = |us: u64| {
            if us == u64::MAX {
                u32::MAX
            } else {
                (us / attrs.aggr_us.max(1)).min(u64::from(u32::MAX)) as u32
            }
        };
        KernelPattern {
            min_sz: self.min_sz,
            max_sz: self.max_sz,
            min_nr_accesses: nr(self.min_freq_bp),
            max_nr_accesses: if self.max_freq_bp >= 10_000 {
                u32::MAX
            } else {
                nr(self.max_freq_bp)
            },
            min_age: age(self.min_age_us),
            max_age: age(self.max_age_us),
        }
    }
}

/// Relative weights of the priority score's parts (the kernel accepts
/// `sz` but its built-in scorers ignore it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaWeights {
    pub sz: u32,
    pub nr_accesses: u32,
    pub age: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalTuner {
    /// Feedback loop on the effective size quota (the default).
    #[default]
    Consist,
    /// Full speed until the goal is met, then stop.
    Temporal,
    /// udamon's own, not a kernel tuner: full speed (the size quota, else
    /// unlimited) until the goal is first met, then `Consist` from there.
    /// The feedback loop otherwise starts from one byte and takes dozens
    /// of quota windows to reach a useful size.
    Fast,
}

impl GoalTuner {
    pub const ALL: [GoalTuner; 3] = [GoalTuner::Consist, GoalTuner::Temporal, GoalTuner::Fast];

    /// The tuner's keyword: the kernel's (sysfs `quotas/goal_tuner`,
    /// Linux 7.1+), udamon's own for `fast`.
    pub const fn name(self) -> &'static str {
        match self {
            GoalTuner::Consist => "consist",
            GoalTuner::Temporal => "temporal",
            GoalTuner::Fast => "fast",
        }
    }

    /// The tuner named `name` exactly.
    pub fn from_name(name: &str) -> Option<GoalTuner> {
        GoalTuner::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The kernel's keyword; None for udamon's own.
    pub const fn kernel_name(self) -> Option<&'static str> {
        match self {
            GoalTuner::Fast => None,
            t => Some(t.name()),
        }
    }
}

/// What a quota goal measures. The `rss_bp` and `refault_rate` metrics
/// are the simulator's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalMetric {
    /// A value the user feeds in (`current_value`).
    UserInput,
    /// Increase of the system's "some" memory pressure stall time (us) per reset interval.
    SomeMemPsiUs,
    /// Used memory of NUMA node `nid`, in basis points of the node's total.
    NodeMemUsedBp,
    /// Free memory of NUMA node `nid`, in basis points.
    NodeMemFreeBp,
    /// LRU pages of the memory cgroup `path` on node `nid`, in basis points
    /// of the node's total (Linux 6.19+); 0 when the cgroup does not exist.
    NodeMemcgUsedBp,
    /// The node's total minus what `NodeMemcgUsedBp` counts, in basis
    /// points (Linux 6.19+).
    NodeMemcgFreeBp,
    /// Active LRU pages in basis points of all LRU pages (Linux 7.0+).
    ActiveMemBp,
    /// Inactive LRU pages in basis points of all LRU pages (Linux 7.0+).
    InactiveMemBp,
    /// Bytes of the memory this scheme's access pattern matches that sit on
    /// node `nid`, in basis points of all the memory it matches (Linux
    /// 7.2+, kernel DAMON's paddr only).
    NodeEligibleMemBp,
    /// Resident set of the target, in basis points of its mapped size. Unlike
    /// the kernel's metrics, met when the value falls to the target or below
    /// (it steers reclaim: "page out until RSS is 60%").
    RssBp,
    /// Refaults (faults on pages that were paged out) per second.
    RefaultRate,
}

impl GoalMetric {
    pub const ALL: [GoalMetric; 11] = [
        GoalMetric::UserInput,
        GoalMetric::SomeMemPsiUs,
        GoalMetric::NodeMemUsedBp,
        GoalMetric::NodeMemFreeBp,
        GoalMetric::NodeMemcgUsedBp,
        GoalMetric::NodeMemcgFreeBp,
        GoalMetric::ActiveMemBp,
        GoalMetric::InactiveMemBp,
        GoalMetric::NodeEligibleMemBp,
        GoalMetric::RssBp,
        GoalMetric::RefaultRate,
    ];

    /// The metric's keyword: the kernel's (sysfs `target_metric`), the
    /// simulator's own for `rss_bp` and `refault_rate`.
    pub const fn name(self) -> &'static str {
        match self {
            GoalMetric::UserInput => "user_input",
            GoalMetric::SomeMemPsiUs => "some_mem_psi_us",
            GoalMetric::NodeMemUsedBp => "node_mem_used_bp",
            GoalMetric::NodeMemFreeBp => "node_mem_free_bp",
            GoalMetric::NodeMemcgUsedBp => "node_memcg_used_bp",
            GoalMetric::NodeMemcgFreeBp => "node_memcg_free_bp",
            GoalMetric::ActiveMemBp => "active_mem_bp",
            GoalMetric::InactiveMemBp => "inactive_mem_bp",
            GoalMetric::NodeEligibleMemBp => "node_eligible_mem_bp",
            GoalMetric::RssBp => "rss_bp",
            GoalMetric::RefaultRate => "refault_rate",
        }
    }

    /// The metric named `name` exactly.
    pub fn from_name(name: &str) -> Option<GoalMetric> {
        GoalMetric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The kernel's keyword; None for the simulator's own metrics.
    pub const fn kernel_name(self) -> Option<&'static str> {
        match self {
            GoalMetric::RssBp | GoalMetric::RefaultRate => None,
            m => Some(m.name()),
        }
    }

    /// Whether the goal names a NUMA node (its `nid`).
    pub const fn is_per_node(self) -> bool {
        matches!(
            self,
            GoalMetric::NodeMemUsedBp
                | GoalMetric::NodeMemFreeBp
                | GoalMetric::NodeMemcgUsedBp
                | GoalMetric::NodeMemcgFreeBp
                | GoalMetric::NodeEligibleMemBp
        )
    }

    /// Whether the goal names a memory cgroup (its `path`).
    pub const fn needs_memcg(self) -> bool {
        matches!(
            self,
            GoalMetric::NodeMemcgUsedBp | GoalMetric::NodeMemcgFreeBp
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaGoal {
    pub metric: GoalMetric,
    pub target_value: u64,
    /// Only for `user_input`: the value the user reports.
    #[serde(default)]
    pub current_value: u64,
    /// NUMA node for the node metrics.
    #[serde(default)]
    pub nid: u32,
    /// The memory cgroup of the `node_memcg_*` metrics, as a path from the
    /// cgroup mount ("/workload").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl QuotaGoal {
    /// A goal on `metric` at `target_value`, node 0, no cgroup.
    pub fn new(metric: GoalMetric, target_value: u64) -> Self {
        Self {
            metric,
            target_value,
            current_value: 0,
            nid: 0,
            path: None,
        }
    }
}

/// How much a scheme may do per `reset_interval_ms`: `ms` of action time,
/// `sz` bytes, narrowed by goals. All zero and no goal: no limit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    #[serde(default)]
    pub ms: u64,
    #[serde(default)]
    pub sz: u64,
    #[serde(default)]
    pub reset_interval_ms: u64,
    #[serde(default)]
    pub weights: QuotaWeights,
    #[serde(default)]
    pub goals: Vec<QuotaGoal>,
    #[serde(default)]
    pub goal_tuner: GoalTuner,
    /// What a region the action failed on costs the quota, as
    /// `fail_charge_num / fail_charge_denom` of its size (the kernel's
    /// charge ratio, Linux 7.2+). A denominator of 0 charges it in full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fail_charge_num: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fail_charge_denom: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Quota {
    pub fn is_set(&self) -> bool {
        self.ms != 0 || self.sz != 0 || !self.goals.is_empty()
    }

    /// The bytes an attempt on `tried` bytes that took effect on `applied`
    /// of them charges: all of `tried` without a charge ratio, else the
    /// applied bytes plus the ratio of the rest.
    pub fn charge(&self, tried: u64, applied: u64) -> u64 {
        if self.fail_charge_denom == 0 {
            return tried;
        }
        let failed = u128::from(tried.saturating_sub(applied));
        let part = failed * u128::from(self.fail_charge_num) / u128::from(self.fail_charge_denom);
        applied
            .min(tried)
            .saturating_add(part.min(u128::from(u64::MAX)) as u64)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatermarkMetric {
    /// Always active.
    #[default]
    None,
    /// Free memory of the system in per-mille of the total.
    FreeMemRate,
}

impl WatermarkMetric {
    pub const ALL: [WatermarkMetric; 2] = [WatermarkMetric::None, WatermarkMetric::FreeMemRate];

    /// The kernel's keyword (sysfs `watermarks/metric`).
    pub const fn name(self) -> &'static str {
        match self {
            WatermarkMetric::None => "none",
            WatermarkMetric::FreeMemRate => "free_mem_rate",
        }
    }

    /// The metric named `name` exactly.
    pub fn from_name(name: &str) -> Option<WatermarkMetric> {
        WatermarkMetric::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Activates a scheme only while the metric is in range: it turns off above
/// `high` or below `low`, and turns back on only below `mid` (per-mille).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermarks {
    pub metric: WatermarkMetric,
    #[serde(default)]
    pub interval_us: u64,
    #[serde(default)]
    pub high: u32,
    #[serde(default)]
    pub mid: u32,
    #[serde(default)]
    pub low: u32,
}

/// What a filter matches. `Addr` and `Target` are decided by the engine
/// (core filters); the rest by the operations set, per page (ops filters).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FilterKind {
    Addr { start: Addr, end: Addr },
    Target { idx: u32 },
    Anon,
    Young,
    Memcg { path: String },
    HugepageSize { min: u64, max: u64 },
    Unmapped,
    Active,
}

impl FilterKind {
    pub fn is_core(&self) -> bool {
        self.filter_type().is_core()
    }

    /// The type of the filter, without its arguments.
    pub fn filter_type(&self) -> FilterType {
        match self {
            FilterKind::Addr { .. } => FilterType::Addr,
            FilterKind::Target { .. } => FilterType::Target,
            FilterKind::Anon => FilterType::Anon,
            FilterKind::Young => FilterType::Young,
            FilterKind::Memcg { .. } => FilterType::Memcg,
            FilterKind::HugepageSize { .. } => FilterType::HugepageSize,
            FilterKind::Unmapped => FilterType::Unmapped,
            FilterKind::Active => FilterType::Active,
        }
    }
}

/// The type of a filter ([`FilterKind`] without its arguments), as the
/// kernel names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilterType {
    Addr,
    Target,
    Anon,
    Young,
    Memcg,
    HugepageSize,
    Unmapped,
    Active,
}

impl FilterType {
    pub const ALL: [FilterType; 8] = [
        FilterType::Addr,
        FilterType::Target,
        FilterType::Anon,
        FilterType::Young,
        FilterType::Memcg,
        FilterType::HugepageSize,
        FilterType::Unmapped,
        FilterType::Active,
    ];

    /// The kernel's keyword (sysfs filter `type` file).
    pub const fn name(self) -> &'static str {
        match self {
            FilterType::Addr => "addr",
            FilterType::Target => "target",
            FilterType::Anon => "anon",
            FilterType::Young => "young",
            FilterType::Memcg => "memcg",
            FilterType::HugepageSize => "hugepage_size",
            FilterType::Unmapped => "unmapped",
            FilterType::Active => "active",
        }
    }

    /// The type named `name` exactly.
    pub fn from_name(name: &str) -> Option<FilterType> {
        FilterType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Decided by the engine (core filters) rather than per page by the
    /// operations set.
    pub const fn is_core(self) -> bool {
        matches!(self, FilterType::Addr | FilterType::Target)
    }

    /// The filter of this type when it takes no arguments (`anon`,
    /// `young`, `unmapped`, `active`).
    pub fn without_args(self) -> Option<FilterKind> {
        match self {
            FilterType::Anon => Some(FilterKind::Anon),
            FilterType::Young => Some(FilterKind::Young),
            FilterType::Unmapped => Some(FilterKind::Unmapped),
            FilterType::Active => Some(FilterKind::Active),
            _ => None,
        }
    }
}

/// A filter: memory that is (`matching`) or is not of `kind` is allowed
/// (`allow`) or rejected. The first filter that matches decides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    #[serde(flatten)]
    pub kind: FilterKind,
    #[serde(default = "yes")]
    pub matching: bool,
    #[serde(default)]
    pub allow: bool,
}

fn yes() -> bool {
    true
}

/// One scheme.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damos {
    #[serde(default)]
    pub pattern: AccessPattern,
    pub action: Action,
    /// 0: every aggregation interval.
    #[serde(default)]
    pub apply_interval_us: u64,
    #[serde(default)]
    pub quota: Quota,
    #[serde(default)]
    pub watermarks: Watermarks,
    #[serde(default)]
    pub filters: Vec<Filter>,
    /// Destination node of migrate actions.
    #[serde(default)]
    pub target_nid: Option<u32>,
    /// Destination nodes of migrate actions with relative weights (the
    /// kernel's `dests/`, Linux 6.17+): memory is interleaved across them
    /// in proportion to the weights. When set, `target_nid` is unused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dests: Vec<Dest>,
    /// Stop applying the scheme after this many passes over every target
    /// (the kernel's `max_nr_snapshots`, Linux 7.0+); 0 never stops.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_nr_snapshots: u64,
}

/// One destination of a migrate action: a NUMA node and its weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dest {
    pub node: u32,
    pub weight: u32,
}

/// Which destination the page at `page_index` (in page units, from any
/// fixed origin) goes to: the index into `dests` walking the cumulative
/// weights of `page_index` modulo their sum, as the kernel's weighted
/// interleave. `None` when every weight is 0.
pub fn dest_index(dests: &[Dest], page_index: u64) -> Option<usize> {
    let total: u64 = dests.iter().map(|d| u64::from(d.weight)).sum();
    if total == 0 {
        return None;
    }
    let mut at = page_index % total;
    for (i, d) in dests.iter().enumerate() {
        let w = u64::from(d.weight);
        if at < w {
            return Some(i);
        }
        at -= w;
    }
    None
}

impl Damos {
    pub fn new(pattern: AccessPattern, action: Action) -> Self {
        Self {
            pattern,
            action,
            apply_interval_us: 0,
            quota: Quota::default(),
            watermarks: Watermarks::default(),
            filters: Vec::new(),
            target_nid: None,
            dests: Vec::new(),
            max_nr_snapshots: 0,
        }
    }

    /// Whether the action moves memory to other nodes and has somewhere
    /// to move it.
    pub fn has_destination(&self) -> bool {
        self.target_nid.is_some() || !self.dests.is_empty()
    }
}

/// Cumulative statistics of a scheme (kernel `damos_stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamosStats {
    pub nr_tried: u64,
    pub sz_tried: u64,
    pub nr_applied: u64,
    pub sz_applied: u64,
    pub sz_ops_filter_passed: u64,
    pub qt_exceeds: u64,
    /// Apply passes that reached the end of a target (per target; Linux
    /// 7.0+).
    #[serde(default)]
    pub nr_snapshots: u64,
}
