//! DAMON's monitoring algorithms, pure and deterministic.
//!
//! Roles: [`Engine`] is the kdamond loop (sampling, counting, merge, split,
//! aging, ops updates, interval tuning) counted in sampling intervals on a
//! logical clock; [`Operations`] is the table of primitives a backend
//! provides under it; [`Monitor`] is the seam where another monitor
//! (kernel DAMON, a full-scan baseline) replaces the engine; [`Snapshot`] is
//! what every monitor reports at an aggregation boundary. No I/O, no wall
//! clock, no threads: randomness comes from the generator the caller injects.
//!
//! ```
//! use rand::SeedableRng;
//! use udamon_core::{AddrRange, Attrs, Engine, Monitor, Operations, SampleWindow, Target};
//!
//! /// Every sample in the first 4 KiB is accessed, nothing else.
//! struct FirstPageHot;
//! impl Operations for FirstPageHot {
//!     fn target_ranges(&mut self, _: usize, _: &Target) -> Option<Vec<AddrRange>> {
//!         Some(vec![AddrRange::new(0, 1 << 20)])
//!     }
//!     fn prepare_access_checks(&mut self, _: &[Target], _: SampleWindow) {}
//!     fn check_accesses(&mut self, t: &[Target], _: SampleWindow, acc: &mut Vec<bool>) {
//!         acc.clear();
//!         acc.extend(t.iter().flat_map(|t| &t.regions).map(|r| r.sampling_addr < 4096));
//!     }
//! }
//!
//! let rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
//! let mut engine = Engine::new(Attrs::default(), FirstPageHot, vec![Target::new(0)], rng).unwrap();
//! for _ in 0..50 {
//!     engine.next_snapshot().unwrap();
//! }
//! let snap = engine.next_snapshot().unwrap().unwrap();
//! let first = &snap.targets[0].regions[0];
//! assert_eq!(first.start, 0);
//! assert!(first.nr_accesses >= 15, "the hot page's region is seen hot");
//! ```

mod adapt;
mod attrs;
mod engine;
pub mod enhanced;
pub mod feedback;
mod monitor;
mod ops;
mod region;
pub mod schemes;
mod snapshot;
pub mod softdirty;
pub mod units;
pub mod vaddr;

pub use attrs::{max_nr_accesses, Attrs, IntervalsGoal, Mode};
pub use engine::{Adaptation, Engine};
pub use monitor::Monitor;
pub use ops::{ApplyOutcome, Operations, SampleWindow};
pub use region::{align_down, align_up, Addr, AddrRange, Region, Target};
pub use snapshot::{RegionSnapshot, Snapshot, TargetSnapshot};

/// The smallest region and the address granule: one 4 KiB page, as the
/// kernel's `DAMON_MIN_REGION` on x86-64.
pub const MIN_REGION_SZ: u64 = 4096;

/// What an error means for the person who ran udamon: every crate's
/// `Error` says which of these it is, and the command maps them to its exit
/// code once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input: a flag, a file, a spec, a record (exit code 2).
    Usage,
    /// The machine lacks what udamon needs: a kernel feature, a
    /// permission, a free kdamond (exit code 3).
    Capability,
    /// Something failed while running: I/O, a process, the kernel (exit
    /// code 1).
    Failure,
}

impl ErrorKind {
    /// The command's exit code for this kind: 2, 3 or 1.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::Capability => 3,
            ErrorKind::Failure => 1,
        }
    }
}

/// An error and each of its causes on one line, joined by ": ".
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Errors of the core.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("invalid monitoring attributes: {0}")]
    InvalidAttrs(String),
    #[error("no target has any region to monitor (the target has fewer than two gaps in its mappings or none at all)")]
    NoRegions,
    #[error("{0}")]
    Backend(String),
}

impl Error {
    /// Invalid attributes are the user's input; the rest happened while
    /// running.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidAttrs(_) => ErrorKind::Usage,
            Error::NoRegions | Error::Backend(_) => ErrorKind::Failure,
        }
    }
}

#[cfg(test)]
mod error_tests {
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_error_is_said_with_its_causes() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(super::error_chain(&e), "outer: inner");
    }

    #[test]
    fn each_kind_has_its_exit_code() {
        use super::ErrorKind as K;
        assert_eq!(
            [K::Usage, K::Capability, K::Failure].map(K::exit_code),
            [2, 3, 1]
        );
    }
}
