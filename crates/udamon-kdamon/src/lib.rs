//! Kernel DAMON, driven through its sysfs interface, as a udamon [`Monitor`].
//!
//! Role: the backend that replaces udamon's own engine whole. [`KdamonDriver`]
//! creates one kdamond (or drives one of a [`KdamondSet`], several made at
//! once for sessions with different attributes) under `ROOT/sys/kernel/mm/damon/admin`, writes the
//! operations set, attributes, targets and schemes (translated from
//! `udamon_core::schemes::Damos` by [`translate`]), turns it on, and reads
//! results back: scheme statistics as [`DamosStats`] and, through a `stat`
//! scheme matching every region, tried regions as [`Snapshot`]s. [`trace`]
//! parses `damon:damon_aggregated` lines. Collaborators: `udamon-core`
//! (the `Monitor` trait, `Attrs`, `Damos`, `Snapshot`) below and the
//! `udamon` binary above. File access goes through [`Sysfs`] so tests put a
//! fake kernel over a temporary tree.
//!
//! Safety rule: before writing anything the driver reads `nr_kdamonds`; if a
//! kdamond exists that it did not create, it refuses with
//! [`Error::Foreign`] and writes nothing.
//!
//! [`Monitor`]: udamon_core::Monitor
//! [`DamosStats`]: udamon_core::schemes::DamosStats
//! [`Snapshot`]: udamon_core::Snapshot
//!
//! ```
//! use udamon_core::Attrs;
//! use udamon_kdamon::{KdamonConfig, KdamonDriver, Error, KTarget, OpsKind};
//!
//! // A fake tree where someone else's kdamond is running.
//! let root = tempfile::tempdir().unwrap();
//! let k = root.path().join("sys/kernel/mm/damon/admin/kdamonds");
//! std::fs::create_dir_all(k.join("0")).unwrap();
//! std::fs::write(k.join("nr_kdamonds"), "1\n").unwrap();
//! std::fs::write(k.join("0/state"), "on\n").unwrap();
//! std::fs::write(k.join("0/pid"), "4321\n").unwrap();
//!
//! let config = KdamonConfig {
//!     ops: OpsKind::Vaddr,
//!     targets: vec![KTarget { pid: Some(1234), ..KTarget::default() }],
//!     attrs: Attrs::default(),
//!     schemes: vec![],
//!     snapshots: true,
//! };
//! let mut driver = KdamonDriver::new(root.path().to_path_buf(), config);
//! let err = driver.start().unwrap_err();
//! assert!(matches!(err, Error::Foreign { .. }));
//! assert!(err.to_string().contains("never takes over another user's kdamond"));
//! assert_eq!(std::fs::read_to_string(k.join("nr_kdamonds")).unwrap(), "1\n");
//! ```

pub mod claim;
pub mod damon_stat;
mod driver;
mod error;
mod event;
pub mod raw;
mod set;
mod sysfs;
pub mod trace;
pub mod translate;

pub use damon_stat::DamonStat;
pub use driver::{admin_dir, KTarget, KdamonConfig, KdamonDriver, OpsKind, SchemeExtras};
pub use error::{needs_for_entry, needs_for_keyword, Error};
pub use set::{KdamondSet, Slot};
pub use sysfs::{FsIo, Sysfs};

#[cfg(test)]
mod tests;
