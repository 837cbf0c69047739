//! The simulated machine under a workload: which pages are resident, backed
//! by huge pages, on which NUMA node, how old on the LRU, locked; what the
//! workload pays for it (faults, refaults, slower nodes, TLB misses, direct
//! reclaim), and what DAMOS actions do to it. The model is documented in
//! `docs/sim-spec.md` ("The machine").
//!
//! State is kept per address range ("cell"), never per page: the pages of a
//! cell share every attribute, and residency is fluid, kept as expected page
//! counts (huge-backed, resident base pages, swapped out, never touched).
//! Because accesses are Poisson, a non-resident page with hazard `h` over an
//! interval is touched with probability `1 - exp(-h)`, so the expected
//! number of first touches (faults) in a step is deterministic and costs
//! O(1) per cell. Cells never span a boundary of the spec (objects, access
//! ranges of any phase), so within a cell every phase has one plain rate.
//! Cells are either 2 MiB-aligned at both ends (they can hold huge pages)
//! or lie inside one 2 MiB extent (they cannot).

use std::collections::BTreeMap;

use serde::Serialize;
use udamon_core::schemes::{
    dest_index, Action, Damos, Dest, Filter, FilterKind, GoalMetric, QuotaGoal,
};
use udamon_core::{AddrRange, ApplyOutcome};

use crate::model::{seg_range_hazard, Model, Piece};
use crate::spec::Workload;

use crate::machine_spec::{MachineSpec, Placement, ThpMode, ACCESS_BYTES, HUGE_PAGE};

/// The machine advances in steps of at most this long.
pub(crate) const MAX_STEP_US: u64 = 10_000;
/// A page whose last access is more recent than this is on the active LRU.
const ACTIVE_AGE_US: f64 = 1e6;
/// Running totals are recomputed from the cells this often (float drift).
const RECOUNT_STEPS: u64 = 256;
/// Neighbouring cells with equal state are merged this often, everywhere.
const COALESCE_US: u64 = 1_000_000;
/// Page counts below this are treated as zero.
const EPS: f64 = 1e-6;
/// Cells merge when their state fractions differ by less than this...
const MERGE_FRAC: f64 = 1e-6;
/// ... and their LRU times by less than this (us).
const MERGE_LRU_US: f64 = 1_000.0;
/// A node's utilisation up to which its accesses queue as in an M/M/1
/// queue; past it they are throttled ([`queueing_factor`]).
const RHO_KNEE: f64 = 0.95;

/// What the simulated machine measured, for reports (JSON keys carry units).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimMetrics {
    /// Simulated time the machine has advanced to.
    pub sim_time_s: f64,
    /// The workload's runtime: simulated time plus every latency paid,
    /// relative to a baseline of resident base pages on node 0.
    pub runtime_s: f64,
    pub rss_bytes: u64,
    /// Time-weighted average of the resident set.
    pub rss_avg_bytes: u64,
    pub rss_peak_bytes: u64,
    /// Resident bytes backed by huge pages.
    pub huge_bytes: u64,
    /// Bytes paged out (by actions or reclaim) and not yet faulted back.
    pub swapped_bytes: u64,
    /// First touches plus refaults (a huge page's first touch is one fault).
    pub faults: u64,
    /// Faults on pages that had been paged out.
    pub refaults: u64,
    /// Bytes reclaimed to keep within the memory limit or node capacities.
    pub reclaimed_bytes: u64,
    /// Time the workload stalled on memory: refaults and direct reclaim
    /// (like PSI "some" for a single-threaded workload).
    pub psi_some_us: u64,
    /// All fault latency (first touches too) plus direct reclaim.
    pub stall_us: u64,
    /// Access time relative to the baseline (negative when huge pages save
    /// more than slower nodes cost).
    pub access_extra_us: f64,
    /// Time the actions took (kdamond's CPU time, not the workload's).
    pub action_us: u64,
    pub node_used_bytes: Vec<u64>,
    pub node_used_avg_bytes: Vec<u64>,
    /// Expected accesses served by each node since the start.
    pub node_accesses: Vec<f64>,
    /// Per node, the part of `access_extra_us` its accesses spent waiting
    /// on its bandwidth (empty when no node has a `bandwidth`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_bandwidth_wait_us: Vec<f64>,
    /// Bytes migrated to a lower-numbered (faster) node, and to a higher one.
    pub promoted_bytes: u64,
    pub demoted_bytes: u64,
    /// NUMA hint faults taken (the NUMAB-2 model only).
    pub hint_faults: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hint {
    None,
    Huge,
    NoHuge,
}

/// An address range whose pages share their state. Page counts are
/// expected values; never-touched pages are `pages - huge - small - swapped`.
#[derive(Clone, Debug)]
pub(crate) struct Cell {
    end: u64,
    obj: u32,
    /// Resident pages backed by huge pages.
    huge: f64,
    /// Resident base pages.
    small: f64,
    /// Paged-out pages (a touch refaults).
    swapped: f64,
    hint: Hint,
    node: u32,
    /// Expected time of the resident pages' last access: the LRU order.
    lru_us: f64,
    /// Last time a `young` filter checked (and cleared) the pages.
    young_clear_us: f64,
    mlocked: bool,
    /// NUMAB-2 model: pages armed by the scanner (their next access takes
    /// a hint fault), when they were armed, and pages whose last hint
    /// fault came within the threshold.
    nb_armed: f64,
    nb_arm_us: f64,
    nb_primed: f64,
}

impl Cell {
    fn resident(&self) -> f64 {
        self.huge + self.small
    }
}

/// Parameters derived from the spec, in pages and microseconds.
pub(crate) struct Cfg {
    spec: MachineSpec,
    page: u64,
    pagef: f64,
    /// Base pages per huge page.
    epp: f64,
    thp_possible: bool,
    caps: Vec<f64>,
    limit: Option<f64>,
    mapped: f64,
    /// Time saved per access on a huge page.
    tlb_saving_us: f64,
    files: Vec<bool>,
    cycle_us: u64,
}

impl Cfg {
    fn eligible(&self, hint: Hint) -> bool {
        self.thp_possible
            && match self.spec.thp {
                ThpMode::Never => false,
                ThpMode::Madvise => hint == Hint::Huge,
                ThpMode::Always => hint != Hint::NoHuge,
            }
    }
}

