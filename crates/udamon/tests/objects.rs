//! Objects by name (docs/objects.md): records keep their targets' mappings,
//! and `report objects`, `report hot` and the HTML page name what the
//! memory holds. Live runs use a fake machine under the hidden `--root`
//! flag; nothing here touches the machine's own processes.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::{demo_spec, fake_process, json, ok, text, udamon, write, HEAP_MAP};

fn record_demo(dir: &Path) {
    let spec = demo_spec();
    ok(
        dir,
        &["record", "--sim", spec.to_str().unwrap(), "-o", "demo.udr"],
    );
}

/// The rows of `report objects --json`, by name.
fn rows(v: &serde_json::Value) -> Vec<(String, String, f64)> {
    v["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["kind"].as_str().unwrap().to_string(),
                r["access_frequency"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_simulated_record_names_its_objects_and_each_phase_its_hot_one() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path());
    let all = json(&udamon(
        dir.path(),
        &["report", "objects", "demo.udr", "--json", "-n", "0"],
    ));
    assert!(all["has_maps"].as_bool().unwrap());
    let names: Vec<String> = rows(&all).into_iter().map(|r| r.0).collect();
    for o in ["code", "obj0", "obj7", "cold", "stack"] {
        assert!(names.iter().any(|n| n == o), "{o} missing from {names:?}");
    }
    assert!(rows(&all)
        .iter()
        .all(|r| r.1 == "object" || r.1 == "unmapped"));
    // The demo makes obj0 hot for 5 s, then obj1, ...: in the middle of
    // each phase, its object leads the list.
    for (i, range) in [(0, "1s-4s"), (3, "16s-19s"), (7, "36s-39s")] {
        let v = json(&udamon(
            dir.path(),
            &[
                "report",
                "objects",
                "demo.udr",
                "--json",
                "--time-range",
                range,
            ],
        ));
        let first = &rows(&v)[0];
        assert_eq!(first.0, format!("obj{i}"), "{range}: {v}");
        assert!(first.2 > 0.5, "{range}: {v}");
    }
    // --top and the text table.
    let t = ok(dir.path(), &["report", "objects", "demo.udr", "-n", "3"]);
    assert!(t.contains("3 listed"), "{t}");
    assert_eq!(t.lines().skip(2).count(), 3, "{t}");
}

#[test]
fn report_hot_and_the_html_page_name_what_each_range_holds() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path());
    let t = ok(dir.path(), &["report", "hot", "demo.udr", "-n", "5"]);
    let head = t.lines().nth(1).unwrap();
    assert!(head.ends_with("object"), "{t}");
    // At the end the demo's hot object is obj7.
    assert!(t.lines().skip(2).all(|l| l.contains("obj7")), "{t}");
    let v = json(&udamon(
        dir.path(),
        &[
            "report",
            "hot",
            "demo.udr",
            "--aggregate",
            "--json",
            "-n",
            "3",
        ],
    ));
    // Over the whole run, the hottest addresses are the small hot part of
    // the otherwise cold mapping ("cold").
    assert!(
        v["ranges"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["object"] == "cold"),
        "{v}"
    );
    ok(
        dir.path(),
        &["report", "html", "demo.udr", "-o", "demo.html"],
    );
    let page = std::fs::read_to_string(dir.path().join("demo.html")).unwrap();
    assert!(
        page.contains("<th>object</th>"),
        "the hot table names objects"
    );
    assert!(
        page.contains("\"names\":[") && page.contains("\"obj3\""),
        "hover names"
    );
}

