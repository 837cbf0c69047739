//! Adaptive regions adjustment: merge, split and aging (kernel `core.c`).

use rand::{Rng, RngExt};

use crate::region::{align_down, align_up, AddrRange, Region, Target};

/// Ages `r` for the window that just ended: reset when its count moved by
/// more than `thres` or switched between zero and non-zero, else +1.
fn age_region(r: &mut Region, thres: u32) {
    if r.nr_accesses.abs_diff(r.last_nr_accesses) > thres
        || (r.nr_accesses == 0) != (r.last_nr_accesses == 0)
    {
        r.age = 0;
    } else {
        r.age = r.age.saturating_add(1);
    }
}

/// Folds `r` into its left neighbour `l`: size-weighted count and age.
fn merge_two(l: &mut Region, r: &Region) {
    let (sl, sr) = (u128::from(l.sz()), u128::from(r.sz()));
    let avg = |a: u32, b: u32| ((u128::from(a) * sl + u128::from(b) * sr) / (sl + sr)) as u32;
    l.nr_accesses = avg(l.nr_accesses, r.nr_accesses);
    l.nr_accesses_bp = l.nr_accesses.saturating_mul(10_000);
    l.age = avg(l.age, r.age);
    l.ar.end = r.ar.end;
}

/// One merge pass over a target's regions, in address order. The merged
/// region keeps absorbing right neighbours, so a run of similar regions
/// collapses left to right, each step compared with the running average.
/// `age` decides whether regions are aged in this pass.
pub(crate) fn merge_regions_of(t: &mut Target, thres: u32, sz_limit: u64, age: bool) {
    let mut out: Vec<Region> = Vec::with_capacity(t.regions.len());
    for mut r in t.regions.drain(..) {
        if age {
            age_region(&mut r, thres);
        }
        if let Some(prev) = out.last_mut() {
            if prev.ar.end == r.ar.start
                && prev.nr_accesses.abs_diff(r.nr_accesses) <= thres
                && prev.sz() + r.sz() <= sz_limit
            {
                merge_two(prev, &r);
                continue;
            }
        }
        out.push(r);
    }
    t.regions = out;
}

/// Merges adjacent regions of similar frequency: `max_nr / 10` first, then
/// doubling the threshold while the count is above `max_nr_regions`.
pub(crate) fn merge_regions(
    targets: &mut [Target],
    max_nr: u32,
    sz_limit: u64,
    max_nr_regions: u32,
    max_thres: u32,
) {
    let mut thres = max_nr / 10;
    loop {
        for t in targets.iter_mut() {
            merge_regions_of(t, thres, sz_limit, true);
        }
        let nr: usize = targets.iter().map(|t| t.regions.len()).sum();
        thres = thres.saturating_mul(2).max(1);
        if !(nr > max_nr_regions as usize && thres / 2 < max_thres) {
            break;
        }
    }
}

/// Ages every region without merging: the `--fixed-regions` baseline keeps
/// its regions static but still reports ages.
pub(crate) fn age_regions(targets: &mut [Target], max_nr: u32) {
    for r in targets.iter_mut().flat_map(|t| t.regions.iter_mut()) {
        age_region(r, max_nr / 10);
    }
}

/// Splits each region into two, or three when the region count has not
/// changed since the last split and is below a third of the maximum, at
/// random points between 10% and 90%:
///
/// ```text
///   |------------------ r ------------------|
///   |------ 30% ------|-------- 70% --------|     2 pieces
///   |-- 40% --|- 60% -|-------- 70% --------|     3 pieces: the left one again
/// ```
///
/// Children inherit every counter of their parent. Returns the new
/// `last_nr_regions`: the region count before splitting, or, when there are
/// too many regions to split (more than half the maximum), the old value
/// unchanged, as in the kernel, which returns before updating it.
pub(crate) fn split_regions<R: Rng>(
    targets: &mut [Target],
    max_nr_regions: u32,
    last_nr_regions: usize,
    min_sz: u64,
    rng: &mut R,
) -> usize {
    let nr: usize = targets.iter().map(|t| t.regions.len()).sum();
    if nr > max_nr_regions as usize / 2 {
        return last_nr_regions;
    }
    let subs = if last_nr_regions == nr && nr < max_nr_regions as usize / 3 {
        3
    } else {
        2
    };
    let mut pieces: Vec<Region> = Vec::with_capacity(subs);
    for t in targets.iter_mut() {
        let mut out = Vec::with_capacity(t.regions.len() * subs);
        for r in t.regions.drain(..) {
            // Right-hand pieces, collected right to left.
            pieces.clear();
            let mut left = r;
            let mut sz = r.sz();
            for _ in 0..subs - 1 {
                if sz <= 2 * min_sz {
                    break;
                }
                let pct = rng.random_range(1..10u64);
                let sub = align_down((u128::from(pct) * u128::from(sz) / 10) as u64, min_sz);
                if sub == 0 || sub >= sz {
                    continue;
                }
                let mut right = left;
                right.ar.start = left.ar.start + sub;
                left.ar.end = right.ar.start;
                pieces.push(right);
                sz = sub;
            }
            out.push(left);
            out.extend(pieces.drain(..).rev());
        }
        t.regions = out;
    }
    nr
}

