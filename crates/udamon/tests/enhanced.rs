//! `--mode enhanced` (docs/enhanced.md) from the command line: the page's
//! commands as written, what the mode finds that the kernel's does not,
//! and its refusals.

use std::path::Path;

mod common;
use common::{json, repo, text, udamon, udamon_within, Bounds, DEFAULT};

/// The first `sh` block of docs/enhanced.md, run in order, as written, in
/// a directory holding `examples/specs` (the live line's `1234` becomes a
/// real process, and its 60 s, 2 s). A live line either runs or exits 3
/// naming what the machine lacks (this host has no live path to our
/// engine; the guest's enhanced-live scenario runs it for real).
#[test]
fn the_pages_commands_run_as_written() {
    let doc = std::fs::read_to_string(repo("docs/enhanced.md")).unwrap();
    let start = doc.find("```sh\n").expect("a sh block") + 6;
    let end = start + doc[start..].find("```").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("examples")).unwrap();
    copy_dir(
        Path::new(&repo("examples/specs")),
        &dir.path().join("examples/specs"),
    );
    let mut target = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let mut ran = 0;
    for line in doc[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        let code = line.split(" #").next().unwrap().trim();
        let words: Vec<String> = code
            .split_whitespace()
            .map(|w| match w {
                "1234" => target.id().to_string(),
                "60s" => "2s".to_string(),
                w => w.to_string(),
            })
            .collect();
        assert_eq!(words[0], "udamon", "{line}");
        let argv: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        // the bench scores every spec under five monitors (minutes in a
        // debug build)
        let bounds = if argv[0] == "bench" {
            Bounds {
                secs: 1500,
                ..DEFAULT
            }
        } else {
            DEFAULT
        };
        let out = udamon_within(dir.path(), &argv, bounds);
        let live = argv.contains(&"--pid");
        let code = out.status.code();
        if live && code == Some(3) {
            assert!(
                !text(&out.stderr).trim().is_empty(),
                "{line}: exit 3 says nothing"
            );
        } else {
            assert_eq!(code, Some(0), "{line}: {}", text(&out.stderr));
        }
        if argv[..2] == ["report", "accuracy"] {
            assert!(
                text(&out.stdout).contains("hot_f1"),
                "{}",
                text(&out.stdout)
            );
        }
        if argv[0] == "bench" {
            let t = text(&out.stdout);
            assert!(
                t.lines().any(|l| l
                    .split_whitespace()
                    .take(2)
                    .eq(["sparse-resident", "enhanced"])),
                "{t}"
            );
        }
        ran += 1;
    }
    let _ = target.kill();
    let _ = target.wait();
    assert_eq!(ran, 6);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// On the spec the mode is for, the enhanced mode finds the hot object
/// (hot_f1 0.976 measured) and the kernel's mode does not (0.000); the
/// record says which mode made it.
#[test]
fn enhanced_finds_what_the_kernel_mode_misses() {
    let dir = tempfile::tempdir().unwrap();
    let spec = repo("examples/specs/sparse-resident.toml");
    let mut f1 = Vec::new();
    for mode in ["kernel", "enhanced"] {
        let rec = format!("{mode}.udr");
        let out = udamon(
            dir.path(),
            &[
                "record", "--sim", &spec, "--mode", mode, "-o", &rec, "--json",
            ],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let summary = json(&out);
        let want = if mode == "kernel" {
            "adaptive"
        } else {
            "enhanced"
        };
        assert_eq!(summary["monitor"], want, "{summary}");
        let out = udamon(dir.path(), &["report", "accuracy", &rec, "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        f1.push(json(&out)["hot_f1"].as_f64().unwrap());
        let out = udamon(dir.path(), &["report", "raw", &rec]);
        let header: serde_json::Value =
            serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
        let saved = header["attrs"]
            .get("mode")
            .and_then(|m| m.as_str())
            .unwrap_or("kernel");
        assert_eq!(saved, mode, "{header}");
    }
    assert!(f1[0] < 0.1, "kernel mode hot_f1 {}", f1[0]);
    assert!(f1[1] > 0.9, "enhanced mode hot_f1 {}", f1[1]);
}

/// What the mode cannot be combined with is refused before anything runs,
/// naming the value and the way out.
#[test]
fn refusals_name_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let spec = repo("examples/specs/demo.toml");
    let me = std::process::id().to_string();
    let cases: [(&[&str], &str); 4] = [
        (
            &["record", "--sim", &spec, "--mode", "fast"],
            "unknown mode 'fast'",
        ),
        (
            &[
                "record",
                "--sim",
                &spec,
                "--mode",
                "enhanced",
                "--fixed-regions",
                "50",
            ],
            "--mode enhanced adapts regions",
        ),
        (
            &[
                "record",
                "--sim",
                &spec,
                "--mode",
                "enhanced",
                "--full-scan",
            ],
            "--full-scan does not",
        ),
        (
            &[
                "record",
                "--pid",
                &me,
                "--ops",
                "kdamond",
                "--mode",
                "enhanced",
                "--duration",
                "1s",
            ],
            "give --ops idle or --ops softdirty",
        ),
    ];
    for (args, want) in cases {
        let out = udamon(dir.path(), args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(want),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
