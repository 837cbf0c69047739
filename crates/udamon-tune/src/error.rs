//! The crate's one error type.

/// What can go wrong while tuning. `Usage` errors are the user's input (a
/// bad knob, range, weight, expression): the binary exits with code 2 on
/// them. The messages are lowercase, one line, name the bad value and what
/// would do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: a flag value, a knob, a range, a score expression.
    #[error("{0}")]
    Usage(String),
    /// A workload run failed.
    #[error("{0}")]
    Run(String),
    /// A score could not be computed (an expression that does not evaluate
    /// to a number, a score command that failed).
    #[error("{0}")]
    Score(String),
    /// The record could not be read or turned into a workload.
    #[error("{0}")]
    Record(String),
    /// The plot could not be drawn or written.
    #[error("cannot draw the plot: {0}")]
    Plot(String),
}

impl Error {
    /// Usage and a record that cannot be replayed are bad input; a run, a
    /// score or a plot that failed is a runtime failure.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        match self {
            Error::Usage(_) | Error::Record(_) => udamon_core::ErrorKind::Usage,
            Error::Run(_) | Error::Score(_) | Error::Plot(_) => udamon_core::ErrorKind::Failure,
        }
    }

    pub(crate) fn usage(msg: impl Into<String>) -> Error {
        Error::Usage(msg.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
