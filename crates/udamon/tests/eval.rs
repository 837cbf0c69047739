//! `udamon eval` from the command line: docs/evaluation.md's quick start
//! as written, resuming after an interruption, the THP switch (on a fake
//! /sys), and what it says about bad suites and failing runs. Real commands
//! run here under `orig` (and `thp` on the fake /sys) only: this machine
//! has no live monitoring path and its THP setting is not ours.

use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::{repo, spawn, text, udamon, DEFAULT};

fn results(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The lines of the first `sh` block after `heading` in docs/evaluation.md.
fn doc_block(heading: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(repo("docs/evaluation.md")).unwrap();
    let at = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/evaluation.md lacks {heading}"));
    let rest = &doc[at..];
    let start = rest.find("```sh\n").expect("a sh block") + 6;
    let end = start + rest[start..].find("```").expect("closed block");
    rest[start..end]
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn docs_quick_start_runs_as_written() {
    let d = tempfile::tempdir().unwrap();
    let lines = doc_block("## Quick start");
    assert!(!lines.is_empty());
    let mut last = None;
    for line in &lines {
        let words: Vec<String> = line
            .split_whitespace()
            .map(|w| {
                if w.starts_with("examples/") {
                    repo(w)
                } else {
                    w.to_string()
                }
            })
            .collect();
        assert_eq!(words[0], "udamon", "{line}");
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        let out = udamon(d.path(), &args);
        assert!(out.status.success(), "{line}: {}", text(&out.stderr));
        last = Some(out);
    }
    let dir = d.path().join("eval-out");
    let rs = results(&dir);
    // Two workloads x four configurations x two repeats, each saved once.
    assert_eq!(rs.len(), 16, "{rs:?}");
    for f in ["results.tsv", "perf.svg", "rss.svg", "suite.toml"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    for r in &rs {
        let (w, c, st) = (
            &r["workload"],
            r["config"].as_str().unwrap(),
            r["status"].as_str().unwrap(),
        );
        if w == "demo" || c == "orig" {
            assert_eq!(st, "ok", "{r}");
            assert!(r["runtime_s"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["rss_avg_kb"].as_f64().unwrap() > 0.0, "{r}");
        } else {
            // No live path on this machine: said so, not counted as a failure.
            assert_eq!(st, "skipped", "{r}");
            assert!(
                r["reason"]
                    .as_str()
                    .unwrap()
                    .contains("cannot run the monitor"),
                "{r}"
            );
        }
    }
    // The last command printed the summary as JSON: prcl pages out the
    // demo's idle objects (the simulator's machine measures it).
    let j: serde_json::Value = serde_json::from_slice(&last.unwrap().stdout).unwrap();
    let demo = &j["workloads"][0];
    assert_eq!(demo["workload"], "demo");
    let prcl = demo["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["config"] == "prcl")
        .unwrap();
    assert!(
        prcl["overhead_pct"]["rss.avg"].as_f64().unwrap() < -50.0,
        "{prcl}"
    );
    let tsv = std::fs::read_to_string(dir.join("results.tsv")).unwrap();
    assert!(
        tsv.contains("workload\torig\trec (overhead%)\tethp (overhead%)\tprcl (overhead%)"),
        "{tsv}"
    );
    assert!(std::fs::read_to_string(dir.join("rss.svg"))
        .unwrap()
        .contains("<svg"));
}

fn suite(dir: &Path, body: &str) -> String {
    let p = dir.join("suite.in.toml");
    std::fs::write(&p, body).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn an_interrupted_evaluation_resumes_where_it_stopped() {
    let d = tempfile::tempdir().unwrap();
    let s = suite(
        d.path(),
        "repeats = 4\nconfigs = [\"orig\"]\n[[workload]]\nname = \"nap\"\nrun = \"sleep 1; echo done\"\n",
    );
    let out = d.path().join("out");
    let child = spawn(
        d.path(),
        &["eval", &s, "-o", out.to_str().unwrap()],
        DEFAULT,
    );
    let t = Instant::now();
    while results(&out).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no run saved within a minute"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = common::finish(child, 60, "udamon eval");
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("Run the same command again to resume"),
        "{}",
        text(&o.stderr)
    );
    let saved = results(&out).len();
    assert!((1..4).contains(&saved), "{saved} saved");
    let o = udamon(d.path(), &["eval", &s, "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rs = results(&out);
    let mut reps: Vec<u64> = rs.iter().map(|r| r["repeat"].as_u64().unwrap()).collect();
    reps.sort();
    assert_eq!(reps, vec![0, 1, 2, 3], "every repeat once: {rs:?}");
    assert!(
        text(&o.stderr).contains(&format!("[1/{}", 4 - saved)),
        "{}",
        text(&o.stderr)
    );
    assert!(
        text(&o.stdout).contains("4 of 4 runs done"),
        "{}",
        text(&o.stdout)
    );
    // A changed suite does not mix with these results.
    std::fs::write(
        &s,
        std::fs::read_to_string(&s)
            .unwrap()
            .replace("repeats = 4", "repeats = 5"),
    )
    .unwrap();
    let o = udamon(d.path(), &["eval", &s, "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("another suite"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn the_thp_configuration_sets_always_for_the_run_and_restores_the_setting() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let thp = root.join("sys/kernel/mm/transparent_hugepage/enabled");
    std::fs::create_dir_all(thp.parent().unwrap()).unwrap();
    std::fs::write(&thp, "madvise").unwrap();
    let s = suite(
        d.path(),
        &format!(
            "repeats = 1\nthp = \"never\"\nconfigs = [\"orig\", \"thp\"]\n[[workload]]\nname = \"w\"\nrun = \"cat {}\"\n",
            thp.display()
        ),
    );
    let out = d.path().join("out");
    let o = udamon(
        d.path(),
        &[
            "eval",
            &s,
            "-o",
            out.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rs = results(&out);
    let by = |c: &str| rs.iter().find(|r| r["config"] == c).unwrap().clone();
    assert_eq!(by("thp")["thp"], "always");
    assert_eq!(by("orig")["thp"], "never");
    assert_eq!(
        std::fs::read_to_string(out.join("runs/w.thp.0.out"))
            .unwrap()
            .trim(),
        "always"
    );
    assert_eq!(
        std::fs::read_to_string(&thp).unwrap(),
        "madvise",
        "restored"
    );
}

#[test]
fn failing_runs_are_saved_with_the_reason_and_teardown_always_runs() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("torn-down");
    let s = suite(
        d.path(),
        &format!(
            r#"repeats = 1
configs = ["orig"]
[[workload]]
name = "slow"
run = "sleep 30"
timeout = "1s"
teardown = "echo x >> {m}"
[[workload]]
name = "broken-setup"
setup = "echo oops >&2; exit 4"
run = "true"
teardown = "echo x >> {m}"
[[workload]]
name = "exits-1"
run = "echo bad thing >&2; exit 1"
[[workload]]
name = "ok"
run = "echo 42.5 ops"
metric = {{ regex = '([0-9.]+) ops', name = "ops" }}
"#,
            m = marker.display()
        ),
    );
    let out = d.path().join("out");
    let t = Instant::now();
    let o = udamon(
        d.path(),
        &["eval", &s, "-o", out.to_str().unwrap(), "--json"],
    );
    // Three workloads measured nothing: exit 1, each named with its reason.
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("every run of some workloads failed: slow (")
            && err.contains(", broken-setup (setup exited 4: oops")
            && err.contains(", exits-1 (the run exited 1: bad thing"),
        "{err}"
    );
    assert!(!err.contains("ok ("), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(25),
        "the timeout did not end the slow run"
    );
    let rs = results(&out);
    let reason = |w: &str| {
        rs.iter().find(|r| r["workload"] == w).unwrap()["reason"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(
        reason("slow").contains("did not end within its timeout (1 s)"),
        "{}",
        reason("slow")
    );
    assert!(
        reason("broken-setup").contains("setup exited 4: oops"),
        "{}",
        reason("broken-setup")
    );
    assert!(
        reason("exits-1").contains("the run exited 1: bad thing"),
        "{}",
        reason("exits-1")
    );
    assert_eq!(
        rs.iter().find(|r| r["workload"] == "ok").unwrap()["metric"],
        42.5
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap().lines().count(), 2);
    // --retry-failed runs the three failures again, and only them.
    let o = udamon(
        d.path(),
        &[
            "eval",
            &s,
            "-o",
            out.to_str().unwrap(),
            "--retry-failed",
            "--workload",
            "exits-1",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(results(&out).len(), 5);
}

#[test]
fn bad_input_names_the_value_and_the_fix() {
    let d = tempfile::tempdir().unwrap();
    let s = suite(
        d.path(),
        "configs = [\"orig\"]\n[[workload]]\nname = \"w\"\nrun = \"true\"\n",
    );
    let foreign = d.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    for (args, want) in [
        (
            vec!["eval", s.as_str(), "--config", "rec"],
            "--config rec: the suite has no such configuration (it has orig)",
        ),
        (
            vec!["eval", s.as_str(), "--workload", "x"],
            "--workload x: the suite has no such workload (it has w)",
        ),
        (
            vec!["eval", s.as_str(), "-o", foreign.to_str().unwrap()],
            "holds no udamon eval results",
        ),
        (
            vec!["eval", s.as_str(), "--repeats", "0"],
            "--repeats 0: give 1 to 1000",
        ),
        (vec!["eval", "missing.toml"], "missing.toml"),
        (
            vec!["eval", s.as_str(), "-o", "nothing-here", "--report"],
            "no saved results",
        ),
    ] {
        let o = udamon(d.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(want),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    assert_eq!(
        std::fs::read_to_string(foreign.join("notes.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn a_tuned_configuration_tunes_once_per_workload_and_every_repeat_uses_it() {
    let d = tempfile::tempdir().unwrap();
    let s = suite(
        d.path(),
        &format!(
            "repeats = 2\nconfigs = [\"orig\", \"tuned-prcl\"]\n[tune]\nrange = \"0s..20s\"\nsamples = 6\nbaseline_runs = 2\n[[workload]]\nname = \"m\"\nsim = \"{}\"\nduration = \"30s\"\n",
            repo("examples/specs/machine.toml")
        ),
    );
    let out = d.path().join("out");
    let o = udamon(d.path(), &["eval", &s, "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    // Two runs without schemes, six samples, the confirming run.
    assert!(
        err.contains("tuning tuned-prcl for m: run 9 of 9 done"),
        "{err}"
    );
    let rs = results(&out);
    let tuned: Vec<&serde_json::Value> =
        rs.iter().filter(|r| r["config"] == "tuned-prcl").collect();
    assert_eq!(tuned.len(), 2, "{rs:?}");
    for r in &tuned {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["tuning_runs"], 9, "{r}");
        assert_eq!(r["tuning_sla_met"], true, "{r}");
        assert_eq!(r["tuned"], tuned[0]["tuned"], "one tuning for every repeat");
    }
    // The tuning is saved: its runs, the tuner's account, the schemes.
    let t: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("tuned/m.tuned-prcl.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(t["run_results"].as_array().unwrap().len(), 9);
    assert_eq!(t["run_results"][1]["config"], "tuned-prcl.tuning2");
    assert_eq!(
        t["run_results"][0]["rss_avg_kb"], t["run_results"][1]["rss_avg_kb"],
        "the baseline runs of a simulated workload share their seed"
    );
    assert_eq!(t["run_results"][0]["config"], "tuned-prcl.tuning1");
    let v = t["value"].as_f64().unwrap();
    assert!((0.0..=20e6).contains(&v), "{t}");
    assert_eq!(
        tuned[0]["tuned"],
        format!("min_age = {}", t["display"].as_str().unwrap())
    );
    assert_eq!(t["tune"]["chosen"]["value"], t["value"]);
    let schemes = std::fs::read_to_string(t["schemes_file"].as_str().unwrap()).unwrap();
    assert!(schemes.contains("pageout"), "{schemes}");
    // The tuned scheme did what prcl does on this workload: less memory.
    let o = udamon(
        d.path(),
        &[
            "eval",
            &s,
            "-o",
            out.to_str().unwrap(),
            "--report",
            "--json",
        ],
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &j["workloads"][0]["configs"][1];
    assert_eq!(c["config"], "tuned-prcl");
    assert_eq!(c["tuned"], tuned[0]["tuned"]);
    assert!(
        c["overhead_pct"]["rss.avg"].as_f64().unwrap() < -10.0,
        "{c}"
    );
    // A third repeat reuses the saved tuning.
    let o = udamon(
        d.path(),
        &["eval", &s, "-o", out.to_str().unwrap(), "--repeats", "3"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        !text(&o.stderr).contains("tuning tuned-prcl"),
        "{}",
        text(&o.stderr)
    );
    let rs = results(&out);
    let third = rs
        .iter()
        .find(|r| r["config"] == "tuned-prcl" && r["repeat"] == 2)
        .expect("repeat 3 ran");
    assert_eq!(third["tuned"], tuned[0]["tuned"]);
    assert!(
        text(&o.stdout).contains(&format!(
            "tuned-prcl: tuned {}",
            tuned[0]["tuned"].as_str().unwrap()
        )),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn a_tuned_configuration_on_a_machine_without_a_live_path_is_skipped_once() {
    let d = tempfile::tempdir().unwrap();
    // Long enough for a once-a-second RSS sample: the tuner needs one.
    let s = suite(
        d.path(),
        "repeats = 2\nconfigs = [\"tuned-prcl\"]\n[[workload]]\nname = \"nap\"\nrun = \"sleep 1.5\"\n",
    );
    let out = d.path().join("out");
    let o = udamon(d.path(), &["eval", &s, "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rs = results(&out);
    assert_eq!(rs.len(), 2, "{rs:?}");
    for r in &rs {
        assert_eq!(r["status"], "skipped", "{r}");
        assert!(
            r["reason"]
                .as_str()
                .unwrap()
                .contains("cannot run the monitor"),
            "{r}"
        );
    }
    // The scheme-less run and the first candidate ran; the second repeat
    // did not tune again, and nothing was saved as tuned.
    let mut runs: Vec<String> = std::fs::read_dir(out.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".out") && !n.contains("monitor"))
        .collect();
    runs.sort();
    assert_eq!(
        runs,
        vec![
            "nap.tuned-prcl.tuning1.0.out",
            "nap.tuned-prcl.tuning2.0.out"
        ]
    );
    assert!(!out.join("tuned/nap.tuned-prcl.json").exists());
}

#[test]
fn docs_suite_file_example_parses_as_written() {
    let doc = std::fs::read_to_string(repo("docs/evaluation.md")).unwrap();
    let at = doc.find("## The suite file").unwrap();
    let rest = &doc[at..];
    let start = rest.find("```toml\n").unwrap() + 8;
    let end = start + rest[start..].find("```").unwrap();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("suite");
    std::fs::create_dir_all(dir.join("schemes")).unwrap();
    std::fs::create_dir_all(d.path().join("specs")).unwrap();
    std::fs::copy(
        repo("examples/schemes/prcl.txt"),
        dir.join("schemes/prcl-30s.txt"),
    )
    .unwrap();
    std::fs::copy(
        repo("examples/specs/demo.toml"),
        d.path().join("specs/demo.toml"),
    )
    .unwrap();
    let s = dir.join("suite.toml");
    std::fs::write(&s, &rest[start..end]).unwrap();
    // --report reads the suite, then finds nothing to report: the suite parsed.
    let o = udamon(
        d.path(),
        &["eval", s.to_str().unwrap(), "-o", "none", "--report"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("no saved results"),
        "{}",
        text(&o.stderr)
    );
}

/// The measured tables in docs/evaluation/ stay readable: every results
/// directory there reports with this udamon, and every run of its
/// results.jsonl is counted.
#[test]
fn the_docs_measured_results_still_report() {
    let root = repo("docs/evaluation");
    let mut seen = 0;
    for e in std::fs::read_dir(&root).unwrap() {
        let src = e.unwrap().path();
        if !src.join("results.jsonl").exists() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        for f in ["suite.toml", "results.jsonl"] {
            std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
        }
        // a run saved again (a repeat redone in a later boot) counts once
        let lines = results(dir.path())
            .iter()
            .map(|r| {
                (
                    r["workload"].to_string(),
                    r["config"].to_string(),
                    r["repeat"].to_string(),
                )
            })
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let d = dir.path().to_str().unwrap();
        let suite = format!("{d}/suite.toml");
        let out = udamon(dir.path(), &["eval", &suite, "-o", d, "--report", "--json"]);
        assert!(
            out.status.success(),
            "{}: {}",
            src.display(),
            text(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let runs: u64 = v["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|w| w["configs"].as_array().unwrap())
            .map(|c| {
                c["ok"].as_u64().unwrap()
                    + c["failed"].as_u64().unwrap()
                    + c["skipped"].as_u64().unwrap()
            })
            .sum();
        assert_eq!(
            runs as usize,
            lines,
            "{}: every saved run counted",
            src.display()
        );
        seen += 1;
    }
    assert!(
        seen >= 3,
        "docs/evaluation holds {seen} results directories"
    );
}
