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

use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};

/// One `damon_aggregated` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggregatedEvent {
    /// The ftrace timestamp in microseconds, when the line has one.
    pub time_us: Option<u64>,
    /// The thread that emitted it (ftrace's `comm-PID` column), when the
    /// line has one: the kdamond, so events of other kdamonds can be told
    /// apart from ours.
    pub pid: Option<u32>,
    pub target_id: u64,
    pub nr_regions: u32,
    pub region: RegionSnapshot,
}

/// Parses one line; `None` for lines of other events or malformed ones.
/// Old kernels (before about 5.17) print no age: it reads as 0.
pub fn parse_aggregated(line: &str) -> Option<AggregatedEvent> {
    let at = line.find("target_id=")?;
    let (head, body) = line.split_at(at);
    let time_us = head
        .split_whitespace()
        .filter_map(|w| w.strip_suffix(':'))
        .find_map(|w| {
            let (s, us) = w.split_once('.')?;
            Some(s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?)
        });
    // ftrace's first column is `comm-PID` (`kdamond.0-1234`).
    let pid = head
        .split_whitespace()
        .next()
        .and_then(|w| w.rsplit_once('-'))
        .and_then(|(_, p)| p.parse().ok());
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
        }
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
        let idx = match self.ids.iter().position(|&i| i == ev.target_id) {
            Some(i) => i,
            None => {
                self.ids.push(ev.target_id);
                self.ids.len() - 1
            }
        };
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
        // A region below the last one starts a new aggregation: an event
        // was lost (ring buffer overrun); drop the partial list.
        if t.regions.last().is_some_and(|r| ev.region.start < r.end) {
            t.regions.clear();
        }
        t.regions.push(ev.region);
        let complete = t.regions.len() >= ev.nr_regions as usize;
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
        let now = ev.time_us.unwrap_or(self.last_end_us + self.aggr_us);
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

/// A private tracefs instance with `damon:damon_aggregated` enabled,
/// read without blocking. Dropping it disables the event and removes the
/// instance.
#[derive(Debug)]
pub struct TraceSession {
    instance: PathBuf,
    /// Closed before the instance is removed: tracefs refuses to remove an
    /// instance with an open file (EBUSY).
    pipe: Option<File>,
    partial: String,
}

impl TraceSession {
    /// Creates `instances/udamon-PID` under tracefs and enables the event.
    pub fn open(root: &Path) -> io::Result<Self> {
        let tracefs = tracefs_dir(root).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no tracefs at {} (mount it: mount -t tracefs nodev /sys/kernel/tracing)",
                    root.join("sys/kernel/tracing").display()
                ),
            )
        })?;
        let instance = tracefs.join(format!("instances/udamon-{}", std::process::id()));
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
            let pipe = OpenOptions::new()
                .read(true)
                .custom_flags(libc_o_nonblock())
                .open(instance.join("trace_pipe"))?;
            Ok(pipe)
        })();
        match session {
            Ok(pipe) => Ok(Self {
                instance,
                pipe: Some(pipe),
                partial: String::new(),
            }),
            Err(e) => {
                let _ = fs::remove_dir(&instance);
                Err(e)
            }
        }
    }

    /// The complete lines available now (none when the pipe is empty).
    pub fn read_lines(&mut self) -> io::Result<Vec<String>> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut out = Vec::new();
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(out);
        };
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.partial.push_str(&String::from_utf8_lossy(&buf[..n]));
                    while let Some(i) = self.partial.find('\n') {
                        let line: String = self.partial.drain(..=i).collect();
                        out.push(line.trim_end().to_string());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    pub fn instance(&self) -> &Path {
        &self.instance
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        self.pipe = None;
        let _ = fs::write(
            self.instance.join("events/damon/damon_aggregated/enable"),
            "0",
        );
        let _ = fs::remove_dir(&self.instance);
    }
}

/// `O_NONBLOCK` on Linux (every architecture udamon builds for).
const fn libc_o_nonblock() -> i32 {
    0o4000
}

#[cfg(test)]
mod tests {
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
    }
}
