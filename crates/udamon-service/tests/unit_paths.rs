//! The systemd unit lets the service write every kernel file it writes.
//!
//! `ProtectKernelTunables=` and `ProtectSystem=strict` make /sys and /proc/sys
//! read-only; each sysfs tree the service writes needs a `ReadWritePaths=`
//! line, or the write fails only in production. This test lists every
//! /proc and /sys path literal in the non-test code of the crates the
//! service runs (service, session, kdamon, proc): each must be classified
//! here as written or read-only, so a new path cannot land unclassified,
//! and each written one must be writable under the unit.

use std::path::{Path, PathBuf};

/// Kernel paths the service writes (as the code spells their start), with
/// what writes them. `proc/{pid}/...` files are not under /proc/sys and
/// stay writable under the unit.
const WRITTEN: &[(&str, &str)] = &[
    ("sys/kernel/mm/damon", "kernel DAMON's sysfs (kdamon)"),
    ("sys/kernel/tracing", "the trace instance (kdamon trace.rs)"),
    (
        "sys/kernel/debug/tracing",
        "the trace instance on older kernels",
    ),
    (
        "sys/kernel/mm/page_idle",
        "the idle page bitmap (proc idle.rs)",
    ),
    (
        "sys/kernel/mm/numa/demotion_enabled",
        "the tiering backstop (service job.rs)",
    ),
    ("proc/{pid}/clear_refs", "soft-dirty's reset (proc ops.rs)"),
];

/// Kernel paths only read.
const READ: &[&str] = &[
    "proc/{pid}",
    "proc/7",
    "proc/7/pagemap",
    "proc/pressure/memory",
    "proc/vmstat",
    "proc/meminfo",
    "proc/kpageflags",
    "proc/iomem",
    "proc/sys/kernel/numa_balancing",
    "proc/{pid}/status",
    "proc/{pid}/stat",
    "proc/{pid}/pagemap",
    "proc/{pid}/maps",
    "proc/{pid}/exe",
    "proc/{pid}/comm",
    "proc/{pid}/cmdline",
    "/proc/self/status",
    "/proc/self/fd/",
    "sys/devices/system/node",
    "sys/devices/system/memory/block_size_bytes",
    "sys/devices/virtual/memory_tiering",
    "/sys/devices/virtual/memory_tiering",
    "sys/module/{m}/parameters",
    // DAMON_STAT, read at each scrape (kdamon damon_stat.rs): never written.
    "sys/module/damon_stat/parameters",
    "/sys/fs/cgroup/",
    "/sys/fs/cgroup",
    "sys/fs/cgroup",
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `"sys/..."`, `"/sys/..."`, `"proc/..."` and `"/proc/..."` literal
/// in the code of `src/` before its tests, with where it is.
fn literals() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for c in [
        "udamon-service",
        "udamon-session",
        "udamon-kdamon",
        "udamon-proc",
    ] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(crates_dir().join(c).join("src"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (n, line) in code.lines().enumerate() {
                let t = line.trim_start();
                if t.starts_with("//") {
                    continue;
                }
                for part in line.split('"').skip(1).step_by(2) {
                    let p = part.strip_prefix('/').unwrap_or(part);
                    if p.starts_with("sys/") || p.starts_with("proc/") {
                        out.push((part.to_string(), format!("{}:{}", f.display(), n + 1)));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_kernel_path_in_the_code_is_classified() {
    let lits = literals();
    assert!(lits.len() > 20, "the scan found too little: {lits:?}");
    let mut unknown = Vec::new();
    for (lit, at) in &lits {
        let written = WRITTEN.iter().any(|(w, _)| lit.starts_with(w));
        let read = READ.iter().any(|r| lit.starts_with(r));
        if !written && !read {
            unknown.push(format!("{lit} ({at})"));
        }
    }
    assert!(
        unknown.is_empty(),
        "kernel paths in the code that this test does not know: say whether the service \
         writes them (WRITTEN, and check the unit) or only reads them (READ):\n{}",
        unknown.join("\n")
    );
    // Every written path is still in the code (a stale list checks nothing).
    for (w, what) in WRITTEN {
        assert!(
            lits.iter().any(|(l, _)| l.starts_with(w)),
            "{w} ({what}) no longer appears in the code: update WRITTEN"
        );
    }
}

#[test]
fn the_unit_lets_the_service_write_every_path_it_writes() {
    let unit = std::fs::read_to_string(crates_dir().join("../packaging/udamon.service")).unwrap();
    let writable: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("ReadWritePaths="))
        .flat_map(str::split_whitespace)
        .map(|p| p.trim_start_matches(['-', '+']))
        .collect();
    assert!(unit.contains("ProtectKernelTunables=yes"), "the premise");
    for (w, what) in WRITTEN {
        if w.starts_with("proc/{pid}") {
            // Per-process files: ProtectKernelTunables covers /proc/sys and
            // friends, not /proc/PID.
            continue;
        }
        let abs = format!("/{w}");
        assert!(
            writable
                .iter()
                .any(|r| Path::new(&abs).starts_with(Path::new(r))),
            "{abs} ({what}) is written by the service but no ReadWritePaths= of the unit \
             covers it: {writable:?}"
        );
    }
}
