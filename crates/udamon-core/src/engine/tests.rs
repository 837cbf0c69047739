use super::*;
use crate::region::AddrRange;
use crate::schemes::{AccessPattern, Action, Quota, WatermarkMetric, Watermarks};
use crate::ApplyOutcome;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// Ops over fixed mappings where an address is accessed with a probability
/// given per range (drawn from the ops' own seeded generator). The k-th
/// action applied costs `costs[k % len]` us per page (nothing when empty).
struct Hazard {
    mappings: Vec<AddrRange>,
    hot: Vec<(AddrRange, f64)>,
    rng: Pcg64Mcg,
    costs: Vec<u64>,
    applies: usize,
    free_mem_rate: Option<u32>,
}

impl Hazard {
    fn new(hot: Vec<(AddrRange, f64)>, seed: u64) -> Self {
        Self {
            mappings: three_mappings(),
            hot,
            rng: Pcg64Mcg::seed_from_u64(seed),
            costs: Vec::new(),
            applies: 0,
            free_mem_rate: None,
        }
    }
}

impl Operations for Hazard {
    fn target_ranges(&mut self, _: usize, _: &Target) -> Option<Vec<AddrRange>> {
        Some(vaddr::monitoring_ranges(&self.mappings, MIN_REGION_SZ))
    }
    fn prepare_access_checks(&mut self, _: &[Target], _: SampleWindow) {}
    fn check_accesses(&mut self, targets: &[Target], _: SampleWindow, acc: &mut Vec<bool>) {
        acc.clear();
        for r in targets.iter().flat_map(|t| &t.regions) {
            let p = self
                .hot
                .iter()
                .find(|(ar, _)| ar.contains(r.sampling_addr))
                .map_or(0.0, |h| h.1);
            acc.push(self.rng.random_bool(p));
        }
    }
    fn apply_scheme(&mut self, _: usize, range: AddrRange, _: &Damos, _: u64) -> ApplyOutcome {
        let per_page = match self.costs.len() {
            0 => 0,
            n => self.costs[self.applies % n],
        };
        self.applies += 1;
        ApplyOutcome {
            sz_applied: range.sz(),
            sz_ops_filter_passed: 0,
            cost_us: range.sz() / MIN_REGION_SZ * per_page,
        }
    }
    fn free_mem_rate(&mut self, _: u64) -> Option<u32> {
        self.free_mem_rate
    }
}

const MIB: u64 = 1 << 20;

fn three_mappings() -> Vec<AddrRange> {
    vec![
        AddrRange::new(0, 64 * MIB),
        AddrRange::new(1 << 40, (1 << 40) + 256 * MIB),
        AddrRange::new(1 << 46, (1 << 46) + 8 * MIB),
    ]
}

fn engine(attrs: Attrs, hot: Vec<(AddrRange, f64)>, seed: u64) -> Engine<Hazard, Pcg64Mcg> {
    let ops = Hazard::new(hot, seed ^ 0xa5a5);
    Engine::new(
        attrs,
        ops,
        vec![Target::new(0)],
        Pcg64Mcg::seed_from_u64(seed),
    )
    .unwrap()
}

fn check_invariants<O: Operations>(e: &Engine<O, Pcg64Mcg>, total: u64) {
    let t = &e.targets()[0];
    assert_eq!(t.sz_regions(), total, "coverage kept");
    for r in &t.regions {
        assert!(r.ar.start < r.ar.end);
        assert_eq!(r.ar.start % MIN_REGION_SZ, 0);
        assert_eq!(r.ar.end % MIN_REGION_SZ, 0);
    }
    for w in t.regions.windows(2) {
        assert!(w[0].ar.end <= w[1].ar.start, "sorted and disjoint");
    }
}

#[test]
fn initial_regions_follow_three_region_rule() {
    let e = engine(Attrs::default(), vec![], 1);
    let t = &e.targets()[0];
    assert_eq!(t.regions.first().unwrap().ar.start, 0);
    assert_eq!(t.regions.last().unwrap().ar.end, (1 << 46) + 8 * MIB);
    // No region spans the two big gaps.
    assert!(t
        .regions
        .iter()
        .all(|r| r.ar.end <= 64 * MIB || r.ar.start >= 1 << 40));
    // About min_nr_regions regions.
    assert!((9..=12).contains(&t.regions.len()), "{}", t.regions.len());
}

