//! The heatmap's first pass: which address spans were monitored, where the
//! accesses went, and from those the collapsed address axis and the window
//! of it to draw.

/// Finest resolution of the access-mass histogram: one 4 KiB page.
const HIST_MIN_SHIFT: u32 = 12;
/// Most bins the access-mass histogram keeps; past that its bins double.
const HIST_MAX_BINS: usize = 1 << 16;

/// Sorted, disjoint, non-touching `[start, end)` spans: the union of every
/// region seen.
#[derive(Debug, Default, Clone)]
pub(crate) struct SpanUnion {
    pub spans: Vec<(u64, u64)>,
}

impl SpanUnion {
    /// Adds `[start, end)`, merging with overlapping or touching spans.
    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // First span that ends at or after `start` (touching counts).
        let i = self.spans.partition_point(|&(_, e)| e < start);
        if let Some(&(s, e)) = self.spans.get(i) {
            if s <= start && end <= e {
                return;
            }
        }
        let mut j = i;
        let (mut ns, mut ne) = (start, end);
        while j < self.spans.len() && self.spans[j].0 <= end {
            ns = ns.min(self.spans[j].0);
            ne = ne.max(self.spans[j].1);
            j += 1;
        }
        self.spans.splice(i..j, [(ns, ne)]);
    }

    pub fn total(&self) -> u64 {
        self.spans.iter().map(|&(s, e)| e - s).sum()
    }
}

#[derive(Debug, Clone)]
struct HistSpan {
    /// Index of the first bin (address >> shift).
    first: u64,
    /// Difference array of per-bin mass: `diff.len()` is bins + 1.
    diff: Vec<Mass>,
}

impl HistSpan {
    fn nbins(&self) -> u64 {
        self.diff.len() as u64 - 1
    }
    fn last(&self) -> u64 {
        self.first + self.nbins() - 1
    }
    fn values(&self) -> Vec<Mass> {
        let mut acc = [0.0; 2];
        self.diff[..self.diff.len() - 1]
            .iter()
            .map(|d| {
                acc = [acc[0] + d[0], acc[1] + d[1]];
                acc
            })
            .collect()
    }
    fn from_values(first: u64, values: &[Mass]) -> Self {
        let mut diff = Vec::with_capacity(values.len() + 1);
        let mut prev = [0.0; 2];
        for &v in values {
            diff.push([v[0] - prev[0], v[1] - prev[1]]);
            prev = v;
        }
        diff.push([-prev[0], -prev[1]]);
        Self { first, diff }
    }
}

/// Two access masses per bin: `[0]` is frequency x time x bytes (the
/// accesses), `[1]` is frequency^2 x time x bytes (the *heat*, which
/// weighs concentrated hot accesses over faint widespread ones).
pub(crate) type Mass = [f64; 2];

/// Access masses per address, in power-of-two
/// bins aligned to absolute addresses, stored only over the address spans
/// ensured so far. Bins start at one page and double (merging pairs
/// exactly) whenever the stored spans would need more than
/// [`HIST_MAX_BINS`] bins, so memory stays bounded whatever the address
/// space looks like. Adding a region is O(log spans).
#[derive(Debug, Clone)]
pub(crate) struct MassHist {
    shift: u32,
    spans: Vec<HistSpan>,
    total_bins: u64,
    max_bins: u64,
}

impl Default for MassHist {
    fn default() -> Self {
        Self::with_max_bins(HIST_MAX_BINS)
    }
}

impl MassHist {
    pub fn with_max_bins(max_bins: usize) -> Self {
        Self {
            shift: HIST_MIN_SHIFT,
            spans: Vec::new(),
            total_bins: 0,
            max_bins: max_bins.max(2) as u64,
        }
    }

    /// Makes the bins covering `[start, end)` exist.
    pub fn ensure(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        loop {
            let b0 = start >> self.shift;
            let b1 = (end - 1) >> self.shift;
            let i = self
                .spans
                .partition_point(|s| s.last().saturating_add(1) < b0);
            if let Some(s) = self.spans.get(i) {
                if s.first <= b0 && b1 <= s.last() {
                    return;
                }
            }
            let mut j = i;
            while j < self.spans.len() && self.spans[j].first <= b1.saturating_add(1) {
                j += 1;
            }
            let nf = self
                .spans
                .get(i)
                .filter(|_| i < j)
                .map_or(b0, |s| s.first.min(b0));
            let nl = if i < j {
                self.spans[j - 1].last().max(b1)
            } else {
                b1
            };
            let replaced: u64 = self.spans[i..j].iter().map(HistSpan::nbins).sum();
            if self.total_bins - replaced + (nl - nf + 1) > self.max_bins {
                // Grow the bins first, so no oversized span is ever built.
                self.coarsen();
                continue;
            }
            let mut values = vec![[0.0; 2]; (nl - nf + 1) as usize];
            for s in &self.spans[i..j] {
                let off = (s.first - nf) as usize;
                for (k, v) in s.values().into_iter().enumerate() {
                    values[off + k] = v;
                }
            }
            self.spans
                .splice(i..j, [HistSpan::from_values(nf, &values)]);
            self.total_bins = self.spans.iter().map(HistSpan::nbins).sum();
            return;
        }
    }

