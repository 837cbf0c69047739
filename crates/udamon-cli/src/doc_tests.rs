//! The documentation and the command line agree:
//!
//! - every `udamon ...` line in a fenced code block of README.md,
//!   ARCHITECTURE.md and docs/*.md is a valid invocation (it parses; nothing
//!   runs, so placeholders such as `1234` or `./my-program` are fine);
//! - every `--flag` named outside code blocks is one of udamon's, unless it
//!   is listed in [`OTHER_TOOLS`]; in a table with a `flag` column the flag
//!   must belong to the subcommand that [`FLAG_TABLES`] names for the table,
//!   and in inline code (`udamon tune --replay`) to the subcommand named;
//! - every argument has a help line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use clap::{CommandFactory, Parser};

use super::Cli;

/// Flags of other tools that the documents name, with whose they are.
const OTHER_TOOLS: &[&str] = &[
    "--release",     // cargo build/run/test
    "--example",     // cargo run
    "--test",        // cargo test
    "--output_type", // damo record
    "--format",      // damo args damon
    "--time_range",  // damo report heatmap
    "--tool",        // valgrind
    "--scenario",    // tests/vm/run
    "--kernel",      // tests/vm/run
    "--debian",      // tests/vm/run
    "--single-boot", // tests/vm/run
];

