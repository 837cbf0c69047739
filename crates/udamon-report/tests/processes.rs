//! Reports of a record of several processes: the target table, selection by
//! process and the `--by process` breakdowns, over a synthetic record of
//! three processes (pids 100, 200 and 300), one arriving late (300), one
//! leaving early (the first 200), and a pid reused (200 again, later).

use std::ops::ControlFlow;

use udamon_core::{Attrs, RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_record::{Header, Reader, TargetEvent, TargetInfo, Writer, TARGET_EVENT};
use udamon_report::hot::{self, Hot, HotOptions};
use udamon_report::html::{self, HtmlOptions};
use udamon_report::wss::{self, WssOptions};
use udamon_report::{summary, Selected, Selection, SnapshotSource, TargetTable};

const WINDOW_US: u64 = 100_000;
const MIB: u64 = 1 << 20;

fn info(pid: u32, comm: &str, start: u64) -> TargetInfo {
    TargetInfo {
        start: Some(start),
        comm: Some(comm.into()),
        cgroup: Some("/programs.slice".into()),
        ..TargetInfo::new(pid, format!("{comm} --serve"))
    }
}

/// Target `k`'s hot bytes: 64 KiB << k.
fn hot_bytes(k: u32) -> u64 {
    (64 << 10) << k
}

fn regions(k: u32) -> TargetSnapshot {
    let base = 0x1000_0000 * u64::from(k + 1);
    TargetSnapshot {
        target_idx: k,
        regions: vec![
            RegionSnapshot {
                start: base,
                end: base + hot_bytes(k),
                nr_accesses: 20,
                age: 3,
            },
            RegionSnapshot {
                start: base + hot_bytes(k),
                end: base + 4 * MIB,
                nr_accesses: 0,
                age: 9,
            },
        ],
    }
}

/// 20 windows of 100 ms, 4 to a frame. Targets: 0 (pid 100) throughout; 1
/// (pid 200) exits after window 7; 2 (pid 300) arrives at window 5; 3 (pid
/// 200 again, a new process) arrives at window 12.
fn record() -> Reader {
    let mut h = Header::new("vaddr", Attrs::default());
    h.targets = vec![info(100, "server", 11), info(200, "worker", 22)];
    let mut w = Writer::new(Vec::new(), &h).unwrap();
    w.set_frame_snapshots(4);
    let ev = |w: &mut Writer<Vec<u8>>, e: TargetEvent| {
        w.push_json(TARGET_EVENT, &serde_json::to_value(e).unwrap())
            .unwrap()
    };
    for i in 0..20u64 {
        match i {
            5 => ev(
                &mut w,
                TargetEvent::Arrive {
                    at_us: 500_000,
                    idx: 2,
                    target: info(300, "late", 33),
                },
            ),
            8 => ev(
                &mut w,
                TargetEvent::Exit {
                    at_us: 800_000,
                    idx: 1,
                    why: "exited".into(),
                },
            ),
            12 => ev(
                &mut w,
                TargetEvent::Arrive {
                    at_us: 1_200_000,
                    idx: 3,
                    target: info(200, "worker", 44),
                },
            ),
            _ => {}
        }
        let mut targets = vec![regions(0)];
        if i < 8 {
            targets.push(regions(1));
        }
        if i >= 5 {
            targets.push(regions(2));
        }
        if i >= 12 {
            targets.push(regions(3));
        }
        w.push_snapshot(&Snapshot {
            start_us: i * WINDOW_US,
            end_us: (i + 1) * WINDOW_US,
            sample_us: 5_000,
            aggr_us: WINDOW_US,
            targets,
        })
        .unwrap();
    }
    Reader::from_bytes(w.finish().unwrap()).unwrap()
}

#[test]
fn the_table_holds_every_target_with_its_arrival_and_exit() {
    let r = record();
    let t = TargetTable::read(&r).unwrap();
    type Row = (u32, u32, Option<u64>, Option<u64>, Option<u64>);
    let rows: Vec<Row> = t
        .rows()
        .iter()
        .map(|r| (r.target_idx, r.pid, r.start, r.arrived_us, r.left_us))
        .collect();
    assert_eq!(
        rows,
        [
            (0, 100, Some(11), None, None),
            (1, 200, Some(22), None, Some(800_000)),
            (2, 300, Some(33), Some(500_000), None),
            (3, 200, Some(44), Some(1_200_000), None),
        ]
    );
    assert_eq!(t.get(1).unwrap().left_why.as_deref(), Some("exited"));
    assert_eq!(t.get(2).unwrap().comm.as_deref(), Some("late"));
    assert_eq!(t.get(3).unwrap().cgroup.as_deref(), Some("/programs.slice"));
    // Capped: a record of more targets than the cap is refused.
    let e = TargetTable::read_capped(&r, 3).unwrap_err();
    assert!(e.to_string().contains("more than 3 targets"), "{e}");
}

#[test]
fn wss_by_process_measures_each_over_its_own_windows() {
    let r = record();
    let table = TargetTable::read(&r).unwrap();
    let w = wss::build_by_process(&r, &WssOptions::default(), &table).unwrap();
    assert_eq!(w.snapshots, 20);
    let got: Vec<(u32, u32, usize, u64)> = w
        .processes
        .iter()
        .map(|p| {
            (
                p.process.target_idx,
                p.process.pid,
                p.windows,
                p.percentiles[2].wss_bytes,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, 100, 20, hot_bytes(0)),
            (1, 200, 8, hot_bytes(1)),
            (2, 300, 15, hot_bytes(2)),
            (3, 200, 8, hot_bytes(3)),
        ]
    );
    assert_eq!(w.processes[2].series[0].end_us, 600_000);
    // The JSON's field names.
    let v = serde_json::to_value(&w).unwrap();
    let p = &v["processes"][1];
    for k in [
        "target_idx",
        "pid",
        "start",
        "comm",
        "cgroup",
        "label",
        "arrived_us",
        "left_us",
        "left_why",
        "windows",
        "wss_avg_bytes",
        "percentiles",
        "series",
    ] {
        assert!(p.get(k).is_some(), "{k} in {p}");
    }
    assert_eq!(p["left_why"], "exited");
    assert_eq!(v["processes"][0]["arrived_us"], serde_json::Value::Null);
    let mut text = Vec::new();
    w.write_text(&mut text, false).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("800.0 ms (exited)"), "{text}");
    assert!(text.contains("late"), "{text}");
}

