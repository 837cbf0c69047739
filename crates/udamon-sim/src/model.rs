//! The access model: for any page and time interval, the expected number of
//! accesses (the Poisson hazard), computed from the spec's ranges, never per
//! page.

use udamon_core::{Addr, AddrRange};

use crate::spec::{Sweep, Workload};

/// Intervals whose pieces could number more than this are folded where
/// they may be long ([`Model::pieces_folded`]).
const FOLD_PIECES: u128 = 1 << 16;

/// An address span of one phase with a constant set of accesses.
#[derive(Clone, Debug)]
pub(crate) struct Seg {
    pub range: AddrRange,
    /// Sum of the rates (per page per second) of plain accesses covering it.
    pub rate: f64,
    /// Sweeping accesses covering it: (access range, rate, sweep).
    pub sweeps: Vec<(AddrRange, f64, Sweep)>,
}

/// A part of a time interval that falls into one phase instance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Piece {
    pub phase: usize,
    /// Absolute start time of this phase instance.
    pub phase_start_us: u64,
    pub a_us: u64,
    pub b_us: u64,
}

impl Piece {
    pub fn secs(&self) -> f64 {
        (self.b_us - self.a_us) as f64 / 1e6
    }
}

/// The workload, indexed for fast lookups.
pub struct Model {
    pub workload: Workload,
    cycle_us: u64,
    phase_starts: Vec<u64>,
    pub(crate) segs: Vec<Vec<Seg>>,
}

impl Model {
    pub fn new(workload: Workload) -> Model {
        let mut phase_starts = Vec::with_capacity(workload.phases.len());
        let mut t = 0;
        for p in &workload.phases {
            phase_starts.push(t);
            t += p.duration_us;
        }
        let segs = workload
            .phases
            .iter()
            .map(|p| build_segs(&p.accesses))
            .collect();
        Model {
            cycle_us: workload.cycle_us(),
            workload,
            phase_starts,
            segs,
        }
    }

    /// Splits `[t0, t1)` at phase boundaries.
    pub(crate) fn pieces(&self, t0: u64, t1: u64, out: &mut Vec<Piece>) {
        out.clear();
        self.push_pieces(t0, t1, out);
    }

    /// The pieces of `[t0, t1)` with its whole cycles folded, for intervals
    /// too long to list ([`Workload::max_pieces`] above
    /// `FOLD_PIECES`): `out` gets the pieces before the first whole cycle
    /// and after the last, `cycle` those of one whole cycle, and the number
    /// `k` of whole cycles is returned. Every whole cycle has the same
    /// hazard (each phase instance starts afresh, sweeps included), so the
    /// hazard over `[t0, t1)` is `hazard(out) + k * hazard(cycle)`, and
    /// memory stays O(phases) however long the interval. Other intervals
    /// are listed as [`pieces`](Self::pieces) lists them, and `k` is 0.
    pub(crate) fn pieces_folded(
        &self,
        t0: u64,
        t1: u64,
        out: &mut Vec<Piece>,
        cycle: &mut Vec<Piece>,
    ) -> u64 {
        let c = self.cycle_us;
        cycle.clear();
        let folded = (self.workload.max_pieces(t1.saturating_sub(t0)) > FOLD_PIECES)
            .then(|| {
                let c0 = t0.checked_next_multiple_of(c)?;
                let k = t1.checked_sub(c0)? / c;
                (k >= 2).then_some((c0, k))
            })
            .flatten();
        let Some((c0, k)) = folded else {
            self.pieces(t0, t1, out);
            return 0;
        };
        out.clear();
        self.push_pieces(t0, c0, out);
        self.push_pieces(c0 + k * c, t1, out);
        self.push_pieces(c0, c0 + c, cycle);
        k
    }

    fn push_pieces(&self, t0: u64, t1: u64, out: &mut Vec<Piece>) {
        let mut t = t0;
        while t < t1 {
            let cycle = t / self.cycle_us;
            let rem = t % self.cycle_us;
            let i = self.phase_starts.partition_point(|&s| s <= rem) - 1;
            let phase_start_us = cycle * self.cycle_us + self.phase_starts[i];
            let b = t1.min(phase_start_us + self.workload.phases[i].duration_us);
            out.push(Piece {
                phase: i,
                phase_start_us,
                a_us: t,
                b_us: b,
            });
            t = b;
        }
    }

