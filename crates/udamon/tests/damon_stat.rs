//! `udamon damon-stat`, DAMON_STAT in `udamon features`, and the bench of
//! its scrape, on fake /sys trees (the hidden `--root` flag). Nothing here
//! reads or writes the machine's own /sys: every tree is a temp dir, and
//! each test proves the command wrote nothing into it.

use std::fs;
use std::path::Path;

mod common;
use common::{snapshot_tree, text, udamon, write};

const PARAMS: &str = "sys/module/damon_stat/parameters";

/// A 7.2+ module: every file; p0..p2 accessed (hot for 300, 200, 100 ms),
/// then pN idle for N * 100 - 300 ms.
fn module(root: &Path, enabled: &str) {
    write(root, "proc/sys/kernel/osrelease", "7.2.0-test\n");
    let idle: Vec<String> = (0..101i64).map(|i| (i * 100 - 300).to_string()).collect();
    for (f, v) in [
        ("enabled", format!("{enabled}\n")),
        ("estimated_memory_bandwidth", "524288000\n".into()),
        ("memory_idle_ms_percentiles", idle.join(",") + "\n"),
        ("aggr_interval_us", "200000\n".into()),
        ("kdamond_pid", "4711\n".into()),
    ] {
        write(root, &format!("{PARAMS}/{f}"), &v);
    }
}

/// Runs `udamon ARGS --root ROOT`, proving the tree unchanged after.
fn run_on(root: &Path, args: &[&str]) -> std::process::Output {
    let before = snapshot_tree(root);
    let mut a = args.to_vec();
    a.extend(["--root", root.to_str().unwrap()]);
    let out = udamon(root, &a);
    assert_eq!(snapshot_tree(root), before, "{args:?} changed the tree");
    out
}

#[test]
fn an_enabled_module_is_shown_for_people_and_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    module(root, "Y");
    let out = run_on(root, &["damon-stat"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    for want in [
        "DAMON_STAT: enabled, kdamond pid 4711 (udamon only reads it",
        "estimated memory bandwidth: 500.0 MiB/s\n",
        "aggregation interval: 200 ms\n",
        "pN is how long N% of memory (by size) has at most been idle",
        "  p0    hot for 300 ms (accessed)\n",
        "  p1    hot for 200 ms (accessed)\n",
        "  p5    idle 200 ms\n",
        "  p50   idle 4.7 s\n",
        "  p100  idle 9.7 s\n",
    ] {
        assert!(s.contains(want), "{want:?} missing from\n{s}");
    }
    assert_eq!(
        s.lines().filter(|l| l.starts_with("  p")).count(),
        11,
        "{s}"
    );
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));

    let out = run_on(root, &["damon-stat", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["enabled"], true);
    assert_eq!(v["estimated_memory_bandwidth"], 524_288_000);
    assert_eq!(v["idle_ms_percentiles"].as_array().unwrap().len(), 101);
    assert_eq!(v["idle_ms_percentiles"][0], -300);
    assert_eq!(v["idle_ms_percentiles"][100], 9700);
    assert_eq!(v["aggr_interval_us"], 200_000);
    assert_eq!(v["kdamond_pid"], 4711);
}

#[test]
fn a_6_17_module_without_the_later_files_says_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    module(root, "Y");
    fs::remove_file(root.join(PARAMS).join("aggr_interval_us")).unwrap();
    fs::remove_file(root.join(PARAMS).join("kdamond_pid")).unwrap();
    let out = run_on(root, &["damon-stat"]);
    let s = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        s.contains("kdamond pid not reported (Linux 7.2+ reports it)"),
        "{s}"
    );
    assert!(
        s.contains("aggregation interval: not reported (Linux 6.18+ reports it)"),
        "{s}"
    );
    let out = run_on(root, &["damon-stat", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["kdamond_pid"].is_null() && v["aggr_interval_us"].is_null());
}

#[test]
fn a_disabled_module_is_left_alone_and_says_how_an_admin_enables_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    module(root, "N");
    let out = run_on(root, &["damon-stat"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("DAMON_STAT is present but disabled"), "{s}");
    assert!(s.contains("udamon never enables it"), "{s}");
    assert!(
        s.contains("echo Y > /sys/module/damon_stat/parameters/enabled"),
        "{s}"
    );
    let out = run_on(root, &["damon-stat", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["enabled"], false);
}

#[test]
fn no_module_is_a_missing_capability_and_garbage_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "proc/sys/kernel/osrelease", "6.12.0-test\n");
    for args in [&["damon-stat"][..], &["damon-stat", "--json"]] {
        let out = run_on(root, args);
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        let e = text(&out.stderr);
        assert!(
            e.contains("DAMON_STAT is not available here")
                && e.contains("DAMON_STAT needs Linux 6.17+ with CONFIG_DAMON_STAT")
                && e.contains("this kernel is 6.12.0-test"),
            "{e}"
        );
        assert!(out.stdout.is_empty());
    }
    module(root, "Y");
    write(
        root,
        &format!("{PARAMS}/memory_idle_ms_percentiles"),
        "1,2,x\n",
    );
    let out = run_on(root, &["damon-stat"]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(
        e.contains("memory_idle_ms_percentiles holds \"1,2,x\", expected 101 comma-separated"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn features_lists_damon_stat_and_every_kernel_feature_by_version() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    module(root, "Y");
    let c = "sys/kernel/mm/damon/admin/kdamonds/0/contexts/0";
    write(
        root,
        "sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds",
        "1\n",
    );
    write(root, "sys/kernel/mm/damon/admin/kdamonds/0/state", "off\n");
    write(root, &format!("{c}/schemes/0/dests/nr_dests"), "0\n");
    write(root, &format!("{c}/addr_unit"), "1\n");
    let out = run_on(root, &["features"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    for want in [
        "damon_stat ",
        "/sys/module/damon_stat/parameters present: enabled, kdamond pid 4711",
        "kernel DAMON features by the Linux version that added them",
        "  6.14 allow (filter file): yes (by kernel version 7.2 (no filter to inspect))",
        "  6.17 dests (weighted multi-node migration): yes \
         (kdamonds/0/contexts/0/schemes/0/dests present)",
        "  7.2  pause (context file): no (kdamonds/0/contexts/0 has no pause: needs Linux 7.2+)",
        "  7.2  kdamond_pid (DAMON_STAT parameter): yes",
    ] {
        assert!(s.contains(want), "{want:?} missing from\n{s}");
    }
    let out = run_on(root, &["features", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let k = v["kernel_features"].as_array().unwrap();
    let pause = k.iter().find(|k| k["name"] == "pause").unwrap();
    assert_eq!(pause["since"], "7.2");
    assert_eq!(pause["available"], false);
    assert_eq!(
        pause["detail"],
        "kdamonds/0/contexts/0 has no pause: needs Linux 7.2+"
    );
    let row = v["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "damon_stat")
        .unwrap();
    assert_eq!(row["available"], true);
}

/// docs/service.md's figure: `udamon bench --only damon-stat`.
#[test]
fn the_bench_measures_the_scrape_part() {
    let dir = tempfile::tempdir().unwrap();
    let out = udamon(
        dir.path(),
        &["bench", "--only", "damon-stat", "--quick", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["damon_stat"]["scrapes"], 2000);
    assert!(v["damon_stat"]["median_us"].as_f64().unwrap() > 0.0);
    let out = udamon(dir.path(), &["bench", "--only", "damon-stat", "--quick"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("DAMON_STAT's part of one metrics scrape"),
        "{}",
        text(&out.stdout)
    );
}
