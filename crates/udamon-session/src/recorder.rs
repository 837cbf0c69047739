//! [`Recorder`]: a session's events into a record file, and [`LiveSummary`],
//! what a whole run did.

use std::time::{Duration, Instant};

use serde::Serialize;
use udamon_core::Snapshot;
use udamon_record::{TargetEvent, Writer};

use crate::live::{Event, OpsChoice, Session};
use crate::schemes::SchemeReport;
use crate::Error;

/// How often a live record is flushed (a frame at least this often).
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// The writer a recorder writes through.
pub type FileWriter = Writer<std::io::BufWriter<std::fs::File>>;

/// Snapshot windows far longer than the aggregation interval.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gaps {
    pub count: u64,
    pub longest_us: u64,
}

impl Gaps {
    /// A window at least three aggregation intervals and one second longer
    /// than it should be is a gap (slow windows from a busy machine, about
    /// twice the interval, are not); returns the record entry for it.
    pub fn check(&mut self, s: &Snapshot, aggr_us: u64) -> Option<serde_json::Value> {
        let len = s.end_us.saturating_sub(s.start_us);
        if len < 3 * aggr_us || len < aggr_us + 1_000_000 {
            return None;
        }
        self.count += 1;
        self.longest_us = self.longest_us.max(len);
        Some(serde_json::json!({
            "start_us": s.start_us,
            "end_us": s.end_us,
            "expected_us": aggr_us,
        }))
    }
}

/// udamon's CPU time in a live run, for its summary.
#[derive(Debug, Clone, Copy)]
pub struct CpuSpent {
    /// CPU seconds (user + system) so far.
    pub total_s: f64,
    /// The wall seconds they were spent in.
    pub wall_s: f64,
    /// The part of `total_s` spent before monitoring started.
    pub setup_s: f64,
}

/// What a live run did, for its summary line, `--json` and the record's
/// `summary` entry.
#[derive(Debug, Serialize)]
pub struct LiveSummary {
    pub output: Option<String>,
    pub pid: u32,
    pub command: String,
    pub ops: OpsChoice,
    /// Why `--ops auto` picked this path.
    pub chosen_because: String,
    pub access: &'static str,
    /// Where snapshots came from.
    pub source: String,
    pub kernel: String,
    pub monitored_s: f64,
    pub snapshots: u64,
    pub avg_nr_regions: f64,
    /// udamon's own CPU time (user + system) over its whole run, set-up
    /// included, and per second of that run's wall time.
    pub udamon_cpu_s: f64,
    pub udamon_cpu_s_per_s: f64,
    /// The part of `udamon_cpu_s` spent before monitoring started (probing
    /// the machine, opening the target, starting a kdamond).
    pub udamon_setup_cpu_s: f64,
    /// udamon's CPU time per second of monitoring, set-up left out: what
    /// monitoring costs as it goes on.
    pub udamon_monitoring_cpu_s_per_s: f64,
    /// The kdamond thread's CPU time per second (kernel DAMON only).
    pub kdamond_cpu_s_per_s: Option<f64>,
    /// The soft-dirty path only: passes of `clear_refs` over the target,
    /// and the reset period in windows (0: before every sample) at the end,
    /// with its smallest and largest (`--softdirty-reset auto` moves it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub softdirty_resets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub softdirty_reset_period: Option<ResetPeriod>,
    /// The target's resident set at the start and the end (kB, VmRSS).
    pub rss_start_kb: Option<u64>,
    pub rss_end_kb: Option<u64>,
    pub swap_end_kb: Option<u64>,
    /// Why monitoring ended: "duration", "target exited", "target replaced"
    /// (its pid names another process now), "target exec'd" (with
    /// --stop-on-exec), "interrupted".
    pub ended_by: String,
    /// Execs of the target seen (our engine; kernel DAMON follows an exec
    /// by itself): each is an `exec` entry in the record.
    pub execs: u64,
    /// A program's processes (`--pid` given more than once, `--children`,
    /// `--cgroup`, `-- CMD`): how many at the start, joined and left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<Processes>,
    /// Windows much longer than the aggregation interval (the kernel's
    /// aggregations stalled, or udamon could not keep up): how many, and
    /// the longest. Each is also a `gap` entry in the record.
    pub gaps: u64,
    pub longest_gap_s: f64,
    pub record_bytes: u64,
    pub schemes: Vec<SchemeReport>,
}

