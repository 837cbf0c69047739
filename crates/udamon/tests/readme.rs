//! Every command of the README's "Using it" section and its demo, run as
//! written, in order, within the harness's time and memory bounds: a README
//! command that never ends, or grows without bound, fails here.
//!
//! Placeholders are filled in, and said so below: the process id `1234`
//! becomes a real process's, `./my-program args` a short real command,
//! `damon.data` the damo record in `tests/data`, and live runs last 2 s
//! instead of minutes. Live commands either run or exit 3 naming what the
//! machine lacks (this host has no live path; the guest suite runs them for
//! real).

use std::path::Path;
use std::process::Command;

mod common;
use common::{repo, run_bounded, text, udamon_within, Bounds, DEFAULT};

/// The lines of the first `sh` block after `heading`.
fn block_after(doc: &str, heading: &str) -> Vec<String> {
    let at = doc
        .find(heading)
        .unwrap_or_else(|| panic!("README lacks {heading}"));
    let rest = &doc[at..];
    let start = rest.find("```sh\n").expect("a sh block") + 6;
    let end = start + rest[start..].find("```").expect("closed block");
    rest[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// A README line without its comment, split into the udamon arguments and
/// an optional filter it pipes into.
fn parse(line: &str) -> (Vec<String>, Option<String>) {
    let code = line.split(" #").next().unwrap().trim();
    let (cmd, filter) = match code.split_once('|') {
        Some((c, f)) => (c.trim(), Some(f.trim().to_string())),
        None => (code, None),
    };
    let words: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    (words, filter)
}

/// Fills in the placeholders of a live command.
fn fill(words: &[String], pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "1234" => out.push(pid.to_string()),
            "damon.data" => out.push(repo("crates/udamon/tests/data/damo-3.4.3.json")),
            "--duration" if is_live(words) => {
                it.next();
                out.extend(["--duration".to_string(), "2s".to_string()]);
            }
            "--" => {
                out.push("--".into());
                out.extend(["sleep".to_string(), "3".to_string()]);
                break;
            }
            _ => out.push(w.clone()),
        }
    }
    out
}

fn is_live(words: &[String]) -> bool {
    words
        .iter()
        .any(|w| w == "--pid" || w == "--" || w == "--paddr" || w == "--cgroup")
}

#[test]
fn readme_commands_run_as_written() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::os::unix::fs::symlink(repo("examples"), d.join("examples")).unwrap();
    // A process for `--pid 1234`.
    let mut target = Command::new("sleep").arg("600").spawn().unwrap();

    // The demo, as the first block says: `cargo run --release -- demo`.
    let first = block_after(&readme, "# udamon");
    assert!(
        first
            .iter()
            .any(|l| l.starts_with("cargo run --release -- demo")),
        "{first:?}"
    );
    let out = udamon_within(d, &["demo"], DEFAULT);
    assert!(out.status.success(), "demo: {}", text(&out.stderr));
    assert!(d.join("udamon-demo.udr").exists() && d.join("heatmap.png").exists());

    let lines = block_after(&readme, "## Using it");
    let mut ran = 0;
    for line in &lines {
        let (words, filter) = parse(line);
        assert_eq!(words[0], "udamon", "{line}");
        let args = fill(&words[1..], target.id());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        // `udamon bench` measures for a minute or two (longer in a debug
        // build); everything else takes seconds.
        let bounds = if argv == ["bench"] {
            Bounds {
                secs: 1500,
                ..DEFAULT
            }
        } else {
            DEFAULT
        };
        let out = match &filter {
            Some(f) if has(f.split_whitespace().next().unwrap()) => {
                let mut c = Command::new("bash");
                c.arg("-c")
                    .arg(format!(
                        "set -o pipefail; '{}' {} | {f}",
                        env!("CARGO_BIN_EXE_udamon"),
                        args.join(" ")
                    ))
                    .current_dir(d)
                    .env("NO_COLOR", "1");
                run_bounded(c, bounds, line)
            }
            _ => udamon_within(d, &argv, bounds),
        };
        let err = text(&out.stderr);
        if is_live(&words) && out.status.code() == Some(3) {
            // No live path here: the refusal names what is missing.
            assert!(
                err.contains("needs") || err.contains("not set"),
                "{line}: {err}"
            );
        } else {
            assert!(out.status.success(), "{line}: exit {:?}: {err}", out.status);
            assert!(!out.stdout.is_empty(), "{line}: no output");
        }
        if let Some(f) = &filter {
            if f.starts_with("jq") && !has("jq") {
                // Without jq, check what it would have read: JSON lines.
                for l in text(&out.stdout).lines() {
                    serde_json::from_str::<serde_json::Value>(l)
                        .unwrap_or_else(|e| panic!("{line}: {e}: {l}"));
                }
            }
        }
        ran += 1;
    }
    let _ = target.kill();
    let _ = target.wait();
    // The section was found and read whole.
    assert!(
        ran >= 15,
        "only {ran} commands in the README's Using it section"
    );
    for f in ["swap.udr", "swap.png", "tuned.toml", "damo.udr"] {
        assert!(d.join(f).exists(), "{f} was not written");
    }
}