    /// Doubles the bin size, merging bin pairs and then touching spans.
    fn coarsen(&mut self) {
        let mut out: Vec<(u64, Vec<Mass>)> = Vec::with_capacity(self.spans.len());
        for s in &self.spans {
            let nf = s.first >> 1;
            let nl = s.last() >> 1;
            let mut values = vec![[0.0; 2]; (nl - nf + 1) as usize];
            for (k, v) in s.values().into_iter().enumerate() {
                let x = &mut values[(((s.first + k as u64) >> 1) - nf) as usize];
                *x = [x[0] + v[0], x[1] + v[1]];
            }
            match out.last_mut() {
                Some((pf, pv)) if *pf + pv.len() as u64 >= nf => {
                    let start = (nf - *pf) as usize;
                    for (k, v) in values.into_iter().enumerate() {
                        if let Some(x) = pv.get_mut(start + k) {
                            *x = [x[0] + v[0], x[1] + v[1]];
                        } else {
                            pv.push(v);
                        }
                    }
                }
                _ => out.push((nf, values)),
            }
        }
        self.shift += 1;
        self.spans = out
            .iter()
            .map(|(f, v)| HistSpan::from_values(*f, v))
            .collect();
        self.total_bins = self.spans.iter().map(HistSpan::nbins).sum();
    }

    /// Adds `density` (mass per byte) over `[start, end)`, which must have
    /// been [`ensure`](Self::ensure)d. `hint` caches the span index between
    /// calls with ascending addresses.
    #[inline]
    pub fn add(&mut self, start: u64, end: u64, density: Mass, hint: &mut usize) {
        if start >= end {
            return;
        }
        let shift = self.shift;
        let b0 = start >> shift;
        let b1 = (end - 1) >> shift;
        let mut i = *hint;
        let cached = matches!(self.spans.get(i), Some(s) if s.first <= b0 && b0 <= s.last());
        if !cached {
            i = self.spans.partition_point(|s| s.last() < b0);
            *hint = i;
        }
        let Some(span) = self.spans.get_mut(i) else {
            return;
        };
        if span.first > b0 || b1 > span.last() {
            debug_assert!(false, "mass added outside the ensured spans");
            return;
        }
        let i0 = (b0 - span.first) as usize;
        let i1 = (b1 - span.first) as usize;
        let d = &mut span.diff;
        let mut point = |i: usize, len: f64| {
            let v = [density[0] * len, density[1] * len];
            d[i] = [d[i][0] + v[0], d[i][1] + v[1]];
            d[i + 1] = [d[i + 1][0] - v[0], d[i + 1][1] - v[1]];
        };
        if i0 == i1 {
            point(i0, (end - start) as f64);
            return;
        }
        // Exact in wrapping arithmetic: both results are at most a bin.
        let bin = 1u64.wrapping_shl(shift);
        let edge0 = (b0 << shift).wrapping_add(bin).wrapping_sub(start);
        let edge1 = end - (b1 << shift);
        point(i0, edge0 as f64);
        point(i1, edge1 as f64);
        if i0 + 1 < i1 {
            let full = [density[0] * bin as f64, density[1] * bin as f64];
            d[i0 + 1] = [d[i0 + 1][0] + full[0], d[i0 + 1][1] + full[1]];
            d[i1] = [d[i1][0] - full[0], d[i1][1] - full[1]];
        }
    }

    /// The bins holding mass, as `(start, end, mass)` in address order.
    pub fn bins(&self) -> Vec<(u64, u64, Mass)> {
        let mut out = Vec::new();
        for s in &self.spans {
            for (k, v) in s.values().into_iter().enumerate() {
                if v[0] > 0.0 || v[1] > 0.0 {
                    let b = u128::from(s.first + k as u64);
                    let start = (b << self.shift).min(u128::from(u64::MAX)) as u64;
                    let end = ((b + 1) << self.shift).min(u128::from(u64::MAX)) as u64;
                    out.push((start, end, v));
                }
            }
        }
        out
    }
}

