//! Whole programs: the processes of a program (given pids, their
//! descendants, a cgroup's processes; [`udamon_proc::Tracker`]) followed as
//! the targets of one monitor. Scanned once per ops update: arrivals join
//! the monitor at the end of its target list, processes that exited or
//! left leave it; each is an event for the record. The monitor's region
//! budget is shared by all of them, as kernel DAMON shares it across a
//! context's targets.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use udamon_proc::{cgroup_of, Member, Program, Tracker};
use udamon_record::{TargetEvent, TargetInfo};

use crate::Error;

/// One target of the monitor: the process and its index in the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub pid: u32,
    pub start: u64,
    pub id: u32,
    /// Its address space's size at the last scan.
    pub vsize: u64,
}

/// A program followed as targets (see the module's documentation).
#[derive(Debug)]
pub(crate) struct Follow {
    tracker: Tracker,
    root: PathBuf,
    /// The monitor's targets, in its order.
    pub slots: Vec<Slot>,
    next_id: u32,
    every: Duration,
    last: Instant,
    /// Events not yet handed out.
    pending: Vec<TargetEvent>,
}

/// What changed in a scan: positions (in the monitor's order, highest
/// first) of targets no longer members and why, and the new members.
#[derive(Debug, Default)]
pub(crate) struct Change {
    pub gone: Vec<(usize, &'static str)>,
    pub arrived: Vec<Member>,
}

impl Change {
    pub fn is_empty(&self) -> bool {
        self.gone.is_empty() && self.arrived.is_empty()
    }
}

/// A process's command line, its words joined by spaces.
pub fn cmdline(root: &Path, pid: u32) -> Option<String> {
    std::fs::read(root.join(format!("proc/{pid}/cmdline")))
        .ok()
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|s| !s.is_empty())
}

/// What a record says of a member.
pub(crate) fn target_info(root: &Path, m: &Member) -> TargetInfo {
    TargetInfo {
        pid: m.pid,
        label: cmdline(root, m.pid).unwrap_or_else(|| m.comm.clone()),
        start: Some(m.start),
        comm: Some(m.comm.clone()),
        cgroup: cgroup_of(root, m.pid),
    }
}

impl Follow {
    /// Starts following `program` under `root`, scanning every `every`:
    /// the members now, which must not be none. The monitor's targets are
    /// those the caller then hands to [`begin`](Self::begin).
    pub fn start(
        root: &Path,
        program: Program,
        every: Duration,
    ) -> Result<(Follow, Vec<Member>), Error> {
        let what = describe(&program);
        let mut tracker =
            Tracker::new(root, program).map_err(|e| Error::Usage(format!("{what}: {e}")))?;
        let members = tracker.scan();
        if members.is_empty() {
            return Err(Error::Usage(format!(
                "{what} has no process with memory to monitor now; start the program first"
            )));
        }
        let f = Follow {
            tracker,
            root: root.to_path_buf(),
            slots: Vec::new(),
            next_id: 0,
            every: every.max(Duration::from_millis(100)),
            last: Instant::now(),
            pending: Vec::new(),
        };
        Ok((f, members))
    }

    /// The monitor starts with `members` (those of the first scan it could
    /// open), as targets 0, 1, ... of the record's header.
    pub fn begin(&mut self, members: &[Member]) {
        self.slots = members
            .iter()
            .enumerate()
            .map(|(i, m)| Slot {
                pid: m.pid,
                start: m.start,
                id: i as u32,
                vsize: m.vsize,
            })
            .collect();
        self.next_id = members.len() as u32;
    }

    /// Whether a scan is due.
    pub fn due(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    /// Scans now: which targets left (`exited`: the process is gone;
    /// `replaced`: its pid names another process now; `left`: it runs but
    /// is no longer a member) and which processes arrived. Nothing is
    /// changed yet but the sizes of the targets that stay.
    pub fn scan(&mut self) -> Change {
        self.last = Instant::now();
        let members = self.tracker.scan();
        let mut change = Change::default();
        for (i, s) in self.slots.iter_mut().enumerate().rev() {
            if let Some(m) = members
                .iter()
                .find(|m| m.pid == s.pid && m.start == s.start)
            {
                s.vsize = m.vsize;
            } else {
                let why = match udamon_proc::start_time(&self.root, s.pid) {
                    None => "exited",
                    Some(st) if st == s.start => "left",
                    Some(_) => "replaced",
                };
                change.gone.push((i, why));
            }
        }
        change.arrived = members
            .into_iter()
            .filter(|m| {
                !self
                    .slots
                    .iter()
                    .any(|s| s.pid == m.pid && s.start == m.start)
            })
            .collect();
        change
    }

    /// Target `pos` left the monitor, at `at_us`.
    pub fn leave(&mut self, pos: usize, why: &str, at_us: u64) {
        if pos < self.slots.len() {
            let s = self.slots.remove(pos);
            self.pending.push(TargetEvent::Exit {
                at_us,
                idx: s.id,
                why: why.to_string(),
            });
        }
    }

    /// `m` joined the monitor at the end of its targets, at `at_us`; its
    /// index in the record is the next one.
    pub fn arrive(&mut self, m: &Member, at_us: u64) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        self.slots.push(Slot {
            pid: m.pid,
            start: m.start,
            id,
            vsize: m.vsize,
        });
        self.pending.push(TargetEvent::Arrive {
            at_us,
            idx: id,
            target: target_info(&self.root, m),
        });
        id
    }

    /// Takes `change` as it is: its processes that left leave, its new
    /// ones arrive, at `at_us`.
    pub fn apply(&mut self, change: &Change, at_us: u64) {
        for &(pos, why) in &change.gone {
            self.leave(pos, why, at_us);
        }
        for m in &change.arrived {
            self.arrive(m, at_us);
        }
    }

    /// The events since the last call.
    pub fn take_events(&mut self) -> Vec<TargetEvent> {
        std::mem::take(&mut self.pending)
    }

    /// The record index of the target at `pos`.
    pub fn id(&self, pos: usize) -> Option<u32> {
        self.slots.get(pos).map(|s| s.id)
    }
}

/// The program, as an error message names it.
pub(crate) fn describe(p: &Program) -> String {
    let mut parts = Vec::new();
    if !p.pids.is_empty() {
        let pids: Vec<String> = p.pids.iter().map(u32::to_string).collect();
        parts.push(format!(
            "process{} {}{}",
            if pids.len() > 1 { "es" } else { "" },
            pids.join(", "),
            if p.children {
                " and its descendants"
            } else {
                ""
            }
        ));
    }
    if let Some(c) = &p.cgroup {
        parts.push(format!("cgroup {}", c.display()));
    }
    if let Some(m) = &p.matching {
        parts.push(format!("processes of {}", m.label));
    }
    parts.join(" and ")
}
