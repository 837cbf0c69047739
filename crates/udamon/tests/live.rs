//! Live paths of `record` and `apply` against fake /proc and /sys trees
//! (the hidden `--root` flag). No test here touches the machine's own
//! DAMON sysfs: every path the binary reads or writes is under a temp dir.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

mod common;
use common::{fake_process, snapshot_tree, text, udamon, write, HEAP_MAP};

const PID: u32 = 4242;

/// A kernel with DAMON vaddr and soft-dirty, and process PID with three
/// mappings whose pagemap says: heap pages present, the first half
/// soft-dirty.
fn fake_machine(root: &Path) {
    write(root, "proc/sys/kernel/osrelease", "6.12.0-test\n");
    write(
        root,
        "boot/config-6.12.0-test",
        "CONFIG_DAMON_VADDR=y\nCONFIG_DAMON_PADDR=y\nCONFIG_MEM_SOFT_DIRTY=y\n",
    );
    fake_process(
        root,
        PID,
        &format!(
            "00400000-00500000 r-xp 00000000 00:00 0 /bin/x\n{HEAP_MAP}\
             7f0000000000-7f0000100000 rw-p 00000000 00:00 0 [stack]\n"
        ),
        "fake\0workload\0",
    );
}

#[test]
fn busy_foreign_kdamond_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    let admin = "sys/kernel/mm/damon/admin/kdamonds";
    write(&root, &format!("{admin}/nr_kdamonds"), "1\n");
    write(&root, &format!("{admin}/0/state"), "on\n");
    write(&root, &format!("{admin}/0/pid"), "77\n");
    write(&root, &format!("{admin}/0/contexts/nr_contexts"), "1\n");
    fs::write(dir.path().join("prcl.txt"), "4K max 0 0 5s max pageout\n").unwrap();
    let before = snapshot_tree(&root);
    let r = root.to_str().unwrap();
    let pid = PID.to_string();
    for args in [
        vec!["record", "--ops", "kdamond", "--pid", &pid, "--root", r],
        vec!["record", "--pid", &pid, "--root", r, "--duration", "1s"],
        vec![
            "apply", "prcl.txt", "--ops", "kdamond", "--pid", &pid, "--root", r,
        ],
    ] {
        let out = udamon(dir.path(), &args);
        let err = text(&out.stderr);
        if args.contains(&"kdamond") {
            assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
            assert!(err.contains("kdamond 0 (state on, pid 77)"), "{err}");
            assert!(err.contains("not created by udamon"), "{err}");
        } else {
            // auto falls back to soft-dirty, which this fake kernel has.
            assert!(out.status.success(), "{args:?}: {err}");
            assert!(err.contains("with softdirty (not kdamond"), "{err}");
        }
        // No kdamond file changed and none appeared.
        let after: Vec<_> = snapshot_tree(&root)
            .into_iter()
            .filter(|(p, _)| p.starts_with(root.join("sys")))
            .collect();
        let before_sys: Vec<_> = before
            .iter()
            .filter(|(p, _)| p.starts_with(root.join("sys")))
            .cloned()
            .collect();
        assert_eq!(after, before_sys, "{args:?} wrote under sys/");
    }
}

/// `udamon record --ops softdirty --pid PID ARGS... -o OUT --json` for 1 s
/// on a fake machine, in a fresh directory: (directory, fake root, output).
fn record_softdirty(
    args: &[&str],
    out: &str,
) -> (tempfile::TempDir, PathBuf, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    let pid = PID.to_string();
    let mut a = vec![
        "record",
        "--ops",
        "softdirty",
        "--pid",
        &pid,
        "--root",
        root.to_str().unwrap(),
        "--duration",
        "1s",
        "-o",
        out,
        "--json",
    ];
    a.extend(args);
    let o = udamon(dir.path(), &a);
    (dir, root, o)
}

