//! The real binary, run in a temporary directory.

mod common;
use common::{finish, json, repo, spawn, text, udamon, udamon_within, Bounds, DEFAULT};

const SMALL: &str = r#"
name = "small"
duration = "3s"
seed = 3
[[layout]]
object = "a"
size = "16M"
[[layout]]
gap = "1G"
[[layout]]
object = "b"
size = "16M"
[[layout]]
gap = "8G"
[[layout]]
object = "c"
size = "4M"
[[phase]]
duration = "3s"
[[phase.access]]
object = "b"
range = ["0%", "50%"]
rate = 200
"#;

#[test]
fn demo_writes_record_and_image_and_reports_accuracy() {
    let dir = tempfile::tempdir().unwrap();
    let out = udamon(dir.path(), &["demo", "--color", "never"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("hot_f1"), "{stdout}");
    assert!(stdout.contains("# heatmap"), "{stdout}");
    let png = std::fs::read(dir.path().join("heatmap.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // The demo says what to look for, and its zoom command shows the
    // always-hot area that a terminal-wide column hides.
    assert!(stdout.contains("what to look for"), "{stdout}");
    assert!(stdout.contains("a region is an address range"), "{stdout}");
    let zoom = stdout
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("udamon report heatmap udamon-demo.udr --address-range"))
        .unwrap_or_else(|| panic!("no zoom command in {stdout}"));
    let args: Vec<&str> = zoom.split_whitespace().skip(1).collect();
    let out = udamon(dir.path(), &args);
    assert!(out.status.success(), "{zoom}: {}", text(&out.stderr));
    let map = text(&out.stdout);
    // Rows of the zoomed map reach frequency digit 5 or more.
    let hot_rows = map
        .lines()
        .filter(|l| l.ends_with('s') || l.contains(" s "))
        .filter(|l| l.chars().any(|c| ('5'..='9').contains(&c)))
        .count();
    assert!(hot_rows >= 30, "{map}");
    assert!(dir.path().join("udamon-demo.udr").metadata().unwrap().len() > 1000);
}

#[test]
fn record_then_every_report() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.toml"), SMALL).unwrap();
    let out = udamon(
        dir.path(),
        &["record", "--sim", "small.toml", "-o", "s.udr", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["snapshots"], 30);
    assert_eq!(summary["seed"], 3);

    // raw: a header line with the parameters, the workload's objects as
    // its mappings, then one line per snapshot.
    let out = udamon(dir.path(), &["report", "raw", "s.udr"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "header");
    assert_eq!(lines[0]["sim"]["seed"], 3);
    assert_eq!(lines[1]["type"], "maps");
    assert_eq!(lines[2]["type"], "snapshot");
    assert_eq!(lines.iter().filter(|l| l["type"] == "snapshot").count(), 30);
    assert_eq!(lines.last().unwrap()["type"], "summary");

    for args in [
        &["report", "heatmap", "s.udr"][..],
        &["report", "heatmap", "s.udr", "--json"],
        &["report", "heatmap", "s.udr", "-o", "h.svg"],
        &["report", "wss", "s.udr", "--json"],
        &["report", "hot", "s.udr", "--json"],
        &["report", "accuracy", "s.udr", "--json"],
    ] {
        let out = udamon(dir.path(), args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let out = udamon(
        dir.path(),
        &["report", "accuracy", "s.udr", "--json", "--warmup", "5"],
    );
    let acc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(acc["windows"], 25);
    assert!(acc["hot_f1"].as_f64().unwrap() > 0.8, "{acc}");
}

#[test]
fn same_seed_same_record() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.toml"), SMALL).unwrap();
    for name in ["a.udr", "b.udr"] {
        let out = udamon(dir.path(), &["record", "--sim", "small.toml", "-o", name]);
        assert!(out.status.success());
    }
    let raw = |f| text(&udamon(dir.path(), &["report", "raw", f]).stdout);
    assert_eq!(raw("a.udr"), raw("b.udr"));
}

#[test]
fn truncated_record_still_reports_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.toml"), SMALL).unwrap();
    let out = udamon(
        dir.path(),
        &[
            "record",
            "--sim",
            "small.toml",
            "-o",
            "s.udr",
            "--duration",
            "20s",
        ],
    );
    assert!(out.status.success());
    let bytes = std::fs::read(dir.path().join("s.udr")).unwrap();
    // The closed record ends with its frame index, whose offset is in the
    // last 8 bytes (docs/record-format.md).
    let index = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().unwrap()) as usize;
    assert_eq!(&bytes[index..index + 4], b"UDFR");
    // Cut inside the index: every snapshot is read, the cut is reported;
    // cut inside the last data frame: the snapshots before it are read.
    for (cut, all) in [(bytes.len() - 10, true), (index - 10, false)] {
        std::fs::write(dir.path().join("cut.udr"), &bytes[..cut]).unwrap();
        let out = udamon(dir.path(), &["report", "wss", "cut.udr", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("warning: cut.udr: record is damaged"),
            "{}",
            text(&out.stderr)
        );
        let wss: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let n = wss["series"].as_array().unwrap().len();
        if all {
            assert_eq!(n, 200, "{wss}");
        } else {
            assert!(n > 0 && n < 200, "{wss}");
        }
    }
}

#[test]
fn input_errors_exit_2_with_the_bad_value() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "duration = \"2sx\"\n").unwrap();
    std::fs::write(dir.path().join("small.toml"), SMALL).unwrap();
    std::fs::write(dir.path().join("junk.udr"), "hello").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["record", "--sim", "bad.toml"],
            "line 1, column 12: unknown unit \"sx\"",
        ),
        (
            &["record", "--sim", "missing.toml"],
            "cannot read spec missing.toml",
        ),
        (
            &["record", "--sim", "small.toml", "--sample", "5parsecs"],
            "--sample",
        ),
        (
            &["record", "--sim", "small.toml", "--aggr", "1ms"],
            "longer than aggregation interval",
        ),
        (
            &["record", "--sim", "small.toml", "--fixed-regions", "0"],
            "at least 1 region",
        ),
        (&["report", "wss", "junk.udr"], "junk.udr"),
        (&["report", "heatmap", "junk.udr", "--resol", "big"], ""),
        (&["bench", "--only", "speed"], "unknown part"),
    ];
    for (args, want) in cases {
        let out = udamon(dir.path(), args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn features_reads_a_fake_tree_and_names_foreign_kdamonds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let put = |p: &str, s: &str| {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, s).unwrap();
    };
    put("proc/sys/kernel/osrelease", "6.12.0-test\n");
    put("sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds", "1\n");
    put("sys/kernel/mm/damon/admin/kdamonds/0/state", "on\n");
    put("sys/kernel/mm/damon/admin/kdamonds/0/pid", "77\n");
    let out = udamon(root, &["features", "--root", root.to_str().unwrap()]);
    assert!(out.status.success());
    let s = text(&out.stdout);
    assert!(
        s.contains(
            "kdamond 0 (state on, pid 77) was not created by udamon: udamon will not touch it; \
             --ops kdamond is unavailable while it exists"
        ),
        "{s}"
    );
    let out = udamon(
        root,
        &["features", "--json", "--root", root.to_str().unwrap()],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kernel"], "6.12.0-test");
    assert_eq!(v["foreign_kdamonds"][0]["pid"], 77);
    // Nothing was written into the fake sysfs.
    let state =
        std::fs::read_to_string(root.join("sys/kernel/mm/damon/admin/kdamonds/0/state")).unwrap();
    assert_eq!(state, "on\n");
}

#[test]
fn completions_and_man_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = udamon(dir.path(), &["completions", "bash"]);
    assert!(out.status.success() && text(&out.stdout).contains("udamon"));
    let out = udamon(dir.path(), &["man"]);
    assert!(out.status.success() && text(&out.stdout).contains(".TH"));
}

