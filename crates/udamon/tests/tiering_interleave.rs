//! docs/tiering.md, "Interleaving by bandwidth": the section's `udamon`
//! commands run as written, in order, in a directory holding
//! `examples/specs`; the schemes they write are read back, and the
//! runtimes `udamon apply` prints are the ones the section quotes.

mod common;
use common::{repo, text, udamon};

/// The lines of the section's `sh` blocks.
fn section_commands(doc: &str) -> (String, Vec<String>) {
    let at = doc
        .find("\n## Interleaving by bandwidth\n")
        .expect("docs/tiering.md has the section");
    let rest = &doc[at + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    let section = &rest[..end];
    let mut lines = Vec::new();
    let mut in_sh = false;
    for l in section.lines() {
        match l.trim() {
            "```sh" => in_sh = true,
            "```" if in_sh => in_sh = false,
            l if in_sh && !l.is_empty() => lines.push(l.to_string()),
            _ => {}
        }
    }
    (section.to_string(), lines)
}

#[test]
fn the_interleaving_sections_commands_run_as_written() {
    let doc = std::fs::read_to_string(repo("docs/tiering.md")).unwrap();
    let (section, lines) = section_commands(&doc);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::os::unix::fs::symlink(repo("examples"), d.join("examples")).unwrap();
    let mut applied = 0;
    for line in &lines {
        let code = line.split(" #").next().unwrap().trim();
        let words: Vec<&str> = code.split_whitespace().collect();
        if words[0] == "cargo" {
            // The comparison in one run: udamon-session's test, which
            // `cargo test` runs.
            assert_eq!(words[..3], ["cargo", "test", "-p"], "{line}");
            continue;
        }
        assert_eq!(words[0], "udamon", "{line}");
        let out = udamon(d, &words[1..]);
        let (o, e) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{line}: {e}");
        match words[1] {
            "topology" => {
                let file = words[words
                    .iter()
                    .position(|w| *w == "--tiering-schemes")
                    .unwrap()
                    + 1];
                let check = udamon(d, &["schemes", "check", file]);
                let c = text(&check.stdout);
                assert!(check.status.success(), "{}", text(&check.stderr));
                assert!(c.contains("migrate_cold"), "{c}");
                if words.contains(&"--interleave") {
                    assert!(
                        c.contains("dests = [{ node = 0, weight = 3 }, { node = 1, weight = 1 }]"),
                        "{c}"
                    );
                } else {
                    assert!(!c.contains("dests") && c.contains("target_nid = 0"), "{c}");
                }
            }
            "apply" => {
                // `runtime  WITHOUT  WITH  CHANGE`, as the section quotes it.
                let row = o
                    .lines()
                    .find(|l| l.starts_with("runtime"))
                    .unwrap_or_else(|| panic!("{line}: no runtime in\n{o}"));
                let f: Vec<&str> = row.split_whitespace().collect();
                let spec = words[words.iter().position(|w| *w == "--sim").unwrap() + 1];
                let spec = spec
                    .trim_start_matches("examples/specs/")
                    .trim_end_matches(".toml");
                let quoted = section.lines().any(|l| {
                    let q: Vec<&str> = l.split_whitespace().collect();
                    q.len() == 4 && q[0] == spec && q[1] == words[2] && q[2..] == f[1..3]
                });
                assert!(quoted, "{line}: the section does not quote {row:?}");
                applied += 1;
            }
            other => panic!("{line}: unexpected command {other}"),
        }
    }
    assert_eq!(applied, 4, "{lines:?}");
}
