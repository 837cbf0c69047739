//! Applying schemes: the kernel's `kdamond_apply_schemes` and its helpers
//! (spec section 8), on the engine's targets.

use crate::feedback;
use crate::ops::Operations;
use crate::region::{align_down, Region, Target};
use crate::snapshot::RegionSnapshot;
use crate::{Attrs, MIN_REGION_SZ};

use super::model::{
    Action, Damos, DamosStats, Filter, FilterKind, GoalMetric, GoalTuner, KernelPattern, Scorer,
    WatermarkMetric,
};

/// The highest priority score (`DAMOS_MAX_SCORE`).
pub const MAX_SCORE: u32 = 99;

/// Bytes per millisecond assumed for the time quota before any action was
/// timed (the kernel's `PAGE_SIZE * 1024`).
const DEFAULT_BYTES_PER_MS: u64 = 4096 * 1024;

/// A scheme installed in the engine, with its running state.
#[derive(Clone, Debug)]
pub struct SchemeState {
    pub scheme: Damos,
    /// The scheme without its ops filters, for regions a core filter allowed.
    scheme_no_ops_filters: Damos,
    pattern: KernelPattern,
    next_apply: u64,
    pub stats: DamosStats,
    /// The statistics of each target monitored now, by its snapshot index
    /// (a program's processes; quota exceeds are the scheme's alone).
    pub target_stats: std::collections::BTreeMap<u32, DamosStats>,
    /// Effective size quota of the current window: `None` is unlimited.
    pub esz: Option<u64>,
    esz_bp: u64,
    /// A goal of the `Fast` tuner was met once: its full-speed start is over.
    goal_met_once: bool,
    charged_sz: u64,
    charged_from_us: Option<u64>,
    total_charged_sz: u64,
    total_charged_us: u64,
    /// Action time charged in the current window.
    window_charged_us: u64,
    /// The time quota cut an apply short in the current window: its time
    /// is used up.
    time_cut: bool,
    charge_target: Option<usize>,
    charge_addr: u64,
    min_score: u32,
    /// Watermark state: whether the scheme is on.
    pub active: bool,
    /// Last values the goal metrics took (for reports).
    pub goal_values: Vec<u64>,
    /// Cumulative counters at the previous window reset, per goal.
    goal_prev: Vec<Option<u64>>,
    /// Regions tried in the last apply pass (the kernel's tried_regions).
    pub tried_regions: Vec<RegionSnapshot>,
    /// Dry run: the action is never performed. Each region it would be
    /// applied to goes through the ops as `stat` (so ops filters still
    /// count the bytes they pass) and counts as applied in full (or as what
    /// the ops filters passed); ages and quotas move as if the action had
    /// run, so a region is not counted again until it matches again.
    pub dry_run: bool,
    /// In a dry run, the memory the action would have been applied to:
    /// (target index, start, end), sorted and merged, so each byte counts
    /// once however many passes chose it.
    pub dry_run_ranges: Vec<(usize, u64, u64)>,
}

impl SchemeState {
    pub fn new(scheme: Damos, attrs: &Attrs) -> Self {
        let mut no_ops = scheme.clone();
        no_ops.filters.retain(|f| f.kind.is_core());
        let n = scheme.quota.goals.len();
        let mut s = Self {
            pattern: scheme.pattern.resolve(attrs),
            scheme_no_ops_filters: no_ops,
            scheme,
            next_apply: 0,
            stats: DamosStats::default(),
            esz: None,
            esz_bp: 0,
            goal_met_once: false,
            charged_sz: 0,
            charged_from_us: None,
            total_charged_sz: 0,
            total_charged_us: 0,
            window_charged_us: 0,
            time_cut: false,
            charge_target: None,
            target_stats: Default::default(),
            charge_addr: 0,
            min_score: 0,
            active: true,
            goal_values: vec![0; n],
            goal_prev: vec![None; n],
            tried_regions: Vec::new(),
            dry_run: false,
            dry_run_ranges: Vec::new(),
        };
        s.next_apply = s.apply_samples(attrs);
        s
    }