#[test]
fn a_live_record_keeps_the_mappings_and_the_build_ids_of_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write(&root, "proc/sys/kernel/osrelease", "6.12.0-test\n");
    write(
        &root,
        "boot/config-6.12.0-test",
        "CONFIG_DAMON_VADDR=y\nCONFIG_MEM_SOFT_DIRTY=y\n",
    );
    // The process maps an ELF file (this very test binary, copied into its
    // root): the record names it with its build-id, and the report reads
    // its sections from the same file under --root.
    let proc_root = root.join("proc/77/root");
    std::fs::create_dir_all(proc_root.join("bin")).unwrap();
    let exe = proc_root.join("bin/x");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    let ino = std::fs::metadata(&exe).unwrap().ino();
    let maps = format!(
        "00400000-00500000 r--p 00000000 08:01 {ino} /bin/x\n{HEAP_MAP}\
         7f0000000000-7f0000100000 rw-p 00000000 00:00 0 [stack]\n"
    );
    fake_process(&root, 77, &maps, "x\0");
    let r = root.to_str().unwrap();
    ok(
        dir.path(),
        &[
            "record",
            "--ops",
            "softdirty",
            "--pid",
            "77",
            "--root",
            r,
            "--duration",
            "1s",
            "-o",
            "x.udr",
        ],
    );
    let raw = ok(dir.path(), &["report", "raw", "x.udr"]);
    let entry: serde_json::Value = raw
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "maps")
        .unwrap_or_else(|| panic!("no maps entry in {raw}"));
    let m = &entry["value"]["maps"];
    assert_eq!(m.as_array().unwrap().len(), 3, "{entry}");
    assert_eq!(m[0]["path"], "/bin/x");
    assert_eq!(m[0]["inode"], ino);
    let id = udamon_elf::build_id(&exe).unwrap();
    assert_eq!(m[0]["build_id"].as_str().map(str::to_string), id, "{entry}");
    assert_eq!(m[1]["path"], "[heap]");
    // The heap's written half is the hot object; the file is named by its
    // sections when read under the process's root.
    let pr = proc_root.to_str().unwrap();
    let v = json(&udamon(
        dir.path(),
        &[
            "report", "objects", "x.udr", "--json", "-n", "0", "--root", pr,
        ],
    ));
    let rs = rows(&v);
    assert_eq!(rs[0].0, "[heap]", "{v}");
    if id.is_some() {
        assert!(rs.iter().any(|r| r.1 == "section"), "{v}");
    }
    // Elsewhere the file is not there: named as a file, and said so.
    let v = json(&udamon(
        dir.path(),
        &["report", "objects", "x.udr", "--json", "-n", "0"],
    ));
    assert!(rows(&v).iter().any(|r| r.0 == "x" && r.1 == "file"), "{v}");
    if id.is_some() {
        assert!(!v["notes"].as_array().unwrap().is_empty(), "{v}");
        // The text report says so on stderr, once the naming read the file.
        let out = udamon(dir.path(), &["report", "objects", "x.udr"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("it is named as a file"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_record_without_mappings_says_so_and_a_bad_maps_entry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let attrs = udamon_core::Attrs::default();
    let snap = udamon_core::Snapshot {
        start_us: 0,
        end_us: 100_000,
        sample_us: 5_000,
        aggr_us: 100_000,
        targets: vec![udamon_core::TargetSnapshot {
            target_idx: 0,
            regions: vec![udamon_core::RegionSnapshot {
                start: 0x1000,
                end: 0x9000,
                nr_accesses: 10,
                age: 1,
            }],
        }],
    };
    let header = udamon_record::Header::new("vaddr", attrs);
    let mut w = udamon_record::Writer::create(&dir.path().join("old.udr"), &header).unwrap();
    w.push_snapshot(&snap).unwrap();
    w.finish().unwrap();
    let t = ok(dir.path(), &["report", "objects", "old.udr"]);
    assert!(t.contains("the record has no mappings"), "{t}");
    assert!(t.contains("[unmapped]"), "{t}");
    let mut w = udamon_record::Writer::create(&dir.path().join("bad.udr"), &header).unwrap();
    w.push_json(
        "maps",
        &serde_json::json!({"at_us": 0, "idx": 0, "maps": "everything"}),
    )
    .unwrap();
    w.push_snapshot(&snap).unwrap();
    w.finish().unwrap();
    let out = udamon(dir.path(), &["report", "objects", "bad.udr"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("bad.udr") && err.contains("mappings"), "{err}");
}

#[test]
fn hints_name_the_hottest_objects_within_the_budget_and_become_mlock_schemes() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path());
    let v = json(&udamon(
        dir.path(),
        &[
            "hints",
            "demo.udr",
            "-o",
            "h.toml",
            "--max-bytes",
            "100M",
            "--json",
        ],
    ));
    assert!(v["bytes"].as_u64().unwrap() <= 100 << 20, "{v}");
    let file = std::fs::read_to_string(dir.path().join("h.toml")).unwrap();
    let hints = udamon_objects::Hints::parse(&file).unwrap();
    assert_eq!(hints.hints.len(), v["hints"].as_u64().unwrap() as usize);
    // Hottest first: the stack (20% of samples), then the objects (8%),
    // one of which only in part (64 MiB do not fit in what is left).
    assert_eq!(hints.hints[0].object, "stack");
    assert!(hints.hints.iter().all(|h| !h.ranges.is_empty()), "{file}");
    assert!(hints.hints.iter().any(|h| h.part), "{file}");
    // As schemes: one mlock scheme allowed in the hinted ranges only, which
    // `udamon apply --sim` runs.
    ok(
        dir.path(),
        &[
            "hints",
            "demo.udr",
            "-o",
            "locks.toml",
            "--max-bytes",
            "100M",
            "--schemes",
        ],
    );
    let check = ok(dir.path(), &["schemes", "check", "locks.toml", "--json"]);
    let s: serde_json::Value = serde_json::from_str(&check).unwrap();
    assert_eq!(s["schemes"][0]["action"], "mlock", "{s}");
    assert_eq!(
        s["schemes"][0]["filters"].as_array().unwrap().len(),
        hints.hints.iter().map(|h| h.ranges.len()).sum::<usize>()
    );
    let spec = demo_spec();
    let out = json(&udamon(
        dir.path(),
        &[
            "apply",
            "locks.toml",
            "--sim",
            spec.to_str().unwrap(),
            "--json",
        ],
    ));
    let applied = out["with_schemes"]["schemes"][0]["sz_applied"]
        .as_u64()
        .unwrap_or(0);
    assert!(applied > 0 && applied <= 100 << 20, "{out}");
    // Bad values are refused before anything is written.
    for (args, what) in [
        (vec!["--min-frequency", "150%"], "--min-frequency 150%"),
        (vec!["--node", "1", "--schemes"], "--schemes"),
        (vec!["--max-bytes", "lots"], "--max-bytes"),
    ] {
        let mut a = vec!["hints", "demo.udr", "-o", "bad.toml"];
        a.extend(args);
        let o = udamon(dir.path(), &a);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains(what), "{}", text(&o.stderr));
        assert!(!dir.path().join("bad.toml").exists());
    }
}

#[test]
fn a_cut_keeps_what_names_its_regions() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path());
    ok(
        dir.path(),
        &[
            "cut",
            "demo.udr",
            "--time-range",
            "20s-25s",
            "-o",
            "part.udr",
        ],
    );
    let v = json(&udamon(
        dir.path(),
        &["report", "objects", "part.udr", "--json"],
    ));
    assert!(v["has_maps"].as_bool().unwrap(), "{v}");
    assert_eq!(rows(&v)[0].0, "obj4", "{v}");
}

