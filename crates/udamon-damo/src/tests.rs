use std::io::Write;

use super::*;

/// Written by damo 3.4.3's own writer (`write_damon_records(.., 'json')`)
/// from three synthetic aggregations of one target.
const DAMO_JSON: &str = include_str!("../../udamon/tests/data/damo-3.4.3.json");

/// Imports `bytes` (as a file) and returns the summary and the record's
/// header and snapshots.
fn import_bytes(bytes: &[u8]) -> Result<(Summary, Header, Vec<Snapshot>), Error> {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("damo.data");
    std::fs::write(&input, bytes).unwrap();
    let out = d.path().join("out.udr");
    let mut calls = 0;
    let s = import(&input, &out, &mut |read, total| {
        assert!(read <= 2 * total);
        calls += 1;
    })?;
    // Nothing but the input and the output is left behind.
    let mut left: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["damo.data", "out.udr"]);
    let r = Reader::open(&out).unwrap();
    Ok((s, r.header().clone(), r.snapshots().unwrap()))
}

fn regions(snaps: &[Snapshot]) -> Vec<Vec<RegionSnapshot>> {
    snaps.iter().map(|s| s.targets[0].regions.clone()).collect()
}

#[test]
fn damo_json_imports_with_its_numbers_and_times() {
    let (sum, h, snaps) = import_bytes(DAMO_JSON.as_bytes()).unwrap();
    assert_eq!(sum.format, "json");
    assert_eq!((sum.snapshots, sum.targets), (3, 1));
    assert_eq!((h.attrs.sample_us, h.attrs.aggr_us), (5_000, 100_000));
    assert_eq!(h.params["damo_format"], "json");
    assert_eq!(snaps.len(), 3);
    let s = &snaps[1];
    assert_eq!((s.start_us, s.end_us), (100_000, 200_000));
    let r = &s.targets[0].regions;
    assert_eq!(r.len(), 3);
    assert_eq!(
        (r[0].start, r[0].end, r[0].nr_accesses),
        (40_960, 81_920, 5)
    );
    assert_eq!((r[1].nr_accesses, r[1].age), (20, 3));
    assert_eq!(sum.duration_us, 300_000);
}

#[test]
fn json_compressed_imports_the_same_snapshots() {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(DAMO_JSON.as_bytes()).unwrap();
    let (sum, _, snaps) = import_bytes(&z.finish().unwrap()).unwrap();
    assert_eq!(sum.format, "json_compressed");
    let (_, _, plain) = import_bytes(DAMO_JSON.as_bytes()).unwrap();
    assert_eq!(snaps, plain);
}

#[test]
fn perf_script_text_imports_the_same_snapshots() {
    let mut text = String::new();
    let mut t = 100.0f64;
    for snap in 0..3u64 {
        for (s, e, n, a) in [
            (10u64, 20u64, if snap == 1 { 5 } else { 0 }, snap),
            (20, 40, 20, 3),
            (100, 110, 0, 7),
        ] {
            text += &format!(
                "kdamond.0  4452 [000] {t:.6}: damon:damon_aggregated: target_id=0 nr_regions=3 {}-{}: {n} {a}\n",
                s * 4096,
                e * 4096
            );
        }
        t += 0.1;
    }
    let (sum, _, a) = import_bytes(text.as_bytes()).unwrap();
    assert_eq!(sum.format, "perf_script");
    let (_, _, b) = import_bytes(DAMO_JSON.as_bytes()).unwrap();
    assert_eq!(regions(&a), regions(&b));
}

