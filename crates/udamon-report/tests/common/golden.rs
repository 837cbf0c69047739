//! The synthetic record behind the golden tests, shared by
//! `examples/make_golden.rs` (which writes `tests/data/golden.udr`) and
//! `tests/golden.rs` (which checks the file still holds exactly this).
//!
//! Target 0 has two mappings 127 TiB apart (so the heatmap collapses the
//! gap): a 6 MiB heap whose first 2 MiB are warm, and a 16 MiB mmap area in
//! which a 4 MiB hot object moves up by about 256 KiB per snapshot, with a
//! faint 2 MiB object near its top accessed every other snapshot. Target 1
//! is one 1 MiB region, lightly accessed. 50 snapshots of 100 ms
//! (sampling 5 ms, so `max_nr_accesses` is 20), then a JSON `summary` entry.

#![allow(dead_code)]

use udamon_core::{Attrs, RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_record::{Header, SimInfo, TargetInfo};

pub const HEAP: u64 = 0x5555_5555_0000;
pub const MMAP: u64 = 0x7f00_0000_0000;
pub const MIB: u64 = 1 << 20;
pub const NR_SNAPSHOTS: u64 = 50;

pub fn header() -> Header {
    let mut h = Header::new("sim", Attrs::default());
    h.created_by = "udamon golden generator".into();
    h.targets = vec![
        TargetInfo::new(4242, "app"),
        TargetInfo::new(4243, "helper"),
    ];
    h.sim = Some(SimInfo {
        spec_toml: "# synthetic\n".into(),
        seed: 7,
        monitor: "adaptive".into(),
    });
    h.params = serde_json::json!({ "generator": "make_golden" });
    h
}

fn r(start: u64, end: u64, nr_accesses: u32, age: u32) -> RegionSnapshot {
    RegionSnapshot {
        start,
        end,
        nr_accesses,
        age,
    }
}

/// Snapshot `i` of the golden record.
pub fn snapshot(i: u64) -> Snapshot {
    let age = i as u32;
    let mut t0 = vec![
        r(HEAP, HEAP + 2 * MIB, 6 + (i % 3) as u32, age),
        r(HEAP + 2 * MIB, HEAP + 6 * MIB, 0, age),
    ];
    // The hot object: 4 MiB from `hot`, `hot` moving from 0 to 10 MiB.
    let hot = MMAP + (i * 10 * MIB / (NR_SNAPSHOTS - 1)) / (64 << 10) * (64 << 10);
    let faint = (MMAP + 14 * MIB, MMAP + 16 * MIB);
    if hot > MMAP {
        t0.push(r(MMAP, hot, 0, age));
    }
    t0.push(r(hot, hot + 4 * MIB, 18 + (i % 3) as u32, 0));
    if hot + 4 * MIB < faint.0 {
        t0.push(r(hot + 4 * MIB, faint.0, 0, age));
    }
    t0.push(r(
        faint.0.max(hot + 4 * MIB),
        faint.1,
        (i % 2) as u32,
        (i % 2) as u32,
    ));
    Snapshot {
        start_us: i * 100_000,
        end_us: (i + 1) * 100_000,
        sample_us: 5_000,
        aggr_us: 100_000,
        targets: vec![
            TargetSnapshot {
                target_idx: 0,
                regions: t0,
            },
            TargetSnapshot {
                target_idx: 1,
                regions: vec![r(0x1000_0000, 0x1010_0000, 2, age)],
            },
        ],
    }
}

pub fn snapshots() -> Vec<Snapshot> {
    (0..NR_SNAPSHOTS).map(snapshot).collect()
}

pub fn summary() -> serde_json::Value {
    serde_json::json!({ "snapshots": NR_SNAPSHOTS, "note": "end of the golden record" })
}