#[test]
fn small_hot_area_is_isolated() {
    // A 1 MiB always-hot area inside the 256 MiB middle mapping.
    let hot = AddrRange::new((1 << 40) + 100 * MIB, (1 << 40) + 101 * MIB);
    let mut e = engine(Attrs::default(), vec![(hot, 1.0)], 3);
    let mut last = None;
    for _ in 0..300 {
        last = e.next_snapshot().unwrap();
    }
    let snap = last.unwrap();
    // The regions covering the hot MiB are seen at the maximum count, and the
    // hot bytes are not smeared over much more than the hot area.
    let hot_bytes: u64 = snap.targets[0]
        .regions
        .iter()
        .filter(|r| r.nr_accesses >= 18)
        .map(|r| r.sz())
        .sum();
    assert!(
        (MIB / 2..=4 * MIB).contains(&hot_bytes),
        "hot bytes {hot_bytes}"
    );
}

#[test]
fn snapshots_are_reproducible_from_the_seed() {
    let hot = vec![(AddrRange::new(0, 8 * MIB), 0.5)];
    let run = |seed| {
        let mut e = engine(Attrs::default(), hot.clone(), seed);
        (0..30)
            .map(|_| e.next_snapshot().unwrap().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(9), run(9));
    assert_ne!(run(9), run(10));
}

#[test]
fn snapshot_times_follow_the_logical_clock() {
    let mut e = engine(Attrs::default(), vec![], 1);
    let a = e.next_snapshot().unwrap().unwrap();
    let b = e.next_snapshot().unwrap().unwrap();
    assert_eq!((a.start_us, a.end_us), (0, 100_000));
    assert_eq!((b.start_us, b.end_us), (100_000, 200_000));
    assert_eq!(e.now_us(), 200_000);
}

#[test]
fn fixed_regions_never_change() {
    let ops = Hazard::new(vec![(AddrRange::new(0, MIB), 1.0)], 1);
    let mut e = Engine::with_adaptation(
        Attrs::default(),
        ops,
        vec![Target::new(0)],
        Pcg64Mcg::seed_from_u64(1),
        Adaptation::Fixed(100),
    )
    .unwrap();
    let before: Vec<AddrRange> = e.targets()[0].regions.iter().map(|r| r.ar).collect();
    for _ in 0..50 {
        e.next_snapshot().unwrap();
    }
    let after: Vec<AddrRange> = e.targets()[0].regions.iter().map(|r| r.ar).collect();
    assert_eq!(before, after);
    assert!((95..=105).contains(&before.len()), "{}", before.len());
}

#[test]
fn bad_commit_keeps_the_running_attrs() {
    let mut e = engine(Attrs::default(), vec![], 1);
    let bad = Attrs {
        min_nr_regions: 1,
        ..Attrs::default()
    };
    assert!(e.commit(bad).is_err());
    assert_eq!(e.attrs(), Attrs::default());
    let good = Attrs {
        aggr_us: 200_000,
        ..Attrs::default()
    };
    e.commit(good).unwrap();
    let s = e.next_snapshot().unwrap().unwrap();
    assert_eq!(s.end_us - s.start_us, 200_000);
}

#[test]
fn interval_tuning_moves_toward_the_goal() {
    use crate::IntervalsGoal;
    let goal = IntervalsGoal {
        access_bp: 400,
        aggrs: 3,
        min_sample_us: 1_000,
        max_sample_us: 1_000_000,
    };
    // Nothing is ever accessed: the observed ratio is 0, so intervals grow.
    let mut e = engine(
        Attrs {
            intervals_goal: goal,
            ..Attrs::default()
        },
        vec![],
        1,
    );
    for _ in 0..20 {
        e.next_snapshot().unwrap();
    }
    assert!(e.attrs().sample_us > 5_000, "{:?}", e.attrs());
    assert_eq!(e.attrs().aggr_us / e.attrs().sample_us, 20, "ratio kept");
    // Everything is always accessed: the ratio is 100x the goal, intervals shrink to the minimum.
    let all = vec![(AddrRange::new(0, u64::MAX), 1.0)];
    let mut e = engine(
        Attrs {
            intervals_goal: goal,
            ..Attrs::default()
        },
        all,
        1,
    );
    for _ in 0..40 {
        e.next_snapshot().unwrap();
    }
    assert_eq!(e.attrs().sample_us, 1_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn adaptation_invariants(
        seed in any::<u64>(),
        min_nr in 3u32..40,
        extra in 0u32..400,
        hot_start in 0u64..60,
        hot_len in 1u64..8,
        p in 0.0f64..1.0,
    ) {
        let attrs = Attrs { min_nr_regions: min_nr, max_nr_regions: min_nr + extra, ..Attrs::default() };
        let hot = vec![(AddrRange::new(hot_start * MIB, (hot_start + hot_len) * MIB), p)];
        let mut e = engine(attrs, hot, seed);
        let total = e.targets()[0].sz_regions();
        for _ in 0..40 {
            let snap = e.next_snapshot().unwrap().unwrap();
            check_invariants(&e, total);
            // After merging the count is within the maximum (it can only
            // exceed it when the merge threshold ran out, not with p <= 1).
            prop_assert!(snap.nr_regions() <= attrs.max_nr_regions as usize);
            let max_nr = attrs.max_nr_accesses();
            prop_assert!(snap.targets[0].regions.iter().all(|r| r.nr_accesses <= max_nr));
        }
        // Split never leaves more than the maximum either.
        prop_assert!(e.nr_regions() <= attrs.max_nr_regions as usize);
    }

    #[test]
    fn merge_keeps_size_weighted_sums(
        counts in proptest::collection::vec((1u64..50, 0u32..21, 0u32..100), 1..40),
        thres in 0u32..10,
    ) {
        let mut start = 0;
        let regions: Vec<crate::Region> = counts.iter().map(|&(pages, nr, age)| {
            let r = crate::Region { nr_accesses: nr, age, last_nr_accesses: nr, ..crate::Region::new(start, start + pages * 4096) };
            start += pages * 4096;
            r
        }).collect();
        let mut t = Target { pid: 0, regions };
        let before_sum: u128 = t.regions.iter().map(|r| u128::from(r.sz()) * u128::from(r.nr_accesses)).sum();
        let before_sz = t.sz_regions();
        adapt::merge_regions_of(&mut t, thres, u64::MAX, false);
        prop_assert_eq!(t.sz_regions(), before_sz);
        let after_sum: u128 = t.regions.iter().map(|r| u128::from(r.sz()) * u128::from(r.nr_accesses)).sum();
        // Truncating division loses less than one access per byte per merge step.
        let merges = (counts.len() - t.regions.len()) as u128;
        prop_assert!(after_sum <= before_sum);
        prop_assert!(before_sum - after_sum <= merges * u128::from(before_sz));
        // Each merged region's count lies within its constituents' range.
        let mut i = 0;
        let mut addr = 0;
        for r in &t.regions {
            let (mut lo, mut hi) = (u32::MAX, 0);
            while addr < r.ar.end {
                let (pages, nr, _) = counts[i];
                lo = lo.min(nr);
                hi = hi.max(nr);
                addr += pages * 4096;
                i += 1;
            }
            prop_assert!(lo <= r.nr_accesses && r.nr_accesses <= hi);
        }
        for w in t.regions.windows(2) {
            prop_assert!(w[0].ar.end == w[1].ar.start);
        }
    }
}

/// Property tests that run from a fixed seed, so a run is repeatable.
fn seeded(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x0da7_0bad),
        ..ProptestConfig::default()
    }
}

