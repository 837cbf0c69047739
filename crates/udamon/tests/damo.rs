//! udamon and damo's record formats, both ways: `udamon export` then
//! `udamon import` gives the record back, and damo 3.4.3's own reader
//! (the PyPI package, in the virtualenv `tests/damo-venv` makes) reads what
//! udamon exports and reports the working-set sizes udamon reports.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{text, udamon};

/// A simulated record of two targets' worth of windows: the demo workload
/// for 30 s.
fn recorded(d: &Path) {
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/specs/demo.toml"
    );
    let out = udamon(
        d,
        &["record", "--sim", spec, "-o", "r.udr", "--duration", "30s"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Every snapshot of a record as (start_us, end_us, regions per target).
fn snapshots(d: &Path, record: &str) -> Vec<serde_json::Value> {
    let out = udamon(d, &["report", "raw", record]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "snapshot")
        .collect()
}

#[test]
fn export_then_import_gives_the_record_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    recorded(d);
    let orig = snapshots(d, "r.udr");
    assert_eq!(orig.len(), 300);
    for (format, file) in [
        ("damo-json-compressed", "r.damo"),
        ("damo-json", "r.json"),
        ("perf-script", "r.perf"),
    ] {
        let out = udamon(
            d,
            &["export", "r.udr", "-o", file, "--format", format, "--json"],
        );
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (v["snapshots"].as_u64(), v["targets"].as_u64()),
            (Some(300), Some(1))
        );
        let back = format!("{file}.udr");
        let out = udamon(d, &["import", file, "-o", &back]);
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        let got = snapshots(d, &back);
        assert_eq!(got.len(), orig.len(), "{format}");
        for (a, b) in orig.iter().zip(&got) {
            assert_eq!(a["targets"], b["targets"], "{format}");
            // perf script keeps each window's end only.
            assert_eq!(a["end_us"], b["end_us"], "{format}");
            if format != "perf-script" {
                assert_eq!(a["start_us"], b["start_us"], "{format}");
            }
        }
    }
    // An export never replaces its record.
    let out = udamon(d, &["export", "r.udr", "-o", "r.udr"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// damo's command: `UDAMON_DAMO`, else the virtualenv `tests/damo-venv`
/// makes. None when neither is there (then the test says so and passes,
/// except under `UDAMON_REQUIRE_DAMO=1`, which CI sets).
fn damo() -> Option<PathBuf> {
    let p = std::env::var_os("UDAMON_DAMO")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("UDAMON_VM_CACHE")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/udamon-vm"))
                })?;
            Some(cache.join("damo-venv/bin/damo"))
        });
    let found = p.filter(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("UDAMON_REQUIRE_DAMO").as_deref() != Ok("1"),
            "no damo (run tests/damo-venv, or set UDAMON_DAMO)"
        );
        eprintln!("no damo: the damo comparison is not run (tests/damo-venv makes one)");
    }
    found
}

/// damo's `report wss --raw_number` output: (percentile, bytes) rows and
/// the average.
fn damo_wss(stdout: &str) -> (Vec<(u64, u64)>, u64) {
    let mut rows = Vec::new();
    let mut avg = None;
    for l in stdout.lines() {
        if let Some(a) = l.strip_prefix("# avr:") {
            avg = a.trim().parse().ok();
            continue;
        }
        let mut f = l.split_whitespace();
        if let (Some(p), Some(b)) = (f.next(), f.next()) {
            if let (Ok(p), Ok(b)) = (p.parse(), b.parse()) {
                rows.push((p, b));
            }
        }
    }
    (
        rows,
        avg.unwrap_or_else(|| panic!("no average in {stdout}")),
    )
}

