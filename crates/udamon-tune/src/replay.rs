//! What-if replay: a record's snapshots turned into a simulator workload,
//! so candidate schemes can be run on what was observed instead of on the
//! workload itself.
//!
//! For a region with `nr_accesses` out of `max` (= aggregation / sampling
//! interval) in a window, `p = nr_accesses / max` estimates the chance that
//! one of its pages is accessed within one sampling interval. The simulator
//! accesses pages as a Poisson process, so the rate that gives that chance
//! is `r = -ln(1 - p) / sampling interval` (with `p` capped at
//! `1 - 1 / (2 max)`: a region seen accessed at every sample gets a high but
//! finite rate).
//!
//! To keep the workload small and fast:
//!
//! - addresses are quantised to **cells**: the monitored memory is cut into
//!   about [`ReplayOptions::cells`] equal cells (a power of two bytes, at
//!   least a page); a cell's rate is the overlap-weighted mean of the
//!   regions over it;
//! - consecutive snapshots are **merged into one phase** while they agree
//!   with the phase's mean within sampling noise (a cell differs when its
//!   count is more than 3 standard deviations + 1.5 off the binomial
//!   expectation; a snapshot starts a new phase when more than
//!   [`ReplayOptions::change_share`] of the monitored bytes differ, or the
//!   phase is [`ReplayOptions::max_phase_us`] long); a phase's rate per cell
//!   is the time-weighted mean of the snapshots' rates;
//! - within a phase, adjacent cells whose rates are within 10% of each other
//!   become one access range.
//!
//! The workload is O(cells + regions) per snapshot to build and at most
//! O(cells) per phase in size. The layout (objects, which start resident,
//! which are file-backed) and the machine come from the record's spec when
//! it is a simulator record; otherwise the monitored ranges become
//! resident anonymous objects on the default machine.

use std::path::Path;

use serde::Serialize;
use udamon_core::{AddrRange, Attrs, RegionSnapshot, Snapshot};
use udamon_record::Reader;
use udamon_sim::{Access, Object, Phase, Workload};

use crate::error::{Error, Result};

/// How a record becomes a workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplayOptions {
    /// About how many cells the monitored memory is cut into.
    pub cells: u64,
    /// Share of the monitored bytes that must change to start a new phase.
    pub change_share: f64,
    /// Longest phase, in microseconds.
    pub max_phase_us: u64,
    /// Which target of the record to replay.
    pub target: u32,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            cells: 2048,
            change_share: 0.02,
            max_phase_us: 10_000_000,
            target: 0,
        }
    }
}

/// Sizes of a replayed workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ReplayStats {
    pub snapshots: usize,
    pub phases: usize,
    /// Access ranges over all phases.
    pub accesses: usize,
    pub cells: usize,
    pub cell_bytes: u64,
    pub duration_us: u64,
}

/// A record turned into a workload.
#[derive(Clone, Debug)]
pub struct Replay {
    pub workload: Workload,
    /// The record's monitoring attributes (replays monitor with them).
    pub attrs: Attrs,
    /// The simulator seed of the record, for simulator records.
    pub seed: Option<u64>,
    /// The spec of a simulator record: the real workload to confirm on.
    pub spec_toml: Option<String>,
    pub stats: ReplayStats,
}

/// Reads a record and builds its replay workload.
pub fn from_record_file(path: &Path, opts: &ReplayOptions) -> Result<Replay> {
    let r = Reader::open(path)
        .map_err(|e| Error::Record(format!("cannot read record {}: {e}", path.display())))?;
    from_record(&r, &path.display().to_string(), opts)
}

/// Builds the replay workload of an open record; `origin` names it.
pub fn from_record(r: &Reader, origin: &str, opts: &ReplayOptions) -> Result<Replay> {
    let h = r.header();
    let snaps = r
        .snapshots()
        .map_err(|e| Error::Record(format!("cannot read record {origin}: {e}")))?;
    let (layout, seed, spec_toml) = match &h.sim {
        Some(sim) => {
            let w = Workload::from_toml(&sim.spec_toml, &format!("{origin} (its spec)"))
                .map_err(|e| Error::Record(e.to_string()))?;
            (Some(w), Some(sim.seed), Some(sim.spec_toml.clone()))
        }
        None => (None, None, None),
    };
    let name = format!("replay of {origin}");
    let (workload, stats) = from_snapshots(&snaps, layout.as_ref(), &name, opts)?;
    Ok(Replay {
        workload,
        attrs: h.attrs,
        seed,
        spec_toml,
        stats,
    })
}

