//! Reading reports from record files (`udamon_record::Reader`).

use std::io::Write;
use std::ops::ControlFlow;

use udamon_core::Snapshot;
use udamon_record::{Entry, Reader};

use crate::{Error, SnapshotSource};

impl SnapshotSource for Reader {
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.for_each_entry(|e| match e {
            Entry::Snapshot(s) => f(s),
            Entry::Json { .. } => ControlFlow::Continue(()),
        })?;
        Ok(())
    }

    fn record_start_us(&self) -> Result<Option<u64>, Error> {
        Ok(self
            .frames()
            .iter()
            .find(|f| f.nr_snapshots > 0)
            .map(|f| f.first_start_us))
    }

    /// Decodes only the last frame holding snapshots.
    fn last_snapshot(&self) -> Result<Option<Snapshot>, Error> {
        let Some(i) = self.frames().iter().rposition(|f| f.nr_snapshots > 0) else {
            return Ok(None);
        };
        let mut last = None;
        self.for_each_entry_in(i..i + 1, |e| {
            if let Entry::Snapshot(s) = e {
                last = Some(s.clone());
            }
            ControlFlow::Continue(())
        })?;
        Ok(last)
    }
}

/// Writes the whole record as JSON lines (see [`crate::raw`]): the header,
/// then every entry of every intact frame in recording order; the caller
/// reports [`Reader::damage`].
pub fn write_raw(reader: &Reader, w: &mut dyn Write) -> Result<(), Error> {
    crate::Selected::new(reader, crate::Selection::default()).write_raw(w)
}
