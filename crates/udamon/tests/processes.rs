//! Reports of a record of several processes, from the command line: the
//! commands of docs/reports.md's "Processes" run as written, selection by
//! `--pid`, `--comm` and `--target`, `--by process`, `cut` keeping the
//! kept processes' `target` entries, the HTML page's process picker, and
//! export then import of several targets.
//!
//! The record is written here with `udamon_record::Writer`: 20 windows of
//! 100 ms, 4 to a frame, of three processes: pid 100 (`server`)
//! throughout, pid 200 (`worker`) leaving after window 7, pid 300 (`late`)
//! arriving at window 5, and pid 200 again (a new `worker`, target 3) at
//! window 12.

use std::path::{Path, PathBuf};
use std::process::Command;

use udamon_core::{Attrs, RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_record::{Header, TargetEvent, TargetInfo, Writer, TARGET_EVENT};

mod common;
use common::{json, ok, repo, run_bounded, text, udamon, Bounds};

const MIB: u64 = 1 << 20;

fn info(pid: u32, comm: &str, start: u64) -> TargetInfo {
    TargetInfo {
        start: Some(start),
        comm: Some(comm.into()),
        cgroup: Some("/programs.slice".into()),
        ..TargetInfo::new(pid, format!("{comm} --serve"))
    }
}

/// Target `k`'s working set: 64 KiB << k.
fn hot_bytes(k: u32) -> u64 {
    (64 << 10) << k
}

/// Target `k` in window `i`: its working set (in the middle of its 4 MiB)
/// accessed 11 to 20 times (a heatmap of many colours), the rest not at all.
fn regions(k: u32, i: u64) -> TargetSnapshot {
    let base = 0x1000_0000 * u64::from(k + 1);
    let (a, b) = (
        base + 2 * MIB - hot_bytes(k) / 2,
        base + 2 * MIB + hot_bytes(k) / 2,
    );
    let region = |start, end, nr_accesses| RegionSnapshot {
        start,
        end,
        nr_accesses,
        age: 3,
    };
    TargetSnapshot {
        target_idx: k,
        regions: vec![
            region(base, a, 0),
            region(a, b, 20 - (i % 10) as u32),
            region(b, base + 4 * MIB, 0),
        ],
    }
}

/// Writes the record as `d/programs.udr`.
fn programs(d: &Path) {
    let mut h = Header::new("vaddr", Attrs::default());
    h.targets = vec![info(100, "server", 11), info(200, "worker", 22)];
    let mut w = Writer::create(&d.join("programs.udr"), &h).unwrap();
    w.set_frame_snapshots(4);
    let events = [
        (
            5,
            TargetEvent::Arrive {
                at_us: 500_000,
                idx: 2,
                target: info(300, "late", 33),
            },
        ),
        (
            8,
            TargetEvent::Exit {
                at_us: 800_000,
                idx: 1,
                why: "exited".into(),
            },
        ),
        (
            12,
            TargetEvent::Arrive {
                at_us: 1_200_000,
                idx: 3,
                target: info(200, "worker", 44),
            },
        ),
    ];
    for i in 0..20u64 {
        for (_, e) in events.iter().filter(|(at, _)| *at == i) {
            w.push_json(TARGET_EVENT, &serde_json::to_value(e).unwrap())
                .unwrap();
        }
        let mut targets = vec![regions(0, i)];
        if i < 8 {
            targets.push(regions(1, i));
        }
        if i >= 5 {
            targets.push(regions(2, i));
        }
        if i >= 12 {
            targets.push(regions(3, i));
        }
        w.push_snapshot(&Snapshot {
            start_us: i * 100_000,
            end_us: (i + 1) * 100_000,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets,
        })
        .unwrap();
    }
    w.finish().unwrap();
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    programs(dir.path());
    dir
}

/// Runs udamon, checks it exited 2; its stderr.
fn usage_error(d: &Path, args: &[&str]) -> String {
    let out = udamon(d, args);
    assert_eq!(out.status.code(), Some(2), "udamon {}", args.join(" "));
    text(&out.stderr)
}

fn ok_json(d: &Path, args: &[&str]) -> serde_json::Value {
    ok(d, args);
    json(&udamon(d, args))
}

#[test]
fn docs_processes_commands_run_as_written() {
    let doc = std::fs::read_to_string(repo("docs/reports.md")).unwrap();
    let at = doc
        .find("## Processes")
        .expect("docs/reports.md has Processes");
    let rest = &doc[at..];
    let start = rest.find("```sh\n").expect("a sh block") + 6;
    let end = start + rest[start..].find("```").expect("closed block");
    let lines: Vec<&str> = rest[start..end].lines().filter(|l| !l.is_empty()).collect();
    assert!(lines.len() >= 9, "{lines:?}");
    let dir = setup();
    let d = dir.path();
    for line in lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], "udamon", "{line}");
        let out = ok(d, &words[1..]);
        assert!(!out.is_empty(), "{line}: no output");
    }
    assert!(d.join("programs.html").is_file());
    assert!(d.join("late.udr").is_file());
}