/// Fits a target's regions to new monitoring ranges (kernel
/// `damon_set_regions`): regions outside every range go, the first and last
/// regions inside a range are stretched to its ends, and holes inside a range
/// get fresh regions. Surviving regions keep their monitoring results.
pub(crate) fn set_regions(t: &mut Target, ranges: &[AddrRange], min_sz: u64) {
    t.regions
        .retain(|r| ranges.iter().any(|ar| r.ar.intersects(ar)));
    let old = std::mem::take(&mut t.regions);
    let mut out: Vec<Region> = Vec::with_capacity(old.len() + ranges.len());
    let mut i = 0;
    for range in ranges {
        let (start, end) = (align_down(range.start, min_sz), align_up(range.end, min_sz));
        // Regions before this range that intersect no later range were removed
        // above; those left before it belong to an earlier range.
        while i < old.len() && old[i].ar.end <= range.start {
            push_unique(&mut out, old[i]);
            i += 1;
        }
        let first = i;
        while i < old.len() && old[i].ar.intersects(range) {
            i += 1;
        }
        if first == i {
            out.push(Region::new(start, end));
            continue;
        }
        let mut cursor = start;
        for (k, r) in old[first..i].iter().enumerate() {
            let mut r = *r;
            if k == 0 {
                r.ar.start = start;
            }
            if first + k + 1 == i {
                r.ar.end = end;
            }
            if r.ar.start > cursor {
                out.push(Region::new(cursor, r.ar.start));
            }
            cursor = r.ar.end;
            out.push(r);
        }
    }
    for r in &old[i..] {
        push_unique(&mut out, *r);
    }
    t.regions = out;
}