fn aligned(start: u64, end: u64) -> bool {
    start.is_multiple_of(HUGE_PAGE) && end.is_multiple_of(HUGE_PAGE)
}

/// `[a, b)` cut so every piece is either 2 MiB-aligned or inside one extent.
fn align_pieces(a: u64, b: u64, out: &mut Vec<(u64, u64)>) {
    let ua = a.div_ceil(HUGE_PAGE) * HUGE_PAGE;
    let db = b / HUGE_PAGE * HUGE_PAGE;
    if ua >= b || db <= a {
        out.push((a, b));
    } else if ua >= db {
        out.push((a, ua));
        out.push((ua, b));
    } else {
        for p in [(a, ua), (ua, db), (db, b)] {
            if p.0 < p.1 {
                out.push(p);
            }
        }
    }
}

/// Running counters.
#[derive(Default)]
pub(crate) struct Acc {
    rss: f64,
    node_used: Vec<f64>,
    rss_integral: f64,
    node_integral: Vec<f64>,
    rss_peak: f64,
    faults: f64,
    refaults: f64,
    stall_us: f64,
    psi_us: f64,
    access_extra_us: f64,
    reclaimed: f64,
    action_us: f64,
    cost_carry_us: f64,
    node_accesses: Vec<f64>,
    /// Per node, expected accesses in the current step (bandwidth).
    step_accesses: Vec<f64>,
    /// Per node, time waited on its bandwidth.
    bandwidth_wait_us: Vec<f64>,
    promoted: f64,
    demoted: f64,
    hint_faults: f64,
}

/// What an ops filter sees of a page.
struct Folio {
    anon: bool,
    young: bool,
    active: bool,
    size: u64,
}

/// The kernel's rule: the first filter that matches decides; with none
/// matching, the page is rejected iff the last filter is an allow filter.
fn filters_pass(filters: &[&Filter], f: &Folio) -> bool {
    for flt in filters {
        #[allow(unreachable_patterns)]
        let m = match &flt.kind {
            FilterKind::Anon => f.anon,
            FilterKind::Young => f.young,
            FilterKind::Active => f.active,
            FilterKind::HugepageSize { min, max } => *min <= f.size && f.size <= *max,
            // Every simulated page is mapped; cgroups are not simulated.
            FilterKind::Unmapped | FilterKind::Memcg { .. } => false,
            FilterKind::Addr { .. } | FilterKind::Target { .. } => continue,
            _ => false,
        };
        if m == flt.matching {
            return flt.allow;
        }
    }
    filters.last().is_none_or(|l| !l.allow)
}

/// The simulated machine. Advances lazily: every call brings it to the
/// given time first.
pub(crate) struct Machine {
    cfg: Cfg,
    cells: BTreeMap<u64, Cell>,
    /// Spec boundaries: cells never merge across them.
    cuts: Vec<u64>,
    now_us: u64,
    acc: Acc,
    /// Below every cell's LRU time: where deactivated pages go.
    lru_floor: f64,
    steps: u64,
    next_coalesce_us: u64,
    pieces: Vec<Piece>,
    young_pieces: Vec<Piece>,
    node_prev: Vec<f64>,
    /// The NUMAB-2-like policy, when it runs (numab.rs).
    pub(crate) numab: Option<numab::Numab2>,
}

impl Machine {
    pub fn new(w: &Workload) -> Machine {
        let spec = w.machine.clone();
        let page = w.page_size;
        let pagef = page as f64;
        let mapped = w.mapped_bytes() as f64 / pagef;
        let limit = spec.memory_limit.map(|l| (l / page) as f64);
        let default_cap = limit.unwrap_or(mapped);
        let caps = spec
            .nodes
            .iter()
            .map(|n| n.capacity.map_or(default_cap, |c| (c / page) as f64))
            .collect::<Vec<_>>();
        let nr_nodes = caps.len();
        let cfg = Cfg {
            page,
            pagef,
            epp: (HUGE_PAGE / page).max(1) as f64,
            thp_possible: page < HUGE_PAGE,
            caps,
            limit,
            mapped,
            tlb_saving_us: spec.tlb_miss_cost_us * (1.0 - 1.0 / spec.huge_tlb_factor),
            files: w.objects.iter().map(|o| o.file).collect(),
            cycle_us: w.cycle_us(),
            spec,
        };
        let mut cuts: Vec<u64> = w
            .objects
            .iter()
            .flat_map(|o| [o.range.start, o.range.end])
            .chain(
                w.phases
                    .iter()
                    .flat_map(|p| p.accesses.iter())
                    .flat_map(|a| [a.range.start, a.range.end]),
            )
            .collect();
        cuts.sort_unstable();
        cuts.dedup();

        let mut cells = BTreeMap::new();
        let mut pieces = Vec::new();
        for (oi, o) in w.objects.iter().enumerate() {
            let lo = cuts.partition_point(|&c| c <= o.range.start);
            let hi = cuts.partition_point(|&c| c < o.range.end);
            let mut bounds = vec![o.range.start];
            bounds.extend_from_slice(&cuts[lo..hi]);
            bounds.push(o.range.end);
            for b in bounds.windows(2) {
                pieces.clear();
                align_pieces(b[0], b[1], &mut pieces);
                for &(s, e) in &pieces {
                    let n = (e - s) as f64 / pagef;
                    let huge_start = o.populated
                        && cfg.spec.thp == ThpMode::Always
                        && cfg.thp_possible
                        && aligned(s, e);
                    let (huge, small) = match (o.populated, huge_start) {
                        (false, _) => (0.0, 0.0),
                        (true, true) => (n, 0.0),
                        (true, false) => (0.0, n),
                    };
                    cells.insert(
                        s,
                        Cell {
                            end: e,
                            obj: oi as u32,
                            huge,
                            small,
                            swapped: 0.0,
                            hint: Hint::None,
                            node: 0,
                            lru_us: 0.0,
                            young_clear_us: 0.0,
                            mlocked: false,
                            nb_armed: 0.0,
                            nb_arm_us: 0.0,
                            nb_primed: 0.0,
                        },
                    );
                }
            }
        }
        let mut m = Machine {
            cfg,
            cells,
            cuts,
            now_us: 0,
            acc: Acc {
                node_used: vec![0.0; nr_nodes],
                node_integral: vec![0.0; nr_nodes],
                node_accesses: vec![0.0; nr_nodes],
                step_accesses: vec![0.0; nr_nodes],
                bandwidth_wait_us: vec![0.0; nr_nodes],
                ..Acc::default()
            },
            lru_floor: 0.0,
            steps: 0,
            next_coalesce_us: COALESCE_US,
            pieces: Vec::new(),
            young_pieces: Vec::new(),
            node_prev: vec![0.0; nr_nodes],
            numab: None,
        };
        if m.cfg.spec.placement == Placement::FirstTouch {
            m.place_first_touch();
        }
        m.recount();
        // What does not fit starts paged out (as if reclaimed while the
        // program initialised it), lowest addresses first.
        m.enforce_limits(false);
        m.acc.reclaimed = 0.0;
        m.acc.rss_peak = m.acc.rss;
        m
    }

