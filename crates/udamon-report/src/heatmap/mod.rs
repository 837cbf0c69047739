//! Heatmap: access frequency over time and address, like the figures of the
//! DAMON papers.
//!
//! [`build`] makes two passes over a [`SnapshotSource`]:
//!
//! 1. *plan*: the time extent, the union of the monitored address spans of
//!    the selected target in the time range, and a bounded histogram of
//!    where the accesses went. From these it lays out the collapsed address
//!    axis (see [`GAP_COLLAPSE_FRACTION`]) and picks the window of it to
//!    draw (see [`ACTIVE_MASS_FRACTION`]).
//! 2. *accumulate*: every region of every snapshot adds its frequency,
//!    weighted by the bytes and microseconds it covers of each cell, with
//!    difference arrays, so a snapshot costs O(regions) per time bin it
//!    overlaps, whatever the number of address bins.
//!
//! Memory is O(time bins x address bins) plus the bounded histogram: the
//! snapshots are never held.

mod image;
mod json;
mod plan;
mod text;

pub use image::{ImageOptions, HEIGHT_RANGE, WIDTH_RANGE};
pub use plan::{ACTIVE_MASS_FRACTION, ACTIVE_PAD_FRACTION, GAP_COLLAPSE_FRACTION};

use serde::Serialize;

use crate::source::each;
use crate::{Error, SnapshotSource};
use plan::{active_window, Axis, MassHist, SpanUnion};

/// Time bins (rows) of the text heatmap when not given.
pub const TEXT_TIME_BINS: usize = 40;
/// Address bins (columns) of the text heatmap when not given: with the time
/// labels, a row fits in 80 columns.
pub const TEXT_ADDR_BINS: usize = 68;
/// Time bins of image and JSON heatmaps when not given.
pub const IMAGE_TIME_BINS: usize = 500;
/// Address bins of image and JSON heatmaps when not given.
pub const IMAGE_ADDR_BINS: usize = 500;

/// Output formats of the heatmap, which set the default resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeatmapFormat {
    Text,
    Json,
    Png,
    Svg,
}

/// What to draw. Every field maps to one command-line flag.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeatmapOptions {
    /// Target to draw, by its index in the monitoring context.
    /// Default: the first target of the first snapshot in the time range.
    pub target: Option<u32>,
    /// Time range `[start, end)` in microseconds since the record's start
    /// (the first snapshot's start). Default: the whole record.
    pub time_range: Option<(u64, u64)>,
    /// Address range `[start, end)` to draw; unmonitored parts are still
    /// collapsed. Default: the automatic active window (see `all`).
    /// Cannot be combined with `all`.
    pub address_range: Option<(u64, u64)>,
    /// Draw every monitored span rather than the automatic active window
    /// (the smallest window holding 99% of the accesses, padded 5% each
    /// side). Default: false.
    pub all: bool,
    /// Number of time bins. Default: 40 for text, 500 for images and JSON.
    pub time_bins: Option<usize>,
    /// Number of address bins. Default: 68 for text, 500 for images and JSON.
    pub addr_bins: Option<usize>,
}

impl HeatmapOptions {
    /// The resolution `(time_bins, addr_bins)` for an output format.
    pub fn bins_for(&self, format: HeatmapFormat) -> (usize, usize) {
        let (t, a) = match format {
            HeatmapFormat::Text => (TEXT_TIME_BINS, TEXT_ADDR_BINS),
            _ => (IMAGE_TIME_BINS, IMAGE_ADDR_BINS),
        };
        (self.time_bins.unwrap_or(t), self.addr_bins.unwrap_or(a))
    }
}

/// How the drawn address window was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressWindow {
    /// The automatic active window.
    Active,
    /// Every monitored span (`all`).
    All,
    /// The given `address_range`.
    Given,
}

/// A stretch of monitored address space on the heatmap's address axis.
/// Consecutive segments are separated by a collapsed gap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Segment {
    /// First address of the segment.
    pub addr_start: u64,
    /// End address (exclusive).
    pub addr_end: u64,
    /// Where the segment begins on the axis, in bytes from the axis start.
    #[serde(rename = "axis_offset_bytes")]
    pub axis_offset: u64,
    /// Size of the collapsed gap before this segment (0 for the first).
    #[serde(rename = "gap_before_bytes")]
    pub gap_before: u64,
}

impl Segment {
    pub fn len(&self) -> u64 {
        self.addr_end - self.addr_start
    }
    pub fn is_empty(&self) -> bool {
        self.addr_end == self.addr_start
    }
}

