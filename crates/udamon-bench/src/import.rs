//! `udamon bench --only import`: an hour of damo's records (what `damo
//! record` writes in an hour at default attributes), imported and drawn.
//!
//! The record is generated here in damo 3.4.3's `json_compressed` layout
//! (the JSON of `damo record --output_type json_compressed`, numbers as the
//! strings damo writes): 36,000 snapshots of 300 regions with random
//! boundaries over 512 MiB, one of eight 64 MiB objects hot for 20 s at a
//! time. `udamon import` and `udamon report heatmap` then run in child
//! processes, whose wall time and peak resident memory are measured.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use rand::{RngExt, SeedableRng};
use serde::Serialize;

use crate::child::{time_heatmap, time_udamon};
use crate::error::{Context, Result};
use crate::Sink;

/// What the import bench measured.
#[derive(Serialize, Debug)]
pub struct ImportBench {
    pub snapshots: u64,
    pub regions_per_snapshot: u64,
    /// The damo file (zlib) and the JSON text inside it.
    pub damo_bytes: u64,
    pub damo_json_bytes: u64,
    pub generate_s: f64,
    pub import_s: f64,
    pub import_peak_rss_bytes: u64,
    pub record_bytes: u64,
    pub heatmap_s: f64,
    pub heatmap_peak_rss_bytes: u64,
}

const SPACE: u64 = 512 << 20;
const OBJECTS: u64 = 8;
const REGIONS: u64 = 300;
const AGGR_US: u64 = 100_000;

