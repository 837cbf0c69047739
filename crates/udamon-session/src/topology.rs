//! The machine's memory topology, read-only: NUMA nodes (CPUs, memory,
//! physical ranges, distances, HMAT performance), the kernel's memory
//! tiers, and the upper/lower node pairs that memory tiering works on,
//! with warnings where the kernel's view makes tiering impossible. Configs
//! never need physical addresses: they name nodes, and the ranges come
//! from here.

use std::path::Path;

use serde::Serialize;
use udamon_core::AddrRange;

use crate::features::parse_list;

/// Access performance the firmware (ACPI HMAT) reports from the node's
/// nearest initiator (`access0/initiators`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Hmat {
    pub read_latency_ns: Option<u64>,
    pub write_latency_ns: Option<u64>,
    pub read_bandwidth_mbps: Option<u64>,
    pub write_bandwidth_mbps: Option<u64>,
}

/// One NUMA node.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Node {
    pub id: u32,
    /// The kernel's cpulist ("" for a CPU-less node).
    pub cpus: String,
    pub total_bytes: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
    /// Its System RAM, from its memory blocks (empty when the kernel does
    /// not say or addresses are hidden).
    pub ranges: Vec<AddrRange>,
    /// The memory tier it is in (lower ids are faster), if the kernel has
    /// memory tiering.
    pub tier: Option<u32>,
    /// Distances to every node, in node order (`distance`).
    pub distances: Vec<u32>,
    pub hmat: Option<Hmat>,
}

impl Node {
    pub fn has_cpus(&self) -> bool {
        !self.cpus.trim().is_empty()
    }
}

/// A node with a slower one below it: demotion goes down, promotion up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Pair {
    pub upper: u32,
    pub lower: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Topology {
    pub nodes: Vec<Node>,
    /// (tier id, nodes), fastest first.
    pub tiers: Vec<(u32, Vec<u32>)>,
    /// `/sys/kernel/mm/numa/demotion_enabled`: the kernel demotes on
    /// reclaim instead of discarding.
    pub demotion_enabled: Option<bool>,
    /// `/proc/sys/kernel/numa_balancing` (0 off, 1 NUMA balancing, 2 its
    /// tiering mode, 3 both).
    pub numa_balancing: Option<u32>,
    /// How the pairs were found: "memory tiers" or "CPU-less nodes".
    pub pairs_from: String,
    pub pairs: Vec<Pair>,
    pub warnings: Vec<String>,
}

fn read(root: &Path, p: &str) -> Option<String> {
    std::fs::read_to_string(root.join(p))
        .ok()
        .map(|s| s.trim().to_string())
}

fn meminfo_kb(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.split_whitespace().nth(2) == Some(field))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
}

/// Reads the topology under `root` ("/" for this machine).
pub fn discover(root: &Path) -> Topology {
    let mut t = Topology::default();
    let node_dir = "sys/devices/system/node";
    // A list naming nodes no kernel has (`0-4294967295`) is refused whole,
    // with a warning naming the file: expanding it would take minutes.
    let ids = match read(root, &format!("{node_dir}/online")).map(|s| parse_list(&s)) {
        None => Vec::new(),
        Some(Ok(ids)) => ids,
        Some(Err(e)) => {
            t.warnings
                .push(format!("/{node_dir}/online: {e}: no node is read"));
            Vec::new()
        }
    };
    for &id in &ids {
        let d = format!("{node_dir}/node{id}");
        let meminfo = read(root, &format!("{d}/meminfo")).unwrap_or_default();
        let total = meminfo_kb(&meminfo, "MemTotal:").unwrap_or(0) * 1024;
        let free = meminfo_kb(&meminfo, "MemFree:").unwrap_or(0) * 1024;
        let hmat_dir = format!("{d}/access0/initiators");
        let num = |f: &str| read(root, &format!("{hmat_dir}/{f}")).and_then(|v| v.parse().ok());
        let hmat = root.join(&hmat_dir).is_dir().then(|| Hmat {
            read_latency_ns: num("read_latency"),
            write_latency_ns: num("write_latency"),
            read_bandwidth_mbps: num("read_bandwidth"),
            write_bandwidth_mbps: num("write_bandwidth"),
        });
        t.nodes.push(Node {
            id,
            cpus: read(root, &format!("{d}/cpulist")).unwrap_or_default(),
            total_bytes: total,
            free_bytes: free,
            used_bytes: total.saturating_sub(free),
            ranges: udamon_proc::node_ram(root, id).unwrap_or_default(),
            tier: None,
            distances: read(root, &format!("{d}/distance"))
                .map(|s| {
                    s.split_whitespace()
                        .filter_map(|v| v.parse().ok())
                        .collect()
                })
                .unwrap_or_default(),
            hmat,
        });
    }
    let tiers_dir = root.join("sys/devices/virtual/memory_tiering");
    let mut tiers: Vec<(u32, Vec<u32>)> = Vec::new();
    for e in std::fs::read_dir(&tiers_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name
            .strip_prefix("memory_tier")
            .and_then(|n| n.parse().ok())
        else {
            continue;
        };
        let Ok(nodes) = std::fs::read_to_string(e.path().join("nodelist")) else {
            continue;
        };
        match parse_list(&nodes) {
            Ok(nodes) => tiers.push((id, nodes)),
            Err(e) => t.warnings.push(format!(
                "/sys/devices/virtual/memory_tiering/{name}/nodelist: {e}: the tier is ignored"
            )),
        }
    }
    tiers.sort();
    for (tid, nodes) in &tiers {
        for n in t.nodes.iter_mut().filter(|n| nodes.contains(&n.id)) {
            n.tier = Some(*tid);
        }
    }
    t.tiers = tiers;
    t.demotion_enabled =
        read(root, "sys/kernel/mm/numa/demotion_enabled").map(|s| s == "true" || s == "1");
    t.numa_balancing = read(root, "proc/sys/kernel/numa_balancing").and_then(|s| s.parse().ok());
    pair_up(&mut t);
    t
}