struct Cells {
    start: Vec<u64>,
    end: Vec<u64>,
    /// Index of the object each cell is in.
    obj: Vec<usize>,
}

fn next_pow2(v: u64) -> u64 {
    v.max(1).checked_next_power_of_two().unwrap_or(1 << 63)
}

/// Objects covering the union of the target's regions.
fn objects_from_regions(snaps: &[Snapshot], target: u32) -> Vec<Object> {
    let mut ranges: Vec<(u64, u64)> = snaps
        .iter()
        .flat_map(|s| s.targets.iter().filter(|t| t.target_idx == target))
        .flat_map(|t| t.regions.iter().map(|r| (r.start, r.end)))
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
        .into_iter()
        .enumerate()
        .map(|(i, (s, e))| Object {
            name: format!("m{i}"),
            range: AddrRange::new(s, e),
            populated: true,
            file: false,
        })
        .collect()
}

/// Builds the workload from snapshots. `layout` (a spec's workload) gives
/// the objects and the machine; without it the monitored ranges do.
pub fn from_snapshots(
    snaps: &[Snapshot],
    layout: Option<&Workload>,
    name: &str,
    opts: &ReplayOptions,
) -> Result<(Workload, ReplayStats)> {
    let target = opts.target;
    check_replayable(snaps, target)?;
    let (objects, machine, page_size) = match layout {
        Some(w) => (w.objects.clone(), w.machine.clone(), w.page_size),
        None => (
            objects_from_regions(snaps, target),
            udamon_sim::MachineSpec::default(),
            4096,
        ),
    };
    let mapped: u64 = objects.iter().map(|o| o.range.sz()).sum();
    let q = next_pow2(mapped.div_ceil(opts.cells.max(1))).max(page_size);
    let cells = Cells::new(&objects, q);
    let n = cells.start.len();
    let mut stats = ReplayStats {
        snapshots: snaps.len(),
        cells: n,
        cell_bytes: q,
        ..ReplayStats::default()
    };
    let phases = phases_of(
        snaps,
        target,
        &cells,
        opts,
        opts.change_share * mapped as f64,
    );
    stats.phases = phases.len();
    stats.accesses = phases.iter().map(|p| p.accesses.len()).sum();
    stats.duration_us = phases.iter().map(|p| p.duration_us).sum();
    let w = Workload {
        name: name.to_string(),
        duration_us: stats.duration_us,
        seed: None,
        page_size,
        objects,
        phases,
        machine,
    };
    Ok((w, stats))
}

/// Refuses a record with no snapshot, or none of `target`.
fn check_replayable(snaps: &[Snapshot], target: u32) -> Result<()> {
    if snaps.is_empty() {
        return Err(Error::Record(
            "the record has no snapshot to replay (expected a record with at least one \
             aggregation window)"
                .into(),
        ));
    }
    if !snaps
        .iter()
        .any(|s| s.targets.iter().any(|t| t.target_idx == target))
    {
        return Err(Error::Record(format!(
            "the record has no target {target} (expected a target index it monitored)"
        )));
    }
    Ok(())
}

impl Cells {
    /// The objects cut into cells of `q` bytes.
    fn new(objects: &[Object], q: u64) -> Cells {
        let mut cells = Cells {
            start: Vec::new(),
            end: Vec::new(),
            obj: Vec::new(),
        };
        for (i, o) in objects.iter().enumerate() {
            let mut a = o.range.start;
            while a < o.range.end {
                // Cells are aligned to q from the object's start; the last ends with it.
                let b = (a + q).min(o.range.end);
                cells.start.push(a);
                cells.end.push(b);
                cells.obj.push(i);
                a = b;
            }
        }
        cells
    }
}