    /// First-touch placement: resident pages fill node 0 in address order,
    /// then node 1, and so on; the last node takes the rest.
    fn place_first_touch(&mut self) {
        let nr = self.cfg.caps.len();
        let mut node = 0usize;
        let mut room = self.cfg.caps[0];
        let mut at = 0u64;
        while let Some((&start, c)) = self.cells.range(at..).next() {
            let (end, res) = (c.end, c.resident());
            at = end;
            if node + 1 < nr && res > room + EPS {
                // Cut where this node is full; the rest goes to the next.
                let n = (end - start) as f64 / self.cfg.pagef;
                let fit = (room / (res / n)).floor() as u64;
                if fit > 0 {
                    let cut = start + fit * self.cfg.page;
                    self.split_at(cut);
                    let keys: Vec<u64> = self.cells.range(start..cut).map(|(k, _)| *k).collect();
                    for k in keys {
                        self.cells.get_mut(&k).expect("cell").node = node as u32;
                    }
                    at = cut;
                } else {
                    at = start;
                }
                node += 1;
                room = self.cfg.caps[node];
                continue;
            }
            self.cells.get_mut(&start).expect("cell").node = node as u32;
            room -= res;
        }
    }

    fn recount(&mut self) {
        self.acc.rss = 0.0;
        self.acc.node_used.iter_mut().for_each(|u| *u = 0.0);
        for c in self.cells.values() {
            let r = c.resident();
            self.acc.rss += r;
            self.acc.node_used[c.node as usize] += r;
        }
    }

    /// Brings the machine to `t_us` (no-op if it is there already).
    pub fn advance_to(&mut self, model: &Model, t_us: u64) {
        while self.now_us < t_us {
            let end = t_us.min(self.now_us + MAX_STEP_US);
            self.step(model, self.now_us, end);
            self.now_us = end;
            self.steps += 1;
            if self.steps.is_multiple_of(RECOUNT_STEPS) {
                self.recount();
            }
            if self.now_us >= self.next_coalesce_us {
                self.next_coalesce_us = self.now_us + COALESCE_US;
                self.coalesce(0, u64::MAX);
            }
        }
    }

    fn step(&mut self, model: &Model, t0: u64, t1: u64) {
        let rss0 = self.acc.rss;
        self.node_prev.clone_from(&self.acc.node_used);
        model.pieces(t0, t1, &mut self.pieces);
        let mut hint = self.numab.as_mut().map(|n| n.hint_ctx());
        let Machine {
            cfg,
            cells,
            acc,
            pieces,
            ..
        } = self;
        for piece in pieces.iter() {
            for seg in &model.segs[piece.phase] {
                // Cells never span a spec boundary: each lies inside `seg`.
                for (&start, cell) in cells.range_mut(seg.range.start..seg.range.end) {
                    let a = seg_range_hazard(seg, AddrRange::new(start, cell.end), piece, cfg.page);
                    if a > 0.0 {
                        if let Some(h) = hint.as_mut() {
                            numab::hint_faults(h, cfg, acc, start, cell, a, piece.b_us as f64);
                        }
                        touch(cfg, acc, start, cell, a, piece.b_us as f64);
                    }
                }
            }
        }
        if let (Some(h), Some(n)) = (hint, self.numab.as_mut()) {
            n.take_candidates(h);
        }
        self.wait_on_bandwidth(t1 - t0);
        self.enforce_limits(true);
        if self.numab.is_some() {
            self.numab_step(model, t0, t1);
        }
        let dt = (t1 - t0) as f64;
        let acc = &mut self.acc;
        acc.rss_integral += (rss0 + acc.rss) / 2.0 * dt;
        for (i, u) in acc.node_used.iter().enumerate() {
            acc.node_integral[i] += (self.node_prev[i] + u) / 2.0 * dt;
        }
        acc.rss_peak = acc.rss_peak.max(acc.rss);
    }

    /// The step's accesses to a node with a `bandwidth` wait on it: over a
    /// step of `dt_us`, utilisation `rho` = the bytes its accesses moved
    /// per second over its bandwidth, and each access costs its latency
    /// times [`queueing_factor`]`(rho)` instead of its latency
    /// (docs/sim-spec.md, "Bandwidth"). Nodes without one: nothing.
    fn wait_on_bandwidth(&mut self, dt_us: u64) {
        let acc = &mut self.acc;
        for (k, n) in self.cfg.spec.nodes.iter().enumerate() {
            let a = std::mem::take(&mut acc.step_accesses[k]);
            let Some(bw) = n.bandwidth else {
                continue;
            };
            if a <= 0.0 || dt_us == 0 {
                continue;
            }
            let rho = a * ACCESS_BYTES * 1e6 / dt_us as f64 / bw;
            let wait = a * n.latency_us * (queueing_factor(rho) - 1.0);
            acc.access_extra_us += wait;
            acc.bandwidth_wait_us[k] += wait;
        }
    }

