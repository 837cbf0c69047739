//! The enhanced adaptation mode (`--mode enhanced`): two additions to
//! DAMON's adaptive regions for its two blind spots, each keeping the
//! kernel's cost of one access check per region per sample.
//!
//! - **Residency.** The kernel monitors a process's mappings minus their two
//!   biggest unmapped gaps, so a large reservation of which little is
//!   resident (a JVM heap, an allocator arena, a guest's memory) spreads the
//!   region budget over memory that cannot be accessed, and a small hot
//!   object in it has a tiny chance of being sampled. Where the operations
//!   set can tell which pages are resident ([`Operations::resident_ranges`]),
//!   [`fit_resident`] narrows the monitoring ranges to the resident parts,
//!   leaving out the biggest non-resident gaps (as many as the minimum
//!   region count allows), at start and at every ops update.
//! - **Moving windows.** Regions split at random points and merge once per
//!   aggregation, so a window that moves at a steady rate (a scan, a sweep)
//!   is always seen a step behind. [`Movement`] matches each window's runs
//!   of hot regions with the previous window's; a run that moved steadily
//!   one way in the last three windows is predicted to move by their mean
//!   once more, and the regions are split at its predicted edges, so that
//!   the next window counts the run on regions that fit it. Where such a
//!   scan will start over (the other end of its span of memory, or where
//!   it was seen to start over on an earlier lap) is cut ahead too, and the
//!   run that appears there goes on at the leaving run's pace.
//!
//! [`Operations::resident_ranges`]: crate::Operations::resident_ranges

use crate::region::{align_down, align_up, Addr, AddrRange, Region, Target};

/// The parts of `ranges` (sorted, disjoint) that `resident` (sorted,
/// disjoint) covers, page-aligned, with the smallest gaps between them
/// bridged until at most `max_ranges` remain (the biggest gaps, ties to
/// the earlier one, stay out). Nothing resident: `ranges` unchanged, so a
/// target never loses its regions.
pub fn fit_resident(
    ranges: &[AddrRange],
    resident: &[AddrRange],
    max_ranges: usize,
    min_sz: u64,
) -> Vec<AddrRange> {
    let mut pieces: Vec<AddrRange> = Vec::new();
    let mut j = 0;
    for r in ranges {
        while j < resident.len() && resident[j].end <= r.start {
            j += 1;
        }
        let mut k = j;
        while k < resident.len() && resident[k].start < r.end {
            let s = align_down(resident[k].start.max(r.start), min_sz).max(r.start);
            let e = align_up(resident[k].end.min(r.end), min_sz).min(r.end);
            if s < e {
                match pieces.last_mut() {
                    Some(p) if p.end >= s => p.end = p.end.max(e),
                    _ => pieces.push(AddrRange::new(s, e)),
                }
            }
            k += 1;
        }
    }
    if pieces.is_empty() {
        return ranges.to_vec();
    }
    let max_ranges = max_ranges.max(1);
    if pieces.len() <= max_ranges {
        return pieces;
    }
    // Keep the max_ranges - 1 biggest gaps; bridge the others.
    let mut gaps: Vec<(u64, usize)> = pieces
        .windows(2)
        .enumerate()
        .map(|(i, w)| (w[1].start - w[0].end, i))
        .collect();
    gaps.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut keep = vec![false; pieces.len() - 1];
    for &(_, i) in gaps.iter().take(max_ranges - 1) {
        keep[i] = true;
    }
    let mut out = Vec::with_capacity(max_ranges);
    let mut cur = pieces[0];
    for (i, p) in pieces.iter().enumerate().skip(1) {
        if keep[i - 1] {
            out.push(cur);
            cur = *p;
        } else {
            cur.end = p.end;
        }
    }
    out.push(cur);
    out
}

/// A run of adjacent hot regions in one aggregation window, and how far its
/// middle moved in the last windows it was matched in (newest last, at
/// most [`MOVES_KEPT`]).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Run {
    start: Addr,
    end: Addr,
    moves: Vec<i128>,
}

impl Run {
    fn width(&self) -> u64 {
        self.end - self.start
    }