/// `1234567` as damo prints it: `"1,234,567"`.
fn commas(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Counts the bytes written through it.
struct Counted<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(b)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the damo record of `nr` snapshots to `path`; returns the JSON
/// text's length.
fn generate(path: &Path, nr: u64) -> Result<u64> {
    let f =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let z = flate2::write::ZlibEncoder::new(BufWriter::new(f), flate2::Compression::fast());
    let mut w = Counted {
        inner: BufWriter::with_capacity(1 << 20, z),
        n: 0,
    };
    let mut rng = rand_pcg::Pcg64::seed_from_u64(42);
    let obj = SPACE / OBJECTS;
    let base = 1u64 << 40;
    write!(
        w,
        "[\n    {{\n        \"kdamond_idx\": 0,\n        \"context_idx\": 0,\n        \"intervals\": {{\n            \"sample_us\": \"5000\",\n            \"aggr_us\": \"{AGGR_US}\",\n            \"ops_update_us\": \"1000000\"\n        }},\n        \"scheme_idx\": null,\n        \"target_id\": 0,\n        \"scheme_filters\": [],\n        \"snapshots\": ["
    )?;
    let mut bounds = Vec::with_capacity(REGIONS as usize + 1);
    for i in 0..nr {
        // One object hot for 20 s (200 windows) at a time, in turn.
        let hot = (i / 200) % OBJECTS;
        bounds.clear();
        bounds.push(0);
        bounds.extend((1..REGIONS).map(|_| rng.random_range(1..SPACE / 4096) * 4096));
        bounds.push(SPACE);
        bounds.sort_unstable();
        bounds.dedup();
        let start_ns = (i * AGGR_US + 100_000_000) * 1000;
        write!(
            w,
            "{}\n            {{\n                \"start_time\": \"{start_ns}\",\n                \"end_time\": \"{}\",\n                \"regions\": [",
            if i == 0 { "" } else { "," },
            start_ns + AGGR_US * 1000
        )?;
        for (k, pair) in bounds.windows(2).enumerate() {
            let (s, e) = (pair[0], pair[1]);
            let mid = (s + e) / 2;
            let n = if mid / obj == hot {
                rng.random_range(15..=20u64)
            } else {
                u64::from(rng.random_range(0..100u32) == 0)
            };
            write!(
                w,
                "{}\n                    {{\n                        \"start\": \"{}\",\n                        \"end\": \"{}\",\n                        \"nr_accesses\": {{\n                            \"samples\": {n},\n                            \"percent\": null\n                        }},\n                        \"age\": {{\n                            \"usec\": null,\n                            \"aggr_intervals\": \"{}\"\n                        }},\n                        \"probe_hits\": [],\n                        \"sz_filter_passed\": \"0 B\"\n                    }}",
                if k == 0 { "" } else { "," },
                commas(base + s),
                commas(base + e),
                i % 200
            )?;
        }
        write!(
            w,
            "\n                ],\n                \"total_bytes\": \"{SPACE}\",\n                \"damos_stats\": null,\n                \"sample_interval_us\": null\n            }}"
        )?;
    }
    write!(
        w,
        "\n        ],\n        \"data_source\": \"unknown\"\n    }}\n]"
    )?;
    let n = w.n;
    let z = w.inner.into_inner().map_err(|e| e.into_error())?;
    z.finish()?.flush()?;
    Ok(n)
}

/// Generates the damo record (an hour of it, or 6 minutes when `quick`),
/// then imports and draws it with `udamon`, the executable at that path.
pub fn bench(udamon: &Path, quick: bool, sink: &mut dyn Sink) -> Result<ImportBench> {
    let dir = tempfile::Builder::new()
        .prefix("udamon-bench-import-")
        .tempdir()
        .context("cannot make a scratch directory")?;
    let nr = if quick { 3_600 } else { 36_000 };
    sink.line(&format!(
        "damo import ({} snapshots x {REGIONS} regions over 512 MiB, damo 3.4.3's json_compressed)",
        commas(nr)
    ));
    let damo = dir.path().join("damon.data");
    let started = Instant::now();
    let json_bytes = generate(&damo, nr)?;
    let generate_s = started.elapsed().as_secs_f64();
    let damo_bytes = std::fs::metadata(&damo)?.len();
    let udr = dir.path().join("damo.udr");
    let (import_s, import_rss) = time_udamon(
        udamon,
        &[
            "import".as_ref(),
            damo.as_os_str(),
            "-o".as_ref(),
            udr.as_os_str(),
        ],
    )?;
    let png = dir.path().join("damo.png");
    let (heatmap_s, heatmap_rss) = time_heatmap(udamon, &udr, &png)?;
    let b = ImportBench {
        snapshots: nr,
        regions_per_snapshot: REGIONS,
        damo_bytes,
        damo_json_bytes: json_bytes,
        generate_s,
        import_s,
        import_peak_rss_bytes: import_rss,
        record_bytes: std::fs::metadata(&udr)?.len(),
        heatmap_s,
        heatmap_peak_rss_bytes: heatmap_rss,
    };
    let fb = udamon_report::fmt_bytes;
    sink.line(&format!(
        "  damo file: {} ({} of JSON), generated in {:.1}s",
        fb(b.damo_bytes),
        fb(b.damo_json_bytes),
        b.generate_s
    ));
    sink.line(&format!(
        "  udamon import: {:.1}s, peak RSS {}; the udamon record: {}",
        b.import_s,
        fb(b.import_peak_rss_bytes),
        fb(b.record_bytes)
    ));
    sink.line(&format!(
        "  heatmap PNG of it: {:.2}s, peak RSS {}",
        b.heatmap_s,
        fb(b.heatmap_peak_rss_bytes)
    ));
    sink.line("");
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn numbers_are_grouped_as_damo_prints_them() {
        assert_eq!(commas(0), "0");
        assert_eq!(commas(999), "999");
        assert_eq!(commas(1000), "1,000");
        assert_eq!(commas(1234567), "1,234,567");
    }

    #[test]
    fn the_generated_record_is_damo_json_with_every_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("damon.data");
        let n = generate(&p, 3).unwrap();
        let mut text = String::new();
        flate2::read::ZlibDecoder::new(std::fs::File::open(&p).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text.len() as u64, n);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let snaps = v[0]["snapshots"].as_array().unwrap();
        assert_eq!(snaps.len(), 3);
        let regions = snaps[0]["regions"].as_array().unwrap();
        assert!(regions.len() > 1 && regions.len() <= REGIONS as usize);
        assert_eq!(regions[0]["start"], "1,099,511,627,776");
        assert_eq!(snaps[1]["start_time"], "100100000000");
    }
}
