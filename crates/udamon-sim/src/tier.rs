//! Tiering judged with the simulator's truth: a workload on a machine with
//! a fast and a slow node, under a policy (nothing, the NUMAB-2-like model,
//! or DAMOS schemes on udamon's engine), measured every 100 ms of simulated
//! time: where the accesses were served, how much of the current hot set
//! is on the fast node and how long it took to get there after each shift,
//! migrated bytes, the fast node's fill against the tiering goals, the
//! workload's runtime and mean access time, the bytes on each node.
//! Deterministic: same spec, seed and policy, same report.

use std::sync::Arc;

use serde::Serialize;
use udamon_core::schemes::Damos;
use udamon_core::{AddrRange, Attrs, Monitor};

use crate::{build_engine, Model, MonitorKind, Numab2Params, SimOps};

/// Measurements are taken this often.
const CHECK_US: u64 = 100_000;

/// What moves memory between the nodes.
#[derive(Clone, Debug)]
pub enum TierPolicy {
    /// Nothing: first-touch placement stays.
    None,
    /// The NUMAB-2-like model (numab.rs).
    Numab2(Numab2Params),
    /// udamon's engine with these attributes and schemes.
    Damos { attrs: Attrs, schemes: Vec<Damos> },
}

impl TierPolicy {
    pub fn label(&self) -> &'static str {
        match self {
            TierPolicy::None => "none",
            TierPolicy::Numab2(_) => "numab2-model",
            TierPolicy::Damos { .. } => "udamon",
        }
    }
}

/// How a run is measured.
#[derive(Clone, Debug)]
pub struct TierOptions {
    pub duration_us: u64,
    pub seed: u64,
    pub fast_node: u32,
    /// Pages accessed at least this often (per second) are the hot set.
    pub hot_rate: f64,
    /// Converged: this share of the hot set's resident bytes on the fast node.
    pub converge_share: f64,
    /// The goals overshoot is measured against (basis points of the fast
    /// node): free memory below `free_bp`, use above `used_bp`.
    pub free_bp: u64,
    pub used_bp: u64,
}

impl Default for TierOptions {
    fn default() -> Self {
        Self {
            duration_us: 0,
            seed: 0,
            fast_node: 0,
            hot_rate: 10.0,
            converge_share: 0.9,
            free_bp: 50,
            used_bp: 9_970,
        }
    }
}

/// A change of the hot set (and the start of the run).
#[derive(Clone, Debug, Serialize)]
pub struct Shift {
    pub at_s: f64,
    pub hot_bytes: u64,
    /// Share of the new hot set on the fast node when it became hot.
    pub start_share: f64,
    /// Time until `converge_share` of it was on the fast node (`None`:
    /// not before the next shift or the end).
    pub converged_after_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TierReport {
    pub policy: String,
    pub simulated_s: f64,
    pub runtime_s: f64,
    /// Share of all accesses served by the fast node.
    pub fast_access_share: f64,
    /// The same per simulated second.
    pub fast_access_share_per_s: Vec<f64>,
    /// Share of the hot set's resident bytes on the fast node, at the end
    /// of each simulated second.
    pub hot_on_fast_per_s: Vec<f64>,
    pub shifts: Vec<Shift>,
    /// Mean time to converge over the shifts that converged.
    pub mean_converge_s: Option<f64>,
    pub shifts_converged: usize,
    pub promoted_bytes: u64,
    pub demoted_bytes: u64,
    pub hint_faults: u64,
    /// Share of the measurements with the fast node's free memory below
    /// the `free_bp` goal, and the lowest free memory seen (basis points).
    pub free_below_goal_share: f64,
    pub min_free_bp: f64,
    /// Share of the measurements with the fast node used above `used_bp`,
    /// and the highest use seen (basis points).
    pub used_above_goal_share: f64,
    pub max_used_bp: f64,
    /// Time the policy's own migrations took outside the workload
    /// (kdamond, kswapd).
    pub action_s: f64,
    /// Mean time of one access (ns): node 0's latency plus the access
    /// time above it (slower nodes, waits on bandwidth, huge pages), over
    /// the whole run and over its second half (after the migrations).
    pub mean_access_ns: f64,
    pub late_access_ns: f64,
    /// Resident bytes on each node at the end.
    pub node_used_bytes: Vec<u64>,
}

enum Runner {
    Plain(Box<SimOps>),
    Engine(Box<udamon_core::Engine<SimOps, rand_pcg::Pcg64Mcg>>),
}

impl Runner {
    fn ops(&self) -> &SimOps {
        match self {
            Runner::Plain(o) => o,
            Runner::Engine(e) => e.ops(),
        }
    }