/// Every scheme line printed in the seeds (the same verbatim lines as
/// udamon-scheme-file's seeds test) parses and runs through `udamon apply`.
const SEED_LINES: &[&str] = &[
    "na 500M 90 99 100ms mlock",
    "na na 80 90 100ms madv_willneed",
    "na na 10 20 100ms madv_cold",
    "na na 0 10 100ms madv_pageout",
    "2M na 90 99 100ms madv_hugepage",
    "2M na 0 25 100ms madv_nohugepage",
    "2M null    5 null    null null    hugepage",
    "2M null    null 5    1s null      nohugepage",
    "4K null    null 5    5s null      pageout",
    "min     max     5       max     min     max     hugepage",
    "2M      max     min     min     7s      max     nohugepage",
    "4K      max     0       0       5s     max     pageout",
    "min max min min 2m max page_out",
    "2MB max 80% max 1m max thp",
    "min max min 5% 1m max nothp",
    "min max 5 max min max hugepage",
    "2M max min min 7 s max nohugepage",
    "4K max min min 5 s max pageout",
];

#[test]
fn every_seed_scheme_line_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.toml"), SMALL).unwrap();
    for (i, line) in SEED_LINES.iter().enumerate() {
        let f = format!("s{i}.txt");
        std::fs::write(dir.path().join(&f), format!("{line}\n")).unwrap();
        let out = udamon(
            dir.path(),
            &[
                "apply",
                &f,
                "--sim",
                "small.toml",
                "--duration",
                "8s",
                "--json",
            ],
        );
        assert!(out.status.success(), "{line}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["with_schemes"]["schemes"].as_array().unwrap().len(),
            1,
            "{line}"
        );
    }
}