fn idle_pageout() -> Damos {
    let idle = AccessPattern {
        max_freq_bp: 0,
        ..AccessPattern::default()
    };
    Damos::new(idle, Action::Pageout)
}

proptest! {
    #![proptest_config(seeded(32))]

    /// Time-quota schemes whose actions often take no measurable time keep
    /// the region count bounded: a snapshot (taken after merging and after
    /// the schemes ran) has at most `max_nr_regions` regions plus three per
    /// scheme (the charge-resume split, the size cut and the time cut of
    /// that pass).
    #[test]
    fn time_quotas_keep_the_region_count_bounded(
        seed in any::<u64>(),
        max_nr in 10u32..200,
        costs in proptest::collection::vec(prop_oneof![3 => Just(0u64), 1 => 1u64..4], 1..8),
        quotas in proptest::collection::vec((1u64..4, prop_oneof![Just(100u64), Just(1000)]), 1..4),
    ) {
        let attrs = Attrs { max_nr_regions: max_nr, ..Attrs::default() };
        let mut e = engine(attrs, vec![(AddrRange::new(0, 8 * MIB), 0.3)], seed);
        e.ops_mut().costs = costs;
        let schemes: Vec<Damos> = quotas.iter().map(|&(ms, reset)| {
            let mut d = idle_pageout();
            d.quota = Quota { ms, reset_interval_ms: reset, ..Quota::default() };
            d
        }).collect();
        let bound = max_nr as usize + 3 * schemes.len();
        e.set_schemes(schemes);
        for k in 0..30 {
            let snap = e.next_snapshot().unwrap().unwrap();
            prop_assert!(snap.nr_regions() <= bound, "snapshot {}: {} regions > {}", k, snap.nr_regions(), bound);
        }
        prop_assert!(e.ops().applies > 0);
    }
}