    fn apply_samples(&self, attrs: &Attrs) -> u64 {
        let us = if self.scheme.apply_interval_us == 0 {
            attrs.aggr_us
        } else {
            self.scheme.apply_interval_us
        };
        (us / attrs.sample_us.max(1)).max(1)
    }

    /// Re-derives the kernel-unit pattern after an attribute change.
    pub(crate) fn on_attrs(&mut self, attrs: &Attrs, passed: u64) {
        self.pattern = self.pattern_for(attrs);
        self.next_apply = passed + self.apply_samples(attrs);
    }

    fn pattern_for(&self, attrs: &Attrs) -> KernelPattern {
        self.scheme.pattern.resolve(attrs)
    }

    /// The effective quota of the current window in bytes, `None` if unlimited.
    pub fn effective_quota(&self) -> Option<u64> {
        self.esz
    }
}

/// Whether `r` has the access pattern (closed intervals; frequency from the
/// moving sum, as the kernel does since 6.7).
fn matches(p: &KernelPattern, r: &Region) -> bool {
    let sz = r.sz();
    let nr = r.nr_accesses_bp / 10_000;
    p.min_sz <= sz
        && sz <= p.max_sz
        && p.min_nr_accesses <= nr
        && nr <= p.max_nr_accesses
        && p.min_age <= r.age
        && r.age <= p.max_age
}

/// The kernel's built-in hotness score (ops-common), 0..=99.
pub fn hot_score(r: &Region, attrs: &Attrs, weights: &super::model::QuotaWeights) -> u32 {
    let max_nr = u64::from(attrs.max_nr_accesses().max(1));
    let freq = (u64::from(r.nr_accesses) * 100 / max_nr) as i64;
    let age_sec = u64::from(r.age) * attrs.aggr_us / 1_000_000;
    let mut age_log = (64 - age_sec.leading_zeros()).min(32) as i64;
    if freq == 0 {
        age_log = -age_log;
    }
    let age_sub = (age_log + 32) * 100 / 64;
    let (fw, aw) = (i64::from(weights.nr_accesses), i64::from(weights.age));
    let mut hot = fw * freq + aw * age_sub;
    if fw + aw != 0 {
        hot /= fw + aw;
    }
    (hot * 99 / 100).clamp(0, 99) as u32
}

fn score(action: Action, r: &Region, attrs: &Attrs, weights: &super::model::QuotaWeights) -> u32 {
    match action.scorer() {
        Scorer::Hot => hot_score(r, attrs, weights),
        Scorer::Cold => MAX_SCORE - hot_score(r, attrs, weights),
        Scorer::None => MAX_SCORE,
    }
}

/// Everything an apply pass needs from the engine.
pub(crate) struct Ctx<'a, O> {
    pub attrs: &'a Attrs,
    pub ops: &'a mut O,
    pub targets: &'a mut [Target],
    /// Each target's snapshot index.
    pub ids: &'a [u32],
    pub passed: u64,
    pub now_us: u64,
}

/// Watermarks, checked before every sample. Returns the wait in
/// microseconds when every scheme is off (0 when monitoring proceeds). As
/// in the kernel's `kdamond_wait_activation`, an off scheme waits its
/// watermark interval, so an interval of 0 never stops monitoring: samples
/// are taken and the off schemes are checked again at the next one.
pub(crate) fn update_watermarks<O: Operations>(
    schemes: &mut [SchemeState],
    ops: &mut O,
    now_us: u64,
) -> u64 {
    if schemes.is_empty() {
        return 0;
    }
    let mut min_wait = u64::MAX;
    let mut free = None;
    for s in schemes.iter_mut() {
        let w = s.scheme.watermarks;
        if w.metric == WatermarkMetric::None {
            s.active = true;
            min_wait = 0;
            continue;
        }
        let v = *free.get_or_insert_with(|| ops.free_mem_rate(now_us));
        match v {
            Some(v) if v > w.high || v < w.low => s.active = false,
            Some(v) if w.mid <= v && v <= w.high && !s.active => {}
            Some(_) => s.active = true,
            None => s.active = false,
        }
        min_wait = min_wait.min(if s.active { 0 } else { w.interval_us });
    }
    min_wait
}

