//! The crate stack stays a stack (ARCHITECTURE.md): each crate depends only
//! on the crates listed for it below, read from the Cargo manifests, so an
//! upward or sideways edge fails here rather than slipping in; and no two
//! files of a library crate import each other, directly or in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The udamon crates each crate may depend on ([dependencies] only; tests
/// may use more). Lower layers first.
const ALLOWED: &[(&str, &[&str])] = &[
    ("udamon-core", &[]),
    ("udamon-record", &["udamon-core"]),
    ("udamon-sim", &["udamon-core"]),
    ("udamon-scheme-file", &["udamon-core"]),
    ("udamon-kdamon", &["udamon-core"]),
    ("udamon-proc", &["udamon-core"]),
    ("udamon-report", &["udamon-core", "udamon-record"]),
    ("udamon-elf", &[]),
    ("udamon-preload", &[]),
    (
        "udamon-objects",
        &[
            "udamon-core",
            "udamon-record",
            "udamon-report",
            "udamon-elf",
            "udamon-preload",
        ],
    ),
    (
        "udamon-damo",
        &["udamon-core", "udamon-record", "udamon-kdamon"],
    ),
    (
        "udamon-session",
        &[
            "udamon-core",
            "udamon-sim",
            "udamon-record",
            "udamon-scheme-file",
            "udamon-kdamon",
            "udamon-proc",
            "udamon-elf",
            "udamon-preload",
        ],
    ),
    (
        "udamon-tune",
        &[
            "udamon-core",
            "udamon-sim",
            "udamon-record",
            "udamon-scheme-file",
            "udamon-session",
        ],
    ),
    (
        "udamon-eval",
        &[
            "udamon-core",
            "udamon-sim",
            "udamon-proc",
            "udamon-scheme-file",
            "udamon-tune",
            "udamon-session",
        ],
    ),
    (
        "udamon-service",
        &[
            "udamon-core",
            "udamon-sim",
            "udamon-record",
            "udamon-scheme-file",
            "udamon-session",
            "udamon-kdamon",
            "udamon-proc",
        ],
    ),
    (
        "udamon-bench",
        &[
            "udamon-core",
            "udamon-sim",
            "udamon-report",
            "udamon-scheme-file",
            "udamon-proc",
            "udamon-tune",
            "udamon-session",
            "udamon-service",
            "udamon-preload",
        ],
    ),
    (
        "udamon-cli",
        &[
            "udamon-core",
            "udamon-report",
            "udamon-objects",
            "udamon-preload",
            "udamon-session",
            "udamon-tune",
            "udamon-service",
        ],
    ),
    (
        "udamon",
        &[
            "udamon-core",
            "udamon-sim",
            "udamon-record",
            "udamon-report",
            "udamon-objects",
            "udamon-elf",
            "udamon-preload",
            "udamon-scheme-file",
            "udamon-tune",
            "udamon-kdamon",
            "udamon-proc",
            "udamon-session",
            "udamon-service",
            "udamon-damo",
            "udamon-eval",
            "udamon-bench",
            "udamon-cli",
        ],
    ),
];

/// Circles of files that are still there: a circle listed here that is
/// gone fails too, so the list only shrinks (it is empty: none is left).
const KNOWN_CIRCLES: &[(&str, &[&str])] = &[];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The udamon crates in `[dependencies]` of a manifest.
fn dependencies(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_deps = t == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some(name) = t.split(['=', '.', ' ']).next() {
                if name.starts_with("udamon") {
                    out.insert(name.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn every_crate_depends_only_on_the_crates_below_it_that_it_may() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(c, d)| (*c, d.iter().copied().collect()))
        .collect();
    let mut seen = BTreeSet::new();
    for e in std::fs::read_dir(crates_dir()).unwrap().flatten() {
        let manifest = e.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let name = e.file_name().to_string_lossy().to_string();
        seen.insert(name.clone());
        let Some(ok) = allowed.get(name.as_str()) else {
            panic!("crate {name} is not in this test's table: say what it may depend on");
        };
        for d in dependencies(&text) {
            assert!(
                ok.contains(d.as_str()),
                "{name} depends on {d}, which the layering does not allow (ARCHITECTURE.md): \
                 move the shared piece down instead"
            );
        }
    }
    for (c, _) in ALLOWED {
        assert!(seen.contains(*c), "{c} is in the table but not in crates/");
    }
    // The table itself is a stack: nothing depends on a crate listed after it.
    let order: Vec<&str> = ALLOWED.iter().map(|(c, _)| *c).collect();
    for (i, (c, deps)) in ALLOWED.iter().enumerate() {
        for d in *deps {
            let j = order.iter().position(|x| x == d).unwrap();
            assert!(j < i, "{c} may depend on {d}, listed after it");
        }
    }
}

/// The modules of a crate's `src/` and the modules each one names through
/// `crate::` or `super::` paths, outside its tests.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = BTreeMap::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).unwrap().with_extension("");
                let m = rel.to_string_lossy().replace("/mod", "").replace('/', "::");
                let text = std::fs::read_to_string(&p).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
                let code: String = code
                    .lines()
                    .map(|l| l.split("//").next().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("\n");
                files.insert(m, code);
            }
        }
    }
    let mods: BTreeSet<String> = files
        .keys()
        .filter(|m| *m != "lib" && *m != "main")
        .cloned()
        .collect();
    let mut graph = BTreeMap::new();
    for m in &mods {
        let code = &files[m];
        let parent = m.rsplit_once("::").map_or("", |(p, _)| p);
        let mut out = BTreeSet::new();
        for (prefix, base) in [("crate::", ""), ("super::", parent)] {
            for (i, _) in code.match_indices(prefix) {
                let path: String = code[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
                for k in (1..=parts.len()).rev() {
                    let mut c = parts[..k].join("::");
                    if !base.is_empty() {
                        c = format!("{base}::{c}");
                    }
                    if mods.contains(&c) {
                        if &c != m && !m.starts_with(&format!("{c}::")) {
                            out.insert(c);
                        }
                        break;
                    }
                }
            }
        }
        graph.insert(m.clone(), out);
    }
    graph
}

/// The strongly connected parts of more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in &t.g[v] {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut part = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                part.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                t.out.push(part);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_files_of_a_crate_import_each_other_in_a_circle() {
    let mut found = Vec::new();
    for e in std::fs::read_dir(crates_dir()).unwrap().flatten() {
        let src = e.path().join("src");
        if !src.is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().to_string();
        for c in circles(&module_graph(&src)) {
            found.push((name.clone(), c));
        }
    }
    let known: Vec<(String, Vec<String>)> = KNOWN_CIRCLES
        .iter()
        .map(|(c, m)| (c.to_string(), m.iter().map(|s| s.to_string()).collect()))
        .collect();
    let new: Vec<_> = found.iter().filter(|f| !known.contains(f)).collect();
    assert!(
        new.is_empty(),
        "files importing each other in a circle (move the shared piece down into a module \
         both use): {new:?}"
    );
    for k in &known {
        assert!(
            found.contains(k),
            "the known circle {k:?} is gone or changed: take it out of KNOWN_CIRCLES"
        );
    }
}