#[test]
fn damo_reads_what_udamon_exports_and_agrees_on_the_working_set() {
    let Some(damo) = damo() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    recorded(d);
    let out = udamon(
        d,
        &[
            "report",
            "wss",
            "r.udr",
            "--json",
            "--percentiles",
            "0,25,50,75,100",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours: Vec<(u64, u64)> = v["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["percentile"].as_f64().unwrap() as u64,
                p["wss_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let our_avg = v["wss_avg_bytes"].as_u64().unwrap();
    // damo tells its formats apart with file(1), which names plain JSON
    // "JSON text data" since file 5.44 where damo 3.4.3 expects "JSON
    // data": its plain json is not read on such machines, so the two
    // formats it does read are compared.
    for (format, file) in [
        ("damo-json-compressed", "r.damo"),
        ("perf-script", "r.perf"),
    ] {
        let out = udamon(d, &["export", "r.udr", "-o", file, "--format", format]);
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        let out = Command::new(&damo)
            .args(["report", "wss", "--raw_number", "--exclude_samples", "0"])
            .args(["--range", "0", "101", "25", "-i"])
            .arg(d.join(file))
            .output()
            .expect("run damo");
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{format}: damo: {stdout}{}",
            text(&out.stderr)
        );
        let (theirs, their_avg) = damo_wss(&stdout);
        assert_eq!(theirs, ours, "{format}: damo said\n{stdout}");
        assert_eq!(their_avg, our_avg, "{format}");
    }
}

/// damo's `report heatmap --output raw` output: one `(time, address, heat)`
/// line per pixel, time-major; `heat` is None for damo's `NaN` (a pixel no
/// region touched).
fn damo_heatmap_raw(stdout: &str) -> Vec<(f64, f64, Option<f64>)> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "not a raw heatmap line: {l}");
            let n = |s: &str| -> f64 { s.parse().unwrap_or_else(|_| panic!("{s} in {l}")) };
            let heat = (f[2] != "NaN").then(|| n(f[2]));
            (n(f[0]), n(f[1]), heat)
        })
        .collect()
}