/// Starts a new charge window when due and recomputes the effective quota;
/// then the score histogram gives the minimum score that fits the quota.
fn adjust_quota<O: Operations>(s: &mut SchemeState, ctx: &mut Ctx<'_, O>) {
    let q = &s.scheme.quota;
    if !q.is_set() {
        s.esz = None;
        return;
    }
    let new_window = match s.charged_from_us {
        None => true,
        // `u64::MAX` (damo's "max") never resets.
        Some(from) => ctx.now_us >= from.saturating_add(q.reset_interval_ms.saturating_mul(1000)),
    };
    if new_window {
        if s.charged_from_us.is_some()
            && (s.esz.is_some_and(|e| s.charged_sz >= e) || time_used_up(s))
        {
            s.stats.qt_exceeds += 1;
        }
        s.total_charged_sz += s.charged_sz;
        let elapsed_us = s.charged_from_us.map(|f| ctx.now_us - f);
        s.charged_from_us = Some(ctx.now_us);
        s.charged_sz = 0;
        s.window_charged_us = 0;
        s.time_cut = false;
        s.esz = effective_size_quota(s, ctx, elapsed_us);
    }
    // Prioritisation: the lowest score whose cumulative size fits the quota.
    s.min_score = 0;
    let (Some(esz), true) = (s.esz, s.scheme.action.scorer() != Scorer::None) else {
        return;
    };
    // Regions a core filter rejects are left out, as in the kernel's
    // `damos_adjust_quota`: they are never applied to. Like the apply pass,
    // an `addr` filter splits regions at its edges here, and the pieces are
    // visited in turn.
    let mut hist = [0u64; MAX_SCORE as usize + 1];
    let mut max = 0;
    for (ti, t) in ctx.targets.iter_mut().enumerate() {
        let mut i = 0;
        while i < t.regions.len() {
            if matches(&s.pattern, &t.regions[i])
                && core_filter(&s.scheme.filters, t, ti, i).is_some()
            {
                let r = &t.regions[i];
                let sc = score(s.scheme.action, r, ctx.attrs, &s.scheme.quota.weights);
                hist[sc as usize] += r.sz();
                max = max.max(sc);
            }
            i += 1;
        }
    }
    let mut cum = 0u64;
    let mut sc = max;
    loop {
        cum += hist[sc as usize];
        if cum >= esz || sc == 0 {
            break;
        }
        sc -= 1;
    }
    s.min_score = sc;
}

