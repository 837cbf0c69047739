//! A NUMAB-2-like policy: a *model* of NUMA balancing's memory tiering
//! mode (`kernel.numa_balancing = 2`), not the kernel's code, as a baseline
//! for tiering in the simulator. It acts on the machine at every step:
//!
//! - a scanner walks the slow nodes' resident memory in address order at
//!   `scan_bytes_per_s` and arms it (the kernel's `change_prot_numa`):
//!   the next access to an armed page takes a NUMA hint fault, which costs
//!   the workload `hint_fault_us`;
//! - a hint fault is "quick" when it comes within `threshold_us` of the
//!   page being armed (the kernel's hint-fault latency against
//!   `hot_threshold_ms`); a page is promoted at its second consecutive
//!   quick hint fault (a two-fault filter: one quick fault primes it, a
//!   slow one unprimes it);
//! - promotion is rate-limited to `rate_limit_bytes_per_s` per one-second
//!   window (`numa_balancing_promote_rate_limit_MBps`): candidates over the
//!   budget stay where they are (still primed). It needs free memory above
//!   the fast node's high watermark; the migration is paid by the faulting
//!   workload at the machine's `migrate_hot` cost;
//! - demotion is reclaim's: whenever the fast node's free memory is below
//!   its high watermark (or a promotion found no room), the least recently
//!   used memory of the fast node is demoted to the slow node until free
//!   memory reaches the promotion watermark plus the promotions that found
//!   no room (kswapd, woken by them, at once; with demotion on; its
//!   time is counted like an action's, `migrate_cold` cost, not the
//!   workload's).
//!
//! Not modelled: the kernel's adjustment of the threshold to the rate
//! limit, the scan period's adaptation, per-task scanning of virtual
//! memory (here the scanner sees slow-node pages only), and the allocation
//! of new pages (objects are resident from the start).
//!
//! Like the rest of the machine, it is a fluid model: per cell, expected
//! numbers of armed and primed pages; deterministic.

use serde::Serialize;

use super::{Acc, Cell, Cfg, Machine, EPS};
use crate::model::Model;

/// The NUMAB-2-like policy's knobs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Numab2Params {
    /// The fast node: pages elsewhere are scanned and promoted to it.
    pub fast_node: u32,
    /// The slow node demoted pages go to.
    pub slow_node: u32,
    /// Slow-node memory armed per second (the kernel scans
    /// `numa_balancing_scan_size_mb`, 256 MiB, per scan period).
    pub scan_bytes_per_s: u64,
    /// A hint fault this soon after arming is quick (`hot_threshold_ms`,
    /// 1 s).
    pub threshold_us: u64,
    /// Promoted bytes per second at most.
    pub rate_limit_bytes_per_s: u64,
    /// What one hint fault costs the workload.
    pub hint_fault_us: f64,
    /// Demotion starts below this much free memory on the fast node
    /// (basis points of its capacity)...
    pub high_wmark_bp: u64,
    /// ... and stops at this much.
    pub promo_wmark_bp: u64,
}

impl Default for Numab2Params {
    fn default() -> Self {
        Self {
            fast_node: 0,
            slow_node: 1,
            scan_bytes_per_s: 256 << 20,
            threshold_us: 1_000_000,
            rate_limit_bytes_per_s: 200 << 20,
            hint_fault_us: 1.0,
            high_wmark_bp: 50,
            promo_wmark_bp: 100,
        }
    }
}

/// The policy's state on the machine.
pub(crate) struct Numab2 {
    pub p: Numab2Params,
    cursor: u64,
    scan_carry: f64,
    window_start_us: u64,
    window_promoted: f64,
    pending: Vec<(u64, f64)>,
    /// Candidates left unpromoted by the rate limit (pages), since start.
    pub rate_limited: f64,
}

/// What the access loop needs to account hint faults.
pub(crate) struct HintCtx {
    fast: u32,
    threshold_us: f64,
    fault_us: f64,
    cands: Vec<(u64, f64)>,
}

impl Numab2 {
    pub fn new(p: Numab2Params) -> Self {
        Self {
            p,
            cursor: 0,
            scan_carry: 0.0,
            window_start_us: 0,
            window_promoted: 0.0,
            pending: Vec::new(),
            rate_limited: 0.0,
        }
    }

    pub fn hint_ctx(&mut self) -> HintCtx {
        HintCtx {
            fast: self.p.fast_node,
            threshold_us: self.p.threshold_us as f64,
            fault_us: self.p.hint_fault_us,
            cands: std::mem::take(&mut self.pending),
        }
    }

    pub fn take_candidates(&mut self, h: HintCtx) {
        self.pending = h.cands;
    }
}

/// Hint faults of one step's `a` accesses to a cell, before `touch`
/// accounts the accesses themselves.
pub(crate) fn hint_faults(
    h: &mut HintCtx,
    cfg: &Cfg,
    acc: &mut Acc,
    start: u64,
    cell: &mut Cell,
    a: f64,
    t_end: f64,
) {
    let res = cell.resident();
    if cell.node == h.fast || cell.nb_armed <= EPS || res <= EPS {
        return;
    }
    let n = (cell.end - start) as f64 / cfg.pagef;
    let p = -(-(a / n)).exp_m1();
    let f = cell.nb_armed * p;
    cell.nb_armed -= f;
    acc.hint_faults += f;
    acc.stall_us += f * h.fault_us;
    let r = (cell.nb_primed / res).clamp(0.0, 1.0);
    if t_end - cell.nb_arm_us <= h.threshold_us {
        // Primed pages faulting quickly again are candidates; the others
        // become primed.
        cell.nb_primed += f * (1.0 - r);
        if f * r > EPS {
            h.cands.push((start, f * r));
        }
    } else {
        cell.nb_primed -= f * r;
    }
}

