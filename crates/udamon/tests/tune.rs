//! `udamon tune` and `udamon replay`: the real binary, in a temporary
//! directory.

mod common;
use common::{json, text, udamon};

/// Hot, cold and a table used about every 5 seconds: 10 s.
const SPEC: &str = r#"
name = "small-tune"
duration = "10s"
seed = 2
[[layout]]
object = "hot"
size = "16M"
[[layout]]
object = "cold"
size = "64M"
[[layout]]
object = "table"
size = "32M"
[[phase]]
duration = "10s"
[[phase.access]]
object = "hot"
rate = 400
[[phase.access]]
object = "table"
rate = 0.2
"#;

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("w.toml"), SPEC).unwrap();
    std::fs::write(
        dir.path().join("prcl.txt"),
        "4K max min min 5s max pageout\n",
    )
    .unwrap();
    dir
}

const TUNE: &[&str] = &["tune", "prcl.txt", "--sim", "w.toml", "--range", "0s..8s"];

#[test]
fn tune_writes_json_schemes_and_plot_and_repeats_with_the_seed() {
    let dir = setup();
    let d = dir.path();
    let mut args = TUNE.to_vec();
    args.extend([
        "--samples",
        "6",
        "--seed",
        "3",
        "--json",
        "-o",
        "tuned.toml",
        "--plot",
        "curve.png",
    ]);
    let v = json(&udamon(d, &args));
    let samples = v["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 6);
    let stages: Vec<&str> = samples
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        ["global", "global", "global", "global", "local", "local"]
    );
    assert_eq!(v["fit"]["degree"], 2);
    assert_eq!(v["fit"]["coeffs"].as_array().unwrap().len(), 3);
    assert_eq!(
        (v["fit"]["x_lo"].as_f64(), v["fit"]["x_hi"].as_f64()),
        (Some(0.0), Some(8e6))
    );
    assert!(v["x_normalisation"]
        .as_str()
        .unwrap()
        .starts_with("u = 2 * (x - fit.x_lo)"));
    let chosen = v["chosen"]["value"].as_f64().unwrap();
    assert!((0.0..=8e6).contains(&chosen));
    assert!(v["chosen"]["measured"]["score"].is_number());
    assert!(v["baseline"]["runtime_s"].as_f64().unwrap() >= 10.0);
    // the tuned file is a scheme file `udamon apply` reads, with the value
    let out = udamon(d, &["schemes", "check", "tuned.toml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = match v["chosen"]["display"].as_str().unwrap() {
        "0s" => "min",
        d => d,
    };
    let want = format!("age = [\"{shown}\", \"max\"]");
    assert!(
        text(&out.stdout).contains(&want),
        "{} / {want}",
        text(&out.stdout)
    );
    let png = std::fs::read(d.join("curve.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // the same seed, the same samples
    let again = json(&udamon(d, &args));
    assert_eq!(again["samples"], v["samples"]);
    assert_eq!(again["chosen"], v["chosen"]);
}

#[test]
fn tune_prints_a_table_and_takes_a_time_budget() {
    let dir = setup();
    let mut args = TUNE.to_vec();
    args.extend([
        "--time-limit",
        "1m",
        "--unit-time",
        "15s",
        "--plot",
        "c.svg",
    ]);
    let out = udamon(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("#  stage      min_age     runtime     rss avg  refaults     score"),
        "{s}"
    );
    assert_eq!(
        s.lines().filter(|l| l.contains(" global ")).count(),
        2,
        "{s}"
    );
    assert_eq!(
        s.lines().filter(|l| l.contains(" local ")).count(),
        2,
        "{s}"
    );
    assert!(s.contains("fit: degree 1"), "{s}");
    assert!(s.contains("chosen min_age = "), "{s}");
    assert!(std::fs::read_to_string(dir.path().join("c.svg"))
        .unwrap()
        .contains("<svg"));
}

#[test]
fn tune_scores_with_weights_expressions_and_commands() {
    let dir = setup();
    let d = dir.path();
    for extra in [
        vec!["--weights", "perf=1,mem=0.1", "--sla", "none"],
        vec![
            "--score-expr",
            "1 - rss_avg / base_rss_avg - 2 * (runtime / base_runtime - 1)",
        ],
        vec![
            "--score-cmd",
            "echo \"1 - $UDAMON_RSS_AVG_BYTES / $UDAMON_BASE_RSS_AVG_BYTES\" | bc -l",
        ],
    ] {
        let mut args = TUNE.to_vec();
        args.extend(["--samples", "3", "--json"]);
        args.extend(extra.iter().copied());
        let out = udamon(d, &args);
        if extra[0] == "--score-cmd" && !out.status.success() && text(&out.stderr).contains("bc") {
            continue; // no bc on this machine
        }
        let v = json(&out);
        assert_eq!(v["samples"].as_array().unwrap().len(), 3, "{extra:?}");
    }
    // the score expression sees the metrics: a memory-only score prefers paging out early
    let mut args = TUNE.to_vec();
    args.extend([
        "--samples",
        "3",
        "--json",
        "--score-expr",
        "1 - rss_avg / base_rss_avg",
    ]);
    let v = json(&udamon(d, &args));
    for s in v["samples"].as_array().unwrap() {
        let m = &s["metrics"];
        let want = 1.0
            - m["rss_avg_bytes"].as_f64().unwrap()
                / v["baseline"]["rss_avg_bytes"].as_f64().unwrap();
        assert!((s["score"].as_f64().unwrap() - want).abs() < 1e-9);
    }
}

#[test]
fn record_replay_and_tune_by_replay() {
    let dir = setup();
    let d = dir.path();
    let out = udamon(d, &["record", "--sim", "w.toml", "-o", "w.udr"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // what-if: predicted vs real for one scheme
    let v = json(&udamon(
        d,
        &[
            "replay",
            "w.udr",
            "--schemes",
            "prcl.txt",
            "--check",
            "--json",
        ],
    ));
    let pred = v["predicted"]["with_schemes"]["rss_avg_bytes"]
        .as_f64()
        .unwrap();
    let real = v["real"]["with_schemes"]["rss_avg_bytes"].as_f64().unwrap();
    let base = v["real"]["without_schemes"]["rss_avg_bytes"]
        .as_f64()
        .unwrap();
    assert!(((pred - real) / base).abs() < 0.10, "{pred} vs {real}");
    assert!(v["replay"]["phases"].as_u64().unwrap() >= 1);
    let out = udamon(d, &["replay", "w.udr", "--schemes", "prcl.txt"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("predicted score"),
        "{}",
        text(&out.stdout)
    );
    // tuning by replay: every step predicted, one confirming run
    let v = json(&udamon(
        d,
        &[
            "tune", "prcl.txt", "--replay", "w.udr", "--range", "0s..8s", "--step", "2s", "--json",
        ],
    ));
    assert_eq!(v["mode"], "replay");
    let values: Vec<f64> = v["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [0.0, 2e6, 4e6, 6e6, 8e6]);
    assert_eq!(v["chosen"]["source"], "replay");
    assert_eq!(v["chosen"]["measured"]["stage"], "confirm");
    assert!(v["confirm_baseline"]["runtime_s"].is_number());
}

#[test]
fn bad_input_exits_2_with_the_fix() {
    let dir = setup();
    let d = dir.path();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--knob", "min_agee"],
            "--knob min_agee: unknown field \"min_agee\"",
        ),
        (
            &["--knob", "2.min_age"],
            "scheme index 2 is past the last scheme",
        ),
        (&["--range", "8s..0s"], "start is above end"),
        (&["--range", "0s..8q"], "unknown unit \"q\""),
        (&["--samples", "0"], "--samples 0: nothing to fit"),
        (
            &["--score-expr", "runtime / rss"],
            "unknown variable \"rss\"",
        ),
        (&["--weights", "perf=1,cpu=1"], "unknown key \"cpu\""),
        (&["--sla", "fast"], "--sla fast: not a percentage"),
        (&["--plot", "c.gif"], "--plot c.gif: unknown image type"),
    ];
    for (extra, want) in cases {
        let mut args = TUNE.to_vec();
        if extra.contains(&"--range") {
            args.truncate(4);
        }
        if !extra.contains(&"--samples") {
            args.extend(["--samples", "2"]);
        }
        args.extend(extra.iter().copied());
        let out = udamon(d, &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    let out = udamon(
        d,
        &["tune", "prcl.txt", "--sim", "w.toml", "--knob", "quota.sz"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "--knob quota.sz has no default range (expected --range, e.g. --range 0..1G)"
        ),
        "{}",
        text(&out.stderr)
    );
    let out = udamon(
        d,
        &[
            "tune", "prcl.txt", "--sim", "w.toml", "--knob", "quota.sz", "--range", "0s..1G",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("bad size \"0s\" for quota.sz"),
        "{}",
        text(&out.stderr)
    );
    let out = udamon(d, &["replay", "nope.udr", "--schemes", "prcl.txt"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cannot read record nope.udr"),
        "{}",
        text(&out.stderr)
    );
}
