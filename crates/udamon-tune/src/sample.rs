//! Where to sample: the DAOS split of 60% global, 40% local samples.
//!
//! - **Global** (the first `round(0.6 n)` samples): the range is cut into
//!   that many equal strata and one value is drawn uniformly at random in
//!   each, in a random order: random, but spread over the whole range
//!   (jittered stratified sampling; plain uniform draws can leave half the
//!   range unexplored with 6 samples).
//! - **Local** (the rest): "near the best so far" is its **bracket**, the
//!   interval between the nearest sampled values on either side of the
//!   best-scoring one (or the range's end where there is none). Each local
//!   sample is drawn uniformly in the middle half of one side of the
//!   bracket: toward the range's end when the best is the outermost sample
//!   on that side (the curve may keep rising there), else the wider side,
//!   and on a tie the side of the better neighbour. Every sample either
//!   becomes the best or a new end of the bracket, so the window shrinks
//!   like a (randomised) golden-section search, and it always contains the
//!   peak of a curve with one peak, wherever the best global sample fell.
//!
//! Values are snapped to the step grid and never repeat (a repeated value
//! is drawn again; then the free grid value nearest the window's middle is
//! taken). Everything comes from one generator seeded by `--seed`: the same
//! seed, the same values given the same scores.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

use crate::knob::Domain;

/// Which part of the plan a sample belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Global,
    Local,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Global => "global",
            Stage::Local => "local",
        }
    }
}

/// The 60/40 split of `n` samples: `(global, local)`, at least one global.
pub fn split(n: usize) -> (usize, usize) {
    if n == 0 {
        return (0, 0);
    }
    let global = ((n * 6 + 5) / 10).clamp(1, n);
    (global, n - global)
}

/// Draws the sample values one at a time.
pub struct Sampler {
    domain: Domain,
    grid: Vec<f64>,
    rng: Pcg64Mcg,
    n_global: usize,
    n_local: usize,
    order: Vec<usize>,
    taken: Vec<f64>,
}