    /// The ranges accessed at `min_rate` or more per page per second
    /// (plain rates; sweeps count at their rate) in the phase running at
    /// `t_us`: the hot set then. Sorted, disjoint, adjacent ones merged.
    pub fn hot_ranges(&self, t_us: u64, min_rate: f64) -> Vec<AddrRange> {
        let mut pieces = Vec::new();
        self.pieces(t_us, t_us + 1, &mut pieces);
        let mut out: Vec<AddrRange> = Vec::new();
        for p in &pieces {
            for seg in &self.segs[p.phase] {
                let rate = seg.rate + seg.sweeps.iter().map(|s| s.1).sum::<f64>();
                if rate < min_rate {
                    continue;
                }
                match out.last_mut() {
                    Some(l) if l.end == seg.range.start => l.end = seg.range.end,
                    _ => out.push(seg.range),
                }
            }
        }
        out
    }

    /// Index of the phase running at `t_us`.
    pub fn phase_at(&self, t_us: u64) -> usize {
        let mut pieces = Vec::new();
        self.pieces(t_us, t_us + 1, &mut pieces);
        pieces.first().map_or(0, |p| p.phase)
    }

    pub(crate) fn seg_at(&self, phase: usize, addr: Addr) -> Option<&Seg> {
        let segs = &self.segs[phase];
        let i = segs.partition_point(|s| s.range.end <= addr);
        segs.get(i).filter(|s| s.range.contains(addr))
    }

    /// Expected accesses of the page at `page` during `pieces`.
    pub(crate) fn hazard(&self, page: Addr, pieces: &[Piece]) -> f64 {
        let mut h = 0.0;
        for p in pieces {
            if let Some(seg) = self.seg_at(p.phase, page) {
                h += seg_hazard(seg, page, p);
            }
        }
        h
    }

    /// Probability that the page at `addr` is accessed at least once in
    /// `[t0_us, t1_us)`.
    pub fn access_probability(&self, addr: Addr, t0_us: u64, t1_us: u64) -> f64 {
        let page = addr / self.workload.page_size * self.workload.page_size;
        if !self.workload.is_mapped(page) {
            return 0.0;
        }
        let mut pieces = Vec::new();
        self.pieces(t0_us, t1_us, &mut pieces);
        -(-self.hazard(page, &pieces)).exp_m1()
    }
}

/// Expected accesses of `page` in `seg` during `piece`.
pub(crate) fn seg_hazard(seg: &Seg, page: Addr, piece: &Piece) -> f64 {
    let mut h = seg.rate * piece.secs();
    for (range, rate, sweep) in &seg.sweeps {
        h += rate * sweep_exposure_us(*range, *sweep, page, piece) / 1e6;
    }
    h
}

/// Time (us) during `piece` when the sweep's window covers `page`.
///
/// The window starts at the range's start when the phase starts and moves
/// at `L / period` bytes per us, wrapping around. In coordinates
/// `u = pos - (x - width)` taken modulo `L`, the page is covered while
/// `u` is in `[0, width)`, so the covered time is a difference of the
/// staircase `F(z) = floor(z / L) * width + min(z mod L, width)`.
pub(crate) fn sweep_exposure_us(range: AddrRange, sweep: Sweep, page: Addr, piece: &Piece) -> f64 {
    let l = range.sz() as f64;
    let w = sweep.width as f64;
    let x = (page - range.start) as f64;
    let v = l / sweep.period_us as f64;
    let f = |z: f64| (z / l).floor() * w + z.rem_euclid(l).min(w);
    let u = |t: u64| v * (t - piece.phase_start_us) as f64 - (x - w);
    (f(u(piece.b_us)) - f(u(piece.a_us))) / v
}

/// Expected accesses to all the pages of `range` (which lies inside `seg`)
/// during `piece`: exact for plain rates; for sweeps, the exposure time
/// integrated over the range's bytes in closed form, divided by the page
/// size.
pub(crate) fn seg_range_hazard(seg: &Seg, range: AddrRange, piece: &Piece, page_size: u64) -> f64 {
    let pages = range.sz() as f64 / page_size as f64;
    let mut h = seg.rate * piece.secs() * pages;
    for (arange, rate, sweep) in &seg.sweeps {
        h += rate * sweep_exposure_integral(*arange, *sweep, range, piece) / 1e6 / page_size as f64;
    }
    h
}

