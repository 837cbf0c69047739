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
        ControlFlow::Continue(())
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
        e.contains("record 0 snapshot 0 (end_time 1 ns) start_time: -5 is not a time"),
        "{e}"
    );
    assert!(msg(b"[]").contains("holds no target"));
    assert!(msg(b"hello\n").contains("no damon_aggregated line"));
    assert!(msg(b"[{\"snapshots\": [").contains("not damo's JSON"));
    assert!(msg(&[0x78, 0x9c, 1, 2, 3]).contains("does not inflate"));
    assert!(msg(&[b'x', 0xff, 0xfe, b'\n']).contains("perf.data files need"));
}

/// One damo record of `snaps` (JSON snapshot objects) at damo's default
/// intervals, as JSON text.
fn record_of(snaps: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!([{
        "intervals": {"sample_us": 5000, "aggr_us": 100000, "ops_update_us": 1000000},
        "snapshots": snaps,
    }]))
    .unwrap()
}

/// A snapshot of damo's JSON: `regions` as (start, end, samples).
fn snap(start_ns: Value, end_ns: Value, regions: &[(Value, Value, Value)]) -> Value {
    serde_json::json!({
        "start_time": start_ns,
        "end_time": end_ns,
        "regions": regions.iter().map(|(s, e, n)| serde_json::json!({
            "start": s, "end": e, "nr_accesses": {"samples": n}, "age": {"aggr_intervals": 1}
        })).collect::<Vec<_>>(),
    })
}

fn format_error(r: Result<(Summary, Header, Vec<Snapshot>), Error>) -> String {
    match r {
        Err(e @ Error::Format { .. }) => e.to_string(),
        other => panic!("want a format error, got {other:?}"),
    }
}

/// Values damo never writes are refused, each named with its snapshot and
/// its value, instead of imported as they are (issue 26: they were taken
/// with exit 0 and no word).
#[test]
fn values_damo_never_writes_are_refused_with_their_place() {
    use serde_json::json;
    let ok = || {
        snap(
            json!(0),
            json!(100_000_000),
            &[(json!(4096), json!(8192), json!(3))],
        )
    };
    let two = |second: Value| format_error(import_bytes(&record_of(&[ok(), second])));
    let cases: Vec<(Value, &str)> = vec![
        (
            snap(json!(100_000_000), json!(200_000_000), &[(json!(4096), json!(8192), json!(-3))]),
            "record 0 snapshot 1 (end_time 200000000 ns) region 0 nr_accesses.samples: -3 is not a count",
        ),
        (
            snap(json!(100_000_000), json!(200_000_000), &[(json!(8192), json!(4096), json!(1))]),
            "region 0: 0x2000-0x1000 does not end after it starts",
        ),
        (
            snap(json!(100_000_000), json!(200_000_000), &[(json!(4096), json!(4096), json!(1))]),
            "region 0: 0x1000-0x1000 does not end after it starts",
        ),
        (
            snap(json!(300_000_000), json!(200_000_000), &[(json!(4096), json!(8192), json!(1))]),
            "record 0 snapshot 1 (end_time 200000000 ns): start_time 300000000 is after end_time 200000000",
        ),
        (
            // 2^64 + 5, as a JSON number and as damo's string.
            snap(json!(100_000_000), json!(200_000_000), &[(json!(4096), serde_json::from_str("18446744073709551621").unwrap(), json!(1))]),
            "region 0 end: 18446744073709552000 is not an address",
        ),
        (
            snap(json!(100_000_000), json!(200_000_000), &[(json!(4096), json!("18,446,744,073,709,551,621"), json!(1))]),
            "region 0 end: 18446744073709551621 is not an address",
        ),
        (
            {
                let mut s = snap(json!(100_000_000), json!(200_000_000), &[(json!(4096), json!(8192), json!(1))]);
                s["sample_interval_us"] = json!(0);
                s
            },
            "record 0 snapshot 1 (end_time 200000000 ns) sample_interval_us: 0; a sampling interval is at least 1 us",
        ),
    ];
    for (second, want) in cases {
        let e = two(second);
        assert!(e.contains(want), "want {want:?} in: {e}");
    }
    // The record's intervals: a sampling interval of 0 made reports say
    // "max nr_accesses 100000".
    let bad_intervals = serde_json::to_vec(&json!([{
        "intervals": {"sample_us": 0, "aggr_us": 100000, "ops_update_us": 1000000},
        "snapshots": [ok()],
    }]))
    .unwrap();
    let e = format_error(import_bytes(&bad_intervals));
    assert!(
        e.contains("record 0 intervals.sample_us: 0; a sampling interval is at least 1 us"),
        "{e}"
    );
    // damo's own fake region (0-0, -1 samples) still closes a
    // single-snapshot record.
    let fake = snap(
        json!(100_000_000),
        json!(200_000_000),
        &[(json!(0), json!(0), json!(-1))],
    );
    let (sum, _, snaps) = import_bytes(&record_of(&[ok(), fake])).unwrap();
    assert_eq!((sum.snapshots, snaps.len()), (1, 1));
}