#[test]
fn softdirty_record_is_labelled_write_only_and_sees_the_written_half() {
    let (dir, root, out) = record_softdirty(&[], "sd.udr");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["ops"], "softdirty");
    assert_eq!(s["ended_by"], "duration");
    assert!(s["access"].as_str().unwrap().contains("writes only"), "{s}");
    // One aggregation is 20 samples of at least 5 ms each, more on a busy
    // machine: a second of monitoring gives up to 10 snapshots.
    let n = s["snapshots"].as_u64().unwrap();
    assert!((1..=10).contains(&n), "{s}");
    // Soft-dirty's side effects are said before it starts.
    let err = text(&out.stderr);
    assert!(
        err.contains("clears the whole process's soft-dirty bits"),
        "{err}"
    );
    // clear_refs got "4" (soft-dirty reset) from the monitor.
    assert_eq!(
        fs::read_to_string(root.join(format!("proc/{PID}/clear_refs"))).unwrap(),
        "4"
    );

    let raw = udamon(dir.path(), &["report", "raw", "sd.udr"]);
    assert!(raw.status.success(), "{}", text(&raw.stderr));
    let raw = text(&raw.stdout);
    let mut lines = raw.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["kind"], "softdirty", "{header}");
    assert_eq!(header["params"]["write_only"], true, "{header}");
    // What nr_accesses counts is said, not implied.
    assert_eq!(header["params"]["nr_accesses"], "window", "{header}");
    assert_eq!(header["targets"][0]["label"], "fake workload");
    // Bytes seen accessed in the soft-dirty half vs the clean half of the heap.
    let (mut dirty, mut clean) = (0u64, 0u64);
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        for t in v["targets"].as_array().into_iter().flatten() {
            for reg in t["regions"].as_array().unwrap() {
                let (s, e) = (reg["start"].as_u64().unwrap(), reg["end"].as_u64().unwrap());
                if reg["nr_accesses"].as_u64().unwrap() == 0 {
                    continue;
                }
                let mid = 0x1020_0000u64;
                dirty += e.min(mid).saturating_sub(s.max(0x1000_0000));
                // A region straddling the boundary is seen when its sample
                // lands in the written half; one wholly in the clean half
                // never may be.
                if s >= mid {
                    clean += e.min(0x1040_0000).saturating_sub(s);
                }
            }
        }
    }
    assert!(dirty > 0, "the written half was never seen");
    assert_eq!(clean, 0, "regions of the clean half were seen accessed");
}