/// A watermark interval of 0 (the scheme files' default) means no wait:
/// with every scheme off, the kernel's `kdamond_wait_activation` sees a
/// minimum wait of 0 and monitoring goes on; the schemes stay off.
#[test]
fn watermarks_with_zero_interval_keep_monitoring() {
    let mut e = engine(Attrs::default(), vec![], 1);
    let mut d = idle_pageout();
    d.watermarks = Watermarks {
        metric: WatermarkMetric::FreeMemRate,
        interval_us: 0,
        high: 500,
        mid: 400,
        low: 200,
    };
    e.set_schemes(vec![d]);
    // Plenty of free memory: above `high`, the scheme is off.
    e.ops_mut().free_mem_rate = Some(900);
    e.set_deadline(Some(1_000_000));
    let mut windows = Vec::new();
    while let Some(s) = e.next_snapshot().unwrap() {
        windows.push((s.start_us, s.end_us));
    }
    assert_eq!(windows.len(), 10, "{windows:?}");
    assert_eq!(windows[9], (900_000, 1_000_000));
    assert!(!e.schemes()[0].active);
    assert_eq!(e.ops().applies, 0);
}

/// An ops update that finds no ranges (a zombie process: its maps are
/// empty) keeps the regions, as the kernel's vaddr update does when it
/// cannot build the three regions.
#[test]
fn empty_ranges_at_an_update_keep_the_regions() {
    let mut e = engine(Attrs::default(), vec![], 1);
    let total = e.targets()[0].sz_regions();
    e.ops_mut().mappings.clear();
    // Past the ops update at 1 s.
    for _ in 0..15 {
        e.next_snapshot().unwrap().unwrap();
    }
    check_invariants(&e, total);
    assert!(!e.targets()[0].regions.is_empty());
}

/// Every sample positive; at each window's end the ops turn counts into
/// a quarter of themselves, as a per-window soft-dirty backend would.
struct Quartering;

impl Operations for Quartering {
    fn target_ranges(&mut self, _: usize, _: &Target) -> Option<Vec<AddrRange>> {
        Some(vaddr::monitoring_ranges(&three_mappings(), MIN_REGION_SZ))
    }
    fn prepare_access_checks(&mut self, _: &[Target], _: SampleWindow) {}
    fn check_accesses(&mut self, targets: &[Target], _: SampleWindow, acc: &mut Vec<bool>) {
        acc.clear();
        acc.extend(targets.iter().flat_map(|t| &t.regions).map(|_| true));
    }
    fn end_window(&mut self, counts: &mut [u32]) {
        counts.iter_mut().for_each(|c| *c /= 4);
    }
}

#[test]
fn the_ops_convert_each_windows_counts_before_the_snapshot() {
    let attrs = Attrs::default();
    let mut e = Engine::new(
        attrs,
        Quartering,
        vec![Target::new(0)],
        Pcg64Mcg::seed_from_u64(1),
    )
    .unwrap();
    let mut snaps = 0;
    while snaps < 3 {
        if let Some(s) = e.tick() {
            snaps += 1;
            for r in s.targets.iter().flat_map(|t| &t.regions) {
                assert_eq!(r.nr_accesses, attrs.max_nr_accesses() / 4, "{r:?}");
            }
        }
    }
}

/// Ops for the enhanced mode: the Hazard's three mappings, of which only
/// `resident` is resident (all when `None`), and a hot window `width`
/// bytes wide sweeping the second mapping at `speed` bytes per second.
struct Sweeping {
    mappings: Vec<AddrRange>,
    resident: Option<Vec<AddrRange>>,
    width: u64,
    speed: u64,
    rng: Pcg64Mcg,
}