/// Distance from `a` to `b`, or a large number when the kernel does not
/// say.
fn distance(t: &Topology, a: u32, b: u32) -> u32 {
    t.nodes
        .iter()
        .find(|n| n.id == a)
        .and_then(|n| n.distances.get(b as usize).copied())
        .unwrap_or(u32::MAX)
}

fn pair_up(t: &mut Topology) {
    let with_memory: Vec<&Node> = t.nodes.iter().filter(|n| n.total_bytes > 0).collect();
    if with_memory.len() < 2 {
        t.pairs_from = "one node with memory: nothing to tier".into();
        return;
    }
    let mut pairs = Vec::new();
    if t.tiers.len() >= 2 {
        t.pairs_from = "memory tiers".into();
        // Each node of a tier pairs with the nearest node of the next
        // slower tier that has memory.
        for w in t.tiers.windows(2) {
            let (upper, lower) = (&w[0].1, &w[1].1);
            for &u in upper {
                let best = lower
                    .iter()
                    .copied()
                    .filter(|l| with_memory.iter().any(|n| n.id == *l))
                    .min_by_key(|&l| (distance(t, u, l), l));
                if let Some(l) = best {
                    if with_memory.iter().any(|n| n.id == u) {
                        pairs.push(Pair { upper: u, lower: l });
                    }
                }
            }
        }
    } else {
        t.pairs_from = "CPU-less nodes (the kernel shows no memory tiers)".into();
        // Without tiers: a CPU-less node is the lower tier of the nearest
        // node with CPUs.
        for l in with_memory.iter().filter(|n| !n.has_cpus()) {
            let best = with_memory
                .iter()
                .filter(|n| n.has_cpus())
                .min_by_key(|n| (distance(t, n.id, l.id), n.id));
            if let Some(u) = best {
                pairs.push(Pair {
                    upper: u.id,
                    lower: l.id,
                });
            }
        }
        if t.tiers.len() == 1 {
            let (id, nodes) = &t.tiers[0];
            t.warnings.push(format!(
                "every node is in memory tier {id} (nodes {nodes:?}): the kernel sees no slower \
                 memory, so its own demotion and NUMA balancing's tiering move nothing; udamon \
                 pairs CPU-less nodes with the nearest CPU node instead{}",
                if pairs.is_empty() { " (none here)" } else { "" }
            ));
        }
    }
    for n in with_memory.iter().filter(|n| !n.has_cpus()) {
        let is_lower = pairs.iter().any(|p| p.lower == n.id);
        if !is_lower {
            t.warnings.push(format!(
                "node {} has memory but no CPUs and no faster node above it: nothing will be \
                 promoted from it",
                n.id
            ));
        }
    }
    let uppers: std::collections::BTreeSet<u32> = pairs.iter().map(|p| p.upper).collect();
    if uppers.len() > 1 {
        t.warnings.push(format!(
            "{} upper nodes ({uppers:?}): each is tiered with its own lower node, pair by pair; \
             DAMON does not know which CPU accesses a page, so a page hot for one socket may be \
             promoted to another's node",
            uppers.len()
        ));
    }
    if pairs.iter().any(|p| {
        t.nodes
            .iter()
            .find(|n| n.id == p.upper || n.id == p.lower)
            .is_some_and(|n| n.ranges.is_empty())
    }) {
        t.warnings.push(
            "a node's physical ranges are unknown (no memory blocks, or addresses hidden \
             without CAP_SYS_ADMIN): physical-address tiering needs them"
                .into(),
        );
    }
    t.pairs = pairs;
}