    /// Reclaims down to the memory limit and to each node's capacity.
    /// `charge`: the workload stalls on it (direct reclaim); returns the
    /// pages reclaimed.
    fn enforce_limits(&mut self, charge: bool) -> f64 {
        let mut total = 0.0;
        if let Some(lim) = self.cfg.limit {
            if self.acc.rss > lim + EPS {
                total += self.reclaim(self.acc.rss - lim, None, charge);
            }
        }
        for k in 0..self.cfg.caps.len() {
            let over = self.acc.node_used[k] - self.cfg.caps[k];
            if over > EPS {
                total += self.reclaim(over, Some(k as u32), charge);
            }
        }
        total
    }

    /// Pages out `amount` pages, least recently used first, skipping
    /// mlocked memory.
    fn reclaim(&mut self, amount: f64, node: Option<u32>, charge: bool) -> f64 {
        let mut cand: Vec<(f64, u64)> = self
            .cells
            .iter()
            .filter(|(_, c)| !c.mlocked && c.resident() > EPS && node.is_none_or(|n| c.node == n))
            .map(|(k, c)| (c.lru_us, *k))
            .collect();
        cand.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut left = amount;
        for (_, k) in cand {
            if left <= EPS {
                break;
            }
            let c = self.cells.get_mut(&k).expect("candidate cell");
            let res = c.resident();
            let take = res.min(left);
            let f = take / res;
            c.huge -= c.huge * f;
            c.small -= c.small * f;
            c.swapped += take;
            self.acc.rss -= take;
            self.acc.node_used[c.node as usize] -= take;
            left -= take;
        }
        let done = amount - left.max(0.0);
        self.acc.reclaimed += done;
        if charge {
            let s = done * self.cfg.spec.reclaim_latency_us;
            self.acc.stall_us += s;
            self.acc.psi_us += s;
        }
        done
    }

    /// Splits the cell holding `x` (if any) so that a cell starts at `x`,
    /// keeping every cell aligned or inside one extent: a huge page cut in
    /// two is split into base pages, as madvise does on part of a THP.
    fn split_at(&mut self, x: u64) {
        let Some((&s, c)) = self.cells.range(..x).next_back() else {
            return;
        };
        if c.end <= x {
            return;
        }
        let c = self.cells.remove(&s).expect("cell");
        let mut pieces = Vec::with_capacity(4);
        if aligned(s, c.end) && !x.is_multiple_of(HUGE_PAGE) {
            let d = x / HUGE_PAGE * HUGE_PAGE;
            let u = d + HUGE_PAGE;
            for p in [(s, d), (d, x), (x, u), (u, c.end)] {
                if p.0 < p.1 {
                    pieces.push(p);
                }
            }
        } else {
            pieces.push((s, x));
            pieces.push((x, c.end));
        }
        let n = (c.end - s) as f64;
        for (a, b) in pieces {
            let f = (b - a) as f64 / n;
            let mut p = c.clone();
            p.end = b;
            p.huge = c.huge * f;
            p.small = c.small * f;
            p.swapped = c.swapped * f;
            p.nb_armed = c.nb_armed * f;
            p.nb_primed = c.nb_primed * f;
            if !aligned(a, b) {
                p.small += p.huge;
                p.huge = 0.0;
            }
            self.cells.insert(a, p);
        }
    }

    /// Merges neighbouring cells with equal state between `lo` and `hi`
    /// (and the cells touching them).
    fn coalesce(&mut self, lo: u64, hi: u64) {
        let first = self.cells.range(..lo).next_back().map_or(lo, |(k, _)| *k);
        let keys: Vec<u64> = self.cells.range(first..=hi).map(|(k, _)| *k).collect();
        let Some(&k0) = keys.first() else {
            return;
        };
        let mut a = k0;
        for &b in &keys[1..] {
            if !self.try_merge(a, b) {
                a = b;
            }
        }
    }

    fn try_merge(&mut self, a: u64, b: u64) -> bool {
        let (ca, cb) = (&self.cells[&a], &self.cells[&b]);
        if ca.end != b || self.cuts.binary_search(&b).is_ok() {
            return false;
        }
        let end = cb.end;
        if !(aligned(a, end) || a / HUGE_PAGE == (end - 1) / HUGE_PAGE) {
            return false;
        }
        if ca.hint != cb.hint || ca.node != cb.node || ca.mlocked != cb.mlocked || ca.obj != cb.obj
        {
            return false;
        }
        let (na, nb) = ((b - a) as f64, (end - b) as f64);
        let near = |x: f64, y: f64| (x / na - y / nb).abs() * self.cfg.pagef < MERGE_FRAC;
        if !(near(ca.huge, cb.huge) && near(ca.small, cb.small) && near(ca.swapped, cb.swapped)) {
            return false;
        }
        if !(near(ca.nb_armed, cb.nb_armed)
            && near(ca.nb_primed, cb.nb_primed)
            && (ca.nb_arm_us - cb.nb_arm_us).abs() <= MERGE_LRU_US)
        {
            return false;
        }
        let (ra, rb) = (ca.resident(), cb.resident());
        if ra > EPS && rb > EPS && (ca.lru_us - cb.lru_us).abs() > MERGE_LRU_US {
            return false;
        }
        let cb = self.cells.remove(&b).expect("cell");
        let ca = self.cells.get_mut(&a).expect("cell");
        ca.end = cb.end;
        ca.huge += cb.huge;
        ca.small += cb.small;
        ca.swapped += cb.swapped;
        ca.nb_armed += cb.nb_armed;
        ca.nb_primed += cb.nb_primed;
        ca.nb_arm_us = ca.nb_arm_us.max(cb.nb_arm_us);
        if ra + rb > 0.0 {
            ca.lru_us = (ca.lru_us * ra + cb.lru_us * rb) / (ra + rb);
        }
        ca.young_clear_us = ca.young_clear_us.max(cb.young_clear_us);
        true
    }