/// The snapshots cut into phases: each window on the cells, a phase closed
/// at an abrupt change, at its longest, or where a sustained change began.
/// `share_bytes` is how many bytes must differ to be a change.
fn phases_of(
    snaps: &[Snapshot],
    target: u32,
    cells: &Cells,
    opts: &ReplayOptions,
    share_bytes: f64,
) -> Vec<Phase> {
    let n = cells.start.len();
    let mut phases: Vec<Phase> = Vec::new();
    let mut open = Open::new(n);
    let mut prev_end = 0u64;
    let mut prev_regions: Option<&[RegionSnapshot]> = None;
    for s in snaps {
        let dt_us = s.end_us.saturating_sub(prev_end);
        prev_end = prev_end.max(s.end_us);
        if dt_us == 0 {
            continue;
        }
        let regions = s
            .targets
            .iter()
            .find(|t| t.target_idx == target)
            .map(|t| &t.regions[..]);
        let w = window_of(s, dt_us, regions, prev_regions, cells);
        prev_regions = regions;
        if !open.wins.is_empty() {
            // An abrupt change: this window against the whole phase.
            let abrupt = open.changed(cells, open.wins.len(), &w.p, 1, 1.5) > share_bytes;
            if abrupt || open.us + dt_us > opts.max_phase_us {
                phases.push(open.close(cells, open.wins.len()));
            }
        }
        open.push(w);
        // A sustained change: the last RECENT windows against the rest.
        let len = open.wins.len();
        if len >= RECENT + 2 {
            let mut recent = vec![0.0; n];
            for w in &open.wins[len - RECENT..] {
                for (a, b) in recent.iter_mut().zip(&w.p) {
                    *a += b;
                }
            }
            if open.changed(cells, len - RECENT, &recent, RECENT, 0.75) > share_bytes {
                let k = open.split_point(cells, len - RECENT);
                phases.push(open.close(cells, k));
            }
        }
    }
    if !open.wins.is_empty() {
        phases.push(open.close(cells, open.wins.len()));
    }
    phases
}

/// One snapshot `s` (of `dt_us`, its target's `regions`) on the cells: a
/// region's chance and rate spread over the cells by overlap; an idle
/// region's hidden accesses read from the previous window's `prev` regions.
fn window_of(
    s: &Snapshot,
    dt_us: u64,
    regions: Option<&[RegionSnapshot]>,
    prev: Option<&[RegionSnapshot]>,
    cells: &Cells,
) -> Window {
    let n = cells.start.len();
    let max = f64::from(s.max_nr_accesses().max(1));
    let cap = 1.0 - 0.5 / max;
    let sample_s = s.sample_us.max(1) as f64 / 1e6;
    let mut w = Window {
        dt_us,
        max,
        p: vec![0.0; n],
        rate: vec![0.0; n],
    };
    if let Some(regions) = regions {
        // Two pointers over sorted cells and sorted regions.
        let mut c = 0;
        let mut j = 0;
        for r in regions {
            let pr = if r.nr_accesses == 0 {
                prev.map_or(0.0, |pv| hidden_share(r, pv, &mut j) / max)
            } else {
                (f64::from(r.nr_accesses) / max).min(cap)
            };
            let rr = -(1.0 - pr).ln() / sample_s;
            while c < n && cells.end[c] <= r.start {
                c += 1;
            }
            let mut d = c;
            while d < n && cells.start[d] < r.end {
                let ov = cells.end[d].min(r.end) - cells.start[d].max(r.start);
                let f = ov as f64 / (cells.end[d] - cells.start[d]) as f64;
                w.rate[d] += f * rr;
                w.p[d] += f * pr;
                d += 1;
            }
        }
    }
    w
}

/// Windows compared as "recent" when looking for a sustained change.
const RECENT: usize = 3;

/// One snapshot on the cells: its length, its maximum count, and per cell
/// the chance of an access per sample and the matching Poisson rate.
struct Window {
    dt_us: u64,
    max: f64,
    p: Vec<f64>,
    rate: Vec<f64>,
}

/// The phase being built: its windows and their per-cell sum of `p`.
struct Open {
    wins: Vec<Window>,
    sum_p: Vec<f64>,
    us: u64,
}

impl Open {
    fn new(n: usize) -> Open {
        Open {
            wins: Vec::new(),
            sum_p: vec![0.0; n],
            us: 0,
        }
    }

    fn push(&mut self, w: Window) {
        for (a, b) in self.sum_p.iter_mut().zip(&w.p) {
            *a += b;
        }
        self.us += w.dt_us;
        self.wins.push(w);
    }

