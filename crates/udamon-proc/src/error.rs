//! Errors of the live-process primitives.

use std::io;
use std::path::PathBuf;

/// What went wrong reading or writing a process's or the system's files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A primitive's file does not exist: the kernel lacks the feature.
    #[error("the {primitive} {} is missing (needs {provides})", path.display())]
    Missing {
        primitive: &'static str,
        path: PathBuf,
        provides: &'static str,
    },
    /// The process is gone (its /proc directory disappeared).
    #[error("process {pid} is gone ({} does not exist); pick a running pid", path.display())]
    Gone { pid: u32, path: PathBuf },
    /// pagemap reports present pages with PFN 0: the PFNs are hidden.
    #[error("{} hides page frame numbers (every present page reads PFN 0); reading PFNs needs root or CAP_SYS_ADMIN", path.display())]
    PfnHidden { path: PathBuf },
    /// Permission denied on a file.
    #[error("permission denied on {}: {source}; run as root or grant CAP_SYS_ADMIN (pagemap, idle bitmap) or CAP_SYS_PTRACE (another user's process)", path.display())]
    Denied { path: PathBuf, source: io::Error },
    /// A /proc/PID/maps line that does not parse.
    #[error("{} line {line}: cannot parse {text:?} as `start-end perms offset dev inode [path]`", path.display())]
    BadMaps {
        path: PathBuf,
        line: usize,
        text: String,
    },
    /// A cgroup given to follow is not one.
    #[error("cgroup {}: {why}", path.display())]
    Cgroup { path: PathBuf, why: String },
    /// An action's system call failed.
    #[error("{what} failed: {source}")]
    Action { what: String, source: io::Error },
    /// Any other I/O error.
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

impl Error {
    /// A kernel without the primitive, or a permission udamon lacks: a
    /// missing capability. A process that is not there: bad input (the
    /// pid given). The rest failed while running.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        use udamon_core::ErrorKind as K;
        match self {
            Error::Missing { .. } | Error::PfnHidden { .. } | Error::Denied { .. } => K::Capability,
            Error::Gone { .. } | Error::Cgroup { .. } => K::Usage,
            Error::BadMaps { .. } | Error::Action { .. } | Error::Io { .. } => K::Failure,
        }
    }

    /// Classifies an I/O error on `path`: permission errors become
    /// [`Error::Denied`], the rest [`Error::Io`].
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::PermissionDenied => Error::Denied {
                path: path.to_path_buf(),
                source,
            },
            _ => Error::Io {
                op,
                path: path.to_path_buf(),
                source,
            },
        }
    }
}