/// Appends `r` unless the stretched previous region already covers it (a
/// region intersecting two ranges is kept once, for the first).
fn push_unique(out: &mut Vec<Region>, r: Region) {
    if out.last().is_none_or(|p| p.ar.end <= r.ar.start) {
        out.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn reg(s: u64, e: u64, nr: u32, age: u32) -> Region {
        Region {
            nr_accesses: nr,
            nr_accesses_bp: nr * 10_000,
            age,
            ..Region::new(s, e)
        }
    }

    fn target(rs: &[Region]) -> Target {
        Target {
            pid: 0,
            regions: rs.to_vec(),
        }
    }

    fn spans(t: &Target) -> Vec<(u64, u64, u32, u32)> {
        t.regions
            .iter()
            .map(|r| (r.ar.start, r.ar.end, r.nr_accesses, r.age))
            .collect()
    }

    #[test]
    fn merge_table() {
        // thres 1, sz_limit 1000; last_nr_accesses equal to nr so ages only grow.
        //   0    10    20    30    40    50
        //   |-5--|-6---|-20--|-19--|  gap |-0--|
        // -> [0,20) avg 5.5->5, [20,40) avg 19.5->19, [50,60) alone (not adjacent)
        let mut rs = vec![
            reg(0, 10, 5, 2),
            reg(10, 20, 6, 4),
            reg(20, 30, 20, 0),
            reg(30, 40, 19, 0),
            reg(50, 60, 0, 7),
        ];
        for r in &mut rs {
            r.last_nr_accesses = r.nr_accesses;
        }
        let mut t = target(&rs);
        merge_regions_of(&mut t, 1, 1000, true);
        // ages +1 before merging: (3*10 + 5*10)/20 = 4
        assert_eq!(
            spans(&t),
            vec![(0, 20, 5, 4), (20, 40, 19, 1), (50, 60, 0, 8)]
        );
    }

    #[test]
    fn merge_respects_size_limit_and_running_average() {
        //   0   10   20   30
        //   |-4-|-5-|-6--|      thres 1: 4+5 -> 4 (size-weighted 4.5 truncates), then |4-6| = 2 > 1
        let mut t = target(&[reg(0, 10, 4, 0), reg(10, 20, 5, 0), reg(20, 30, 6, 0)]);
        merge_regions_of(&mut t, 1, 1000, false);
        assert_eq!(spans(&t), vec![(0, 20, 4, 0), (20, 30, 6, 0)]);
        // sz_limit 15 forbids any merge
        let mut t = target(&[reg(0, 10, 4, 0), reg(10, 20, 4, 0)]);
        merge_regions_of(&mut t, 1, 15, false);
        assert_eq!(t.regions.len(), 2);
    }

    #[test]
    fn aging_rules() {
        // (nr, last, thres) -> age after, starting from age 5
        let cases = [
            (10, 10, 1, 6),
            (10, 12, 1, 0),
            (10, 11, 1, 6),
            (0, 1, 5, 0),
            (1, 0, 5, 0),
            (0, 0, 0, 6),
        ];
        for (nr, last, thres, want) in cases {
            let mut r = reg(0, 10, nr, 5);
            r.last_nr_accesses = last;
            age_region(&mut r, thres);
            assert_eq!(r.age, want, "nr {nr} last {last} thres {thres}");
        }
    }

    #[test]
    fn merge_threshold_doubles_while_over_max() {
        // 8 regions with counts 0,2,4,..14; max 3 regions: threshold grows until few enough.
        let rs: Vec<Region> = (0..8)
            .map(|i| reg(i * 10, i * 10 + 10, (i * 2) as u32, 0))
            .collect();
        let mut ts = [target(&rs)];
        merge_regions(&mut ts, 14, 1 << 20, 3, 20);
        assert!(ts[0].regions.len() <= 3, "{:?}", spans(&ts[0]));
    }

    #[test]
    fn split_keeps_coverage_and_counters() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let mut ts = [target(&[
            reg(0, 100 * 4096, 7, 3),
            reg(200 * 4096, 210 * 4096, 1, 9),
        ])];
        let nr = split_regions(&mut ts, 1000, 0, 4096, &mut rng);
        assert_eq!(nr, 2);
        let t = &ts[0];
        assert_eq!(t.regions.len(), 4);
        assert_eq!(t.sz_regions(), 110 * 4096);
        for w in t.regions.windows(2) {
            assert!(w[0].ar.end <= w[1].ar.start);
        }
        for r in &t.regions {
            assert_eq!(r.ar.start % 4096, 0);
            assert!(r.nr_accesses == 7 && r.age == 3 || r.nr_accesses == 1 && r.age == 9);
        }
        // Unchanged count below max/3: up to three pieces each (a piece of
        // two pages or less is not cut again).
        let nr = split_regions(&mut ts, 1000, 4, 4096, &mut rng);
        assert_eq!(nr, 4);
        assert!(
            (9..=12).contains(&ts[0].regions.len()),
            "{}",
            ts[0].regions.len()
        );
        assert_eq!(ts[0].sz_regions(), 110 * 4096);
        // Above max/2: no split.
        let before = ts[0].regions.len();
        split_regions(&mut ts, 2 * before as u32 - 2, 0, 4096, &mut rng);
        assert_eq!(ts[0].regions.len(), before);
    }

    /// The kernel returns before `last_nr_regions = nr` when it skips the
    /// split (count above max/2), so the 3-way trigger keeps the count of
    /// the last real split.
    #[test]
    fn skipped_split_keeps_last_nr_regions() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        let rs: Vec<Region> = (0..4)
            .map(|i| reg(i * 100 * 4096, (i + 1) * 100 * 4096, 0, 0))
            .collect();
        let mut ts = [target(&rs)];
        // 4 regions, max 6: above max/2, skipped; the trigger still says 2.
        assert_eq!(split_regions(&mut ts, 6, 2, 4096, &mut rng), 2);
        assert_eq!(ts[0].regions.len(), 4);
        // Back to two regions: unchanged since the last split, so 3-way.
        ts[0].regions.truncate(2);
        assert_eq!(split_regions(&mut ts, 30, 2, 4096, &mut rng), 2);
        assert_eq!(ts[0].regions.len(), 6);
    }

    #[test]
    fn split_never_cuts_below_two_pages() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let mut ts = [target(&[reg(0, 2 * 4096, 0, 0)])];
        split_regions(&mut ts, 1000, 0, 4096, &mut rng);
        assert_eq!(ts[0].regions.len(), 1);
    }

    #[test]
    fn set_regions_table() {
        // existing:  [0,10) [10,20) [20,30)        [50,60)      [90,100)
        // ranges:       [5,------------------------------55)  [70,80)
        // -> [0..)? no: first intersecting region starts at range start 5,
        //    last intersecting [50,60) ends at 55; hole [30,50) filled;
        //    [90,100) intersects nothing and goes; [70,80) is new.
        let mut t = target(&[
            reg(0, 10, 1, 1),
            reg(10, 20, 2, 2),
            reg(20, 30, 3, 3),
            reg(50, 60, 5, 5),
            reg(90, 100, 9, 9),
        ]);
        set_regions(&mut t, &[AddrRange::new(5, 55), AddrRange::new(70, 80)], 1);
        assert_eq!(
            spans(&t),
            vec![
                (5, 10, 1, 1),
                (10, 20, 2, 2),
                (20, 30, 3, 3),
                (30, 50, 0, 0),
                (50, 55, 5, 5),
                (70, 80, 0, 0)
            ]
        );
        // Unchanged ranges keep everything.
        let before = spans(&t);
        set_regions(&mut t, &[AddrRange::new(5, 55), AddrRange::new(70, 80)], 1);
        assert_eq!(spans(&t), before);
    }
}
