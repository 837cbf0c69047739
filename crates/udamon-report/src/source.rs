//! Where reports read snapshots from.

use std::ops::ControlFlow;

use udamon_core::Snapshot;

use crate::Error;

/// A stream of snapshots that can be walked more than once, without being
/// held in memory: reports make at most two passes over it.
///
/// Implemented for slices and vectors of snapshots (tests, small inputs) and
/// for `udamon_record::Reader` (records on disk, decoded frame by frame).
pub trait SnapshotSource {
    /// Calls `f` with every snapshot in stream order until it returns
    /// [`ControlFlow::Break`].
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error>;

    /// `start_us` of the first snapshot, the origin of every report's
    /// times. Default: reads up to the first snapshot.
    fn record_start_us(&self) -> Result<Option<u64>, Error> {
        let mut start = None;
        self.for_each_snapshot(&mut |s| {
            start = Some(s.start_us);
            ControlFlow::Break(())
        })?;
        Ok(start)
    }

    /// The last snapshot. Default: walks the whole stream.
    fn last_snapshot(&self) -> Result<Option<Snapshot>, Error> {
        let mut last: Option<Snapshot> = None;
        self.for_each_snapshot(&mut |s| {
            match &mut last {
                Some(l) => l.clone_from(s),
                None => last = Some(s.clone()),
            }
            ControlFlow::Continue(())
        })?;
        Ok(last)
    }
}

impl SnapshotSource for [Snapshot] {
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        for s in self {
            if f(s).is_break() {
                break;
            }
        }
        Ok(())
    }
    fn last_snapshot(&self) -> Result<Option<Snapshot>, Error> {
        Ok(self.last().cloned())
    }
}

impl SnapshotSource for Vec<Snapshot> {
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.as_slice().for_each_snapshot(f)
    }
    fn last_snapshot(&self) -> Result<Option<Snapshot>, Error> {
        Ok(self.last().cloned())
    }
}

impl<S: SnapshotSource + ?Sized> SnapshotSource for &S {
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        (**self).for_each_snapshot(f)
    }
    fn record_start_us(&self) -> Result<Option<u64>, Error> {
        (**self).record_start_us()
    }
    fn last_snapshot(&self) -> Result<Option<Snapshot>, Error> {
        (**self).last_snapshot()
    }
}

/// Visits every snapshot (no early stop).
pub(crate) fn each<S: SnapshotSource + ?Sized>(
    src: &S,
    mut f: impl FnMut(&Snapshot),
) -> Result<(), Error> {
    src.for_each_snapshot(&mut |s| {
        f(s);
        ControlFlow::Continue(())
    })
}

/// Frequency of a region: `nr_accesses / max_nr_accesses`, clamped to 0..=1
/// (a zero maximum counts as 1).
#[inline]
pub(crate) fn freq(nr_accesses: u32, max: u32) -> f64 {
    (f64::from(nr_accesses) / f64::from(max.max(1))).min(1.0)
}

/// Overlap length of `[a0, a1)` and `[b0, b1)`.
#[inline]
pub(crate) fn overlap(a0: u64, a1: u64, b0: u64, b1: u64) -> u64 {
    a1.min(b1).saturating_sub(a0.max(b0))
}

/// Whether target `idx` is selected by an optional target option.
#[inline]
pub(crate) fn selected(target: Option<u32>, idx: u32) -> bool {
    match target {
        Some(t) => t == idx,
        None => true,
    }
}