    /// Bytes whose mean count over `sum_b` (a sum over `nb` windows) is
    /// more than 3 standard deviations (binomial, pooled) plus `slack` away
    /// from the mean over the first `na` windows of the phase.
    fn changed(&self, cells: &Cells, na: usize, sum_b: &[f64], nb: usize, slack: f64) -> f64 {
        let max = self.wins.last().map_or(1.0, |w| w.max);
        let (fa, fb) = (na as f64, nb as f64);
        // The first `na` windows' sums: the phase's, less any later windows.
        let mut bytes = 0.0;
        for (c, &sb) in sum_b.iter().enumerate() {
            let mut sa = self.sum_p[c];
            for w in &self.wins[na..] {
                sa -= w.p[c];
            }
            let (pa, pb) = (sa.max(0.0) / fa, sb / fb);
            let pooled = (sa.max(0.0) + sb) / (fa + fb);
            let sd = (max * pooled * (1.0 - pooled).max(0.0) * (1.0 / fa + 1.0 / fb)).sqrt();
            if ((pb - pa) * max).abs() > 3.0 * sd + slack {
                bytes += (cells.end[c] - cells.start[c]) as f64;
            }
        }
        bytes
    }

    /// Where a sustained change starts, from `k` on: each later window that
    /// is nearer (byte-weighted) to the mean of the windows before it than
    /// to the mean of the windows after it still belongs to the old phase.
    fn split_point(&self, cells: &Cells, mut k: usize) -> usize {
        let n = self.sum_p.len();
        let len = self.wins.len();
        while k + 1 < len {
            let mut before = vec![0.0; n];
            for w in &self.wins[..k] {
                for (a, b) in before.iter_mut().zip(&w.p) {
                    *a += b;
                }
            }
            let mut after = vec![0.0; n];
            for w in &self.wins[k + 1..] {
                for (a, b) in after.iter_mut().zip(&w.p) {
                    *a += b;
                }
            }
            let (fb, fa) = (k as f64, (len - k - 1) as f64);
            let (mut d_old, mut d_new) = (0.0, 0.0);
            for c in 0..n {
                let sz = (cells.end[c] - cells.start[c]) as f64;
                d_old += sz * (self.wins[k].p[c] - before[c] / fb).abs();
                d_new += sz * (self.wins[k].p[c] - after[c] / fa).abs();
            }
            if d_old < d_new {
                k += 1;
            } else {
                break;
            }
        }
        k
    }

    /// Ends a phase made of the first `k` windows; the rest stay open.
    fn close(&mut self, cells: &Cells, k: usize) -> Phase {
        let rest = self.wins.split_off(k);
        let done = std::mem::take(&mut self.wins);
        let n = self.sum_p.len();
        let mut acc_rate = vec![0.0; n];
        let mut us = 0;
        for w in &done {
            let dt_s = w.dt_us as f64 / 1e6;
            for (a, r) in acc_rate.iter_mut().zip(&w.rate) {
                *a += r * dt_s;
            }
            us += w.dt_us;
        }
        *self = Open::new(n);
        for w in rest {
            self.push(w);
        }
        Phase {
            duration_us: us,
            accesses: rle(cells, &acc_rate, us as f64 / 1e6),
        }
    }
}

/// The share of an idle region (`nr_accesses` 0) that was accessed in the
/// window all the same, read from its age. A sub-region whose sampled page
/// was touched once gets a count of 1 and its age reset, but merging it back
/// into its idle neighbours averages the count down to 0 while the age
/// average keeps the reset: with `a` the size-weighted `age + 1` of the
/// previous window's regions over the same range (all idle), an age of `a -
/// d` means a share `d / a` was reset. Drops of 2 windows or less are
/// integer truncation in the averages, not accesses. 0 when the range was
/// not idle (or not monitored) in the previous window.
fn hidden_share(r: &RegionSnapshot, prev: &[RegionSnapshot], j: &mut usize) -> f64 {
    while *j < prev.len() && prev[*j].end <= r.start {
        *j += 1;
    }
    let (mut covered, mut acc) = (0u64, 0.0f64);
    for q in prev[*j..].iter().take_while(|q| q.start < r.end) {
        if q.nr_accesses > 0 {
            return 0.0;
        }
        let ov = q.end.min(r.end) - q.start.max(r.start);
        covered += ov;
        acc += ov as f64 * (f64::from(q.age) + 1.0);
    }
    if covered < r.sz() || r.sz() == 0 {
        return 0.0;
    }
    let expected = acc / r.sz() as f64;
    let drop = expected - f64::from(r.age);
    if drop > 2.0 {
        (drop / expected).min(1.0)
    } else {
        0.0
    }
}

