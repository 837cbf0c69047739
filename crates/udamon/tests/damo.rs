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
