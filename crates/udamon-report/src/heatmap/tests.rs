use proptest::prelude::*;
use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};

use super::*;

const K: u64 = 1 << 10;
const M: u64 = 1 << 20;
const G: u64 = 1 << 30;

/// A 100 ms snapshot (max nr_accesses 20) of target 0.
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

fn opts(time_bins: usize, addr_bins: usize) -> HeatmapOptions {
    HeatmapOptions {
        all: true,
        time_bins: Some(time_bins),
        addr_bins: Some(addr_bins),
        ..Default::default()
    }
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn cells_are_time_and_byte_weighted_averages() {
    let snaps = vec![
        snap(0, &[(0, 4 * K, 20), (4 * K, 16 * K, 0)]),
        snap(
            1,
            &[(0, 8 * K, 10), (8 * K, 12 * K, 20), (12 * K, 16 * K, 0)],
        ),
        snap(2, &[(0, 16 * K, 5)]),
        snap(3, &[(0, 16 * K, 5)]),
    ];
    let hm = build(&snaps, &opts(2, 2), HeatmapFormat::Json).unwrap();
    assert_eq!((hm.start_us, hm.end_us, hm.nr_snapshots), (0, 400_000, 4));
    assert_eq!(hm.axis_bytes, 16 * K);
    assert!(close(hm.cell(0, 0), 0.5), "{:?}", hm.cell(0, 0)); // (4K*1 + 4K*0)/8K, then 0.5
    assert!(close(hm.cell(0, 1), 0.25)); // 0, then (4K*1 + 4K*0)/8K
    assert!(close(hm.cell(1, 0), 0.25));
    assert!(close(hm.cell(1, 1), 0.25));

    // Three time bins of 133.3 ms: bin 0 = all of s0 + a third of s1.
    let hm = build(&snaps, &opts(3, 2), HeatmapFormat::Json).unwrap();
    let want = (100.0 * 0.5 + 100.0 / 3.0 * 0.5) / (100.0 + 100.0 / 3.0);
    assert!(close(hm.cell(0, 0), want), "{:?} {want}", hm.cell(0, 0));
    let want = (100.0 * 0.0 + 100.0 / 3.0 * 0.5) / (100.0 + 100.0 / 3.0);
    assert!(close(hm.cell(0, 1), want), "{:?} {want}", hm.cell(0, 1));

    // Four address bins of 4 KiB split the first snapshot's hot page out.
    let hm = build(&snaps, &opts(4, 4), HeatmapFormat::Json).unwrap();
    let row: Vec<f64> = hm.row(0).to_vec();
    assert_eq!(row, [1.0, 0.0, 0.0, 0.0]);
    let row: Vec<f64> = hm.row(1).to_vec();
    assert_eq!(row, [0.5, 0.5, 1.0, 0.0]);
}

#[test]
fn uncovered_cells_are_nan_and_partial_cells_average_the_covered_part() {
    // Span [0, 12K) then a 4 KiB hole (kept: 4K <= 5% of 1 MiB monitored), then [16K, 1M).
    let snaps = vec![snap(0, &[(0, 12 * K, 20), (16 * K, M, 0)])];
    let hm = build(&snaps, &opts(1, 256), HeatmapFormat::Json).unwrap();
    assert_eq!(hm.segments.len(), 1);
    assert_eq!(hm.axis_bytes, M);
    assert_eq!(hm.cell(0, 2), Some(1.0));
    assert_eq!(hm.cell(0, 3), None);
    assert_eq!(hm.cell(0, 4), Some(0.0));
    // Half-covered bin: the average ignores the uncovered half.
    let hm = build(&snaps, &opts(1, 128), HeatmapFormat::Json).unwrap();
    assert_eq!(hm.cell(0, 1), Some(1.0));
    // Time before the target appeared is uncovered too.
    let snaps = vec![snap(0, &[]), snap(1, &[(0, 8 * K, 20)])];
    let hm = build(&snaps, &opts(2, 1), HeatmapFormat::Json).unwrap();
    assert_eq!((hm.cell(0, 0), hm.cell(1, 0)), (None, Some(1.0)));
}

#[test]
fn big_gaps_collapse_into_segment_boundaries() {
    let snaps: Vec<Snapshot> = (0..4)
        .map(|i| {
            snap(
                i,
                &[
                    (G, G + M, 20),
                    (G + M, G + 2 * M, 0),
                    (8 * G, 8 * G + 2 * M, 10),
                ],
            )
        })
        .collect();
    let hm = build(&snaps, &opts(1, 4), HeatmapFormat::Json).unwrap();
    assert_eq!(hm.axis_bytes, 4 * M);
    assert_eq!(hm.monitored_bytes, 4 * M);
    assert_eq!(
        hm.segments,
        vec![
            Segment {
                addr_start: G,
                addr_end: G + 2 * M,
                axis_offset: 0,
                gap_before: 0
            },
            Segment {
                addr_start: 8 * G,
                addr_end: 8 * G + 2 * M,
                axis_offset: 2 * M,
                gap_before: 7 * G - 2 * M
            }
        ]
    );
    assert_eq!(hm.row(0), [1.0, 0.0, 0.5, 0.5]);
    assert_eq!(hm.addr_at(2 * M), 8 * G);
    assert_eq!(hm.addr_at(M), G + M);
}

#[test]
fn auto_window_finds_a_small_hot_object_in_a_huge_cold_mapping() {
    // A 64 GiB mapping, cold but for a 4 MiB object at 40 GiB, moving by
    // 1 MiB per snapshot; plus a second, cold mapping far away.
    let base = 0x7f00_0000_0000;
    let snaps: Vec<Snapshot> = (0..10)
        .map(|i| {
            let hot = base + 40 * G + i * M;
            snap(
                i,
                &[
                    (base, hot, 0),
                    (hot, hot + 4 * M, 18),
                    (hot + 4 * M, base + 64 * G, 1),
                    (base + 80 * G, base + 81 * G, 0),
                ],
            )
        })
        .collect();
    let o = HeatmapOptions {
        time_bins: Some(10),
        addr_bins: Some(100),
        ..Default::default()
    };
    let hm = build(&snaps, &o, HeatmapFormat::Json).unwrap();
    assert_eq!(hm.window, AddressWindow::Active);
    let (s, e) = (hm.segments[0].addr_start, hm.segments[0].addr_end);
    // The 1/20-frequency cold rest is under 1% of the mass? No: it is
    // 64 GiB x 0.05 against 4 MiB x 0.9, so 99% needs the whole mapping.
    assert!(
        s <= base + 40 * G && e >= base + 40 * G + 13 * M,
        "{s:#x}..{e:#x}"
    );

    // Without the faint background, the window is the object's path.
    let snaps: Vec<Snapshot> = (0..10)
        .map(|i| {
            let hot = base + 40 * G + i * M;
            snap(
                i,
                &[
                    (base, hot, 0),
                    (hot, hot + 4 * M, 18),
                    (hot + 4 * M, base + 64 * G, 0),
                    (base + 80 * G, base + 81 * G, 0),
                ],
            )
        })
        .collect();
    let hm = build(&snaps, &o, HeatmapFormat::Json).unwrap();
    assert_eq!(hm.segments.len(), 1);
    let (s, e) = (hm.segments[0].addr_start, hm.segments[0].addr_end);
    assert!(
        s <= base + 40 * G && e >= base + 40 * G + 13 * M,
        "{s:#x}..{e:#x}"
    );
    assert!(e - s <= 16 * M, "window {} too wide", e - s);
    assert!(hm.access_share.unwrap() > 0.99);
    // The object's first position is hot in the first row.
    let bin = ((base + 40 * G + M - s) as f64 / hm.addr_bin_bytes()) as usize;
    assert!(hm.cell(0, bin).unwrap() > 0.85, "{:?}", hm.cell(0, bin));
    // `all` shows everything, with the far mapping as a second segment.
    let hm = build(
        &snaps,
        &HeatmapOptions {
            all: true,
            ..o.clone()
        },
        HeatmapFormat::Json,
    )
    .unwrap();
    assert_eq!(hm.segments.len(), 2);
    assert_eq!(hm.axis_bytes, 65 * G);
}

#[test]
fn time_and_address_ranges_and_target_selection() {
    let mut snaps: Vec<Snapshot> = (0..10)
        .map(|i| snap(i, &[(0, 4 * M, if i < 5 { 20 } else { 0 })]))
        .collect();
    for s in &mut snaps {
        s.start_us += 7_000_000;
        s.end_us += 7_000_000;
        s.targets.push(TargetSnapshot {
            target_idx: 5,
            regions: vec![RegionSnapshot {
                start: M,
                end: 2 * M,
                nr_accesses: 10,
                age: 0,
            }],
        });
    }
    let o = HeatmapOptions {
        time_range: Some((450_000, 800_000)),
        ..opts(2, 4)
    };
    let hm = build(&snaps, &o, HeatmapFormat::Json).unwrap();
    assert_eq!(
        (hm.record_start_us, hm.start_us, hm.end_us, hm.nr_snapshots),
        (7_000_000, 450_000, 800_000, 4)
    );
    // Bin 0 is 450..625 ms: 50 ms hot, 125 ms cold.
    assert!(close(hm.cell(0, 0), 50.0 / 175.0));
    assert_eq!(hm.cell(1, 0), Some(0.0));

    let o = HeatmapOptions {
        address_range: Some((M, 3 * M)),
        all: false,
        ..opts(1, 2)
    };
    let hm = build(&snaps, &o, HeatmapFormat::Json).unwrap();
    assert_eq!(
        (
            hm.segments[0].addr_start,
            hm.segments[0].addr_end,
            hm.window
        ),
        (M, 3 * M, AddressWindow::Given)
    );

    let o = HeatmapOptions {
        target: Some(5),
        ..opts(1, 1)
    };
    let hm = build(&snaps, &o, HeatmapFormat::Json).unwrap();
    assert_eq!(
        (hm.target_idx, hm.axis_bytes, hm.cell(0, 0)),
        (5, M, Some(0.5))
    );

    let err = |o: HeatmapOptions| {
        build(&snaps, &o, HeatmapFormat::Text)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(HeatmapOptions {
            target: Some(9),
            ..opts(1, 1)
        }),
        "target 9 has no regions in the selected snapshots"
    );
    assert_eq!(
        err(HeatmapOptions {
            time_range: Some((5_000_000, 6_000_000)),
            ..opts(1, 1)
        }),
        "no snapshots in the selected time range"
    );
    assert_eq!(
        err(HeatmapOptions {
            address_range: Some((8 * M, 9 * M)),
            all: false,
            ..opts(1, 1)
        }),
        "address range 0x800000..0x900000 holds no monitored memory"
    );
    assert_eq!(
        err(HeatmapOptions {
            address_range: Some((0, M)),
            ..opts(1, 1)
        }),
        "invalid option: all and address_range cannot be combined"
    );
    assert_eq!(
        err(opts(0, 1)),
        "invalid option: heatmap bins must be at least 1"
    );
    assert!(matches!(
        build(&Vec::<Snapshot>::new(), &opts(1, 1), HeatmapFormat::Text),
        Err(Error::NoSnapshots)
    ));
}

#[test]
fn default_bins_follow_the_format() {
    let o = HeatmapOptions::default();
    assert_eq!(
        o.bins_for(HeatmapFormat::Text),
        (TEXT_TIME_BINS, TEXT_ADDR_BINS)
    );
    assert_eq!(
        o.bins_for(HeatmapFormat::Png),
        (IMAGE_TIME_BINS, IMAGE_ADDR_BINS)
    );
    assert_eq!(
        HeatmapOptions {
            time_bins: Some(3),
            ..o
        }
        .bins_for(HeatmapFormat::Svg),
        (3, IMAGE_ADDR_BINS)
    );
}

fn arb_snaps() -> impl Strategy<Value = Vec<Snapshot>> {
    // Each snapshot: up to 6 regions from random cut points over [0, 64 pages).
    prop::collection::vec(
        (
            prop::collection::btree_set(0u64..=64, 2..8),
            prop::collection::vec(0u32..=20, 8),
            1u64..300_000,
        ),
        1..12,
    )
    .prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(cuts, acc, len)| {
                let cuts: Vec<u64> = cuts.into_iter().collect();
                let regions = cuts
                    .windows(2)
                    .zip(&acc)
                    .map(|(w, &a)| RegionSnapshot {
                        start: w[0] * 4096,
                        end: w[1] * 4096,
                        nr_accesses: a,
                        age: 0,
                    })
                    .collect();
                let s = Snapshot {
                    start_us: t,
                    end_us: t + len,
                    sample_us: 5_000,
                    aggr_us: 100_000,
                    targets: vec![TargetSnapshot {
                        target_idx: 0,
                        regions,
                    }],
                };
                t += len;
                s
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn one_cell_is_the_global_weighted_average(snaps in arb_snaps(), tb in 1usize..9, ab in 1usize..50) {
        let mut num = 0.0;
        let mut den = 0.0;
        for s in &snaps {
            for r in &s.targets[0].regions {
                let w = (s.end_us - s.start_us) as f64 * r.sz() as f64;
                num += w * f64::from(r.nr_accesses) / 20.0;
                den += w;
            }
        }
        let hm = build(&snaps, &opts(1, 1), HeatmapFormat::Json).unwrap();
        let got = hm.cell(0, 0).unwrap();
        prop_assert!((got - num / den).abs() < 1e-9, "{} vs {}", got, num / den);
        let hm = build(&snaps, &opts(tb, ab), HeatmapFormat::Json).unwrap();
        prop_assert!(hm.cells.iter().all(|c| c.is_nan() || (0.0..=1.0).contains(c)));
        prop_assert_eq!(hm.cells.len(), tb * ab);
    }
}
