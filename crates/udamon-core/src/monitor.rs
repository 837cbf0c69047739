//! The seam above the engine: anything that produces snapshots. Our engine
//! implements it over an [`Operations`](crate::Operations) set; kernel DAMON
//! driven through sysfs implements it by reading the kernel's results; a
//! full-scan baseline implements it by checking every page.

use crate::{Attrs, Error, Snapshot};

pub trait Monitor {
    /// Runs until the next aggregation boundary and returns the snapshot taken
    /// there, or `None` once every target is gone or the deadline is reached.
    fn next_snapshot(&mut self) -> Result<Option<Snapshot>, Error>;

    /// Replaces the monitoring attributes while running. The new attributes
    /// are validated first; on error the running monitor is left as it was.
    fn commit(&mut self, attrs: Attrs) -> Result<(), Error>;

    /// The attributes in force (interval tuning may have changed them).
    fn attrs(&self) -> Attrs;

    /// Time monitored so far, in microseconds.
    fn now_us(&self) -> u64;

    /// Stop producing snapshots once `now_us` reaches this time (`None`:
    /// never): `next_snapshot` returns `None` from then on. Also ends waits
    /// in which no snapshot is produced, such as every scheme being off by
    /// its watermarks. Every monitor implements it (there is no default), so
    /// a caller may rely on it to end a run.
    fn set_deadline(&mut self, deadline_us: Option<u64>);
}
