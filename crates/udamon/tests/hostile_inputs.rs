//! Issue 26, outside the service: inputs that exhaust memory (an endless
//! line, an endless JSON string), values damo never writes, an output a
//! signal leaves half-written, an evaluation that fails without a word, and
//! replay flags `record` refuses. Time and memory are bounded by the
//! harness (a timeout, an address-space limit), never asserted.

use std::io::Write;
use std::path::Path;

mod common;
use common::{finish, repo, spawn, text, udamon, udamon_within, Bounds, DEFAULT};

/// What an import of a hostile input may use: an address-space limit a
/// debug build runs in, far below what holding a 4 GiB line (or the
/// 24 GB `/dev/zero` grew to) needs.
const SMALL_MEMORY: Bounds = Bounds {
    secs: 120,
    mem_bytes: 256 << 20,
};

/// The names in `d`, sorted.
fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A small simulated record `r.udr` in `d`.
fn small_record(d: &Path, duration: &str) {
    let out = udamon(
        d,
        &[
            "record",
            "--sim",
            &repo("examples/specs/demo.toml"),
            "--duration",
            duration,
            "-o",
            "r.udr",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `/dev/zero` grew to 24.4 GB and was killed by the OOM killer; a file of
/// one 4 GiB line (sparse here, so it takes no disk) is the same read from
/// a file. Both are refused at the line cap, exit 2, in little memory,
/// leaving nothing behind.
#[test]
fn an_endless_line_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let line = d.join("line.data");
    std::fs::File::create(&line)
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    let mut inputs = vec![line.to_string_lossy().into_owned()];
    if Path::new("/dev/zero").exists() {
        inputs.push("/dev/zero".into());
    }
    for input in &inputs {
        let out = udamon_within(d, &["import", input, "-o", "x.udr"], SMALL_MEMORY);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{input}: {err}");
        assert!(
            err.contains(&format!(
                "{input}: line 1 (from byte 0) is longer than 1 MiB, udamon's cap on a line"
            )),
            "{input}: {err}"
        );
        assert_eq!(names(d), ["line.data"], "{input}: something was left");
    }
}

/// An endless JSON string, streamed through a FIFO (no disk): serde_json
/// gathers a string whole, so it is refused at the value cap.
#[test]
fn an_endless_json_string_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("damo.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&fifo) else {
                return;
            };
            let chunk = vec![b'a'; 1 << 16];
            let _ = f.write_all(b"[\"");
            // Up to 4 GiB, or until the reader goes away.
            for _ in 0..(4u64 << 30) / chunk.len() as u64 {
                if f.write_all(&chunk).is_err() {
                    return;
                }
            }
        })
    };
    let out = udamon_within(d, &["import", "damo.json", "-o", "x.udr"], SMALL_MEMORY);
    // A writer still waiting for a reader (the import never opened the
    // FIFO) is let go.
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    }
    writer.join().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "damo.json: byte 1048578: a JSON string or number longer than 1 MiB, udamon's cap on one value"
        ),
        "{err}"
    );
    assert_eq!(names(d), ["damo.json"]);
}

/// A damo record of one target holding `second` after a good snapshot.
fn damo_json(second: &str) -> String {
    format!(
        r#"[{{"intervals": {{"sample_us": 5000, "aggr_us": 100000, "ops_update_us": 1000000}},
"snapshots": [
{{"start_time": 0, "end_time": 100000000, "regions": [{{"start": 4096, "end": 8192, "nr_accesses": {{"samples": 3}}}}]}},
{second}]}}]"#
    )
}