/// A snapshot's own sampling interval (what `udamon export` writes for a
/// window whose interval was tuned) is read back.
/// A snapshot whose regions go out of order (damo 3.4.3, ending a record
/// under load, repeated the last window's regions 57 times over, or one
/// region twice) is kept up to that point, and the import says so once.
#[test]
fn a_snapshot_whose_regions_go_back_is_kept_up_to_there() {
    use serde_json::json;
    let r = |s: u64, e: u64, n: u64| (json!(s), json!(e), json!(n));
    let window = [r(0x1000, 0x3000, 2), r(0x3000, 0x8000, 0)];
    let repeated: Vec<_> = window.iter().cycle().take(6).cloned().collect();
    let bytes = record_of(&[
        snap(json!(0), json!(100_000_000), &window),
        snap(json!(100_000_000), json!(200_000_000), &repeated),
        snap(json!(200_000_000), json!(300_000_000), &repeated),
    ]);
    let (summary, _, snaps) = import_bytes(&bytes).unwrap();
    let want: Vec<RegionSnapshot> = [(0x1000, 0x3000, 2), (0x3000, 0x8000, 0)]
        .iter()
        .map(|&(start, end, nr_accesses)| RegionSnapshot {
            start,
            end,
            nr_accesses,
            age: 1,
        })
        .collect();
    assert_eq!(regions(&snaps), [want.clone(), want.clone(), want]);
    assert_eq!(summary.warnings.len(), 1, "{:?}", summary.warnings);
    let w = &summary.warnings[0];
    assert!(
        w.contains("2 snapshot(s)") && w.contains("8 region(s)") && w.contains("snapshot 1"),
        "{w}"
    );
    // One region listed twice (as damo also ends a record): kept up to it.
    let twice = record_of(&[snap(
        json!(0),
        json!(100_000_000),
        &[
            r(0x1000, 0x3000, 1),
            r(0x3000, 0x4000, 1),
            r(0x3000, 0x4000, 1),
            r(0x4000, 0x5000, 1),
        ],
    )]);
    let (summary, _, snaps) = import_bytes(&twice).unwrap();
    assert_eq!(regions(&snaps)[0].len(), 2);
    assert!(
        summary.warnings[0].contains("region 2 (0x3000, before 0x4000)"),
        "{:?}",
        summary.warnings
    );
}

#[test]
fn a_snapshots_own_sampling_interval_is_kept() {
    use serde_json::json;
    let mut tuned = snap(
        json!(100_000_000),
        json!(200_000_000),
        &[(json!(4096), json!(8192), json!(3))],
    );
    tuned["sample_interval_us"] = json!(2500);
    let first = snap(
        json!(0),
        json!(100_000_000),
        &[(json!(4096), json!(8192), json!(3))],
    );
    let (_, _, snaps) = import_bytes(&record_of(&[first, tuned])).unwrap();
    assert_eq!((snaps[0].sample_us, snaps[1].sample_us), (5000, 2500));
}

/// A record with no snapshot before one with snapshots: two targets, the
/// first without windows (this used to index past the spills and panic).
#[test]
fn a_record_without_snapshots_before_others_is_a_target_without_windows() {
    use serde_json::json;
    let s = snap(
        json!(0),
        json!(100_000_000),
        &[(json!(4096), json!(8192), json!(3))],
    );
    let json = serde_json::to_vec(&json!([{"snapshots": []}, {"snapshots": [s]}])).unwrap();
    let (sum, _, snaps) = import_bytes(&json).unwrap();
    assert_eq!((sum.targets, sum.snapshots), (2, 1));
    assert_eq!(snaps[0].targets[0].target_idx, 1);
}

