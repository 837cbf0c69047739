//! Why a bench part failed: a bad option, a step that failed and why, or
//! the error of a crate the bench drives, as it came (so that the caller
//! can still tell a usage error of that crate from a runtime failure).

/// Any error, with what made it (its source chain).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad option: a part that does not exist.
    #[error("{0}")]
    Usage(String),
    /// A step that failed, and the error that made it fail, if any.
    #[error("{what}")]
    Failed {
        what: String,
        #[source]
        cause: Option<Cause>,
    },
    /// The error of a crate the bench drives, unchanged.
    #[error(transparent)]
    Inner(Cause),
}

impl Error {
    /// A bad option is bad input; an error of a crate the bench drives
    /// keeps that crate's kind; anything else failed while running.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        use udamon_core::ErrorKind as K;
        let Error::Inner(cause) = self else {
            return match self {
                Error::Usage(_) => K::Usage,
                _ => K::Failure,
            };
        };
        macro_rules! kind_of {
            ($($t:ty),*) => {
                $(if let Some(e) = cause.downcast_ref::<$t>() {
                    return e.kind();
                })*
            };
        }
        kind_of!(
            udamon_core::Error,
            udamon_sim::Error,
            udamon_scheme_file::Error,
            udamon_service::Error,
            udamon_session::sim::SimError,
            udamon_tune::Error
        );
        K::Failure
    }

    /// A failure with nothing under it.
    pub(crate) fn msg(what: impl Into<String>) -> Error {
        Error::Failed {
            what: what.into(),
            cause: None,
        }
    }
}

macro_rules! inner {
    ($($t:ty),* $(,)?) => {
        $(impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::Inner(Box::new(e))
            }
        })*
    };
}

inner!(
    std::io::Error,
    serde_json::Error,
    udamon_core::Error,
    udamon_sim::Error,
    udamon_scheme_file::Error,
    udamon_service::Error,
    udamon_session::sim::SimError,
    udamon_tune::Error,
);

/// An error and its causes on one line, each after ": ".
pub(crate) use udamon_core::error_chain as chain;

/// Says what was being done when an error came, or that a value was
/// missing.
pub(crate) trait Context<T> {
    fn context(self, what: &str) -> Result<T>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Cause>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: &str) -> Result<T> {
        self.with_context(|| what.to_string())
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Failed {
            what: what(),
            cause: Some(e.into()),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: &str) -> Result<T> {
        self.ok_or_else(|| Error::msg(what))
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.ok_or_else(|| Error::msg(what()))
    }
}