/// Share of the monitored bytes above which a gap between monitored spans is
/// collapsed to a separator: gaps larger than 1/20 of the total monitored
/// size are collapsed, smaller ones are kept (drawn as unmonitored cells).
pub const GAP_COLLAPSE_FRACTION: f64 = 0.05;
/// Share of the access mass the automatic active window must hold.
pub const ACTIVE_MASS_FRACTION: f64 = 0.99;
/// Padding added on each side of the active window, as a share of its size.
pub const ACTIVE_PAD_FRACTION: f64 = 0.05;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AxisSeg {
    pub start: u64,
    pub end: u64,
    /// Position of `start` on the collapsed axis.
    pub off: u64,
}

/// The collapsed address axis: segments of monitored address space laid end
/// to end, the large gaps between them removed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Axis {
    pub segs: Vec<AxisSeg>,
    pub len: u64,
}

impl Axis {
    /// Groups `spans` into segments, keeping gaps up to
    /// `GAP_COLLAPSE_FRACTION` of the monitored size inside segments.
    pub fn new(spans: &[(u64, u64)]) -> Self {
        let monitored: u64 = spans.iter().map(|&(s, e)| e - s).sum();
        let keep = (monitored as f64 * GAP_COLLAPSE_FRACTION) as u64;
        let mut segs: Vec<AxisSeg> = Vec::new();
        let mut off = 0;
        for &(s, e) in spans {
            match segs.last_mut() {
                Some(last) if s - last.end <= keep => {
                    off += e - last.end;
                    last.end = e;
                }
                _ => {
                    segs.push(AxisSeg {
                        start: s,
                        end: e,
                        off,
                    });
                    off += e - s;
                }
            }
        }
        Self { segs, len: off }
    }

    /// Index of the segment holding `addr`, or of the first one after it.
    fn seg_at_or_after(&self, addr: u64) -> usize {
        self.segs.partition_point(|g| g.end <= addr)
    }

    /// Axis position of the first monitored byte at or after `addr`.
    pub fn pos_ceil(&self, addr: u64) -> u64 {
        match self.segs.get(self.seg_at_or_after(addr)) {
            Some(g) => g.off + addr.saturating_sub(g.start),
            None => self.len,
        }
    }

    /// Axis position just past the last monitored byte below `addr`.
    pub fn pos_floor(&self, addr: u64) -> u64 {
        let i = self.segs.partition_point(|g| g.start < addr);
        match i.checked_sub(1).map(|i| self.segs[i]) {
            Some(g) => g.off + (addr.min(g.end) - g.start),
            None => 0,
        }
    }

    /// Address at an axis position (a position on a segment boundary maps
    /// to the start of the later segment).
    #[cfg(test)]
    pub fn addr_at(&self, pos: u64) -> u64 {
        let i = self
            .segs
            .partition_point(|g| g.off <= pos)
            .saturating_sub(1);
        match self.segs.get(i) {
            Some(g) => g.start + (pos - g.off).min(g.end - g.start),
            None => 0,
        }
    }

    /// Maps access-mass bins onto the axis: `(axis_start, axis_end, mass)`
    /// pieces in order, each bin's mass shared among the monitored spans it
    /// overlaps in proportion to the overlap.
    pub fn mass_pieces(
        &self,
        spans: &[(u64, u64)],
        bins: &[(u64, u64, Mass)],
    ) -> Vec<(u64, u64, Mass)> {
        let mut out = Vec::new();
        let mut j = 0;
        for &(bs, be, m) in bins {
            while j < spans.len() && spans[j].1 <= bs {
                j += 1;
            }
            let mut k = j;
            let mut total = 0u64;
            while k < spans.len() && spans[k].0 < be {
                total += crate::source::overlap(bs, be, spans[k].0, spans[k].1);
                k += 1;
            }
            if total == 0 {
                continue;
            }
            for &(s, e) in &spans[j..k] {
                let (ps, pe) = (bs.max(s), be.min(e));
                if ps < pe {
                    let a = self.pos_ceil(ps);
                    let share = (pe - ps) as f64 / total as f64;
                    out.push((a, a + (pe - ps), [m[0] * share, m[1] * share]));
                }
            }
        }
        out
    }
}

