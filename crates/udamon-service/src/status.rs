//! What the service knows of its jobs, shared between the job threads (who
//! write it), the metrics endpoint and `udamon ctl status` (who read it).

use std::collections::BTreeMap;

use serde::Serialize;
use udamon_core::Snapshot;
use udamon_session::SchemeReport;

/// The quantiles of idle time reported (DAMON_STAT reports p0..p100).
pub const IDLE_QUANTILES: [f64; 12] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0];

/// One quota goal of a scheme.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GoalStatus {
    pub metric: String,
    pub target: u64,
    pub current: Option<u64>,
}

/// A cumulative figure that survives the source's resets (a reloaded
/// scheme's statistics start again from zero): what the source counted
/// before each reset is kept.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Accum {
    base: u64,
    last: u64,
}

impl Accum {
    /// Takes the source's current value.
    pub fn set(&mut self, raw: u64) {
        if raw < self.last {
            self.base += self.last;
        }
        self.last = raw;
    }

    /// The source was reset on purpose: keep what it counted.
    pub fn reset(&mut self) {
        self.base += self.last;
        self.last = 0;
    }

    pub fn total(&self) -> u64 {
        self.base + self.last
    }
}

/// One scheme of a session, with totals over the session's whole life.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SchemeStatus {
    pub index: usize,
    pub action: String,
    pub description: String,
    /// Where the scheme came from (preset, file, inline).
    pub origin: String,
    #[serde(skip)]
    pub acc: [Accum; 6],
    pub tried_bytes: u64,
    pub tried_regions: u64,
    pub applied_bytes: u64,
    pub applied_regions: u64,
    pub quota_exceeds: u64,
    pub would_apply_bytes: u64,
    pub effective_quota_bytes: Option<u64>,
    pub goals: Vec<GoalStatus>,
    pub active: Option<bool>,
    /// The byte-rate guardrail is what limits this scheme's quota.
    pub capped_by_guardrail: bool,
}

impl SchemeStatus {
    /// Takes a session's report of the scheme.
    pub fn update(&mut self, r: &SchemeReport) {
        let raw = [
            r.stats.sz_tried,
            r.stats.nr_tried,
            r.stats.sz_applied,
            r.stats.nr_applied,
            r.stats.qt_exceeds,
            r.would_apply_bytes.unwrap_or(0),
        ];
        for (a, v) in self.acc.iter_mut().zip(raw) {
            a.set(v);
        }
        self.refresh_totals();
        self.effective_quota_bytes = r.effective_quota_bytes;
        self.active = r.active;
        if let Some(vals) = &r.goal_values {
            for (g, v) in self.goals.iter_mut().zip(vals) {
                g.current = Some(*v);
            }
        }
    }

    /// The scheme was reinstalled (its statistics restart from zero).
    pub fn reset(&mut self) {
        for a in &mut self.acc {
            a.reset();
        }
    }

    fn refresh_totals(&mut self) {
        let t: Vec<u64> = self.acc.iter().map(Accum::total).collect();
        self.tried_bytes = t[0];
        self.tried_regions = t[1];
        self.applied_bytes = t[2];
        self.applied_regions = t[3];
        self.quota_exceeds = t[4];
        self.would_apply_bytes = t[5];
    }
}

/// One session of a job: one process, physical memory, or a simulation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorkerStatus {
    pub pid: u32,
    pub command: String,
    pub path: String,
    pub chosen_because: String,
    /// "starting", "running", "ended" or "failed".
    pub state: String,
    /// Why it ended, or the error that ended it.
    pub reason: Option<String>,
    pub snapshots: u64,
    /// The end of the last snapshot since the session began (us): wall
    /// time for live targets, simulated time for simulations.
    pub monitored_us: u64,
    pub regions: u64,
    pub sample_us: u64,
    pub aggr_us: u64,
    pub wss_bytes: u64,
    pub bandwidth_bytes_per_s: f64,
    /// Sizes and idle times (s; negative: accessed, for that long) of the
    /// last snapshot's regions.
    #[serde(skip)]
    pub idle: Vec<(u64, f64)>,
    pub schemes: Vec<SchemeStatus>,
    /// Guardrails in force now ("psi", "rss_share", "bytes_per_second").
    pub paused_by: Vec<String>,
    /// Paused by `udamon ctl pause`: what the pause keeps and stops.
    pub paused: Option<String>,
    pub cpu_s: f64,
    pub kdamond_pid: Option<u32>,
    pub record: Option<String>,
    /// The target's resident set (bytes), for processes.
    pub rss_bytes: Option<u64>,
    /// A process set's processes (its targets), by target index.
    pub processes: BTreeMap<u32, ProcessStatus>,
}

/// One process of a process set's session.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProcessStatus {
    pub pid: u32,
    pub comm: String,
    /// Its working set in the last snapshot (bytes of regions accessed).
    pub wss_bytes: u64,
}

impl WorkerStatus {
    pub fn running(&self) -> bool {
        self.state == "running"
    }