    /// Whether the pages of the cell at `start` are more likely than not to
    /// have been accessed since a `young` filter last checked them (over
    /// at most the last cycle of phases).
    fn is_young(&mut self, model: &Model, start: u64, now: u64) -> bool {
        let c = &self.cells[&start];
        let t0 = (c.young_clear_us as u64).max(now.saturating_sub(self.cfg.cycle_us));
        if t0 >= now {
            return false;
        }
        let range = AddrRange::new(start, c.end);
        let n = range.sz() as f64 / self.cfg.pagef;
        model.pieces(t0, now, &mut self.young_pieces);
        let mut h = 0.0;
        for p in &self.young_pieces {
            if let Some(seg) = model.seg_at(p.phase, start) {
                h += seg_range_hazard(seg, range, p, self.cfg.page);
            }
        }
        h / n >= std::f64::consts::LN_2
    }

    /// Applies `scheme`'s action to `range` at `now` (see docs/sim-spec.md).
    pub fn apply(
        &mut self,
        model: &Model,
        range: AddrRange,
        scheme: &Damos,
        now: u64,
    ) -> ApplyOutcome {
        self.advance_to(model, now);
        let page = self.cfg.page;
        let lo = range.start / page * page;
        let hi = range.end.div_ceil(page) * page;
        if lo >= hi {
            return ApplyOutcome::default();
        }
        self.split_at(lo);
        self.split_at(hi);
        let filters: Vec<&Filter> = scheme
            .filters
            .iter()
            .filter(|f| !f.kind.is_core())
            .collect();
        let has_young = filters.iter().any(|f| matches!(f.kind, FilterKind::Young));
        let action = scheme.action;
        let mut ap = Applying {
            target_nid: scheme.target_nid,
            dests: &scheme.dests,
            filters,
            action,
            unit_cost: self.cfg.spec.action_cost(action) * self.cfg.pagef,
            walk_cost: self.cfg.spec.walk_cost_us_per_byte * self.cfg.pagef,
            now_f: now as f64,
            applied: 0.0,
            passed: 0.0,
            cost: 0.0,
        };
        let mut at = lo;
        while let Some((&start, _)) = self.cells.range(at..hi).next() {
            let young = if has_young {
                let y = self.is_young(model, start, now);
                self.cells.get_mut(&start).expect("cell").young_clear_us = ap.now_f;
                y
            } else {
                false
            };
            at = self.apply_cell(&mut ap, start, young);
        }
        self.coalesce(lo, hi);
        self.charge_action(ap.applied, ap.passed, ap.cost)
    }

    /// Applies the action to the cell at `start` (its pages young or not
    /// to a `young` filter); returns the cell's end.
    fn apply_cell(&mut self, ap: &mut Applying, start: u64, young: bool) -> u64 {
        let cfg = &self.cfg;
        let acc = &mut self.acc;
        let cell = self.cells.get_mut(&start).expect("cell");
        let c = CellSeen::new(cfg, cell, start, &ap.filters, young, ap.now_f);
        ap.cost += ap.walk_cost * c.res;
        let (unit_cost, passed_res, node) = (ap.unit_cost, c.passed_res, c.node);
        #[allow(unreachable_patterns)]
        match ap.action {
            Action::Pageout => {
                ap.passed += passed_res;
                if !cell.mlocked && passed_res > EPS {
                    cell.huge -= c.ph;
                    cell.small -= c.ps;
                    cell.swapped += passed_res;
                    acc.rss -= passed_res;
                    acc.node_used[node] -= passed_res;
                    ap.applied += passed_res;
                    ap.cost += unit_cost * passed_res;
                }
            }
            Action::Cold | Action::LruDeprio => {
                ap.passed += passed_res;
                if c.majority && c.res > EPS && !cell.mlocked {
                    self.lru_floor -= 1.0;
                    cell.lru_us = self.lru_floor;
                    ap.applied += passed_res;
                    ap.cost += unit_cost * passed_res;
                }
            }
            Action::LruPrio => {
                ap.passed += passed_res;
                if c.majority && c.res > EPS {
                    cell.lru_us = ap.now_f;
                    ap.applied += passed_res;
                    ap.cost += unit_cost * passed_res;
                }
            }
            Action::Willneed => willneed(cfg, acc, cell, ap, &c),
            Action::Hugepage | Action::Nohugepage => {
                ap.passed += passed_res;
                if cfg.thp_possible && cfg.spec.thp != ThpMode::Never && c.majority {
                    set_hugepage_hint(cfg, acc, cell, ap, &c);
                }
            }
            Action::Collapse => {
                ap.passed += passed_res;
                if cfg.thp_possible
                    && cell.hint != Hint::NoHuge
                    && c.majority
                    && aligned(start, c.end)
                {
                    let (prom, new) = promote(cell, c.n, cfg.epp, !cfg.eligible(cell.hint));
                    acc.rss += new;
                    acc.node_used[node] += new;
                    ap.applied += prom;
                    ap.cost += unit_cost * prom;
                }
            }
            Action::MigrateHot | Action::MigrateCold => {
                ap.passed += passed_res;
                if ap.dests.is_empty() {
                    let to = ap.target_nid;
                    self.migrate(ap, &c, to);
                } else {
                    self.migrate_weighted(ap, &c, young);
                }
            }
            // As the kernel: stat counts passed bytes only when ops
            // filters exist.
            Action::Stat if !ap.filters.is_empty() => ap.passed += passed_res,
            Action::Mlock => {
                ap.passed += passed_res;
                if c.majority {
                    if !cell.mlocked {
                        ap.applied += c.n;
                    }
                    cell.mlocked = true;
                    ap.cost += unit_cost * c.res;
                }
            }
            _ => {}
        }
        c.end
    }