/// The heatmap model: access frequency per (time bin, address bin).
#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    /// Target drawn.
    pub target_idx: u32,
    /// Start of the record (first snapshot's `start_us`), in the snapshots'
    /// clock; every other time here is relative to it.
    pub record_start_us: u64,
    /// Start of the time axis, microseconds since the record's start.
    pub start_us: u64,
    /// End of the time axis (exclusive), microseconds since the record's start.
    pub end_us: u64,
    pub time_bins: usize,
    pub addr_bins: usize,
    /// The address axis: the segments shown, in order.
    pub segments: Vec<Segment>,
    /// Length of the address axis in bytes (the shown segments end to end).
    pub axis_bytes: u64,
    /// Total monitored bytes of the target (all segments, shown or not).
    pub monitored_bytes: u64,
    /// How the address window was chosen.
    pub window: AddressWindow,
    /// Share of all access mass (frequency x time x bytes) in the shown
    /// window, `None` when nothing was accessed.
    pub access_share: Option<f64>,
    /// Snapshots that overlapped the time range.
    pub nr_snapshots: usize,
    /// Row-major (`cells[t * addr_bins + a]`): the time- and byte-weighted
    /// average of `nr_accesses / max_nr_accesses` over the covered part of
    /// the cell, in `0..=1`; NaN when no region ever covered the cell.
    pub cells: Vec<f64>,
}

impl Heatmap {
    /// The cell at time bin `t`, address bin `a`; `None` when never covered.
    pub fn cell(&self, t: usize, a: usize) -> Option<f64> {
        let v = self.cells[t * self.addr_bins + a];
        (!v.is_nan()).then_some(v)
    }

    /// One time bin's cells.
    pub fn row(&self, t: usize) -> &[f64] {
        &self.cells[t * self.addr_bins..(t + 1) * self.addr_bins]
    }

    /// Length of a time bin in microseconds.
    pub fn time_bin_us(&self) -> f64 {
        (self.end_us - self.start_us) as f64 / self.time_bins as f64
    }

    /// Length of an address bin in bytes (of the collapsed axis).
    pub fn addr_bin_bytes(&self) -> f64 {
        self.axis_bytes as f64 / self.addr_bins as f64
    }

    /// Address at a position of the axis, in bytes from its start (a
    /// position on a segment boundary maps to the later segment's start).
    pub fn addr_at(&self, pos: u64) -> u64 {
        let i = self
            .segments
            .partition_point(|g| g.axis_offset <= pos)
            .saturating_sub(1);
        match self.segments.get(i) {
            Some(g) => g.addr_start + (pos - g.axis_offset).min(g.len()),
            None => 0,
        }
    }
}

/// Builds the heatmap for `format` (which sets the default resolution) in
/// two passes over `src`.
pub fn build<S: SnapshotSource + ?Sized>(
    src: &S,
    opts: &HeatmapOptions,
    format: HeatmapFormat,
) -> Result<Heatmap, Error> {
    build_inner(src, opts, format, false).map(|(hm, _)| hm)
}

/// [`build`], and beside the heatmap the mean age of each cell: the time-
/// and byte-weighted average over the regions that covered it of `age x`
/// the snapshot's window length (`end_us - start_us`, as the hot report
/// counts it), in microseconds, row-major like [`Heatmap::cells`]; NaN
/// where no region covered the cell. Same passes, one more difference
/// array.
pub fn build_with_ages<S: SnapshotSource + ?Sized>(
    src: &S,
    opts: &HeatmapOptions,
    format: HeatmapFormat,
) -> Result<(Heatmap, Vec<f64>), Error> {
    build_inner(src, opts, format, true).map(|(hm, ages)| (hm, ages.unwrap_or_default()))
}

