//! `udamon report html`: the page of a record of the demo workload (with
//! and without schemes) is written, needs no network, and works in a real
//! browser: `tests/browser/check_html.py` drives Debian's chromium,
//! headless, through selenium, with the python that `UDAMON_BROWSER_PYTHON`
//! names (the virtualenv `tests/browser-venv` makes). Without it the
//! browser part says so and is skipped, except under
//! `UDAMON_REQUIRE_BROWSER=1`, which CI sets.
//!
//! `UDAMON_HTML_SCREENSHOT_DIR=DIR` copies the screenshot of the demo's
//! page to `DIR/html-report.png` (docs/html-report.png is one).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{ok, repo, run_bounded, text, udamon, Bounds};

/// Nothing on the page is fetched when it is viewed: no attribute or style
/// names a network address, and no address appears at all.
fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for key in ["src=", "href=", "url(", "@import", "action="] {
        for (at, _) in lower.match_indices(key) {
            let value = lower[at + key.len()..].trim_start_matches(['"', '\'', ' ']);
            assert!(
                !(value.starts_with("http:")
                    || value.starts_with("https:")
                    || value.starts_with("//")),
                "the page fetches something: {}",
                &html[at..(at + 80).min(html.len())]
            );
        }
    }
    assert!(
        !lower.contains("http://") && !lower.contains("https://"),
        "the page names a network address"
    );
}

/// The browser test's python, or None (said so) when it is not set up.
fn browser_python() -> Option<PathBuf> {
    let py = std::env::var_os("UDAMON_BROWSER_PYTHON").map(PathBuf::from);
    if py.is_none() {
        assert!(
            std::env::var("UDAMON_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "UDAMON_BROWSER_PYTHON is not set (run tests/browser-venv; install chromium and \
             chromium-driver)"
        );
        eprintln!(
            "UDAMON_BROWSER_PYTHON is not set: the page is not checked in a browser \
             (tests/browser-venv makes the python; chromium and chromium-driver are Debian's)"
        );
    }
    py
}

/// Runs check_html.py on `page`, saving a screenshot at `shot`.
fn check_in_browser(py: &Path, page: &Path, shot: &Path) {
    let mut c = Command::new(py);
    c.arg(repo("tests/browser/check_html.py"))
        .arg(page)
        .arg(shot);
    // Chromium reserves far more address space than it uses, so no
    // address-space limit; the time bound stays.
    let bounds = Bounds {
        secs: 240,
        mem_bytes: u64::MAX,
    };
    let out = run_bounded(c, bounds, "check_html.py");
    assert!(
        out.status.success(),
        "check_html.py {}: {}{}",
        page.display(),
        text(&out.stdout),
        text(&out.stderr)
    );
    eprint!("{}", text(&out.stdout));
    assert!(shot.is_file(), "no screenshot at {}", shot.display());
}

#[test]
fn html_report_of_the_demo_workload() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = repo("examples/specs/demo.toml");
    ok(d, &["record", "--sim", &spec, "-o", "demo.udr"]);

    let said = ok(d, &["report", "html", "demo.udr", "-o", "demo.html"]);
    assert!(said.starts_with("wrote demo.html ("), "{said}");
    let html = std::fs::read_to_string(d.join("demo.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    for part in [
        "<canvas id=\"heatmap\"",
        "<canvas id=\"wss\"",
        "<table id=\"hot\"",
        "<script id=\"udamon-data\" type=\"application/json\">",
        "eight-objects (adaptive, simulated)",
    ] {
        assert!(html.contains(part), "the page lacks {part}");
    }
    assert!(
        !html.contains("schemes-section"),
        "a record without schemes"
    );
    assert_self_contained(&html);
    let size = html.len();
    assert!((100_000..4_000_000).contains(&size), "{size} bytes");

    // --json: one line.
    let out = ok(
        d,
        &["report", "html", "demo.udr", "-o", "demo.html", "--json"],
    );
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["output"], "demo.html");
    assert_eq!(v["snapshots"], 400);
    assert_eq!(
        (v["time_bins"].as_u64(), v["addr_bins"].as_u64()),
        (Some(400), Some(600))
    );
    assert_eq!(
        v["html_bytes"].as_u64(),
        Some(std::fs::metadata(d.join("demo.html")).unwrap().len())
    );
    assert!(
        d.join("demo.html.old").is_file(),
        "the previous page is kept"
    );

    // A part: about a quarter of the snapshots, one column each.
    let out = ok(
        d,
        &[
            "report",
            "html",
            "demo.udr",
            "-o",
            "part.html",
            "--json",
            "--time-range",
            "10s-20s",
            "--address-range",
            "0x10000000-0x30000000",
            "--title",
            "a <part>",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let n = v["snapshots"].as_u64().unwrap();
    assert!((100..=102).contains(&n), "{n}");
    assert_eq!(v["time_bins"].as_u64(), Some(n));
    let part = std::fs::read_to_string(d.join("part.html")).unwrap();
    assert!(part.contains("<h1>a &lt;part&gt;</h1>"));

    // Bad input: the value and the way out, exit 2.
    for (args, says) in [
        (&["-o", "demo.png"][..], "must end in .html"),
        (&["-o", "x.html", "--time-range", "50s-60s"], "no snapshots"),
        (&["-o", "x.html", "--target", "3"], "--target 3"),
        (&["-o", "x.html", "--time-range", "20s-10s"], "not below"),
    ] {
        let mut all = vec!["report", "html", "demo.udr"];
        all.extend_from_slice(args);
        let out = udamon(d, &all);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(!d.join("x.html").exists());

    // With schemes: their statistics over time.
    ok(
        d,
        &[
            "apply",
            &repo("examples/schemes/prcl.txt"),
            "--sim",
            &spec,
            "--duration",
            "15s",
            "-o",
            "schemes.udr",
        ],
    );
    ok(d, &["report", "html", "schemes.udr", "-o", "schemes.html"]);
    let schemes = std::fs::read_to_string(d.join("schemes.html")).unwrap();
    assert!(schemes.contains("schemes-section") && schemes.contains("scheme-applied"));
    assert_self_contained(&schemes);

    let Some(py) = browser_python() else { return };
    let shot = d.join("html-report.png");
    check_in_browser(&py, &d.join("demo.html"), &shot);
    check_in_browser(&py, &d.join("schemes.html"), &d.join("schemes.png"));
    if let Some(to) = std::env::var_os("UDAMON_HTML_SCREENSHOT_DIR") {
        std::fs::copy(&shot, Path::new(&to).join("html-report.png")).unwrap();
    }
}