/// damo 3.4.3's `report heatmap --output raw` on the exported record and
/// `udamon report heatmap --json` on the record draw the same grid, once
/// the conventions are mapped (docs/live.md):
///
/// - target: damo's `--tid N` is udamon's `--target N` (the export writes
///   the target's index as damo's `target_id`).
/// - time: udamon's `--time-range` counts microseconds from the record's
///   start (`record_start_us` in its JSON); damo's `--time_range` takes
///   nanoseconds in the snapshots' own clock, which the export writes as
///   `start_us x 1000`: damo's = `(record_start_us + t) x 1000`. Both are
///   given explicitly: damo's default starts at the first snapshot's start
///   minus its oldest region's age, before udamon's 0.
/// - addresses: both take absolute addresses; damo's default range is the
///   "hottest" contiguous span, udamon's the active window, so it is given
///   too, inside one monitored span (udamon collapses the gaps between
///   spans from its axis, damo draws them).
/// - bins: damo's units are `(end - start) // resol`, floored, and udamon's
///   exact fractions, so ranges divisible by the resolutions give both the
///   same half-open bins; damo's `--resol TIME ADDR` is udamon's
///   `TIMExADDR`. damo prints each pixel's left edges, relative to the
///   ranges' starts (no `--abs_time`, `--abs_addr`): nanoseconds and bytes.
/// - cell value: damo adds `nr_accesses / aggr_s` (Hz, the record's
///   aggregation interval) x overlap time x overlap bytes, over the
///   pixel's whole area; udamon the frequency `nr_accesses / (aggr_us /
///   sample_us)` with the same weights, over the part regions covered.
///   Where regions cover the whole cell (inside one span, windows that
///   tile time, both checked below) udamon's = damo's x `sample_us / 1e6`.
/// - a snapshot's time: both spread it over `[start, end)`; damo extends
///   it back by its regions' age, but never before the previous window's
///   end, which with tiling windows is its own start.
///
/// The same maths then: cells agree to udamon's JSON rounding (4
/// decimals, half a unit: 5e-5) plus 1e-9 for the floating-point sums of
/// both sides (a few thousand f64 products per cell, relative error far
/// below 1e-12).
#[test]
fn damo_heatmap_raw_agrees_with_udamon_heatmap() {
    let Some(damo) = damo() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    recorded(d);
    // Windows that tile time, all with the same intervals: the conversion
    // of the cell values and damo's age extension (a no-op then) rely on it.
    let snaps = snapshots(d, "r.udr");
    for w in snaps.windows(2) {
        assert_eq!(w[0]["end_us"], w[1]["start_us"], "windows do not tile");
    }
    let (sample_us, aggr_us) = (&snaps[0]["sample_us"], &snaps[0]["aggr_us"]);
    assert!(snaps
        .iter()
        .all(|s| &s["sample_us"] == sample_us && &s["aggr_us"] == aggr_us));
    let sample_us = sample_us.as_f64().unwrap();
    let out = udamon(
        d,
        &[
            "export",
            "r.udr",
            "-o",
            "r.damo",
            "--format",
            "damo-json-compressed",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let heatmap = |args: &[&str]| -> serde_json::Value {
        let out = udamon(
            d,
            &[&["report", "heatmap", "r.udr", "--json"], args].concat(),
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // The monitored spans: the first is the demo's eight objects, whose
    // accesses move along the addresses over time, so a shifted or
    // mirrored axis shows.
    let all = heatmap(&["--all", "--resol", "1x1"]);
    let record_start_us = all["record_start_us"].as_u64().unwrap();
    let seg = &all["segments"][0];
    let (s0, s1) = (
        seg["addr_start"].as_u64().unwrap(),
        seg["addr_end"].as_u64().unwrap(),
    );
    let sub = s0 + (s1 - s0) / 8 / 4096 * 4096;
    // Every window covers the whole span: no cell is partly monitored.
    for s in &snaps {
        let covered: u64 = s["targets"][0]["regions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let (a, b) = (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap());
                b.min(s1).saturating_sub(a.max(s0))
            })
            .sum();
        assert_eq!(covered, s1 - s0, "a window covers part of the span");
    }

    // (time range in us since the record's start, address start, address
    // bin size, time bins, address bins, whether damo's first row counts).
    // The first case is the whole record and span; the second starts
    // mid-window and mid-region, so bins and ranges cut snapshots and
    // regions. damo 3.4.3 puts a snapshot that ends less than one time bin
    // before the time range's start into the first row with a negative
    // duration (its pixel index `int((t - start) / unit)` truncates toward
    // zero, and nothing filters snapshots by time): that row is damo's
    // error there, and left out.
    for (time, a0, abin, tb, ab, first_row) in [
        ((0, 30_000_000), s0, (s1 - s0) / 64, 40u64, 64u64, true),
        (
            (250_000, 29_750_000),
            sub,
            (s1 - sub) / 2 / 48 / 4096 * 4096,
            40,
            48,
            false,
        ),
    ] {
        let (t0, t1) = time;
        let a1 = a0 + abin * ab;
        assert!(a1 <= s1 && abin > 0);
        // damo's floored units equal udamon's bins.
        assert_eq!((t1 - t0) * 1000 % tb, 0, "time range not divisible");
        let case = format!("{t0}us-{t1}us x {a0:#x}-{a1:#x}, {tb}x{ab}");
        let ours = heatmap(&[
            "--target",
            "0",
            "--time-range",
            &format!("{t0}us-{t1}us"),
            "--address-range",
            &format!("{a0:#x}-{a1:#x}"),
            "--resol",
            &format!("{tb}x{ab}"),
        ]);
        // udamon drew exactly the asked grid, on one segment.
        assert_eq!(
            (
                ours["start_us"].as_u64(),
                ours["end_us"].as_u64(),
                ours["time_bins"].as_u64(),
                ours["addr_bins"].as_u64(),
                ours["axis_bytes"].as_u64(),
            ),
            (Some(t0), Some(t1), Some(tb), Some(ab), Some(a1 - a0)),
            "{case}"
        );
        assert_eq!(ours["segments"].as_array().unwrap().len(), 1, "{case}");
        assert_eq!(ours["segments"][0]["addr_start"].as_u64(), Some(a0));

        let ns = |t: u64| ((record_start_us + t) * 1000).to_string();
        let out = Command::new(&damo)
            .args(["report", "heatmap", "--output", "raw", "--tid", "0"])
            .args(["--resol", &tb.to_string(), &ab.to_string()])
            .args(["--time_range", &ns(t0), &ns(t1)])
            .args(["--address_range", &a0.to_string(), &a1.to_string()])
            .arg("-i")
            .arg(d.join("r.damo"))
            .output()
            .expect("run damo");
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{case}: damo: {stdout}{}",
            text(&out.stderr)
        );
        let theirs = damo_heatmap_raw(&stdout);
        assert_eq!(theirs.len() as u64, tb * ab, "{case}");

        let cells = ours["cells"].as_array().unwrap();
        let (mut compared, mut hot) = (0, 0);
        for (i, &(time_ns, addr, heat)) in theirs.iter().enumerate() {
            let (t, a) = (i as u64 / ab, i as u64 % ab);
            // Pixel i is udamon's cell (t, a): the same left edges.
            let t_edge = (ours["end_us"].as_f64().unwrap() - ours["start_us"].as_f64().unwrap())
                * 1000.0
                / tb as f64
                * t as f64;
            assert_eq!(time_ns, t_edge, "{case}: time of pixel {i}");
            assert_eq!(addr, (abin * a) as f64, "{case}: address of pixel {i}");
            let cell = cells[t as usize][a as usize].as_f64();
            // Every cell is covered on both sides.
            let (Some(heat), Some(cell)) = (heat, cell) else {
                panic!("{case}: cell ({t}, {a}): damo {heat:?}, udamon {cell:?}");
            };
            if t == 0 && !first_row {
                continue;
            }
            let freq = heat * sample_us / 1e6;
            assert!(
                (freq - cell).abs() <= 5e-5 + 1e-9,
                "{case}: cell ({t}, {a}): damo {heat} Hz = frequency {freq}, udamon {cell}"
            );
            compared += 1;
            hot += usize::from(cell >= 0.1);
        }
        // Not a comparison of zeros.
        assert!(hot >= 20, "{case}: only {hot} of {compared} cells are hot");
    }
}

/// A scheme file using every kernel feature of 6.17 to 7.2 goes to damo's
/// layout (`schemes check --damo`), damo 3.4's own scheme reader
/// (`_damon.Damos.from_kvpairs`, what `damo start --schemes FILE` calls;
/// no sysfs is touched) takes it and writes it back formatted (damo's
/// `raw` form writes times in nanoseconds it cannot read back), and udamon reads
/// damo's writing as the same schemes, but for `max_nr_snapshots`, which
/// damo keeps among a scheme's statistics and drops on reading.
#[test]
fn damo_reads_udamon_schemes_of_newer_kernels() {
    let Some(damo) = damo() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/schemes/kernel-7.toml"
    );
    let out = udamon(d, &["schemes", "check", file, "--damo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(d.join("ours.json"), &out.stdout).unwrap();
    let script = r#"
import json, os, sys
import damo
sys.path.insert(0, os.path.dirname(damo.__file__))
import _damon
kvs = json.load(open(sys.argv[1]))
print(json.dumps([_damon.Damos.from_kvpairs(kv).to_kvpairs() for kv in kvs]))
"#;
    let python = damo.with_file_name("python3");
    let out = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(d.join("ours.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "damo: {}", text(&out.stderr));
    let theirs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(theirs[0]["dests"][1]["id"], 1, "{theirs}");
    assert_eq!(theirs[0]["dests"][0]["weight"], 3, "{theirs}");
    assert_eq!(theirs[0]["quotas"]["fail_charge_denom"], "4", "{theirs}");
    let goals = &theirs[1]["quotas"]["goals"];
    assert_eq!(goals[0]["metric"], "node_memcg_used_bp", "{theirs}");
    assert_eq!(goals[0]["memcg_path"], "/workload", "{theirs}");
    assert_eq!(goals[1]["metric"], "active_mem_bp", "{theirs}");
    std::fs::write(d.join("theirs.json"), theirs.to_string()).unwrap();

    let normalised = |f: &str| {
        let out = udamon(d, &["schemes", "check", f, "--json"]);
        assert!(out.status.success(), "{f}: {}", text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let mut want = normalised(file);
    want["schemes"][1]
        .as_object_mut()
        .unwrap()
        .remove("max_nr_snapshots");
    assert_eq!(normalised("theirs.json"), want);
}