/// The effective size quota for a new window (spec 8.4 and 8.6).
fn effective_size_quota<O: Operations>(
    s: &mut SchemeState,
    ctx: &mut Ctx<'_, O>,
    window_us: Option<u64>,
) -> Option<u64> {
    let q = s.scheme.quota.clone();
    if q.ms == 0 && q.goals.is_empty() {
        return Some(q.sz);
    }
    let mut esz = u64::MAX;
    if !q.goals.is_empty() {
        // The most satisfied goal wins: the scheme is only as aggressive as
        // the least demanding goal needs.
        let mut best: Option<u64> = None;
        for (i, g) in q.goals.iter().enumerate() {
            let current = match g.metric {
                GoalMetric::UserInput => Some(g.current_value),
                GoalMetric::SomeMemPsiUs | GoalMetric::RefaultRate => {
                    let cum = ctx.ops.goal_metric(0, g, ctx.now_us);
                    let prev = std::mem::replace(&mut s.goal_prev[i], cum);
                    match (cum, prev, window_us) {
                        (Some(c), Some(p), Some(w)) if g.metric == GoalMetric::RefaultRate => {
                            Some((c - p.min(c)) * 1_000_000 / w.max(1))
                        }
                        (Some(c), Some(p), _) => Some(c - p.min(c)),
                        // First window: no earlier reading to compare with.
                        (Some(_), None, _) => Some(0),
                        _ => None,
                    }
                }
                GoalMetric::NodeEligibleMemBp => eligible_on_node(s, ctx, g.nid),
                _ => ctx.ops.goal_metric(0, g, ctx.now_us),
            };
            let Some(current) = current else { continue };
            s.goal_values[i] = current;
            // Kernel metrics are met when they reach at least the target.
            // `rss_bp` (ours) is met when the resident share falls to the
            // target or below: it steers reclaim.
            let ratio = |a: u64, b: u64| {
                (u128::from(a) * 10_000 / u128::from(b.max(1))).min(u128::from(u64::MAX)) as u64
            };
            let sc = match g.metric {
                GoalMetric::RssBp if current == 0 => 2 * feedback::GOAL_BP,
                GoalMetric::RssBp => ratio(g.target_value, current),
                _ => ratio(current, g.target_value),
            };
            best = Some(best.map_or(sc, |b| b.max(sc)));
        }
        if let Some(score) = best {
            s.esz_bp = match q.goal_tuner {
                GoalTuner::Consist => feedback::next_input(s.esz_bp.max(10_000), score),
                GoalTuner::Temporal if score >= 10_000 => 0,
                GoalTuner::Temporal if q.sz != 0 => q.sz.saturating_mul(10_000),
                GoalTuner::Temporal => u64::MAX,
                GoalTuner::Fast if !s.goal_met_once && score < 10_000 => {
                    if q.sz != 0 {
                        q.sz.saturating_mul(10_000)
                    } else {
                        u64::MAX
                    }
                }
                GoalTuner::Fast => {
                    // The loop takes over from the full-speed quota.
                    if !s.goal_met_once {
                        s.goal_met_once = true;
                        if q.sz != 0 {
                            s.esz_bp = q.sz.saturating_mul(10_000);
                        }
                    }
                    feedback::next_input(s.esz_bp.max(10_000), score)
                }
            };
            esz = s.esz_bp / 10_000;
        }
    }
    if q.ms != 0 {
        let per_ms = if s.total_charged_us > 0 {
            (u128::from(s.total_charged_sz) * 1000 / u128::from(s.total_charged_us))
                .min(u128::from(u64::MAX)) as u64
        } else {
            DEFAULT_BYTES_PER_MS
        };
        esz = esz.min(per_ms.saturating_mul(q.ms)).max(MIN_REGION_SZ);
    }
    if q.sz != 0 && q.sz < esz {
        esz = q.sz;
    }
    Some(esz)
}

/// `node_eligible_mem_bp`: of the memory whose regions match the scheme's
/// access pattern, the share (basis points) on node `nid`, as the
/// operations set places it; `None` where it cannot tell.
fn eligible_on_node<O: Operations>(s: &SchemeState, ctx: &mut Ctx<'_, O>, nid: u32) -> Option<u64> {
    let (mut on, mut all) = (0u64, 0u64);
    for (ti, t) in ctx.targets.iter().enumerate() {
        for r in t.regions.iter().filter(|r| matches(&s.pattern, r)) {
            let (o, a) = ctx.ops.node_bytes(ti, r.ar, nid)?;
            on += o;
            all += a;
        }
    }
    Some(if all == 0 {
        0
    } else {
        (u128::from(on) * 10_000 / u128::from(all)) as u64
    })
}

/// Whether the window's action time reached the time quota.
fn time_used_up(s: &SchemeState) -> bool {
    s.scheme.quota.ms != 0
        && (s.time_cut || s.window_charged_us >= s.scheme.quota.ms.saturating_mul(1000))
}

