//! `udamon bench --only lock`: the seeds' out-of-core case study in the
//! simulator (docs/objects.md). For each workload, as a user would: record
//! it (`udamon record --sim`), write its hot objects as mlock schemes
//! within a budget (`udamon hints --schemes --max-bytes`), and run it under
//! a memory limit of 70% of its mapped size (Daptrace's setting: 70% of
//! the working set) without and with them (`udamon apply --sim`). The
//! budget is 60% of the limit, so that the rest of the program has room.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;
use udamon_sim::Workload;

use crate::error::{Context, Error, Result};
use crate::Sink;

pub const SPECS: &[(&str, &str)] = &[
    ("demo", include_str!("../../../examples/specs/demo.toml")),
    ("sweep", include_str!("../../../examples/specs/sweep.toml")),
    ("swap", include_str!("../../../examples/specs/swap.toml")),
    (
        "lock-index",
        include_str!("../../../examples/specs/lock-index.toml"),
    ),
];

/// The memory limit, as a share of the mapped bytes.
pub const LIMIT_SHARE: f64 = 0.7;
/// The hints' budget, as a share of the limit.
pub const BUDGET_SHARE: f64 = 0.6;

#[derive(Serialize, Debug)]
pub struct LockRow {
    pub spec: String,
    pub mapped_bytes: u64,
    pub limit_bytes: u64,
    /// What the hints name, and what the mlock scheme locked.
    pub hinted: Vec<String>,
    pub locked_bytes: u64,
    pub runtime_s: f64,
    pub runtime_locked_s: f64,
    /// Runtime without over runtime with: above 1, locking helped.
    pub speedup: f64,
    pub faults: u64,
    pub faults_locked: u64,
}

/// Runs `udamon ARGS` in `dir` and returns its stdout.
fn udamon_out(udamon: &Path, dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(udamon)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run udamon {}", args[0]))?;
    if !out.status.success() {
        return Err(Error::msg(format!(
            "udamon {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn json(text: &str, what: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| Error::msg(format!("{what} printed no JSON: {e}")))
}

/// One workload's case study.
fn one(udamon: &Path, dir: &Path, name: &str, spec: &str, quick: bool) -> Result<LockRow> {
    let w = Workload::from_toml(spec, name).map_err(|e| Error::msg(e.to_string()))?;
    let mapped = w.mapped_bytes();
    let limit = ((mapped as f64 * LIMIT_SHARE) as u64) & !0xfff;
    let budget = ((limit as f64 * BUDGET_SHARE) as u64) & !0xfff;
    let spec_path = dir.join(format!("{name}.toml"));
    std::fs::write(&spec_path, spec).context("cannot write a spec")?;
    let limited = dir.join(format!("{name}-limited.toml"));
    std::fs::write(
        &limited,
        format!("{spec}\n[machine]\nmemory_limit = {limit}\n"),
    )
    .context("cannot write a spec")?;
    let duration = if quick {
        vec!["--duration", "10s"]
    } else {
        Vec::new()
    };
    let rec = format!("{name}.udr");
    let mut args = vec![
        "record",
        "--sim",
        spec_path.to_str().unwrap_or_default(),
        "-o",
        &rec,
    ];
    args.extend(&duration);
    udamon_out(udamon, dir, &args)?;
    let budget_s = budget.to_string();
    let locks = format!("{name}-locks.toml");
    let h = json(
        &udamon_out(
            udamon,
            dir,
            &[
                "hints",
                &rec,
                "--schemes",
                "--max-bytes",
                &budget_s,
                "-o",
                &locks,
                "--json",
            ],
        )?,
        "udamon hints",
    )?;
    let hinted: Vec<String> = h["objects"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|o| o.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let (runtime_s, runtime_locked_s, faults, faults_locked, locked_bytes) = if hinted.is_empty() {
        // Nothing to lock: both runs are the same.
        let mut args = vec![
            "record",
            "--sim",
            limited.to_str().unwrap_or_default(),
            "-o",
            "plain.udr",
            "--json",
        ];
        args.extend(&duration);
        let r = json(&udamon_out(udamon, dir, &args)?, "udamon record")?;
        let (t, f) = (
            r["runtime_s"].as_f64().unwrap_or(0.0),
            r["faults"].as_u64().unwrap_or(0),
        );
        (t, t, f, f, 0)
    } else {
        let mut args = vec![
            "apply",
            &locks,
            "--sim",
            limited.to_str().unwrap_or_default(),
            "--json",
        ];
        args.extend(&duration);
        let a = json(&udamon_out(udamon, dir, &args)?, "udamon apply")?;
        let (b, s) = (&a["baseline"], &a["with_schemes"]);
        (
            b["runtime_s"].as_f64().unwrap_or(0.0),
            s["runtime_s"].as_f64().unwrap_or(0.0),
            b["faults"].as_u64().unwrap_or(0),
            s["faults"].as_u64().unwrap_or(0),
            s["schemes"][0]["sz_applied"].as_u64().unwrap_or(0),
        )
    };
    Ok(LockRow {
        spec: name.to_string(),
        mapped_bytes: mapped,
        limit_bytes: limit,
        hinted,
        locked_bytes,
        runtime_s,
        runtime_locked_s,
        speedup: if runtime_locked_s > 0.0 {
            runtime_s / runtime_locked_s
        } else {
            0.0
        },
        faults,
        faults_locked,
    })
}

/// The case study over [`SPECS`], a table line per workload.
pub fn table(udamon: &Path, quick: bool, sink: &mut dyn Sink) -> Result<Vec<LockRow>> {
    let dir = tempfile::Builder::new()
        .prefix("udamon-bench-lock-")
        .tempdir()
        .context("cannot make a scratch directory")?;
    sink.line("");
    sink.line(&format!(
        "hot objects locked under a memory limit (the seeds' case study) on the simulator: limit {:.0}% of the mapped size, hints within {:.0}% of the limit",
        LIMIT_SHARE * 100.0,
        BUDGET_SHARE * 100.0
    ));
    sink.line(&format!(
        "{:<12} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8}  hinted",
        "spec", "mapped", "limit", "locked", "runtime", "locked", "speedup"
    ));
    let mut rows = Vec::new();
    for (name, spec) in SPECS {
        let r = one(udamon, dir.path(), name, spec, quick)?;
        let mib = |b: u64| format!("{:.0}M", b as f64 / (1 << 20) as f64);
        sink.line(&format!(
            "{:<12} {:>9} {:>9} {:>9} {:>10.1}s {:>10.1}s {:>7.2}x  {}",
            r.spec,
            mib(r.mapped_bytes),
            mib(r.limit_bytes),
            mib(r.locked_bytes),
            r.runtime_s,
            r.runtime_locked_s,
            r.speedup,
            r.hinted.join(", ")
        ));
        rows.push(r);
    }
    Ok(rows)
}