fn build_inner<S: SnapshotSource + ?Sized>(
    src: &S,
    opts: &HeatmapOptions,
    format: HeatmapFormat,
    ages: bool,
) -> Result<(Heatmap, Option<Vec<f64>>), Error> {
    let (time_bins, addr_bins) = opts.bins_for(format);
    check_options(opts, time_bins, addr_bins)?;

    let plan = plan_pass(src, opts)?;
    let target = plan.target.ok_or(Error::NoSnapshots)?;
    if plan.union.spans.is_empty() {
        return Err(Error::NoTarget(target));
    }
    let (t0, t1) = (plan.t0, plan.t1);
    if t1 <= t0 {
        return Err(Error::NoSnapshots);
    }
    let axis = Axis::new(&plan.union.spans);
    let pieces = axis.mass_pieces(&plan.union.spans, &plan.hist.bins());
    let (window, (w0, w1)) = if let Some((s, e)) = opts.address_range {
        let (p0, p1) = (axis.pos_ceil(s), axis.pos_floor(e));
        let any = plan.union.spans.iter().any(|&(a, b)| a < e && s < b);
        if !any || p1 <= p0 {
            return Err(Error::EmptyAddressRange { start: s, end: e });
        }
        (AddressWindow::Given, (p0, p1))
    } else if opts.all {
        (AddressWindow::All, (0, axis.len))
    } else {
        (
            AddressWindow::Active,
            active_window(axis.len, &pieces, addr_bins as u64 * 4096),
        )
    };
    let total_mass: f64 = pieces.iter().map(|p| p.2[0]).sum();
    let access_share = (total_mass > 0.0).then(|| {
        let inside: f64 = pieces
            .iter()
            .map(|&(a, b, m)| m[0] * crate::source::overlap(a, b, w0, w1) as f64 / (b - a) as f64)
            .sum();
        (inside / total_mass).min(1.0)
    });

    let segments = shown_segments(&axis, w0, w1);
    let mut acc = Accumulator::new(time_bins, addr_bins, (t0, t1), (w0, w1), ages);
    let rs = plan.record_start_us;
    let range = opts
        .time_range
        .map(|(s, e)| (rs.saturating_add(s), rs.saturating_add(e)));
    accumulate_pass(src, range, target, &axis, (w0, w1), &mut acc)?;

    let (cells, ages) = acc.finish();
    Ok((
        Heatmap {
            target_idx: target,
            record_start_us: rs,
            start_us: t0 - rs,
            end_us: t1 - rs,
            time_bins,
            addr_bins,
            segments,
            axis_bytes: w1 - w0,
            monitored_bytes: plan.union.total(),
            window,
            access_share,
            nr_snapshots: plan.nr_snapshots,
            cells,
        },
        ages,
    ))
}

/// The options' own checks: bins, and the address and time ranges.
fn check_options(opts: &HeatmapOptions, time_bins: usize, addr_bins: usize) -> Result<(), Error> {
    if time_bins == 0 || addr_bins == 0 {
        return Err(Error::InvalidOption(
            "heatmap bins must be at least 1".into(),
        ));
    }
    if time_bins.saturating_mul(addr_bins) > 1 << 26 {
        return Err(Error::InvalidOption(format!(
            "{time_bins}x{addr_bins} heatmap bins are too many (at most 2^26)"
        )));
    }
    if opts.all && opts.address_range.is_some() {
        return Err(Error::InvalidOption(
            "all and address_range cannot be combined".into(),
        ));
    }
    if let Some((s, e)) = opts.address_range {
        if s >= e {
            return Err(Error::InvalidOption(format!(
                "empty address range {s:#x}..{e:#x}"
            )));
        }
    }
    if let Some((s, e)) = opts.time_range {
        if s >= e {
            return Err(Error::InvalidOption(format!(
                "empty time range {s}us..{e}us"
            )));
        }
    }
    Ok(())
}

/// The second pass, *accumulate*: every region of `target` in the time
/// `range` adds its frequency (and age) to the cells of the shown window
/// `[w0, w1)` of the axis it covers.
fn accumulate_pass<S: SnapshotSource + ?Sized>(
    src: &S,
    range: Option<(u64, u64)>,
    target: u32,
    axis: &Axis,
    (w0, w1): (u64, u64),
    acc: &mut Accumulator,
) -> Result<(), Error> {
    each(src, |s| {
        if let Some((r0, r1)) = range {
            if s.end_us <= r0 || s.start_us >= r1 {
                return;
            }
        }
        let Some(t) = s.targets.iter().find(|t| t.target_idx == target) else {
            return;
        };
        let max = s.max_nr_accesses().max(1);
        let inv_max = 1.0 / f64::from(max);
        let window_us = s.end_us.saturating_sub(s.start_us) as f64;
        acc.bins.clear();
        let mut gi = 0;
        for r in &t.regions {
            while gi < axis.segs.len() && axis.segs[gi].end <= r.start {
                gi += 1;
            }
            let Some(g) = axis.segs.get(gi) else { break };
            if r.start < g.start || r.end > g.end {
                continue;
            }
            let cs = g.off + (r.start - g.start);
            let (a, b) = (cs.max(w0), (cs + r.sz()).min(w1));
            if a < b {
                acc.push_region(
                    a,
                    b,
                    f64::from(r.nr_accesses.min(max)) * inv_max,
                    f64::from(r.age) * window_us,
                );
            }
        }
        acc.add_snapshot(s.start_us, s.end_us);
    })?;
    Ok(())
}