/// Access ranges of one phase: runs of adjacent cells (same object) whose
/// mean rates are within 10% of the run's first; cells never accessed are
/// left out.
fn rle(cells: &Cells, acc_rate: &[f64], secs: f64) -> Vec<Access> {
    let mut out = Vec::new();
    let n = cells.start.len();
    let mut i = 0;
    while i < n {
        let r0 = acc_rate[i] / secs;
        let mut j = i + 1;
        let mut weighted = r0 * (cells.end[i] - cells.start[i]) as f64;
        while j < n && cells.obj[j] == cells.obj[i] && cells.start[j] == cells.end[j - 1] {
            let r = acc_rate[j] / secs;
            let close = if r0 == 0.0 || r == 0.0 {
                r0 == r
            } else {
                (r - r0).abs() <= 0.1 * r.max(r0)
            };
            if !close {
                break;
            }
            weighted += r * (cells.end[j] - cells.start[j]) as f64;
            j += 1;
        }
        let range = AddrRange::new(cells.start[i], cells.end[j - 1]);
        let mean = weighted / range.sz() as f64;
        if mean > 0.0 {
            out.push(Access {
                range,
                rate: mean,
                sweep: None,
            });
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_core::TargetSnapshot;

    fn snap(i: u64, regions: &[(u64, u64, u32)]) -> Snapshot {
        Snapshot {
            start_us: i * 100_000,
            end_us: (i + 1) * 100_000,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions: regions
                    .iter()
                    .map(|&(start, end, nr_accesses)| RegionSnapshot {
                        start,
                        end,
                        nr_accesses,
                        age: 0,
                    })
                    .collect(),
            }],
        }
    }

    const M: u64 = 1 << 20;

    #[test]
    fn rates_phases_and_cells() {
        // 64 MiB: the first 16 MiB at 10 of 20 samples for 2 s, then idle for 3 s.
        let mut snaps = Vec::new();
        for i in 0..20 {
            snaps.push(snap(i, &[(0, 16 * M, 10), (16 * M, 64 * M, 0)]));
        }
        for i in 20..50 {
            snaps.push(snap(i, &[(0, 64 * M, 0)]));
        }
        let (w, st) = from_snapshots(&snaps, None, "t", &ReplayOptions::default()).unwrap();
        assert_eq!(w.duration_us, 5_000_000);
        assert_eq!(st.phases, 2, "{:?}", w.phases);
        assert_eq!(w.phases[0].duration_us, 2_000_000);
        assert_eq!(w.phases[0].accesses.len(), 1);
        let a = &w.phases[0].accesses[0];
        assert_eq!(a.range, AddrRange::new(0, 16 * M));
        // p = 0.5 per 5 ms sample: r = ln 2 / 0.005 s
        assert!((a.rate - 2f64.ln() / 0.005).abs() < 1e-9, "{}", a.rate);
        assert!(w.phases[1].accesses.is_empty());
        assert_eq!(w.objects.len(), 1);
        assert_eq!(w.objects[0].range, AddrRange::new(0, 64 * M));
        assert_eq!(st.cell_bytes, 32 * 1024); // 64 MiB / 2048
    }

    #[test]
    fn noise_does_not_split_phases() {
        // the same true rate, counts jittering 9..11: one phase, the mean rate
        let snaps: Vec<Snapshot> = (0..40)
            .map(|i| snap(i, &[(0, 8 * M, 9 + (i % 3) as u32), (8 * M, 32 * M, 0)]))
            .collect();
        let (w, st) = from_snapshots(&snaps, None, "t", &ReplayOptions::default()).unwrap();
        assert_eq!(st.phases, 1);
        let want = (0..40)
            .map(|i| -(1.0 - (9 + i % 3) as f64 / 20.0).ln() / 0.005)
            .sum::<f64>()
            / 40.0;
        assert!((w.phases[0].accesses[0].rate - want).abs() < 1e-9);
        // a long steady stretch is still cut at max_phase_us
        let opts = ReplayOptions {
            max_phase_us: 1_000_000,
            ..ReplayOptions::default()
        };
        let (_, st) = from_snapshots(&snaps, None, "t", &opts).unwrap();
        assert_eq!(st.phases, 4);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = from_snapshots(&[], None, "t", &ReplayOptions::default()).unwrap_err();
        assert!(
            e.to_string().starts_with("the record has no snapshot"),
            "{e}"
        );
        let opts = ReplayOptions {
            target: 3,
            ..ReplayOptions::default()
        };
        let e = from_snapshots(&[snap(0, &[(0, M, 1)])], None, "t", &opts).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the record has no target 3 (expected a target index it monitored)"
        );
    }
}