/// The smallest axis window holding [`ACTIVE_MASS_FRACTION`] of the heat
/// (the second mass, at the resolution of the mass pieces), padded by
/// [`ACTIVE_PAD_FRACTION`] on each side, widened to at least `min_len`
/// bytes, page aligned, and clamped to the axis. The whole axis when nothing
/// was accessed.
pub(crate) fn active_window(
    axis_len: u64,
    pieces: &[(u64, u64, Mass)],
    min_len: u64,
) -> (u64, u64) {
    let total: f64 = pieces.iter().map(|p| p.2[1]).sum();
    if total <= 0.0 || axis_len == 0 {
        return (0, axis_len);
    }
    let target = total * ACTIVE_MASS_FRACTION * (1.0 - 1e-9);
    let (mut best, mut i, mut sum) = ((0, axis_len), 0, 0.0);
    for j in 0..pieces.len() {
        sum += pieces[j].2[1];
        while i < j && sum - pieces[i].2[1] >= target {
            sum -= pieces[i].2[1];
            i += 1;
        }
        if sum >= target && pieces[j].1 - pieces[i].0 < best.1 - best.0 {
            best = (pieces[i].0, pieces[j].1);
        }
    }
    let (ws, we) = best;
    let pad = ((we - ws) as f64 * ACTIVE_PAD_FRACTION) as u64;
    let (mut ws, mut we) = (ws.saturating_sub(pad), (we + pad).min(axis_len));
    let min_len = min_len.min(axis_len);
    if we - ws < min_len {
        let center = ws / 2 + we / 2;
        ws = center.saturating_sub(min_len / 2);
        we = ws + min_len;
        if we > axis_len {
            we = axis_len;
            ws = axis_len - min_len;
        }
    }
    const PAGE: u64 = 4096;
    ws -= ws % PAGE;
    we = we.div_ceil(PAGE).saturating_mul(PAGE).min(axis_len);
    (ws, we)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_union_merges_touching_and_overlapping() {
        let mut u = SpanUnion::default();
        u.insert(100, 200);
        u.insert(300, 400);
        u.insert(200, 250);
        assert_eq!(u.spans, vec![(100, 250), (300, 400)]);
        u.insert(240, 310);
        assert_eq!(u.spans, vec![(100, 400)]);
        u.insert(0, 10);
        u.insert(150, 160);
        assert_eq!(u.spans, vec![(0, 10), (100, 400)]);
        assert_eq!(u.total(), 310);
    }

    #[test]
    fn mass_hist_is_exact_then_coarsens() {
        let mut h = MassHist::with_max_bins(8);
        h.ensure(0, 4 * 4096);
        h.add(2048, 3 * 4096, [1.0, 0.5], &mut 0);
        let m = |x: f64| [x, x / 2.0];
        assert_eq!(
            h.bins(),
            vec![
                (0, 4096, m(2048.0)),
                (4096, 8192, m(4096.0)),
                (8192, 12288, m(4096.0))
            ]
        );
        // A far span forces bins to grow until both fit in 8 bins.
        h.ensure(1 << 20, (1 << 20) + 8 * 4096);
        h.add(1 << 20, (1 << 20) + 4096, [2.0, 1.0], &mut 0);
        assert_eq!(h.shift, 13);
        let bins = h.bins();
        let total: f64 = bins.iter().map(|b| b.2[0]).sum();
        assert_eq!(total, 2048.0 + 8192.0 + 8192.0);
        assert!(h.total_bins <= 8, "{}", h.total_bins);
        assert_eq!(bins.last().unwrap().2, m(8192.0));
    }

    #[test]
    fn axis_collapses_big_gaps_only() {
        // 3 spans of 1 MiB: a 4 KiB gap (kept) and a 1 GiB gap (collapsed).
        let m = 1 << 20;
        let spans = [(0, m), (m + 4096, 2 * m + 4096), (1 << 30, (1 << 30) + m)];
        let axis = Axis::new(&spans);
        assert_eq!(
            axis.segs,
            vec![
                AxisSeg {
                    start: 0,
                    end: 2 * m + 4096,
                    off: 0
                },
                AxisSeg {
                    start: 1 << 30,
                    end: (1 << 30) + m,
                    off: 2 * m + 4096
                }
            ]
        );
        assert_eq!(axis.len, 3 * m + 4096);
        assert_eq!(axis.pos_ceil(1 << 29), 2 * m + 4096);
        assert_eq!(axis.pos_floor(1 << 29), 2 * m + 4096);
        assert_eq!(axis.addr_at(2 * m + 4096), 1 << 30);
        assert_eq!(axis.addr_at(10), 10);
    }

    #[test]
    fn active_window_finds_the_dense_part() {
        let pieces = [
            (0, 100_000, [0.0, 0.001]),
            (500_000, 504_096, [0.0, 10.0]),
            (900_000, 1_000_000, [0.0, 0.001]),
        ];
        let (s, e) = active_window(1 << 20, &pieces, 0);
        assert!(s <= 500_000 && e >= 504_096 && e - s < 16_384, "{s} {e}");
    }
}
