//! The papers' exact baseline: every page checked at every sample.

use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use udamon_core::{Attrs, Error, Monitor, RegionSnapshot, Snapshot, TargetSnapshot};

use crate::model::{seg_hazard, Model, Piece};

/// The most pages a full scan takes on (64 GiB of 4 KiB pages).
pub const MAX_FULL_SCAN_PAGES: u64 = 1 << 24;

/// A [`Monitor`] that keeps one counter per mapped page. Snapshots report
/// runs of pages with equal counts as regions (lossless); ages are 0.
///
/// Cost per sample is O(accessed pages + spec ranges): pages of a span with
/// one access probability are visited by geometric skips, and only the pages
/// a sweep's window passes are evaluated one by one.
pub struct FullScan {
    model: Arc<Model>,
    attrs: Attrs,
    rng: Pcg64Mcg,
    /// Per object: first page index in `counts`.
    obj_page: Vec<u64>,
    counts: Vec<u16>,
    now_us: u64,
    window_start_us: u64,
    pieces: Vec<Piece>,
    deadline_us: Option<u64>,
}

impl FullScan {
    pub fn new(model: Arc<Model>, attrs: Attrs, seed: u64) -> Result<FullScan, Error> {
        attrs.validate()?;
        crate::bounds::check_full_scan(&model.workload, &attrs).map_err(crate::bounds_error)?;
        if attrs.aggr_samples() > u64::from(u16::MAX) {
            return Err(Error::InvalidAttrs(format!(
                "full scan counts at most {} samples per aggregation window",
                u16::MAX
            )));
        }
        let page = model.workload.page_size;
        let pages = model.workload.mapped_bytes() / page;
        if pages > MAX_FULL_SCAN_PAGES {
            return Err(Error::Backend(format!(
                "a full scan of {pages} pages is impractical (at most {MAX_FULL_SCAN_PAGES}): use a larger page_size in the spec, a smaller layout, or the adaptive monitor"
            )));
        }
        let mut obj_page = Vec::new();
        let mut n = 0;
        for o in &model.workload.objects {
            obj_page.push(n);
            n += o.range.sz() / page;
        }
        Ok(FullScan {
            model,
            attrs,
            rng: Pcg64Mcg::seed_from_u64(seed ^ 0xf011_5ca7),
            obj_page,
            counts: vec![0; n as usize],
            now_us: 0,
            window_start_us: 0,
            pieces: Vec::new(),
            deadline_us: None,
        })
    }

    fn page_index(&self, addr: u64) -> Option<usize> {
        let objs = &self.model.workload.objects;
        let i = objs.partition_point(|o| o.range.end <= addr);
        let o = objs.get(i).filter(|o| o.range.contains(addr))?;
        Some((self.obj_page[i] + (addr - o.range.start) / self.model.workload.page_size) as usize)
    }

    fn sample(&mut self) {
        let t0 = self.now_us;
        let t1 = t0 + self.attrs.sample_us;
        self.now_us = t1;
        let model = Arc::clone(&self.model);
        model.pieces(t0, t1, &mut self.pieces);
        let page = model.workload.page_size;
        // Spans with any access in this interval, over all its phase pieces.
        let mut spans: Vec<(u64, u64)> = Vec::new();
        for p in &self.pieces {
            for s in &model.segs[p.phase] {
                spans.push((s.range.start, s.range.end));
            }
        }
        let mut points: Vec<u64> = spans.iter().flat_map(|&(a, b)| [a, b]).collect();
        points.sort_unstable();
        points.dedup();
        for w in points.windows(2) {
            let (a, b) = (w[0], w[1]);
            let segs: Vec<_> = self
                .pieces
                .iter()
                .filter_map(|p| {
                    model
                        .seg_at(p.phase, a)
                        .filter(|s| s.range.end >= b)
                        .map(|s| (s, *p))
                })
                .collect();
            if segs.is_empty() {
                continue;
            }
            let has_sweep = segs.iter().any(|(s, _)| !s.sweeps.is_empty());
            let first_page = a.div_ceil(page) * page;
            if has_sweep {
                let pure = segs.iter().all(|(s, _)| s.rate == 0.0);
                let spans = if pure {
                    swept_spans(&segs, a, b)
                } else {
                    vec![(a, b)]
                };
                for (lo, hi) in spans {
                    let mut addr = lo.div_ceil(page) * page;
                    while addr < hi {
                        let h: f64 = segs.iter().map(|(s, p)| seg_hazard(s, addr, p)).sum();
                        if h > 0.0 && self.rng.random::<f64>() < -(-h).exp_m1() {
                            self.hit(addr);
                        }
                        addr += page;
                    }
                }
            } else {
                let h: f64 = segs.iter().map(|(s, p)| s.rate * p.secs()).sum();
                let prob = -(-h).exp_m1();
                if prob <= 0.0 {
                    continue;
                }
                let n = (b - first_page).div_ceil(page);
                // Geometric skips: the gap before the next accessed page.
                let ln_q = (-h).max(-700.0);
                let mut k: u64 = 0;
                loop {
                    if prob < 1.0 {
                        let u: f64 = self.rng.random::<f64>();
                        let skip = ((1.0 - u).ln() / ln_q).floor();
                        if !skip.is_finite() || skip >= (n - k) as f64 {
                            break;
                        }
                        k += skip as u64;
                    }
                    if k >= n {
                        break;
                    }
                    self.hit(first_page + k * page);
                    k += 1;
                }
            }
        }
    }

