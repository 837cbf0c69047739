//! Times heatmap building over a synthetic one-hour stream: 36,000
//! snapshots (100 ms aggregation) of 1,000 regions each. The stream cycles
//! through 360 pregenerated region layouts (restamping the times), so
//! making it costs next to nothing and the timing is the heatmap's alone;
//! the snapshots are never all in memory.
//!
//! Run: `cargo run --release -p udamon-report --example heatmap_bench`
//! (optional arguments: snapshots, regions, and a PNG path to also time
//! drawing the default image heatmap).

use std::ops::ControlFlow;
use std::time::Instant;

use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_report::{heatmap, Error, HeatmapFormat, HeatmapOptions, SnapshotSource};

/// A vaddr-like target: a 64 MiB heap, a 16 GiB mmap area with a 256 MiB hot
/// object drifting through 1 GiB of it, and an 8 MiB stack, cut into
/// `regions` regions whose boundaries move every snapshot; a few cold
/// regions see one access.
struct Synth {
    snapshots: u64,
    regions: u64,
    layouts: Vec<Vec<RegionSnapshot>>,
}

const LAYOUTS: u64 = 360;

const HEAP: (u64, u64) = (0x5555_0000_0000, 0x5555_0000_0000 + (64 << 20));
const MMAP: (u64, u64) = (0x7f00_0000_0000, 0x7f00_0000_0000 + (16 << 30));
const STACK: (u64, u64) = (0x7ffd_0000_0000, 0x7ffd_0000_0000 + (8 << 20));

impl Synth {
    fn new(snapshots: u64, regions: u64) -> Self {
        let mut s = Self {
            snapshots,
            regions,
            layouts: Vec::new(),
        };
        s.layouts = (0..LAYOUTS.min(snapshots)).map(|i| s.layout(i)).collect();
        s
    }

    /// The regions of snapshot `i` of a `LAYOUTS`-snapshot cycle.
    fn layout(&self, i: u64) -> Vec<RegionSnapshot> {
        let mut regions = Vec::with_capacity(self.regions as usize);
        let hot = MMAP.0 + (8 << 30) + (i * (1 << 30) / LAYOUTS) / 4096 * 4096;
        let mut rng = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let spans = [
            (HEAP, self.regions / 10),
            (MMAP, self.regions * 8 / 10),
            (STACK, self.regions / 10),
        ];
        for ((start, end), n) in spans {
            let step = (end - start) / n;
            let mut cur = start;
            for k in 0..n {
                let jitter = (next() & (step / 2).next_power_of_two().wrapping_sub(1))
                    .min(step / 2)
                    & !0xfff;
                let e = if k + 1 == n {
                    end
                } else {
                    (start + (k + 1) * step - jitter).max(cur + 4096)
                };
                let mid = cur / 2 + e / 2;
                let nr = if mid >= hot && mid < hot + (256 << 20) {
                    18 + (next() & 1) as u32
                } else {
                    (next() & 63 == 0) as u32
                };
                regions.push(RegionSnapshot {
                    start: cur,
                    end: e,
                    nr_accesses: nr,
                    age: (next() & 127) as u32,
                });
                cur = e;
            }
        }
        regions
    }
}

impl SnapshotSource for Synth {
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        let mut s = Snapshot {
            start_us: 0,
            end_us: 0,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions: Vec::with_capacity(self.regions as usize),
            }],
        };
        for i in 0..self.snapshots {
            s.start_us = i * 100_000;
            s.end_us = (i + 1) * 100_000;
            s.targets[0]
                .regions
                .clone_from(&self.layouts[(i % LAYOUTS) as usize]);
            if f(&s).is_break() {
                break;
            }
        }
        Ok(())
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| {
        args.get(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let src = Synth::new(num(0, 36_000), num(1, 1_000));

    let t = Instant::now();
    let mut n = 0usize;
    src.for_each_snapshot(&mut |s| {
        n += s.nr_regions();
        ControlFlow::Continue(())
    })?;
    let generate = t.elapsed();
    println!(
        "stream: {} snapshots, {n} regions; generating one pass takes {generate:.2?}",
        src.snapshots
    );

    for (format, opts) in [
        (HeatmapFormat::Text, HeatmapOptions::default()),
        (HeatmapFormat::Png, HeatmapOptions::default()),
        (
            HeatmapFormat::Png,
            HeatmapOptions {
                all: true,
                ..Default::default()
            },
        ),
    ] {
        let t = Instant::now();
        let hm = heatmap::build(&src, &opts, format)?;
        let total = t.elapsed();
        println!(
            "{format:?} {}x{} bins{}: {total:.2?} (about {:.2?} without the two generating passes), window {} of {}",
            hm.time_bins,
            hm.addr_bins,
            if opts.all { ", all" } else { "" },
            total.saturating_sub(generate * 2),
            udamon_report::fmt_bytes(hm.axis_bytes),
            udamon_report::fmt_bytes(hm.monitored_bytes),
        );
    }
    if let Some(png) = args.get(2) {
        let hm = heatmap::build(&src, &HeatmapOptions::default(), HeatmapFormat::Png)?;
        let t = Instant::now();
        hm.write_png(
            std::path::Path::new(png),
            &udamon_report::ImageOptions::default(),
        )?;
        println!("drawing {png}: {:.2?}", t.elapsed());
    }
    Ok(())
}
