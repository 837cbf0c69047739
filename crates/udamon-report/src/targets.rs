//! The processes (targets) of a record: the header's targets, in index
//! order, then those its `target` JSON entries announce
//! ([`udamon_record::TargetEvent`]), with when each arrived and left. A
//! record of "whole programs" holds many processes; the same pid may appear
//! under two indices (pid reuse, or an exec'd program restarted), so a
//! process is its index, known by its pid and start time.
//!
//! [`TargetTable::read`] reads every frame's entries (a target may have
//! arrived long before a selected time range) and refuses a record that
//! announces more than [`MAX_TARGETS`] targets, so that no record grows
//! memory without bound.

use std::collections::BTreeMap;
use std::ops::{ControlFlow, Range};

use serde::Serialize;
use serde_json::Value;
use udamon_record::{Entry, Reader, TargetEvent, TargetInfo, TARGET_EVENT};

use crate::Error;

/// The most targets a record may hold for the reports that read its target
/// table.
pub const MAX_TARGETS: usize = 1_000_000;

/// The bytes of `/proc/PID/comm`: longer names are cut to this.
pub const COMM_LEN: usize = 15;

/// One target of a record. Times are the events' `at_us`: microseconds
/// since the start of monitoring.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TargetRow {
    pub target_idx: u32,
    /// 0 for the physical address space or a simulated one.
    pub pid: u32,
    /// The process's start time (clock ticks after boot), where known.
    pub start: Option<u64>,
    pub comm: Option<String>,
    pub cgroup: Option<String>,
    pub label: String,
    /// When it arrived; `None` for the header's targets (there from the
    /// start).
    pub arrived_us: Option<u64>,
    /// When it left; `None` while it was still monitored at the end.
    pub left_us: Option<u64>,
    /// Why it left: "exited", "replaced" or "left".
    pub left_why: Option<String>,
}

impl TargetRow {
    fn new(target_idx: u32, t: &TargetInfo, arrived_us: Option<u64>) -> Self {
        Self {
            target_idx,
            pid: t.pid,
            start: t.start,
            comm: t.comm.clone(),
            cgroup: t.cgroup.clone(),
            label: t.label.clone(),
            arrived_us,
            left_us: None,
            left_why: None,
        }
    }

    /// A target that snapshots name but the table does not (a record
    /// written without its targets): known by its index only.
    pub fn unknown(target_idx: u32) -> Self {
        Self {
            target_idx,
            ..Self::default()
        }
    }

    /// "pid 42 (worker)", "pid 42", or "target 3" when the pid is 0.
    pub fn name(&self) -> String {
        let who = if self.pid == 0 {
            format!("target {}", self.target_idx)
        } else {
            format!("pid {}", self.pid)
        };
        match self.comm.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => format!("{who} ({c})"),
            None if !self.label.is_empty() && self.pid != 0 => who,
            None if !self.label.is_empty() => format!("{who} ({})", self.label),
            None => who,
        }
    }

    /// Whether its comm is `name`: equal, or `name` is longer than a comm
    /// can be and the comm is its first [`COMM_LEN`] bytes.
    pub fn comm_is(&self, name: &str) -> bool {
        let Some(c) = self.comm.as_deref() else {
            return false;
        };
        c == name || (name.len() > COMM_LEN && c.as_bytes() == &name.as_bytes()[..COMM_LEN])
    }
}

/// A record's targets, by index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetTable {
    rows: Vec<TargetRow>,
}

impl TargetTable {
    /// The table of `reader`'s record: the header's targets, and those its
    /// `target` entries announce, in every frame.
    pub fn read(reader: &Reader) -> Result<Self, Error> {
        Self::read_capped(reader, MAX_TARGETS)
    }