    fn hit(&mut self, addr: u64) {
        if let Some(i) = self.page_index(addr) {
            self.counts[i] = self.counts[i].saturating_add(1);
        }
    }

    fn snapshot(&mut self) -> Snapshot {
        let page = self.model.workload.page_size;
        let mut regions = Vec::new();
        for (oi, o) in self.model.workload.objects.iter().enumerate() {
            let base = self.obj_page[oi] as usize;
            let n = (o.range.sz() / page) as usize;
            let mut run_start = 0;
            for i in 1..=n {
                if i == n || self.counts[base + i] != self.counts[base + run_start] {
                    regions.push(RegionSnapshot {
                        start: o.range.start + run_start as u64 * page,
                        end: o.range.start + i as u64 * page,
                        nr_accesses: u32::from(self.counts[base + run_start]),
                        age: 0,
                    });
                    run_start = i;
                }
            }
        }
        self.counts.fill(0);
        let s = Snapshot {
            start_us: self.window_start_us,
            end_us: self.now_us,
            sample_us: self.attrs.sample_us,
            aggr_us: self.attrs.aggr_us,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions,
            }],
        };
        self.window_start_us = self.now_us;
        s
    }
}

/// The parts of `[a, b)` that a sweep's window passes over during its
/// pieces: positions `[p0, p1 + width)` modulo the range, where `p0` and `p1`
/// are the window's start at the piece's start and end. Pages elsewhere have
/// no exposure and need no draw.
fn swept_spans(segs: &[(&crate::model::Seg, Piece)], a: u64, b: u64) -> Vec<(u64, u64)> {
    let mut spans = Vec::new();
    for (seg, piece) in segs {
        for (range, _, sweep) in &seg.sweeps {
            let l = range.sz();
            let pos = |t: u64| -> u128 {
                u128::from(t - piece.phase_start_us) * u128::from(l) / u128::from(sweep.period_us)
            };
            let (p0, p1) = (
                pos(piece.a_us),
                pos(piece.b_us) + u128::from(sweep.width) + 1,
            );
            if p1 - p0 >= u128::from(l) {
                spans.push((a, b));
                continue;
            }
            let (s0, s1) = ((p0 % u128::from(l)) as u64, (p1 % u128::from(l)) as u64);
            let arcs: &[(u64, u64)] = if s0 < s1 {
                &[(s0, s1)][..]
            } else {
                &[(s0, l), (0, s1)][..]
            };
            for &(x0, x1) in arcs {
                let (lo, hi) = ((range.start + x0).max(a), (range.start + x1).min(b));
                if lo < hi {
                    // Widen to whole pages: a page counts from its start address.
                    spans.push((lo.saturating_sub(4096), hi));
                }
            }
        }
    }
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (lo, hi) in spans {
        let lo = lo.max(a);
        match merged.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

impl Monitor for FullScan {
    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, Error> {
        if self.deadline_us.is_some_and(|d| self.now_us >= d) {
            return Ok(None);
        }
        for _ in 0..self.attrs.aggr_samples() {
            self.sample();
        }
        Ok(Some(self.snapshot()))
    }

    fn commit(&mut self, attrs: Attrs) -> Result<(), Error> {
        attrs.validate()?;
        self.attrs = attrs;
        Ok(())
    }

    fn attrs(&self) -> Attrs {
        self.attrs
    }

    fn now_us(&self) -> u64 {
        self.now_us
    }

    fn set_deadline(&mut self, deadline_us: Option<u64>) {
        self.deadline_us = deadline_us;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{sweep_exposure_us, Seg};
    use crate::spec::Sweep;
    use proptest::prelude::*;
    use udamon_core::AddrRange;

    proptest! {
        #[test]
        fn swept_spans_hold_every_exposed_page(
            pages in 8u64..200,
            width_pages in 1u64..8,
            period_us in 1_000u64..10_000_000,
            a_us in 0u64..20_000_000,
            len_us in 1u64..50_000,
        ) {
            let range = AddrRange::new(1 << 30, (1 << 30) + pages * 4096);
            let sweep = Sweep { width: width_pages.min(pages) * 4096, period_us };
            let seg = Seg { range, rate: 0.0, sweeps: vec![(range, 1.0, sweep)] };
            let piece = Piece { phase: 0, phase_start_us: 0, a_us, b_us: a_us + len_us };
            let spans = swept_spans(&[(&seg, piece)], range.start, range.end);
            for i in 0..pages {
                let page = range.start + i * 4096;
                if sweep_exposure_us(range, sweep, page, &piece) > 1e-9 {
                    prop_assert!(
                        spans.iter().any(|&(lo, hi)| lo <= page && page < hi),
                        "page {i} exposed but outside {spans:?}"
                    );
                }
            }
        }
    }
}