    fn advance(&mut self, t_us: u64) {
        match self {
            Runner::Plain(o) => o.advance_to(t_us),
            Runner::Engine(e) => {
                while e.now_us() < t_us {
                    e.tick();
                }
            }
        }
    }
}

/// Runs `model` under `policy` and measures it.
pub fn run_tiering(
    model: &Arc<Model>,
    policy: &TierPolicy,
    o: &TierOptions,
) -> Result<TierReport, udamon_core::Error> {
    let mut run = match policy {
        TierPolicy::None => Runner::Plain(Box::new(SimOps::new(Arc::clone(model), o.seed))),
        TierPolicy::Numab2(p) => {
            let mut ops = SimOps::new(Arc::clone(model), o.seed);
            ops.enable_numab2(p.clone());
            Runner::Plain(Box::new(ops))
        }
        TierPolicy::Damos { attrs, schemes } => {
            let mut e = build_engine(model, *attrs, o.seed, MonitorKind::Adaptive)?;
            e.set_schemes(schemes.clone());
            Runner::Engine(Box::new(e))
        }
    };
    let w = &model.workload;
    let fast = o.fast_node as usize;
    let cap = w
        .machine
        .nodes
        .get(fast)
        .and_then(|n| n.capacity)
        .or(w.machine.memory_limit)
        .unwrap_or_else(|| w.mapped_bytes()) as f64;
    let mut hot: Vec<AddrRange> = Vec::new();
    let mut shifts: Vec<Shift> = Vec::new();
    let mut per_s = Vec::new();
    let mut hot_per_s = Vec::new();
    let (mut last_fast, mut last_all) = (0.0, 0.0);
    let (mut n_checks, mut n_free_low, mut n_used_high) = (0u64, 0u64, 0u64);
    let (mut min_free_bp, mut max_used_bp) = (f64::MAX, 0.0f64);
    // Access time and accesses at the middle of the run.
    let mut half: Option<(f64, f64)> = None;
    let mut t = 0;
    loop {
        // The hot set of the phase starting now.
        if t < o.duration_us {
            let now_hot = model.hot_ranges(t, o.hot_rate);
            if now_hot != hot || shifts.is_empty() {
                hot = now_hot;
                let (all, on) = run.ops().resident_on(&hot, o.fast_node);
                shifts.push(Shift {
                    at_s: t as f64 / 1e6,
                    hot_bytes: hot.iter().map(|r| r.sz()).sum(),
                    start_share: share(on, all),
                    converged_after_s: None,
                });
            }
        }
        let m = run.ops().metrics();
        if half.is_none() && 2 * t >= o.duration_us {
            half = Some((m.access_extra_us, m.node_accesses.iter().sum()));
        }
        let used = m.node_used_bytes.get(fast).copied().unwrap_or(0) as f64;
        let used_bp = used * 10_000.0 / cap;
        let free_bp = 10_000.0 - used_bp;
        if t > 0 {
            n_checks += 1;
            n_free_low += u64::from(free_bp < o.free_bp as f64);
            n_used_high += u64::from(used_bp > o.used_bp as f64);
            min_free_bp = min_free_bp.min(free_bp);
            max_used_bp = max_used_bp.max(used_bp);
        }
        let (all, on) = run.ops().resident_on(&hot, o.fast_node);
        let s = shifts.last_mut().expect("a shift");
        if s.converged_after_s.is_none() && share(on, all) >= o.converge_share {
            s.converged_after_s = Some(t as f64 / 1e6 - s.at_s);
        }
        if t > 0 && t.is_multiple_of(1_000_000) {
            let f = m.node_accesses.get(fast).copied().unwrap_or(0.0);
            let a: f64 = m.node_accesses.iter().sum();
            per_s.push(if a > last_all {
                (f - last_fast) / (a - last_all)
            } else {
                1.0
            });
            (last_fast, last_all) = (f, a);
            hot_per_s.push(share(on, all));
        }
        if t >= o.duration_us {
            break;
        }
        t = (t + CHECK_US).min(o.duration_us);
        run.advance(t);
    }
    let m = run.ops().metrics();
    let f = m.node_accesses.get(fast).copied().unwrap_or(0.0);
    let a: f64 = m.node_accesses.iter().sum();
    let conv: Vec<f64> = shifts.iter().filter_map(|s| s.converged_after_s).collect();
    let checks = n_checks.max(1) as f64;
    let base_ns = w.machine.nodes.first().map_or(0.0, |n| n.latency_us * 1e3);
    let access_ns = |extra_us: f64, accesses: f64| {
        if accesses > 0.0 {
            base_ns + extra_us * 1e3 / accesses
        } else {
            base_ns
        }
    };
    let (half_extra, half_a) = half.unwrap_or((0.0, 0.0));
    Ok(TierReport {
        policy: policy.label().into(),
        simulated_s: m.sim_time_s,
        runtime_s: m.runtime_s,
        fast_access_share: if a > 0.0 { f / a } else { 1.0 },
        fast_access_share_per_s: per_s,
        hot_on_fast_per_s: hot_per_s,
        mean_converge_s: (!conv.is_empty()).then(|| conv.iter().sum::<f64>() / conv.len() as f64),
        shifts_converged: conv.len(),
        shifts,
        promoted_bytes: m.promoted_bytes,
        demoted_bytes: m.demoted_bytes,
        hint_faults: m.hint_faults,
        free_below_goal_share: n_free_low as f64 / checks,
        min_free_bp: if n_checks > 0 { min_free_bp } else { 0.0 },
        used_above_goal_share: n_used_high as f64 / checks,
        max_used_bp,
        action_s: m.action_us as f64 / 1e6,
        mean_access_ns: access_ns(m.access_extra_us, a),
        late_access_ns: access_ns(m.access_extra_us - half_extra, a - half_a),
        node_used_bytes: m.node_used_bytes.clone(),
    })
}

fn share(on: u64, all: u64) -> f64 {
    if all == 0 {
        1.0
    } else {
        on as f64 / all as f64
    }
}