    /// Takes the figures of a snapshot (DAMON_STAT's definitions: a
    /// region's idle time is (age + 1) aggregation intervals, negative
    /// when it was accessed in the last one).
    pub fn take_snapshot(&mut self, s: &Snapshot) {
        self.snapshots += 1;
        self.monitored_us = s.end_us;
        let aggr_s = self.aggr_us.max(1) as f64 / 1e6;
        self.regions = s.nr_regions() as u64;
        self.idle.clear();
        let (mut wss, mut bw) = (0u64, 0f64);
        for t in &s.targets {
            let mut target_wss = 0;
            for r in &t.regions {
                let sz = r.end.saturating_sub(r.start);
                let idle = f64::from(r.age + 1) * aggr_s;
                if r.nr_accesses > 0 {
                    target_wss += sz;
                    bw += sz as f64 * f64::from(r.nr_accesses);
                    self.idle.push((sz, -idle));
                } else {
                    self.idle.push((sz, idle));
                }
            }
            wss += target_wss;
            if let Some(p) = self.processes.get_mut(&t.target_idx) {
                p.wss_bytes = target_wss;
            }
        }
        self.wss_bytes = wss;
        self.bandwidth_bytes_per_s = bw / aggr_s;
    }
}

/// One job.
#[derive(Clone, Debug, Default, Serialize)]
pub struct JobStatus {
    pub name: String,
    pub target: String,
    pub ops: String,
    pub dry_run: bool,
    /// Sessions by an id of the job's own (the pid for processes).
    pub workers: BTreeMap<u64, WorkerStatus>,
    /// Totals of sessions that ended and were removed (processes that
    /// exited), per scheme index: so that the job's counters never go
    /// down.
    pub retired: Vec<SchemeStatus>,
    pub retired_snapshots: u64,
    /// Guardrail trips so far, by guardrail.
    pub trips: BTreeMap<String, u64>,
    /// The last problem, for `ctl status`.
    pub last_error: Option<String>,
    /// Processes of a process set with a metric series of their own.
    pub top_processes: u32,
}

impl JobStatus {
    /// Whether any session of the job monitors now.
    pub fn up(&self) -> bool {
        self.workers.values().any(WorkerStatus::running)
    }

    /// Moves an ended session's totals into `retired`.
    pub fn retire(&mut self, id: u64) {
        if let Some(w) = self.workers.remove(&id) {
            self.retired_snapshots += w.snapshots;
            for s in w.schemes {
                match self.retired.iter_mut().find(|r| r.index == s.index) {
                    Some(r) => {
                        r.tried_bytes += s.tried_bytes;
                        r.tried_regions += s.tried_regions;
                        r.applied_bytes += s.applied_bytes;
                        r.applied_regions += s.applied_regions;
                        r.quota_exceeds += s.quota_exceeds;
                        r.would_apply_bytes += s.would_apply_bytes;
                    }
                    None => self.retired.push(s),
                }
            }
        }
    }

    /// Idle-time quantiles (s) over every running session's regions.
    pub fn idle_quantiles(&self) -> Option<Vec<f64>> {
        let mut all: Vec<(u64, f64)> = self
            .workers
            .values()
            .filter(|w| w.running())
            .flat_map(|w| w.idle.iter().copied())
            .collect();
        quantiles(&mut all)
    }
}

/// DAMON_STAT's percentiles: regions sorted by idle time, quantile q is
/// the idle time of the region at which the cumulative size reaches q of
/// the total.
pub fn quantiles(regions: &mut [(u64, f64)]) -> Option<Vec<f64>> {
    let total: u64 = regions.iter().map(|r| r.0).sum();
    if total == 0 {
        return None;
    }
    regions.sort_by(|a, b| a.1.total_cmp(&b.1));
    Some(
        IDLE_QUANTILES
            .iter()
            .map(|q| {
                let want = (q * total as f64).ceil() as u64;
                let mut acc = 0;
                for (sz, t) in regions.iter() {
                    acc += sz;
                    if acc >= want {
                        return *t;
                    }
                }
                regions.last().map_or(0.0, |r| r.1)
            })
            .collect(),
    )
}

/// The whole service.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServiceStatus {
    pub version: String,
    pub config: String,
    pub pid: u32,
    pub started_unix_s: u64,
    pub jobs: Vec<JobStatus>,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    pub last_reload_ok: bool,
    pub last_reload_error: Option<String>,
    /// Memory pressure (PSI `some` avg10, %) as last read.
    pub psi_some_avg10: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accumulator_survives_resets() {
        let mut a = Accum::default();
        a.set(10);
        a.set(15);
        a.set(3);
        assert_eq!(a.total(), 18);
        a.reset();
        a.set(2);
        assert_eq!(a.total(), 20);
    }

    #[test]
    fn quantiles_weigh_regions_by_size() {
        let mut r = vec![(100, 5.0), (300, -1.0), (600, 60.0)];
        let q = quantiles(&mut r).unwrap();
        assert_eq!(q[0], -1.0);
        assert_eq!(q[3], -1.0);
        assert_eq!(q[4], 5.0);
        assert_eq!(q[5], 60.0);
        assert_eq!(q[11], 60.0);
        assert!(quantiles(&mut []).is_none());
    }
}
