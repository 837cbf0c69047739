//! Hot regions: the most frequently accessed regions of one snapshot, or
//! the address ranges with the highest access frequency averaged over a
//! time range.
//!
//! Both lists are ordered by access frequency, then size (both
//! descending), then target and start address.

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::ControlFlow;

use serde::Serialize;
use udamon_core::{RegionSnapshot, Snapshot};

use crate::human::{fmt_addr, fmt_bytes, fmt_us};
use crate::source::{each, freq, overlap};
use crate::{Error, SnapshotSource, TargetRow, TargetTable};

/// What to list. Every field maps to one command-line flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotOptions {
    /// Show the snapshot whose window covers this time, in microseconds
    /// since the record's start. Default: the last snapshot.
    /// Cannot be combined with `aggregate`.
    pub at_us: Option<u64>,
    /// Average each address's access frequency over `time_range` instead
    /// of showing one snapshot. Default: false.
    pub aggregate: bool,
    /// Time range `[start, end)` in microseconds since the record's start
    /// for `aggregate`. Default: the whole record.
    pub time_range: Option<(u64, u64)>,
    /// Rows to show, hottest first; 0 shows all. Default: 20.
    pub top: usize,
    /// Target to list, by index. Default: all targets.
    pub target: Option<u32>,
}

impl Default for HotOptions {
    fn default() -> Self {
        Self {
            at_us: None,
            aggregate: false,
            time_range: None,
            top: 20,
            target: None,
        }
    }
}

/// A region of one snapshot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotRegion {
    pub target_idx: u32,
    pub start: u64,
    pub end: u64,
    pub size_bytes: u64,
    pub nr_accesses: u32,
    /// `nr_accesses / max_nr_accesses`, in `0..=1`.
    pub access_frequency: f64,
    /// Age in aggregation intervals.
    pub age_aggr_intervals: u32,
    /// Age in microseconds of real time: `age` times the snapshot's own
    /// window length (`end_us - start_us`). On the simulator that is
    /// `aggr_us`; on a live path windows last longer when the machine is
    /// busy, and a nominal `age x aggr_us` would understate the idle time.
    pub age_us: u64,
    /// What the region holds, by name (the object holding most of it,
    /// and "+N" others), when the caller named it ([`Hot::name_objects`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
}

/// The hottest regions of one snapshot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotSnapshot {
    /// Window of the snapshot, microseconds since the record's start.
    pub start_us: u64,
    pub end_us: u64,
    pub sample_us: u64,
    pub aggr_us: u64,
    pub max_nr_accesses: u32,
    /// Regions in the snapshot (of the selected target), listed or not.
    pub nr_regions: usize,
    pub regions: Vec<HotRegion>,
}

/// An address range with its average access frequency.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotRange {
    pub target_idx: u32,
    pub start: u64,
    pub end: u64,
    pub size_bytes: u64,
    /// Average of `nr_accesses / max_nr_accesses` over the time the range
    /// was monitored, in `0..=1`.
    pub access_frequency: f64,
    /// How long the range was monitored within the time range (averaged
    /// over its bytes), in microseconds.
    pub monitored_us: u64,
    /// What the range holds, by name, as [`HotRegion::object`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
}

/// The hottest address ranges over a time range.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotAggregate {
    /// The time range covered, microseconds since the record's start.
    pub start_us: u64,
    pub end_us: u64,
    pub nr_snapshots: usize,
    /// Ranges found (adjacent ranges of equal frequency merged), listed or not.
    pub nr_ranges: usize,
    pub ranges: Vec<HotRange>,
}

/// The hot report.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Hot {
    Snapshot(HotSnapshot),
    Aggregate(HotAggregate),
}

