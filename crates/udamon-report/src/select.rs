//! A part of a record: a time range, an address range, some targets.
//! `udamon cut` writes what a [`Selection`] keeps as a record of its own;
//! every report reads a record through one ([`Selected`]), and only the
//! frames that may hold the time range are read.

use std::io::Write;
use std::ops::{ControlFlow, Range};

use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_record::{Entry, FrameInfo, Reader, TARGET_EVENT};

use crate::{raw, Error, SnapshotSource};

/// Which part of each snapshot to keep; `None` keeps everything on that
/// axis.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// `[start, end)` in the snapshots' own microseconds: a snapshot is kept
    /// when its window overlaps it.
    pub time_us: Option<(u64, u64)>,
    /// `[start, end)` of addresses: regions are clipped to it, and those
    /// outside it dropped.
    pub address: Option<(u64, u64)>,
    /// Only these targets (by index, sorted, each once) are kept.
    pub targets: Option<Vec<u32>>,
}

impl Selection {
    /// The selection of a time range given in microseconds since the
    /// record's start (the start of its first snapshot), an address range
    /// and targets.
    pub fn since_start(
        reader: &Reader,
        time_range: Option<(u64, u64)>,
        address: Option<(u64, u64)>,
        targets: Option<Vec<u32>>,
    ) -> Selection {
        let origin = reader
            .frames()
            .iter()
            .find(|f| f.nr_snapshots > 0)
            .map_or(0, |f| f.first_start_us);
        Selection {
            time_us: time_range.map(|(x, y)| (origin.saturating_add(x), origin.saturating_add(y))),
            address,
            targets: targets.map(|mut t| {
                t.sort_unstable();
                t.dedup();
                t
            }),
        }
    }

    /// Whether it keeps everything.
    pub fn is_all(&self) -> bool {
        *self == Self::default()
    }

    /// Whether it keeps target `idx`.
    pub fn keeps_target(&self, idx: u32) -> bool {
        self.targets
            .as_ref()
            .is_none_or(|t| t.binary_search(&idx).is_ok())
    }

    /// The one target it keeps, when it keeps exactly one.
    pub fn single_target(&self) -> Option<u32> {
        match self.targets.as_deref() {
            Some([t]) => Some(*t),
            _ => None,
        }
    }

    /// The frames (indexes into `frames`) that may hold a snapshot in the
    /// time range: from the first frame ending after its start to the last
    /// starting before its end. Frames of JSON entries only in between come
    /// along.
    pub fn frames(&self, frames: &[FrameInfo]) -> Range<usize> {
        match self.time_us {
            None => 0..frames.len(),
            Some((t0, t1)) => {
                let first = frames
                    .iter()
                    .position(|f| f.nr_snapshots > 0 && f.last_end_us > t0)
                    .unwrap_or(frames.len());
                let last = frames
                    .iter()
                    .rposition(|f| f.nr_snapshots > 0 && f.first_start_us < t1)
                    .map_or(0, |i| i + 1);
                first..last.max(first)
            }
        }
    }

    /// Whether a snapshot spanning `[start_us, end_us)` is in the time range.
    pub fn in_time(&self, start_us: u64, end_us: u64) -> bool {
        self.time_us.is_none_or(|(a, b)| end_us > a && start_us < b)
    }

    /// What is kept of `s`, into `out` (its buffers reused); false when
    /// nothing is (out of the time range, or no region of the kept targets
    /// in the address range).
    pub fn apply(&self, s: &Snapshot, out: &mut Snapshot) -> bool {
        if !self.in_time(s.start_us, s.end_us) {
            return false;
        }
        out.start_us = s.start_us;
        out.end_us = s.end_us;
        out.sample_us = s.sample_us;
        out.aggr_us = s.aggr_us;
        out.targets.clear();
        for t in &s.targets {
            if !self.keeps_target(t.target_idx) {
                continue;
            }
            let regions: Vec<RegionSnapshot> = match self.address {
                None => t.regions.clone(),
                Some((a, b)) => t
                    .regions
                    .iter()
                    .filter(|r| r.end > a && r.start < b)
                    .map(|r| RegionSnapshot {
                        start: r.start.max(a),
                        end: r.end.min(b),
                        ..*r
                    })
                    .collect(),
            };
            if !regions.is_empty() {
                out.targets.push(TargetSnapshot {
                    target_idx: t.target_idx,
                    regions,
                });
            }
        }
        !out.targets.is_empty()
    }
}

/// A record read through a [`Selection`]: a [`SnapshotSource`] of what the
/// selection keeps, reading only the frames that may hold its time range.
/// Report times stay relative to the whole record's start.
pub struct Selected<'a> {
    reader: &'a Reader,
    sel: Selection,
    frames: Range<usize>,
}

impl<'a> Selected<'a> {
    pub fn new(reader: &'a Reader, sel: Selection) -> Self {
        let frames = sel.frames(reader.frames());
        Self {
            reader,
            sel,
            frames,
        }
    }