#[test]
fn prcl_halves_the_average_rss_of_a_mostly_cold_workload() {
    let dir = tempfile::tempdir().unwrap();
    let (schemes, spec) = (
        repo("examples/schemes/prcl.txt"),
        repo("examples/specs/demo.toml"),
    );
    let out = udamon(
        dir.path(),
        &[
            "apply", &schemes, "--sim", &spec, "--json", "-o", "prcl.udr",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ratio = v["ratios"]["rss_avg_bytes"].as_f64().unwrap();
    assert!(ratio <= 0.5, "rss ratio {ratio}");
    assert!(
        v["with_schemes"]["schemes"][0]["sz_applied"]
            .as_u64()
            .unwrap()
            > 0
    );

    // The record carries the statistics and the summary.
    let out = udamon(dir.path(), &["report", "summary", "prcl.udr", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["rss_avg_bytes", "rss_peak_bytes", "runtime_s", "faults"] {
        assert!(s[key].is_number(), "summary lacks {key}: {s}");
    }
    assert_eq!(s["schemes"][0]["action"], "pageout");
    let out = udamon(dir.path(), &["report", "stats", "prcl.udr", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        st["series"].as_array().unwrap().len() >= 40,
        "a reading per second"
    );
}

#[test]
fn dry_run_applies_nothing_but_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (schemes, spec) = (
        repo("examples/schemes/prcl.txt"),
        repo("examples/specs/demo.toml"),
    );
    let out = udamon(
        dir.path(),
        &[
            "apply",
            &schemes,
            "--sim",
            &spec,
            "--json",
            "--dry-run",
            "--duration",
            "20s",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["dry_run"], true);
    // Nothing was done: the run is the run without schemes.
    assert_eq!(v["ratios"]["rss_avg_bytes"], 1.0);
    assert_eq!(v["ratios"]["runtime_s"], 1.0);
    // What would have been done: the demo's cold memory (about 1.6 GiB
    // mapped, most of it idle), counted at each pass where it qualifies
    // again after the action's age reset (every 5 s: a few times in 20 s,
    // not at every 100 ms pass, which added up to hundreds of GiB), and
    // once as distinct memory.
    let s = &v["with_schemes"]["schemes"][0];
    assert_eq!(s["action"], "pageout");
    let (tried, applied, distinct) = (
        s["sz_tried"].as_u64().unwrap(),
        s["sz_applied"].as_u64().unwrap(),
        s["would_apply_bytes"].as_u64().unwrap(),
    );
    assert!(
        distinct > 512 << 20 && distinct <= 2 << 30,
        "distinct {distinct}"
    );
    assert!(
        applied >= distinct && applied <= 5 * distinct,
        "applied {applied}"
    );
    assert!(
        tried <= 8 << 30 && applied <= tried,
        "tried {tried}, applied {applied}"
    );
    let human = udamon(
        dir.path(),
        &[
            "apply",
            &schemes,
            "--sim",
            &spec,
            "--dry-run",
            "--duration",
            "20s",
        ],
    );
    let out = text(&human.stdout);
    assert!(out.contains("dry run: no action was performed"), "{out}");
    assert!(
        out.contains("dry run: pageout would have been applied to"),
        "{out}"
    );
    assert!(!out.contains("with schemes"), "{out}");
}

#[test]
fn schemes_check_prints_the_normalised_form() {
    let dir = tempfile::tempdir().unwrap();
    let out = udamon(
        dir.path(),
        &["schemes", "check", &repo("examples/schemes/ethp.txt")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("action = \"hugepage\"") && s.contains("action = \"nohugepage\""),
        "{s}"
    );
    std::fs::write(dir.path().join("bad.txt"), "4K max 0 0 5s max pagegout\n").unwrap();
    let out = udamon(dir.path(), &["schemes", "check", "bad.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("line 1"),
        "{}",
        text(&out.stderr)
    );
}

/// Every monitor kind stops at `--duration`, from the command line, within a
/// time and memory bound (the full scan once ran forever).
#[test]
fn every_monitor_kind_stops_at_its_duration() {
    let dir = tempfile::tempdir().unwrap();
    let spec = repo("examples/specs/swap.toml");
    let bounds = Bounds {
        secs: 120,
        mem_bytes: 2 << 30,
    };
    for extra in [&[][..], &["--fixed-regions", "100"], &["--full-scan"]] {
        let mut args = vec![
            "record",
            "--sim",
            &spec,
            "--duration",
            "1s",
            "-o",
            "m.udr",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = udamon_within(dir.path(), &args, bounds);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["snapshots"], 10, "{args:?}");
        assert_eq!(v["simulated_s"], 1.0, "{args:?}");
        assert_eq!(v["ended_by"], "duration", "{args:?}");
    }
}

/// An output is never written onto an input, and an existing output is
/// kept as NAME.old (one generation, as perf does) instead of replaced.
#[test]
fn outputs_never_replace_inputs_and_keep_the_previous_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("x.toml"), SMALL).unwrap();
    std::fs::write(d.join("p.txt"), "4K max 0 0 5s max pageout\n").unwrap();
    std::fs::copy(
        repo("crates/udamon/tests/data/damo-3.4.3.json"),
        d.join("d.json"),
    )
    .unwrap();
    let out = udamon(d, &["record", "--sim", "x.toml", "-o", "r.udr"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cases: &[&[&str]] = &[
        &["record", "--sim", "x.toml", "-o", "x.toml"],
        &["apply", "p.txt", "--sim", "x.toml", "-o", "p.txt"],
        &["apply", "p.txt", "--sim", "x.toml", "-o", "./x.toml"],
        &["import", "d.json", "-o", "d.json"],
        &["report", "heatmap", "h.png", "-o", "h.png"],
        &["tune", "p.txt", "--sim", "x.toml", "-o", "x.toml"],
        &["tune", "p.txt", "--replay", "h.png", "--plot", "h.png"],
    ];
    // A record whose name looks like an image (a heatmap's output).
    std::fs::copy(d.join("r.udr"), d.join("h.png")).unwrap();
    let inputs = ["x.toml", "p.txt", "d.json", "r.udr", "h.png"];
    let before: Vec<Vec<u8>> = inputs
        .iter()
        .map(|f| std::fs::read(d.join(f)).unwrap())
        .collect();
    for args in cases {
        let out = udamon(d, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("that is the input"), "{args:?}: {err}");
    }
    let after: Vec<Vec<u8>> = inputs
        .iter()
        .map(|f| std::fs::read(d.join(f)).unwrap())
        .collect();
    assert!(before == after, "an input changed");
    assert!(!d.join("x.toml.old").exists() && !d.join("p.txt.old").exists());

    // Writing again: the previous output is kept, once.
    let first = std::fs::read(d.join("r.udr")).unwrap();
    let out = udamon(
        d,
        &["record", "--sim", "x.toml", "-o", "r.udr", "--seed", "9"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("kept the previous r.udr as r.udr.old"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(d.join("r.udr.old")).unwrap(), first);
    assert_ne!(std::fs::read(d.join("r.udr")).unwrap(), first);
    // Two outputs of one command cannot be the same file.
    let out = udamon(d, &["demo", "-o", "same.png", "--image", "./same.png"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// Outputs are checked before the work starts: a tune whose results could
/// not be written fails at once, before any run.
#[test]
fn tune_checks_its_outputs_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("x.toml"), SMALL).unwrap();
    std::fs::write(d.join("p.txt"), "4K max 0 0 5s max pageout\n").unwrap();
    for (args, want) in [
        (
            &[
                "tune",
                "p.txt",
                "--sim",
                "x.toml",
                "-o",
                "no/such/dir/t.toml",
            ][..],
            "directory no/such/dir does not exist",
        ),
        (
            &["tune", "p.txt", "--sim", "x.toml", "--plot", "t.jpg"],
            "--plot t.jpg: unknown image type",
        ),
        (
            &["tune", "p.txt", "--sim", "x.toml", "-o", "."],
            "is a directory",
        ),
    ] {
        let out = udamon(d, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        // Refused before the first run: nothing was printed or sampled.
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// SIGINT, SIGTERM and SIGHUP end a simulated record like a live one: the
/// record is complete up to there, the summary says so, exit 0.
#[test]
fn a_signal_ends_a_simulated_record_with_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let spec = repo("examples/specs/demo.toml");
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let child = spawn(
            dir.path(),
            &[
                "record",
                "--sim",
                &spec,
                "--duration",
                "10h",
                "-o",
                "long.udr",
                "--json",
            ],
            DEFAULT,
        );
        // Wait until it is recording (the record's header is written first).
        let rec = dir.path().join("long.udr");
        for _ in 0..100 {
            if rec.metadata().is_ok_and(|m| m.len() > 0) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        let out = finish(child, 60, "udamon record (signalled)");
        assert!(out.status.success(), "signal {sig}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ended_by"], "interrupted");
        let simulated = v["simulated_s"].as_f64().unwrap();
        assert!(simulated > 0.0 && simulated < 36_000.0, "{v}");
        assert!(text(&out.stderr).contains("interrupted after"));
        let out = udamon(dir.path(), &["report", "summary", "long.udr", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(s["ended_by"], "interrupted");
        assert_eq!(s["snapshots"], v["snapshots"]);
        assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    }
}

/// No perfect score over nothing, no silent partial replay, no run of
/// length zero.
#[test]
fn wrong_answers_that_looked_right_are_errors_or_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("small.toml"), SMALL).unwrap();
    std::fs::write(d.join("p.txt"), "4K max 0 0 1s max pageout\n").unwrap();
    let out = udamon(d, &["record", "--sim", "small.toml", "-o", "s.udr"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = udamon(d, &["report", "accuracy", "s.udr", "--warmup", "100000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--warmup 100000: no window is left to score; s.udr has 30"),
        "{}",
        text(&out.stderr)
    );
    for args in [
        &["record", "--sim", "small.toml", "--duration", "0s"][..],
        &["apply", "p.txt", "--sim", "small.toml", "--duration", "0us"],
        &["tune", "p.txt", "--sim", "small.toml", "--duration", "0ms"],
    ] {
        let out = udamon(d, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains("a positive duration"),
            "{args:?}"
        );
    }
    // A damaged record replays its readable part, and says so.
    let out = udamon(
        d,
        &[
            "record",
            "--sim",
            "small.toml",
            "-o",
            "l.udr",
            "--duration",
            "20s",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bytes = std::fs::read(d.join("l.udr")).unwrap();
    std::fs::write(d.join("cut.udr"), &bytes[..bytes.len() - 10]).unwrap();
    let out = udamon(d, &["replay", "cut.udr", "--schemes", "p.txt"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("warning: cut.udr"),
        "{}",
        text(&out.stderr)
    );
    // A byte flipped in the middle loses one frame, not the rest: the
    // report covers the whole run and says what was lost.
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    std::fs::write(d.join("flip.udr"), &flipped).unwrap();
    let whole = udamon(d, &["report", "wss", "l.udr", "--json"]);
    let out = udamon(d, &["report", "wss", "flip.udr", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: flip.udr: record is damaged at byte")
            && err.contains("snapshots lost; reading resumes at byte"),
        "{err}"
    );
    let series = |o: &std::process::Output| -> Vec<u64> {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["series"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|p| p["end_us"].as_u64().unwrap())
            .collect()
    };
    let (a, b) = (series(&whole), series(&out));
    // Same end; one frame's windows missing in between.
    assert_eq!(a.last(), b.last());
    assert!(
        b.len() < a.len() && b.len() + 64 >= a.len(),
        "{} of {}",
        b.len(),
        a.len()
    );
}

/// Bad input exits 2 and names the path once, in plain words.
#[test]
fn bad_input_exits_2_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("small.toml"), SMALL).unwrap();
    std::fs::write(d.join("p.txt"), "4K max 0 0 1s max pageout\n").unwrap();
    let out = udamon(d, &["record", "--sim", "small.toml", "-o", "s.udr"]);
    assert!(out.status.success());
    let cases: &[(&[&str], &str)] = &[
        (
            &["report", "wss", "x.udr"],
            "cannot read record x.udr: no such file or directory",
        ),
        (
            &["report", "wss", "."],
            "cannot read record .: is a directory",
        ),
        (
            &["import", "x.json"],
            "cannot read damo record x.json: no such file or directory",
        ),
        (
            &["report", "heatmap", "s.udr", "--resol", "0x0"],
            "bins must be at least 1",
        ),
        (
            &["report", "wss", "s.udr", "--percentiles", "150"],
            "percentile 150",
        ),
        (
            &[
                "tune",
                "p.txt",
                "--sim",
                "small.toml",
                "--score-expr",
                "1 +",
            ],
            "--score-expr \"1 +\"",
        ),
        (
            &["report", "heatmap", "s.udr", "-o", "no/dir/h.png"],
            "directory no/dir does not exist",
        ),
    ];
    for (args, want) in cases {
        let out = udamon(d, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(
            !err.contains("os error") && !err.contains("Os {"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn schemes_check_refuses_a_file_without_schemes_as_apply_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.txt"), "# nothing yet\n\n").unwrap();
    for args in [
        &["schemes", "check", "empty.txt"][..],
        &["apply", "empty.txt", "--sim", "x.toml"],
    ] {
        let out = udamon(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("empty.txt: no scheme in the file"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// A record of SMALL held at 30 regions, for the report options.
fn small_record(dir: &std::path::Path) {
    std::fs::write(dir.join("small.toml"), SMALL).unwrap();
    let out = udamon(
        dir,
        &[
            "record",
            "--sim",
            "small.toml",
            "-o",
            "s.udr",
            "--min-regions",
            "30",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn report_options_of_docs_reports_md() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_record(d);

    // hot: 20 rows by default, as documented; --top 0 lists all.
    let hot = json(&udamon(d, &["report", "hot", "s.udr", "--json"]));
    assert_eq!(hot["regions"].as_array().unwrap().len(), 20, "{hot}");
    let all = json(&udamon(d, &["report", "hot", "s.udr", "--json", "-n", "0"]));
    assert!(all["regions"].as_array().unwrap().len() >= 30, "{all}");

    // --target on heatmap, wss and hot.
    for report in ["heatmap", "wss", "hot"] {
        let out = udamon(d, &["report", report, "s.udr", "--json", "--target", "0"]);
        assert!(out.status.success(), "{report}: {}", text(&out.stderr));
        let out = udamon(d, &["report", report, "s.udr", "--target", "1"]);
        assert_eq!(out.status.code(), Some(2), "{report}");
        let err = text(&out.stderr);
        assert!(
            err.contains("--target 1: the record has one target, 0"),
            "{report}: {err}"
        );
    }

    // wss --sz-thres: no region of SMALL reaches 1 GiB.
    let wss = json(&udamon(
        d,
        &["report", "wss", "s.udr", "--json", "--sz-thres", "1G"],
    ));
    assert_eq!(wss["sz_thres_bytes"], 1u64 << 30);
    assert_eq!(wss["wss_avg_bytes"], 0);

    // hot --aggregate --time-range.
    let agg = json(&udamon(
        d,
        &[
            "report",
            "hot",
            "s.udr",
            "--json",
            "--aggregate",
            "--time-range",
            "1s-2s",
        ],
    ));
    assert_eq!(
        (agg["start_us"].as_u64(), agg["end_us"].as_u64()),
        (Some(1_000_000), Some(2_000_000)),
        "{agg}"
    );

    // heatmap image size and title.
    let out = udamon(
        d,
        &[
            "report", "heatmap", "s.udr", "-o", "h.png", "--width", "400", "--height", "300",
            "--title", "small",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let png = std::fs::read(d.join("h.png")).unwrap();
    let be32 = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
    assert_eq!((be32(16), be32(20)), (400, 300));

    // Bad values: exit 2, naming the flag and the value.
    let cases: &[(&[&str], &[&str])] = &[
        (
            &[
                "report", "heatmap", "s.udr", "-o", "h.png", "--width", "100",
            ],
            &["--width", "100", "300"],
        ),
        (
            &[
                "report", "heatmap", "s.udr", "-o", "h.png", "--height", "99999",
            ],
            &["--height", "99999", "20000"],
        ),
        (
            &["report", "heatmap", "s.udr", "--width", "400"],
            &["--width", "--output"],
        ),
        (
            &["report", "wss", "s.udr", "--sz-thres", "4Q"],
            &["--sz-thres", "4Q"],
        ),
        (
            &["report", "hot", "s.udr", "--time-range", "1s-0.5s"],
            &["--time-range 1s-0.5s", "not below the end"],
        ),
        (
            &[
                "report",
                "hot",
                "s.udr",
                "--aggregate",
                "--time-range",
                "2s-1s",
            ],
            &["--time-range 2s-1s"],
        ),
    ];
    for (args, wants) in cases {
        let out = udamon(d, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for want in *wants {
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }
}

#[test]
fn every_report_takes_json() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_record(d);
    for report in ["heatmap", "wss", "hot", "raw", "accuracy", "summary"] {
        let out = udamon(d, &["report", report, "s.udr", "--json"]);
        assert!(out.status.success(), "{report}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        // raw writes JSON lines, the others one document.
        let doc = if report == "raw" {
            stdout.lines().next().unwrap_or("")
        } else {
            &stdout
        };
        serde_json::from_str::<serde_json::Value>(doc).unwrap_or_else(|e| panic!("{report}: {e}"));
    }
}

#[test]
fn man_has_a_page_for_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = udamon(d, &["man", "--dir", "man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pages: std::collections::BTreeSet<String> = std::fs::read_dir(d.join("man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for want in [
        "udamon.1",
        "udamon-record.1",
        "udamon-report-heatmap.1",
        "udamon-schemes-check.1",
        "udamon-man.1",
    ] {
        assert!(pages.contains(want), "{want} missing from {pages:?}");
    }
    // Every page named in a page exists, and every page is named from udamon(1) down.
    let mut reached = std::collections::BTreeSet::from(["udamon.1".to_string()]);
    let mut todo = vec!["udamon.1".to_string()];
    while let Some(page) = todo.pop() {
        let roff = std::fs::read_to_string(d.join("man").join(&page))
            .unwrap()
            .replace("\\-", "-");
        for (i, _) in roff.match_indices("(1)") {
            let name = roff[..i]
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .next()
                .unwrap();
            let file = format!("{name}.1");
            assert!(
                pages.contains(&file),
                "{page} names {name}(1), which has no page"
            );
            if reached.insert(file.clone()) {
                todo.push(file);
            }
        }
    }
    assert_eq!(reached, pages);
    // One page at a time, as written in the directory.
    for (args, page) in [
        (&["man"][..], "udamon.1"),
        (&["man", "record"], "udamon-record.1"),
        (&["man", "report", "heatmap"], "udamon-report-heatmap.1"),
        (&["man", "schemes", "check"], "udamon-schemes-check.1"),
    ] {
        let out = udamon(d, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            std::fs::read_to_string(d.join("man").join(page)).unwrap(),
            "{args:?}"
        );
    }
    let out = udamon(d, &["man", "report", "heat"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("\"heat\""),
        "{}",
        text(&out.stderr)
    );
}

/// An imported damo record is whole: its summary says where it came from,
/// not that the run did not finish.
#[test]
fn an_imported_record_has_an_import_summary() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let damo = repo("crates/udamon/tests/data/damo-3.4.3.json");
    let out = udamon(d, &["import", &damo, "-o", "d.udr"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = udamon(d, &["report", "summary", "d.udr"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("imported from damo's json record"), "{s}");
    assert!(!s.contains("did not finish"), "{s}");
    let out = udamon(d, &["report", "summary", "d.udr", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["damo_format"], "json");
}

/// A scheme with quota goals reports their current values with its
/// statistics; one without goals has none.
#[test]
fn scheme_statistics_carry_the_goals_current_values() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("small.toml"), SMALL).unwrap();
    std::fs::write(
        d.join("goal.toml"),
        r#"
[[scheme]]
action = "pageout"
access_pattern = { freq = ["0%", "0%"], age = ["1s", "max"] }
[scheme.quota]
size = "4M"
reset_interval = "1s"
[[scheme.quota.goals]]
metric = "rss_bp"
target = "50%"

[[scheme]]
action = "stat"
"#,
    )
    .unwrap();
    let out = udamon(d, &["apply", "goal.toml", "--sim", "small.toml", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["with_schemes"]["schemes"];
    let goals = s[0]["goal_values"].as_array().unwrap();
    assert_eq!(goals.len(), 1, "{s}");
    assert!(goals[0].as_u64().unwrap() > 0, "{s}");
    assert!(s[1].get("goal_values").is_none(), "{s}");
}

/// Every snapshot report reads a part of a record as `udamon cut` would
/// keep it: wss, hot and raw take --time-range, --address-range and
/// --target, and what they report on the part equals what they report on
/// the cut record (times still count from the whole record's start).
#[test]
fn every_report_reads_a_selection() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("small.toml"), SMALL).unwrap();
    let out = udamon(
        d,
        &[
            "record",
            "--sim",
            "small.toml",
            "-o",
            "r.udr",
            "--duration",
            "20s",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json = |args: &[&str]| -> serde_json::Value {
        let out = udamon(d, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // The address range: the lower half of the first region's span.
    let raw = udamon(d, &["report", "raw", "r.udr"]);
    let snap: serde_json::Value = text(&raw.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "snapshot")
        .unwrap();
    let regions = snap["targets"][0]["regions"].as_array().unwrap();
    let lo = regions[0]["start"].as_u64().unwrap();
    let hi = regions.last().unwrap()["end"].as_u64().unwrap();
    let mid = lo + (hi - lo) / 2 / 4096 * 4096;
    let range = format!("{lo:#x}-{mid:#x}");
    let part = [
        "--time-range",
        "5s-10s",
        "--address-range",
        &range,
        "--target",
        "0",
    ];
    let out = udamon(
        d,
        &[&["cut", "r.udr", "-o", "part.udr"][..], &part].concat(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let whole = json(&["report", "wss", "r.udr", "--json", "--series"]);
    let sel = json(&[&["report", "wss", "r.udr", "--json", "--series"][..], &part].concat());
    let cut = json(&["report", "wss", "part.udr", "--json", "--series"]);
    let series = |v: &serde_json::Value| v["series"].as_array().unwrap().clone();
    assert_eq!(series(&whole).len(), 200);
    assert_eq!(series(&sel).len(), 50, "{sel}");
    // The same sizes as the cut record's; the times count from the whole
    // record's start here, from the part's start there.
    let sizes = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        series(v).iter().map(|p| p["wss_bytes"].clone()).collect()
    };
    assert_eq!(sizes(&sel), sizes(&cut));
    assert_eq!(series(&sel)[0]["end_us"], 5_100_000, "{sel}");
    assert!(sel["wss_avg_bytes"].as_u64().unwrap() <= whole["wss_avg_bytes"].as_u64().unwrap());

    let hot = json(&[&["report", "hot", "r.udr", "--json", "-n", "0"][..], &part].concat());
    let rows = hot["regions"].as_array().unwrap();
    assert!(!rows.is_empty(), "{hot}");
    for r in rows {
        let (s, e) = (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap());
        assert!(s >= lo && e <= mid, "{r}");
    }
    // Without --aggregate, the last snapshot of the range is the one shown.
    assert_eq!(hot["end_us"], 10_000_000, "{hot}");

    let raw = udamon(d, &[&["report", "raw", "r.udr"][..], &part].concat());
    assert!(raw.status.success(), "{}", text(&raw.stderr));
    let sel_snaps: Vec<serde_json::Value> = text(&raw.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "snapshot")
        .collect();
    let raw = udamon(d, &["report", "raw", "part.udr"]);
    let cut_snaps: Vec<serde_json::Value> = text(&raw.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "snapshot")
        .collect();
    assert_eq!(sel_snaps.len(), 50);
    assert_eq!(sel_snaps, cut_snaps);
}

/// `udamon cut` keeps the windows that overlap a time range and the parts
/// of regions in an address range, as a record every report reads; it says
/// what it kept, and refuses a cut that keeps nothing.
#[test]
fn cut_keeps_a_part_of_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("small.toml"), SMALL).unwrap();
    let out = udamon(
        d,
        &[
            "record",
            "--sim",
            "small.toml",
            "-o",
            "r.udr",
            "--duration",
            "20s",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = udamon(
        d,
        &[
            "cut",
            "r.udr",
            "-o",
            "part.udr",
            "--time-range",
            "5s-10s",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["of_snapshots"], 200, "{v}");
    assert_eq!(v["snapshots"], 50, "{v}");
    let raw = udamon(d, &["report", "raw", "part.udr"]);
    assert!(raw.status.success(), "{}", text(&raw.stderr));
    let lines: Vec<serde_json::Value> = text(&raw.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["params"]["cut_from"]["time_range"], "5s-10s");
    let snaps: Vec<&serde_json::Value> = lines.iter().filter(|l| l["type"] == "snapshot").collect();
    assert_eq!(snaps.len(), 50);
    assert_eq!(snaps[0]["start_us"], 5_000_000);
    assert_eq!(snaps[49]["end_us"], 10_000_000);
    assert!(!lines.iter().any(|l| l["type"] == "summary"));
    // An address range clips every region to it.
    let first = &snaps[0]["targets"][0]["regions"][0];
    let (lo, hi) = (
        first["start"].as_u64().unwrap(),
        first["end"].as_u64().unwrap(),
    );
    let mid = lo + (hi - lo) / 2 / 4096 * 4096;
    let range = format!("{lo:#x}-{mid:#x}");
    let out = udamon(
        d,
        &["cut", "r.udr", "-o", "a.udr", "--address-range", &range],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let raw = udamon(d, &["report", "raw", "a.udr"]);
    for l in text(&raw.stdout)
        .lines()
        .filter(|l| l.contains("\"snapshot\""))
    {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        for r in v["targets"][0]["regions"].as_array().unwrap() {
            assert!(
                r["start"].as_u64().unwrap() >= lo && r["end"].as_u64().unwrap() <= mid,
                "{r}"
            );
        }
    }
    // What keeps nothing, or names nothing to keep, is bad input.
    for (args, want) in [
        (
            &["cut", "r.udr", "-o", "n.udr", "--time-range", "1h-2h"][..],
            "nothing of r.udr is in the selection",
        ),
        (&["cut", "r.udr", "-o", "n.udr"], "give what to keep"),
        (
            &["cut", "r.udr", "-o", "n.udr", "--target", "3"],
            "--target 3: the record has one target",
        ),
    ] {
        let out = udamon(d, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(want),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(!d.join("n.udr").exists());
}

/// docs/live.md's accuracy table of soft-dirty resets, as written: every
/// spec under every reset, scored; then the same as JSON.
#[test]
fn bench_softdirty_scores_every_reset_policy() {
    let dir = tempfile::tempdir().unwrap();
    let out = udamon(dir.path(), &["bench", "--only", "softdirty"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    for spec in ["demo", "swap", "sweep", "sparse-hot"] {
        for reset in ["sample", "window", "windows:4", "windows:16"] {
            assert!(
                table
                    .lines()
                    .any(|l| l.split_whitespace().take(3).collect::<Vec<_>>()
                        == [spec, "reset", reset]),
                "{spec} {reset} missing:\n{table}"
            );
        }
    }
    let out = udamon(
        dir.path(),
        &["bench", "--only", "softdirty", "--quick", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["softdirty"].as_array().unwrap();
    assert_eq!(rows.len(), 16, "{v}");
    for r in rows {
        let f1 = r["hot_f1"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&f1), "{r}");
    }
}