    /// Migrates the cell's resident pages to the scheme's target node, when
    /// the majority of them pass the filters; where the node cannot take
    /// them all, the part that fits.
    fn migrate(&mut self, ap: &mut Applying, c: &CellSeen, to: Option<u32>) {
        let cfg = &self.cfg;
        let Some(t) = to.map(|t| t as usize).filter(|&t| t < cfg.caps.len()) else {
            return;
        };
        let (node, res, unit_cost) = (c.node, c.res, ap.unit_cost);
        if node == t || !c.majority {
            return;
        }
        let acc = &mut self.acc;
        let free = (cfg.caps[t] - acc.node_used[t]).max(0.0);
        if res <= free + EPS {
            acc.node_used[node] -= res;
            acc.node_used[t] += res;
            if t < node {
                acc.promoted += res;
            } else {
                acc.demoted += res;
            }
            self.cells.get_mut(&c.start).expect("cell").node = t as u32;
            ap.applied += res;
            ap.cost += unit_cost * res;
        } else {
            // Move the part that fits, split at a page.
            let fit = (free / (res / c.n)).floor() as u64;
            if fit == 0 {
                return;
            }
            let cut = c.start + fit * cfg.page;
            self.split_at(cut);
            let keys: Vec<u64> = self.cells.range(c.start..cut).map(|(k, _)| *k).collect();
            for k in keys {
                let cell = self.cells.get_mut(&k).expect("cell");
                let r = cell.resident();
                self.acc.node_used[node] -= r;
                self.acc.node_used[t] += r;
                if t < node {
                    self.acc.promoted += r;
                } else {
                    self.acc.demoted += r;
                }
                cell.node = t as u32;
                ap.applied += r;
                ap.cost += unit_cost * r;
            }
        }
    }

    /// Migrates the cell's pages to the scheme's weighted destinations (the
    /// kernel's `dests`): each 2 MiB unit of the address space goes to the
    /// destination the kernel's interleave gives its index
    /// ([`udamon_core::schemes::dest_index`]; the kernel goes folio by
    /// folio, and a huge page is one folio), so a second pass moves nothing.
    /// Each run of units bound for one node moves as [`Self::migrate`] moves
    /// a cell: what is already there stays, a full node takes what fits.
    fn migrate_weighted(&mut self, ap: &mut Applying, c: &CellSeen, young: bool) {
        let dest = |addr: u64| dest_index(ap.dests, addr / INTERLEAVE_UNIT);
        let mut pieces = Vec::new();
        let mut at = c.start;
        while at < c.end {
            let Some(j) = dest(at) else { return };
            let mut end = at;
            while end < c.end && dest(end) == Some(j) {
                end = ((end / INTERLEAVE_UNIT + 1) * INTERLEAVE_UNIT).min(c.end);
            }
            pieces.push((at, end, ap.dests[j].node));
            at = end;
        }
        for &(start, end, _) in &pieces {
            self.split_at(start);
            self.split_at(end);
        }
        for (start, _, node) in pieces {
            let cell = self.cells.get(&start).expect("cell");
            let seen = CellSeen::new(&self.cfg, cell, start, &ap.filters, young, ap.now_f);
            self.migrate(ap, &seen, Some(node));
        }
    }

    /// What an action cost, charged: the direct reclaim of what it brought
    /// in, its time in whole microseconds (the fraction carried to the
    /// next), and its applied and passed pages in bytes.
    fn charge_action(&mut self, applied: f64, passed: f64, mut cost: f64) -> ApplyOutcome {
        let page = self.cfg.page;
        // Memory the action brought in may push others out: kdamond
        // reclaims directly, on its own time.
        let reclaimed = self.enforce_limits(false);
        cost += reclaimed * self.cfg.spec.reclaim_latency_us;
        self.acc.rss_peak = self.acc.rss_peak.max(self.acc.rss);
        self.acc.action_us += cost;
        let total = self.acc.cost_carry_us + cost;
        let cost_us = total.floor();
        self.acc.cost_carry_us = total - cost_us;
        let bytes = |pages: f64| (pages.max(0.0).round() as u64) * page;
        ApplyOutcome {
            sz_applied: bytes(applied),
            sz_ops_filter_passed: bytes(passed),
            cost_us: cost_us as u64,
        }
    }

    pub fn goal_metric(&self, goal: &QuotaGoal) -> Option<u64> {
        let node = |nid: u32| {
            let i = nid as usize;
            (i < self.cfg.caps.len()).then(|| (self.acc.node_used[i].max(0.0), self.cfg.caps[i]))
        };
        match goal.metric {
            GoalMetric::RssBp => Some((self.acc.rss.max(0.0) * 10_000.0 / self.cfg.mapped) as u64),
            GoalMetric::RefaultRate => Some(self.acc.refaults.round() as u64),
            GoalMetric::SomeMemPsiUs => Some(self.acc.psi_us.round() as u64),
            GoalMetric::NodeMemUsedBp => {
                node(goal.nid).map(|(u, c)| (u * 10_000.0 / c).min(10_000.0) as u64)
            }
            GoalMetric::NodeMemFreeBp => {
                node(goal.nid).map(|(u, c)| ((c - u).max(0.0) * 10_000.0 / c) as u64)
            }
            GoalMetric::ActiveMemBp | GoalMetric::InactiveMemBp => {
                let now = self.now_us as f64;
                let (mut all, mut active) = (0.0, 0.0);
                for c in self.cells.values() {
                    let r = c.resident();
                    all += r;
                    if r > EPS && now - c.lru_us < ACTIVE_AGE_US {
                        active += r;
                    }
                }
                let part = if goal.metric == GoalMetric::ActiveMemBp {
                    active
                } else {
                    all - active
                };
                Some(if all > EPS {
                    (part.max(0.0) * 10_000.0 / all).min(10_000.0) as u64
                } else {
                    0
                })
            }
            // The simulator has no memory cgroups; node_eligible_mem_bp is
            // the engine's ([`Self::resident_on`] through node_bytes).
            GoalMetric::UserInput
            | GoalMetric::NodeMemcgUsedBp
            | GoalMetric::NodeMemcgFreeBp
            | GoalMetric::NodeEligibleMemBp => None,
        }
    }

    /// Free memory in per-mille of the memory limit (of the mapped size
    /// without a limit).
    pub fn free_mem_rate(&self) -> u32 {
        let total = self.cfg.limit.unwrap_or(self.cfg.mapped);
        ((total - self.acc.rss).max(0.0) * 1000.0 / total).min(1000.0) as u32
    }