/// What the first pass learns.
struct Plan {
    record_start_us: u64,
    target: Option<u32>,
    /// Time extent of the selected snapshots, clipped to the time range.
    t0: u64,
    t1: u64,
    union: SpanUnion,
    hist: MassHist,
    nr_snapshots: usize,
}

fn plan_pass<S: SnapshotSource + ?Sized>(src: &S, opts: &HeatmapOptions) -> Result<Plan, Error> {
    let mut p = Plan {
        record_start_us: 0,
        target: opts.target,
        t0: u64::MAX,
        t1: 0,
        union: SpanUnion::default(),
        hist: MassHist::default(),
        nr_snapshots: 0,
    };
    let mut first = true;
    let mut range = None;
    // Times count from the source's start (a whole record's, when it is
    // read through a selection).
    let origin = src.record_start_us()?;
    each(src, |s| {
        if first {
            first = false;
            let o = origin.unwrap_or(s.start_us);
            p.record_start_us = o;
            range = opts
                .time_range
                .map(|(a, b)| (o.saturating_add(a), o.saturating_add(b)));
        }
        let (mut a, mut b) = (s.start_us, s.end_us.max(s.start_us));
        if let Some((r0, r1)) = range {
            if b <= r0 || a >= r1 {
                return;
            }
            (a, b) = (a.max(r0), b.min(r1));
        }
        p.nr_snapshots += 1;
        p.t0 = p.t0.min(a);
        p.t1 = p.t1.max(b);
        let target = *p
            .target
            .get_or_insert_with(|| s.targets.first().map_or(0, |t| t.target_idx));
        let Some(t) = s.targets.iter().find(|t| t.target_idx == target) else {
            return;
        };
        let max = s.max_nr_accesses().max(1);
        let dt = (b - a) as f64;
        let regions = &t.regions;
        let mut hint = 0;
        let mut i = 0;
        while i < regions.len() {
            // A run of touching regions: one span.
            let mut j = i + 1;
            while j < regions.len() && regions[j].start == regions[j - 1].end {
                j += 1;
            }
            let (start, end) = (regions[i].start, regions[j - 1].end);
            p.union.insert(start, end);
            p.hist.ensure(start, end);
            for r in &regions[i..j] {
                if r.nr_accesses > 0 {
                    let f = f64::from(r.nr_accesses.min(max)) / f64::from(max);
                    p.hist.add(r.start, r.end, [f * dt, f * f * dt], &mut hint);
                }
            }
            i = j;
        }
    })?;
    Ok(p)
}

/// The part of the axis `[w0, w1)` as segments, offsets from `w0`.
fn shown_segments(axis: &Axis, w0: u64, w1: u64) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    let mut prev_end = None;
    for g in &axis.segs {
        let (s, e) = (g.off.max(w0), (g.off + (g.end - g.start)).min(w1));
        if s < e {
            out.push(Segment {
                addr_start: g.start + (s - g.off),
                addr_end: g.start + (e - g.off),
                axis_offset: s - w0,
                gap_before: if out.is_empty() {
                    0
                } else {
                    g.start - prev_end.unwrap_or(g.start)
                },
            });
        }
        prev_end = Some(g.end);
    }
    out
}

/// Coverage below which a cell counts as never covered (the cells hold
/// covered fractions of the cell's time x bytes, so this is far below one
/// byte-microsecond in any realistic cell, and far above rounding residue).
const MIN_COVERAGE: f64 = 1e-9;

/// Frequencies below this are rounding residue of the difference arrays
/// (true averages this small would need a page-sized access in a
/// terabyte-sized cell) and count as 0.
const MIN_FREQ: f64 = 1e-9;

/// Per-time-bin difference arrays of frequency-weighted and plain coverage
/// (interleaved, one `[num, cov]` pair per address bin boundary), in units
/// of one cell (time bin x address bin).
struct Accumulator {
    time_bins: usize,
    addr_bins: usize,
    t0: u64,
    inv_tw: f64,
    w0: u64,
    inv_bw: f64,
    diff: Vec<[f64; 2]>,
    /// Age-weighted coverage, laid out like `diff`; empty when ages are
    /// not asked for.
    age_diff: Vec<[f64; 1]>,
    /// The current snapshot's regions as `(first, end, freq, age_us)` in
    /// bin units.
    bins: Vec<(f64, f64, f64, f64)>,
}

