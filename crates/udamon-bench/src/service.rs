//! `udamon bench --only service`: the service's soak. Three simulated jobs
//! at 1,000 regions run as fast as they go for 24 simulated hours (2 with
//! --quick) inside this process; its resident set after the first
//! simulated hour and at the end, and the latency of 1,000 scrapes of the
//! metrics endpoint while the jobs run.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::Sink;

#[derive(Serialize, Debug)]
pub struct ServiceSoak {
    pub jobs: usize,
    pub simulated_hours: f64,
    pub wall_s: f64,
    pub avg_regions_per_job: f64,
    pub rss_after_first_hour_bytes: u64,
    pub rss_end_bytes: u64,
    /// End over first hour: 1.0 is no growth.
    pub rss_growth: f64,
    pub scrapes: usize,
    pub scrape_bytes: usize,
    pub scrape_median_ms: f64,
    pub scrape_p99_ms: f64,
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    udamon_proc::proc_field(&s, "VmRSS:").unwrap_or(0) * 1024
}

fn scrape(port: u16) -> Result<usize> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(out.len())
}

/// The soak: 24 simulated hours (2 when `quick`), a note every 10 s of it
/// (`Sink::note`), then the scrapes.
pub fn soak(quick: bool, sink: &mut dyn Sink) -> Result<ServiceSoak> {
    let hours: u64 = if quick { 2 } else { 24 };
    let dir = tempfile_dir()?;
    let (config, port) = write_config(&dir)?;
    udamon_service::log::set_level(udamon_service::log::Level::Warn);
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (config.clone(), Arc::clone(&stop));
    let service = std::thread::spawn(move || {
        udamon_service::run(
            &c,
            &udamon_service::Options {
                root: "/".into(),
                ..Default::default()
            },
            s,
        )
    });
    let socket = dir.join("ctl.sock");
    let started = Instant::now();
    let (regions, rss_hour) = wait_for_hours(&service, &socket, hours, started, sink)?;
    let wall_s = started.elapsed().as_secs_f64();
    let rss_end = rss_bytes();
    let (lat, bytes) = scrape_latencies(port)?;
    stop.store(true, Ordering::SeqCst);
    match service.join() {
        Ok(r) => r?,
        Err(_) => return Err(Error::msg("the service thread panicked")),
    }
    let _ = std::fs::remove_dir_all(&dir);
    let rss_hour = rss_hour.unwrap_or(rss_end);
    let r = ServiceSoak {
        jobs: 3,
        simulated_hours: hours as f64,
        wall_s,
        avg_regions_per_job: regions,
        rss_after_first_hour_bytes: rss_hour,
        rss_end_bytes: rss_end,
        rss_growth: rss_end as f64 / rss_hour.max(1) as f64,
        scrapes: lat.len(),
        scrape_bytes: bytes,
        scrape_median_ms: lat[lat.len() / 2],
        scrape_p99_ms: lat[lat.len() * 99 / 100],
    };
    print_soak(&r, hours, sink);
    Ok(r)
}

/// Writes the demo spec and the soak's service config (three jobs, a free
/// port for the metrics endpoint) into `dir`: the config's path and port.
fn write_config(dir: &Path) -> Result<(PathBuf, u16)> {
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, udamon_sim::DEMO_SPEC)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut cfg = format!(
        "listen = \"127.0.0.1:{port}\"\nsocket = \"{}\"\n",
        dir.join("ctl.sock").display()
    );
    // Long intervals keep 24 simulated hours affordable; the region count,
    // which the service's memory and scrapes scale with, is the point.
    for j in 0..3 {
        cfg.push_str(&format!(
            r#"
[[jobs]]
name = "soak{j}"
target = {{ sim = "spec.toml", speed = "max", seed = {j} }}
schemes = [{{ inline = "4K max 0 0 10m max pageout" }}, {{ preset = "ethp" }}]
[jobs.attrs]
sample = "100ms"
aggr = "2s"
update = "10s"
min_regions = 1000
max_regions = 1000
"#
        ));
    }
    let config = dir.join("soak.toml");
    std::fs::write(&config, cfg)?;
    Ok((config, port))
}

/// Polls the service's status on `socket` until every job has monitored
/// `hours` simulated hours, with a note every 10 s: the mean region count
/// of a job, and this process's RSS once every job passed the first hour.
fn wait_for_hours<T>(
    service: &std::thread::JoinHandle<T>,
    socket: &Path,
    hours: u64,
    started: Instant,
    sink: &mut dyn Sink,
) -> Result<(f64, Option<u64>)> {
    let hour_us = 3_600_000_000u64;
    let mut rss_hour = None;
    let mut regions: f64;
    let mut last_print = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        if service.is_finished() {
            return Err(Error::msg("the service ended before the soak did"));
        }
        let Ok(st) = udamon_service::ctl_request(socket, "status") else {
            continue;
        };
        let workers: Vec<&serde_json::Value> = st["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|j| {
                j["workers"]
                    .as_object()
                    .into_iter()
                    .flat_map(|w| w.values())
            })
            .collect();
        if workers.len() < 3 {
            continue;
        }
        let min_us = workers
            .iter()
            .map(|w| w["monitored_us"].as_u64().unwrap_or(0))
            .min()
            .unwrap_or(0);
        regions = workers
            .iter()
            .map(|w| w["regions"].as_f64().unwrap_or(0.0))
            .sum::<f64>()
            / workers.len() as f64;
        if rss_hour.is_none() && min_us >= hour_us {
            rss_hour = Some(rss_bytes());
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            last_print = Instant::now();
            sink.note(&format!(
                "bench service: {:.1} of {hours} simulated hours, {:.0} s",
                min_us as f64 / hour_us as f64,
                started.elapsed().as_secs_f64()
            ));
        }
        if min_us >= hours * hour_us {
            return Ok((regions, rss_hour));
        }
    }
}

/// 1,000 scrapes of the metrics endpoint on `port`: their latencies in
/// milliseconds, sorted, and the size of the last.
fn scrape_latencies(port: u16) -> Result<(Vec<f64>, usize)> {
    let mut lat = Vec::with_capacity(1000);
    let mut bytes = 0;
    for _ in 0..1000 {
        let t = Instant::now();
        bytes = scrape(port).context("scraping the service")?;
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    lat.sort_by(f64::total_cmp);
    Ok((lat, bytes))
}

fn print_soak(r: &ServiceSoak, hours: u64, sink: &mut dyn Sink) {
    sink.line(&format!(
        "service soak: 3 simulated jobs at {:.0} regions for {hours} simulated hours in {:.0} s",
        r.avg_regions_per_job, r.wall_s
    ));
    sink.line(&format!(
        "  RSS {} after the first hour, {} at the end ({:+.1}%)",
        udamon_report::fmt_bytes(r.rss_after_first_hour_bytes),
        udamon_report::fmt_bytes(r.rss_end_bytes),
        (r.rss_growth - 1.0) * 100.0
    ));
    sink.line(&format!(
        "  {} scrapes of {}: median {:.2} ms, p99 {:.2} ms",
        r.scrapes,
        udamon_report::fmt_bytes(r.scrape_bytes as u64),
        r.scrape_median_ms,
        r.scrape_p99_ms
    ));
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("udamon-bench-service-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    Ok(d)
}
