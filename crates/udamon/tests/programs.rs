//! Whole programs on the live paths: several `--pid`, `--children`,
//! `--cgroup` and `-- CMD`'s tree, each process one target of one monitor,
//! followed as they come and go, against fake /proc trees (the hidden
//! `--root` flag; our engine over soft-dirty, which fake pagemaps feed).

use std::fs;
use std::path::Path;

mod common;
use common::{fake_process, text, udamon, write, HEAP_MAP};

/// A kernel with soft-dirty; processes are added with [`proc_`].
fn fake_kernel(root: &Path) {
    write(root, "proc/sys/kernel/osrelease", "6.12.0-test\n");
    write(
        root,
        "boot/config-6.12.0-test",
        "CONFIG_MEM_SOFT_DIRTY=y\nCONFIG_PROC_CHILDREN=y\n",
    );
}

/// Fake process `pid` (heap pages present, the first half written) whose
/// parent is `ppid`, and whose only thread's children are `children`.
fn proc_(root: &Path, pid: u32, ppid: u32, children: &[u32]) {
    fake_process(
        root,
        pid,
        &format!(
            "00400000-00500000 r-xp 00000000 00:00 0 /bin/x\n{HEAP_MAP}\
             7f0000000000-7f0000100000 rw-p 00000000 00:00 0 [stack]\n"
        ),
        &format!("worker\0{pid}\0"),
    );
    write(
        root,
        &format!("proc/{pid}/stat"),
        &format!(
            "{pid} (w{pid}) S {ppid} 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {} 1048576 0\n",
            1000 + pid
        ),
    );
    let kids: Vec<String> = children.iter().map(u32::to_string).collect();
    write(
        root,
        &format!("proc/{pid}/task/{pid}/children"),
        &format!("{} ", kids.join(" ")),
    );
}

/// A process exits: its /proc directory goes.
fn exit(root: &Path, pid: u32) {
    fs::remove_dir_all(root.join(format!("proc/{pid}"))).unwrap();
}

/// The record's header, snapshots and "target" entries, from `report raw`.
struct Raw {
    header: serde_json::Value,
    snapshots: Vec<serde_json::Value>,
    events: Vec<serde_json::Value>,
}

fn raw(dir: &Path, rec: &str) -> Raw {
    let out = udamon(dir, &["report", "raw", rec]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut r = Raw {
        header: serde_json::Value::Null,
        snapshots: Vec::new(),
        events: Vec::new(),
    };
    for l in text(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        match v["type"].as_str() {
            Some("snapshot") => r.snapshots.push(v),
            Some("target") => r.events.push(v["value"].clone()),
            Some("header") => r.header = v,
            _ => {}
        }
    }
    r
}

/// The target indices a snapshot holds.
fn idxs(s: &serde_json::Value) -> Vec<u64> {
    s["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target_idx"].as_u64().unwrap())
        .collect()
}