    /// The move predicted for the next window: the mean of the moves kept,
    /// when there are at least [`MIN_MOVES`] of them, all one way, none
    /// under an eighth of the run's width (less is the edges' jitter) and
    /// the longest at most four times the shortest. A mean, because a run's
    /// edges are only as sharp as its regions: where the regions are
    /// coarse, single moves jump by a region's width and back.
    fn predicted(&self) -> Option<i128> {
        if self.moves.len() < MIN_MOVES {
            return None;
        }
        let w = i128::from(self.width());
        let one_way = self.moves.iter().all(|&d| d > 0) || self.moves.iter().all(|&d| d < 0);
        let (lo, hi) = self.moves.iter().fold((i128::MAX, 0), |(lo, hi), &d| {
            (lo.min(d.abs()), hi.max(d.abs()))
        });
        let steady = one_way && lo * 8 >= w && hi <= 4 * lo;
        steady.then(|| self.moves.iter().sum::<i128>() / self.moves.len() as i128)
    }
}

/// Follows runs of hot regions from window to window (see the module
/// documentation). At most [`Movement::MAX_RUNS`] runs per target are
/// followed, so a window costs O(regions).
#[derive(Clone, Debug, Default)]
pub struct Movement {
    runs: Vec<Vec<Run>>,
    /// Per target, where scans were seen to start over (newest last, at
    /// most [`Movement::MAX_RUNS`]).
    laps: Vec<Vec<Lap>>,
    /// Windows (per target) in which a prediction cut regions, for tests
    /// and reports.
    pub predictions: u64,
}

/// Where a scan was seen to start over: a run moving steadily (up, or
/// down) left at `turn` as a new run appeared at `restart`, behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lap {
    turn: Addr,
    restart: Addr,
    up: bool,
}

/// Pieces each predicted ramp is cut into.
const RAMP_PIECES: i128 = 4;
/// Moves a run's prediction averages over.
const MOVES_KEPT: usize = 3;
/// Moves seen before a run is predicted to move again.
const MIN_MOVES: usize = 3;
/// How deep, in moves, the far end of a span is cut for a run about to
/// leave it.
const RESTART_MOVES: i128 = 2;

impl Movement {
    pub const MAX_RUNS: usize = 8;

    /// Forgets target `idx`; the targets after it move down one position.
    pub(crate) fn remove_target(&mut self, idx: usize) {
        if idx < self.runs.len() {
            self.runs.remove(idx);
        }
        if idx < self.laps.len() {
            self.laps.remove(idx);
        }
    }

    /// After an aggregation window: finds the hot runs of each target in
    /// the counts the window ended with (`last_nr_accesses`, the window's
    /// maximum `max_nr`), matches them with the previous window's, and
    /// splits regions at the predicted edges of the runs that moved
    /// steadily. Splits only while the region count is below `max_nr_regions`.
    pub fn observe(
        &mut self,
        targets: &mut [Target],
        max_nr: u32,
        max_nr_regions: usize,
        min_sz: u64,
    ) {
        self.runs.resize(targets.len(), Vec::new());
        self.laps.resize(targets.len(), Vec::new());
        let mut nr: usize = targets.iter().map(|t| t.regions.len()).sum();
        for ((t, prev), laps) in targets
            .iter_mut()
            .zip(self.runs.iter_mut())
            .zip(self.laps.iter_mut())
        {
            let mut runs = hot_runs(&t.regions, max_nr);
            let spans = spans(&t.regions);
            let mut cuts: Vec<Addr> = Vec::new();
            let matches: Vec<Option<usize>> = runs.iter().map(|r| best_match(prev, r)).collect();
            // Taken before the loop below borrows the runs to fill them in.
            let widths: Vec<u64> = runs.iter().map(Run::width).collect();
            for (run, m) in runs.iter_mut().zip(&matches) {
                let span = span_of(&spans, run);
                match m {
                    Some(i) => {
                        let p = &prev[*i];
                        // How far its middle moved.
                        let d = (i128::from(run.start) + i128::from(run.end)
                            - i128::from(p.start)
                            - i128::from(p.end))
                            / 2;
                        let skip = p.moves.len().saturating_sub(MOVES_KEPT - 1);
                        run.moves = p.moves[skip..].to_vec();
                        run.moves.push(d);
                    }
                    None => {
                        // A scan starting over: a run that appears where
                        // none was, behind a run at least half its width
                        // that moved steadily and vanishes or shrinks by a
                        // quarter (its end leaving the scanned memory).
                        // Where the new run is where such a scan starts
                        // over (the start of its span, for a scan moving
                        // up, or where one was seen to), it goes on at
                        // the leaving run's pace; elsewhere it is
                        // remembered as a lap, for the next time.
                        let w = run.width();
                        let leaving =
                            |i: usize, p: &Run| match matches.iter().position(|m| *m == Some(i)) {
                                None => true,
                                Some(j) => widths[j] * 4 <= p.width() * 3,
                            };
                        let lap = prev.iter().enumerate().find_map(|(i, p)| {
                            let v = p.predicted()?;
                            let up = v > 0;
                            let behind = if up {
                                run.end <= p.start
                            } else {
                                run.start >= p.end
                            };
                            (behind && w <= 2 * p.width() && leaving(i, p)).then_some((
                                p,
                                v.abs(),
                                Lap {
                                    turn: if up { p.end } else { p.start },
                                    restart: if up { run.start } else { run.end },
                                    up,
                                },
                            ))
                        });
                        if let Some((p, pace, lap)) = lap {
                            let span_end = if lap.up { span.0 } else { span.1 };
                            let known = laps.iter().any(|l| {
                                l.up == lap.up
                                    && i128::from(l.restart.abs_diff(lap.restart)) <= pace
                            });
                            if lap.restart == span_end || known {
                                run.moves = p.moves.clone();
                            } else {
                                if laps.len() == Movement::MAX_RUNS {
                                    laps.remove(0);
                                }
                                laps.push(lap);
                            }
                        }
                    }
                }
                if let Some(v) = run.predicted() {
                    ramp_cuts(run, v, min_sz, &mut cuts);
                    restart_cuts(span, laps, run, v, min_sz, &mut cuts);
                }
            }
            *prev = runs;
            if cuts.is_empty() {
                continue;
            }
            cuts.sort_unstable();
            cuts.dedup();
            let budget = max_nr_regions.saturating_sub(nr);
            let made = split_at(&mut t.regions, &cuts, budget);
            nr += made;
            if made > 0 {
                self.predictions += 1;
            }
        }
    }
}

