//! A synthetic, DAMON-like snapshot stream for tests and size measurements.
//!
//! A small re-enactment of the kernel's adaptive regions on a vaddr-like
//! space of about 1 GiB (heap, mmap area, stack): every aggregation window
//! samples one random page per region per sampling interval against a ground
//! truth (a background of idle, lukewarm and hot patches that slowly changes,
//! plus moving hot areas: an allocation frontier, a hash table that jumps
//! every two minutes, a sequential scan, the stack top), merges adjacent
//! regions whose counts differ by at most the threshold (aging them as the
//! kernel does), reports, then splits every region at a random tenth
//! (10%..90%, as the kernel and udamon-core do) while there are at most
//! `max_nr_regions / 2`. Independent of udamon-core's engine on purpose: the
//! format must not depend on it.
#![allow(dead_code)]

use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};

const PAGE: u64 = 4096;

/// splitmix64: small, fast, good enough for synthetic data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy)]
struct Region {
    start: u64,
    end: u64,
    nr: u32,
    last_nr: u32,
    age: u32,
}

/// A hot area of the ground truth: pages in it are accessed in a sampling
/// interval with probability `p`; it moves by `speed` bytes per window
/// within `[lo, hi)`, bouncing at the ends.
struct Hot {
    start: u64,
    len: u64,
    p: f64,
    speed: i64,
    lo: u64,
    hi: u64,
}

pub struct Params {
    pub min_nr_regions: usize,
    pub max_nr_regions: usize,
    pub sample_us: u64,
    pub aggr_us: u64,
    pub seed: u64,
    /// Share of the background's 1 MiB chunks that are accessed at all
    /// (two thirds of them lukewarm, one third hot).
    pub active: f64,
    /// Split at any page between 10% and 90% rather than at the kernel's
    /// tenths (defeats the record's split-point prediction).
    pub any_split_point: bool,
    /// Granularity of the background: smaller chunks make more regions.
    pub chunk: u64,
}

impl Params {
    /// A busy workload: 40% of memory in use, with DAMON's sampling noise
    /// on all of it (a pessimistic case for compression).
    pub fn busy() -> Self {
        Self {
            active: 0.4,
            ..Self::default()
        }
    }
}

impl Default for Params {
    fn default() -> Self {
        Self {
            min_nr_regions: 10,
            max_nr_regions: 1000,
            sample_us: 5_000,
            aggr_us: 100_000,
            seed: 42,
            active: 0.1,
            any_split_point: false,
            chunk: 1 << 20,
        }
    }
}

pub struct Synth {
    p: Params,
    /// Per chunk of each range, the background access probability.
    texture: Vec<Vec<f64>>,
    rng: Rng,
    ranges: Vec<(u64, u64)>,
    regions: Vec<Region>,
    hot: Vec<Hot>,
    t_us: u64,
    last_nr_regions: usize,
    windows: u64,
}

