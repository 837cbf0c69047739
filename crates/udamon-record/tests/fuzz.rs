//! No input makes the reader panic; any snapshots round-trip.

use std::ops::ControlFlow;

use proptest::prelude::*;
use udamon_core::{Attrs, RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_record::{Header, Reader, Writer};

fn read_all(bytes: Vec<u8>) {
    if let Ok(r) = Reader::from_bytes(bytes) {
        let _ = r.tail().map(|t| t.to_string());
        let _ = r.for_each_entry(|_| ControlFlow::Continue(()));
    }
}

fn record_prefix() -> Vec<u8> {
    Writer::new(Vec::new(), &Header::new("sim", Attrs::default()))
        .unwrap()
        .finish()
        .unwrap()
}

fn region() -> impl Strategy<Value = RegionSnapshot> {
    (
        any::<u64>(),
        0u64..1 << 40,
        any::<u32>(),
        any::<u32>(),
        any::<bool>(),
    )
        .prop_map(|(start, sz, nr_accesses, age, page)| {
            let start = if page {
                start & !0xfff & ((1 << 56) - 1)
            } else {
                start
            };
            let sz = if page { sz & !0xfff } else { sz };
            RegionSnapshot {
                start,
                end: start.saturating_add(sz),
                nr_accesses,
                age,
            }
        })
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    let target =
        (0u32..4, prop::collection::vec(region(), 0..20)).prop_map(|(target_idx, mut regions)| {
            if target_idx % 2 == 0 {
                regions.sort_by_key(|r| r.start);
            }
            TargetSnapshot {
                target_idx,
                regions,
            }
        });
    (
        any::<u64>(),
        any::<u64>(),
        1u64..1_000_000,
        1u64..10_000_000,
        prop::collection::vec(target, 0..3),
    )
        .prop_map(|(start_us, end_us, sample_us, aggr_us, targets)| Snapshot {
            start_us,
            end_us,
            sample_us,
            aggr_us,
            targets,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        read_all(bytes);
    }

    #[test]
    fn arbitrary_frames_after_a_valid_header_never_panic(tail in prop::collection::vec(any::<u8>(), 0..4096)) {
        let mut bytes = record_prefix();
        bytes.extend_from_slice(b"UDFR");
        bytes.extend_from_slice(&tail);
        read_all(bytes);
    }

    #[test]
    fn snapshots_round_trip(snaps in prop::collection::vec(snapshot(), 0..12), frame in 1usize..5) {
        let mut w = Writer::new(Vec::new(), &Header::new("sim", Attrs::default())).unwrap();
        w.set_frame_snapshots(frame);
        for s in &snaps {
            w.push_snapshot(s).unwrap();
        }
        let r = Reader::from_bytes(w.finish().unwrap()).unwrap();
        prop_assert!(r.tail().is_none());
        prop_assert_eq!(r.snapshots().unwrap(), snaps);
    }
}
