//! User-space access-check primitives for live processes.
//!
//! Role: the operations set under `udamon_core::Engine` when it monitors a
//! running process instead of the simulator. [`maps`] reads
//! `/proc/PID/maps` (and hands the mappings to
//! [`udamon_core::vaddr::monitoring_ranges`] for the three regions),
//! [`pagemap`] translates virtual pages to PFNs with one read per run of
//! contiguous pages, [`idle`] reads and writes the idle page bitmap by PFN,
//! [`batch`] hands each such set of reads or writes to the kernel in one
//! io_uring submission, and [`ProcOps`] puts them together as an
//! [`udamon_core::Operations`].
//! Collaborators: `udamon-core` (the engine and the trait) below, the
//! `udamon` binary (picks this backend, paces the engine by a real clock)
//! above. Every reader takes a root path ("/" in production), so tests run
//! on fake `/proc` and `/sys` trees.
//!
//! ```
//! use std::os::unix::fs::FileExt;
//! use udamon_proc::{idle::IdleBitmap, pagemap::Pagemap, PagemapEntry};
//!
//! let root = tempfile::tempdir().unwrap();
//! // A fake process 7 whose page 0x10 is present at PFN 5.
//! std::fs::create_dir_all(root.path().join("proc/7")).unwrap();
//! let pm = std::fs::File::create(root.path().join("proc/7/pagemap")).unwrap();
//! pm.write_all_at(&(PagemapEntry::PRESENT | 5).to_ne_bytes(), 0x10 * 8).unwrap();
//! // A fake idle bitmap for 64 PFNs.
//! std::fs::create_dir_all(root.path().join("sys/kernel/mm/page_idle")).unwrap();
//! std::fs::write(root.path().join("sys/kernel/mm/page_idle/bitmap"), [0u8; 8]).unwrap();
//!
//! let pfns = Pagemap::open(root.path(), 7).unwrap().pfns(&[0x10_123]).unwrap();
//! assert_eq!(pfns, vec![Some(5)]);
//! let bitmap = IdleBitmap::open(root.path()).unwrap();
//! bitmap.set_idle(&[5]).unwrap();
//! assert_eq!(bitmap.is_idle(&[5, 6]).unwrap(), vec![true, false]);
//! ```

pub mod act;
pub mod batch;
mod error;
pub mod idle;
pub mod maps;
pub mod members;
mod ops;
pub mod paddr;
pub mod pagemap;
mod stat;

pub use error::Error;
pub use maps::{read_maps, Mapping};
pub use members::{cgroup_of, Matcher, Member, Program, Tracker};
pub use ops::{
    clear_refs_path, machine_goal_value, node_mem_bp, node_room, proc_field, unsupported_reason,
    AccessMode, Paced, ProcOps, SoftDirtyStats, TargetEnd,
};
pub use paddr::{node_ram, system_ram, PaddrOps};
pub use pagemap::{Pagemap, PagemapEntry};
pub use stat::{clock_ticks_per_s, read_proc_file, start_time, stat_field, ProcStat};