/// Bytes the rest of the window's time quota allows the next apply, `None`
/// for no limit beyond the effective size quota.
///
/// The kernel converts the time quota to bytes once per window
/// ([`effective_size_quota`]: measured bytes per time, else a guessed
/// 4 MiB/ms) and can overshoot at the guess. udamon also measures as it
/// goes: the scheme's first action is tried on one page, and once an action
/// has taken measurable time, an apply is cut to what the remaining time
/// allows at the measured speed (such a cut ends the window's time, see
/// `time_cut`). This never exceeds the time quota when an action's time is
/// proportional to its size, as in the simulator. Actions that have taken
/// no measurable time (a clock can read 0 us for a small action) leave the
/// kernel's conversion as the only limit, rather than trying a page at a
/// time.
fn time_allowance(s: &SchemeState) -> Option<u64> {
    let q = &s.scheme.quota;
    if q.ms == 0 {
        return None;
    }
    let charged = s.total_charged_sz + s.charged_sz;
    if s.total_charged_us == 0 {
        return (charged == 0).then_some(MIN_REGION_SZ);
    }
    let left_us =
        q.ms.saturating_mul(1000)
            .saturating_sub(s.window_charged_us);
    let bytes = u128::from(left_us) * u128::from(charged) / u128::from(s.total_charged_us);
    Some(align_down(
        bytes.min(u128::from(u64::MAX)) as u64,
        MIN_REGION_SZ,
    ))
}

/// Splits region `i` of `t` at `sz` bytes from its start; the new right
/// piece inherits every counter.
fn split_at(t: &mut Target, i: usize, sz: u64) {
    let mut right = t.regions[i];
    right.ar.start += sz;
    t.regions[i].ar.end = right.ar.start;
    t.regions.insert(i + 1, right);
}

/// The kernel's charge-resume skip (`damos_skip_charged_region`): after a
/// window's quota ran out at some address, the next windows start from
/// there, so the quota sweeps the space round-robin instead of always
/// hitting the lowest addresses. The bookmark is one byte past the last
/// charged region; the region holding it is split there (rounded down to a
/// page, at least one page), the charged prefix is skipped and the bookmark
/// is done: the rest, the next piece, is visited normally. So the first page
/// after the charged bytes is skipped once only when it starts a region.
fn skip_charged(s: &mut SchemeState, t: &mut Target, ti: usize, i: usize) -> bool {
    let Some(ct) = s.charge_target else {
        return false;
    };
    if ti != ct {
        return true;
    }
    if i + 1 == t.regions.len() {
        s.charge_target = None;
        s.charge_addr = 0;
        return true;
    }
    let r = t.regions[i];
    if s.charge_addr != 0 && r.ar.end <= s.charge_addr {
        return true;
    }
    if s.charge_addr != 0 && r.ar.start < s.charge_addr {
        let mut skip = align_down(s.charge_addr - r.ar.start, MIN_REGION_SZ);
        if skip == 0 {
            if r.sz() <= MIN_REGION_SZ {
                return true;
            }
            skip = MIN_REGION_SZ;
        }
        split_at(t, i, skip);
        s.charge_target = None;
        s.charge_addr = 0;
        return true;
    }
    s.charge_target = None;
    s.charge_addr = 0;
    false
}

/// Core filters, first match decides; an `addr` filter splits the region at
/// its range's edges so actions respect exact ranges. Returns `None` when
/// rejected, else whether a core filter explicitly allowed the region.
fn core_filter(filters: &[Filter], t: &mut Target, ti: usize, i: usize) -> Option<bool> {
    let mut last_core_allow = None;
    for f in filters.iter().filter(|f| f.kind.is_core()) {
        last_core_allow = Some(f.allow);
        let r = t.regions[i];
        let matched = match f.kind {
            FilterKind::Target { idx } => idx as usize == ti,
            FilterKind::Addr { start, end } => {
                let (start, end) = (
                    align_down(start, MIN_REGION_SZ),
                    align_down(end, MIN_REGION_SZ),
                );
                if start <= r.ar.start && r.ar.end <= end {
                    true
                } else if r.ar.end <= start || end <= r.ar.start {
                    false
                } else if r.ar.start < start {
                    split_at(t, i, start - r.ar.start);
                    false
                } else {
                    split_at(t, i, end - r.ar.start);
                    true
                }
            }
            _ => unreachable!("only core filters here"),
        };
        if matched == f.matching {
            return if f.allow { Some(true) } else { None };
        }
    }
    let has_ops_filters = filters.iter().any(|f| !f.kind.is_core());
    if !has_ops_filters && last_core_allow == Some(true) {
        None
    } else {
        Some(false)
    }
}