impl Operations for Sweeping {
    fn target_ranges(&mut self, _: usize, _: &Target) -> Option<Vec<AddrRange>> {
        Some(vaddr::monitoring_ranges(&self.mappings, MIN_REGION_SZ))
    }
    fn resident_ranges(&mut self, _: usize, _: &[AddrRange]) -> Option<Vec<AddrRange>> {
        self.resident.clone()
    }
    fn prepare_access_checks(&mut self, _: &[Target], _: SampleWindow) {}
    fn check_accesses(&mut self, targets: &[Target], w: SampleWindow, acc: &mut Vec<bool>) {
        let span = self.mappings[1];
        let pos = span.start
            + (u128::from(self.speed) * u128::from(w.start_us) / 1_000_000 % u128::from(span.sz()))
                as u64;
        acc.clear();
        for r in targets.iter().flat_map(|t| &t.regions) {
            let a = r.sampling_addr;
            let hot = a >= pos && a < pos + self.width;
            acc.push(hot && self.rng.random_bool(0.9));
        }
    }
}

fn sweeping(
    attrs: Attrs,
    resident: Option<Vec<AddrRange>>,
    speed: u64,
    seed: u64,
    adaptation: Adaptation,
) -> Engine<Sweeping, Pcg64Mcg> {
    let ops = Sweeping {
        mappings: three_mappings(),
        resident,
        width: 16 * MIB,
        speed,
        rng: Pcg64Mcg::seed_from_u64(seed ^ 0x5a5a),
    };
    Engine::with_adaptation(
        attrs,
        ops,
        vec![Target::new(0)],
        Pcg64Mcg::seed_from_u64(seed),
        adaptation,
    )
    .unwrap()
}

#[test]
fn enhanced_mode_monitors_resident_memory_only() {
    // 4 MiB resident in each of the first two mappings, the stack whole
    let resident = vec![
        AddrRange::new(8 * MIB, 12 * MIB),
        AddrRange::new((1 << 40) + 100 * MIB, (1 << 40) + 104 * MIB),
        AddrRange::new(1 << 46, (1 << 46) + 8 * MIB),
    ];
    let e = sweeping(
        Attrs::default(),
        Some(resident.clone()),
        0,
        1,
        Adaptation::Enhanced,
    );
    let t = &e.targets()[0];
    assert_eq!(t.sz_regions(), 16 * MIB);
    assert_eq!(t.regions.first().unwrap().ar.start, 8 * MIB);
    assert_eq!(t.regions.last().unwrap().ar.end, (1 << 46) + 8 * MIB);
    // without residency information: the kernel's three regions
    let e = sweeping(Attrs::default(), None, 0, 1, Adaptation::Enhanced);
    assert_eq!(e.targets()[0].sz_regions(), (64 + 256 + 8) * MIB);
}

proptest! {
    #![proptest_config(seeded(24))]

    /// The enhanced mode keeps the adaptive mode's invariants: regions
    /// sorted, disjoint and page-aligned, covering exactly the ranges it
    /// monitors (the resident parts, fitted), never more than the maximum.
    #[test]
    fn enhanced_invariants(
        seed in any::<u64>(),
        min_nr in 3u32..40,
        extra in 0u32..400,
        pieces in proptest::collection::vec((0u64..256, 1u64..16), 0..12),
        speed_mib in 0u64..200,
    ) {
        let attrs = Attrs { min_nr_regions: min_nr, max_nr_regions: min_nr + extra, ..Attrs::default() };
        let base = 1u64 << 40;
        let mut resident: Vec<AddrRange> = pieces
            .iter()
            .map(|&(s, l)| AddrRange::new(base + s * MIB, base + (s + l).min(256) * MIB))
            .filter(|r| r.start < r.end)
            .collect();
        resident.sort();
        let mut merged: Vec<AddrRange> = Vec::new();
        for r in resident {
            match merged.last_mut() {
                Some(l) if l.end >= r.start => l.end = l.end.max(r.end),
                _ => merged.push(r),
            }
        }
        let ranges = vaddr::monitoring_ranges(&three_mappings(), MIN_REGION_SZ);
        let fitted = enhanced::fit_resident(&ranges, &merged, (min_nr as usize).max(3), MIN_REGION_SZ);
        let total: u64 = fitted.iter().map(AddrRange::sz).sum();
        let mut e = sweeping(attrs, Some(merged), speed_mib * MIB, seed, Adaptation::Enhanced);
        for _ in 0..30 {
            let snap = e.next_snapshot().unwrap().unwrap();
            check_invariants(&e, total);
            for r in &e.targets()[0].regions {
                prop_assert!(fitted.iter().any(|f| f.start <= r.ar.start && r.ar.end <= f.end),
                    "region {:?} outside the monitored ranges", r.ar);
            }
            prop_assert!(snap.nr_regions() <= attrs.max_nr_regions as usize);
            prop_assert!(e.nr_regions() <= attrs.max_nr_regions as usize);
        }
    }
}