/// A program's processes over a run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Processes {
    pub at_start: u64,
    pub joined: u64,
    pub left: u64,
}

/// The soft-dirty reset period, in windows (0: before every sample).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ResetPeriod {
    pub last: u32,
    pub min: u32,
    pub max: u32,
}

/// Follows a session's events: counts snapshots, regions, execs and gaps,
/// and with a writer puts each into the record, with the schemes'
/// statistics once a second and a flushed frame at least once a second
/// (a run killed without warning loses about a second).
pub struct Recorder {
    writer: Option<FileWriter>,
    aggr_us: u64,
    with_schemes: bool,
    snapshots: u64,
    regions: u64,
    execs: u64,
    /// A program's processes: at the start, joined and left since.
    processes: Processes,
    gaps: Gaps,
    next_stats_us: u64,
    last_flush: Instant,
    warn: crate::Warner,
    /// The session follows a program's processes.
    program: bool,
    /// The targets' mappings, written when they change.
    maps: crate::maps::MapsWatch,
    /// A simulated workload's mappings, written at the start of each file.
    sim_maps: Option<Vec<udamon_record::MapInfo>>,
    sim_written: bool,
}

impl Recorder {
    /// `writer` receives the record (its header already written).
    pub fn new(session: &Session, writer: Option<FileWriter>) -> Self {
        Self {
            writer,
            aggr_us: session.attrs().aggr_us,
            with_schemes: !session.installed_schemes().is_empty(),
            snapshots: 0,
            regions: 0,
            execs: 0,
            processes: Processes {
                at_start: session.header().targets.len() as u64,
                ..Processes::default()
            },
            program: session.is_program(),
            maps: crate::maps::MapsWatch::new(
                session.root(),
                Duration::from_micros(session.attrs().update_us),
            ),
            sim_maps: session.sim_maps(),
            sim_written: false,
            gaps: Gaps::default(),
            next_stats_us: 0,
            last_flush: Instant::now(),
            warn: session.warner().clone(),
        }
    }