/// `udamon record --ops softdirty ARGS --root ROOT -o t.udr --json` in the
/// background; `meanwhile` runs after 2.5 s; returns the summary.
fn record_while(
    dir: &Path,
    root: &Path,
    args: &[&str],
    meanwhile: impl FnOnce(&Path),
) -> serde_json::Value {
    let r = root.to_str().unwrap();
    let mut a = vec![
        "record",
        "--ops",
        "softdirty",
        "--root",
        r,
        "--update",
        "200ms",
        "-o",
        "t.udr",
        "--json",
    ];
    a.extend_from_slice(args);
    let child = common::spawn(dir, &a, common::DEFAULT);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    meanwhile(root);
    let out = common::finish(child, 120, "udamon record");
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Several `--pid`: one record, one target per process (pid, start time,
/// comm in the header), every snapshot holding each.
#[test]
fn several_pids_are_one_record_with_a_target_each() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_kernel(&root);
    proc_(&root, 300, 1, &[]);
    proc_(&root, 301, 1, &[]);
    let v = record_while(
        dir.path(),
        &root,
        &["--pid", "300", "--pid", "301", "--duration", "4s"],
        |_| {},
    );
    assert_eq!(v["processes"]["at_start"], 2, "{v}");
    assert_eq!(v["processes"]["joined"], 0, "{v}");
    let r = raw(dir.path(), "t.udr");
    let t = &r.header["targets"];
    assert_eq!(t[0]["pid"], 300, "{}", r.header);
    assert_eq!(t[1]["pid"], 301);
    assert_eq!(t[0]["comm"], "w300");
    assert_eq!(t[1]["start"], 1301);
    assert!(r.snapshots.len() >= 10, "{}", r.snapshots.len());
    for s in &r.snapshots {
        assert_eq!(idxs(s), vec![0, 1], "{s}");
    }
    // Both processes' written halves are seen.
    let last = r.snapshots.last().unwrap();
    for t in last["targets"].as_array().unwrap() {
        let seen = t["regions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["nr_accesses"].as_u64().unwrap() > 0);
        assert!(seen, "{t}");
    }
}

/// `--children`: a child forked later joins at the next scan with the next
/// index, one that exits leaves; the record marks both, later snapshots
/// carry the new one and not the old, and the others keep their index.
#[test]
fn children_are_followed_as_they_come_and_go() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_kernel(&root);
    proc_(&root, 400, 1, &[401]);
    proc_(&root, 401, 400, &[]);
    proc_(&root, 999, 1, &[]); // not of the program
    let v = record_while(
        dir.path(),
        &root,
        &["--pid", "400", "--children", "--duration", "6s"],
        |root| {
            proc_(root, 402, 400, &[]);
            proc_(root, 400, 1, &[402]);
            exit(root, 401);
        },
    );
    assert_eq!(v["ended_by"], "duration", "{v}");
    assert_eq!(v["processes"]["at_start"], 2, "{v}");
    assert_eq!(v["processes"]["joined"], 1, "{v}");
    assert_eq!(v["processes"]["left"], 1, "{v}");
    let r = raw(dir.path(), "t.udr");
    assert_eq!(r.header["targets"].as_array().unwrap().len(), 2);
    let arrive = r.events.iter().find(|e| e["event"] == "arrive").unwrap();
    assert_eq!(
        (arrive["idx"].clone(), arrive["pid"].clone()),
        (2.into(), 402.into())
    );
    assert_eq!(arrive["comm"], "w402");
    let exit = r.events.iter().find(|e| e["event"] == "exit").unwrap();
    assert_eq!(exit["idx"], 1);
    assert_eq!(exit["why"], "exited");
    assert!(r.events.iter().all(|e| e["pid"] != 999), "{:?}", r.events);
    let last = r.snapshots.last().unwrap();
    assert_eq!(idxs(last), vec![0, 2], "{last}");
    assert!(idxs(&r.snapshots[0]).contains(&1));
}

/// `--cgroup`: the processes of a cgroup and the cgroups under it; a
/// process moved out leaves ("left"); the run ends when none is left.
#[test]
fn a_cgroup_is_followed_until_it_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_kernel(&root);
    proc_(&root, 500, 1, &[]);
    proc_(&root, 501, 1, &[]);
    write(&root, "sys/fs/cgroup/cgroup.controllers", "memory\n");
    write(&root, "sys/fs/cgroup/app/cgroup.procs", "500\n");
    write(&root, "sys/fs/cgroup/app/sub/cgroup.procs", "501\n");
    let v = record_while(
        dir.path(),
        &root,
        &["--cgroup", "/sys/fs/cgroup/app", "--duration", "30s"],
        |root| {
            write(root, "sys/fs/cgroup/app/sub/cgroup.procs", "");
            std::thread::sleep(std::time::Duration::from_secs(1));
            write(root, "sys/fs/cgroup/app/cgroup.procs", "");
        },
    );
    assert_eq!(v["ended_by"], "target exited", "{v}");
    assert!(v["monitored_s"].as_f64().unwrap() < 15.0, "{v}");
    let r = raw(dir.path(), "t.udr");
    let whys: Vec<&str> = r.events.iter().filter_map(|e| e["why"].as_str()).collect();
    assert_eq!(whys, vec!["left", "left"], "{:?}", r.events);
}

/// What a program's flags refuse, before anything starts: each names the
/// flag and the way out.
#[test]
fn program_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_kernel(&root);
    proc_(&root, 600, 1, &[]);
    let r = root.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--children"],
            "--children follows the descendants of --pid",
        ),
        (vec!["--cgroup", "nope"], "no such cgroup"),
        (vec!["--cgroup", "a/../../etc"], "without `..`"),
        (vec!["--pid", "600", "--pid", "77"], "process 77"),
        (
            vec!["--pid", "600", "--pid", "600", "--stop-on-exec"],
            "--stop-on-exec ends the run when one process execs",
        ),
    ] {
        write(&root, "sys/fs/cgroup/cgroup.controllers", "memory\n");
        let mut a = vec![
            "record",
            "--ops",
            "softdirty",
            "--root",
            r,
            "--duration",
            "1s",
        ];
        a.extend(args.iter());
        let out = udamon(dir.path(), &a);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// A scheme over a program: one scheme for its processes, its statistics
/// per process too, summing to the scheme's.
#[test]
fn a_scheme_over_a_program_counts_each_process() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_kernel(&root);
    proc_(&root, 700, 1, &[]);
    proc_(&root, 701, 1, &[]);
    fs::write(dir.path().join("all.txt"), "4K max 0 max 0 max stat\n").unwrap();
    let r = root.to_str().unwrap();
    let out = udamon(
        dir.path(),
        &[
            "apply",
            "all.txt",
            "--ops",
            "softdirty",
            "--pid",
            "700",
            "--pid",
            "701",
            "--root",
            r,
            "--duration",
            "3s",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["schemes"][0];
    let per = s["per_target"].as_array().unwrap_or_else(|| panic!("{v}"));
    let idx: Vec<u64> = per
        .iter()
        .map(|t| t["target_idx"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, vec![0, 1], "{s}");
    let sum: u64 = per.iter().map(|t| t["sz_tried"].as_u64().unwrap()).sum();
    assert_eq!(sum, s["sz_tried"].as_u64().unwrap(), "{s}");
    assert!(sum > 0, "{s}");
}