impl Accumulator {
    fn new(
        time_bins: usize,
        addr_bins: usize,
        (t0, t1): (u64, u64),
        (w0, w1): (u64, u64),
        ages: bool,
    ) -> Self {
        Self {
            time_bins,
            addr_bins,
            t0,
            inv_tw: time_bins as f64 / (t1 - t0) as f64,
            w0,
            inv_bw: addr_bins as f64 / (w1 - w0) as f64,
            diff: vec![[0.0; 2]; time_bins * (addr_bins + 1)],
            age_diff: if ages {
                vec![[0.0; 1]; time_bins * (addr_bins + 1)]
            } else {
                Vec::new()
            },
            bins: Vec::new(),
        }
    }

    /// Adds a region of the current snapshot, `[a, b)` on the axis inside
    /// the window.
    #[inline]
    fn push_region(&mut self, a: u64, b: u64, freq: f64, age_us: f64) {
        let n = self.addr_bins as f64;
        let fe = ((b - self.w0) as f64 * self.inv_bw).min(n);
        let fs = ((a - self.w0) as f64 * self.inv_bw).min(fe);
        self.bins.push((fs, fe, freq, age_us));
    }

    /// Adds the pushed regions of a snapshot spanning `[start_us, end_us)`.
    fn add_snapshot(&mut self, start_us: u64, end_us: u64) {
        let a = (start_us.max(self.t0) - self.t0) as f64 * self.inv_tw;
        let b = ((end_us.max(self.t0) - self.t0) as f64 * self.inv_tw).min(self.time_bins as f64);
        if b <= a || self.bins.is_empty() {
            return;
        }
        let stride = self.addr_bins + 1;
        let tb0 = (a.floor() as usize).min(self.time_bins - 1);
        let tb1 = (b.ceil() as usize).min(self.time_bins);
        for tb in tb0..tb1 {
            let w = b.min((tb + 1) as f64) - a.max(tb as f64);
            if w <= 0.0 {
                continue;
            }
            let row = &mut self.diff[tb * stride..(tb + 1) * stride];
            for &(fs, fe, f, _) in &self.bins {
                add_interval(row, fs, fe, [w * f, w]);
            }
            if !self.age_diff.is_empty() {
                let row = &mut self.age_diff[tb * stride..(tb + 1) * stride];
                for &(fs, fe, _, age) in &self.bins {
                    add_interval(row, fs, fe, [w * age]);
                }
            }
        }
    }

    /// The cells, and the mean ages when asked for.
    fn finish(self) -> (Vec<f64>, Option<Vec<f64>>) {
        let stride = self.addr_bins + 1;
        let with_ages = !self.age_diff.is_empty();
        let mut cells = Vec::with_capacity(self.time_bins * self.addr_bins);
        let mut ages = Vec::with_capacity(if with_ages { cells.capacity() } else { 0 });
        for t in 0..self.time_bins {
            let (mut n, mut c, mut g) = (0.0, 0.0, 0.0);
            for (i, d) in self.diff[t * stride..t * stride + self.addr_bins]
                .iter()
                .enumerate()
            {
                n += d[0];
                c += d[1];
                cells.push(if c <= MIN_COVERAGE {
                    f64::NAN
                } else if n / c < MIN_FREQ {
                    0.0
                } else {
                    (n / c).min(1.0)
                });
                if with_ages {
                    g += self.age_diff[t * stride + i][0];
                    ages.push(if c <= MIN_COVERAGE {
                        f64::NAN
                    } else {
                        (g / c).max(0.0)
                    });
                }
            }
        }
        (cells, with_ages.then_some(ages))
    }
}

/// Adds `[fs, fe)` (in bin units, `0 <= fs <= fe <= n`) with weights `v`
/// per unit of length (`[num, cov]` for the cells, `[age]` for the ages)
/// into the difference array `d` (length `n + 1`).
#[inline]
fn add_interval<const K: usize>(d: &mut [[f64; K]], fs: f64, fe: f64, v: [f64; K]) {
    let n = d.len() - 1;
    if fe <= fs {
        return;
    }
    let a = (fs as usize).min(n - 1);
    let b = fe as usize;
    let mut point = |i: usize, len: f64| {
        for k in 0..K {
            d[i][k] += v[k] * len;
            d[i + 1][k] -= v[k] * len;
        }
    };
    if a >= b {
        point(a, fe - fs);
        return;
    }
    point(a, (a + 1) as f64 - fs);
    if b < n {
        point(b, fe - b as f64);
    }
    if a + 1 < b {
        for k in 0..K {
            d[a + 1][k] += v[k];
            d[b][k] -= v[k];
        }
    }
}

#[cfg(test)]
mod tests;