/// One apply pass: every due, active scheme over every region.
pub(crate) fn apply_schemes<O: Operations>(schemes: &mut [SchemeState], ctx: &mut Ctx<'_, O>) {
    let due: Vec<bool> = schemes
        .iter()
        .map(|s| s.active && ctx.passed >= s.next_apply)
        .collect();
    if !due.iter().any(|&d| d) {
        return;
    }
    for (s, _) in schemes.iter_mut().zip(&due).filter(|(_, d)| **d) {
        adjust_quota(s, ctx);
        s.tried_regions.clear();
    }
    for ti in 0..ctx.targets.len() {
        if !ctx.ops.target_valid(ti) {
            continue;
        }
        let mut i = 0;
        // Pieces split off in this pass are visited in this pass too (the
        // newer kernels' iteration, which charge resume relies on).
        while i < ctx.targets[ti].regions.len() {
            for (si, s) in schemes.iter_mut().enumerate() {
                if !due[si] {
                    continue;
                }
                if s.esz.is_some_and(|e| s.charged_sz >= e) || time_used_up(s) {
                    continue;
                }
                if skip_charged(s, &mut ctx.targets[ti], ti, i) {
                    continue;
                }
                if s.scheme.max_nr_snapshots != 0
                    && s.stats.nr_snapshots >= s.scheme.max_nr_snapshots
                {
                    continue;
                }
                let r = ctx.targets[ti].regions[i];
                if matches(&s.pattern, &r)
                    && (s.esz.is_none()
                        || score(s.scheme.action, &r, ctx.attrs, &s.scheme.quota.weights)
                            >= s.min_score)
                {
                    apply_one(s, ctx, ti, i);
                }
                // The kernel counts a snapshot when a pass reaches a
                // target's last region (pieces split off it above are
                // visited first).
                if i + 1 == ctx.targets[ti].regions.len() {
                    s.stats.nr_snapshots += 1;
                    let id = ctx.ids.get(ti).copied().unwrap_or(ti as u32);
                    s.target_stats.entry(id).or_default().nr_snapshots += 1;
                }
            }
            i += 1;
        }
    }
    // Every due scheme moves on, including those its watermarks keep off
    // (the kernel's `kdamond_apply_schemes`): a scheme switched on between
    // two passes then waits for its next apply time.
    for s in schemes.iter_mut().filter(|s| ctx.passed >= s.next_apply) {
        s.next_apply = ctx.passed + s.apply_samples(ctx.attrs);
    }
}

/// Adds `[start, end)` of target `t` to sorted, merged `ranges`.
pub(crate) fn add_range(ranges: &mut Vec<(usize, u64, u64)>, t: usize, start: u64, end: u64) {
    // The first range that ends at or after `start` (touching ranges merge).
    let i = ranges.partition_point(|&(rt, _, re)| (rt, re) < (t, start));
    let mut j = i;
    let (mut lo, mut hi) = (start, end);
    while j < ranges.len() && ranges[j].0 == t && ranges[j].1 <= hi {
        lo = lo.min(ranges[j].1);
        hi = hi.max(ranges[j].2);
        j += 1;
    }
    ranges.splice(i..j, [(t, lo, hi)]);
}