    /// [`TargetTable::read`], refusing more than `max` targets.
    pub fn read_capped(reader: &Reader, max: usize) -> Result<Self, Error> {
        let mut b = Builder::new(&reader.header().targets, max)?;
        let mut res = Ok(());
        reader.for_each_entry(|e| match e {
            Entry::Json { kind, value } if kind == TARGET_EVENT => match b.push(value) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    res = Err(e);
                    ControlFlow::Break(())
                }
            },
            _ => ControlFlow::Continue(()),
        })?;
        res?;
        Ok(b.finish())
    }

    /// The table of header targets and events (for tests and callers that
    /// hold them already).
    pub fn from_events<'a>(
        header: &[TargetInfo],
        events: impl IntoIterator<Item = &'a TargetEvent>,
        max: usize,
    ) -> Result<Self, Error> {
        let mut b = Builder::new(header, max)?;
        for e in events {
            b.event(e.clone())?;
        }
        Ok(b.finish())
    }

    /// The table of header targets and `target` entries' values (those of
    /// other events passed over, malformed ones refused).
    pub fn from_values<'a>(
        header: &[TargetInfo],
        values: impl IntoIterator<Item = &'a Value>,
        max: usize,
    ) -> Result<Self, Error> {
        let mut b = Builder::new(header, max)?;
        for v in values {
            b.push(v)?;
        }
        Ok(b.finish())
    }

    /// The rows, by index.
    pub fn rows(&self) -> &[TargetRow] {
        &self.rows
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn get(&self, idx: u32) -> Option<&TargetRow> {
        self.rows
            .binary_search_by_key(&idx, |r| r.target_idx)
            .ok()
            .map(|i| &self.rows[i])
    }

    /// The row of `idx`, or an [`TargetRow::unknown`] one.
    pub fn row(&self, idx: u32) -> TargetRow {
        self.get(idx)
            .cloned()
            .unwrap_or_else(|| TargetRow::unknown(idx))
    }

    /// The indices the flags select, sorted, each once: those of `targets`
    /// (checked against the table when it knows any target), of the
    /// processes whose pid is one of `pids`, and of those whose comm is one
    /// of `comms` (see [`TargetRow::comm_is`]). A value that selects nothing
    /// is an [`Error::NoProcess`] naming it and what the record holds.
    pub fn select(
        &self,
        targets: &[u32],
        pids: &[u32],
        comms: &[String],
    ) -> Result<Vec<u32>, Error> {
        let mut out: Vec<u32> = Vec::new();
        for &t in targets {
            if !self.is_empty() && self.get(t).is_none() {
                return Err(Error::NoProcess(format!(
                    "--target {t}: the record has {}",
                    self.indices_text()
                )));
            }
            out.push(t);
        }
        for &pid in pids {
            let n = out.len();
            out.extend(
                self.rows
                    .iter()
                    .filter(|r| r.pid == pid)
                    .map(|r| r.target_idx),
            );
            if out.len() == n {
                return Err(Error::NoProcess(format!(
                    "--pid {pid}: no target of the record has this pid ({})",
                    self.listed(|r| (r.pid != 0).then(|| r.pid.to_string()), "pids")
                )));
            }
        }
        for name in comms {
            let n = out.len();
            out.extend(
                self.rows
                    .iter()
                    .filter(|r| r.comm_is(name))
                    .map(|r| r.target_idx),
            );
            if out.len() == n {
                return Err(Error::NoProcess(format!(
                    "--comm {name}: no target of the record has this command name ({})",
                    self.listed(|r| r.comm.clone(), "comms")
                )));
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// "one target, 0", "targets 0..4", "targets 0, 2 and 7".
    fn indices_text(&self) -> String {
        let idx: Vec<u32> = self.rows.iter().map(|r| r.target_idx).collect();
        match idx.as_slice() {
            [one] => format!("one target, {one}"),
            [a, .., b] if (b - a) as usize + 1 == idx.len() => format!("targets {a}..{b}"),
            _ => format!("targets {}", first_ten(idx.iter().map(u32::to_string))),
        }
    }

    /// "its pids: 1, 2, 3", the distinct values up to ten, or "the record's
    /// targets have no comms".
    fn listed(&self, value: impl Fn(&TargetRow) -> Option<String>, what: &str) -> String {
        let mut seen: Vec<String> = Vec::new();
        for v in self.rows.iter().filter_map(value) {
            if !seen.contains(&v) {
                seen.push(v);
                if seen.len() > 10 {
                    break;
                }
            }
        }
        if seen.is_empty() {
            return format!("the record's targets have no {what}");
        }
        format!("its {what}: {}", first_ten(seen.into_iter()))
    }
}

/// Up to ten values, comma-separated, "..." after them when there are more.
fn first_ten(values: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = values.take(11).collect();
    let mut s = v[..v.len().min(10)].join(", ");
    if v.len() > 10 {
        s.push_str(", ...");
    }
    s
}

/// The table being read.
struct Builder {
    rows: BTreeMap<u32, TargetRow>,
    max: usize,
}

impl Builder {
    fn new(header: &[TargetInfo], max: usize) -> Result<Self, Error> {
        if header.len() > max {
            return Err(Error::TooManyTargets(max));
        }
        let rows = header
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u32, TargetRow::new(i as u32, t, None)))
            .collect();
        Ok(Self { rows, max })
    }

    /// A `target` entry; one of an event this udamon does not know is
    /// passed over, a malformed one is bad input.
    fn push(&mut self, value: &Value) -> Result<(), Error> {
        if !matches!(value["event"].as_str(), Some("arrive" | "exit")) {
            return Ok(());
        }
        let ev: TargetEvent = serde_json::from_value(value.clone())
            .map_err(|e| Error::BadEntry(format!("a malformed \"target\" entry ({e}): {value}")))?;
        self.event(ev)
    }

    /// An arrival takes its index (a second arrival at a taken index is
    /// passed over: the first stands); an exit closes its target's row.
    fn event(&mut self, ev: TargetEvent) -> Result<(), Error> {
        match ev {
            TargetEvent::Arrive { at_us, idx, target } => {
                if self.rows.contains_key(&idx) {
                    return Ok(());
                }
                if self.rows.len() >= self.max {
                    return Err(Error::TooManyTargets(self.max));
                }
                self.rows
                    .insert(idx, TargetRow::new(idx, &target, Some(at_us)));
            }
            TargetEvent::Exit { at_us, idx, why } => {
                if let Some(r) = self.rows.get_mut(&idx) {
                    if r.left_us.is_none() {
                        r.left_us = Some(at_us);
                        r.left_why = Some(why);
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> TargetTable {
        TargetTable {
            rows: self.rows.into_values().collect(),
        }
    }
}

/// The `target` entries in `frames` of `reader` whose target `keep` keeps,
/// in recording order (`udamon cut` carries those outside the frames it
/// reads across). At most twice [`MAX_TARGETS`] entries are kept.
pub fn entries_in(
    reader: &Reader,
    frames: Range<usize>,
    keep: impl Fn(u32) -> bool,
) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    let mut res = Ok(());
    reader.for_each_entry_in(frames, |e| {
        if let Entry::Json { kind, value } = e {
            if kind == TARGET_EVENT && event_idx(value).is_none_or(&keep) {
                if out.len() >= 2 * MAX_TARGETS {
                    res = Err(Error::TooManyTargets(MAX_TARGETS));
                    return ControlFlow::Break(());
                }
                out.push(value.clone());
            }
        }
        ControlFlow::Continue(())
    })?;
    res.map(|()| out)
}

/// The last `maps` entry of each kept target in `frames` (what a part of
/// the record cut after them needs to name its regions), by target.
pub fn last_maps_in(
    reader: &Reader,
    frames: Range<usize>,
    keep: impl Fn(u32) -> bool,
) -> Result<std::collections::BTreeMap<u32, Value>, Error> {
    let mut out = std::collections::BTreeMap::new();
    reader.for_each_entry_in(frames, |e| {
        if let Entry::Json { kind, value } = e {
            if kind == udamon_record::MAPS_EVENT {
                if let Some(i) = event_idx(value).filter(|&i| keep(i)) {
                    out.insert(i, value.clone());
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    Ok(out)
}

/// The target index a `target` (or `maps`) entry is about.
pub fn event_idx(value: &Value) -> Option<u32> {
    value["idx"].as_u64().and_then(|i| u32::try_from(i).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn info(pid: u32, comm: &str, start: u64) -> TargetInfo {
        TargetInfo {
            start: Some(start),
            comm: Some(comm.into()),
            cgroup: Some("/app.slice".into()),
            ..TargetInfo::new(pid, comm)
        }
    }

    fn table() -> TargetTable {
        let header = [info(100, "server", 1), info(200, "a-very-long-nam", 2)];
        let events = [
            TargetEvent::Arrive {
                at_us: 500,
                idx: 2,
                target: info(300, "worker", 3),
            },
            TargetEvent::Exit {
                at_us: 700,
                idx: 1,
                why: "exited".into(),
            },
            TargetEvent::Arrive {
                at_us: 800,
                idx: 3,
                target: info(200, "worker", 9),
            },
            // A second arrival at a taken index: the first stands.
            TargetEvent::Arrive {
                at_us: 900,
                idx: 3,
                target: info(999, "x", 9),
            },
            TargetEvent::Exit {
                at_us: 950,
                idx: 7,
                why: "exited".into(),
            },
        ];
        TargetTable::from_events(&header, &events, 10).unwrap()
    }

    #[test]
    fn header_targets_then_arrivals_with_their_exits() {
        let t = table();
        let idx: Vec<u32> = t.rows().iter().map(|r| r.target_idx).collect();
        assert_eq!(idx, [0, 1, 2, 3]);
        let r1 = t.get(1).unwrap();
        assert_eq!((r1.arrived_us, r1.left_us), (None, Some(700)));
        assert_eq!(r1.left_why.as_deref(), Some("exited"));
        let r3 = t.get(3).unwrap();
        assert_eq!((r3.pid, r3.start, r3.arrived_us), (200, Some(9), Some(800)));
        assert_eq!(r3.name(), "pid 200 (worker)");
        assert_eq!(t.row(9), TargetRow::unknown(9));
    }

    #[test]
    fn selection_by_pid_comm_and_index() {
        let t = table();
        let s = |targets: &[u32], pids: &[u32], comms: &[&str]| {
            let comms: Vec<String> = comms.iter().map(|c| c.to_string()).collect();
            t.select(targets, pids, &comms)
        };
        // A reused pid selects both of its processes.
        assert_eq!(s(&[], &[200], &[]).unwrap(), [1, 3]);
        assert_eq!(s(&[0], &[], &["worker"]).unwrap(), [0, 2, 3]);
        // /proc cuts a comm to 15 bytes: the whole name matches it too.
        assert_eq!(s(&[], &[], &["a-very-long-name-indeed"]).unwrap(), [1]);
        assert!(s(&[], &[], &["a-very"])
            .unwrap_err()
            .to_string()
            .contains("--comm a-very"));
        let e = s(&[], &[77], &[]).unwrap_err().to_string();
        assert_eq!(
            e,
            "--pid 77: no target of the record has this pid (its pids: 100, 200, 300)"
        );
        let e = s(&[], &[], &["nope"]).unwrap_err().to_string();
        assert!(
            e.ends_with("(its comms: server, a-very-long-nam, worker)"),
            "{e}"
        );
        let e = s(&[4], &[], &[]).unwrap_err().to_string();
        assert_eq!(e, "--target 4: the record has targets 0..3");
    }

    #[test]
    fn more_targets_than_the_cap_are_refused() {
        let arrivals: Vec<TargetEvent> = (0..5)
            .map(|i| TargetEvent::Arrive {
                at_us: i,
                idx: i as u32,
                target: TargetInfo::new(i as u32 + 1, "p"),
            })
            .collect();
        assert_eq!(
            TargetTable::from_events(&[], &arrivals, 5).unwrap().len(),
            5
        );
        let e = TargetTable::from_events(&[], &arrivals, 4).unwrap_err();
        assert!(matches!(e, Error::TooManyTargets(4)), "{e}");
    }
}