#[test]
fn pid_comm_and_target_select_processes() {
    let dir = setup();
    let d = dir.path();
    // A reused pid: both processes, 8 windows each.
    let w = ok_json(
        d,
        &["report", "wss", "programs.udr", "--pid", "200", "--json"],
    );
    assert_eq!(w["series"].as_array().unwrap().len(), 16, "{w}");
    let w = ok_json(
        d,
        &["report", "wss", "programs.udr", "--comm", "late", "--json"],
    );
    assert_eq!(w["target_idx"], 2);
    assert_eq!(w["percentiles"][2]["wss_bytes"], hot_bytes(2));
    // --target reaches the targets that arrived, and repeats.
    let w = ok_json(
        d,
        &["report", "wss", "programs.udr", "--target", "3", "--json"],
    );
    assert_eq!(w["series"].as_array().unwrap().len(), 8);
    let w = ok_json(
        d,
        &[
            "report",
            "wss",
            "programs.udr",
            "--target",
            "2",
            "--pid",
            "100",
            "--json",
        ],
    );
    assert_eq!(
        w["wss_avg_bytes"],
        (15 * hot_bytes(2) + 20 * hot_bytes(0)) / 20
    );
    let h = ok_json(
        d,
        &["report", "hot", "programs.udr", "--pid", "300", "--json"],
    );
    assert!(h["regions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["target_idx"] == 2));
    let hm = ok_json(
        d,
        &[
            "report",
            "heatmap",
            "programs.udr",
            "--comm",
            "worker",
            "--json",
        ],
    );
    assert_eq!(hm["target_idx"], 1);

    // Values that match nothing: exit 2, naming the value and what is there.
    for (args, want) in [
        (
            &["--pid", "77"][..],
            "--pid 77: no target of the record has this pid (its pids: 100, 200, 300)",
        ),
        (
            &["--comm", "nginx"],
            "--comm nginx: no target of the record has this command name (its comms: server, \
             worker, late)",
        ),
        (
            &["--target", "9"],
            "--target 9: the record has targets 0..3",
        ),
    ] {
        for report in ["wss", "hot", "heatmap"] {
            let err = usage_error(d, &[&["report", report, "programs.udr"][..], args].concat());
            assert!(err.contains(want), "{report} {args:?}: {err}");
        }
        let err = usage_error(
            d,
            &[&["cut", "programs.udr", "-o", "x.udr"][..], args].concat(),
        );
        assert!(err.contains(want), "cut {args:?}: {err}");
    }
}

#[test]
fn by_process_breaks_wss_hot_and_summary_down() {
    let dir = setup();
    let d = dir.path();
    let w = ok_json(
        d,
        &["report", "wss", "programs.udr", "--by", "process", "--json"],
    );
    let ps = w["processes"].as_array().unwrap();
    let got: Vec<(u64, u64, &str, u64, u64)> = ps
        .iter()
        .map(|p| {
            (
                p["target_idx"].as_u64().unwrap(),
                p["pid"].as_u64().unwrap(),
                p["comm"].as_str().unwrap(),
                p["windows"].as_u64().unwrap(),
                p["percentiles"][2]["wss_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, 100, "server", 20, hot_bytes(0)),
            (1, 200, "worker", 8, hot_bytes(1)),
            (2, 300, "late", 15, hot_bytes(2)),
            (3, 200, "worker", 8, hot_bytes(3)),
        ]
    );
    assert_eq!(ps[1]["left_us"], 800_000);
    assert_eq!(ps[1]["left_why"], "exited");
    assert_eq!(ps[3]["start"], 44);
    assert_eq!(ps[3]["arrived_us"], 1_200_000);
    assert_eq!(ps[0]["cgroup"], "/programs.slice");
    let t = ok(d, &["report", "wss", "programs.udr", "--by", "process"]);
    assert!(t.contains("800.0 ms (exited)"), "{t}");

    // hot: each process apart, as last seen.
    let h = ok_json(
        d,
        &[
            "report",
            "hot",
            "programs.udr",
            "--by",
            "process",
            "-n",
            "1",
            "--json",
        ],
    );
    let ps = h["processes"].as_array().unwrap();
    assert_eq!(ps.len(), 4);
    assert_eq!(ps[1]["end_us"], 800_000);
    for p in ps {
        assert_eq!(p["mode"], "snapshot");
        assert_eq!(p["regions"][0]["target_idx"], p["target_idx"]);
    }
    // With a time range, only the processes in it; named all the same.
    let h = ok_json(
        d,
        &[
            "report",
            "hot",
            "programs.udr",
            "--by",
            "process",
            "--aggregate",
            "--time-range",
            "1.6s-2s",
            "--json",
        ],
    );
    let names: Vec<&str> = h["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["comm"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["server", "late", "worker"]);

    // summary: no run summary in this record, so a note and the table.
    let out = udamon(
        d,
        &[
            "report",
            "summary",
            "programs.udr",
            "--by",
            "process",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("the record has no summary"));
    let s = json(&out);
    let ps = s["processes"].as_array().unwrap();
    let got: Vec<(u64, u64, u64)> = ps
        .iter()
        .map(|p| {
            (
                p["pid"].as_u64().unwrap(),
                p["windows"].as_u64().unwrap(),
                p["wss_median_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (100, 20, hot_bytes(0)),
            (200, 8, hot_bytes(1)),
            (300, 15, hot_bytes(2)),
            (200, 8, hot_bytes(3)),
        ]
    );
    // Without --by process, as before: no summary is an error.
    let err = usage_error(d, &["report", "summary", "programs.udr"]);
    assert!(err.contains("the record has no summary"), "{err}");
}

/// The target table of a record, as `report summary --by process --json`
/// gives it: (index, pid, comm, arrived_us, windows).
fn table(d: &Path, rec: &str) -> Vec<(u64, u64, String, Option<u64>, u64)> {
    let s = ok_json(d, &["report", "summary", rec, "--by", "process", "--json"]);
    s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["target_idx"].as_u64().unwrap(),
                p["pid"].as_u64().unwrap(),
                p["comm"].as_str().unwrap_or("").to_string(),
                p["arrived_us"].as_u64(),
                p["windows"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn cut_keeps_the_kept_processes_and_their_target_entries() {
    let dir = setup();
    let d = dir.path();
    // One process that arrived late: its arrival comes along, its index
    // stays 2.
    ok(
        d,
        &["cut", "programs.udr", "--comm", "late", "-o", "late.udr"],
    );
    let w = ok_json(
        d,
        &["report", "wss", "late.udr", "--by", "process", "--json"],
    );
    let p = &w["processes"][0];
    assert_eq!(w["processes"].as_array().unwrap().len(), 1);
    assert_eq!((&p["target_idx"], &p["pid"]), (&2.into(), &300.into()));
    assert_eq!(p["arrived_us"], 500_000);
    assert_eq!(p["windows"], 15);

    // A time range after both arrivals and the exit: the kept pid's
    // entries (target 1's exit, target 3's arrival) come along, target 2's
    // arrival does not; the header is kept whole.
    ok(
        d,
        &[
            "cut",
            "programs.udr",
            "--pid",
            "200",
            "--time-range",
            "1.6s-2s",
            "-o",
            "w.udr",
        ],
    );
    let raw = ok(d, &["report", "raw", "w.udr"]);
    let entries: Vec<serde_json::Value> = raw
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "target")
        .collect();
    let idx: Vec<u64> = entries
        .iter()
        .map(|v| v["value"]["idx"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, [1, 3]);
    assert_eq!(
        table(d, "w.udr"),
        [
            (0, 100, "server".into(), None, 0),
            (1, 200, "worker".into(), None, 0),
            (3, 200, "worker".into(), Some(1_200_000), 4),
        ]
    );

    // No target selection: every target entry is kept.
    ok(
        d,
        &[
            "cut",
            "programs.udr",
            "--time-range",
            "1.6s-2s",
            "-o",
            "t.udr",
        ],
    );
    assert_eq!(
        table(d, "t.udr"),
        [
            (0, 100, "server".into(), None, 4),
            (1, 200, "worker".into(), None, 0),
            (2, 300, "late".into(), Some(500_000), 4),
            (3, 200, "worker".into(), Some(1_200_000), 4),
        ]
    );
}

/// The JSON a page embeds.
fn page_data(html: &str) -> serde_json::Value {
    let open = "<script id=\"udamon-data\" type=\"application/json\">";
    let at = html.find(open).unwrap() + open.len();
    let end = at + html[at..].find("</script>").unwrap();
    serde_json::from_str(&html[at..end]).unwrap()
}

#[test]
fn the_html_page_has_a_process_picker() {
    let dir = setup();
    let d = dir.path();
    let s = ok_json(
        d,
        &["report", "html", "programs.udr", "-o", "p.html", "--json"],
    );
    assert_eq!(
        (&s["processes"], &s["processes_shown"]),
        (&4.into(), &4.into())
    );
    let html = std::fs::read_to_string(d.join("p.html")).unwrap();
    assert!(html.contains("<select id=\"process\">"));
    let data = page_data(&html);
    let list = data["processes"]["list"].as_array().unwrap();
    let got: Vec<(u64, u64, &str, u64)> = list
        .iter()
        .map(|p| {
            (
                p["target_idx"].as_u64().unwrap(),
                p["pid"].as_u64().unwrap(),
                p["comm"].as_str().unwrap(),
                p["heatmap"]["target_idx"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, 100, "server", 0),
            (1, 200, "worker", 1),
            (2, 300, "late", 2),
            (3, 200, "worker", 3)
        ]
    );
    assert_eq!(list[2]["wss"]["t"].as_array().unwrap().len(), 15);
    assert_eq!(list[2]["wss"]["hi"][0], hot_bytes(2));
    // One process: no picker.
    ok(
        d,
        &[
            "report",
            "html",
            "programs.udr",
            "--pid",
            "300",
            "-o",
            "one.html",
        ],
    );
    let one = std::fs::read_to_string(d.join("one.html")).unwrap();
    assert!(!one.contains("<select id=\"process\">"));
    assert!(page_data(&one)["processes"].is_null());

    // In a browser, when one is set up (tests/html.rs says how).
    if let Some(py) = std::env::var_os("UDAMON_BROWSER_PYTHON").map(PathBuf::from) {
        let mut c = Command::new(py);
        c.arg(repo("tests/browser/check_html.py"))
            .arg(d.join("p.html"))
            .arg(d.join("p.png"));
        let out = run_bounded(
            c,
            Bounds {
                secs: 240,
                mem_bytes: u64::MAX,
            },
            "check_html.py",
        );
        assert!(
            out.status.success(),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(text(&out.stdout).contains("4 processes picked"));
    }
}

#[test]
fn export_then_import_keeps_each_target() {
    let dir = setup();
    let d = dir.path();
    let e = ok_json(
        d,
        &[
            "export",
            "programs.udr",
            "-o",
            "p.json",
            "--format",
            "damo-json",
            "--json",
        ],
    );
    assert_eq!(e["targets"], 4, "{e}");
    let damo: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("p.json")).unwrap()).unwrap();
    let per: Vec<(u64, usize)> = damo
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["target_id"].as_u64().unwrap(),
                t["snapshots"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(per, [(0, 20), (1, 8), (2, 15), (3, 8)]);
    let i = ok_json(d, &["import", "p.json", "-o", "back.udr", "--json"]);
    assert_eq!(i["targets"], 4, "{i}");
    // Each target's own windows and working set come back (damo's format
    // carries no pid or comm).
    let w = ok_json(
        d,
        &["report", "wss", "back.udr", "--by", "process", "--json"],
    );
    let got: Vec<(u64, u64)> = w["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["windows"].as_u64().unwrap(),
                p["percentiles"][2]["wss_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (20, hot_bytes(0)),
            (8, hot_bytes(1)),
            (15, hot_bytes(2)),
            (8, hot_bytes(3)),
        ]
    );
}