impl Synth {
    pub fn new(p: Params) -> Self {
        let heap = 0x5555_5555_0000u64;
        let mmap = 0x7f00_0000_0000u64;
        let stack = 0x7ffd_0000_0000u64;
        let ranges = vec![
            (heap, heap + (256 << 20)),
            (mmap, mmap + (760 << 20)),
            (stack, stack + (8 << 20)),
        ];
        let hot = vec![
            // The heap's allocation frontier, slowly growing.
            Hot {
                start: heap + (16 << 20),
                len: 24 << 20,
                p: 0.9,
                speed: 64 << 10,
                lo: heap,
                hi: heap + (256 << 20),
            },
            // A hot hash table in the mmap area.
            Hot {
                start: mmap + (100 << 20),
                len: 48 << 20,
                p: 0.5,
                speed: 0,
                lo: mmap,
                hi: mmap + (760 << 20),
            },
            // A sequential scan over a 512 MiB file mapping.
            Hot {
                start: mmap + (200 << 20),
                len: 8 << 20,
                p: 0.95,
                speed: 1 << 20,
                lo: mmap + (200 << 20),
                hi: mmap + (712 << 20),
            },
            // A lukewarm area.
            Hot {
                start: mmap + (720 << 20),
                len: 32 << 20,
                p: 0.05,
                speed: 0,
                lo: mmap,
                hi: mmap + (760 << 20),
            },
            // The top of the stack.
            Hot {
                start: stack + (8 << 20) - (256 << 10),
                len: 256 << 10,
                p: 1.0,
                speed: 0,
                lo: stack,
                hi: stack + (8 << 20),
            },
        ];
        // Like vaddr's init: the ranges split evenly into min_nr_regions.
        let total: u64 = ranges.iter().map(|r| r.1 - r.0).sum();
        let mut regions = Vec::new();
        for &(s, e) in &ranges {
            let n = ((e - s) * p.min_nr_regions as u64).div_ceil(total).max(1);
            let sz = ((e - s) / n / PAGE).max(1) * PAGE;
            let mut a = s;
            while a < e {
                let b = if e - a < 2 * sz { e } else { a + sz };
                regions.push(Region {
                    start: a,
                    end: b,
                    nr: 0,
                    last_nr: 0,
                    age: 0,
                });
                a = b;
            }
        }
        let mut rng = Rng::new(p.seed);
        let texture = ranges
            .iter()
            .map(|r| {
                (0..(r.1 - r.0).div_ceil(p.chunk))
                    .map(|_| Self::chunk_prob(&mut rng, p.active))
                    .collect()
            })
            .collect();
        Self {
            p,
            rng,
            texture,
            ranges,
            regions,
            hot,
            t_us: 0,
            last_nr_regions: 0,
            windows: 0,
        }
    }

    /// A background chunk is idle, lukewarm or hot.
    fn chunk_prob(rng: &mut Rng, active: f64) -> f64 {
        let x = rng.f64();
        if x >= active {
            0.0
        } else if x < active * 2.0 / 3.0 {
            0.01 + 0.14 * rng.f64()
        } else {
            0.3 + 0.7 * rng.f64()
        }
    }

    fn access_prob(&self, addr: u64) -> f64 {
        let hot = self
            .hot
            .iter()
            .find(|h| addr >= h.start && addr < h.start + h.len)
            .map_or(0.0, |h| h.p);
        let bg = self
            .ranges
            .iter()
            .position(|r| addr >= r.0 && addr < r.1)
            .map_or(0.0, |i| {
                self.texture[i][((addr - self.ranges[i].0) / self.p.chunk) as usize]
            });
        hot.max(bg)
    }

    fn max_nr_accesses(&self) -> u32 {
        (self.p.aggr_us / self.p.sample_us) as u32
    }

    fn sample(&mut self) {
        let samples = self.max_nr_accesses();
        for i in 0..self.regions.len() {
            let r = self.regions[i];
            let pages = (r.end - r.start) / PAGE;
            let mut nr = 0;
            for _ in 0..samples {
                let addr = r.start + self.rng.below(pages) * PAGE;
                if self.rng.f64() < self.access_prob(addr) {
                    nr += 1;
                }
            }
            self.regions[i].nr = nr;
        }
    }

    /// The kernel's `damon_merge_regions_of`.
    fn merge_once(&mut self, thres: u32, sz_limit: u64) {
        let mut out: Vec<Region> = Vec::with_capacity(self.regions.len());
        for mut r in self.regions.drain(..) {
            if r.nr.abs_diff(r.last_nr) > thres || (r.nr == 0) != (r.last_nr == 0) {
                r.age = 0;
            } else {
                r.age += 1;
            }
            if let Some(l) = out.last_mut() {
                if l.end == r.start
                    && l.nr.abs_diff(r.nr) <= thres
                    && (l.end - l.start) + (r.end - r.start) <= sz_limit
                {
                    let (sl, sr) = (l.end - l.start, r.end - r.start);
                    l.nr = ((u64::from(l.nr) * sl + u64::from(r.nr) * sr) / (sl + sr)) as u32;
                    l.age = ((u64::from(l.age) * sl + u64::from(r.age) * sr) / (sl + sr)) as u32;
                    l.end = r.end;
                    continue;
                }
            }
            out.push(r);
        }
        self.regions = out;
    }