/// Inputs that would grow memory without end are refused at a cap, named
/// with the place and the cap (issue 26: `/dev/zero` grew to 24 GB).
#[test]
fn endless_lines_and_values_are_refused_at_their_caps() {
    // A line of perf script text past the cap (a file of zeros is one).
    let mut text = vec![b'a'; MAX_LINE_BYTES + 10];
    text.push(b'\n');
    let e = format_error(import_bytes(&text));
    assert!(
        e.contains("line 1 (from byte 0) is longer than 1 MiB, udamon's cap on a line"),
        "{e}"
    );
    // A JSON string past the cap, plain and compressed.
    let mut json = b"[{\"snapshots\": [], \"x\": \"".to_vec();
    // Twice the cap: reads go on past the place (they used to move it).
    json.extend(std::iter::repeat_n(b'x', 2 * MAX_TOKEN_BYTES));
    json.extend(b"\"}]");
    let e = format_error(import_bytes(&json));
    assert!(
        e.contains(&format!(
            "byte {}: a JSON string or number longer than 1 MiB",
            25 + MAX_TOKEN_BYTES
        )),
        "{e}"
    );
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&json).unwrap();
    let e = format_error(import_bytes(&z.finish().unwrap()));
    assert!(
        e.contains("of the inflated JSON: a JSON string or number longer"),
        "{e}"
    );
    // A number past the cap (serde_json gathers its digits too).
    let mut json = b"[{\"snapshots\": [], \"x\": 1".to_vec();
    json.extend(std::iter::repeat_n(b'0', MAX_TOKEN_BYTES + 10));
    json.extend(b"}]");
    let e = format_error(import_bytes(&json));
    assert!(
        e.contains("a JSON string or number longer than 1 MiB"),
        "{e}"
    );
    // Escaped quotes do not end a string.
    let mut json = b"[{\"snapshots\": [], \"x\": \"".to_vec();
    for _ in 0..(MAX_TOKEN_BYTES / 2 + 10) {
        json.extend(b"\\\"");
    }
    json.extend(b"\"}]");
    let e = format_error(import_bytes(&json));
    assert!(
        e.contains("a JSON string or number longer than 1 MiB"),
        "{e}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn dev_zero_is_refused_at_the_line_cap() {
    let d = tempfile::tempdir().unwrap();
    let e = import(
        Path::new("/dev/zero"),
        &d.path().join("x.udr"),
        &mut |_, _| ControlFlow::Continue(()),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("/dev/zero: line 1 (from byte 0) is longer than 1 MiB"),
        "{e}"
    );
}