impl Sampler {
    /// A plan of `n` samples over `domain` (at most one per grid value).
    pub fn new(domain: Domain, n: usize, seed: u64) -> Sampler {
        let grid = domain.grid();
        let n = n.min(grid.len());
        let (n_global, n_local) = split(n);
        // A distinct stream from the workload's seed of the same value.
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x7475_6e65_7361_6d70);
        let mut order: Vec<usize> = (0..n_global).collect();
        for i in (1..order.len()).rev() {
            let j = rng.random_range(0..=i);
            order.swap(i, j);
        }
        Sampler {
            domain,
            grid,
            rng,
            n_global,
            n_local,
            order,
            taken: Vec::new(),
        }
    }

    /// Samples in the plan: `(global, local)`.
    pub fn plan(&self) -> (usize, usize) {
        (self.n_global, self.n_local)
    }

    /// The side of the bracket around the best of `scores` to sample next:
    /// `(start, end)`, before taking its middle half.
    pub fn local_window(&self, scores: &[(f64, f64)]) -> (f64, f64) {
        let (lo, hi) = (self.domain.lo, self.domain.hi);
        let Some((b, _)) = scores
            .iter()
            .copied()
            .reduce(|a, c| if c.1 > a.1 { c } else { a })
        else {
            return (lo, hi);
        };
        let left = scores
            .iter()
            .filter(|p| p.0 < b)
            .copied()
            .reduce(|a, c| if c.0 > a.0 { c } else { a });
        let right =
            scores
                .iter()
                .filter(|p| p.0 > b)
                .copied()
                .reduce(|a, c| if c.0 < a.0 { c } else { a });
        let (l, r) = (left.map_or(lo, |p| p.0), right.map_or(hi, |p| p.0));
        let go_left = match (left, right) {
            (None, _) if b > lo => true,
            (_, None) if b < hi => false,
            _ => {
                let (wl, wr) = (b - l, r - b);
                if wl != wr {
                    wl > wr
                } else {
                    let sl = left.map_or(f64::NEG_INFINITY, |p| p.1);
                    let sr = right.map_or(f64::NEG_INFINITY, |p| p.1);
                    sl >= sr
                }
            }
        };
        if go_left {
            (l, b)
        } else {
            (b, r)
        }
    }

    /// The next value to try, given the `(value, score)` pairs measured so
    /// far; `None` when the plan is done.
    pub fn next(&mut self, scores: &[(f64, f64)]) -> Option<(f64, Stage)> {
        let i = self.taken.len();
        if i < self.n_global {
            let s = self.order[i];
            let w = self.domain.span() / self.n_global as f64;
            let (a, b) = (
                self.domain.lo + s as f64 * w,
                self.domain.lo + (s + 1) as f64 * w,
            );
            let x = self.draw(a, b, 0.5 * (a + b));
            self.taken.push(x);
            return Some((x, Stage::Global));
        }
        if i < self.n_global + self.n_local {
            let (a, b) = self.local_window(scores);
            let len = b - a;
            let x = self.draw(a + 0.25 * len, a + 0.75 * len, 0.5 * (a + b));
            self.taken.push(x);
            return Some((x, Stage::Local));
        }
        None
    }

    /// A free grid value drawn uniformly in `[a, b]`, or else the free grid
    /// value nearest to `centre`.
    fn draw(&mut self, a: f64, b: f64, centre: f64) -> f64 {
        let (a, b) = (a.max(self.domain.lo), b.min(self.domain.hi));
        for _ in 0..16 {
            let u: f64 = self.rng.random();
            let x = self.domain.snap(a + u * (b - a));
            if !self.taken.contains(&x) {
                return x;
            }
        }
        self.grid
            .iter()
            .copied()
            .filter(|g| !self.taken.contains(g))
            .min_by(|p, q| (p - centre).abs().total_cmp(&(q - centre).abs()))
            .unwrap_or(centre)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seed: u64, n: usize, score: impl Fn(f64) -> f64) -> Vec<(f64, Stage)> {
        let d = Domain::new(0.0, 60e6, 1e6).unwrap();
        let mut s = Sampler::new(d, n, seed);
        let mut seen = Vec::new();
        let mut out = Vec::new();
        while let Some((x, st)) = s.next(&seen) {
            seen.push((x, score(x)));
            out.push((x, st));
        }
        out
    }

    #[test]
    fn split_is_60_40() {
        assert_eq!(split(10), (6, 4));
        assert_eq!(split(5), (3, 2));
        assert_eq!(split(20), (12, 8));
        assert_eq!(split(1), (1, 0));
        assert_eq!(split(2), (1, 1));
        assert_eq!(split(0), (0, 0));
        let v = run(7, 10, |x| -(x - 17e6).abs());
        let stages: Vec<Stage> = v.iter().map(|p| p.1).collect();
        assert_eq!(&stages[..6], &[Stage::Global; 6]);
        assert_eq!(&stages[6..], &[Stage::Local; 4]);
    }

    #[test]
    fn global_samples_cover_every_stratum_and_local_ones_close_in() {
        let v = run(3, 10, |x| -(x - 17e6).abs());
        let mut strata: Vec<usize> = v[..6]
            .iter()
            .map(|(x, _)| ((x / 10e6) as usize).min(5))
            .collect();
        strata.sort();
        strata.dedup();
        assert!(strata.len() >= 5, "{v:?}"); // snapping may move one across a boundary
                                             // every local sample lies strictly inside the bracket of the best so far
        for k in 6..10 {
            let seen: Vec<(f64, f64)> = v[..k].iter().map(|p| (p.0, -(p.0 - 17e6).abs())).collect();
            let best = seen
                .iter()
                .copied()
                .reduce(|a, c| if c.1 > a.1 { c } else { a })
                .unwrap()
                .0;
            let l = seen
                .iter()
                .map(|p| p.0)
                .filter(|&x| x < best)
                .fold(0.0, f64::max);
            let r = seen
                .iter()
                .map(|p| p.0)
                .filter(|&x| x > best)
                .fold(60e6, f64::min);
            assert!(
                v[k].0 > l && v[k].0 < r,
                "{k}: {:?} not in ({l}, {r}) {v:?}",
                v[k]
            );
        }
        // the last local samples close in on the peak at 17 s
        assert!(v[6..].iter().any(|p| (p.0 - 17e6).abs() <= 2e6), "{v:?}");
        // all distinct, all on the grid
        let mut xs: Vec<f64> = v.iter().map(|p| p.0).collect();
        assert!(xs
            .iter()
            .all(|x| x % 1e6 == 0.0 && (0.0..=60e6).contains(x)));
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        assert_eq!(xs.len(), 10);
    }

    #[test]
    fn local_search_follows_a_rising_end() {
        // best at the lowest sample: the next local sample goes below it
        let d = Domain::new(0.0, 60e6, 1e6).unwrap();
        let s = Sampler::new(d, 10, 1);
        let seen = [(8e6, 3.0), (20e6, 2.0), (35e6, 1.0)];
        assert_eq!(s.local_window(&seen), (0.0, 8e6));
        // inside: the wider side
        let seen = [(8e6, 1.0), (20e6, 3.0), (35e6, 2.0)];
        assert_eq!(s.local_window(&seen), (20e6, 35e6));
        // equal sides: toward the better neighbour
        let seen = [(10e6, 1.0), (20e6, 3.0), (30e6, 2.0)];
        assert_eq!(s.local_window(&seen), (20e6, 30e6));
    }

    #[test]
    fn same_seed_same_samples() {
        let f = |x: f64| (x / 1e7).sin();
        assert_eq!(run(42, 10, f), run(42, 10, f));
        assert_ne!(run(42, 10, f), run(43, 10, f));
    }

    #[test]
    fn small_grids_are_exhausted_not_repeated() {
        let d = Domain::new(0.0, 4.0, 1.0).unwrap();
        let mut s = Sampler::new(d, 10, 1);
        assert_eq!(s.plan(), (3, 2));
        let mut seen: Vec<(f64, f64)> = Vec::new();
        while let Some((x, _)) = s.next(&seen) {
            seen.push((x, 0.0));
        }
        let mut xs: Vec<f64> = seen.iter().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        assert_eq!(xs, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    }
}