/// Where to cut for a run predicted to move by `v`: the next window sees it
/// over [start + v, end + v), with a ramp |v| wide at either end (pages the
/// window enters or leaves while it is counted). A run's edges are where
/// its counts cross a quarter of the maximum, inside those ramps, so each
/// ramp is taken as half a move either side of its predicted edge, and cut
/// in [`RAMP_PIECES`] so that its pages' frequencies are told apart.
fn ramp_cuts(run: &Run, v: i128, min_sz: u64, cuts: &mut Vec<Addr>) {
    let half = v.abs() / 2;
    let (a, b) = (
        i128::from(run.start) + v - half,
        i128::from(run.end) + v + half,
    );
    for k in 0..=RAMP_PIECES {
        let step = v.abs() * k / RAMP_PIECES;
        for edge in [a + step, b - step] {
            cut_at(edge, min_sz, cuts);
        }
    }
}

/// A cut at `c`, aligned down to `min_sz`, where `c` is an address.
fn cut_at(c: i128, min_sz: u64, cuts: &mut Vec<Addr>) {
    if c > 0 && c < i128::from(u64::MAX) {
        cuts.push(align_down(c as u64, min_sz));
    }
}

/// The spans of adjacent regions (monitored memory without a gap), in
/// order.
fn spans(regions: &[Region]) -> Vec<(Addr, Addr)> {
    let mut out: Vec<(Addr, Addr)> = Vec::new();
    for r in regions {
        match out.last_mut() {
            Some(span) if span.1 == r.ar.start => span.1 = r.ar.end,
            _ => out.push((r.ar.start, r.ar.end)),
        }
    }
    out
}

/// The span `run` lies in (a run never crosses a gap).
fn span_of(spans: &[(Addr, Addr)], run: &Run) -> (Addr, Addr) {
    let i = spans.partition_point(|s| s.1 <= run.start);
    spans.get(i).copied().unwrap_or((run.start, run.end))
}

