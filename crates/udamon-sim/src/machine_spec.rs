//! The `[machine]` table of a workload spec, as data: nodes, placement, THP
//! mode, swap and action costs. The spec parser (spec.rs) fills it and the
//! machine (machine.rs) runs on it; it depends on neither.

use serde::Serialize;
use udamon_core::schemes::Action;

/// The huge page size (x86-64 PMD).
pub const HUGE_PAGE: u64 = 2 << 20;
/// The most NUMA nodes a spec may declare.
pub const MAX_NODES: usize = 64;
/// Bytes one access moves between a node and the CPU (a cache line): what
/// a node's `bandwidth` is used up by.
pub const ACCESS_BYTES: f64 = 64.0;
/// The simulated system's transparent huge page setting
/// (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThpMode {
    /// No huge page is ever faulted in; `hugepage` does nothing.
    Never,
    /// Only ranges advised with `hugepage` get huge pages (the default).
    #[default]
    Madvise,
    /// Every range gets huge pages unless advised `nohugepage`.
    Always,
}

/// A NUMA node of the simulated machine.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// Bytes; `None`: the memory limit, or the mapped size without a limit.
    pub capacity: Option<u64>,
    /// Memory latency of one access to a page on this node (us), unloaded.
    pub latency_us: f64,
    /// Bytes per second the node serves; `None`: unlimited. Accesses to a
    /// loaded node wait longer (docs/sim-spec.md, "Bandwidth").
    pub bandwidth: Option<f64>,
}

/// Where the objects' memory starts (`placement` in `[machine]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Everything on node 0; what does not fit is paged out.
    #[default]
    Node0,
    /// First touch in address order: node 0 until it is full, then node 1,
    /// and so on (the kernel's default local allocation, falling back to
    /// the next node). Pages faulted in later go to their range's node.
    FirstTouch,
}

/// The `[machine]` section of a spec: limits, latencies and costs. Every
/// latency is per page of the spec's page size unless it says otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineSpec {
    /// Resident bytes above this are reclaimed, coldest first (a cgroup's
    /// `memory.max`); `None`: unlimited.
    pub memory_limit: Option<u64>,
    pub thp: ThpMode,
    /// A fault on a page that was paged out (swap-in from zram).
    pub fault_latency_us: f64,
    /// The first touch of a never-populated base page (zero-fill fault).
    pub first_touch_latency_us: f64,
    /// The first touch of a never-populated 2 MiB extent backed by a huge page.
    pub huge_fault_latency_us: f64,
    /// Direct reclaim under the memory limit, per page reclaimed.
    pub reclaim_latency_us: f64,
    /// Node 0's latency of one access: the baseline access cost.
    pub access_cost_us: f64,
    /// Address translation cost of one access to a base page.
    pub tlb_miss_cost_us: f64,
    /// Huge pages divide the translation cost by this.
    pub huge_tlb_factor: f64,
    /// At least one; where memory starts: see [`Placement`].
    pub nodes: Vec<NodeSpec>,
    pub placement: Placement,
    /// Page-table walk cost of any action, per resident byte visited.
    pub walk_cost_us_per_byte: f64,
    /// Cost of each action per byte it acts on, in `Action::ALL` order.
    action_cost_us_per_byte: [f64; 12],
}

impl Default for MachineSpec {
    fn default() -> Self {
        let k4 = 4096.0;
        let m2 = HUGE_PAGE as f64;
        let mut s = MachineSpec {
            memory_limit: None,
            thp: ThpMode::Madvise,
            fault_latency_us: 25.0,
            first_touch_latency_us: 1.0,
            huge_fault_latency_us: 60.0,
            reclaim_latency_us: 5.0,
            access_cost_us: 0.1,
            tlb_miss_cost_us: 0.02,
            huge_tlb_factor: 8.0,
            nodes: vec![NodeSpec {
                capacity: None,
                latency_us: 0.1,
                bandwidth: None,
            }],
            placement: Placement::Node0,
            walk_cost_us_per_byte: 0.02 / k4,
            action_cost_us_per_byte: [0.0; 12],
        };
        for (a, c) in [
            (Action::Pageout, 10.0 / k4),
            (Action::Cold, 0.2 / k4),
            (Action::LruDeprio, 0.2 / k4),
            (Action::LruPrio, 0.2 / k4),
            (Action::Willneed, 5.0 / k4),
            (Action::Hugepage, 200.0 / m2),
            (Action::Collapse, 200.0 / m2),
            (Action::Nohugepage, 20.0 / m2),
            (Action::MigrateHot, 2.0 / k4),
            (Action::MigrateCold, 2.0 / k4),
            (Action::Stat, 0.0),
            (Action::Mlock, 0.1 / k4),
        ] {
            s.set_action_cost(a, c);
        }
        s
    }
}

fn action_index(a: Action) -> usize {
    Action::ALL.iter().position(|x| *x == a).unwrap_or(0)
}

impl MachineSpec {
    /// Cost of `a` per byte it acts on (us).
    pub fn action_cost(&self, a: Action) -> f64 {
        self.action_cost_us_per_byte[action_index(a)]
    }

    pub fn set_action_cost(&mut self, a: Action, us_per_byte: f64) {
        self.action_cost_us_per_byte[action_index(a)] = us_per_byte;
    }
}
