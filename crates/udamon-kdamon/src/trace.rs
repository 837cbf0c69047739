//! The `damon:damon_aggregated` tracepoint, read straight from tracefs (no
//! perf, no trace-cmd): a parser for its lines, e.g.
//! `kdamond.0-1234 [002] .... 5678.901234: damon_aggregated: target_id=0 nr_regions=3 4096-8192: 5 2`,
//! an [`Assembler`] that groups events into snapshots, and a
//! [`TraceSession`] that owns a private tracefs instance (its own ring
//! buffer, so other tracing users are not disturbed) for as long as it lives.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use memchr::memmem::Finder;
use udamon_core::schemes::DamosStats;
use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};

pub use crate::event::{AggregatedEvent, SchemeStatEvent};

/// Parses one line; `None` for lines of other events or malformed ones.
/// Old kernels (before about 5.17) print no age: it reads as 0.
pub fn parse_aggregated(line: &str) -> Option<AggregatedEvent> {
    static MARK: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("target_id="));
    let at = MARK.find(line.as_bytes())?;
    let (head, body) = line.split_at(at);
    let time_us = head
        .split_whitespace()
        .filter_map(|w| w.strip_suffix(':'))
        .find_map(|w| {
            let (s, us) = w.split_once('.')?;
            // Checked: a forged time past 2^64 us reads as no time, not a panic.
            s.parse::<u64>()
                .ok()?
                .checked_mul(1_000_000)?
                .checked_add(us.parse::<u64>().ok()?)
        });
    let pid = line_pid(head);
    let mut it = body.split_whitespace();
    let target_id = it.next()?.strip_prefix("target_id=")?.parse().ok()?;
    let nr_regions = it.next()?.strip_prefix("nr_regions=")?.parse().ok()?;
    let (s, e) = it.next()?.strip_suffix(':')?.split_once('-')?;
    let nr_accesses = it.next()?.parse().ok()?;
    let age = match it.next() {
        Some(a) => a.parse().ok()?,
        None => 0,
    };
    Some(AggregatedEvent {
        time_us,
        pid,
        target_id,
        nr_regions,
        region: RegionSnapshot {
            start: s.parse().ok()?,
            end: e.parse().ok()?,
            nr_accesses,
            age,
        },
    })
}

/// ftrace's first column, `comm-PID` (`kdamond.0-1234`): the PID.
fn line_pid(head: &str) -> Option<u32> {
    head.split_whitespace()
        .next()
        .and_then(|w| w.rsplit_once('-'))
        .and_then(|(_, p)| p.parse().ok())
}

/// The tracepoint of a scheme's statistics after each of its apply
/// intervals (Linux 7.0+).
pub const SCHEME_STAT_EVENT: &str = "damos_stat_after_apply_interval";

/// Parses a `damos_stat_after_apply_interval` line; `None` for other
/// lines or malformed ones (every field is required).
pub fn parse_scheme_stat(line: &str) -> Option<SchemeStatEvent> {
    // Asked of every line the trace holds: the event's name is looked for
    // with a searcher made once, not at each line.
    static MARK: LazyLock<(Finder<'static>, usize)> = LazyLock::new(|| {
        let mark = format!("{SCHEME_STAT_EVENT}: ");
        (Finder::new(&mark).into_owned(), mark.len())
    });
    let at = MARK.0.find(line.as_bytes())?;
    let pid = line_pid(&line[..at]);
    let mut f = std::collections::HashMap::new();
    for w in line[at + MARK.1..].split_whitespace() {
        let (k, v) = w.split_once('=')?;
        f.insert(k, v.parse::<u64>().ok()?);
    }
    let get = |k: &str| f.get(k).copied();
    Some(SchemeStatEvent {
        pid,
        ctx_idx: u32::try_from(get("ctx_idx")?).ok()?,
        scheme_idx: u32::try_from(get("scheme_idx")?).ok()?,
        stats: DamosStats {
            nr_tried: get("nr_tried")?,
            sz_tried: get("sz_tried")?,
            nr_applied: get("nr_applied")?,
            sz_applied: get("sz_applied")?,
            sz_ops_filter_passed: get("sz_ops_filter_passed")?,
            qt_exceeds: get("qt_exceeds")?,
            nr_snapshots: get("nr_snapshots")?,
        },
    })
}

