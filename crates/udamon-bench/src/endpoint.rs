//! `udamon bench --only endpoint`: the metrics endpoint under a hostile
//! load, on a service run as a child process (one simulated job) with the
//! unit's LimitNOFILE: 1,000 idle connections that sent half a request
//! line, 8 clients scraping meanwhile (latency, failures), the service's
//! threads and resident set before and during; then a service at 64 file
//! descriptors driven into EMFILE, and the time from the descriptors'
//! release to its next answer; and the methods it refuses.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Context, Error, Result};
use crate::Sink;

/// The unit's LimitNOFILE (packaging/udamon.service).
const UNIT_NOFILE: u64 = 8192;
const IDLE: usize = 1000;
const SCRAPERS: usize = 8;
const SCRAPES_EACH: usize = 50;

#[derive(Serialize, Debug)]
pub struct EndpointBench {
    pub idle_connections: usize,
    pub scrapers: usize,
    pub scrapes: usize,
    pub scrapes_failed: usize,
    pub scrape_median_ms: f64,
    pub scrape_p99_ms: f64,
    pub threads_before: u64,
    pub threads_with_idle: u64,
    pub rss_before_bytes: u64,
    pub rss_with_idle_bytes: u64,
    /// Whether a scrape was answered while a service at 64 fds had run
    /// out of them (100 connections held): it should not be.
    pub answered_while_exhausted: bool,
    /// From releasing those descriptors to the service's next answer.
    pub recovery_ms: f64,
    /// Methods other than GET and HEAD answered 405 (of 4 tried).
    pub refused_methods: usize,
}

/// A service child (`udamon run`, the executable at `udamon`): config in
/// `dir`, one simulated job, `nofile` fds.
fn start(udamon: &Path, dir: &Path, port: u16, nofile: u64) -> Result<Child> {
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, udamon_sim::DEMO_SPEC)?;
    let cfg = dir.join(format!("endpoint-{port}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:{port}\"\nsocket = \"{}\"\n[[jobs]]\nname = \"demo\"\n\
             target = {{ sim = \"spec.toml\", speed = 1 }}\n",
            dir.join(format!("ctl-{port}.sock")).display()
        ),
    )?;
    let mut cmd = Command::new(udamon);
    cmd.args(["run", "--log-level", "error"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            let l = libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().context("starting udamon run")?;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if request(port, "GET", Duration::from_secs(2)).is_ok() {
            return Ok(child);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(Error::msg(format!(
        "the service did not answer on port {port} within 30 s"
    )))
}

/// One request; the status code of the answer.
fn request(port: u16, method: &str, timeout: Duration) -> Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(s, "{method} /metrics HTTP/1.0\r\nHost: x\r\n\r\n")?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let head = String::from_utf8_lossy(&out[..out.len().min(16)]).to_string();
    head.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no status line in {head:?}"))
}

/// (threads, resident bytes) of a process.
fn usage(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    (
        udamon_proc::proc_field(&s, "Threads:").unwrap_or(0),
        udamon_proc::proc_field(&s, "VmRSS:").unwrap_or(0) * 1024,
    )
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Raises this process's soft descriptor limit to its hard one (the
/// idle connections are ours too).
fn raise_own_nofile() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

fn stop(mut c: Child) {
    // SAFETY: kill has no memory effects; the child is ours.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if matches!(c.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// The endpoint bench on services run as `udamon run` (the executable at
/// `udamon`); raises this process's descriptor limit to its hard limit.
pub fn bench(udamon: &Path, sink: &mut dyn Sink) -> Result<EndpointBench> {
    raise_own_nofile();
    let dir = std::env::temp_dir().join(format!("udamon-bench-endpoint-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = measure(udamon, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let r = result?;
    sink.line(&format!(
        "endpoint: {} idle connections and {} scrapers, {} scrapes ({} failed): median {:.2} \
             ms, p99 {:.2} ms",
        r.idle_connections,
        r.scrapers,
        r.scrapes,
        r.scrapes_failed,
        r.scrape_median_ms,
        r.scrape_p99_ms
    ));
    sink.line(&format!(
        "  service: {} threads and {} before, {} threads and {} with the idle connections",
        r.threads_before,
        udamon_report::fmt_bytes(r.rss_before_bytes),
        r.threads_with_idle,
        udamon_report::fmt_bytes(r.rss_with_idle_bytes)
    ));
    sink.line(&format!(
        "  out of descriptors (64, {}): answering again {:.0} ms after they were freed; {} of \
             4 other methods refused (405)",
        if r.answered_while_exhausted {
            "still answering"
        } else {
            "not answering"
        },
        r.recovery_ms,
        r.refused_methods
    ));
    Ok(r)
}

fn measure(udamon: &Path, dir: &Path) -> Result<EndpointBench> {
    let port = free_port()?;
    let child = start(udamon, dir, port, UNIT_NOFILE)?;
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(1));
    let (threads_before, rss_before) = usage(pid);
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        let mut s = TcpStream::connect(("127.0.0.1", port)).context("an idle connection")?;
        s.write_all(b"GET /metrics HTTP/1.1\r\n")?;
        idle.push(s);
    }
    let workers: Vec<_> = (0..SCRAPERS)
        .map(|_| {
            std::thread::spawn(move || {
                let mut lat = Vec::new();
                let mut failed = 0;
                for _ in 0..SCRAPES_EACH {
                    let t = Instant::now();
                    match request(port, "GET", Duration::from_secs(10)) {
                        Ok(200) => lat.push(t.elapsed().as_secs_f64() * 1e3),
                        _ => failed += 1,
                    }
                }
                (lat, failed)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut failed = 0;
    for w in workers {
        let (l, f) = w.join().map_err(|_| Error::msg("a scraper panicked"))?;
        lat.extend(l);
        failed += f;
    }
    let (threads_idle, rss_idle) = usage(pid);
    drop(idle);
    let refused_methods = ["POST", "PUT", "DELETE", "PATCH"]
        .iter()
        .filter(|m| request(port, m, Duration::from_secs(5)).ok() == Some(405))
        .count();
    stop(child);
    lat.sort_by(f64::total_cmp);
    let pick = |q: usize| lat.get(lat.len() * q / 100).copied().unwrap_or(f64::NAN);

    // Out of descriptors: a service at 64 fds, 100 connections held.
    let port = free_port()?;
    let child = start(udamon, dir, port, 64)?;
    let held: Vec<TcpStream> = (0..100)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let answered_while_exhausted = request(port, "GET", Duration::from_secs(1)).is_ok();
    drop(held);
    let freed = Instant::now();
    let mut recovery_ms = f64::NAN;
    while freed.elapsed() < Duration::from_secs(30) {
        if request(port, "GET", Duration::from_secs(1)).ok() == Some(200) {
            recovery_ms = freed.elapsed().as_secs_f64() * 1e3;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop(child);
    Ok(EndpointBench {
        idle_connections: IDLE,
        scrapers: SCRAPERS,
        scrapes: lat.len() + failed,
        scrapes_failed: failed,
        scrape_median_ms: pick(50),
        scrape_p99_ms: pick(99),
        threads_before,
        threads_with_idle: threads_idle,
        rss_before_bytes: rss_before,
        rss_with_idle_bytes: rss_idle,
        answered_while_exhausted,
        recovery_ms,
        refused_methods,
    })
}