    pub fn metrics(&self) -> SimMetrics {
        let p = self.cfg.pagef;
        let bytes = |pages: f64| (pages.max(0.0) * p).round() as u64;
        let (mut huge, mut swapped) = (0.0, 0.0);
        for c in self.cells.values() {
            huge += c.huge;
            swapped += c.swapped;
        }
        let t = self.now_us as f64;
        let avg = |integral: f64, current: f64| if t > 0.0 { integral / t } else { current };
        SimMetrics {
            sim_time_s: t / 1e6,
            runtime_s: (t + self.acc.stall_us + self.acc.access_extra_us) / 1e6,
            rss_bytes: bytes(self.acc.rss),
            rss_avg_bytes: bytes(avg(self.acc.rss_integral, self.acc.rss)),
            rss_peak_bytes: bytes(self.acc.rss_peak),
            huge_bytes: bytes(huge),
            swapped_bytes: bytes(swapped),
            faults: self.acc.faults.round() as u64,
            refaults: self.acc.refaults.round() as u64,
            reclaimed_bytes: bytes(self.acc.reclaimed),
            psi_some_us: self.acc.psi_us.round() as u64,
            stall_us: self.acc.stall_us.round() as u64,
            access_extra_us: self.acc.access_extra_us,
            action_us: self.acc.action_us.round() as u64,
            node_used_bytes: self.acc.node_used.iter().map(|&u| bytes(u)).collect(),
            node_used_avg_bytes: self
                .acc
                .node_integral
                .iter()
                .zip(&self.acc.node_used)
                .map(|(&i, &u)| bytes(avg(i, u)))
                .collect(),
            node_accesses: self.acc.node_accesses.clone(),
            node_bandwidth_wait_us: if self.cfg.spec.nodes.iter().any(|n| n.bandwidth.is_some()) {
                self.acc.bandwidth_wait_us.clone()
            } else {
                Vec::new()
            },
            promoted_bytes: bytes(self.acc.promoted),
            demoted_bytes: bytes(self.acc.demoted),
            hint_faults: self.acc.hint_faults.round() as u64,
        }
    }

    #[cfg(test)]
    pub fn nr_cells(&self) -> usize {
        self.cells.len()
    }

    /// Resident pages inside `ranges` (sorted, disjoint), in total and on
    /// `node` (cells are counted pro rata).
    pub fn resident_on(&self, ranges: &[AddrRange], node: u32) -> (f64, f64) {
        let (mut all, mut on) = (0.0, 0.0);
        for r in ranges {
            for (s, c) in self.cells_over(*r) {
                let o = c.end.min(r.end).saturating_sub(s.max(r.start));
                let x = c.resident() * o as f64 / (c.end - s) as f64;
                all += x;
                if c.node == node {
                    on += x;
                }
            }
        }
        (all, on)
    }

    /// The cells that may overlap `r` (the one holding `r.start`, then
    /// every cell starting inside `r`), each with its start.
    fn cells_over(&self, r: AddrRange) -> impl Iterator<Item = (u64, &Cell)> {
        let first = self
            .cells
            .range(..r.start)
            .next_back()
            .map_or(r.start, |(k, _)| *k);
        self.cells.range(first..r.end).map(|(&s, c)| (s, c))
    }

    /// The parts of `ranges` (sorted, disjoint) whose pages were populated:
    /// resident or paged out, as pagemap's present and swapped bits tell
    /// (cells with at least half a page of either, expected), merged
    /// where they touch.
    pub fn populated_ranges(&self, ranges: &[AddrRange]) -> Vec<AddrRange> {
        let mut out: Vec<AddrRange> = Vec::new();
        for r in ranges {
            for (s, c) in self.cells_over(*r) {
                let (a, b) = (s.max(r.start), c.end.min(r.end));
                if a >= b || c.resident() + c.swapped < 0.5 {
                    continue;
                }
                match out.last_mut() {
                    Some(l) if l.end == a => l.end = b,
                    _ => out.push(AddrRange::new(a, b)),
                }
            }
        }
        out
    }

    /// Resident bytes inside `r` (cells are counted pro rata).
    #[cfg(test)]
    pub fn resident_in(&self, r: AddrRange) -> f64 {
        self.cells
            .iter()
            .map(|(&s, c)| {
                let o = c.end.min(r.end).saturating_sub(s.max(r.start));
                c.resident() * o as f64 / (c.end - s) as f64 * self.cfg.pagef
            })
            .sum()
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "bandwidth_tests.rs"]
mod bandwidth_tests;

#[path = "numab.rs"]
pub(crate) mod numab;

/// One step's accesses to a cell: `a` expected accesses spread evenly over
/// its pages, ending at `t_end`.
fn touch(cfg: &Cfg, acc: &mut Acc, start: u64, cell: &mut Cell, a: f64, t_end: f64) {
    let n = (cell.end - start) as f64 / cfg.pagef;
    let h = a / n;
    let p = -(-h).exp_m1();
    let res0 = cell.resident();
    let huge0 = cell.huge;
    let z = (n - res0 - cell.swapped).max(0.0);
    let s = &cfg.spec;
    // Refaults: swap-in is per base page, even where huge pages are allowed.
    let rf = cell.swapped * p;
    cell.swapped -= rf;
    cell.small += rf;
    // First touches: a whole extent at once where huge pages are allowed.
    let (ft, ft_faults, ft_us) = if cfg.eligible(cell.hint) && aligned(start, cell.end) {
        let ft = z * -(-h * cfg.epp).exp_m1();
        cell.huge += ft;
        (ft, ft / cfg.epp, ft / cfg.epp * s.huge_fault_latency_us)
    } else {
        let ft = z * p;
        cell.small += ft;
        (ft, ft, ft * s.first_touch_latency_us)
    };
    let rf_us = rf * s.fault_latency_us;
    acc.faults += rf + ft_faults;
    acc.refaults += rf;
    acc.stall_us += rf_us + ft_us;
    acc.psi_us += rf_us;
    let new = rf + ft;
    if res0 + new > 0.0 {
        cell.lru_us =
            (res0 * (cell.lru_us + p * (t_end - cell.lru_us)) + new * t_end) / (res0 + new);
    }
    acc.rss += new;
    acc.node_used[cell.node as usize] += new;
    let huge_share = (huge0 + cell.huge) / 2.0 / n;
    let node_extra = s.nodes[cell.node as usize].latency_us - s.nodes[0].latency_us;
    acc.node_accesses[cell.node as usize] += a;
    acc.step_accesses[cell.node as usize] += a;
    acc.access_extra_us += a * (node_extra - huge_share * cfg.tlb_saving_us);
}

/// How much longer than its unloaded latency an access to a node at
/// utilisation `rho` takes: up to [`RHO_KNEE`], `1 / (1 - rho)`, the mean
/// response time of an M/M/1 queue whose service time is the latency;
/// past it the node is saturated and serves no faster, so the time per
/// access grows in proportion to the demand (`rho / (RHO_KNEE (1 -
/// RHO_KNEE))`, equal at the knee): continuous, increasing, finite.
fn queueing_factor(rho: f64) -> f64 {
    if rho <= RHO_KNEE {
        1.0 / (1.0 - rho.max(0.0))
    } else {
        rho / (RHO_KNEE * (1.0 - RHO_KNEE))
    }
}

/// The unit of the simulator's weighted interleave: a huge page.
const INTERLEAVE_UNIT: u64 = HUGE_PAGE;

/// What [`Machine::apply`] carries over the cells of its range: the
/// scheme's target node, ops filters and costs, and what it did so far
/// (pages applied and passed, cost in µs).
struct Applying<'s> {
    target_nid: Option<u32>,
    dests: &'s [Dest],
    filters: Vec<&'s Filter>,
    action: Action,
    unit_cost: f64,
    walk_cost: f64,
    now_f: f64,
    applied: f64,
    passed: f64,
    cost: f64,
}