/// Groups `damon_aggregated` events into snapshots: kdamond emits, at each
/// aggregation, `nr_regions` events per target, target after target.
#[derive(Debug)]
pub struct Assembler {
    nr_targets: usize,
    sample_us: u64,
    aggr_us: u64,
    current: Vec<TargetSnapshot>,
    /// Trace time of the end of the first window, minus one window.
    origin_us: Option<u64>,
    last_end_us: u64,
    /// Target ids in the order the kernel first printed them.
    ids: Vec<u64>,
    /// Only events of this kdamond thread count (a trace instance gets the
    /// events of every kdamond: another tool's, or a DAMON module's).
    kdamond_pid: Option<u32>,
    /// Targets are named by their position in the context (`target_id`
    /// is an index, Linux 5.18+), not in the order first seen.
    positional: bool,
}

impl Assembler {
    pub fn new(nr_targets: usize, sample_us: u64, aggr_us: u64) -> Self {
        Self {
            nr_targets: nr_targets.max(1),
            sample_us,
            aggr_us,
            current: Vec::new(),
            origin_us: None,
            last_end_us: 0,
            ids: Vec::new(),
            kdamond_pid: None,
            positional: false,
        }
    }

    /// An assembler for a context whose target list changes: each event's
    /// `target_id` is its target's position, and a snapshot is complete
    /// when the last target's regions are (or, when the last target printed
    /// nothing, when the next window begins).
    pub fn positional(nr_targets: usize, sample_us: u64, aggr_us: u64) -> Self {
        Self {
            positional: true,
            ..Self::new(nr_targets, sample_us, aggr_us)
        }
    }

    /// The context's target list changed (an online commit): `nr_targets`
    /// targets and these intervals from now on. The window being gathered
    /// is dropped; the clock goes on, so snapshot times keep counting from
    /// the first window.
    pub fn retarget(&mut self, nr_targets: usize, sample_us: u64, aggr_us: u64) {
        self.nr_targets = nr_targets.max(1);
        self.sample_us = sample_us;
        self.aggr_us = aggr_us;
        self.current.clear();
        self.ids.clear();
    }

    /// From now on, drops events that name another thread than `pid`
    /// (events without a thread column are kept).
    pub fn only_from(&mut self, pid: Option<u32>) {
        self.kdamond_pid = pid;
    }

    /// Takes one event; returns a snapshot when it completes one.
    pub fn push(&mut self, ev: AggregatedEvent) -> Option<Snapshot> {
        if let (Some(ours), Some(theirs)) = (self.kdamond_pid, ev.pid) {
            if ours != theirs {
                return None;
            }
        }
        if self.positional {
            return self.push_positional(ev);
        }
        let idx = match self.ids.iter().position(|&i| i == ev.target_id) {
            Some(i) => i,
            None => {
                self.ids.push(ev.target_id);
                self.ids.len() - 1
            }
        };
        let complete = self.add(idx, &ev);
        if !complete
            || self
                .current
                .iter()
                .filter(|t| !t.regions.is_empty())
                .count()
                < self.nr_targets
        {
            return None;
        }
        self.end_window(ev.time_us)
    }

    /// [`push`](Self::push) for a context whose targets are named by their
    /// position.
    fn push_positional(&mut self, ev: AggregatedEvent) -> Option<Snapshot> {
        let idx = ev.target_id as usize;
        if idx >= self.nr_targets {
            return None;
        }
        let last_idx = self.current.iter().map(|t| t.target_idx as usize).max();
        // A target before the last one printed: a new window began, and
        // the targets after the last one printed have no regions.
        let mut out = None;
        if last_idx.is_some_and(|l| idx < l) {
            out = self.end_window(ev.time_us);
        }
        let complete = self.add(idx, &ev);
        if out.is_none() && complete && idx + 1 == self.nr_targets {
            out = self.end_window(ev.time_us);
        }
        out
    }

    /// Adds `ev`'s region to target `idx` of the window being gathered;
    /// returns whether the target's list is complete. A region below the
    /// last one starts a new aggregation: an event was lost (ring buffer
    /// overrun), and the partial list is dropped.
    fn add(&mut self, idx: usize, ev: &AggregatedEvent) -> bool {
        let t = match self
            .current
            .iter_mut()
            .position(|t| t.target_idx as usize == idx)
        {
            Some(p) => &mut self.current[p],
            None => {
                self.current.push(TargetSnapshot {
                    target_idx: idx as u32,
                    regions: Vec::new(),
                });
                self.current.last_mut().expect("pushed")
            }
        };
        if t.regions.last().is_some_and(|r| ev.region.start < r.end) {
            t.regions.clear();
        }
        t.regions.push(ev.region);
        t.regions.len() >= ev.nr_regions as usize
    }

