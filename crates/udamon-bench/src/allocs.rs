//! `udamon bench --only allocs`: what allocation sampling (`record
//! --alloc-sites`) costs a malloc-heavy real program, side by side with
//! Debian's heaptrack on the same program and input. The program is
//! `sqlite3` building a million-row table in memory and an index on it;
//! each way runs three times, interleaved, and the median is kept.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::Sink;

/// The workload: inserts with random keys and blobs, an index, a scan.
const SQL: &str = "create table t(id integer primary key, k text, v blob); \
    with recursive c(i) as (select 1 union all select i+1 from c where i < ROWS) \
    insert into t select i, hex(randomblob(16)), randomblob(100) from c; \
    create index ik on t(k); select count(*) from t where k like 'A%';";

#[derive(Serialize, Debug)]
pub struct AllocsBench {
    pub program: String,
    pub rows: u64,
    /// Median wall seconds: plain, with udamon's sampler, with heaptrack
    /// (when installed).
    pub plain_s: f64,
    pub udamon_s: f64,
    pub heaptrack_s: Option<f64>,
    /// Over plain, minus one.
    pub udamon_overhead: f64,
    pub heaptrack_overhead: Option<f64>,
    /// The sampler's side file and heaptrack's output, bytes.
    pub side_file_bytes: u64,
    pub heaptrack_bytes: Option<u64>,
    /// Allocations the side file holds.
    pub samples: usize,
}

fn found(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd`, its output discarded, and returns its wall time.
fn timed(mut cmd: Command, what: &str) -> Result<f64> {
    let t = Instant::now();
    let st = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {what}"))?;
    if !st.success() {
        return Err(Error::msg(format!("{what} failed: {st}")));
    }
    Ok(t.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn dir_bytes(dir: &Path, prefix: &str) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The comparison; `None` (with a note) where sqlite3 is not installed.
pub fn bench(quick: bool, sink: &mut dyn Sink) -> Result<Option<AllocsBench>> {
    if !found("sqlite3") {
        sink.note("allocs: sqlite3 is not installed (apt install sqlite3): nothing to measure");
        return Ok(None);
    }
    let rows: u64 = if quick { 200_000 } else { 1_000_000 };
    let sql = SQL.replace("ROWS", &rows.to_string());
    let dir = tempfile::Builder::new()
        .prefix("udamon-bench-allocs-")
        .tempdir()
        .context("cannot make a scratch directory")?;
    let lib = udamon_preload::install(dir.path()).map_err(|e| Error::msg(e.to_string()))?;
    let heaptrack = found("heaptrack");
    sink.line("");
    sink.line(&format!(
        "allocation sampling (record --alloc-sites) on sqlite3 building {rows} rows and an index, against heaptrack: median of 3"
    ));
    let (mut plain, mut ours, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    let mut samples = 0;
    let mut side_file_bytes = 0;
    let mut heaptrack_bytes = None;
    for round in 0..3 {
        let sqlite = || {
            let mut c = Command::new("sqlite3");
            c.args([":memory:", &sql]);
            c
        };
        plain.push(timed(sqlite(), "sqlite3")?);
        let out = dir.path().join(format!("run{round}.allocs"));
        let mut c = sqlite();
        c.envs(udamon_preload::env(
            &lib,
            Some(&out),
            &udamon_preload::Options::default(),
        ));
        ours.push(timed(c, "sqlite3 with the sampler")?);
        let files = udamon_preload::SideFile::paths(&out).map_err(|e| Error::msg(e.to_string()))?;
        side_file_bytes = dir_bytes(dir.path(), &format!("run{round}.allocs."));
        samples = files
            .iter()
            .filter_map(|f| udamon_preload::read(f).ok())
            .map(|f| f.allocations.len())
            .sum();
        if heaptrack {
            let ht = dir.path().join(format!("ht{round}"));
            let mut c = Command::new("heaptrack");
            c.arg("-o").arg(&ht).arg("sqlite3").args([":memory:", &sql]);
            theirs.push(timed(c, "heaptrack sqlite3")?);
            heaptrack_bytes = Some(dir_bytes(dir.path(), &format!("ht{round}")));
        }
    }
    let (p, u) = (median(plain), median(ours));
    let h = (!theirs.is_empty()).then(|| median(theirs));
    let r = AllocsBench {
        program: "sqlite3".into(),
        rows,
        plain_s: p,
        udamon_s: u,
        heaptrack_s: h,
        udamon_overhead: u / p - 1.0,
        heaptrack_overhead: h.map(|h| h / p - 1.0),
        side_file_bytes,
        heaptrack_bytes,
        samples,
    };
    sink.line(&format!(
        "  plain {:.2} s; udamon's sampler {:.2} s ({:+.1}%, {} samples, side file {} KiB); heaptrack {}",
        r.plain_s,
        r.udamon_s,
        r.udamon_overhead * 100.0,
        r.samples,
        r.side_file_bytes / 1024,
        match (r.heaptrack_s, r.heaptrack_overhead, r.heaptrack_bytes) {
            (Some(s), Some(o), Some(b)) => format!("{s:.2} s ({:+.1}%, output {} KiB)", o * 100.0, b / 1024),
            _ => "not installed".into(),
        }
    ));
    Ok(Some(r))
}