#[test]
fn a_time_range_still_names_processes_that_arrived_before_it() {
    let r = record();
    let table = TargetTable::read(&r).unwrap();
    // 1.6 s to 2 s: frames 4 only; targets 2 and 3 arrived in frames 1
    // and 3.
    let sel = Selection::since_start(&r, Some((1_600_000, 2_000_000)), None, None);
    assert_eq!(sel.frames(r.frames()), 4..5);
    let w = wss::build_by_process(&Selected::new(&r, sel), &WssOptions::default(), &table).unwrap();
    let got: Vec<(u32, Option<&str>, usize)> = w
        .processes
        .iter()
        .map(|p| (p.process.target_idx, p.process.comm.as_deref(), p.windows))
        .collect();
    assert_eq!(
        got,
        [
            (0, Some("server"), 4),
            (2, Some("late"), 4),
            (3, Some("worker"), 4)
        ]
    );
}

#[test]
fn a_reused_pid_selects_both_of_its_processes() {
    let r = record();
    let table = TargetTable::read(&r).unwrap();
    let idx = table.select(&[], &[200], &[]).unwrap();
    assert_eq!(idx, [1, 3]);
    let sel = Selection::since_start(&r, None, None, Some(idx));
    let src = Selected::new(&r, sel);
    let mut seen = Vec::new();
    src.for_each_snapshot(&mut |s| {
        seen.push(s.targets.iter().map(|t| t.target_idx).collect::<Vec<_>>());
        ControlFlow::Continue(())
    })
    .unwrap();
    // Windows 0-7 hold target 1, 12-19 target 3; 8-11 neither.
    assert_eq!(seen.len(), 16);
    assert!(seen[..8].iter().all(|t| t == &[1]));
    assert!(seen[8..].iter().all(|t| t == &[3]));
    let w = wss::build(&src, &WssOptions::default()).unwrap();
    assert_eq!(w.series.len(), 16);
    // The selection keeps the kept targets' `target` entries only.
    let mut kinds = Vec::new();
    src.for_each_entry(|e| {
        if let udamon_record::Entry::Json { value, .. } = e {
            kinds.push(value["idx"].as_u64().unwrap());
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(kinds, [1, 3]);
    let e = table
        .select(&[], &[], &["nginx".to_string()])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "--comm nginx: no target of the record has this command name (its comms: server, worker, late)"
    );
}

#[test]
fn hot_by_process_lists_each_process_apart() {
    let r = record();
    let table = TargetTable::read(&r).unwrap();
    let opts = HotOptions {
        top: 1,
        ..HotOptions::default()
    };
    let h = hot::build_by_process(&r, &opts, &table).unwrap();
    assert_eq!(h.processes.len(), 4);
    for p in &h.processes {
        let Hot::Snapshot(s) = &p.hot else {
            panic!("a snapshot")
        };
        assert_eq!(s.regions.len(), 1);
        assert_eq!(s.regions[0].target_idx, p.process.target_idx);
        assert_eq!(s.regions[0].size_bytes, hot_bytes(p.process.target_idx));
    }
    // Each as last seen: target 1 left after window 7.
    let Hot::Snapshot(s1) = &h.processes[1].hot else {
        unreachable!()
    };
    assert_eq!(s1.end_us, 800_000);
    let agg = hot::build_by_process(
        &r,
        &HotOptions {
            aggregate: true,
            top: 2,
            ..HotOptions::default()
        },
        &table,
    )
    .unwrap();
    let Hot::Aggregate(a2) = &agg.processes[2].hot else {
        panic!("an aggregate")
    };
    assert_eq!((a2.nr_snapshots, a2.start_us), (15, 500_000));
    assert_eq!(a2.ranges[0].size_bytes, hot_bytes(2));
    let v = serde_json::to_value(&agg).unwrap();
    assert_eq!(v["processes"][2]["mode"], "aggregate");
    assert_eq!(v["processes"][2]["pid"], 300);
    assert_eq!(v["processes"][2]["ranges"].as_array().unwrap().len(), 2);
}

#[test]
fn the_summary_table_has_every_process() {
    let r = record();
    let table = TargetTable::read(&r).unwrap();
    let ps = summary::processes(&r, &table).unwrap();
    let got: Vec<(u32, usize, Option<u64>)> = ps
        .iter()
        .map(|p| (p.process.pid, p.windows, p.wss_median_bytes))
        .collect();
    assert_eq!(
        got,
        [
            (100, 20, Some(hot_bytes(0))),
            (200, 8, Some(hot_bytes(1))),
            (300, 15, Some(hot_bytes(2))),
            (200, 8, Some(hot_bytes(3))),
        ]
    );
    let mut out = Vec::new();
    summary::write_processes(&mut out, &ps).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("processes  4\n"), "{out}");
    assert!(out.contains("/programs.slice"), "{out}");
}

#[test]
fn the_page_has_a_heatmap_and_working_set_per_process() {
    let r = record();
    let page = html::build(&r, &HtmlOptions::default()).unwrap();
    let p = page.processes.as_ref().expect("a picker");
    assert_eq!((p.total, p.views.len()), (4, 4));
    for v in &p.views {
        assert_eq!(v.heatmap.target_idx, v.process.target_idx);
        assert_eq!(v.wss.series.len(), v.windows);
    }
    let data = html::process_data(&page);
    let l = &data["list"];
    assert_eq!(l[2]["pid"], 300);
    assert_eq!(l[2]["comm"], "late");
    assert_eq!(l[2]["name"], "pid 300 (late)");
    assert!(!l[2]["heatmap"]["freq"].as_str().unwrap().is_empty());
    assert_eq!(l[2]["wss"]["t"].as_array().unwrap().len(), 15);
    let mut out = Vec::new();
    html::write_html(&mut out, &page, "programs", "programs.udr").unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("<select id=\"process\">"));
    assert!(out.contains("<option value=\"2\">pid 300 (late) &middot; target 2"));

    // One process selected: no picker.
    let one = HtmlOptions {
        targets: Some(vec![2]),
        ..HtmlOptions::default()
    };
    let page = html::build(&r, &one).unwrap();
    assert!(page.processes.is_none());
    assert_eq!(page.heatmap.target_idx, 2);
    // As with --target before: the page's working set has every window,
    // 0 where the target is not.
    assert_eq!(page.wss.series.len(), 20);
    assert_eq!(page.wss.series[0].wss_bytes, 0);
    assert_eq!(page.wss.series[19].wss_bytes, hot_bytes(2));
}