    /// The window's snapshot, of the targets gathered so far, ending at
    /// trace time `time_us` (else one aggregation after the last).
    fn end_window(&mut self, time_us: Option<u64>) -> Option<Snapshot> {
        if self.current.is_empty() {
            return None;
        }
        let now = time_us.unwrap_or(self.last_end_us + self.aggr_us);
        let origin = *self
            .origin_us
            .get_or_insert(now.saturating_sub(self.aggr_us));
        let end_us = now.saturating_sub(origin).max(self.last_end_us);
        let mut targets = std::mem::take(&mut self.current);
        targets.sort_by_key(|t| t.target_idx);
        let snap = Snapshot {
            start_us: self.last_end_us,
            end_us,
            sample_us: self.sample_us,
            aggr_us: self.aggr_us,
            targets,
        };
        self.last_end_us = end_us;
        Some(snap)
    }
}

/// Where tracefs is mounted under `root`, if anywhere.
pub fn tracefs_dir(root: &Path) -> Option<PathBuf> {
    ["sys/kernel/tracing", "sys/kernel/debug/tracing"]
        .iter()
        .map(|p| root.join(p))
        .find(|p| p.join("instances").is_dir())
}

/// A private tracefs instance with `damon:damon_aggregated` enabled (and
/// `damon:damos_stat_after_apply_interval` where the kernel has it), read
/// without blocking. Dropping it disables the events and removes the
/// instance.
#[derive(Debug)]
pub struct TraceSession {
    instance: PathBuf,
    /// The schemes' statistics event is enabled too (Linux 7.0+).
    scheme_stats: bool,
    /// Closed before the instance is removed: tracefs refuses to remove an
    /// instance with an open file (EBUSY).
    pipe: Option<File>,
    /// What was read and not yet handed out: the start of a line.
    partial: Vec<u8>,
    buf: Vec<u8>,
    /// The binary pages of each CPU's buffer, where the kernel describes
    /// them (then `pipe` is not opened): see [`crate::raw`].
    raw: Option<Raw>,
    /// Why the text pipe is read instead.
    text_why: Option<String>,
}

/// The binary form of the trace: each CPU's `trace_pipe_raw`, and the
/// layout of its pages and events.
#[derive(Debug)]
struct Raw {
    layout: crate::raw::Layout,
    cpus: Vec<File>,
    page: crate::raw::Page,
}

/// One event of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    Aggregated(AggregatedEvent),
    SchemeStat(SchemeStatEvent),
}

/// The environment variable that keeps udamon on the text pipe (`0`), to
/// compare.
pub const RAW_ENV: &str = "UDAMON_TRACE_RAW";

/// Bytes read from the trace pipe at a time.
const READ_CHUNK: usize = 64 * 1024;
/// A trace_pipe read returns at most a page (less a byte); one of less
/// than half a page found the pipe (nearly) empty.
const DRAINED_BELOW: usize = 2048;

impl TraceSession {
    /// Creates `instances/udamon-PID` under tracefs and enables the event.
    pub fn open(root: &Path) -> io::Result<Self> {
        Self::open_for(root, 0)
    }