/// Tables with a `flag` column: (document, section heading) and the
/// subcommand whose flags they list.
const FLAG_TABLES: &[(&str, &str, &[&str])] = &[
    ("docs/reports.md", "heatmap", &["report", "heatmap"]),
    ("docs/reports.md", "wss", &["report", "wss"]),
    ("docs/reports.md", "hot", &["report", "hot"]),
    ("docs/reports.md", "html", &["report", "html"]),
    ("docs/reports.md", "objects", &["report", "objects"]),
    (
        "docs/sim-spec.md",
        "Monitors over the simulator",
        &["record"],
    ),
    ("docs/tuning.md", "What is tuned", &["tune"]),
    ("docs/tuning.md", "Scores", &["tune"]),
];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, ARCHITECTURE.md and every docs/*.md, by path from the
/// repository's root, with their text.
fn documents() -> Vec<(String, String)> {
    let root = repo_root();
    let mut names = vec!["README.md".to_string(), "ARCHITECTURE.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .map(|e| {
            e.expect("read docs/")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|n| {
            let text =
                std::fs::read_to_string(root.join(&n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            (n, text)
        })
        .collect()
}

/// How a line of a document is shown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Prose,
    /// A fenced block of shell commands (` ```sh `, or untagged).
    Shell,
    /// Another fenced block (` ```toml `, ` ```text `, ...).
    Other,
}

/// A document's lines, each with its number (1-based), the block it is in,
/// and the heading of its section.
fn lines(text: &str) -> Vec<(usize, Block, String, &str)> {
    let mut out = Vec::new();
    let (mut block, mut heading) = (Block::Prose, String::new());
    for (i, line) in text.lines().enumerate() {
        if let Some(tag) = line.trim_start().strip_prefix("```") {
            block = match (block, tag.trim()) {
                (Block::Prose, "" | "sh" | "shell" | "bash" | "console") => Block::Shell,
                (Block::Prose, _) => Block::Other,
                _ => Block::Prose,
            };
            continue;
        }
        if block == Block::Prose && line.starts_with('#') {
            heading = line.trim_start_matches('#').trim().to_string();
        }
        out.push((i + 1, block, heading.clone(), line));
    }
    out
}

/// The words of a shell command line, up to its end: a comment, a pipe, a
/// redirection or a command separator. Quotes and backslashes as in sh.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                w.extend(chars.by_ref().take_while(|&c| c != '\''));
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => w.extend(chars.next()),
                        c => w.push(c),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            '#' if word.is_none() => break,
            '|' | ';' | '&' | '>' | '<' => break,
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// Every `udamon` command line in the documents' code blocks: (where, words).
fn documented_invocations() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (name, text) in documents() {
        let mut joined: Option<(usize, String)> = None;
        for (n, block, _, line) in lines(&text) {
            if block != Block::Shell {
                continue;
            }
            let (start, mut cmd) = joined.take().unwrap_or((n, String::new()));
            // A trailing backslash continues the command on the next line.
            if let Some(head) = line.trim_end().strip_suffix('\\') {
                cmd.push_str(head);
                joined = Some((start, cmd));
                continue;
            }
            cmd.push_str(line);
            let cmd = cmd.trim_start();
            let cmd = cmd.strip_prefix("$ ").unwrap_or(cmd);
            if cmd.starts_with("udamon ") {
                out.push((format!("{name}:{start}"), shell_words(cmd)));
            }
        }
    }
    out
}

/// Each subcommand's path (`["report", "heatmap"]`; `[]` for udamon itself)
/// and its long flags (`--help` and `--version` included) with their
/// default values.
type Flags = BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>;

fn long_flags() -> Flags {
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Flags) {
        let longs = cmd
            .get_arguments()
            .filter_map(|a| {
                let defaults = a.get_default_values().iter();
                let defaults = defaults.map(|d| d.to_string_lossy().into_owned());
                Some((format!("--{}", a.get_long()?), defaults.collect()))
            })
            .collect();
        out.insert(path.clone(), longs);
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, out);
        }
    }
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = BTreeMap::new();
    walk(&cmd, Vec::new(), &mut out);
    out
}

/// The `--flags` named in a piece of text, as written (`--sz-thres`).
fn flags_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let mut out = Vec::new();
    for (i, _) in text.match_indices("--") {
        let after = bytes.get(i + 2).copied();
        if (i > 0 && word(bytes[i - 1])) || !after.is_some_and(|b| b.is_ascii_alphabetic()) {
            continue;
        }
        let end = (i + 2..text.len())
            .find(|&j| !word(bytes[j]))
            .unwrap_or(text.len());
        out.push(text[i..end].to_string());
    }
    out
}

/// The cells of a table row, `\|` kept inside a cell.
fn cells(row: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut chars = row.trim().trim_start_matches('|').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push(chars.next().unwrap())
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    if cells.last().is_some_and(|c| c.trim().is_empty()) {
        cells.pop();
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

#[test]
fn shell_words_split_like_sh() {
    assert_eq!(
        shell_words(r#"udamon tune s.txt --score-cmd 'python3 x.py' --x "a \"b\"" # comment"#),
        [
            "udamon",
            "tune",
            "s.txt",
            "--score-cmd",
            "python3 x.py",
            "--x",
            "a \"b\""
        ]
    );
    assert_eq!(
        shell_words("udamon report raw a.udr | jq ."),
        ["udamon", "report", "raw", "a.udr"]
    );
    assert_eq!(shell_words("udamon a#b > out"), ["udamon", "a#b"]);
    assert_eq!(
        flags_in("`--sz-thres SIZE`, --json; a -- b, x--y, --output_type"),
        ["--sz-thres", "--json", "--output_type"]
    );
    assert_eq!(cells(r"| `--x` | a \| b |  |"), ["`--x`", "a | b", ""]);
}

#[test]
fn every_documented_invocation_parses() {
    let invocations = documented_invocations();
    assert!(
        invocations.len() > 30,
        "found only {} invocations",
        invocations.len()
    );
    let mut bad = Vec::new();
    for (at, words) in &invocations {
        if let Err(e) = Cli::try_parse_from(words) {
            use clap::error::ErrorKind::{DisplayHelp, DisplayVersion};
            if !matches!(e.kind(), DisplayHelp | DisplayVersion) {
                let msg = e.to_string();
                let first = msg.lines().next().unwrap_or("");
                bad.push(format!("{at}: `{}`: {first}", words.join(" ")));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "documented invocations that do not parse:\n{}",
        bad.join("\n")
    );
}

/// What is wrong with an inline `udamon SUBCOMMAND ... --flag`: the
/// subcommand must exist and have the flags. Placeholders (`FILE`) end the
/// subcommand's words.
fn inline_problems(span: &str, flags: &Flags) -> impl Iterator<Item = String> {
    let mut bad = Vec::new();
    let mut path: Vec<String> = Vec::new();
    if let Some(rest) = span.strip_prefix("udamon ") {
        let mut words = rest.split_whitespace().peekable();
        while let Some(word) = words.next_if(|w| w.starts_with(|c: char| c.is_ascii_lowercase())) {
            if !flags
                .keys()
                .any(|k| k.len() > path.len() && k.starts_with(&path))
            {
                break; // no subcommands below: an argument
            }
            path.push(word.to_string());
            if !flags.contains_key(&path) {
                bad.push(format!("`{span}` names no udamon subcommand"));
                break;
            }
        }
        if let Some(known) = flags.get(&path) {
            for f in flags_in(span)
                .into_iter()
                .filter(|f| !known.contains_key(f))
            {
                bad.push(format!("{f} is not a flag of `udamon {}`", path.join(" ")));
            }
        }
    }
    bad.into_iter()
}

/// A markdown table being read: the section it is in and its columns.
struct Table {
    heading: String,
    /// The subcommand of a table with a `flag` column.
    path: Option<Vec<String>>,
    flag: Option<usize>,
    option: Option<usize>,
    default: Option<usize>,
}

#[test]
fn every_documented_flag_exists() {
    let flags = long_flags();
    let all: BTreeSet<&String> = flags.values().flat_map(|f| f.keys()).collect();
    let mut bad = Vec::new();
    let mut others_seen = BTreeSet::new();
    let mut tables_seen = BTreeSet::new();
    for (name, text) in documents() {
        let mut table: Option<Table> = None;
        for (n, block, heading, line) in lines(&text) {
            if block != Block::Prose {
                continue;
            }
            for span in line.split('`').skip(1).step_by(2) {
                bad.extend(inline_problems(span, &flags).map(|p| format!("{name}:{n}: {p}")));
            }
            for f in flags_in(line) {
                if OTHER_TOOLS.contains(&f.as_str()) {
                    others_seen.insert(f);
                } else if !all.contains(&f) {
                    bad.push(format!(
                        "{name}:{n}: {f} is not a flag of any udamon subcommand"
                    ));
                }
            }
            if !line.trim_start().starts_with('|') {
                table = None;
                continue;
            }
            let row = cells(line);
            let Some(t) = &table else {
                // The header row.
                let col = |name: &str| row.iter().position(|c| c == name);
                let mapped = FLAG_TABLES
                    .iter()
                    .find(|(d, s, _)| *d == name && *s == heading);
                let path = mapped.map(|(_, _, p)| p.iter().map(|s| s.to_string()).collect());
                match (col("flag"), mapped) {
                    (Some(_), Some((d, s, _))) => {
                        tables_seen.insert((*d, *s));
                    }
                    (Some(_), None) => bad.push(format!(
                        "{name}:{n}: a table of flags under \"{heading}\": add its subcommand to FLAG_TABLES"
                    )),
                    (None, _) => {}
                }
                table = Some(Table {
                    heading: heading.clone(),
                    path,
                    flag: col("flag"),
                    option: col("option"),
                    default: col("default"),
                });
                continue;
            };
            let (Some(path), Some(flag)) = (&t.path, t.flag) else {
                continue;
            };
            if row
                .iter()
                .all(|c| c.chars().all(|c| c == '-' || c == ':' || c == ' '))
            {
                continue; // the delimiter row
            }
            let cmd = path.join(" ");
            let named = flags_in(row.get(flag).map_or("", String::as_str));
            // An option of a library struct maps onto a flag.
            if let (Some(option), true) = (t.option.and_then(|c| row.get(c)), named.is_empty()) {
                bad.push(format!("{name}:{n}: option {option} has no flag"));
            }
            for f in &named {
                match flags[path].get(f) {
                    None => bad.push(format!("{name}:{n}: {f} is not a flag of `udamon {cmd}`")),
                    // A documented plain-number default is the flag's default.
                    Some(defaults) => {
                        let doc = t
                            .default
                            .and_then(|c| row.get(c))
                            .map(|d| d.replace(',', ""));
                        if let Some(doc) = doc.filter(|d| d.parse::<u64>().is_ok()) {
                            if defaults.join(",") != doc {
                                bad.push(format!("{name}:{n}: {f} defaults to {defaults:?} in `udamon {cmd}`, to {doc} under \"{}\"", t.heading));
                            }
                        }
                    }
                }
            }
        }
    }
    for (d, s, _) in FLAG_TABLES {
        if !tables_seen.contains(&(*d, *s)) {
            bad.push(format!(
                "FLAG_TABLES names a table of flags under \"{s}\" in {d}, which has none"
            ));
        }
    }
    for f in OTHER_TOOLS {
        if !others_seen.contains(*f) {
            bad.push(format!(
                "{f} is in OTHER_TOOLS but no document names it any more"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "documented flags udamon lacks:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_argument_has_help() {
    fn walk(cmd: &clap::Command, path: &str, bad: &mut Vec<String>) {
        for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                bad.push(format!("{path} {}", a.get_id()));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), bad);
        }
    }
    let mut cmd = Cli::command();
    cmd.build();
    let mut bad = Vec::new();
    walk(&cmd, "udamon", &mut bad);
    assert!(
        bad.is_empty(),
        "arguments without help:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_map_names_every_document_and_only_files_that_exist() {
    let root = repo_root();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut bad = Vec::new();
    for (name, _) in documents() {
        let file = name.strip_prefix("docs/").unwrap_or(&name);
        if name.starts_with("docs/") && !map.contains(file) {
            bad.push(format!("{name} is not on the map"));
        }
    }
    let path_char = |c: char| c.is_ascii_alphanumeric() || "/.-_".contains(c);
    for word in map.split(|c| !path_char(c)).filter(|w| w.ends_with(".md")) {
        let outside = word.split('/').any(|c| c == "..");
        if outside || !(root.join(word).exists() || root.join("docs").join(word).exists()) {
            bad.push(format!(
                "ARCHITECTURE.md names {word}, which is not in the repository"
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
