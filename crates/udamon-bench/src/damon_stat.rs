//! `udamon bench --only damon-stat`: what DAMON_STAT adds to one scrape of
//! the service's metrics endpoint: its five parameter files read (under a
//! fake tree in a temporary directory, as a 7.2+ kernel writes them) and
//! encoded, as `udamon_service::metrics::render_damon_stat` does at each
//! scrape. The goal is well under a millisecond a scrape. Reading the real
//! sysfs files costs the kernel's formatting too (the percentiles are an
//! array of 101 longs), which a temporary file does not.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::Sink;

/// Where the module's parameters are, under a root.
const PARAMETERS: &str = "sys/module/damon_stat/parameters";

#[derive(Serialize, Debug)]
pub struct DamonStatBench {
    pub scrapes: usize,
    pub median_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    /// Bytes of exposition text the part adds to a scrape.
    pub text_bytes: usize,
}

/// Writes DAMON_STAT's files under `root`: enabled, a bandwidth, 101
/// percentiles (the hottest tenth negative, as 6.18+ writes them), the
/// aggregation interval and the kdamond's pid.
fn fake_module(root: &Path) -> Result<()> {
    let dir = root.join(PARAMETERS);
    std::fs::create_dir_all(&dir)?;
    let idle: Vec<String> = (0..101i64)
        .map(|i| match i {
            ..10 => -(10 - i) * 100,
            _ => i * i * 123,
        })
        .map(|v| v.to_string())
        .collect();
    for (name, text) in [
        ("enabled", "Y\n".to_string()),
        ("estimated_memory_bandwidth", "2147483648\n".into()),
        ("memory_idle_ms_percentiles", idle.join(",") + "\n"),
        ("aggr_interval_us", "100000\n".into()),
        ("kdamond_pid", "4242\n".into()),
    ] {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

pub fn bench(quick: bool, sink: &mut dyn Sink) -> Result<DamonStatBench> {
    let dir = tempfile::tempdir()?;
    fake_module(dir.path())?;
    let scrape = || udamon_service::metrics::render_damon_stat(dir.path());
    let text = scrape();
    let want = "udamon_damon_stat_memory_idle_seconds{percentile=\"50\"} 307.5";
    if !text.contains(want) || text.contains("scrape_error 1") {
        return Err(Error::msg(format!(
            "the DAMON_STAT part of a scrape lacks {want}:\n{text}"
        )));
    }
    for _ in 0..100 {
        std::hint::black_box(scrape());
    }
    let n = if quick { 2_000 } else { 20_000 };
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        std::hint::black_box(scrape());
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let mean = times.iter().sum::<f64>() / n as f64;
    times.sort_by(f64::total_cmp);
    let r = DamonStatBench {
        scrapes: n,
        median_us: percentile(&times, 0.5),
        p99_us: percentile(&times, 0.99),
        mean_us: mean,
        text_bytes: text.len(),
    };
    sink.line("");
    sink.line(
        "DAMON_STAT's part of one metrics scrape (5 files read and encoded; fake tree in a \
         temporary directory; goal: under 1 ms)",
    );
    sink.line("  scrapes   median      p99     mean   text");
    sink.line(&format!(
        "  {:>7}  {:>5.1} us  {:>5.1} us  {:>5.1} us  {} B",
        r.scrapes, r.median_us, r.p99_us, r.mean_us, r.text_bytes
    ));
    Ok(r)
}