/// Values damo never writes were imported with exit 0 and no word (and a
/// sampling interval of 0 made reports say "max nr_accesses 100000"): each
/// is refused, exit 2, naming the snapshot and the value, and the output
/// already there is left as it was.
#[test]
fn values_damo_never_writes_are_refused_naming_snapshot_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let snap = |regions: &str| {
        format!(r#"{{"start_time": 100000000, "end_time": 200000000, "regions": [{regions}]}}"#)
    };
    let region = |s: &str, e: &str, n: &str| {
        format!(r#"{{"start": {s}, "end": {e}, "nr_accesses": {{"samples": {n}}}}}"#)
    };
    let cases = [
        (
            damo_json(&snap(&region("4096", "8192", "-3"))),
            "record 0 snapshot 1 (end_time 200000000 ns) region 0 nr_accesses.samples: -3 is not a count",
        ),
        (
            damo_json(&snap(&region("8192", "4096", "1"))),
            "record 0 snapshot 1 (end_time 200000000 ns) region 0: 0x2000-0x1000 does not end after it starts",
        ),
        (
            damo_json(
                r#"{"start_time": 300000000, "end_time": 200000000, "regions": []}"#,
            ),
            "record 0 snapshot 1 (end_time 200000000 ns): start_time 300000000 is after end_time 200000000",
        ),
        (
            damo_json(&snap(&region("4096", "18446744073709551621", "1"))),
            "region 0 end: 18446744073709552000 is not an address",
        ),
        (
            damo_json(&snap(&region("4096", "\"18,446,744,073,709,551,621\"", "1"))),
            "region 0 end: 18446744073709551621 is not an address",
        ),
        (
            damo_json(&snap(&region("4096", "8192", "1"))).replace("\"sample_us\": 5000", "\"sample_us\": 0"),
            "record 0 intervals.sample_us: 0; a sampling interval is at least 1 us",
        ),
        (
            damo_json(&snap(&region("4096", "8192", "1")).replace(
                "\"regions\"",
                "\"sample_interval_us\": 0, \"regions\"",
            )),
            "record 0 snapshot 1 (end_time 200000000 ns) sample_interval_us: 0; a sampling interval is at least 1 us",
        ),
    ];
    std::fs::write(d.join("x.udr"), "the previous output").unwrap();
    for (json, want) in &cases {
        std::fs::write(d.join("bad.json"), json).unwrap();
        let out = udamon(d, &["import", "bad.json", "-o", "x.udr"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {err}");
        assert!(err.contains(want), "want {want:?} in: {err}");
        assert_eq!(names(d), ["bad.json", "x.udr"], "{want}");
        assert_eq!(
            std::fs::read_to_string(d.join("x.udr")).unwrap(),
            "the previous output"
        );
    }
    // The same record, well-formed, imports.
    std::fs::write(
        d.join("good.json"),
        damo_json(&snap(&region("4096", "8192", "1"))),
    )
    .unwrap();
    let out = udamon(d, &["import", "good.json", "-o", "y.udr", "--json"]);
    let v = common::json(&out);
    assert_eq!(
        (
            v["snapshots"].as_u64(),
            v["warnings"].as_array().map(Vec::len)
        ),
        (Some(2), Some(0))
    );
}

/// A perf script file cut in the middle of a window was taken whole with
/// no word: the incomplete last window is dropped, and said so.
#[test]
fn a_perf_script_cut_mid_window_says_its_last_window_was_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let line = |t: &str, s: u64, e: u64| {
        format!("kdamond.0  4452 [000] {t}: damon:damon_aggregated: target_id=0 nr_regions=2 {s}-{e}: 1 2\n")
    };
    let text_of = line("100.100000", 4096, 8192)
        + &line("100.100000", 8192, 16384)
        + &line("100.200000", 4096, 8192);
    std::fs::write(d.join("cut.perf"), text_of).unwrap();
    let out = udamon(d, &["import", "cut.perf", "-o", "c.udr", "--json"]);
    let err = text(&out.stderr);
    let v = common::json(&out);
    assert_eq!(v["snapshots"], 1);
    let want = "the last window (1 damon_aggregated event(s) up to line 3 at 100.200000 s) is incomplete, cut short, and was dropped";
    assert!(
        err.contains(&format!("udamon: warning: cut.perf: {want}")),
        "{err}"
    );
    assert!(v["warnings"][0].as_str().unwrap().contains(want), "{v}");
}

/// `udamon export big.udr -o big.damo` killed after a second left a 2.5 MB
/// partial file under the final name. Now the name holds the previous file
/// until the new one is complete: caught in the middle (stopped), the name
/// still holds the previous file; SIGTERM then ends it (exit 130) without
/// a temporary file or a `.old`; SIGKILL leaves at most the temporary file;
/// a run to the end keeps the previous file as `.old`.
#[test]
fn a_signal_leaves_the_previous_export_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_record(d, "2m");
    let before = "the previous export";
    let temp = || {
        names(d)
            .into_iter()
            .find(|n| n.starts_with(".big.damo.udamon-") && n.ends_with(".tmp"))
    };
    for sig in [libc::SIGTERM, libc::SIGKILL] {
        std::fs::write(d.join("big.damo"), before).unwrap();
        let child = spawn(d, &["export", "r.udr", "-o", "big.damo"], DEFAULT);
        let pid = child.id() as libc::pid_t;
        // Until the export has written something, under either name.
        let mut caught = false;
        for _ in 0..20_000 {
            let started =
                temp().is_some_and(|t| std::fs::metadata(d.join(t)).is_ok_and(|m| m.len() > 0));
            let changed =
                std::fs::read(d.join("big.damo")).ok().as_deref() != Some(before.as_bytes());
            if started || changed {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                caught = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(caught, "the export never started writing");
        assert_eq!(
            std::fs::read_to_string(d.join("big.damo")).unwrap(),
            before,
            "mid-export, the name does not hold the previous file"
        );
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(pid, sig);
            libc::kill(pid, libc::SIGCONT);
        }
        let out = finish(child, DEFAULT.secs, "udamon export");
        assert_eq!(
            std::fs::read_to_string(d.join("big.damo")).unwrap(),
            before,
            "after the signal"
        );
        assert!(!d.join("big.damo.old").exists());
        if sig == libc::SIGTERM {
            assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
            assert!(
                text(&out.stderr).contains("interrupted; big.damo was not written"),
                "{}",
                text(&out.stderr)
            );
            assert_eq!(temp(), None, "the temporary file was left");
        } else if let Some(t) = temp() {
            std::fs::remove_file(d.join(t)).unwrap();
        }
    }
    // To the end: the new file in place, the previous one kept.
    let out = udamon(d, &["export", "r.udr", "-o", "big.damo"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("kept the previous big.damo as big.damo.old"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(d.join("big.damo.old")).unwrap(),
        before
    );
    assert_eq!(names(d), ["big.damo", "big.damo.old", "r.udr"]);
}

/// A command that fails after its output was checked used to have moved
/// the existing output to `NAME.old` already: the name was left empty. Now
/// the previous file stays where it was, with no `.old` beside it, and
/// nothing else is left behind.
#[test]
fn a_failed_command_leaves_the_previous_output_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_record(d, "5s");
    std::fs::write(
        d.join("bad.json"),
        damo_json(r#"{"start_time": 2, "end_time": 1, "regions": []}"#),
    )
    .unwrap();
    std::fs::write(d.join("not-a-record"), "hello").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["import", "bad.json", "-o", "out"], "is after end_time"),
        (
            &["export", "not-a-record", "-o", "out"],
            "not a udamon record",
        ),
        (
            &["cut", "r.udr", "--time-range", "1h-2h", "-o", "out"],
            "nothing of r.udr is in the selection",
        ),
        (
            &["report", "html", "not-a-record", "-o", "out.html"],
            "not a udamon record",
        ),
        (
            &[
                "report",
                "heatmap",
                "r.udr",
                "--time-range",
                "1h-2h",
                "-o",
                "out.png",
            ],
            "no snapshots in the selected time range",
        ),
    ];
    for (args, want) in cases {
        let out_name = args[args.len() - 1];
        std::fs::write(d.join(out_name), "the previous output").unwrap();
        let out = udamon(d, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(
            std::fs::read_to_string(d.join(out_name)).unwrap(),
            "the previous output",
            "{args:?}"
        );
        assert!(!d.join(format!("{out_name}.old")).exists(), "{args:?}");
        assert!(
            !names(d).iter().any(|n| n.starts_with('.')),
            "{args:?}: {:?}",
            names(d)
        );
        std::fs::remove_file(d.join(out_name)).unwrap();
    }
}

/// Every whole output lands under its name complete, the previous one kept
/// as `.old`, with no temporary file left: cut, report html, heatmap PNG
/// and SVG.
#[test]
fn whole_outputs_replace_the_previous_one_and_keep_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_record(d, "5s");
    let cases: &[&[&str]] = &[
        &["cut", "r.udr", "--time-range", "1s-2s", "-o", "part.udr"],
        &["report", "html", "r.udr", "-o", "r.html"],
        &["report", "heatmap", "r.udr", "-o", "h.png"],
        &["report", "heatmap", "r.udr", "-o", "h.svg"],
        &["export", "r.udr", "-o", "r.perf", "--format", "perf-script"],
    ];
    for args in cases {
        let name = args
            .iter()
            .skip_while(|a| **a != "-o")
            .nth(1)
            .unwrap()
            .to_string();
        std::fs::write(d.join(&name), "the previous output").unwrap();
        let out = udamon(d, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert_eq!(
            std::fs::read_to_string(d.join(format!("{name}.old"))).unwrap(),
            "the previous output",
            "{args:?}"
        );
        assert_ne!(
            std::fs::read(d.join(&name)).unwrap(),
            b"the previous output",
            "{args:?}"
        );
        assert!(
            !names(d).iter().any(|n| n.starts_with('.')),
            "{args:?}: {:?}",
            names(d)
        );
    }
    let png = std::fs::read(d.join("h.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // A device is written as it is.
    let out = udamon(d, &["export", "r.udr", "-o", "/dev/null"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn suite(d: &Path, body: &str) -> String {
    let p = d.join("suite.in.toml");
    std::fs::write(&p, body).unwrap();
    p.to_string_lossy().into_owned()
}

/// A missing or broken `sim` spec printed "2 of 2 runs done" and exited 0
/// with every run failed, and a refused `--workload` still made
/// `DIR/suite.toml`: everything is checked before the results directory
/// is made, and a refused command makes nothing.
#[test]
fn eval_checks_everything_before_making_anything() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("garbage.toml"), "this is [[ not a spec").unwrap();
    for (body, args, want) in [
        (
            "configs = [\"orig\", \"rec\"]\nrepeats = 1\n[[workload]]\nname = \"w\"\nsim = \"missing.toml\"\n",
            vec![],
            "workload \"w\": sim ",
        ),
        (
            "configs = [\"orig\", \"rec\"]\nrepeats = 1\n[[workload]]\nname = \"w\"\nsim = \"garbage.toml\"\n",
            vec![],
            "workload \"w\": sim ",
        ),
        (
            "configs = [\"orig\"]\n[[workload]]\nname = \"w\"\nrun = \"true\"\n",
            vec!["--workload", "x"],
            "--workload x: the suite has no such workload",
        ),
    ] {
        let s = suite(d, body);
        let mut a = vec!["eval", s.as_str(), "-o", "out"];
        a.extend(args);
        let out = udamon(d, &a);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
        assert!(!d.join("out").exists(), "{a:?}: the results directory was made");
    }
}

/// A workload none of whose runs worked measured nothing: exit 1, naming
/// the workload and why, after the summary and the saved results.
#[test]
fn eval_fails_when_every_run_of_a_workload_failed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = suite(
        d,
        "configs = [\"orig\"]\nrepeats = 2\n[[workload]]\nname = \"good\"\nrun = \"true\"\n\
         [[workload]]\nname = \"broken\"\nrun = \"echo no such input >&2; exit 3\"\n",
    );
    let out = udamon(d, &["eval", &s, "-o", "out"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "udamon: every run of a workload failed: broken (the run exited 3: no such input)"
        ),
        "{err}"
    );
    assert!(!err.contains("good ("), "{err}");
    assert!(
        text(&out.stdout).contains("4 of 4 runs done (2 ok, 2 failed, 0 skipped)"),
        "{}",
        text(&out.stdout)
    );
    assert!(d.join("out/results.tsv").is_file());
    // Only the workloads asked for count.
    let out = udamon(d, &["eval", &s, "-o", "out", "--workload", "good"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Damaged results were exit 1 or 2 by the damage (and a damaged
/// suite.toml was written over): every damage is bad input, exit 2, named.
#[test]
fn damaged_eval_results_are_bad_input_whatever_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = suite(
        d,
        "configs = [\"orig\"]\nrepeats = 1\n[[workload]]\nname = \"w\"\nrun = \"true\"\n",
    );
    let out = udamon(d, &["eval", &s, "-o", "out"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let results = d.join("out/results.jsonl");
    let good = std::fs::read(&results).unwrap();
    let suite_toml = std::fs::read(d.join("out/suite.toml")).unwrap();
    type Damage<'a> = (&'a str, Box<dyn Fn() + 'a>, &'a str);
    let damages: Vec<Damage> = vec![
        (
            "bytes that are not text",
            Box::new(|| {
                let mut b = vec![0xff, 0xfe, 0x00, b'\n'];
                b.extend(&good);
                std::fs::write(&results, b).unwrap();
            }),
            "results.jsonl:1: not UTF-8 text",
        ),
        (
            "a line that is not a result",
            Box::new(|| {
                let mut b = b"{\"x\": 1}\n".to_vec();
                b.extend(&good);
                std::fs::write(&results, b).unwrap();
            }),
            "results.jsonl:1: not a run result",
        ),
        (
            "a directory in the file's place",
            Box::new(|| {
                std::fs::remove_file(&results).unwrap();
                std::fs::create_dir(&results).unwrap();
            }),
            "results.jsonl is a directory, not a file of results",
        ),
        (
            "a suite.toml that is not text",
            Box::new(|| std::fs::write(d.join("out/suite.toml"), [0xff, 0xfe, 0xfd]).unwrap()),
            "suite.toml is damaged",
        ),
    ];
    for (what, damage, want) in damages {
        damage();
        for report in [false, true] {
            if report && what.starts_with("a suite.toml") {
                continue;
            }
            let mut a = vec!["eval", s.as_str(), "-o", "out"];
            if report {
                a.push("--report");
            }
            let out = udamon(d, &a);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what} {a:?}: {err}");
            assert!(err.contains(want), "{what}: {err}");
        }
        if what.starts_with("a suite.toml") {
            assert_eq!(
                std::fs::read(d.join("out/suite.toml")).unwrap(),
                [0xff, 0xfe, 0xfd],
                "written over"
            );
        }
        // Repaired for the next damage.
        if results.is_dir() {
            std::fs::remove_dir(&results).unwrap();
        }
        std::fs::write(&results, &good).unwrap();
        std::fs::write(d.join("out/suite.toml"), &suite_toml).unwrap();
    }
}

/// `replay --check --aggr 1ms` and `replay --min-regions 0` ran where
/// `record` refuses both: replay checks its attribute flags with record's
/// own code, and says what record says.
#[test]
fn replay_refuses_the_attribute_flags_record_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_record(d, "5s");
    std::fs::write(d.join("p.txt"), "4K max 0 0 5s max pageout\n").unwrap();
    let spec = repo("examples/specs/demo.toml");
    for flags in [&["--aggr", "1ms"][..], &["--min-regions", "0"][..]] {
        let mut rec = vec!["record", "--sim", spec.as_str(), "-o", "y.udr"];
        rec.extend(flags);
        let want = text(&udamon(d, &rec).stderr);
        assert!(want.starts_with("udamon: "), "{want}");
        for check in [true, false] {
            let mut a = vec!["replay", "r.udr", "--schemes", "p.txt"];
            if check {
                a.push("--check");
            }
            a.extend(flags);
            let out = udamon(d, &a);
            assert_eq!(out.status.code(), Some(2), "{a:?}: {}", text(&out.stderr));
            assert_eq!(text(&out.stderr), want, "{a:?}");
        }
    }
}