/// `integral over x in range of sweep_exposure_us(x)`, in us x bytes.
///
/// With `y = x - access start`, the covered time of `y` is
/// `(F(c1 - y) - F(c0 - y)) / v` for the staircase `F` of
/// [`sweep_exposure_us`] and `c = v (t - phase start) + width`. Whole
/// periods contribute `width` each; the rest is a continuous piecewise
/// linear function of `y` with at most a few breakpoints in the range, so
/// the trapezoid rule over those breakpoints is exact.
pub(crate) fn sweep_exposure_integral(
    arange: AddrRange,
    sweep: Sweep,
    range: AddrRange,
    piece: &Piece,
) -> f64 {
    let l = arange.sz() as f64;
    let w = sweep.width as f64;
    let v = l / sweep.period_us as f64;
    let f = |z: f64| (z / l).floor() * w + z.rem_euclid(l).min(w);
    let delta = v * (piece.b_us - piece.a_us) as f64;
    let k = (delta / l).floor();
    let dp = delta - k * l;
    // The window's position is periodic: reduce time modulo the period first.
    let c0 = (v * ((piece.a_us - piece.phase_start_us) % sweep.period_us) as f64 + w).rem_euclid(l);
    let g = |y: f64| k * w + f(c0 + dp - y) - f(c0 - y);
    let ya = range.start.saturating_sub(arange.start) as f64;
    let yb = (range.end.min(arange.end) - arange.start) as f64;
    if yb <= ya {
        return 0.0;
    }
    let mut pts = [0.0f64; 24];
    let mut n = 0;
    for c in [c0, c0 + dp] {
        for m in -2..=2 {
            for off in [0.0, w] {
                let y = c - f64::from(m) * l - off;
                if y > ya && y < yb && n < pts.len() {
                    pts[n] = y;
                    n += 1;
                }
            }
        }
    }
    let pts = &mut pts[..n];
    pts.sort_unstable_by(f64::total_cmp);
    let mut total = 0.0;
    let mut prev = (ya, g(ya));
    for &y in pts.iter().chain(std::iter::once(&yb)) {
        let gy = g(y);
        total += (y - prev.0) * (gy + prev.1) / 2.0;
        prev = (y, gy);
    }
    total / v
}

