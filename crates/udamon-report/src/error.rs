//! The crate's error type.

use std::io;

/// Errors of report building and rendering.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The record could not be read.
    #[error(transparent)]
    Record(#[from] udamon_record::Error),
    /// Another snapshot source failed.
    #[error("reading snapshots: {0}")]
    Source(String),
    /// No snapshot falls in the selected time range (or the record is empty).
    #[error("no snapshots in the selected time range")]
    NoSnapshots,
    /// No snapshot's window covers the requested time.
    #[error("no snapshot covers {} since the record's start", crate::human::fmt_us(*.0))]
    NoSnapshotAt(u64),
    /// The selected target never appears in the selected snapshots.
    #[error("target {0} has no regions in the selected snapshots")]
    NoTarget(u32),
    /// A process the flags name is not in the record (the message names
    /// the flag, the value and what the record holds).
    #[error("{0}")]
    NoProcess(String),
    /// The record announces more targets than the reports read.
    #[error("the record holds more than {0} targets, more than udamon's reports read")]
    TooManyTargets(usize),
    /// A JSON entry of a kind the reports read does not hold what it should.
    #[error("{0}")]
    BadEntry(String),
    /// The requested address range holds no monitored memory.
    #[error("address range {start:#x}..{end:#x} holds no monitored memory")]
    EmptyAddressRange { start: u64, end: u64 },
    /// An option has a value the report cannot use.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// Writing the output failed.
    #[error("writing the report: {0}")]
    Io(#[from] io::Error),
    /// Drawing an image failed.
    #[error("drawing the image: {0}")]
    Plot(String),
}

impl Error {
    /// What the user asked of the record is bad input; reading it and
    /// writing the output are runtime failures.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        match self {
            Error::Record(e) => e.kind(),
            Error::Io(_) | Error::Plot(_) | Error::Source(_) => udamon_core::ErrorKind::Failure,
            Error::NoSnapshots
            | Error::NoSnapshotAt(_)
            | Error::NoTarget(_)
            | Error::NoProcess(_)
            | Error::TooManyTargets(_)
            | Error::BadEntry(_)
            | Error::EmptyAddressRange { .. }
            | Error::InvalidOption(_) => udamon_core::ErrorKind::Usage,
        }
    }
}