    fn merge(&mut self) {
        let total: u64 = self.ranges.iter().map(|r| r.1 - r.0).sum();
        let sz_limit = (total / self.p.min_nr_regions as u64).max(PAGE);
        let max_thres = self.max_nr_accesses() / 10 * 9;
        let mut thres = (self.max_nr_accesses() / 10).max(1);
        loop {
            // As in the kernel, a repeated pass ages the regions again.
            self.merge_once(thres, sz_limit);
            if self.regions.len() <= self.p.max_nr_regions || thres / 2 >= max_thres {
                break;
            }
            thres = (thres * 2).max(1);
        }
    }

    fn split(&mut self) {
        let n = self.regions.len();
        if n > self.p.max_nr_regions / 2 {
            self.last_nr_regions = n;
            return;
        }
        let nr_subs = if self.last_nr_regions == n && n < self.p.max_nr_regions / 3 {
            3
        } else {
            2
        };
        let mut out = Vec::with_capacity(n * nr_subs);
        for r in std::mem::take(&mut self.regions) {
            let mut cur = r;
            let mut tail = Vec::new();
            for _ in 0..nr_subs - 1 {
                let sz = cur.end - cur.start;
                if sz <= 2 * PAGE {
                    break;
                }
                // As the kernel: at 10%, 20%, ... or 90%, page-aligned.
                let sub = if self.p.any_split_point {
                    ((sz as f64 * (0.1 + 0.8 * self.rng.f64())) as u64) / PAGE * PAGE
                } else {
                    (1 + self.rng.below(9)) * sz / 10 / PAGE * PAGE
                };
                if sub == 0 || sub >= sz {
                    continue;
                }
                tail.push(Region {
                    start: cur.start + sub,
                    ..cur
                });
                cur.end = cur.start + sub;
            }
            out.push(cur);
            out.extend(tail.into_iter().rev());
        }
        self.regions = out;
        self.last_nr_regions = n;
    }

    fn move_hot(&mut self) {
        self.windows += 1;
        for i in 0..self.hot.len() {
            let h = &mut self.hot[i];
            let next = h.start as i64 + h.speed;
            if next < h.lo as i64 || next as u64 + h.len > h.hi {
                h.speed = -h.speed;
            } else {
                h.start = next as u64;
            }
        }
        // The background changes slowly: one chunk every other window.
        if self.windows.is_multiple_of(2) {
            let i = self.rng.below(self.texture.len() as u64) as usize;
            let j = self.rng.below(self.texture[i].len() as u64) as usize;
            self.texture[i][j] = Self::chunk_prob(&mut self.rng, self.p.active);
        }
        // Every two minutes, the hash table moves elsewhere (a phase change).
        if self.windows.is_multiple_of(1200) {
            let span = (self.hot[1].hi - self.hot[1].lo - self.hot[1].len) / PAGE;
            self.hot[1].start = self.hot[1].lo + self.rng.below(span) * PAGE;
        }
    }
}

impl Iterator for Synth {
    type Item = Snapshot;

    fn next(&mut self) -> Option<Snapshot> {
        self.sample();
        self.merge();
        let s = Snapshot {
            start_us: self.t_us,
            end_us: self.t_us + self.p.aggr_us,
            sample_us: self.p.sample_us,
            aggr_us: self.p.aggr_us,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions: self
                    .regions
                    .iter()
                    .map(|r| RegionSnapshot {
                        start: r.start,
                        end: r.end,
                        nr_accesses: r.nr,
                        age: r.age,
                    })
                    .collect(),
            }],
        };
        self.t_us += self.p.aggr_us;
        for r in &mut self.regions {
            r.last_nr = r.nr;
            r.nr = 0;
        }
        self.split();
        self.move_hot();
        Some(s)
    }
}
