//! Measures the record format on synthetic, DAMON-like streams: bytes per
//! snapshot, megabytes per hour at 10 snapshots a second, encode time per
//! zstd level, and the time to decode an hour (36,000 snapshots).
//!
//! ```text
//! cargo run --release -p udamon-record --example size
//! cargo run --release -p udamon-record --example size -- --scenario busy-1000 --levels 3,9,19
//! ```
//!
//! Scenarios (see `tests/common/synth.rs`): `typical` has 10% of a 1 GiB
//! space in use in 1 MiB patches plus moving hot areas (about 100 regions);
//! `busy` has 40% in use (about 350 regions); `busy-1000` has 40% in use in
//! 256 KiB patches with `max_nr_regions` 2000 (about 900 regions). Every
//! accessed page has a hit probability below 1, so counts carry DAMON's
//! sampling noise, which no encoding removes.

#[path = "../tests/common/synth.rs"]
mod synth;

use std::time::Instant;

use udamon_core::{Attrs, Snapshot};
use udamon_record::{Header, Reader, Writer, DEFAULT_ZSTD_LEVEL};

const SNAPSHOTS_PER_HOUR: usize = 36_000;

fn write(snaps: &[Snapshot], level: i32) -> (Vec<u8>, f64) {
    let t = Instant::now();
    let mut w = Writer::new(Vec::new(), &Header::new("sim", Attrs::default())).unwrap();
    w.set_zstd_level(level).unwrap();
    for s in snaps {
        w.push_snapshot(s).unwrap();
    }
    let bytes = w.finish().unwrap();
    (bytes, t.elapsed().as_secs_f64())
}

fn mb_per_hour(bytes: usize, snapshots: usize) -> f64 {
    bytes as f64 / snapshots as f64 * SNAPSHOTS_PER_HOUR as f64 / 1e6
}

fn run(name: &str, params: synth::Params, nr_snapshots: usize, levels: &[i32]) {
    let t = Instant::now();
    let snaps: Vec<Snapshot> = synth::Synth::new(params).take(nr_snapshots).collect();
    let nr_regions: usize = snaps.iter().map(|s| s.nr_regions()).sum();
    let mean = nr_regions as f64 / snaps.len() as f64;
    let min = snaps.iter().map(|s| s.nr_regions()).min().unwrap_or(0);
    let max = snaps.iter().map(|s| s.nr_regions()).max().unwrap_or(0);
    println!(
        "== {name}: {} snapshots, {mean:.0} regions on average ({min}..{max}), generated in {:.1}s",
        snaps.len(),
        t.elapsed().as_secs_f64()
    );
    println!("   level  bytes/snapshot  bytes/region  MB/hour  encode us/snapshot");
    for &level in levels {
        let (bytes, secs) = write(&snaps, level);
        println!(
            "   {level:>5}  {:>14.1}  {:>12.3}  {:>7.2}  {:>18.1}",
            bytes.len() as f64 / snaps.len() as f64,
            bytes.len() as f64 / nr_regions as f64,
            mb_per_hour(bytes.len(), snaps.len()),
            secs * 1e6 / snaps.len() as f64
        );
    }

    // An hour: the stream repeated to 36,000 snapshots, times shifted.
    let span = snaps.last().map_or(0, |s| s.end_us);
    let mut w = Writer::new(Vec::new(), &Header::new("sim", Attrs::default())).unwrap();
    let mut s2 = snaps[0].clone();
    for i in 0..SNAPSHOTS_PER_HOUR {
        s2.clone_from(&snaps[i % snaps.len()]);
        let shift = (i / snaps.len()) as u64 * span;
        s2.start_us += shift;
        s2.end_us += shift;
        w.push_snapshot(&s2).unwrap();
    }
    let hour = w.finish().unwrap();
    let len = hour.len();
    let r = Reader::from_bytes(hour).unwrap();
    let mut best = f64::INFINITY;
    let mut regions = 0u64;
    for _ in 0..3 {
        let t = Instant::now();
        let (mut n, mut acc) = (0u64, 0u64);
        regions = 0;
        r.for_each_snapshot(|s| {
            n += 1;
            for t in &s.targets {
                regions += t.regions.len() as u64;
                acc += t
                    .regions
                    .iter()
                    .map(|r| u64::from(r.nr_accesses))
                    .sum::<u64>();
            }
        })
        .unwrap();
        assert_eq!(n as usize, SNAPSHOTS_PER_HOUR);
        std::hint::black_box(acc);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "   an hour at level {DEFAULT_ZSTD_LEVEL}: {:.2} MB; decoded {SNAPSHOTS_PER_HOUR} snapshots ({regions} regions) in {:.0} ms \
         ({:.1} ns/region, best of 3, {} threads)",
        len as f64 / 1e6,
        best * 1e3,
        best * 1e9 / regions as f64,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
}

fn main() {
    let mut nr_snapshots = 3_600usize;
    let mut levels = vec![1, 3, 6, 9, 12, 19];
    let mut scenario = "all".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--snapshots" => nr_snapshots = val().parse().expect("--snapshots N"),
            "--levels" => {
                levels = val()
                    .split(',')
                    .map(|l| l.parse().expect("--levels 3,9"))
                    .collect()
            }
            "--scenario" => scenario = val(),
            _ => panic!("unknown argument {a}; see the example's doc comment"),
        }
    }
    let scenarios = [
        ("typical", synth::Params::default()),
        ("busy", synth::Params::busy()),
        (
            "busy-1000",
            synth::Params {
                chunk: 256 << 10,
                max_nr_regions: 2000,
                ..synth::Params::busy()
            },
        ),
    ];
    for (name, params) in scenarios {
        if scenario == "all" || scenario == name {
            run(name, params, nr_snapshots, &levels);
        }
    }
}