fn has(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| Path::new(&d).join(tool).is_file()))
}

/// The README's service block, as written: `udamon run ... &` starts the
/// service (bounded by the harness), the `curl` and `ctl` lines run against
/// it (once it answers), `kill -HUP %1` reloads it and `kill %1` stops it
/// with exit 0. The complete config shown below the block is checked too.
#[test]
fn readme_service_commands_run_as_written() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::os::unix::fs::symlink(repo("examples"), d.join("examples")).unwrap();
    let lines = block_after(&readme, "## As a service");
    let mut service: Option<std::process::Child> = None;
    let mut seen = Vec::new();
    for line in &lines {
        let code = line.split(" #").next().unwrap().trim();
        let signal = |sig: i32| {
            let pid = service.as_ref().expect("a service started above").id();
            // SAFETY: kill has no memory effects; the child is ours.
            unsafe { libc::kill(pid as i32, sig) };
        };
        match code {
            "kill -HUP %1" => {
                signal(libc::SIGHUP);
                std::thread::sleep(std::time::Duration::from_secs(1));
                let c = service.as_mut().unwrap();
                if c.try_wait().unwrap().is_some() {
                    let out = common::finish(service.take().unwrap(), 10, "udamon run");
                    panic!("{line}: the service ended: {}", text(&out.stderr));
                }
            }
            "kill %1" => {
                signal(libc::SIGTERM);
                let out = common::finish(service.take().unwrap(), 60, "udamon run");
                assert!(out.status.success(), "{line}: {}", text(&out.stderr));
                assert!(
                    text(&out.stderr).contains("msg=stopped"),
                    "{}",
                    text(&out.stderr)
                );
            }
            c if c.starts_with("udamon run ") && c.ends_with('&') => {
                let args: Vec<&str> = c[7..c.len() - 1].split_whitespace().collect();
                service = Some(common::spawn(d, &args, DEFAULT));
            }
            c if c.starts_with("udamon ") || c.starts_with("curl ") => {
                // Once the service answers (it starts in well under a second).
                let started = std::time::Instant::now();
                let out = loop {
                    let mut cmd = Command::new("bash");
                    let c = c.replacen(
                        "udamon ",
                        &format!("'{}' ", env!("CARGO_BIN_EXE_udamon")),
                        1,
                    );
                    cmd.arg("-c")
                        .arg(format!("set -o pipefail; {c}"))
                        .current_dir(d);
                    let out = run_bounded(cmd, DEFAULT, line);
                    if out.status.success()
                        || service.is_none()
                        || started.elapsed() > std::time::Duration::from_secs(30)
                    {
                        break out;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(300));
                };
                if c.starts_with("curl ") && !has("curl") {
                    eprintln!("curl is not installed: {line} not run");
                    continue;
                }
                assert!(out.status.success(), "{line}: {}", text(&out.stderr));
                assert!(!out.stdout.is_empty(), "{line}: no output");
            }
            _ => panic!("the README's service block has a line this test cannot run: {line}"),
        }
        seen.push(code.to_string());
    }
    assert!(service.is_none(), "the block leaves the service running");
    assert!(seen.len() >= 6, "{seen:?}");
    // The complete config: valid (only this machine's paths may be
    // missing), and the one packaging/ ships.
    let at = readme.find("A complete config for a machine").unwrap();
    let rest = &readme[at..];
    let start = rest.find("```toml\n").unwrap() + 8;
    let toml = &rest[start..start + rest[start..].find("```").unwrap()];
    let cfg = d.join("udamon.toml");
    std::fs::write(&cfg, toml).unwrap();
    let out = udamon_within(d, &["run", "--check", cfg.to_str().unwrap()], DEFAULT);
    let o = text(&out.stdout);
    assert!(
        o.contains("job redis-reclaim: comm redis-server"),
        "{o}{}",
        text(&out.stderr)
    );
    assert!(o.contains("job batch-thp"), "{o}");
    let strip = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| l.split(" #").next().unwrap().trim().to_string())
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect()
    };
    let shipped = std::fs::read_to_string(repo("packaging/udamon.toml")).unwrap();
    assert_eq!(
        strip(toml),
        strip(&shipped),
        "README's config and packaging/udamon.toml differ"
    );
}
