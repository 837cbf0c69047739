//! `udamon topology` and the tiering preset on fake /sys trees (the hidden
//! `--root` flag): nodes, tiers, pairs, warnings, and tiering schemes that
//! every other command reads.

use std::fs;
use std::path::Path;

mod common;
use common::{text, udamon, write as w};

/// Node 0 with CPUs and 2 GiB at 1 MiB, node 1 CPU-less with 2 GiB at
/// 4 GiB, in the memory tiers given.
fn machine(root: &Path, tiers: &[(u32, &str)]) {
    w(
        root,
        "proc/iomem",
        "00100000-7fffffff : System RAM\n100000000-17fffffff : System RAM\n",
    );
    w(
        root,
        "sys/devices/system/memory/block_size_bytes",
        "8000000\n",
    );
    w(root, "sys/devices/system/node/online", "0-1\n");
    w(root, "sys/devices/system/node/node0/cpulist", "0-1\n");
    w(root, "sys/devices/system/node/node1/cpulist", "\n");
    w(root, "sys/devices/system/node/node0/distance", "10 20\n");
    w(root, "sys/devices/system/node/node1/distance", "20 10\n");
    for n in 0..2 {
        w(
            root,
            &format!("sys/devices/system/node/node{n}/meminfo"),
            &format!("Node {n} MemTotal: 2097152 kB\nNode {n} MemFree: 1048576 kB\n"),
        );
    }
    for b in 0..16 {
        w(
            root,
            &format!("sys/devices/system/node/node0/memory{b}/online"),
            "1",
        );
        w(
            root,
            &format!("sys/devices/system/node/node1/memory{}/online", b + 32),
            "1",
        );
    }
    for (t, nodes) in tiers {
        w(
            root,
            &format!("sys/devices/virtual/memory_tiering/memory_tier{t}/nodelist"),
            nodes,
        );
    }
    w(root, "sys/kernel/mm/numa/demotion_enabled", "true\n");
    w(root, "proc/sys/kernel/numa_balancing", "2\n");
}

#[test]
fn topology_shows_nodes_tiers_pairs_and_writes_tiering_schemes() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    machine(&root, &[(4, "0\n"), (22, "1\n")]);
    let r = root.to_str().unwrap();
    let out = udamon(d.path(), &["topology", "--root", r]);
    let o = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for want in [
        "node 0: cpus 0-1, 2.0 GiB (1.0 GiB used, 1.0 GiB free), tier 4",
        "node 1: no cpus, 2.0 GiB",
        "physical: 0x100000000-0x180000000",
        "memory tiers (fastest first): 4 (nodes 0), 22 (nodes 1)",
        "demotion_enabled: on; numa_balancing: 2 (tiering mode)",
        "tiering pairs (from memory tiers): node 0 over node 1",
    ] {
        assert!(o.contains(want), "{want} missing from\n{o}");
    }
    assert!(!o.contains("warning"), "{o}");
    let out = udamon(d.path(), &["topology", "--root", r, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pairs"][0]["upper"], 0);
    assert_eq!(v["nodes"][1]["tier"], 22);

    let file = d.path().join("tiering.toml");
    let f = file.to_str().unwrap();
    let out = udamon(d.path(), &["topology", "--root", r, "--tiering-schemes", f]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let check = udamon(d.path(), &["schemes", "check", f]);
    let c = text(&check.stdout);
    assert!(check.status.success(), "{}", text(&check.stderr));
    assert!(c.contains("migrate_cold"), "{c}");
    assert!(c.contains("migrate_hot"), "{c}");

    // One tier: a warning, and the CPU-less node still pairs.
    let one = d.path().join("one");
    machine(&one, &[(4, "0-1\n")]);
    let out = udamon(d.path(), &["topology", "--root", one.to_str().unwrap()]);
    let o = text(&out.stdout);
    assert!(o.contains("warning: every node is in memory tier 4"), "{o}");
    assert!(o.contains("node 0 over node 1"), "{o}");
}

#[test]
fn the_tiering_preset_is_made_from_the_topology() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    machine(&root, &[(4, "0\n"), (22, "1\n")]);
    let cfg = d.path().join("u.toml");
    fs::write(
        &cfg,
        "[[jobs]]\nname = \"tier\"\ntarget = \"paddr\"\nops = \"kdamond\"\nschemes = [{ preset = \"tiering\" }]\n",
    )
    .unwrap();
    let out = udamon(
        d.path(),
        &[
            "run",
            "--check",
            "--json",
            cfg.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
    let job = &v["jobs"][0];
    let s = job["schemes"].as_array().unwrap();
    assert_eq!(s.len(), 2, "{s:?}");
    assert!(s[0].as_str().unwrap().contains("migrate_cold"), "{s:?}");
    assert!(s[0].as_str().unwrap().contains("(preset tiering)"), "{s:?}");
    assert_eq!(job["attrs"]["intervals_goal"]["access_bp"], 400);
    // A simulated target has no host topology to tier.
    fs::write(
        &cfg,
        format!(
            "[[jobs]]\nname = \"t\"\ntarget = {{ sim = \"{}/../../examples/specs/demo.toml\" }}\nschemes = [{{ preset = \"tiering\" }}]\n",
            env!("CARGO_MANIFEST_DIR")
        ),
    )
    .unwrap();
    let out = udamon(d.path(), &["run", "--check", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("preset tiering reads this machine's NUMA topology"));
}