    pub fn selection(&self) -> &Selection {
        &self.sel
    }

    /// Calls `f` on what the selection keeps of each entry in recording
    /// order: snapshots cut to the selection, the JSON entries written
    /// while a kept snapshot's window was being recorded (scheme
    /// statistics, gaps, execs), and the `target` and `maps` entries of
    /// the kept targets in the frames read, whenever they were written
    /// (they say which process an index is and what its addresses hold). The caller decides what to do with a
    /// run's `summary`, which describes the whole run.
    pub fn for_each_entry(
        &self,
        mut f: impl FnMut(&Entry) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        let all = self.sel.is_all();
        let mut out = Entry::Snapshot(Snapshot::default());
        let mut in_range = self.sel.time_us.is_none();
        self.reader
            .for_each_entry_in(self.frames.clone(), |e| match e {
                _ if all => f(e),
                Entry::Snapshot(s) => {
                    in_range = self.sel.in_time(s.start_us, s.end_us);
                    let Entry::Snapshot(o) = &mut out else {
                        unreachable!("out holds a snapshot")
                    };
                    if self.sel.apply(s, o) {
                        f(&out)
                    } else {
                        ControlFlow::Continue(())
                    }
                }
                Entry::Json { kind, value }
                    if kind == TARGET_EVENT || kind == udamon_record::MAPS_EVENT =>
                {
                    match crate::targets::event_idx(value) {
                        Some(i) if !self.sel.keeps_target(i) => ControlFlow::Continue(()),
                        _ => f(e),
                    }
                }
                Entry::Json { .. } if in_range => f(e),
                Entry::Json { .. } => ControlFlow::Continue(()),
            })?;
        Ok(())
    }

    /// Writes what the selection keeps as JSON lines (see [`crate::raw`]):
    /// the record's header, then each kept entry in recording order. A
    /// run's `summary` describes the whole run, so a part leaves it out.
    pub fn write_raw(&self, w: &mut dyn Write) -> Result<(), Error> {
        raw::write_header_line(w, self.reader.header())?;
        let whole = self.sel.is_all();
        let mut buf = Vec::new();
        let mut res = Ok(());
        self.for_each_entry(|e| {
            res = match e {
                Entry::Snapshot(s) => raw::write_snapshot_line(w, s, &mut buf),
                Entry::Json { kind, .. } if !whole && kind == "summary" => Ok(()),
                Entry::Json { kind, value } => raw::write_json_line(w, kind, value),
            };
            if res.is_ok() {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        })?;
        Ok(res?)
    }
}

impl SnapshotSource for Selected<'_> {
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.for_each_entry(|e| match e {
            Entry::Snapshot(s) => f(s),
            Entry::Json { .. } => ControlFlow::Continue(()),
        })
    }

    /// The whole record's start: times stay comparable with and without
    /// a selection.
    fn record_start_us(&self) -> Result<Option<u64>, Error> {
        self.reader.record_start_us()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(start_us: u64, regions: &[(u32, u64, u64, u32)]) -> Snapshot {
        let mut targets: Vec<TargetSnapshot> = Vec::new();
        for &(t, s, e, n) in regions {
            let r = RegionSnapshot {
                start: s,
                end: e,
                nr_accesses: n,
                age: 1,
            };
            match targets.iter_mut().find(|x| x.target_idx == t) {
                Some(x) => x.regions.push(r),
                None => targets.push(TargetSnapshot {
                    target_idx: t,
                    regions: vec![r],
                }),
            }
        }
        Snapshot {
            start_us,
            end_us: start_us + 100,
            sample_us: 5,
            aggr_us: 100,
            targets,
        }
    }

    #[test]
    fn keeps_what_overlaps_and_clips_regions() {
        let s = snap(
            1000,
            &[(0, 0, 4096, 1), (0, 4096, 16384, 2), (1, 0, 8192, 3)],
        );
        let mut out = snap(0, &[]);
        let all = Selection::default();
        assert!(all.apply(&s, &mut out));
        assert_eq!(out, s);
        let sel = Selection {
            time_us: Some((1050, 2000)),
            address: Some((2048, 8192)),
            targets: Some(vec![0]),
        };
        assert!(sel.apply(&s, &mut out));
        assert_eq!(out.targets.len(), 1);
        let r: Vec<(u64, u64, u32)> = out.targets[0]
            .regions
            .iter()
            .map(|r| (r.start, r.end, r.nr_accesses))
            .collect();
        assert_eq!(r, [(2048, 4096, 1), (4096, 8192, 2)]);
        // A window that ends where the range starts is out; so is a target
        // with no region in the address range.
        let late = Selection {
            time_us: Some((1100, 2000)),
            ..Selection::default()
        };
        assert!(!late.apply(&s, &mut out));
        let far = Selection {
            address: Some((1 << 30, 1 << 31)),
            ..Selection::default()
        };
        assert!(!far.apply(&s, &mut out));
    }
}