impl Machine {
    /// Moves up to `pages` resident pages from the start of the cell at
    /// `start` to `to` (splitting it at a page); returns the pages moved.
    fn move_front(&mut self, start: u64, pages: u64, to: u32) -> f64 {
        let Some(c) = self.cells.get(&start) else {
            return 0.0;
        };
        let n = (c.end - start) / self.cfg.page;
        let res = c.resident();
        if pages == 0 || res <= EPS {
            return 0.0;
        }
        // Pages of the range, so that `pages` resident ones move.
        let span = ((pages as f64 / (res / n as f64)).ceil() as u64).min(n);
        let cut = start + span * self.cfg.page;
        self.split_at(cut);
        let keys: Vec<u64> = self.cells.range(start..cut).map(|(k, _)| *k).collect();
        let mut moved = 0.0;
        for k in keys {
            let c = self.cells.get_mut(&k).expect("cell");
            let from = c.node as usize;
            if from == to as usize {
                continue;
            }
            let r = c.resident();
            self.acc.node_used[from] -= r;
            self.acc.node_used[to as usize] += r;
            if (to as usize) < from {
                self.acc.promoted += r;
            } else {
                self.acc.demoted += r;
            }
            c.node = to;
            c.nb_armed = 0.0;
            c.nb_primed = 0.0;
            c.nb_arm_us = 0.0;
            moved += r;
        }
        moved
    }

    /// The policy's work at the end of a step `[t0, t1)`: promotion of this
    /// step's candidates, reclaim-driven demotion, scanning.
    pub(crate) fn numab_step(&mut self, _model: &Model, t0: u64, t1: u64) {
        let Some(mut nb) = self.numab.take() else {
            return;
        };
        let pagef = self.cfg.pagef;
        let fast = nb.p.fast_node as usize;
        let cap = self.cfg.caps[fast];
        let high = cap * nb.p.high_wmark_bp as f64 / 10_000.0;
        let promo = cap * nb.p.promo_wmark_bp as f64 / 10_000.0;
        if t1 >= nb.window_start_us + 1_000_000 {
            nb.window_start_us = t1 / 1_000_000 * 1_000_000;
            nb.window_promoted = 0.0;
        }
        let limit = nb.p.rate_limit_bytes_per_s as f64 / pagef;
        // Promotion, in the faulting task.
        let mut shortfall = 0.0;
        let mut pending = std::mem::take(&mut nb.pending);
        for (start, c) in pending.drain(..) {
            let budget = (limit - nb.window_promoted).max(0.0);
            let room = (cap - self.acc.node_used[fast] - high).max(0.0);
            let want = c.min(budget);
            if want < c {
                nb.rate_limited += c - want;
            }
            if room < want {
                shortfall += want - room;
            }
            let k = want.min(room).round() as u64;
            let moved = self.move_front(start, k, nb.p.fast_node);
            nb.window_promoted += moved;
            let us = moved
                * self
                    .cfg
                    .spec
                    .action_cost(udamon_core::schemes::Action::MigrateHot)
                * pagef;
            self.acc.stall_us += us;
        }
        nb.pending = pending;
        // Demotion by reclaim (kswapd), coldest first.
        let free = cap - self.acc.node_used[fast];
        if free < high - EPS || shortfall > EPS {
            let mut need = promo - free + shortfall;
            let mut cand: Vec<(f64, u64)> = self
                .cells
                .iter()
                .filter(|(_, c)| c.node as usize == fast && !c.mlocked && c.resident() > EPS)
                .map(|(k, c)| (c.lru_us, *k))
                .collect();
            cand.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let slow_room = |m: &Machine| {
                (m.cfg.caps[nb.p.slow_node as usize] - m.acc.node_used[nb.p.slow_node as usize])
                    .max(0.0)
            };
            for (_, k) in cand {
                let take = need.min(slow_room(self));
                if take <= 0.5 {
                    break;
                }
                let moved = self.move_front(k, take.ceil() as u64, nb.p.slow_node);
                need -= moved;
                self.acc.action_us += moved
                    * self
                        .cfg
                        .spec
                        .action_cost(udamon_core::schemes::Action::MigrateCold)
                    * pagef;
            }
        }
        // The scanner arms slow-node memory in address order.
        let mut budget =
            nb.scan_carry + nb.p.scan_bytes_per_s as f64 * (t1 - t0) as f64 / 1e6 / pagef;
        let now = t1 as f64;
        let mut wrapped = false;
        while budget > 0.5 {
            let Some((&start, c)) = self.cells.range(nb.cursor..).next() else {
                if wrapped {
                    break;
                }
                wrapped = true;
                nb.cursor = 0;
                continue;
            };
            let (end, res, node) = (c.end, c.resident(), c.node);
            if node as usize == fast || res <= EPS {
                nb.cursor = end;
                continue;
            }
            if res > budget {
                let n = (end - start) as f64 / pagef;
                let span = (budget / (res / n)).floor() as u64;
                if span == 0 {
                    break;
                }
                let cut = start + span * self.cfg.page;
                self.split_at(cut);
                let c = self.cells.get_mut(&start).expect("cell");
                budget -= c.resident();
                c.nb_armed = c.resident();
                c.nb_arm_us = now;
                nb.cursor = cut;
                break;
            }
            let c = self.cells.get_mut(&start).expect("cell");
            c.nb_armed = res;
            c.nb_arm_us = now;
            budget -= res;
            nb.cursor = end;
        }
        nb.scan_carry = budget.clamp(0.0, 1.0);
        self.numab = Some(nb);
    }
}

#[cfg(test)]
#[path = "numab_tests.rs"]
mod tests;