/// The topology of a simulated machine (`[[machine.node]]` of a spec):
/// node 0 has the CPUs and is the upper tier, every other node is CPU-less
/// and paired below node 0; each node's latency and bandwidth are its HMAT
/// figures (read and write alike; no bandwidth: unlimited, unknown here).
/// The simulator has no physical addresses: use its schemes with
/// [`Space::Virtual`].
pub fn sim_topology(m: &udamon_sim::MachineSpec, mapped_bytes: u64) -> Topology {
    let nodes: Vec<Node> = m
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let latency_ns = Some((n.latency_us * 1e3).round() as u64);
            let mbps = n.bandwidth.map(|b| (b / 1e6).round() as u64);
            let total = n.capacity.or(m.memory_limit).unwrap_or(mapped_bytes);
            Node {
                id: i as u32,
                cpus: if i == 0 { "0".into() } else { String::new() },
                total_bytes: total,
                // Before the workload runs, nothing is used.
                free_bytes: total,
                hmat: Some(Hmat {
                    read_latency_ns: latency_ns,
                    write_latency_ns: latency_ns,
                    read_bandwidth_mbps: mbps,
                    write_bandwidth_mbps: mbps,
                }),
                ..Node::default()
            }
        })
        .collect();
    let pairs = (1..nodes.len() as u32)
        .map(|lower| Pair { upper: 0, lower })
        .collect();
    Topology {
        tiers: nodes.iter().map(|n| (n.id, vec![n.id])).collect(),
        nodes,
        pairs_from: "the simulated machine".into(),
        pairs,
        ..Topology::default()
    }
}

/// Which addresses the tiering schemes act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// Physical memory (kernel DAMON's paddr): each scheme is kept to its
    /// node's ranges by address filters, and young-page filters back the
    /// monitor's sampling up.
    Physical,
    /// Processes' virtual memory (our engine, or kernel DAMON's vaddr):
    /// pages already on the destination node stay; no page filters (user
    /// space cannot evaluate them).
    Virtual,
}

/// The tiering preset's numbers (the seed's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TieringParams {
    /// Free memory the demotion keeps on an upper node (basis points).
    pub free_bp: u64,
    /// Use of an upper node the promotion aims at (basis points); it
    /// overlaps the demotion's goal so that neither stops.
    pub used_bp: u64,
    /// Bytes each scheme may migrate per second.
    pub bytes_per_s: u64,
    pub tuner: udamon_core::schemes::GoalTuner,
}

impl Default for TieringParams {
    fn default() -> Self {
        Self {
            free_bp: 50,
            used_bp: 9_970,
            bytes_per_s: 200 << 20,
            // Not the seed's consist: measured in the simulator (`udamon
            // bench --only tiering`), consist's quota grows from one byte
            // and moved almost nothing in a minute; temporal converged in
            // seconds, ahead of the NUMA-balancing-like model.
            tuner: udamon_core::schemes::GoalTuner::Temporal,
        }
    }
}

/// How the interleaving variant of the tiering schemes weighs a pair's
/// nodes ([`interleaved_tiering_schemes`]): `W_UPPER:W_LOWER` as written
/// (`3:1`), or `bandwidth`, in proportion to the nodes' read bandwidths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interleave {
    Weights { upper: u32, lower: u32 },
    Bandwidth,
}

impl std::str::FromStr for Interleave {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t == "bandwidth" {
            return Ok(Interleave::Bandwidth);
        }
        let bad = || {
            format!(
                "\"{s}\" is not W_UPPER:W_LOWER (like 3:1: weights of the upper and the lower \
                 node, whole numbers, the upper one above 0) or \"bandwidth\""
            )
        };
        let (u, l) = t.split_once(':').ok_or_else(bad)?;
        let w = |v: &str| v.trim().parse::<u32>().map_err(|_| bad());
        let (upper, lower) = (w(u)?, w(l)?);
        if upper == 0 {
            return Err(bad());
        }
        Ok(Interleave::Weights { upper, lower })
    }
}

/// Weights no larger than this sum are written for a bandwidth ratio: the
/// interleave goes unit by unit through the sum, so a small one keeps the
/// nodes' shares even over small ranges.
const MAX_WEIGHT_SUM: u32 = 16;

