//! One monitoring session: a target (a live process, a command udamon
//! starts, physical memory, or a simulated workload), the path that
//! watches it (kernel DAMON, our engine over the idle page bitmap or
//! soft-dirty bits, or our engine over the simulator), the schemes that act
//! on it, and the stream of what happens ([`Event`]). `udamon record`,
//! `udamon apply` and the service (`udamon run`) all drive a [`Session`];
//! [`Recorder`] writes its record. [`sim`] drives a simulated run to its
//! end in one call (`record --sim`, `apply --sim`, the tuner's runs), and
//! prepares the simulated workload a stepped session runs too.
//!
//! The feature probe ([`features`]) lives here, next to the path choice it
//! informs. Nothing here installs signal handlers or prints to stdout: the
//! caller passes its stop request to [`Session::next`] and decides what to
//! show; warnings go to the spec's [`Warner`] (stderr by default).

pub mod features;
pub mod kernel_features;
mod live;
pub mod maps;
mod program;
mod recorder;
mod schemes;
pub mod sim;
pub mod topology;

pub use live::{
    choose, cmdline, path_blocker, plan, rss_kb, rss_swap_kb, stat_cpu_s, AllocSites, Event,
    Finished, LiveTarget, OpsChoice, Paused, Session, SessionInfo, Spec,
};
pub use recorder::{CpuSpent, FileWriter, Gaps, LiveSummary, Processes, Recorder};
pub use schemes::{scheme_reports, SchemeReport, TargetStats};

/// Where a session's warnings go: by default stderr, as
/// "udamon: warning: ..."; the service sends them to its log, with the job
/// they belong to.
#[derive(Clone)]
pub struct Warner(std::sync::Arc<dyn Fn(&str) + Send + Sync>);

impl Warner {
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Warner(std::sync::Arc::new(f))
    }

    pub fn warn(&self, msg: &str) {
        (self.0)(msg)
    }
}

impl Default for Warner {
    fn default() -> Self {
        Warner::new(|m| eprintln!("udamon: warning: {m}"))
    }
}

impl std::fmt::Debug for Warner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Warner")
    }
}

/// Why a session could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What was asked is wrong (no such process, bad attributes, a path
    /// that cannot watch this target): the user's to fix.
    #[error("{0}")]
    Usage(String),
    /// This machine lacks what the session needs (a kernel feature, a
    /// permission).
    #[error("{0}")]
    Capability(String),
    /// Something failed while running (a sysfs write, a trace read).
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Record(#[from] udamon_record::Error),
}

impl Error {
    /// Usage and capability errors say so; a record error says its own
    /// kind; the rest failed while running.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        match self {
            Error::Usage(_) => udamon_core::ErrorKind::Usage,
            Error::Capability(_) => udamon_core::ErrorKind::Capability,
            Error::Failed(_) => udamon_core::ErrorKind::Failure,
            Error::Record(e) => e.kind(),
        }
    }

    fn failed(what: &str, e: impl std::fmt::Display) -> Self {
        Error::Failed(format!("{what}: {e}"))
    }
}

/// This process's CPU time (user + system) so far, in seconds.
pub fn self_cpu_s() -> f64 {
    rusage_s(libc::RUSAGE_SELF)
}

/// The calling thread's CPU time (user + system) so far, in seconds: a
/// service job's own cost when each job runs on its own thread.
pub fn thread_cpu_s() -> f64 {
    rusage_s(libc::RUSAGE_THREAD)
}

fn rusage_s(who: libc::c_int) -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