    /// Writes the targets' mappings that changed (or all of them, at the
    /// start of a file, or `now` when targets arrived).
    fn push_maps(&mut self, session: &Session, now: bool) -> Result<(), Error> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        if !(now || self.maps.due()) {
            return Ok(());
        }
        let at_us = session.elapsed().as_micros() as u64;
        let mut events = self.maps.poll(&session.target_pids(), at_us);
        if let Some(maps) = self.sim_maps.as_ref().filter(|_| !self.sim_written) {
            self.sim_written = true;
            let maps = maps.clone();
            events.push(udamon_record::MapsEvent {
                at_us: 0,
                idx: 0,
                maps,
            });
        }
        for e in events {
            let v = serde_json::to_value(&e).map_err(|e| Error::failed("writing mappings", e))?;
            w.push_json(udamon_record::MAPS_EVENT, &v)?;
        }
        Ok(())
    }

    /// Takes one event into the record.
    pub fn push(&mut self, session: &mut Session, ev: &Event) -> Result<(), Error> {
        let changed = match ev {
            Event::Exec { .. } => true,
            Event::Targets(t) => t.iter().any(|e| matches!(e, TargetEvent::Arrive { .. })),
            Event::Snapshot(_) => {
                // Mappings read before the snapshot that they name.
                self.push_maps(session, false)?;
                false
            }
            Event::End(_) => false,
        };
        self.push_event(session, ev)?;
        if changed {
            // A new program's mappings come right after the entry that
            // announces it.
            self.push_maps(session, true)?;
        }
        Ok(())
    }

    fn push_event(&mut self, session: &mut Session, ev: &Event) -> Result<(), Error> {
        match ev {
            Event::End(_) => Ok(()),
            Event::Targets(events) => {
                for (i, e) in events.iter().enumerate() {
                    let exec = match e {
                        TargetEvent::Arrive { .. } => {
                            self.processes.joined += 1;
                            None
                        }
                        TargetEvent::Exit { why, at_us, .. } => {
                            self.processes.left += 1;
                            // A process that exec'd leaves and comes back
                            // as a new target (in the same batch).
                            (why == "exec").then(|| {
                                let exe = events[i..].iter().find_map(|a| match a {
                                    TargetEvent::Arrive { target, .. } => {
                                        Some(target.label.clone())
                                    }
                                    TargetEvent::Exit { .. } => None,
                                });
                                (*at_us, exe.unwrap_or_default())
                            })
                        }
                    };
                    let Some(w) = self.writer.as_mut() else {
                        continue;
                    };
                    let v = serde_json::to_value(e)
                        .map_err(|e| Error::failed("writing a target event", e))?;
                    w.push_json(udamon_record::TARGET_EVENT, &v)?;
                    if let Some((at_us, exe)) = exec {
                        w.push_json("exec", &serde_json::json!({ "at_us": at_us, "exe": exe }))?;
                    }
                }
                let execs = events
                    .iter()
                    .filter(|e| matches!(e, TargetEvent::Exit { why, .. } if why == "exec"))
                    .count();
                self.execs += execs as u64;
                Ok(())
            }
            Event::Exec { at_us, exe } => {
                self.execs += 1;
                if let Some(w) = self.writer.as_mut() {
                    w.push_json("exec", &serde_json::json!({ "at_us": at_us, "exe": exe }))?;
                }
                Ok(())
            }
            Event::Snapshot(s) => {
                self.snapshots += 1;
                self.regions += s.nr_regions() as u64;
                let gap = self.gaps.check(s, self.aggr_us);
                let Some(w) = self.writer.as_mut() else {
                    return Ok(());
                };
                w.push_snapshot(s)?;
                if let Some(g) = &gap {
                    w.push_json("gap", g)?;
                }
                if self.with_schemes && s.end_us >= self.next_stats_us {
                    self.next_stats_us = s.end_us + 1_000_000;
                    match session.schemes() {
                        Ok(reports) => {
                            let entry =
                                serde_json::json!({ "end_us": s.end_us, "schemes": reports });
                            w.push_json("schemes", &entry)?;
                        }
                        Err(e) => self.warn.warn(&e.to_string()),
                    }
                }
                if self.last_flush.elapsed() >= FLUSH_EVERY {
                    w.flush_frame()?;
                    self.last_flush = Instant::now();
                }
                Ok(())
            }
        }
    }

    /// Closes the record file so far (its last frame flushed) and goes on
    /// in `writer`: a service's records rotate this way. The closed file
    /// has no summary entry (the run goes on).
    pub fn replace_writer(&mut self, writer: Option<FileWriter>) -> Result<(), Error> {
        let old = std::mem::replace(&mut self.writer, writer);
        self.next_stats_us = 0;
        // Each file names its own regions.
        self.maps.reset();
        self.sim_written = false;
        if let Some(mut w) = old {
            w.flush_frame()?;
            w.finish()?;
        }
        Ok(())
    }

    /// Snapshots taken so far.
    pub fn snapshots(&self) -> u64 {
        self.snapshots
    }

    /// Bytes written so far (0 without a writer).
    pub fn bytes_written(&self) -> u64 {
        self.writer.as_ref().map_or(0, |w| w.bytes_written())
    }

    /// Ends the session and the record: the final scheme statistics, the
    /// summary entry, the last frame. `cpu` is what udamon spent so far.
    pub fn finish(
        mut self,
        session: &mut Session,
        ended_by: &str,
        output: Option<String>,
        cpu: CpuSpent,
    ) -> Result<LiveSummary, Error> {
        let elapsed = session.elapsed().as_secs_f64().max(1e-9);
        let schemes = if self.with_schemes {
            session.schemes().unwrap_or_else(|e| {
                self.warn
                    .warn(&format!("{e}; the summary has no scheme statistics"));
                Vec::new()
            })
        } else {
            Vec::new()
        };
        let sd = session.soft_dirty_stats();
        let end = session.finish()?;
        let i = session.info();
        let mut summary = LiveSummary {
            output,
            pid: i.pid,
            command: i.command.clone(),
            ops: i.ops,
            chosen_because: i.chosen_because.clone(),
            access: i.access,
            source: i.source.clone(),
            kernel: i.kernel.clone(),
            monitored_s: elapsed,
            snapshots: self.snapshots,
            avg_nr_regions: if self.snapshots > 0 {
                self.regions as f64 / self.snapshots as f64
            } else {
                0.0
            },
            udamon_cpu_s: cpu.total_s,
            udamon_cpu_s_per_s: cpu.total_s / cpu.wall_s.max(1e-9),
            udamon_setup_cpu_s: cpu.setup_s,
            udamon_monitoring_cpu_s_per_s: (cpu.total_s - cpu.setup_s).max(0.0) / elapsed,
            kdamond_cpu_s_per_s: end.kdamond_cpu_s.map(|c| c / elapsed),
            softdirty_resets: sd.map(|s| s.resets),
            softdirty_reset_period: sd.map(|s| ResetPeriod {
                last: s.period,
                min: s.period_min,
                max: s.period_max,
            }),
            rss_start_kb: session.rss_start_kb(),
            rss_end_kb: end.rss_end_kb,
            swap_end_kb: end.swap_end_kb,
            ended_by: ended_by.into(),
            execs: self.execs,
            processes: self.program.then_some(self.processes),
            gaps: self.gaps.count,
            longest_gap_s: self.gaps.longest_us as f64 / 1e6,
            record_bytes: 0,
            schemes,
        };
        if self.gaps.count > 0 {
            self.warn.warn(&format!(
                "{} gap(s) in the aggregations, the longest {:.1}s: no snapshot covers those \
                 times as one window (the record marks each)",
                self.gaps.count,
                self.gaps.longest_us as f64 / 1e6
            ));
        }
        if let Some(mut w) = self.writer.take() {
            if !summary.schemes.is_empty() {
                w.push_json(
                    "schemes",
                    &serde_json::json!({
                        "end_us": (elapsed * 1e6) as u64,
                        "schemes": summary.schemes
                    }),
                )?;
            }
            // The file's size is known only once it is written: the stored
            // summary leaves it out rather than say 0.
            let mut stored = serde_json::to_value(&summary)
                .map_err(|e| Error::failed("writing the summary", e))?;
            if let Some(m) = stored.as_object_mut() {
                m.remove("record_bytes");
            }
            w.push_json("summary", &stored)?;
            w.flush_frame()?;
            summary.record_bytes = w.bytes_written();
            w.finish()?;
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(start_us: u64, end_us: u64) -> Snapshot {
        Snapshot {
            start_us,
            end_us,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: Vec::new(),
        }
    }

    /// A window far longer than the aggregation interval is a gap; a slow
    /// one (a busy machine: about twice the interval) is not.
    #[test]
    fn gaps_are_long_stalls_only() {
        let mut g = Gaps::default();
        assert!(g.check(&window(0, 190_000), 100_000).is_none());
        assert!(g.check(&window(0, 1_000_000), 100_000).is_none());
        let e = g.check(&window(1_000_000, 31_000_000), 100_000).unwrap();
        assert_eq!(e["expected_us"], 100_000);
        assert!(g.check(&window(0, 2_500_000), 1_000_000).is_none());
        assert!(g.check(&window(0, 3_000_000), 1_000_000).is_some());
        assert_eq!((g.count, g.longest_us), (2, 30_000_000));
    }
}