/// The weights of `upper` and `lower` (their read bandwidths, in MB/s):
/// the ratio itself when its terms, divided by their greatest common
/// divisor, sum to at most [`MAX_WEIGHT_SUM`], else the nearest ratio that
/// does (each weight at least 1; ties: the smaller sum).
fn bandwidth_weights(upper: u64, lower: u64) -> (u32, u32) {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let g = gcd(upper, lower).max(1);
    let (u, l) = (upper / g, lower / g);
    if u + l <= u64::from(MAX_WEIGHT_SUM) {
        return (u as u32, l as u32);
    }
    let share = upper as f64 / (upper + lower) as f64;
    let mut best = (1, 1);
    let mut best_err = f64::MAX;
    for sum in 2..=MAX_WEIGHT_SUM {
        for wu in 1..sum {
            let err = (f64::from(wu) / f64::from(sum) - share).abs();
            if err < best_err - 1e-12 {
                (best, best_err) = ((wu, sum - wu), err);
            }
        }
    }
    best
}

/// The interleaving variant of [`tiering_schemes`] (Micron's use of
/// DAMON): for each pair, the promotion migrates hot memory to both nodes,
/// interleaved with `how`'s weights (kernel DAMON's `dests`, Linux 6.17+),
/// instead of to the upper node alone, so that a workload bound by the
/// upper node's bandwidth gets the lower node's too; the demotion stays as
/// it is. With [`Space::Virtual`], hot memory already on the upper node is
/// interleaved too; with [`Space::Physical`], the promotion acts on the
/// lower node's memory only (its address filters), as the preset's does.
/// `Bandwidth` reads the nodes' HMAT read bandwidths, and fails naming the
/// node whose bandwidth is unknown.
pub fn interleaved_tiering_schemes(
    t: &Topology,
    space: Space,
    p: &TieringParams,
    how: Interleave,
) -> Result<Vec<udamon_core::schemes::Damos>, String> {
    use udamon_core::schemes::{Action, Dest};
    let mut schemes = tiering_schemes(t, space, p)?;
    let bandwidth = |id: u32| -> Result<u64, String> {
        t.nodes
            .iter()
            .find(|n| n.id == id)
            .and_then(|n| n.hmat.as_ref())
            .and_then(|h| h.read_bandwidth_mbps)
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                format!(
                    "node {id}'s bandwidth is unknown (no HMAT read_bandwidth; in a spec, no \
                     `bandwidth` in its [[machine.node]]): give the weights instead, like 3:1"
                )
            })
    };
    for (pair, promote) in t.pairs.iter().zip(
        schemes
            .iter_mut()
            .filter(|s| s.action == Action::MigrateHot),
    ) {
        let (wu, wl) = match how {
            Interleave::Weights { upper, lower } => (upper, lower),
            Interleave::Bandwidth => {
                bandwidth_weights(bandwidth(pair.upper)?, bandwidth(pair.lower)?)
            }
        };
        promote.target_nid = None;
        promote.dests = vec![
            Dest {
                node: pair.upper,
                weight: wu,
            },
            Dest {
                node: pair.lower,
                weight: wl,
            },
        ];
    }
    Ok(schemes)
}