/// Cuts a phase's accesses into spans with a constant set of accesses.
fn build_segs(accesses: &[crate::spec::Access]) -> Vec<Seg> {
    let mut points: Vec<Addr> = accesses
        .iter()
        .flat_map(|a| [a.range.start, a.range.end])
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut segs = Vec::new();
    for w in points.windows(2) {
        let range = AddrRange::new(w[0], w[1]);
        let mut seg = Seg {
            range,
            rate: 0.0,
            sweeps: Vec::new(),
        };
        for a in accesses
            .iter()
            .filter(|a| a.range.start <= range.start && range.end <= a.range.end)
        {
            match a.sweep {
                None => seg.rate += a.rate,
                Some(s) => seg.sweeps.push((a.range, a.rate, s)),
            }
        }
        if seg.rate > 0.0 || !seg.sweeps.is_empty() {
            segs.push(seg);
        }
    }
    segs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(spec: &str) -> Model {
        Model::new(Workload::from_toml(spec, "test").unwrap())
    }

    const TWO_PHASES: &str = r#"
        duration = "10s"
        base = 0
        [[layout]]
        object = "a"
        size = "1M"
        [[layout]]
        object = "b"
        size = "1M"
        [[phase]]
        duration = "1s"
        [[phase.access]]
        object = "a"
        rate = 100
        [[phase]]
        duration = "2s"
        [[phase.access]]
        object = "b"
        range = ["0%", "50%"]
        rate = 10
    "#;

    #[test]
    fn phases_repeat_and_split_intervals() {
        let m = model(TWO_PHASES);
        let mut p = Vec::new();
        m.pieces(900_000, 1_100_000, &mut p);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].phase, p[0].a_us, p[0].b_us), (0, 900_000, 1_000_000));
        assert_eq!((p[1].phase, p[1].phase_start_us), (1, 1_000_000));
        m.pieces(3_000_000, 3_000_010, &mut p);
        assert_eq!(
            (p[0].phase, p[0].phase_start_us),
            (0, 3_000_000),
            "second cycle"
        );
    }

    /// A soft-dirty interval spanning more cycles than are listed is
    /// folded: the same hazard, from a few pieces.
    #[test]
    fn folded_intervals_have_the_hazard_of_the_listed_ones() {
        let m = model(
            r#"
            duration = "3ms"
            base = 0
            [[layout]]
            object = "a"
            size = "1M"
            [[phase]]
            duration = "1ms"
            [[phase.access]]
            object = "a"
            rate = 0.5
            [[phase]]
            duration = "2ms"
            [[phase.access]]
            object = "a"
            range = ["0%", "50%"]
            rate = 0.25
            sweep = { width = "64K", period = "700us" }
        "#,
        );
        let (t0, t1) = (1_234, 1_234 + 40_000 * 3_000 + 1_777);
        let (mut all, mut out, mut cycle) = (Vec::new(), Vec::new(), Vec::new());
        m.pieces(t0, t1, &mut all);
        assert!(all.len() as u128 > FOLD_PIECES);
        let k = m.pieces_folded(t0, t1, &mut out, &mut cycle);
        assert!(k > 1 && out.len() <= 6 && cycle.len() == 2, "{k} {out:?}");
        for page in [0x0, 0x1_0000, 0x4_3000, 0x9_0000] {
            let want = m.hazard(page, &all);
            let got = m.hazard(page, &out) + k as f64 * m.hazard(page, &cycle);
            assert!(
                (got - want).abs() <= 1e-9 * want.max(1.0),
                "{page:#x}: {got} {want}"
            );
        }
        // Short intervals are listed as they are.
        assert_eq!(m.pieces_folded(t0, t0 + 9_000, &mut out, &mut cycle), 0);
        m.pieces(t0, t0 + 9_000, &mut all);
        assert_eq!((out, cycle.len()), (all, 0));
    }

    #[test]
    fn exact_poisson_probabilities() {
        let m = model(TWO_PHASES);
        // 5 ms at 100/s: 1 - e^-0.5
        let p = m.access_probability(0x1000, 0, 5_000);
        assert!((p - (1.0 - (-0.5f64).exp())).abs() < 1e-12);
        // b's first half in phase 1 at 10/s; second half never.
        assert!(
            (m.access_probability((1 << 20) + 0x1000, 1_000_000, 1_100_000)
                - (1.0 - (-1.0f64).exp()))
            .abs()
                < 1e-12
        );
        assert_eq!(
            m.access_probability((1 << 20) + (600 << 10), 1_000_000, 1_100_000),
            0.0
        );
        // An interval straddling the phase change gets half of each.
        let p = m.access_probability(0, 950_000, 1_050_000);
        assert!((p - (1.0 - (-5.0f64).exp())).abs() < 1e-12);
        // Unmapped.
        assert_eq!(m.access_probability(5 << 20, 0, 1_000_000), 0.0);
    }

    #[test]
    fn sweep_integral_matches_the_sum_over_pages() {
        // 64 pages of 4 KiB, window 10 pages, period 1 s.
        let range = AddrRange::new(1 << 20, (1 << 20) + 64 * 4096);
        let s = Sweep {
            width: 10 * 4096,
            period_us: 1_000_000,
        };
        for (a, b, lo, hi) in [
            (0u64, 5_000u64, 0u64, 64u64),
            (123_456, 130_000, 3, 40),
            (990_000, 1_020_000, 0, 64),
            (0, 2_500_000, 17, 18),
            (700_000, 705_000, 60, 64),
        ] {
            let piece = Piece {
                phase: 0,
                phase_start_us: 0,
                a_us: a,
                b_us: b,
            };
            let sub = AddrRange::new(range.start + lo * 4096, range.start + hi * 4096);
            // Midpoint sum over 64 points per page approximates the integral.
            let mut sum = 0.0;
            for p in lo..hi {
                for j in 0..64 {
                    let x = range.start + p * 4096 + j * 64 + 32;
                    sum += sweep_exposure_us(range, s, x, &piece) * 64.0;
                }
            }
            let got = sweep_exposure_integral(range, s, sub, &piece);
            assert!(
                (got - sum).abs() <= 1e-6 * sum.max(1.0) + 4096.0 * 10.0,
                "[{a},{b}) pages {lo}..{hi}: {got} vs {sum}"
            );
        }
    }

    #[test]
    fn sweep_exposure_is_width_over_speed() {
        // Range 100 bytes, window 10, period 100 us: speed 1 byte/us. Over a
        // full period every point is covered for exactly 10 us.
        let range = AddrRange::new(0, 100);
        let s = Sweep {
            width: 10,
            period_us: 100,
        };
        for x in [0, 5, 50, 95, 99] {
            let piece = Piece {
                phase: 0,
                phase_start_us: 0,
                a_us: 0,
                b_us: 100,
            };
            let e = sweep_exposure_us(range, s, x, &piece);
            assert!((e - 10.0).abs() < 1e-9, "x {x}: {e}");
            // Any full period, however shifted, too.
            let piece = Piece {
                phase: 0,
                phase_start_us: 0,
                a_us: 37,
                b_us: 137,
            };
            assert!((sweep_exposure_us(range, s, x, &piece) - 10.0).abs() < 1e-9);
        }
        // At t in [0, 10) the window is [t, t+10): x = 50 is not covered yet;
        // x = 5 is covered from t = 0 to t = 5 (window start passes 5 at t=5... covered while start in (x-10, x]).
        let piece = Piece {
            phase: 0,
            phase_start_us: 0,
            a_us: 0,
            b_us: 10,
        };
        assert!(sweep_exposure_us(range, s, 50, &piece).abs() < 1e-9);
        assert!((sweep_exposure_us(range, s, 5, &piece) - 5.0).abs() < 1e-9);
        // Wrap-around: at t in [95, 100) the window covers [95, 100) and [0, 5).
        let piece = Piece {
            phase: 0,
            phase_start_us: 0,
            a_us: 95,
            b_us: 100,
        };
        assert!((sweep_exposure_us(range, s, 2, &piece) - 5.0).abs() < 1e-9);
    }
}