/// A cell as an action sees it: its pages, and those that pass the
/// scheme's ops filters.
struct CellSeen {
    start: u64,
    end: u64,
    /// Pages in the cell.
    n: f64,
    res: f64,
    anon: bool,
    node: usize,
    /// Resident huge and base pages that pass the filters, and their sum.
    ph: f64,
    ps: f64,
    passed_res: f64,
    /// Whether the majority of the resident pages pass the filters.
    majority: bool,
}

impl CellSeen {
    fn new(
        cfg: &Cfg,
        cell: &Cell,
        start: u64,
        filters: &[&Filter],
        young: bool,
        now_f: f64,
    ) -> CellSeen {
        let end = cell.end;
        let n = (end - start) as f64 / cfg.pagef;
        let res = cell.resident();
        let anon = !cfg.files[cell.obj as usize];
        let active = res > EPS && now_f - cell.lru_us < ACTIVE_AGE_US;
        let folio = |size| Folio {
            anon,
            young,
            active,
            size,
        };
        let pass_h = filters_pass(filters, &folio(HUGE_PAGE));
        let pass_s = filters_pass(filters, &folio(cfg.page));
        let (ph, ps) = (
            if pass_h { cell.huge } else { 0.0 },
            if pass_s { cell.small } else { 0.0 },
        );
        let passed_res = ph + ps;
        // Range-wide state follows the majority of the resident pages.
        let majority = if res > EPS {
            passed_res * 2.0 >= res
        } else {
            pass_s
        };
        CellSeen {
            start,
            end,
            n,
            res,
            anon,
            node: cell.node as usize,
            ph,
            ps,
            passed_res,
            majority,
        }
    }
}

/// `willneed`: the cell's pages that are not resident are brought in.
fn willneed(cfg: &Cfg, acc: &mut Acc, cell: &mut Cell, ap: &mut Applying, c: &CellSeen) {
    // Acts on pages that are not resident: they pass the
    // filters as base pages, neither young nor active.
    let nonres_pass = filters_pass(
        &ap.filters,
        &Folio {
            anon: c.anon,
            young: false,
            active: false,
            size: cfg.page,
        },
    );
    let z = (c.n - c.res - cell.swapped).max(0.0);
    let new = cell.swapped + z;
    if nonres_pass && new > EPS {
        ap.passed += new;
        cell.small += cell.swapped;
        cell.swapped = 0.0;
        if cfg.eligible(cell.hint) && aligned(c.start, c.end) {
            cell.huge += z;
        } else {
            cell.small += z;
        }
        cell.lru_us = (cell.lru_us * c.res + ap.now_f * new) / (c.res + new);
        acc.rss += new;
        acc.node_used[c.node] += new;
        ap.applied += new;
        ap.cost += ap.unit_cost * new;
    }
}

/// `hugepage` and `nohugepage`: the cell's hint set; huge pages made
/// (an aligned cell's) or split accordingly.
fn set_hugepage_hint(cfg: &Cfg, acc: &mut Acc, cell: &mut Cell, ap: &mut Applying, c: &CellSeen) {
    let want = if ap.action == Action::Hugepage {
        Hint::Huge
    } else {
        Hint::NoHuge
    };
    let changed = cell.hint != want;
    let was_eligible = cfg.eligible(cell.hint);
    cell.hint = want;
    let done = if want == Hint::Huge {
        if aligned(c.start, c.end) {
            let (prom, new) = promote(cell, c.n, cfg.epp, !was_eligible);
            acc.rss += new;
            acc.node_used[c.node] += new;
            prom
        } else {
            0.0
        }
    } else {
        let d = cell.huge;
        cell.small += d;
        cell.huge = 0.0;
        d
    };
    ap.applied += if changed { c.n } else { done };
    ap.cost += ap.unit_cost * done;
}

/// Collapses into huge pages every extent of an aligned cell that holds a
/// resident base page (pages assumed spread evenly over the non-huge
/// extents). `mixed`: never-touched pages share extents with resident ones
/// (the cell was not eligible for huge pages until now) and get collapsed
/// too — that is the bloat. Returns (pages promoted, pages newly resident).
fn promote(cell: &mut Cell, n: f64, epp: f64, mixed: bool) -> (f64, f64) {
    let nonhuge = n - cell.huge;
    if epp <= 1.0 || nonhuge <= EPS || cell.small <= EPS {
        return (0.0, 0.0);
    }
    let z = (n - cell.huge - cell.small - cell.swapped).max(0.0);
    let s = (cell.small / nonhuge).min(1.0);
    // P(an extent holds a resident base page | one given page of it does not).
    let q = 1.0 - (1.0 - s).powf(epp - 1.0);
    let wp = cell.swapped * q;
    let zp = if mixed { z * q } else { 0.0 };
    let prom = cell.small + wp + zp;
    cell.huge += prom;
    cell.small = 0.0;
    cell.swapped -= wp;
    (prom, wp + zp)
}