/// A window sweeping at a steady speed is predicted: the enhanced mode
/// cuts regions ahead of it, and its hot estimate overlaps the window more
/// than the adaptive mode's does, on average over several seeds (a
/// single seed's margin varies).
#[test]
fn enhanced_mode_follows_a_sweep() {
    let attrs = Attrs::default();
    let overlap = |mode: Adaptation, seed: u64| -> f64 {
        let ops = Sweeping {
            mappings: three_mappings(),
            resident: None,
            width: 16 * MIB,
            speed: 64 * MIB,
            rng: Pcg64Mcg::seed_from_u64(seed ^ 0x5eed),
        };
        let mut e = Engine::with_adaptation(
            attrs,
            ops,
            vec![Target::new(0)],
            Pcg64Mcg::seed_from_u64(seed),
            mode,
        )
        .unwrap();
        let (mut inside, mut hot) = (0u64, 0u64);
        for n in 0..60 {
            let s = e.next_snapshot().unwrap().unwrap();
            if n < 10 {
                continue;
            }
            // where the window was, mid-window
            let span = three_mappings()[1];
            let mid_us = (s.start_us + s.end_us) / 2;
            let pos = span.start + 64 * MIB * mid_us / 1_000_000 % span.sz();
            let win = AddrRange::new(pos.saturating_sub(4 * MIB), pos + 20 * MIB);
            for r in s.targets[0].regions.iter().filter(|r| r.nr_accesses >= 5) {
                let ar = AddrRange::new(r.start, r.end);
                hot += ar.sz();
                if ar.intersects(&win) {
                    inside += ar.end.min(win.end) - ar.start.max(win.start);
                }
            }
        }
        inside as f64 / hot.max(1) as f64
    };
    let seeds = 1..=8u64;
    let mean =
        |mode| seeds.clone().map(|s| overlap(mode, s)).sum::<f64>() / seeds.clone().count() as f64;
    let (kernel, enhanced) = (mean(Adaptation::Adaptive), mean(Adaptation::Enhanced));
    // measured: 0.982 against 0.914 (seeded, so reproducible; 0.967
    // before the ramps were centred on the predicted edges)
    assert!(
        enhanced >= kernel + 0.02,
        "enhanced {enhanced:.3} vs kernel {kernel:.3}"
    );
    assert!(enhanced > 0.97, "enhanced {enhanced:.3}");
}

/// The attributes' mode turns adaptive regions enhanced, and a commit of
/// other attributes turns them back at the next ops update.
#[test]
fn the_attrs_mode_picks_the_adaptation() {
    let resident = vec![AddrRange::new(8 * MIB, 12 * MIB)];
    let attrs = Attrs {
        mode: Mode::Enhanced,
        ..Attrs::default()
    };
    let mut e = sweeping(attrs, Some(resident), 0, 2, Adaptation::Adaptive);
    assert_eq!(e.targets()[0].sz_regions(), 4 * MIB);
    e.commit(Attrs::default()).unwrap();
    for _ in 0..12 {
        e.next_snapshot().unwrap();
    }
    assert_eq!(e.targets()[0].sz_regions(), (64 + 256 + 8) * MIB);
}