impl SchemeState {
    /// Forgets target `idx`, removed from the context: the targets after it
    /// move down one position.
    pub(crate) fn forget_target(&mut self, idx: usize) {
        match self.charge_target {
            Some(t) if t == idx => {
                self.charge_target = None;
                self.charge_addr = 0;
            }
            Some(t) if t > idx => self.charge_target = Some(t - 1),
            _ => {}
        }
        self.dry_run_ranges.retain(|&(t, _, _)| t != idx);
        for r in &mut self.dry_run_ranges {
            if r.0 > idx {
                r.0 -= 1;
            }
        }
    }

    /// Bytes a dry run would have applied the action to, each counted once.
    pub fn dry_run_bytes(&self) -> u64 {
        self.dry_run_ranges.iter().map(|&(_, a, b)| b - a).sum()
    }
}

fn apply_one<O: Operations>(s: &mut SchemeState, ctx: &mut Ctx<'_, O>, ti: usize, i: usize) {
    let t = &mut ctx.targets[ti];
    let mut sz = t.regions[i].sz();
    let (mut applied, mut passed) = (0, 0);
    let mut counted = true;
    if let Some(esz) = s.esz {
        if s.charged_sz + sz > esz {
            sz = align_down(esz.saturating_sub(s.charged_sz), MIN_REGION_SZ);
            if sz == 0 {
                counted = false;
            } else {
                split_at(t, i, sz);
            }
        }
    }
    if counted {
        let Some(core_allowed) = core_filter(&s.scheme.filters, t, ti, i) else {
            return;
        };
        sz = t.regions[i].sz();
        // udamon's own time cut, after the core filters so that memory they
        // reject is never cut.
        let mut time_cut = false;
        if let Some(allow) = time_allowance(s) {
            if allow == 0 {
                s.time_cut = true;
                return;
            }
            if allow < sz {
                sz = allow;
                split_at(t, i, sz);
                time_cut = s.total_charged_us > 0;
            }
        }
        let r = t.regions[i];
        let scheme = if core_allowed {
            &s.scheme_no_ops_filters
        } else {
            &s.scheme
        };
        let out = if s.dry_run && scheme.action != Action::Stat {
            let mut stat = scheme.clone();
            stat.action = Action::Stat;
            let seen = ctx.ops.apply_scheme(ti, r.ar, &stat, ctx.now_us);
            let ops_filtered = stat.filters.iter().any(|f| !f.kind.is_core());
            add_range(&mut s.dry_run_ranges, ti, r.ar.start, r.ar.end);
            crate::ApplyOutcome {
                sz_applied: if ops_filtered {
                    seen.sz_ops_filter_passed
                } else {
                    sz
                },
                sz_ops_filter_passed: seen.sz_ops_filter_passed,
                cost_us: 0,
            }
        } else {
            ctx.ops.apply_scheme(ti, r.ar, scheme, ctx.now_us)
        };
        applied = out.sz_applied;
        passed = out.sz_ops_filter_passed;
        s.total_charged_us += out.cost_us;
        s.window_charged_us += out.cost_us;
        s.charged_sz += s.scheme.quota.charge(sz, applied);
        s.time_cut |= time_cut;
        if s.esz.is_some_and(|e| s.charged_sz >= e) {
            s.charge_target = Some(ti);
            s.charge_addr = r.ar.end + 1;
        }
        if s.scheme.action != Action::Stat {
            ctx.targets[ti].regions[i].age = 0;
        }
        let r = ctx.targets[ti].regions[i];
        s.tried_regions.push(RegionSnapshot {
            start: r.ar.start,
            end: r.ar.end,
            nr_accesses: r.nr_accesses_bp / 10_000,
            age: r.age,
        });
    }
    let id = ctx.ids.get(ti).copied().unwrap_or(ti as u32);
    let per = s.target_stats.entry(id).or_default();
    for st in [&mut s.stats, per] {
        st.nr_tried += 1;
        st.sz_tried += sz;
        if applied > 0 {
            st.nr_applied += 1;
        }
        st.sz_applied += applied;
        st.sz_ops_filter_passed += passed;
    }
}