/// The self-tuned tiering schemes (damon-self-tuned-tiering.txt) for every
/// pair: demote cold memory of the upper node to the lower one, aiming at
/// `free_bp` free on the upper node; promote hot memory of the lower node,
/// aiming at `used_bp` of the upper node used. Each at most `bytes_per_s`.
pub fn tiering_schemes(
    t: &Topology,
    space: Space,
    p: &TieringParams,
) -> Result<Vec<udamon_core::schemes::Damos>, String> {
    use udamon_core::schemes::{
        AccessPattern, Action, Damos, Filter, FilterKind, GoalMetric, Quota, QuotaGoal,
        QuotaWeights,
    };
    if t.pairs.is_empty() {
        return Err(format!(
            "no upper/lower node pair to tier ({}): `udamon topology` shows the nodes",
            t.pairs_from
        ));
    }
    let ranges_of = |id: u32| -> Vec<AddrRange> {
        t.nodes
            .iter()
            .find(|n| n.id == id)
            .map(|n| n.ranges.clone())
            .unwrap_or_default()
    };
    // Keep a scheme to node `keep`: reject every other node's ranges.
    let only = |keep: u32| -> Result<Vec<Filter>, String> {
        if ranges_of(keep).is_empty() {
            return Err(format!(
                "node {keep}'s physical ranges are unknown (its memory blocks, or addresses \
                 hidden without CAP_SYS_ADMIN)"
            ));
        }
        Ok(t.nodes
            .iter()
            .filter(|n| n.id != keep)
            .flat_map(|n| n.ranges.iter())
            .map(|r| Filter {
                kind: FilterKind::Addr {
                    start: r.start,
                    end: r.end,
                },
                matching: true,
                allow: false,
            })
            .collect())
    };
    let young = |allow: bool| Filter {
        kind: FilterKind::Young,
        matching: true,
        allow,
    };
    let quota = |metric: GoalMetric, target: u64, nid: u32| Quota {
        sz: p.bytes_per_s,
        reset_interval_ms: 1_000,
        weights: QuotaWeights {
            sz: 0,
            nr_accesses: 1,
            age: 1,
        },
        goals: vec![QuotaGoal {
            metric,
            target_value: target,
            current_value: 0,
            nid,
            path: None,
        }],
        goal_tuner: p.tuner,
        ..Quota::default()
    };
    let mut out = Vec::new();
    for pair in &t.pairs {
        // Demotion: memory with no access seen in the last window.
        let mut demote = Damos::new(
            AccessPattern {
                max_freq_bp: 0,
                ..AccessPattern::default()
            },
            Action::MigrateCold,
        );
        demote.target_nid = Some(pair.lower);
        demote.quota = quota(GoalMetric::NodeMemFreeBp, p.free_bp, pair.upper);
        // Promotion: memory accessed in the last window (one sample in 20
        // at the default intervals).
        let mut promote = Damos::new(
            AccessPattern {
                min_freq_bp: 500,
                ..AccessPattern::default()
            },
            Action::MigrateHot,
        );
        promote.target_nid = Some(pair.upper);
        promote.quota = quota(GoalMetric::NodeMemUsedBp, p.used_bp, pair.upper);
        if space == Space::Physical {
            demote.filters = only(pair.upper)?;
            demote.filters.push(young(false));
            promote.filters = only(pair.lower)?;
            promote.filters.push(young(true));
        }
        out.push(demote);
        out.push(promote);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// udamon's tiering preset over the simulator's shifting workload:
    /// after the hot set moves to the slow node at 60 s, the share of it
    /// on the fast node rises again (the preset's `temporal` tuner; the
    /// seed's `consist` ramps up from one byte and moves next to nothing
    /// in this time: docs/tiering.md).
    #[test]
    fn udamon_tiering_converges_after_a_shift_in_the_simulator() {
        use std::sync::Arc;
        let w = udamon_sim::Workload::from_toml(
            include_str!("../../../examples/specs/tier-shift.toml"),
            "tier-shift",
        )
        .unwrap();
        let topo = sim_topology(&w.machine, w.mapped_bytes());
        assert_eq!(topo.pairs, vec![Pair { upper: 0, lower: 1 }]);
        let p = TieringParams {
            tuner: udamon_core::schemes::GoalTuner::Temporal,
            ..TieringParams::default()
        };
        let schemes = tiering_schemes(&topo, Space::Virtual, &p).unwrap();
        let attrs = udamon_core::Attrs {
            intervals_goal: udamon_core::IntervalsGoal::recommended(
                400,
                udamon_core::Attrs::default().sample_us,
            ),
            ..udamon_core::Attrs::default()
        };
        let model = Arc::new(udamon_sim::Model::new(w));
        let opts = udamon_sim::TierOptions {
            duration_us: 90_000_000,
            seed: 12,
            ..udamon_sim::TierOptions::default()
        };
        let r = udamon_sim::run_tiering(
            &model,
            &udamon_sim::TierPolicy::Damos { attrs, schemes },
            &opts,
        )
        .unwrap();
        assert_eq!(r.shifts.len(), 2, "{:?}", r.shifts);
        let shift = &r.shifts[1];
        assert_eq!(shift.at_s, 60.0);
        assert!(shift.start_share < 0.1, "{shift:?}");
        // Second 60 holds the share just after the shift; the last, 30 s later.
        let after = r.hot_on_fast_per_s[59];
        let end = *r.hot_on_fast_per_s.last().unwrap();
        assert!(after < 0.2 && end > 0.9, "{after} -> {end}");
        assert!(shift.converged_after_s.is_some());
        assert!(r.promoted_bytes > 0);
    }

    /// The interleaving variant against the preset, in one run of the
    /// simulator (docs/tiering.md, "Interleaving by bandwidth": `cargo
    /// test -p udamon-session --lib interleaving -- --nocapture` prints
    /// the table there): where node 0 alone saturates (tier-bandwidth),
    /// spreading the hot set 3:1 by bandwidth lowers the mean access time;
    /// where it does not (tier-bandwidth-light), everything on node 0 is
    /// faster. Deterministic: only the direction is asserted.
    #[test]
    fn interleaving_by_bandwidth_wins_only_where_the_fast_node_saturates() {
        use std::sync::Arc;
        use udamon_sim::{run_tiering, Model, TierOptions, TierPolicy, Workload};
        let attrs = udamon_core::Attrs {
            intervals_goal: udamon_core::IntervalsGoal::recommended(
                400,
                udamon_core::Attrs::default().sample_us,
            ),
            ..udamon_core::Attrs::default()
        };
        let specs = [
            (
                "tier-bandwidth",
                include_str!("../../../examples/specs/tier-bandwidth.toml"),
            ),
            (
                "tier-bandwidth-light",
                include_str!("../../../examples/specs/tier-bandwidth-light.toml"),
            ),
        ];
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "{:<20} {:<17} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
            "spec", "policy", "runtime", "access", "late", "node 0", "node 1", "hot on 0"
        );
        let mut late = Vec::new();
        for (name, text) in specs {
            let w = Workload::from_toml(text, name).unwrap();
            let topo = sim_topology(&w.machine, w.mapped_bytes());
            let p = TieringParams::default();
            let preset = tiering_schemes(&topo, Space::Virtual, &p).unwrap();
            let interleave =
                interleaved_tiering_schemes(&topo, Space::Virtual, &p, Interleave::Bandwidth)
                    .unwrap();
            assert_eq!(
                interleave[1].dests,
                [
                    udamon_core::schemes::Dest { node: 0, weight: 3 },
                    udamon_core::schemes::Dest { node: 1, weight: 1 }
                ]
            );
            assert_eq!(interleave[0], preset[0]);
            let seed = w.seed.unwrap_or(0);
            let model = Arc::new(Model::new(w));
            let opts = TierOptions {
                duration_us: model.workload.duration_us,
                seed,
                // The light hot set's 8 accesses per page per second too.
                hot_rate: 1.0,
                ..TierOptions::default()
            };
            let mut row = Vec::new();
            for (label, policy) in [
                ("none", TierPolicy::None),
                (
                    "udamon",
                    TierPolicy::Damos {
                        attrs,
                        schemes: preset,
                    },
                ),
                (
                    "udamon-interleave",
                    TierPolicy::Damos {
                        attrs,
                        schemes: interleave,
                    },
                ),
            ] {
                let r = run_tiering(&model, &policy, &opts).unwrap();
                let hot_on_0 = r.hot_on_fast_per_s.last().copied().unwrap_or(0.0);
                println!(
                    "{:<20} {:<17} {:>8.1}s {:>6.0} ns {:>7.0} ns {:>6.0} MiB {:>6.0} MiB {:>9.0}%",
                    name,
                    label,
                    r.runtime_s,
                    r.mean_access_ns,
                    r.late_access_ns,
                    mib(r.node_used_bytes[0]),
                    mib(r.node_used_bytes[1]),
                    hot_on_0 * 100.0
                );
                row.push((r.late_access_ns, r.runtime_s, hot_on_0));
            }
            late.push(row);
        }
        // Saturated: the interleave is faster than the preset (and both
        // than nothing); its hot set sits about 3:1 on node 0.
        let (none, preset, inter) = (late[0][0], late[0][1], late[0][2]);
        assert!(inter.0 < preset.0 && preset.0 < none.0, "{late:?}");
        assert!(inter.1 < preset.1, "{late:?}");
        assert!(preset.2 > 0.9 && (0.6..0.85).contains(&inter.2), "{late:?}");
        // Not saturated: the preset is faster.
        let (preset, inter) = (late[1][1], late[1][2]);
        assert!(preset.0 < inter.0 && preset.1 < inter.1, "{late:?}");
    }

    #[test]
    fn interleave_weights_are_read_and_made_from_bandwidths() {
        assert_eq!(
            "3:1".parse::<Interleave>(),
            Ok(Interleave::Weights { upper: 3, lower: 1 })
        );
        assert_eq!(
            " 5 : 0 ".parse::<Interleave>(),
            Ok(Interleave::Weights { upper: 5, lower: 0 })
        );
        assert_eq!("bandwidth".parse::<Interleave>(), Ok(Interleave::Bandwidth));
        for bad in ["0:1", "3", "a:b", "3:1:1", "-1:2", ""] {
            let e = bad.parse::<Interleave>().unwrap_err();
            assert!(e.contains("W_UPPER:W_LOWER"), "{bad}: {e}");
        }
        assert_eq!(bandwidth_weights(268, 89), (3, 1));
        assert_eq!(bandwidth_weights(300, 100), (3, 1));
        assert_eq!(bandwidth_weights(100, 100), (1, 1));
        assert_eq!(bandwidth_weights(40_000, 13_000), (3, 1));
        assert_eq!(bandwidth_weights(50_000, 30_000), (5, 3));
        assert_eq!(bandwidth_weights(1_000, 1), (15, 1));
    }

    /// The variant on a host: weights given or from the HMAT, the
    /// promotion's dests instead of its node, the demotion unchanged, and
    /// a scheme file every format reads back; no HMAT bandwidth, no
    /// `bandwidth` weights.
    #[test]
    fn interleaved_schemes_promote_to_both_nodes() {
        use udamon_core::schemes::Dest;
        let d = tempfile::tempdir().unwrap();
        machine(d.path(), &[(4, "0\n"), (22, "1\n")]);
        let t = discover(d.path());
        let p = TieringParams::default();
        let preset = tiering_schemes(&t, Space::Physical, &p).unwrap();
        let e = interleaved_tiering_schemes(&t, Space::Physical, &p, Interleave::Bandwidth)
            .unwrap_err();
        assert!(e.starts_with("node 0's bandwidth is unknown"), "{e}");
        let how = Interleave::Weights { upper: 2, lower: 1 };
        let s = interleaved_tiering_schemes(&t, Space::Physical, &p, how).unwrap();
        assert_eq!(s[0], preset[0]);
        assert_eq!(s[1].target_nid, None);
        assert_eq!(
            s[1].dests,
            [Dest { node: 0, weight: 2 }, Dest { node: 1, weight: 1 }]
        );
        assert_eq!(s[1].filters, preset[1].filters);
        let text = udamon_scheme_file::to_toml(&s);
        assert!(text.contains("dests"), "{text}");
        assert_eq!(udamon_scheme_file::parse(&text, "t", None).unwrap(), s);
        for n in 0..2 {
            w(
                d.path(),
                &format!("sys/devices/system/node/node{n}/access0/initiators/read_bandwidth"),
                if n == 0 { "60000\n" } else { "20000\n" },
            );
        }
        let t = discover(d.path());
        let s =
            interleaved_tiering_schemes(&t, Space::Physical, &p, Interleave::Bandwidth).unwrap();
        assert_eq!(
            s[1].dests,
            [Dest { node: 0, weight: 3 }, Dest { node: 1, weight: 1 }]
        );
    }

    fn w(root: &Path, p: &str, s: &str) {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    /// Two nodes: node 0 with CPUs and 2 GiB, node 1 CPU-less with 2 GiB
    /// at 4 GiB; `tiers` puts them in tiers 4 and 5 (or one tier).
    fn machine(root: &Path, tiers: &[(u32, &str)]) {
        w(
            root,
            "proc/iomem",
            "00100000-7fffffff : System RAM\n100000000-17fffffff : System RAM\n",
        );
        w(
            root,
            "sys/devices/system/memory/block_size_bytes",
            "8000000\n",
        );
        w(root, "sys/devices/system/node/online", "0-1\n");
        w(root, "sys/devices/system/node/node0/cpulist", "0-1\n");
        w(root, "sys/devices/system/node/node1/cpulist", "\n");
        w(root, "sys/devices/system/node/node0/distance", "10 20\n");
        w(root, "sys/devices/system/node/node1/distance", "20 10\n");
        for (n, free) in [(0, 524288), (1, 2000000)] {
            w(
                root,
                &format!("sys/devices/system/node/node{n}/meminfo"),
                &format!(
                    "Node {n} MemTotal:       2097152 kB\nNode {n} MemFree:        {free} kB\n"
                ),
            );
        }
        for b in 0..16 {
            w(
                root,
                &format!("sys/devices/system/node/node0/memory{b}/online"),
                "1",
            );
            w(
                root,
                &format!("sys/devices/system/node/node1/memory{}/online", b + 32),
                "1",
            );
        }
        for (t, nodes) in tiers {
            w(
                root,
                &format!("sys/devices/virtual/memory_tiering/memory_tier{t}/nodelist"),
                nodes,
            );
        }
        w(root, "sys/kernel/mm/numa/demotion_enabled", "false\n");
        w(root, "proc/sys/kernel/numa_balancing", "0\n");
    }

    #[test]
    fn two_tiers_pair_the_fast_node_with_the_slow_one() {
        let d = tempfile::tempdir().unwrap();
        machine(d.path(), &[(4, "0\n"), (22, "1\n")]);
        w(
            d.path(),
            "sys/devices/system/node/node1/access0/initiators/read_latency",
            "300\n",
        );
        let t = discover(d.path());
        assert_eq!(t.pairs, vec![Pair { upper: 0, lower: 1 }]);
        assert_eq!(t.pairs_from, "memory tiers");
        assert_eq!(t.nodes[0].used_bytes, (2097152 - 524288) * 1024);
        assert_eq!(
            t.nodes[1].ranges,
            vec![AddrRange::new(0x1_0000_0000, 0x1_8000_0000)]
        );
        assert_eq!((t.nodes[0].tier, t.nodes[1].tier), (Some(4), Some(22)));
        assert_eq!(t.nodes[1].hmat.as_ref().unwrap().read_latency_ns, Some(300));
        assert_eq!(t.demotion_enabled, Some(false));
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    }

    #[test]
    fn one_tier_is_warned_about_and_cpu_less_nodes_pair_anyway() {
        let d = tempfile::tempdir().unwrap();
        machine(d.path(), &[(4, "0-1\n")]);
        let t = discover(d.path());
        assert_eq!(t.pairs, vec![Pair { upper: 0, lower: 1 }]);
        assert!(
            t.warnings[0].contains("every node is in memory tier 4"),
            "{:?}",
            t.warnings
        );
    }

    #[test]
    fn tiering_schemes_follow_the_seed_and_stay_on_their_nodes() {
        use udamon_core::schemes::{Action, FilterKind, GoalMetric};
        let d = tempfile::tempdir().unwrap();
        machine(d.path(), &[(4, "0\n"), (22, "1\n")]);
        let t = discover(d.path());
        let s = tiering_schemes(&t, Space::Physical, &TieringParams::default()).unwrap();
        assert_eq!(s.len(), 2);
        let (demote, promote) = (&s[0], &s[1]);
        assert_eq!(
            (demote.action, demote.target_nid),
            (Action::MigrateCold, Some(1))
        );
        assert_eq!(
            (promote.action, promote.target_nid),
            (Action::MigrateHot, Some(0))
        );
        assert_eq!(demote.quota.goals[0].metric, GoalMetric::NodeMemFreeBp);
        assert_eq!(
            (
                demote.quota.goals[0].target_value,
                demote.quota.goals[0].nid
            ),
            (50, 0)
        );
        assert_eq!(promote.quota.goals[0].metric, GoalMetric::NodeMemUsedBp);
        assert_eq!(promote.quota.goals[0].target_value, 9_970);
        assert_eq!(demote.quota.sz, 200 << 20);
        // Demotion rejects node 1's memory and young pages; promotion
        // rejects node 0's memory and allows only young pages.
        assert_eq!(
            demote.filters[0].kind,
            FilterKind::Addr {
                start: 0x1_0000_0000,
                end: 0x1_8000_0000
            }
        );
        assert!(!demote.filters[0].allow);
        assert_eq!(demote.filters[1].kind, FilterKind::Young);
        assert!(!demote.filters[1].allow);
        assert_eq!(
            promote.filters[0].kind,
            FilterKind::Addr {
                start: 0x100000,
                end: 0x8000_0000
            }
        );
        assert!(promote.filters[1].allow);
        // The text every scheme format reads back.
        let text = udamon_scheme_file::to_toml(&s);
        assert_eq!(udamon_scheme_file::parse(&text, "t", None).unwrap(), s);
        let v = tiering_schemes(&t, Space::Virtual, &TieringParams::default()).unwrap();
        assert!(v.iter().all(|s| s.filters.is_empty()));
        let one = tempfile::tempdir().unwrap();
        w(one.path(), "sys/devices/system/node/online", "0\n");
        assert!(tiering_schemes(
            &discover(one.path()),
            Space::Virtual,
            &TieringParams::default()
        )
        .is_err());
    }

    /// `node/online` = `0-4294967295` once ran for minutes (four billion
    /// node directories looked up): now the list is refused, naming the
    /// file and the value.
    #[test]
    fn node_lists_beyond_the_kernels_limit_are_refused() {
        let d = tempfile::tempdir().unwrap();
        machine(d.path(), &[(4, "0\n"), (22, "1-4294967295\n")]);
        w(d.path(), "sys/devices/system/node/online", "0-4294967295\n");
        let t = discover(d.path());
        assert!(t.nodes.is_empty() && t.tiers == [(4, vec![0])], "{t:?}");
        assert_eq!(
            t.warnings[..2],
            [
                "/sys/devices/system/node/online: node list \"0-4294967295\" names node \
                 4294967295, beyond the kernel's 1024 nodes (MAX_NUMNODES): no node is read",
                "/sys/devices/virtual/memory_tiering/memory_tier22/nodelist: node list \
                 \"1-4294967295\" names node 4294967295, beyond the kernel's 1024 nodes \
                 (MAX_NUMNODES): the tier is ignored"
            ]
        );
        // The largest list a kernel can have is read.
        w(d.path(), "sys/devices/system/node/online", "0-1023\n");
        assert_eq!(discover(d.path()).nodes.len(), 1024);
    }

    #[test]
    fn one_node_has_nothing_to_tier() {
        let d = tempfile::tempdir().unwrap();
        w(d.path(), "sys/devices/system/node/online", "0\n");
        w(
            d.path(),
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal: 1024 kB\nNode 0 MemFree: 10 kB\n",
        );
        w(d.path(), "sys/devices/system/node/node0/cpulist", "0-3\n");
        let t = discover(d.path());
        assert!(t.pairs.is_empty());
        assert_eq!(t.nodes.len(), 1);
    }
}