/// Targets added and removed while monitoring: the others keep their
/// regions, counts and ages and their snapshot index; a new target starts
/// from even regions and gets the next index, never a removed one's.
#[test]
fn targets_come_and_go_without_touching_the_others() {
    let attrs = Attrs::default();
    let hot = vec![(AddrRange::new(1 << 40, (1 << 40) + 16 * MIB), 0.9)];
    let ops = Hazard::new(hot, 7);
    let mut e = Engine::new(
        attrs,
        ops,
        vec![Target::new(10), Target::new(11), Target::new(12)],
        Pcg64Mcg::seed_from_u64(3),
    )
    .unwrap();
    for _ in 0..attrs.aggr_samples() * 5 {
        e.tick();
    }
    let before: Vec<Vec<crate::Region>> = e.targets().iter().map(|t| t.regions.clone()).collect();
    e.remove_target(1);
    assert_eq!(e.targets().len(), 2);
    assert_eq!(e.targets()[0].regions, before[0]);
    assert_eq!(e.targets()[1].regions, before[2]);
    assert_eq!((e.target_id(0), e.target_id(1)), (Some(0), Some(2)));
    let id = e.add_target(Target::new(13));
    assert_eq!(id, 3, "a new target never takes a removed one's index");
    let new = &e.targets()[2];
    assert!(!new.regions.is_empty());
    assert!(new.regions.iter().all(|r| r.age == 0 && r.nr_accesses == 0));
    assert_eq!(e.targets()[0].regions, before[0]);
    // The next snapshot names the targets by their indices.
    let snap = loop {
        if let Some(s) = e.tick() {
            break s;
        }
    };
    let ids: Vec<u32> = snap.targets.iter().map(|t| t.target_idx).collect();
    assert_eq!(ids, vec![0, 2, 3]);
    // The region budget is shared: after many windows the count is
    // within max_nr_regions over all targets together.
    for _ in 0..attrs.aggr_samples() * 20 {
        e.tick();
    }
    assert!(e.nr_regions() <= attrs.max_nr_regions as usize);
}

/// A scheme's quota bookmark and dry-run ranges follow the targets that
/// move down when one is removed.
#[test]
fn schemes_forget_a_removed_target() {
    let attrs = Attrs::default();
    let mut e = Engine::new(
        attrs,
        Hazard::new(Vec::new(), 1),
        vec![Target::new(1), Target::new(2)],
        Pcg64Mcg::seed_from_u64(1),
    )
    .unwrap();
    let mut s = idle_pageout();
    s.quota = Quota {
        sz: 4 * MIB,
        ..Quota::default()
    };
    e.set_schemes(vec![s]);
    e.set_dry_run(true);
    for _ in 0..attrs.aggr_samples() * 30 {
        e.tick();
    }
    assert!(e.schemes()[0].dry_run_ranges.iter().any(|r| r.0 == 0));
    e.remove_target(0);
    assert!(e.schemes()[0].dry_run_ranges.iter().all(|r| r.0 == 0));
    for _ in 0..attrs.aggr_samples() * 5 {
        e.tick();
    }
    check_invariants(&e, e.targets()[0].sz_regions());
}

/// A scheme over several targets: one quota for them all, and statistics
/// per target whose sums are the scheme's.
#[test]
fn a_scheme_over_several_targets_counts_each() {
    let attrs = Attrs::default();
    let mut e = Engine::new(
        attrs,
        Hazard::new(Vec::new(), 5),
        vec![Target::new(1), Target::new(2), Target::new(3)],
        Pcg64Mcg::seed_from_u64(5),
    )
    .unwrap();
    let mut s = idle_pageout();
    // Each window's quota runs out in one target; the charge resumes
    // where it stopped, so over time every target gets its turn.
    s.quota = Quota {
        sz: 200 * MIB,
        reset_interval_ms: 1000,
        ..Quota::default()
    };
    e.set_schemes(vec![s]);
    for _ in 0..attrs.aggr_samples() * 100 {
        e.tick();
    }
    let st = &e.schemes()[0];
    assert_eq!(st.target_stats.len(), 3, "{:?}", st.target_stats);
    let sum =
        |f: fn(&crate::schemes::DamosStats) -> u64| st.target_stats.values().map(f).sum::<u64>();
    assert_eq!(sum(|x| x.sz_applied), st.stats.sz_applied);
    assert_eq!(sum(|x| x.nr_tried), st.stats.nr_tried);
    // One quota for the three: 200 MiB a second over 10 s of monitoring.
    assert!(
        st.stats.sz_applied <= 200 * MIB * 11,
        "{}",
        st.stats.sz_applied
    );
    assert!(
        st.stats.qt_exceeds > 0,
        "the quota limited the three together"
    );
    e.remove_target(1);
    assert_eq!(e.schemes()[0].target_stats.len(), 2);
}