/// A run predicted to leave the memory it scans: past the end of its span
/// (a scan that reaches the end of its memory most often starts over at
/// the other end), or to a lap's turn (where a scan was seen to start over
/// before). Where it would start over is cut ahead, [`RESTART_MOVES`] moves
/// deep, in pieces of a ramp's, so that the window entering it is seen at
/// once.
fn restart_cuts(
    span: (Addr, Addr),
    laps: &[Lap],
    run: &Run,
    v: i128,
    min_sz: u64,
    cuts: &mut Vec<Addr>,
) {
    let (s, e) = (i128::from(span.0), i128::from(span.1));
    let (start, end) = (i128::from(run.start), i128::from(run.end));
    let (up, pace) = (v > 0, v.abs());
    let depth = RESTART_MOVES * pace;
    // where the scan would start over, as the lowest address to cut from
    let mut from: Vec<i128> = Vec::new();
    if up && end + v > e {
        from.push(s);
    } else if !up && start + v < s {
        from.push(e - depth);
    }
    for l in laps.iter().filter(|l| l.up == up) {
        let turn = i128::from(l.turn);
        let restart = i128::from(l.restart);
        if up && end + v + pace / 2 >= turn && end <= turn + pace {
            from.push(restart);
        } else if !up && start + v - pace / 2 <= turn && start >= turn - pace {
            from.push(restart - depth);
        }
    }
    let pieces = RESTART_MOVES * RAMP_PIECES;
    for f in from {
        for k in 1..pieces {
            cut_at(f + depth * k / pieces, min_sz, cuts);
        }
    }
}

fn similar_width(a: &Run, b: &Run) -> bool {
    let (wa, wb) = (a.width(), b.width());
    wa <= 2 * wb && wb <= 2 * wa
}

/// Runs of adjacent regions whose window count is at least a quarter of
/// the window's maximum (and not zero), the widest [`Movement::MAX_RUNS`].
fn hot_runs(regions: &[Region], max_nr: u32) -> Vec<Run> {
    let thres = (max_nr / 4).max(1);
    let mut runs: Vec<Run> = Vec::new();
    for r in regions {
        if r.last_nr_accesses < thres {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.end == r.ar.start => run.end = r.ar.end,
            _ => runs.push(Run {
                start: r.ar.start,
                end: r.ar.end,
                moves: Vec::new(),
            }),
        }
    }
    if runs.len() > Movement::MAX_RUNS {
        runs.sort_by_key(|r| std::cmp::Reverse(r.width()));
        runs.truncate(Movement::MAX_RUNS);
        runs.sort_by_key(|r| r.start);
    }
    runs
}

/// The previous run `run` most likely is: of a width within a factor of
/// two, its middle nearest to `run`'s and at most one width away.
fn best_match(prev: &[Run], run: &Run) -> Option<usize> {
    let w = run.width();
    let mid = |r: &Run| r.start / 2 + r.end / 2;
    prev.iter()
        .enumerate()
        .filter(|(_, p)| similar_width(p, run))
        .map(|(i, p)| (mid(p).abs_diff(mid(run)), i))
        .filter(|&(dist, _)| dist <= w)
        .min_by_key(|&(dist, _)| dist)
        .map(|(_, i)| i)
}