    /// [`open`](Self::open) for the session of kdamond `index` of a set:
    /// each session of a process has its own instance, `udamon-PID` for
    /// kdamond 0 and `udamon-PID-INDEX` for the others.
    pub fn open_for(root: &Path, index: usize) -> io::Result<Self> {
        let tracefs = tracefs_dir(root).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no tracefs at {} (mount it: mount -t tracefs nodev /sys/kernel/tracing)",
                    root.join("sys/kernel/tracing").display()
                ),
            )
        })?;
        let name = match index {
            0 => format!("udamon-{}", std::process::id()),
            i => format!("udamon-{}-{i}", std::process::id()),
        };
        let instance = tracefs.join("instances").join(name);
        fs::create_dir(&instance)?;
        let session = (|| {
            let enable = instance.join("events/damon/damon_aggregated/enable");
            if !enable.exists() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "{} is missing (needs CONFIG_DAMON and tracing events)",
                        enable.display()
                    ),
                ));
            }
            fs::write(&enable, "1")?;
            // Each scheme's statistics after each apply interval, where
            // the kernel has the event: read from here, they need no
            // sysfs command.
            let stats = instance.join(format!("events/damon/{SCHEME_STAT_EVENT}/enable"));
            let scheme_stats = stats.exists() && fs::write(&stats, "1").is_ok();
            // Wake a reader waiting in poll(2) on any event, not once the
            // instance's buffer is half full (the default); kernels before
            // 5.0 have no such file and wake on any event anyway.
            let _ = fs::write(instance.join("buffer_percent"), "0");
            let text_why = match open_raw(&instance, scheme_stats) {
                Ok(raw) => return Ok((None, Ok(raw), scheme_stats)),
                Err(why) => why,
            };
            let pipe = OpenOptions::new()
                .read(true)
                .custom_flags(libc_o_nonblock())
                .open(instance.join("trace_pipe"))?;
            Ok((Some(pipe), Err(text_why), scheme_stats))
        })();
        match session {
            Ok((pipe, raw, scheme_stats)) => Ok(Self {
                instance,
                scheme_stats,
                pipe,
                partial: Vec::new(),
                buf: vec![0; raw.as_ref().map_or(READ_CHUNK, Raw::buf_len)],
                text_why: raw.as_ref().err().cloned(),
                raw: raw.ok(),
            }),
            Err(e) => {
                let _ = fs::remove_dir(&instance);
                Err(e)
            }
        }
    }

    /// Whether the trace is read in its binary form (`trace_pipe_raw`).
    pub fn is_raw(&self) -> bool {
        self.raw.is_some()
    }

    /// Why the trace is read as text, when it is.
    pub fn text_why(&self) -> Option<&str> {
        self.text_why.as_deref()
    }

    /// Calls `f` with each event available now, in the order of their
    /// times: from the binary pages of every CPU's buffer, else parsed
    /// from the text pipe's lines (other lines are left out).
    pub fn for_each_event(&mut self, mut f: impl FnMut(TraceEvent)) -> io::Result<()> {
        let Some(raw) = self.raw.as_mut() else {
            return self.for_each_line(|line| {
                if let Some(ev) = parse_scheme_stat(line) {
                    f(TraceEvent::SchemeStat(ev));
                } else if let Some(ev) = parse_aggregated(line) {
                    f(TraceEvent::Aggregated(ev));
                }
            });
        };
        raw.page.events.clear();
        for cpu in &mut raw.cpus {
            loop {
                match cpu.read(&mut self.buf) {
                    Ok(0) => break,
                    // One read returns one sub-buffer; a plain file (a
                    // test's) returns several at once.
                    Ok(n) => {
                        for page in self.buf[..n].chunks(raw.layout.page_len().max(64)) {
                            crate::raw::parse_page(page, &raw.layout, &mut raw.page);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        // Each CPU's events are in order; a kdamond that moved between
        // CPUs left its events on both.
        raw.page.events.sort_by_key(|(t, _)| *t);
        for &(t, ev) in &raw.page.events {
            f(match ev {
                crate::raw::RawEvent::Aggregated(mut a) => {
                    a.time_us = Some(t / 1000);
                    TraceEvent::Aggregated(a)
                }
                crate::raw::RawEvent::SchemeStat(s) => TraceEvent::SchemeStat(s),
            });
        }
        Ok(())
    }

    /// Calls `f` with each complete line available now (without its line
    /// end), in order; returns at once when the pipe is empty. Lines are
    /// handed out from the read buffer, not copied one by one. The pipe
    /// hands out at most a page per read; a read of less than half a page
    /// took all there was, and the pipe is not read again only to learn
    /// that it is empty (the next [`wait`](Self::wait) wakes at once if
    /// more came meanwhile).
    pub fn for_each_line(&mut self, mut f: impl FnMut(&str)) -> io::Result<()> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(());
        };
        loop {
            match pipe.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.partial.extend_from_slice(&self.buf[..n]);
                    let mut done = 0;
                    for nl in memchr::memchr_iter(b'\n', &self.partial) {
                        let line = &self.partial[done..nl];
                        f(String::from_utf8_lossy(line).trim_end());
                        done = nl + 1;
                    }
                    self.partial.drain(..done);
                    if n < DRAINED_BELOW {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The complete lines available now (none when the pipe is empty).
    pub fn read_lines(&mut self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        self.for_each_line(|l| out.push(l.to_string()))?;
        Ok(out)
    }

    /// Waits until the pipe has something to read or `timeout` passed
    /// (poll(2); a signal ends the wait early too). Returns whether there
    /// may be something to read (false only when the time ran out).
    pub fn wait(&self, timeout: std::time::Duration) -> io::Result<bool> {
        use std::os::fd::AsRawFd;
        let files: Vec<&File> = match &self.raw {
            Some(r) => r.cpus.iter().collect(),
            None => self.pipe.iter().collect(),
        };
        if files.is_empty() {
            std::thread::sleep(timeout);
            return Ok(false);
        }
        let mut pfds: Vec<libc::pollfd> = files
            .iter()
            .map(|f| libc::pollfd {
                fd: f.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: valid pollfds, as many as given, for the duration of the
        // call.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(rc != 0)
    }

    pub fn instance(&self) -> &Path {
        &self.instance
    }

    /// Whether the schemes' statistics event is enabled (Linux 7.0+).
    pub fn has_scheme_stats(&self) -> bool {
        self.scheme_stats
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        self.pipe = None;
        self.raw = None;
        let _ = fs::write(
            self.instance.join("events/damon/damon_aggregated/enable"),
            "0",
        );
        if self.scheme_stats {
            let _ = fs::write(
                self.instance
                    .join(format!("events/damon/{SCHEME_STAT_EVENT}/enable")),
                "0",
            );
        }
        let _ = fs::remove_dir(&self.instance);
    }
}

impl Raw {
    /// Bytes a read asks for: a whole sub-buffer (a page, unless
    /// `buffer_subbuf_size_kb` says more), which one read returns.
    fn buf_len(&self) -> usize {
        self.layout.page_len().max(READ_CHUNK)
    }
}

/// The binary form of `instance`'s trace, if the kernel describes every
/// field udamon reads and each CPU's pipe opens; else why not, and the
/// reader goes to the text pipe (as it does with `UDAMON_TRACE_RAW=0`).
fn open_raw(instance: &Path, scheme_stats: bool) -> Result<Raw, String> {
    use crate::raw::{EventFormat, Layout, PageFormat};
    if std::env::var(RAW_ENV).is_ok_and(|v| v == "0") {
        return Err(format!("{RAW_ENV}=0"));
    }
    let read = |p: &str| read_whole(&instance.join(p)).map_err(|e| format!("cannot read {p}: {e}"));
    let page = PageFormat::parse(&read("events/header_page")?)
        .ok_or("events/header_page has no layout udamon knows")?;
    let format = |e: &str| -> Result<EventFormat, String> {
        let p = format!("events/damon/{e}/format");
        EventFormat::parse(&read(&p)?).ok_or(format!("{p} has no ID or a malformed field"))
    };
    let aggregated = format("damon_aggregated")?;
    let scheme_stat = if scheme_stats {
        Some(format(SCHEME_STAT_EVENT)?)
    } else {
        None
    };
    let sub_kb = read("buffer_subbuf_size_kb")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok());
    let layout = Layout::new(
        page,
        aggregated,
        scheme_stat,
        sub_kb.map_or(4096, |k| k.saturating_mul(1024)),
    );
    if !layout.usable() {
        return Err("the events' formats lack a field udamon reads".into());
    }
    let mut dirs: Vec<(usize, PathBuf)> = fs::read_dir(instance.join("per_cpu"))
        .map_err(|e| format!("cannot list per_cpu: {e}"))?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    dirs.sort();
    let cpus: Vec<File> = dirs
        .iter()
        .map(|(_, d)| {
            let p = d.join("trace_pipe_raw");
            OpenOptions::new()
                .read(true)
                .custom_flags(libc_o_nonblock())
                .open(&p)
                .map_err(|e| format!("cannot open {}: {e}", p.display()))
        })
        .collect::<Result<_, _>>()?;
    if cpus.is_empty() {
        return Err("per_cpu has no CPU".into());
    }
    Ok(Raw {
        layout,
        cpus,
        page: crate::raw::Page::default(),
    })
}

/// A tracefs file's text, read with large reads: `header_page` gives its
/// text to a first read only, and `std::fs::read_to_string` starts with a
/// probe of 32 bytes (it read as `"\tfield: u64 timestamp;\toffset:0;"`
/// and nothing more on Linux 7.3).
fn read_whole(path: &Path) -> io::Result<String> {
    let mut f = File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if out.len() > 1 << 20 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "longer than 1 MiB",
            ));
        }
    }
    String::from_utf8(out).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// `O_NONBLOCK` on Linux (every architecture udamon builds for).
const fn libc_o_nonblock() -> i32 {
    0o4000
}

#[cfg(test)]
mod tests {
    #[test]
    fn scheme_stat_lines_parse() {
        use super::*;
        let l = "   kdamond.0-812   [001] .....  12.345678: damos_stat_after_apply_interval: ctx_idx=0 scheme_idx=1 nr_tried=3 sz_tried=12288 nr_applied=1 sz_applied=4096 sz_ops_filter_passed=7 qt_exceeds=2 nr_snapshots=5";
        let ev = parse_scheme_stat(l).unwrap();
        assert_eq!((ev.pid, ev.ctx_idx, ev.scheme_idx), (Some(812), 0, 1));
        assert_eq!(
            ev.stats,
            DamosStats {
                nr_tried: 3,
                sz_tried: 12288,
                nr_applied: 1,
                sz_applied: 4096,
                sz_ops_filter_passed: 7,
                qt_exceeds: 2,
                nr_snapshots: 5,
            }
        );
        // Another event, a missing field, garbage: none.
        assert!(parse_scheme_stat("kdamond.0-1 [0] 1.0: damon_aggregated: target_id=0").is_none());
        assert!(parse_scheme_stat(&l.replace(" nr_snapshots=5", "")).is_none());
        assert!(parse_scheme_stat(&l.replace("nr_tried=3", "nr_tried=x")).is_none());
        assert!(parse_scheme_stat(&l.replace("scheme_idx=1", "scheme_idx=99999999999")).is_none());
    }

    use super::*;

    fn ev(t: u64, target: u64, n: u32, s: u64, e: u64, acc: u32) -> AggregatedEvent {
        AggregatedEvent {
            pid: None,
            time_us: Some(t),
            target_id: target,
            nr_regions: n,
            region: RegionSnapshot {
                start: s,
                end: e,
                nr_accesses: acc,
                age: 0,
            },
        }
    }

    #[test]
    fn assembler_groups_one_aggregation_per_snapshot() {
        let mut a = Assembler::new(1, 5_000, 100_000);
        assert!(a.push(ev(5_000_000, 7, 2, 0, 10, 1)).is_none());
        let s = a.push(ev(5_000_001, 7, 2, 10, 20, 3)).unwrap();
        assert_eq!((s.start_us, s.end_us), (0, 100_000));
        assert_eq!(s.targets.len(), 1);
        assert_eq!(s.targets[0].regions.len(), 2);
        // Next aggregation, with three regions now.
        assert!(a.push(ev(5_100_000, 7, 3, 0, 5, 0)).is_none());
        assert!(a.push(ev(5_100_000, 7, 3, 5, 10, 0)).is_none());
        let s = a.push(ev(5_100_002, 7, 3, 10, 20, 9)).unwrap();
        assert_eq!((s.start_us, s.end_us), (100_000, 200_001));
        assert_eq!(s.targets[0].regions[2].nr_accesses, 9);
    }

    #[test]
    fn assembler_waits_for_every_target_and_drops_partial_lists() {
        let mut a = Assembler::new(2, 5_000, 100_000);
        assert!(a.push(ev(1_000_000, 3, 1, 0, 10, 0)).is_none());
        // Target 3's list restarts (a lost event): the partial one goes.
        assert!(a.push(ev(1_000_000, 9, 2, 50, 60, 0)).is_none());
        assert!(a.push(ev(1_000_000, 9, 2, 40, 45, 0)).is_none());
        let s = a.push(ev(1_000_000, 9, 2, 45, 50, 1)).unwrap();
        assert_eq!(s.targets.len(), 2);
        assert_eq!(s.targets[1].regions.len(), 2);
        assert_eq!(s.targets[1].regions[0].start, 40);
    }

    /// A program's context: targets named by position, a snapshot complete
    /// with the last target's regions, or at the next window when the last
    /// targets printed nothing; a changed target list keeps the clock.
    #[test]
    fn positional_targets_and_a_changed_list() {
        let mut a = Assembler::positional(3, 5_000, 100_000);
        assert!(a.push(ev(1_000_000, 0, 1, 0, 10, 1)).is_none());
        assert!(a.push(ev(1_000_000, 1, 1, 0, 10, 1)).is_none());
        let s = a.push(ev(1_000_001, 2, 1, 0, 10, 1)).unwrap();
        let idx: Vec<u32> = s.targets.iter().map(|t| t.target_idx).collect();
        assert_eq!(idx, vec![0, 1, 2]);
        // Target 2 has no regions yet: the next window's first event ends
        // this one.
        assert!(a.push(ev(1_100_000, 0, 1, 0, 10, 0)).is_none());
        assert!(a.push(ev(1_100_000, 1, 1, 0, 10, 0)).is_none());
        let s = a.push(ev(1_200_000, 0, 1, 0, 10, 0)).unwrap();
        assert_eq!(s.targets.len(), 2);
        assert_eq!(s.end_us, 299_999);
        // An id beyond the list is not ours.
        assert!(a.push(ev(1_200_000, 7, 1, 0, 10, 0)).is_none());
        // Two targets now: times go on from the last window.
        a.retarget(2, 5_000, 100_000);
        assert!(a.push(ev(1_300_000, 0, 1, 0, 10, 0)).is_none());
        let s = a.push(ev(1_300_000, 1, 1, 0, 10, 0)).unwrap();
        assert_eq!((s.start_us, s.end_us), (299_999, 399_999));
    }

    /// Another kdamond's events (DAMON_STAT's, another tool's) land in the
    /// same trace instance, with target ids that collide with ours: they
    /// are dropped, and our snapshots hold our regions only.
    #[test]
    fn events_of_other_kdamonds_are_dropped() {
        let line = |pid: u32, s: u64, e: u64| {
            format!(
                "kdamond.0-{pid} [000] ....  5.000000: damon_aggregated: target_id=0 nr_regions=2 {s}-{e}: 1 0"
            )
        };
        let mut a = Assembler::new(1, 5_000, 100_000);
        a.only_from(Some(100));
        let mut snaps = Vec::new();
        for l in [
            line(100, 0, 10),
            line(77, 5000, 6000),
            line(77, 6000, 7000),
            line(100, 10, 20),
        ] {
            snaps.extend(a.push(parse_aggregated(&l).unwrap()));
        }
        assert_eq!(snaps.len(), 1);
        let r = &snaps[0].targets[0].regions;
        assert_eq!((r[0].start, r[1].end, r.len()), (0, 20, 2));
    }

    /// Lines come out whole and in order, however the reads cut them, and
    /// a line not yet ended waits for the rest.
    #[test]
    fn lines_are_whole_across_reads() {
        let root = tempfile::tempdir().unwrap();
        let tracing = root.path().join("sys/kernel/tracing");
        let inst = tracing.join(format!("instances/udamon-{}", std::process::id()));
        fs::create_dir_all(tracing.join("instances")).unwrap();
        // A fake instance with the files tracefs would give it; its
        // trace_pipe is a plain file, read in chunks like the real one.
        let staging = root.path().join("staging");
        fs::create_dir_all(staging.join("events/damon/damon_aggregated")).unwrap();
        fs::write(staging.join("events/damon/damon_aggregated/enable"), "0").unwrap();
        let mut text = String::new();
        let mut want = Vec::new();
        for i in 0..3000u64 {
            let l = format!(
                "kdamond.0-77 [000] ..... {i}.000001: damon_aggregated: target_id=0 nr_regions=3000 {}-{}: 1 2",
                i << 12,
                (i + 1) << 12
            );
            text.push_str(&l);
            text.push('\n');
            want.push(l);
        }
        // A last line not yet complete is kept for later.
        text.push_str("kdamond.0-77 [000] ..... 9.0: damon_aggre");
        assert!(text.len() > 2 * READ_CHUNK, "lines must cross read chunks");
        fs::write(staging.join("trace_pipe"), &text).unwrap();
        // open() creates the instance itself (as tracefs wants), so the
        // session is made here the way open() makes it.
        fs::rename(&staging, &inst).unwrap();
        let mut t = TraceSession {
            instance: inst.clone(),
            scheme_stats: false,
            pipe: Some(File::open(inst.join("trace_pipe")).unwrap()),
            partial: Vec::new(),
            buf: vec![0; READ_CHUNK],
            raw: None,
            text_why: None,
        };
        t.wait(std::time::Duration::from_millis(1)).unwrap();
        let mut got = Vec::new();
        t.for_each_line(|l| got.push(l.to_string())).unwrap();
        assert_eq!(got, want);
        assert_eq!(t.partial, b"kdamond.0-77 [000] ..... 9.0: damon_aggre");
        assert_eq!(
            parse_aggregated(&got[2999]).unwrap().region.start,
            2999 << 12
        );
    }

    #[test]
    fn the_binary_pages_of_every_cpu_are_read_in_time_order() {
        use crate::raw::tests::{aggregated_record, page, AGGREGATED, HEADER_PAGE};
        let root = tempfile::tempdir().unwrap();
        let inst = root.path().join("inst");
        fs::create_dir_all(inst.join("events/damon/damon_aggregated")).unwrap();
        fs::write(inst.join("events/header_page"), HEADER_PAGE).unwrap();
        fs::write(
            inst.join("events/damon/damon_aggregated/format"),
            AGGREGATED,
        )
        .unwrap();
        // Without per-CPU pipes: the text pipe.
        assert!(open_raw(&inst, false).unwrap_err().contains("per_cpu"));
        // The kdamond moved from CPU 1 to CPU 0 in the middle of a window:
        // two pages on CPU 1 (its first events), one on CPU 0.
        let r = |s: u64| Some(aggregated_record(77, 0, 3, (s, s + 4096, 1, 2)));
        let cpu1 = [
            page(100, &[(0, r(0x1000))], 0),
            page(200, &[(0, r(0x2000))], 0),
        ]
        .concat();
        let cpu0 = page(300, &[(0, r(0x3000))], 0);
        for (cpu, pages) in [(0, cpu0), (1, cpu1)] {
            let d = inst.join(format!("per_cpu/cpu{cpu}"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("trace_pipe_raw"), pages).unwrap();
        }
        // No scheme-stats format although asked for: the text pipe.
        assert!(open_raw(&inst, true)
            .unwrap_err()
            .contains("damos_stat_after_apply_interval/format"));
        let raw = open_raw(&inst, false).expect("the binary form");
        let mut t = TraceSession {
            instance: inst.clone(),
            scheme_stats: false,
            pipe: None,
            partial: Vec::new(),
            buf: vec![0; raw.buf_len()],
            raw: Some(raw),
            text_why: None,
        };
        assert!(t.is_raw());
        let mut got = Vec::new();
        t.for_each_event(|e| match e {
            TraceEvent::Aggregated(a) => got.push((a.time_us, a.pid, a.region.start)),
            TraceEvent::SchemeStat(_) => unreachable!(),
        })
        .unwrap();
        assert_eq!(
            got,
            vec![
                (Some(0), Some(77), 0x1000),
                (Some(0), Some(77), 0x2000),
                (Some(0), Some(77), 0x3000)
            ]
        );
        // Read once: nothing again.
        let mut again = 0;
        t.for_each_event(|_| again += 1).unwrap();
        assert_eq!(again, 0);
        // An assembler makes the window of them.
        let mut asm = Assembler::new(1, 5_000, 100_000);
        let mut snaps = Vec::new();
        let evs = [
            (0x1000, 1_000_000_000u64),
            (0x2000, 1_000_000_100),
            (0x3000, 1_000_000_200),
        ];
        for (s, t) in evs {
            let ev = AggregatedEvent {
                time_us: Some(t / 1000),
                pid: Some(77),
                target_id: 0,
                nr_regions: 3,
                region: RegionSnapshot {
                    start: s,
                    end: s + 4096,
                    nr_accesses: 1,
                    age: 2,
                },
            };
            snaps.extend(asm.push(ev));
        }
        assert_eq!(snaps.len(), 1);
        assert_eq!(snaps[0].targets[0].regions.len(), 3);
    }

    #[test]
    fn parses_sample_lines() {
        let l = "   kdamond.0-1234  [002] ....  5678.901234: damon_aggregated: target_id=0 nr_regions=3 140737488351232-140737488355328: 5 2";
        let e = parse_aggregated(l).unwrap();
        assert_eq!(e.time_us, Some(5_678_901_234));
        assert_eq!(e.pid, Some(1234));
        assert_eq!((e.target_id, e.nr_regions), (0, 3));
        assert_eq!(
            e.region,
            RegionSnapshot {
                start: 140737488351232,
                end: 140737488355328,
                nr_accesses: 5,
                age: 2
            }
        );
        let old = parse_aggregated("target_id=18446623 nr_regions=12 4096-8192: 0").unwrap();
        assert_eq!(
            (old.target_id, old.region.age, old.time_us),
            (18446623, 0, None)
        );
        assert_eq!(
            parse_aggregated("damos_before_apply: ctx_idx=0 scheme_idx=0"),
            None
        );
        assert_eq!(parse_aggregated("target_id=0 nr_regions=x 1-2: 3 4"), None);
        // A time past 2^64 us is no time (it used to overflow).
        let far = parse_aggregated(
            "k-1 [000] 99999999999999.000000: damon:damon_aggregated: target_id=0 nr_regions=1 1-2: 3 4",
        )
        .unwrap();
        assert_eq!(far.time_us, None);
    }
}
