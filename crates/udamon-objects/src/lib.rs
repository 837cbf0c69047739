//! What is hot, by name: a record's regions named by the objects they
//! hold (data symbols of the mapped ELF files, their sections, mapped
//! files, anonymous memory, a simulated workload's objects), and the
//! objects report (`udamon report objects`).
//!
//! Depends on core, record (the `maps` entries), report (selections and
//! the target table) and elf (reading the files a record names).

pub mod allocs;
pub mod hints;
pub mod namer;
mod paths;
pub mod report;

pub use hints::{Hint, HintAction, Hints, HintsError, HintsOptions};
pub use namer::{Kind, Namer, NamerOptions, ObjId, Object};
pub use report::{build, namer_of, ObjectRow, ObjectsOptions, ObjectsReport};

use udamon_core::ErrorKind;

/// Why a report on objects could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Record(#[from] udamon_record::Error),
    #[error(transparent)]
    Report(#[from] udamon_report::Error),
    #[error("the record's mappings are not readable: {reason}")]
    BadEntry { reason: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Record(e) => e.kind(),
            Error::Report(e) => e.kind(),
            Error::BadEntry { .. } => ErrorKind::Usage,
            Error::Io(_) => ErrorKind::Failure,
        }
    }
}