/// Splits `regions` (sorted, disjoint) at each of `cuts` (sorted) that
/// falls strictly inside a region, at most `budget` times; both pieces
/// keep the region's counters. Returns the splits made.
fn split_at(regions: &mut Vec<Region>, cuts: &[Addr], budget: usize) -> usize {
    if budget == 0 {
        return 0;
    }
    let mut out = Vec::with_capacity(regions.len() + cuts.len());
    let mut made = 0;
    let mut c = cuts.iter().peekable();
    for r in regions.drain(..) {
        let mut left = r;
        while let Some(&&cut) = c.peek() {
            if cut <= left.ar.start {
                c.next();
                continue;
            }
            if cut >= left.ar.end {
                break;
            }
            c.next();
            if made == budget {
                continue;
            }
            let mut piece = left;
            piece.ar.end = cut;
            out.push(piece);
            left.ar.start = cut;
            made += 1;
        }
        out.push(left);
    }
    *regions = out;
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    fn ar(s: u64, e: u64) -> AddrRange {
        AddrRange::new(s * P, e * P)
    }

    #[test]
    fn fit_keeps_resident_parts_and_biggest_gaps() {
        // ranges [0,1000) and [5000,5010); resident pieces at 10-20, 22-30,
        // 500-510, 900-1100 (crosses the range's end), 5000-5001
        let ranges = [ar(0, 1000), ar(5000, 5010)];
        let res = [
            ar(10, 20),
            ar(22, 30),
            ar(500, 510),
            ar(900, 1100),
            ar(5000, 5001),
        ];
        assert_eq!(
            fit_resident(&ranges, &res, 10, P),
            vec![
                ar(10, 20),
                ar(22, 30),
                ar(500, 510),
                ar(900, 1000),
                ar(5000, 5001)
            ]
        );
        // three ranges: the two biggest gaps (1000-5000: 4000 pages, and
        // 30-500: 470; not 510-900: 390, nor 20-22) stay out
        assert_eq!(
            fit_resident(&ranges, &res, 3, P),
            vec![ar(10, 30), ar(500, 1000), ar(5000, 5001)]
        );
        assert_eq!(fit_resident(&ranges, &res, 1, P), vec![ar(10, 5001)]);
        // nothing resident: the ranges as they were
        assert_eq!(
            fit_resident(&ranges, &[ar(2000, 3000)], 3, P),
            ranges.to_vec()
        );
        // unaligned resident bytes widen to whole pages
        assert_eq!(
            fit_resident(&[ar(0, 10)], &[AddrRange::new(P + 1, 2 * P + 1)], 3, P),
            vec![ar(1, 3)]
        );
    }

    fn reg(s: u64, e: u64, last: u32) -> Region {
        Region {
            last_nr_accesses: last,
            ..Region::new(s * P, e * P)
        }
    }

    /// A span of pages 0..end, cold but for 10 hot pages from `at`.
    fn hot_at(at: u64, end: u64) -> Vec<Region> {
        vec![reg(0, at, 0), reg(at, at + 10, 20), reg(at + 10, end, 0)]
    }

    #[test]
    fn split_at_cuts_inside_regions_within_budget() {
        let mut rs = vec![reg(0, 10, 1), reg(10, 20, 2)];
        let made = split_at(&mut rs, &[0, 5 * P, 10 * P, 15 * P, 30 * P], 5);
        assert_eq!(made, 2);
        let spans: Vec<_> = rs
            .iter()
            .map(|r| (r.ar.start / P, r.ar.end / P, r.last_nr_accesses))
            .collect();
        assert_eq!(spans, vec![(0, 5, 1), (5, 10, 1), (10, 15, 2), (15, 20, 2)]);
        let mut rs = vec![reg(0, 10, 1), reg(10, 20, 2)];
        assert_eq!(split_at(&mut rs, &[5 * P, 15 * P], 1), 1);
        assert_eq!(rs.len(), 3);
    }

    /// A hot run of 10 pages moving 8 pages a window: after three moves the
    /// regions are cut ahead of the fourth; when it starts over at the
    /// start of its span, it is followed there at once.
    #[test]
    fn steady_movement_is_predicted() {
        let mut m = Movement::default();
        let window = |at: u64| hot_at(at, 1000);
        let mut t = [Target {
            pid: 0,
            regions: window(100),
        }];
        m.observe(&mut t, 20, 1000, P);
        assert_eq!(t[0].regions.len(), 3, "first sighting: nothing to match");
        for at in [108, 116] {
            t[0].regions = window(at);
            m.observe(&mut t, 20, 1000, P);
            assert_eq!(t[0].regions.len(), 3, "not yet steady at {at}");
        }
        t[0].regions = window(124);
        m.observe(&mut t, 20, 1000, P);
        let starts: Vec<u64> = t[0].regions.iter().map(|r| r.ar.start / P).collect();
        // the run's next place, 132-142, and its two 8-page ramps centred
        // on those edges, in quarters
        assert_eq!(
            starts,
            vec![0, 124, 128, 130, 132, 134, 136, 138, 140, 142, 144, 146]
        );
        assert_eq!(m.predictions, 1);
        // starting over at the span's start (a sweep wrapping round): the
        // run goes on from there
        t[0].regions = vec![reg(0, 10, 20), reg(10, 1000, 0)];
        m.observe(&mut t, 20, 1000, P);
        let starts: Vec<u64> = t[0].regions.iter().map(|r| r.ar.start / P).collect();
        assert_eq!(starts, vec![0, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22]);
    }

    /// A scan that starts over at its span's start while its end still
    /// leaves the span: the new run takes the shrinking run's pace. Not
    /// when the moving run keeps its width, nor when the new run appears
    /// anywhere but at the span's start.
    #[test]
    fn a_run_starting_over_takes_the_leaving_runs_pace() {
        for (shrinks, at_start, predicted) in [
            (true, true, true),
            (false, true, false),
            (true, false, false),
        ] {
            let mut m = Movement::default();
            for at in [100, 108, 116, 124] {
                let mut t = [Target {
                    pid: 0,
                    regions: hot_at(at, 1000),
                }];
                m.observe(&mut t, 20, 1000, P);
            }
            let top = if shrinks { (132, 138) } else { (132, 142) };
            let low = if at_start { 0 } else { 10 };
            let mut regions = vec![
                reg(low, low + 4, 20),
                reg(low + 4, top.0, 0),
                reg(top.0, top.1, 20),
                reg(top.1, 1000, 0),
            ];
            if !at_start {
                regions.insert(0, reg(0, low, 0));
            }
            let mut t = [Target { pid: 0, regions }];
            m.observe(&mut t, 20, 1000, P);
            // a cut in the new run's predicted trailing ramp: its start
            // low + 8, less half a move, plus a quarter move
            let cut_low = t[0]
                .regions
                .iter()
                .any(|r| r.ar.start == (low + 4) * P + 2 * P);
            assert_eq!(
                cut_low, predicted,
                "shrinks: {shrinks}, at the start: {at_start}"
            );
        }
    }

    /// A run about to move past its span's end: the span's start is cut
    /// ahead, two moves deep in quarter moves, for a scan starting over.
    #[test]
    fn a_run_leaving_its_span_has_the_span_start_cut_ahead() {
        let mut m = Movement::default();
        let window = |at: u64| hot_at(at, 196);
        let mut t = [Target {
            pid: 0,
            regions: window(150),
        }];
        m.observe(&mut t, 20, 1000, P);
        for at in [158, 166, 174] {
            t[0].regions = window(at);
            m.observe(&mut t, 20, 1000, P);
        }
        // 174-184 moving 8 a window stays inside 0-196: nothing at the start
        assert_eq!(t[0].regions[0].ar, AddrRange::new(0, 174 * P));
        t[0].regions = window(182);
        m.observe(&mut t, 20, 1000, P);
        let low: Vec<u64> = t[0]
            .regions
            .iter()
            .map(|r| r.ar.start / P)
            .filter(|&s| s < 100)
            .collect();
        assert_eq!(low, vec![0, 2, 4, 6, 8, 10, 12, 14]);
    }

    /// A scan over part of a span (200-300 of 0-1000), 10 pages wide,
    /// 8 pages a window. Its first lap is remembered, not followed: the new
    /// run at 200 is not at the span's start. On the second lap, the start
    /// is cut ahead as the run nears 300, and the new run takes its pace.
    #[test]
    fn a_scan_over_part_of_a_span_is_learnt_from_its_first_lap() {
        let mut m = Movement::default();
        let window = |at: u64| hot_at(at, 1000);
        let starting_over = |at: u64| -> Vec<Region> {
            vec![
                reg(0, 200, 0),
                reg(200, 204, 20),
                reg(204, at, 0),
                reg(at, at + 4, 20),
                reg(at + 4, 1000, 0),
            ]
        };
        let mut t = [Target {
            pid: 0,
            regions: Vec::new(),
        }];
        let cut_ahead = |t: &[Target]| t[0].regions.iter().any(|r| r.ar.start == 202 * P);
        for lap in 0..2 {
            for at in [258, 266, 274, 282] {
                t[0].regions = window(at);
                m.observe(&mut t, 20, 1000, P);
            }
            // 282-292 predicted to 290-300: at the turn on the second lap
            assert_eq!(cut_ahead(&t), lap == 1, "lap {lap}");
            t[0].regions = starting_over(296);
            m.observe(&mut t, 20, 1000, P);
            // the new run 200-204, predicted 204-212 with ramps from 200
            let followed = t[0].regions.iter().any(|r| r.ar.start == 214 * P);
            assert_eq!(followed, lap == 1, "lap {lap}");
        }
    }

    /// Runs that jitter (moves both ways, or of very different lengths)
    /// are not predicted.
    #[test]
    fn jitter_is_not_predicted() {
        for places in [[100, 106, 101, 107, 102], [100, 102, 112, 113, 123]] {
            let mut m = Movement::default();
            for at in places {
                let mut t = [Target {
                    pid: 0,
                    regions: hot_at(at, 1000),
                }];
                m.observe(&mut t, 20, 1000, P);
                assert_eq!(t[0].regions.len(), 3, "{places:?} at {at}");
            }
            assert_eq!(m.predictions, 0);
        }
    }

    #[test]
    fn no_prediction_without_budget() {
        let mut m = Movement::default();
        for at in [100, 105, 110] {
            let mut t = [Target {
                pid: 0,
                regions: hot_at(at, 1000),
            }];
            m.observe(&mut t, 20, 3, P);
            assert_eq!(t[0].regions.len(), 3);
        }
    }
}