/// More regions in one window than the cap: refused as the window is read.
#[test]
fn a_window_past_the_region_cap_is_refused() {
    let mut json =
        String::from(r#"[{"snapshots": [{"start_time": 0, "end_time": 100000000, "regions": ["#);
    for i in 0..=MAX_REGIONS as u64 {
        if i > 0 {
            json.push(',');
        }
        json += &format!(
            r#"{{"start":{},"end":{},"nr_accesses":{{"samples":0}}}}"#,
            i * 2,
            i * 2 + 1
        );
    }
    json += "]}]}]";
    let e = format_error(import_bytes(json.as_bytes()));
    assert!(
        e.contains("record 0 snapshot 0 (end_time 100000000 ns): more than 1048576 regions, udamon's cap on a window"),
        "{e}"
    );
}

/// perf script text: a file cut in the middle of a window says so, and an
/// event line that does not read, or a reversed region, is refused.
#[test]
fn perf_script_cut_mid_window_warns_and_bad_events_are_refused() {
    let line = |t: &str, s: u64, e: u64| {
        format!("kdamond.0  4452 [000] {t}: damon:damon_aggregated: target_id=0 nr_regions=2 {s}-{e}: 1 2\n")
    };
    let whole = line("100.100000", 4096, 8192) + &line("100.100000", 8192, 16384);
    let cut = whole.clone() + &line("100.200000", 4096, 8192);
    let (sum, _, snaps) = import_bytes(whole.as_bytes()).unwrap();
    assert_eq!((snaps.len(), sum.warnings.len()), (1, 0));
    let (sum, _, snaps) = import_bytes(cut.as_bytes()).unwrap();
    assert_eq!(snaps.len(), 1);
    assert_eq!(sum.warnings.len(), 1, "{:?}", sum.warnings);
    assert!(
        sum.warnings[0].contains(
            "the last window (1 damon_aggregated event(s) up to line 3 at 100.200000 s) is incomplete, cut short, and was dropped"
        ),
        "{:?}",
        sum.warnings
    );
    let bad = whole.clone()
        + "kdamond.0  4452 [000] 100.2: damon:damon_aggregated: target_id=0 nr_regions=2 4096-8192: -1 2\n";
    let e = format_error(import_bytes(bad.as_bytes()));
    assert!(
        e.contains("line 3: a damon_aggregated event udamon cannot read"),
        "{e}"
    );
    let reversed = whole + &line("100.200000", 8192, 4096);
    let e = format_error(import_bytes(reversed.as_bytes()));
    assert!(
        e.contains("line 3: region 0x2000-0x1000 does not end after it starts"),
        "{e}"
    );
}

/// The caller's progress callback stops an import: `Interrupted`, and the
/// spills are gone.
#[test]
fn a_stop_from_the_caller_interrupts_the_import() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("damo.json");
    std::fs::write(&input, DAMO_JSON).unwrap();
    let out = d.path().join("out.udr");
    let e = import(&input, &out, &mut |_, _| ControlFlow::Break(())).unwrap_err();
    assert!(matches!(e, Error::Interrupted), "{e:?}");
    assert!(!std::fs::read_dir(d.path()).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with(".udamon-import-")));
}

/// More targets than the cap: refused at the first one past it, no spill
/// left.
#[test]
fn a_record_past_the_target_cap_is_refused() {
    use serde_json::json;
    let rec = json!({"snapshots": [snap(json!(0), json!(100_000_000), &[(json!(4096), json!(8192), json!(1))])]});
    let json = serde_json::to_vec(&vec![rec; MAX_TARGETS + 1]).unwrap();
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("damo.json");
    std::fs::write(&input, json).unwrap();
    let e = import(&input, &d.path().join("out.udr"), &mut |_, _| {
        ControlFlow::Continue(())
    })
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("record 256: more than 256 damo records (targets), udamon's cap"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
}

/// The lexer's cap, against a byte-by-byte reference, over random JSON-ish
/// text cut into random reads: the same place past the cap, or none.
#[test]
fn the_token_cap_finds_the_place_a_byte_scan_finds() {
    fn reference(text: &[u8], cap: usize) -> Option<usize> {
        let (mut run, mut in_string, mut escaped) = (0, false, false);
        for (i, &b) in text.iter().enumerate() {
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                    run = 0;
                    continue;
                }
                run += 1;
            } else {
                match b {
                    b'"' => {
                        in_string = true;
                        run = 0;
                    }
                    b',' | b':' | b'[' | b']' | b'{' | b'}' | b' ' | b'\t' | b'\n' | b'\r' => {
                        run = 0
                    }
                    _ => run += 1,
                }
            }
            if run > cap {
                return Some(i);
            }
        }
        None
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let alphabet = b"\"\\a1 ,:[]{}\n";
    for round in 0..2000 {
        let len = 1 + next(200) as usize;
        // Runs of one byte now and then, so that the cap is reached.
        let mut text = Vec::with_capacity(len);
        while text.len() < len {
            let b = alphabet[next(alphabet.len() as u64) as usize];
            let n = if next(4) == 0 {
                1 + next(12) as usize
            } else {
                1
            };
            text.extend(std::iter::repeat_n(b, n));
        }
        let cap = 1 + next(8) as usize;
        let over = Rc::new(Cell::new(None));
        let mut lexer = TokenCap::new(&text[..], 0, Rc::clone(&over));
        lexer.cap = cap;
        let mut buf = [0u8; 32];
        loop {
            let want = 1 + next(buf.len() as u64) as usize;
            match lexer.read(&mut buf[..want]) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        assert_eq!(
            over.get().map(|p| p as usize),
            reference(&text, cap),
            "round {round}, cap {cap}: {:?}",
            String::from_utf8_lossy(&text)
        );
    }
}