/// Two damo records (two targets of one kdamond): the i-th snapshots of
/// both make the i-th snapshot of the udamon record, both targets kept.
#[test]
fn several_targets_are_paired_window_by_window() {
    let rec = |id: u64, base: u64, n: usize| {
        let snaps: Vec<Value> = (0..n as u64)
            .map(|i| {
                serde_json::json!({
                    "start_time": (base + i * 100_000) * 1000,
                    "end_time": (base + (i + 1) * 100_000) * 1000,
                    "regions": [
                        {"start": 4096 * (id + 1), "end": 4096 * (id + 9),
                         "nr_accesses": {"samples": i, "percent": 0},
                         "age": {"usec": 0, "aggr_intervals": id}}
                    ]
                })
            })
            .collect();
        serde_json::json!({
            "kdamond_idx": 0, "context_idx": 0, "target_id": id,
            "intervals": {"sample_us": 5000, "aggr_us": 100000, "ops_update_us": 1000000},
            "snapshots": snaps,
        })
    };
    // The second target's first window starts 50 us earlier and it has one
    // snapshot fewer.
    let json = serde_json::to_vec(&serde_json::json!([
        rec(0, 1_000_050, 5),
        rec(1, 1_000_000, 4)
    ]))
    .unwrap();
    let (sum, h, snaps) = import_bytes(&json).unwrap();
    assert_eq!((sum.targets, sum.snapshots), (2, 5));
    assert_eq!(h.targets.len(), 2);
    assert_eq!((snaps[0].start_us, snaps[0].end_us), (0, 100_050));
    for (i, s) in snaps.iter().enumerate() {
        let ids: Vec<u32> = s.targets.iter().map(|t| t.target_idx).collect();
        assert_eq!(
            ids,
            if i < 4 { vec![0, 1] } else { vec![0] },
            "snapshot {i}"
        );
        for t in &s.targets {
            assert_eq!(t.regions[0].nr_accesses, i as u32);
            assert_eq!(t.regions[0].age, t.target_idx);
        }
    }
}

/// A record too long to hold in memory is not held: a thousand snapshots
/// stream through, and every one arrives.
#[test]
fn a_long_record_streams_through() {
    let mut text = String::from(
        r#"[{"intervals": {"sample_us": 5000, "aggr_us": 100000, "ops_update_us": 1000000}, "snapshots": ["#,
    );
    for i in 0..1000u64 {
        if i > 0 {
            text.push(',');
        }
        text += &format!(
            r#"{{"start_time": {}, "end_time": {}, "regions": [{{"start": 0, "end": 8192, "nr_accesses": {{"samples": {}}}, "age": {{"aggr_intervals": 1}}}}]}}"#,
            i * 100_000_000,
            (i + 1) * 100_000_000,
            i % 21
        );
    }
    text += "]}]";
    let (sum, _, snaps) = import_bytes(text.as_bytes()).unwrap();
    assert_eq!(sum.snapshots, 1000);
    assert_eq!(snaps[999].targets[0].regions[0].nr_accesses, 999 % 21);
    assert_eq!(snaps[999].end_us, 100_000_000);
}

#[test]
fn bad_input_names_the_place() {
    let msg = |b: &[u8]| match import_bytes(b) {
        Err(e @ Error::Format { .. }) => e.to_string(),
        other => panic!("want a format error, got {other:?}"),
    };
    assert!(msg(b"{}").contains("JSON list"), "{}", msg(b"{}"));
    let e = msg(br#"[{"snapshots":[{"start_time":"x","end_time":1,"regions":[]}]}]"#);
    assert!(
        e.contains("record 0 snapshot 0: \"x\" is not a number in damo's raw format"),
        "{e}"
    );
    let e = msg(br#"[{"snapshots":[{"start_time":-5,"end_time":1,"regions":[]}]}]"#);
    assert!(
        e.contains("record 0 snapshot 0 start_time: -5 is not a non-negative"),
        "{e}"
    );
    assert!(msg(b"[]").contains("holds no target"));
    assert!(msg(b"hello\n").contains("no damon_aggregated line"));
    assert!(msg(b"[{\"snapshots\": [").contains("not damo's JSON"));
    assert!(msg(&[0x78, 0x9c, 1, 2, 3]).contains("does not inflate"));
    assert!(msg(&[b'x', 0xff, 0xfe, b'\n']).contains("perf.data files need"));
}