/// Builds the hot report: one pass over `src` for `aggregate` and `at_us`
/// (stopping at the snapshot found), [`SnapshotSource::last_snapshot`] by
/// default (a record decodes only its last frame).
pub fn build<S: SnapshotSource + ?Sized>(src: &S, opts: &HotOptions) -> Result<Hot, Error> {
    if opts.aggregate {
        if opts.at_us.is_some() {
            return Err(Error::InvalidOption(
                "at_us and aggregate cannot be combined".into(),
            ));
        }
        return aggregate(src, opts).map(Hot::Aggregate);
    }
    if opts.time_range.is_some() {
        return Err(Error::InvalidOption("time_range needs aggregate".into()));
    }
    let rs = src.record_start_us()?.ok_or(Error::NoSnapshots)?;
    let s = match opts.at_us {
        None => src.last_snapshot()?.ok_or(Error::NoSnapshots)?,
        Some(at_us) => {
            let at = rs.saturating_add(at_us);
            let mut chosen = None;
            src.for_each_snapshot(&mut |s| {
                if s.start_us <= at && at < s.end_us {
                    chosen = Some(s.clone());
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            chosen.ok_or(Error::NoSnapshotAt(at_us))?
        }
    };
    if let Some(t) = opts.target {
        if !s.targets.iter().any(|x| x.target_idx == t) {
            return Err(Error::NoTarget(t));
        }
    }
    Ok(Hot::Snapshot(snapshot_hot(
        &s,
        rs,
        |t| crate::source::selected(opts.target, t),
        opts.top,
    )))
}

/// The hottest regions of the targets of `s` that `keep` keeps; times
/// since `rs`.
fn snapshot_hot(s: &Snapshot, rs: u64, keep: impl Fn(u32) -> bool, top: usize) -> HotSnapshot {
    let max = s.max_nr_accesses();
    let mut regions: Vec<HotRegion> = s
        .targets
        .iter()
        .filter(|t| keep(t.target_idx))
        .flat_map(|t| t.regions.iter().map(move |r| (t.target_idx, r)))
        .map(|(target_idx, r)| HotRegion {
            target_idx,
            start: r.start,
            end: r.end,
            size_bytes: r.sz(),
            nr_accesses: r.nr_accesses,
            access_frequency: freq(r.nr_accesses, max),
            age_aggr_intervals: r.age,
            age_us: u64::from(r.age).saturating_mul(s.end_us.saturating_sub(s.start_us)),
            object: None,
        })
        .collect();
    let nr_regions = regions.len();
    regions.sort_by(|a, b| {
        b.nr_accesses
            .cmp(&a.nr_accesses)
            .then(b.size_bytes.cmp(&a.size_bytes))
            .then(a.target_idx.cmp(&b.target_idx))
            .then(a.start.cmp(&b.start))
    });
    truncate(&mut regions, top);
    HotSnapshot {
        start_us: s.start_us.saturating_sub(rs),
        end_us: s.end_us.saturating_sub(rs),
        sample_us: s.sample_us,
        aggr_us: s.aggr_us,
        max_nr_accesses: max,
        nr_regions,
        regions,
    }
}

fn truncate<T>(v: &mut Vec<T>, top: usize) {
    if top > 0 {
        v.truncate(top);
    }
}

/// Pieces kept per target before the least different neighbours merge.
const MAX_PIECES: usize = 8192;

/// A piece of address space with per-byte sums over the snapshots that
/// covered it: `mass` of frequency x microseconds, `time` of microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Piece {
    start: u64,
    end: u64,
    mass: f64,
    time: f64,
}

impl Piece {
    fn avg(&self) -> f64 {
        if self.time > 0.0 {
            self.mass / self.time
        } else {
            0.0
        }
    }
    fn len(&self) -> f64 {
        (self.end - self.start) as f64
    }
    /// Byte-weighted merge of touching pieces.
    fn absorb(&mut self, o: &Piece) {
        let (a, b) = (self.len(), o.len());
        self.mass = (self.mass * a + o.mass * b) / (a + b);
        self.time = (self.time * a + o.time * b) / (a + b);
        self.end = o.end;
    }
}

/// Snapshots merged into a small partition of their own before it is
/// merged into the big one: each snapshot then costs about its own regions
/// times the batch, not the whole partition (up to [`MAX_PIECES`]), which
/// makes an hour at default attributes about twice as fast.
const BATCH: usize = 16;

/// Per-address frequency accumulator for one target: a sorted partition of
/// the addresses seen, refined by every snapshot's region boundaries, with
/// equal neighbours merged and, past [`MAX_PIECES`], the most similar
/// neighbours merged (so memory stays bounded whatever the record length).
/// Snapshots are gathered [`BATCH`] at a time; [`FreqMap::pieces`] merges
/// what is pending.
#[derive(Default)]
struct FreqMap {
    pieces: Vec<Piece>,
    out: Vec<Piece>,
    /// The pending snapshots' own partition, and how many it holds.
    batch: Vec<Piece>,
    batch_out: Vec<Piece>,
    nr_batched: usize,
    regions: Vec<Piece>,
}

/// Merges two sorted partitions (of pieces that may overlap each other but
/// not themselves) into `out`: sums where they overlap, touching pieces of
/// equal sums joined.
fn merge_pieces(p: &[Piece], r: &[Piece], out: &mut Vec<Piece>) {
    out.clear();
    let (mut i, mut j, mut x) = (0, 0, 0u64);
    while i < p.len() || j < r.len() {
        let ps = p.get(i).map(|p| p.start.max(x));
        let rs = r.get(j).map(|r| r.start.max(x));
        x = match (ps, rs) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => break,
        };
        let in_p = p.get(i).filter(|p| p.start <= x);
        let in_r = r.get(j).filter(|r| r.start <= x);
        let mut y = u64::MAX;
        if let Some(q) = p.get(i) {
            y = y.min(if in_p.is_some() { q.end } else { q.start });
        }
        if let Some(q) = r.get(j) {
            y = y.min(if in_r.is_some() { q.end } else { q.start });
        }
        let mut piece = Piece {
            start: x,
            end: y,
            mass: 0.0,
            time: 0.0,
        };
        for q in [in_p, in_r].into_iter().flatten() {
            piece.mass += q.mass;
            piece.time += q.time;
        }
        match out.last_mut() {
            Some(l) if l.end == piece.start && l.mass == piece.mass && l.time == piece.time => {
                l.end = piece.end
            }
            _ => out.push(piece),
        }
        x = y;
        if in_p.is_some_and(|q| q.end == y) {
            i += 1;
        }
        if in_r.is_some_and(|q| q.end == y) {
            j += 1;
        }
    }
}

impl FreqMap {
    fn add(&mut self, regions: &[RegionSnapshot], dt: f64, max: u32) {
        self.regions.clear();
        self.regions.extend(regions.iter().map(|q| Piece {
            start: q.start,
            end: q.end,
            mass: freq(q.nr_accesses, max) * dt,
            time: dt,
        }));
        merge_pieces(&self.batch, &self.regions, &mut self.batch_out);
        std::mem::swap(&mut self.batch, &mut self.batch_out);
        self.nr_batched += 1;
        if self.nr_batched >= BATCH {
            self.flush();
        }
    }

    /// Merges the pending snapshots into the partition.
    fn flush(&mut self) {
        if self.nr_batched == 0 {
            return;
        }
        merge_pieces(&self.pieces, &self.batch, &mut self.out);
        std::mem::swap(&mut self.pieces, &mut self.out);
        self.batch.clear();
        self.nr_batched = 0;
        if self.pieces.len() > MAX_PIECES {
            self.coarsen(MAX_PIECES / 2);
        }
    }

    /// The partition, every snapshot added so far merged in.
    fn pieces(&mut self) -> &[Piece] {
        self.flush();
        &self.pieces
    }

    /// Merges the touching neighbours whose average frequencies differ the
    /// least until at most about `target` pieces remain.
    fn coarsen(&mut self, target: usize) {
        let p = &self.pieces;
        let diffs: Vec<f64> = p
            .windows(2)
            .map(|w| {
                if w[0].end == w[1].start {
                    (w[0].avg() - w[1].avg()).abs()
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        let need = p.len().saturating_sub(target);
        if need == 0 || diffs.is_empty() {
            return;
        }
        let mut sorted = diffs.clone();
        let k = need.min(sorted.len()) - 1;
        let (_, &mut thres, _) = sorted.select_nth_unstable_by(k, f64::total_cmp);
        let mut merged = 0;
        let mut out: Vec<Piece> = Vec::with_capacity(target + 1);
        out.push(p[0]);
        for (k, q) in p.iter().enumerate().skip(1) {
            if merged < need && diffs[k - 1] <= thres && diffs[k - 1].is_finite() {
                out.last_mut().expect("not empty").absorb(q);
                merged += 1;
            } else {
                out.push(*q);
            }
        }
        self.pieces = out;
    }
}

fn aggregate<S: SnapshotSource + ?Sized>(
    src: &S,
    opts: &HotOptions,
) -> Result<HotAggregate, Error> {
    let (mut maps, all) = accumulate(src, opts)?;
    if let Some(t) = opts.target {
        if !maps.contains_key(&t) {
            return Err(Error::NoTarget(t));
        }
    }
    let mut ranges = Vec::new();
    for (&target_idx, (m, _)) in &mut maps {
        ranges.extend(ranges_of(target_idx, m));
    }
    Ok(ranked(ranges, &all, opts.top))
}

/// The time a target (or the whole source) was seen over: microseconds
/// since the record's start, and snapshots.
#[derive(Clone, Copy, Debug)]
struct Span {
    t0: u64,
    t1: u64,
    n: usize,
}

impl Span {
    const NONE: Span = Span {
        t0: u64::MAX,
        t1: 0,
        n: 0,
    };
    fn add(&mut self, a: u64, b: u64) {
        self.n += 1;
        self.t0 = self.t0.min(a);
        self.t1 = self.t1.max(b);
    }
}

/// Each target's frequency map and span, by index.
type Accumulated = BTreeMap<u32, (FreqMap, Span)>;

/// One pass over `src`: each selected target's frequency map and span,
/// and the span of the whole.
fn accumulate<S: SnapshotSource + ?Sized>(
    src: &S,
    opts: &HotOptions,
) -> Result<(Accumulated, Span), Error> {
    if let Some((s, e)) = opts.time_range {
        if s >= e {
            return Err(Error::InvalidOption(format!(
                "empty time range {s}us..{e}us"
            )));
        }
    }
    let mut maps = Accumulated::new();
    let mut record_start = src.record_start_us()?;
    let mut all = Span::NONE;
    each(src, |s| {
        let rs = *record_start.get_or_insert(s.start_us);
        let (a, b) = match opts.time_range {
            Some((r0, r1)) => {
                let (r0, r1) = (rs.saturating_add(r0), rs.saturating_add(r1));
                if overlap(s.start_us, s.end_us, r0, r1) == 0 {
                    return;
                }
                (s.start_us.max(r0), s.end_us.min(r1))
            }
            None => (s.start_us, s.end_us.max(s.start_us)),
        };
        let (ra, rb) = (a.saturating_sub(rs), b.saturating_sub(rs));
        all.add(ra, rb);
        let max = s.max_nr_accesses();
        for t in s
            .targets
            .iter()
            .filter(|t| crate::source::selected(opts.target, t.target_idx))
        {
            let (m, span) = maps
                .entry(t.target_idx)
                .or_insert_with(|| (FreqMap::default(), Span::NONE));
            m.add(&t.regions, (b - a) as f64, max);
            span.add(ra, rb);
        }
    })?;
    if all.n == 0 {
        return Err(Error::NoSnapshots);
    }
    Ok((maps, all))
}

/// A target's ranges: its pieces, neighbours of equal average merged.
fn ranges_of(target_idx: u32, m: &mut FreqMap) -> Vec<HotRange> {
    let mut merged: Vec<Piece> = Vec::new();
    for q in m.pieces() {
        match merged.last_mut() {
            Some(l) if l.end == q.start && (l.avg() - q.avg()).abs() <= 1e-12 => l.absorb(q),
            _ => merged.push(*q),
        }
    }
    merged
        .iter()
        .map(|q| HotRange {
            target_idx,
            start: q.start,
            end: q.end,
            size_bytes: q.end - q.start,
            access_frequency: (q.avg() * 1e6).round() / 1e6,
            monitored_us: q.time.round() as u64,
            object: None,
        })
        .collect()
}

/// The `top` hottest of `ranges` over `span`.
fn ranked(mut ranges: Vec<HotRange>, span: &Span, top: usize) -> HotAggregate {
    let nr_ranges = ranges.len();
    ranges.sort_by(|a, b| {
        b.access_frequency
            .total_cmp(&a.access_frequency)
            .then(b.size_bytes.cmp(&a.size_bytes))
            .then(a.target_idx.cmp(&b.target_idx))
            .then(a.start.cmp(&b.start))
    });
    truncate(&mut ranges, top);
    HotAggregate {
        start_us: span.t0,
        end_us: span.t1,
        nr_snapshots: span.n,
        nr_ranges,
        ranges,
    }
}

/// One process's (target's) hot report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessHot {
    #[serde(flatten)]
    pub process: TargetRow,
    #[serde(flatten)]
    pub hot: Hot,
}

/// The hot report broken down by process (`--by process`): each target's
/// own top `top`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotByProcess {
    pub processes: Vec<ProcessHot>,
}

/// Builds the hot report of each target of `src`, named by `table`. With
/// `aggregate`, each target's hottest ranges over the time range (its
/// `start_us`, `end_us` and `nr_snapshots` are those of the snapshots that
/// hold it); with `at_us`, each target's hottest regions in the snapshot
/// covering that time; else each target's hottest regions in the last
/// snapshot that holds it (a process that left early is listed as it was
/// last seen).
pub fn build_by_process<S: SnapshotSource + ?Sized>(
    src: &S,
    opts: &HotOptions,
    table: &TargetTable,
) -> Result<HotByProcess, Error> {
    let keep = |t: u32| crate::source::selected(opts.target, t);
    let hots: Vec<(u32, Hot)> = if opts.aggregate {
        if opts.at_us.is_some() {
            return Err(Error::InvalidOption(
                "at_us and aggregate cannot be combined".into(),
            ));
        }
        let (mut maps, _) = accumulate(src, opts)?;
        maps.iter_mut()
            .map(|(&t, (m, span))| (t, Hot::Aggregate(ranked(ranges_of(t, m), span, opts.top))))
            .collect()
    } else if opts.time_range.is_some() {
        return Err(Error::InvalidOption("time_range needs aggregate".into()));
    } else {
        let rs = src.record_start_us()?.ok_or(Error::NoSnapshots)?;
        let lasts = last_of_each(src, rs, opts.at_us, &keep)?;
        lasts
            .iter()
            .map(|(&t, s)| (t, Hot::Snapshot(snapshot_hot(s, rs, |x| x == t, opts.top))))
            .collect()
    };
    if let Some(t) = opts.target.filter(|t| !hots.iter().any(|(x, _)| x == t)) {
        return Err(Error::NoTarget(t));
    }
    Ok(HotByProcess {
        processes: hots
            .into_iter()
            .map(|(t, hot)| ProcessHot {
                process: table.row(t),
                hot,
            })
            .collect(),
    })
}

/// Per kept target, the last snapshot that holds it (only its own regions
/// kept), or with `at_us` the snapshot covering that time.
fn last_of_each<S: SnapshotSource + ?Sized>(
    src: &S,
    rs: u64,
    at_us: Option<u64>,
    keep: &dyn Fn(u32) -> bool,
) -> Result<BTreeMap<u32, Snapshot>, Error> {
    let mut lasts: BTreeMap<u32, Snapshot> = BTreeMap::new();
    let at = at_us.map(|a| rs.saturating_add(a));
    let mut found = false;
    src.for_each_snapshot(&mut |s| {
        if at.is_some_and(|at| !(s.start_us <= at && at < s.end_us)) {
            return ControlFlow::Continue(());
        }
        found = true;
        for t in s.targets.iter().filter(|t| keep(t.target_idx)) {
            let one = lasts.entry(t.target_idx).or_default();
            one.start_us = s.start_us;
            one.end_us = s.end_us;
            one.sample_us = s.sample_us;
            one.aggr_us = s.aggr_us;
            match one.targets.first_mut() {
                Some(x) => x.clone_from(t),
                None => one.targets.push(t.clone()),
            }
        }
        if at.is_some() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    match at_us {
        Some(a) if !found => Err(Error::NoSnapshotAt(a)),
        _ if lasts.is_empty() && !found => Err(Error::NoSnapshots),
        _ => Ok(lasts),
    }
}

impl HotByProcess {
    /// Writes each process's table under a line naming it.
    pub fn write_text(&self, w: &mut dyn Write) -> Result<(), Error> {
        for (i, p) in self.processes.iter().enumerate() {
            if i > 0 {
                writeln!(w)?;
            }
            let r = &p.process;
            writeln!(
                w,
                "## target {}: {}{}{}",
                r.target_idx,
                r.name(),
                r.arrived_us
                    .map_or(String::new(), |t| format!(", arrived at {}", fmt_us(t))),
                match r.left_us {
                    Some(_) => format!(", left at {}", crate::wss::left_text(r)),
                    None => String::new(),
                }
            )?;
            p.hot.write_text(w)?;
        }
        Ok(())
    }

    /// Writes the report as one JSON object: `processes: [{target_idx, pid,
    /// start, comm, cgroup, label, arrived_us, left_us, left_why, mode,
    /// ...}]`, each with the fields of [`HotSnapshot`] or [`HotAggregate`].
    pub fn write_json(&self, w: &mut dyn Write) -> Result<(), Error> {
        serde_json::to_writer(&mut *w, self).map_err(std::io::Error::from)?;
        writeln!(w)?;
        Ok(())
    }
}

impl HotByProcess {
    /// Names each listed region or range (see [`Hot::name_objects`]).
    pub fn name_objects(&mut self, names: &mut dyn crate::Names) {
        for p in &mut self.processes {
            p.hot.name_objects(names);
        }
    }
}

impl Hot {
    /// Names each listed region (at its snapshot's end) or range (at the
    /// end of the time range) by what it holds.
    pub fn name_objects(&mut self, names: &mut dyn crate::Names) {
        match self {
            Hot::Snapshot(h) => {
                for r in &mut h.regions {
                    r.object = names.main_object(r.target_idx, h.end_us, r.start, r.end);
                }
            }
            Hot::Aggregate(h) => {
                for r in &mut h.ranges {
                    r.object = names.main_object(r.target_idx, h.end_us, r.start, r.end);
                }
            }
        }
    }

    /// Writes the report as an aligned text table.
    pub fn write_text(&self, w: &mut dyn Write) -> Result<(), Error> {
        match self {
            Hot::Snapshot(h) => {
                writeln!(
                    w,
                    "# hottest regions of the snapshot {} .. {} (sampling {}, aggregation {}, max nr_accesses {}; age_time counts windows as long as this one, {}): {} of {} regions",
                    fmt_us(h.start_us),
                    fmt_us(h.end_us),
                    fmt_us(h.sample_us),
                    fmt_us(h.aggr_us),
                    h.max_nr_accesses,
                    fmt_us(h.end_us.saturating_sub(h.start_us)),
                    h.regions.len(),
                    h.nr_regions
                )?;
                let rows: Vec<Vec<String>> = h
                    .regions
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        vec![
                            (i + 1).to_string(),
                            r.target_idx.to_string(),
                            fmt_addr(r.start),
                            fmt_addr(r.end),
                            fmt_bytes(r.size_bytes),
                            pct(r.access_frequency),
                            format!("{}/{}", r.nr_accesses, h.max_nr_accesses),
                            r.age_aggr_intervals.to_string(),
                            fmt_us(r.age_us),
                            r.object.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                let named = h.regions.iter().any(|r| r.object.is_some());
                let head = [
                    "rank", "target", "start", "end", "size", "access", "nr_acc", "age",
                    "age_time", "object",
                ];
                table(w, &head[..head.len() - usize::from(!named)], &rows)
            }
            Hot::Aggregate(h) => {
                writeln!(
                    w,
                    "# hottest address ranges, access frequency averaged over {} .. {} ({} snapshots): {} of {} ranges",
                    fmt_us(h.start_us),
                    fmt_us(h.end_us),
                    h.nr_snapshots,
                    h.ranges.len(),
                    h.nr_ranges
                )?;
                let rows: Vec<Vec<String>> = h
                    .ranges
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        vec![
                            (i + 1).to_string(),
                            r.target_idx.to_string(),
                            fmt_addr(r.start),
                            fmt_addr(r.end),
                            fmt_bytes(r.size_bytes),
                            pct(r.access_frequency),
                            fmt_us(r.monitored_us),
                            r.object.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                let named = h.ranges.iter().any(|r| r.object.is_some());
                let head = [
                    "rank",
                    "target",
                    "start",
                    "end",
                    "size",
                    "access",
                    "monitored",
                    "object",
                ];
                table(w, &head[..head.len() - usize::from(!named)], &rows)
            }
        }
    }

    /// Writes the report as one JSON object: `mode` (`snapshot` or
    /// `aggregate`) and the fields of [`HotSnapshot`] or [`HotAggregate`].
    pub fn write_json(&self, w: &mut dyn Write) -> Result<(), Error> {
        serde_json::to_writer(&mut *w, self).map_err(std::io::Error::from)?;
        writeln!(w)?;
        Ok(())
    }
}

fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

/// Writes a table: text columns left-aligned, numeric-looking ones right.
fn table(w: &mut dyn Write, head: &[&str], rows: &[Vec<String>]) -> Result<(), Error> {
    let widths: Vec<usize> = (0..head.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([head[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let left = |c: usize| matches!(head[c], "start" | "end" | "object");
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (c, cell) in cells.iter().enumerate() {
            if c > 0 {
                s.push_str("  ");
            }
            let wd = widths[c];
            if left(c) {
                s.push_str(&format!("{cell:<wd$}"));
            } else {
                s.push_str(&format!("{cell:>wd$}"));
            }
        }
        s.trim_end().to_string()
    };
    writeln!(w, "{}", line(head))?;
    for r in rows {
        // Rows may carry more cells (an object column left out).
        let cells: Vec<&str> = r.iter().take(head.len()).map(String::as_str).collect();
        writeln!(w, "{}", line(&cells))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_core::{Snapshot, TargetSnapshot};

    fn snap(i: u64, regions: &[(u64, u64, u32, u32)]) -> Snapshot {
        Snapshot {
            start_us: 1_000 + i * 100_000,
            end_us: 1_000 + (i + 1) * 100_000,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions: regions
                    .iter()
                    .map(|&(start, end, nr_accesses, age)| RegionSnapshot {
                        start,
                        end,
                        nr_accesses,
                        age,
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn snapshot_orders_by_frequency_then_size() {
        let snaps = vec![
            snap(0, &[(0, 4096, 20, 0)]),
            snap(
                1,
                &[
                    (0, 4096, 5, 1),
                    (4096, 3 * 4096, 5, 2),
                    (3 * 4096, 4 * 4096, 10, 3),
                    (4 * 4096, 5 * 4096, 0, 9),
                ],
            ),
        ];
        let Hot::Snapshot(h) = build(&snaps, &HotOptions::default()).unwrap() else {
            panic!()
        };
        let order: Vec<u64> = h.regions.iter().map(|r| r.start).collect();
        assert_eq!(order, [3 * 4096, 4096, 0, 4 * 4096]);
        assert_eq!(h.regions[0].access_frequency, 0.5);
        assert_eq!(h.regions[0].age_us, 300_000);
        assert_eq!((h.start_us, h.end_us), (100_000, 200_000));

        // A live window that took 190 ms instead of 100: ages count real time.
        let mut slow = snaps.clone();
        slow[1].end_us = slow[1].start_us + 190_000;
        let Hot::Snapshot(h) = build(&slow, &HotOptions::default()).unwrap() else {
            panic!()
        };
        assert_eq!(h.regions[0].age_us, 3 * 190_000);

        let opts = HotOptions {
            at_us: Some(50_000),
            top: 1,
            ..Default::default()
        };
        let Hot::Snapshot(h) = build(&snaps, &opts).unwrap() else {
            panic!()
        };
        assert_eq!(h.regions.len(), 1);
        assert_eq!(h.nr_regions, 1);
        assert_eq!(h.regions[0].nr_accesses, 20);
        let opts = HotOptions {
            at_us: Some(900_000),
            ..Default::default()
        };
        assert!(matches!(
            build(&snaps, &opts),
            Err(Error::NoSnapshotAt(900_000))
        ));
    }

    #[test]
    fn aggregate_averages_and_merges() {
        // [0, 8K) hot in the first snapshot only, split differently; [8K, 16K) always cold.
        let snaps = vec![
            snap(
                0,
                &[(0, 4096, 20, 0), (4096, 8192, 20, 0), (8192, 16384, 0, 0)],
            ),
            snap(
                1,
                &[(0, 8192, 0, 0), (8192, 12288, 0, 0), (12288, 16384, 0, 0)],
            ),
        ];
        let Hot::Aggregate(h) = build(
            &snaps,
            &HotOptions {
                aggregate: true,
                ..Default::default()
            },
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(h.nr_ranges, 2);
        assert_eq!(
            (
                h.ranges[0].start,
                h.ranges[0].end,
                h.ranges[0].access_frequency
            ),
            (0, 8192, 0.5)
        );
        assert_eq!(
            (
                h.ranges[1].start,
                h.ranges[1].end,
                h.ranges[1].access_frequency
            ),
            (8192, 16384, 0.0)
        );
        assert_eq!(h.ranges[0].monitored_us, 200_000);

        // Only the second snapshot.
        let opts = HotOptions {
            aggregate: true,
            time_range: Some((100_000, 200_000)),
            ..Default::default()
        };
        let Hot::Aggregate(h) = build(&snaps, &opts).unwrap() else {
            panic!()
        };
        assert_eq!(h.nr_ranges, 1);
        assert_eq!(h.nr_snapshots, 1);
    }

    proptest::proptest! {
        #[test]
        fn aggregate_matches_per_page_brute_force(
            snaps in proptest::collection::vec(
                (proptest::collection::btree_set(0u64..=32, 2..8), proptest::collection::vec(0u32..=20, 8), 1u64..200_000),
                1..10,
            )
        ) {
            let mut t = 0;
            let snaps: Vec<Snapshot> = snaps
                .into_iter()
                .map(|(cuts, acc, len)| {
                    let cuts: Vec<u64> = cuts.into_iter().collect();
                    let regions = cuts
                        .windows(2)
                        .zip(&acc)
                        .map(|(w, &a)| RegionSnapshot { start: w[0] * 4096, end: w[1] * 4096, nr_accesses: a, age: 0 })
                        .collect();
                    t += len;
                    Snapshot { start_us: t - len, end_us: t, sample_us: 5_000, aggr_us: 100_000, targets: vec![TargetSnapshot { target_idx: 0, regions }] }
                })
                .collect();
            let opts = HotOptions { aggregate: true, top: 0, ..Default::default() };
            let Hot::Aggregate(h) = build(&snaps, &opts).unwrap() else { panic!() };
            let mut covered = 0;
            for r in &h.ranges {
                for page in r.start / 4096..r.end / 4096 {
                    let (mut num, mut den) = (0.0, 0.0);
                    for s in &snaps {
                        let dt = (s.end_us - s.start_us) as f64;
                        if let Some(x) = s.targets[0].regions.iter().find(|x| x.start <= page * 4096 && page * 4096 < x.end) {
                            num += dt * f64::from(x.nr_accesses) / 20.0;
                            den += dt;
                        }
                    }
                    proptest::prop_assert!((r.access_frequency - num / den).abs() < 1e-5, "page {page}: {} vs {}", r.access_frequency, num / den);
                    covered += 1;
                }
            }
            let pages: std::collections::BTreeSet<u64> = snaps
                .iter()
                .flat_map(|s| s.targets[0].regions.iter().flat_map(|x| x.start / 4096..x.end / 4096))
                .collect();
            proptest::prop_assert_eq!(covered, pages.len());
        }
    }

    #[test]
    fn freq_map_stays_bounded() {
        let mut m = FreqMap::default();
        for i in 0..50u64 {
            let regions: Vec<RegionSnapshot> = (0..1000u64)
                .map(|k| {
                    let s = k * 1_000_000 + (i * 7919 + k * 104_729) % 500_000;
                    RegionSnapshot {
                        start: s,
                        end: s + 400_000,
                        nr_accesses: ((i + k) % 21) as u32,
                        age: 0,
                    }
                })
                .collect();
            m.add(&regions, 100.0, 20);
            assert!(m.pieces.len() <= MAX_PIECES, "{}", m.pieces.len());
            assert!(m.batch.len() <= BATCH * 2 * 1000, "{}", m.batch.len());
        }
        let p = m.pieces();
        assert!(p.len() <= MAX_PIECES, "{}", p.len());
        assert!(p.windows(2).all(|w| w[0].end <= w[1].start));
    }
}