#[test]
fn softdirty_reset_per_window_sees_the_written_half_and_says_when_it_resets() {
    let (dir, root, out) = record_softdirty(&["--softdirty-reset", "window"], "sdw.udr");
    let r = root.to_str().unwrap();
    let pid = PID.to_string();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("soft-dirty bits every aggregation window"),
        "{err}"
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(s["snapshots"].as_u64().unwrap() >= 1, "{s}");
    // The fake pagemap's soft-dirty half is written "at every sample": its
    // regions come out at the top of the scale, the clean half at 0.
    let raw = udamon(dir.path(), &["report", "raw", "sdw.udr"]);
    let raw = text(&raw.stdout);
    let (mut top, mut clean_seen) = (false, false);
    for l in raw.lines().skip(1) {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        for t in v["targets"].as_array().into_iter().flatten() {
            for reg in t["regions"].as_array().unwrap() {
                let (st, n) = (
                    reg["start"].as_u64().unwrap(),
                    reg["nr_accesses"].as_u64().unwrap(),
                );
                top |= st < 0x1020_0000 && reg["end"].as_u64().unwrap() <= 0x1020_0000 && n == 20;
                clean_seen |= (0x1020_0000..0x1040_0000).contains(&st) && n > 0;
            }
        }
    }
    assert!(top, "no region of the written half at 20: {raw}");
    assert!(!clean_seen, "the clean half was seen written: {raw}");

    // The flag belongs to the soft-dirty path, and says what it takes.
    for (args, want) in [
        (
            vec!["--ops", "idle", "--softdirty-reset", "window"],
            "applies to the soft-dirty path",
        ),
        (vec!["--softdirty-reset", "windows:0"], "windows:N (N >= 1)"),
    ] {
        let mut a = vec![
            "record",
            "--pid",
            &pid,
            "--root",
            r,
            "--duration",
            "1s",
            "-o",
            "x.udr",
        ];
        a.extend(args);
        let out = udamon(dir.path(), &a);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(want),
            "{a:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn the_simulator_simulates_a_per_window_softdirty_reset() {
    let dir = tempfile::tempdir().unwrap();
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/specs/swap.toml"
    );
    let out = udamon(
        dir.path(),
        &[
            "record",
            "--sim",
            spec,
            "--softdirty-reset",
            "windows:4",
            "--duration",
            "5s",
            "-o",
            "s.udr",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["snapshots"], 50, "{s}");
    let out = udamon(
        dir.path(),
        &[
            "record",
            "--sim",
            spec,
            "--softdirty-reset",
            "window",
            "--full-scan",
            "-o",
            "f.udr",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not --full-scan"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn user_space_ops_refuse_kernel_only_actions_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    fs::write(dir.path().join("lru.txt"), "4K max 0 0 5s max lru_deprio\n").unwrap();
    let r = root.to_str().unwrap();
    let pid = PID.to_string();
    let out = udamon(
        dir.path(),
        &[
            "apply",
            "lru.txt",
            "--ops",
            "softdirty",
            "--pid",
            &pid,
            "--root",
            r,
            "-o",
            "x.udr",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(
        err.contains("lru_deprio cannot be done from user space"),
        "{err}"
    );
    assert!(
        !dir.path().join("x.udr").exists(),
        "nothing is written on refusal"
    );
}

#[test]
fn missing_pid_and_missing_target_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    let r = root.to_str().unwrap();
    let out = udamon(
        dir.path(),
        &["record", "--ops", "softdirty", "--pid", "9", "--root", r],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("process 9 does not exist"));
    let out = udamon(dir.path(), &["record", "--ops", "idle", "--sim", "x.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--ops idle watches a live process"));
}

#[test]
fn paddr_idle_monitors_system_ram_from_iomem() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    // 4 MiB of System RAM at 1 MiB; a bitmap and page flags for its PFNs
    // (every page on an LRU list, none idle-marked yet).
    write(
        &root,
        "proc/iomem",
        "00000000-000fffff : Reserved\n00100000-004fffff : System RAM\n",
    );
    write(
        &root,
        "sys/kernel/mm/page_idle/bitmap",
        &"\0".repeat(0x500 / 8),
    );
    let flags = fs::File::create(root.join("proc/kpageflags")).unwrap();
    for pfn in 0x100u64..0x500 {
        flags
            .write_all_at(&(1u64 << 5).to_ne_bytes(), pfn * 8)
            .unwrap();
    }
    let r = root.to_str().unwrap();
    let out = udamon(
        dir.path(),
        &[
            "record",
            "--paddr",
            "--ops",
            "idle",
            "--root",
            r,
            "--duration",
            "1s",
            "-o",
            "pa.udr",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["command"], "physical memory");
    let raw = text(&udamon(dir.path(), &["report", "raw", "pa.udr"]).stdout);
    let snap: serde_json::Value = serde_json::from_str(raw.lines().nth(1).unwrap()).unwrap();
    let regions = snap["targets"][0]["regions"].as_array().unwrap();
    assert_eq!(regions[0]["start"], 0x100000);
    assert_eq!(regions.last().unwrap()["end"], 0x500000);
    // The fake bitmap keeps every written idle bit, so nothing reads accessed.
    assert!(regions.iter().all(|r| r["nr_accesses"] == 0), "{snap}");
    // Schemes other than stat need the kernel on physical memory.
    fs::write(dir.path().join("po.txt"), "4K max 0 0 5s max pageout\n").unwrap();
    let out = udamon(
        dir.path(),
        &["apply", "po.txt", "--paddr", "--ops", "idle", "--root", r],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("needs the kernel"),
        "{}",
        text(&out.stderr)
    );
}

/// When no path works, the refusal names every blocker of every path: a
/// foreign kdamond is never the only reason given when the kernel also
/// lacks DAMON vaddr (stopping it would not help, and it is not ours).
#[test]
fn a_refusal_names_every_blocker() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write(&root, "proc/sys/kernel/osrelease", "6.18.0-test\n");
    write(
        &root,
        "boot/config-6.18.0-test",
        "CONFIG_DAMON=y\nCONFIG_DAMON_SYSFS=y\nCONFIG_DAMON_PADDR=y\n",
    );
    let admin = "sys/kernel/mm/damon/admin/kdamonds";
    write(&root, &format!("{admin}/nr_kdamonds"), "1\n");
    write(&root, &format!("{admin}/0/state"), "on\n");
    write(&root, &format!("{admin}/0/pid"), "77\n");
    write(&root, &format!("proc/{PID}/pagemap"), "");
    let r = root.to_str().unwrap();
    let pid = PID.to_string();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["record", "--pid", &pid, "--root", r],
            &[
                "cannot monitor a live process",
                "vaddr needs CONFIG_DAMON_VADDR",
                "kdamond 0 (state on, pid 77)",
                "CONFIG_IDLE_PAGE_TRACKING",
                "CONFIG_MEM_SOFT_DIRTY",
            ],
        ),
        (
            &["record", "--ops", "kdamond", "--pid", &pid, "--root", r],
            &[
                "vaddr needs CONFIG_DAMON_VADDR",
                "kdamond 0 (state on, pid 77)",
            ],
        ),
        (
            &["record", "--paddr", "--root", r],
            &[
                "cannot monitor physical memory",
                "kdamond 0 (state on, pid 77)",
                "CONFIG_IDLE_PAGE_TRACKING",
            ],
        ),
    ];
    for (args, wants) in cases {
        let out = udamon(dir.path(), args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        for w in *wants {
            assert!(err.contains(w), "{args:?} lacks {w:?}: {err}");
        }
    }
}

/// With an idle kdamond left behind (as `damo stop` leaves one), `--ops
/// auto` never falls back to write-only monitoring for a scheme that acts:
/// read-hot memory would look idle and be paged out. The refusal says what
/// is in the way and how to clear it; naming soft-dirty accepts it.
#[test]
fn auto_never_acts_on_write_only_monitoring() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    let admin = "sys/kernel/mm/damon/admin/kdamonds";
    write(&root, &format!("{admin}/nr_kdamonds"), "1\n");
    write(&root, &format!("{admin}/0/state"), "off\n");
    fs::write(dir.path().join("prcl.txt"), "4K max 0 0 5s max pageout\n").unwrap();
    fs::write(dir.path().join("stat.txt"), "4K max 0 0 5s max stat\n").unwrap();
    let r = root.to_str().unwrap();
    let pid = PID.to_string();
    let out = udamon(
        dir.path(),
        &["apply", "prcl.txt", "--pid", &pid, "--root", r],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    for want in [
        "sees writes only",
        "scheme 0 (pageout)",
        "give --ops softdirty",
        "kdamond 0 (state off",
        "damo stop",
        "nr_kdamonds",
    ] {
        assert!(err.contains(want), "lacks {want:?}: {err}");
    }
    // Watching (stat) with auto, or acting with softdirty by name, runs.
    for args in [
        &[
            "apply",
            "stat.txt",
            "--pid",
            &pid,
            "--root",
            r,
            "--duration",
            "1s",
        ][..],
        &[
            "apply",
            "prcl.txt",
            "--ops",
            "softdirty",
            "--pid",
            &pid,
            "--root",
            r,
            "--duration",
            "1s",
        ],
    ] {
        let out = udamon(dir.path(), args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
}

/// A live record killed without warning (SIGKILL) keeps all but about the
/// last second: frames are flushed at least once a second of wall time
/// (they were flushed every 64 snapshots, 6.4 s at default attributes).
#[test]
fn a_killed_live_record_keeps_all_but_the_last_second() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    let r = root.to_str().unwrap();
    let pid = PID.to_string();
    let child = common::spawn(
        dir.path(),
        &[
            "record",
            "--ops",
            "softdirty",
            "--pid",
            &pid,
            "--root",
            r,
            "--duration",
            "60s",
            "-o",
            "k.udr",
        ],
        common::DEFAULT,
    );
    std::thread::sleep(std::time::Duration::from_secs(4));
    // SAFETY: killing our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    let _ = common::finish(child, 30, "killed udamon record");
    let out = udamon(dir.path(), &["report", "raw", "k.udr"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let last_end = text(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["end_us"].as_u64())
        .max()
        .unwrap_or(0);
    assert!(last_end >= 1_000_000, "kept {last_end} us of about 4 s");
}

/// `/proc/PID/stat` with start time `start` (field 22).
fn stat(start: u64) -> String {
    format!("{PID} (fake) S {} {start} 0 0\n", vec!["0"; 18].join(" "))
}

/// Runs `record` over the fake machine in the background for `secs`, calls
/// `meanwhile` after 2 s, and returns the summary.
fn record_while(extra: &[&str], secs: u32, meanwhile: impl FnOnce(&Path)) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    write(&root, &format!("proc/{PID}/stat"), &stat(100));
    let r = root.to_str().unwrap().to_string();
    let (pid, dur) = (PID.to_string(), format!("{secs}s"));
    let mut args = vec![
        "record",
        "--ops",
        "softdirty",
        "--pid",
        &pid,
        "--root",
        &r,
        "--duration",
        &dur,
        "-o",
        "t.udr",
        "--json",
    ];
    args.extend_from_slice(extra);
    let child = common::spawn(dir.path(), &args, common::DEFAULT);
    std::thread::sleep(std::time::Duration::from_secs(2));
    meanwhile(&root);
    let out = common::finish(child, 120, "udamon record");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let raw = udamon(dir.path(), &["report", "raw", "t.udr"]);
    assert!(raw.status.success(), "{}", text(&raw.stderr));
    v["raw"] = text(&raw.stdout).into();
    v["stderr"] = text(&out.stderr).into();
    v
}

/// The summary stored in a live record does not claim a size of 0 (the
/// size is known only once the file is written), and says how long udamon
/// spent, set-up included.
#[test]
fn a_live_record_summary_is_true() {
    let v = record_while(&[], 3, |_| {});
    assert_eq!(v["ended_by"], "duration", "{v}");
    assert!(v["record_bytes"].as_u64().unwrap() > 0, "{v}");
    assert!(v["udamon_cpu_s"].as_f64().unwrap() > 0.0, "{v}");
    let raw = v["raw"].as_str().unwrap();
    let stored: serde_json::Value = raw
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "summary")
        .map(|e| e["value"].clone())
        .unwrap();
    assert!(stored.get("record_bytes").is_none(), "{stored}");
    assert_eq!(stored["ended_by"], "duration");
    assert_eq!(stored["gaps"], 0);
}

/// The target's pid names another process (its start time changed): the
/// run ends there, `ended_by: "target replaced"`, and nothing more is read.
#[test]
fn a_reused_pid_ends_the_run_as_target_replaced() {
    let v = record_while(&[], 30, |root| {
        // As /proc does, a reader sees the old file or the new one, never a
        // half-written one (which would read as an exit).
        write(root, &format!("proc/{PID}/stat.new"), &stat(999));
        fs::rename(
            root.join(format!("proc/{PID}/stat.new")),
            root.join(format!("proc/{PID}/stat")),
        )
        .unwrap();
    });
    assert_eq!(v["ended_by"], "target replaced", "{v}");
    assert!(v["monitored_s"].as_f64().unwrap() < 20.0, "{v}");
}

/// An exec (the pagemap opened before reads nothing; a new one reads):
/// monitoring goes on over the new program from fresh regions, and the
/// record marks the exec; with --stop-on-exec the run ends there.
#[test]
fn an_exec_is_followed_and_marked_or_ends_the_run() {
    let exec = |root: &Path| {
        let pm = root.join(format!("proc/{PID}/pagemap"));
        let new = root.join(format!("proc/{PID}/pagemap.new"));
        fs::copy(&pm, &new).unwrap();
        // The old address space goes (its pagemap reads nothing), the new
        // program's takes the name.
        fs::OpenOptions::new()
            .write(true)
            .open(&pm)
            .unwrap()
            .set_len(0)
            .unwrap();
        fs::rename(&new, &pm).unwrap();
    };
    let v = record_while(&[], 5, exec);
    assert_eq!(v["ended_by"], "duration", "{v}");
    assert_eq!(v["execs"], 1, "{v}");
    let raw = v["raw"].as_str().unwrap();
    assert!(raw.contains("\"exec\""), "{raw}");
    // Accesses go on being seen after the exec (the written half).
    let last: serde_json::Value = raw
        .lines()
        .rfind(|l| l.contains("\"regions\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap();
    let seen = last["targets"][0]["regions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["nr_accesses"].as_u64().unwrap() > 0);
    assert!(seen, "{last}");
    assert!(v["stderr"].as_str().unwrap().contains("exec'd"), "{v}");

    let v = record_while(&["--stop-on-exec"], 30, exec);
    assert_eq!(v["ended_by"], "target exec'd", "{v}");
}

/// A kdamond left by a udamon run that died is proved udamon's by its
/// claim: `features` says so, live runs point at `udamon cleanup`, which
/// removes it. A kdamond without a matching claim is never touched.
#[test]
fn cleanup_removes_only_a_provable_leftover() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    let k = "sys/kernel/mm/damon/admin/kdamonds";
    write(&root, &format!("{k}/nr_kdamonds"), "1\n");
    write(&root, &format!("{k}/0/state"), "on\n");
    write(&root, &format!("{k}/0/pid"), "900\n");
    let c = format!("{k}/0/contexts/0");
    write(&root, &format!("{c}/operations"), "vaddr\n");
    write(&root, &format!("{c}/targets/nr_targets"), "1\n");
    write(
        &root,
        &format!("{c}/targets/0/pid_target"),
        &format!("{PID}\n"),
    );
    write(
        &root,
        &format!("{c}/monitoring_attrs/intervals/sample_us"),
        "5000\n",
    );
    write(
        &root,
        &format!("{c}/monitoring_attrs/intervals/aggr_us"),
        "100000\n",
    );
    let r = root.to_str().unwrap();
    let pid = PID.to_string();
    // No claim: someone else's kdamond; cleanup touches nothing.
    let before = snapshot_tree(&root);
    let out = udamon(dir.path(), &["cleanup", "--root", r]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("nothing removed"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(snapshot_tree(&root), before);
    // The claim of udamon pid 50, whose process is gone (pid 50 is now
    // another process, started later).
    write(
        &root,
        "run/udamon/kdamond.claim",
        &format!(
            "udamon_pid=50\nudamon_start=777\nkdamond_pid=900\nops=vaddr\ntarget_pids={PID}\n\
             sample_us=5000\naggr_us=100000\n"
        ),
    );
    write(
        &root,
        "proc/50/stat",
        &format!("50 (sh) S {} 999 0\n", vec!["0"; 18].join(" ")),
    );
    let out = udamon(dir.path(), &["features", "--root", r]);
    assert!(
        text(&out.stdout).contains("was left by udamon pid 50, which died: `udamon cleanup`"),
        "{}",
        text(&out.stdout)
    );
    let out = udamon(
        dir.path(),
        &["record", "--ops", "kdamond", "--pid", &pid, "--root", r],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("`udamon cleanup` removes it"),
        "{}",
        text(&out.stderr)
    );
    let out = udamon(dir.path(), &["cleanup", "--root", r, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["removed"], true, "{v}");
    assert_eq!(
        fs::read_to_string(root.join(format!("{k}/nr_kdamonds"))).unwrap(),
        "0"
    );
    assert!(!root.join("run/udamon/kdamond.claim").exists());
}

/// The set of kdamonds a service made, left by its death: the one that ran
/// has its claim, the other is off; `features` names both as that run's,
/// and `udamon cleanup` removes the set whole, claims and trace instances
/// with it.
#[test]
fn cleanup_removes_a_dead_services_set_of_kdamonds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    let k = "sys/kernel/mm/damon/admin/kdamonds";
    write(&root, &format!("{k}/nr_kdamonds"), "2\n");
    write(&root, &format!("{k}/0/state"), "off\n");
    write(&root, &format!("{k}/1/state"), "on\n");
    write(&root, &format!("{k}/1/pid"), "901\n");
    let c = format!("{k}/1/contexts/0");
    write(&root, &format!("{c}/operations"), "paddr\n");
    write(&root, &format!("{c}/targets/nr_targets"), "1\n");
    for (f, v) in [("sample_us", "20000\n"), ("aggr_us", "400000\n")] {
        write(&root, &format!("{c}/monitoring_attrs/intervals/{f}"), v);
    }
    write(
        &root,
        "run/udamon/kdamonds.claim",
        "udamon_pid=50\nudamon_start=777\nnr_kdamonds=2\n",
    );
    write(
        &root,
        "run/udamon/kdamond-1.claim",
        "udamon_pid=50\nudamon_start=777\nkdamond_pid=901\nops=paddr\ntarget_pids=\n\
         sample_us=20000\naggr_us=400000\nindex=1\n",
    );
    // (tracefs removes an instance with its files; here an empty one)
    fs::create_dir_all(root.join("sys/kernel/tracing/instances/udamon-50-1")).unwrap();
    fs::create_dir_all(root.join("sys/kernel/tracing/instances/udamon-501")).unwrap();
    // pid 50 is another process now
    write(
        &root,
        "proc/50/stat",
        &format!("50 (sh) S {} 999 0\n", vec!["0"; 18].join(" ")),
    );
    let r = root.to_str().unwrap();
    let out = udamon(dir.path(), &["features", "--root", r]);
    let s = text(&out.stdout);
    assert_eq!(
        s.matches("was left by udamon pid 50, which died").count(),
        2,
        "{s}"
    );
    let out = udamon(dir.path(), &["cleanup", "--root", r]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("removed the 2 kdamonds of udamon pid 50"),
        "{}",
        text(&out.stdout)
    );
    let read = |p: &str| fs::read_to_string(root.join(p)).unwrap();
    assert_eq!(read(&format!("{k}/nr_kdamonds")), "0");
    assert_eq!(read(&format!("{k}/1/state")), "off");
    assert!(!root.join("run/udamon/kdamonds.claim").exists());
    assert!(!root.join("run/udamon/kdamond-1.claim").exists());
    assert!(!root
        .join("sys/kernel/tracing/instances/udamon-50-1")
        .exists());
    // another udamon's (pid 501) stays
    assert!(root
        .join("sys/kernel/tracing/instances/udamon-501")
        .exists());
}

/// DAMON's modules run kdamonds outside the sysfs tree: `features` names
/// them, with their thread and how to disable them.
#[test]
fn features_names_damon_modules() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    write(&root, "sys/module/damon_stat/parameters/enabled", "Y\n");
    write(
        &root,
        "sys/module/damon_stat/parameters/kdamond_pid",
        "55\n",
    );
    write(&root, "sys/module/damon_reclaim/parameters/enabled", "N\n");
    write(
        &root,
        "sys/module/damon_reclaim/parameters/kdamond_pid",
        "-1\n",
    );
    let r = root.to_str().unwrap();
    let out = udamon(dir.path(), &["features", "--root", r]);
    let s = text(&out.stdout);
    assert!(s.contains("DAMON_STAT is enabled (kdamond pid 55)"), "{s}");
    assert!(
        s.contains("echo N > /sys/module/damon_stat/parameters/enabled"),
        "{s}"
    );
    assert!(s.contains("DAMON_RECLAIM is present, disabled"), "{s}");
    let out = udamon(dir.path(), &["features", "--root", r, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["damon_modules"][1]["kdamond_pid"], 55, "{v}");
    // While it runs, it holds kernel DAMON: --ops kdamond names it.
    let pid = PID.to_string();
    let out = udamon(
        dir.path(),
        &["record", "--ops", "kdamond", "--pid", &pid, "--root", r],
    );
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(
        err.contains("DAMON_STAT is enabled and holds kernel DAMON (echo N > "),
        "{err}"
    );
    assert_eq!(v["damon_modules"][0]["enabled"], false, "{v}");
}

/// A fake tree's pid names no process of this machine: an action there is
/// never sent to the machine's process of that pid (no pidfd is opened, and
/// the run says so) .
#[test]
fn actions_under_a_fake_root_never_reach_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fake_machine(&root);
    fs::write(dir.path().join("prcl.txt"), "4K max 0 0 1s max pageout\n").unwrap();
    let r = root.to_str().unwrap();
    let pid = PID.to_string();
    let out = udamon(
        dir.path(),
        &[
            "apply",
            "prcl.txt",
            "--ops",
            "softdirty",
            "--pid",
            &pid,
            "--root",
            r,
            "--duration",
            "3s",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("no pidfd (a fake /proc tree"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schemes"][0]["sz_applied"], 0, "{v}");
}