#[test]
fn record_hints_are_checked_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    record_demo(dir.path());
    // A simulated workload's hints name its objects by their mappings:
    // nothing a new run of a program can find.
    ok(dir.path(), &["hints", "demo.udr", "-o", "h.toml"]);
    let o = udamon(
        dir.path(),
        &["record", "--hints", "h.toml", "-o", "x.udr", "--", "true"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("no hint names a data symbol or an allocation site"));
    // A file that is not hints, and one with a bad site, name the problem.
    write(dir.path(), "bad.toml", "[[hint]]\nobject = 1\n");
    write(
        dir.path(),
        "site.toml",
        "[[hint]]\nobject = \"f\"\nkind = \"alloc_site\"\naction = \"mlock\"\nsites = [[\"-\", \"a/b\", \"0x10\"]]\n",
    );
    for (f, what) in [
        ("bad.toml", "not a hints file"),
        ("site.toml", "hint 1 (f): site"),
    ] {
        let o = udamon(
            dir.path(),
            &["record", "--hints", f, "-o", "x.udr", "--", "true"],
        );
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains(what), "{}", text(&o.stderr));
    }
    // Hints need a command udamon starts.
    let o = udamon(dir.path(), &["record", "--hints", "h.toml", "--pid", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(!dir.path().join("x.udr").exists());
}
