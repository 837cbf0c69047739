//! The udamon record format: a compact, append-only file of monitoring
//! snapshots.
//!
//! Role: this crate only reads and writes bytes. The snapshot types come in
//! from `udamon-core` ([`Snapshot`], [`Attrs`]); the `udamon` binary writes
//! records with [`Writer`] while it monitors, and `udamon-report` reads them
//! back with [`Reader`] to draw heatmaps and summaries.
//!
//! A record is a magic number, a format version, a JSON [`Header`] guarded by
//! a CRC32, then append-only frames. A frame is a small fixed header carrying
//! a summary ([`FrameInfo`]: time span, address span, number of snapshots)
//! and the CRC32 of its payload, followed by the zstd-compressed payload: a
//! run of entries, each a tag byte and a length, so a reader skips tags it
//! does not know. Snapshots are stored column by column and relative to the
//! previous snapshot of the same frame (a region that did not change costs
//! about four bytes before zstd and next to nothing after), so a record takes
//! 1.2 to 1.5 bytes per region and snapshot on noisy synthetic streams, 7 to
//! 9 times less than damo's; frames decode independently.
//!
//! A writer that closes its record appends a frame index, so a reader opens
//! a record of any length from its last bytes and checks each frame as it
//! reads it. A record cut short (a crash, a full disk) has no index and is
//! scanned; it stays readable up to its last intact frame. A frame damaged
//! in the middle loses that frame only, as reading resumes at the next
//! frame marker whose frame checks out (or, with an index, at the next
//! indexed frame).
//! [`Reader::damage`] says where, why and how much was lost, and
//! [`Reader::open`] reads a file a frame at a time, so memory does not grow
//! with the record's length. The exact layout is in `docs/record-format.md`.
//!
//! ```
//! use std::ops::ControlFlow;
//! use udamon_core::{Attrs, RegionSnapshot, Snapshot, TargetSnapshot};
//! use udamon_record::{Entry, Header, Reader, Writer};
//!
//! let header = Header::new("sim", Attrs::default());
//! let mut w = Writer::new(Vec::new(), &header)?;
//! for i in 0..100u64 {
//!     let regions = vec![
//!         RegionSnapshot { start: 0, end: 4096 * (10 + i % 3), nr_accesses: 0, age: i as u32 },
//!         RegionSnapshot { start: 4096 * (10 + i % 3), end: 1 << 30, nr_accesses: 5, age: 0 },
//!     ];
//!     let s = Snapshot {
//!         start_us: i * 100_000,
//!         end_us: (i + 1) * 100_000,
//!         sample_us: 5_000,
//!         aggr_us: 100_000,
//!         targets: vec![TargetSnapshot { target_idx: 0, regions }],
//!     };
//!     w.push_snapshot(&s)?;
//! }
//! w.push_json("summary", &serde_json::json!({ "snapshots": 100 }))?;
//! let bytes = w.finish()?;
//!
//! let r = Reader::from_bytes(bytes)?;
//! assert_eq!(r.header().kind, "sim");
//! assert_eq!(r.frames().len(), 2); // 64 snapshots per frame
//! assert_eq!(r.frames()[1].last_end_us, 10_000_000);
//! let snaps = r.snapshots()?;
//! assert_eq!(snaps.len(), 100);
//! assert_eq!(snaps[99].targets[0].regions[0].age, 99);
//! let mut kinds = Vec::new();
//! r.for_each_entry(|e| {
//!     if let Entry::Json { kind, .. } = e {
//!         kinds.push(kind.clone());
//!     }
//!     ControlFlow::Continue(())
//! })?;
//! assert_eq!(kinds, ["summary"]);
//! assert!(r.tail().is_none());
//! assert!(r.uses_index());
//! # Ok::<(), udamon_record::Error>(())
//! ```

mod codec;
mod frame;
mod index;
mod reader;
mod varint;
mod writer;

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
pub use udamon_core::{Attrs, Snapshot};

pub use reader::Reader;
pub use writer::{Writer, DEFAULT_FRAME_SNAPSHOTS, DEFAULT_ZSTD_LEVEL};

/// The first 8 bytes of every record.
pub const MAGIC: &[u8; 8] = b"UDAMONR\0";
/// The format version this crate writes (and the only one it reads).
pub const VERSION: u16 = 1;

/// The record's header: what was monitored, how, and by what.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The format version; the writer fills it in, the reader sets it from
    /// the file.
    pub version: u16,
    /// The program that wrote the record, e.g. `"udamon 0.1.0"`.
    pub created_by: String,
    /// What was monitored: `"sim"`, `"vaddr"`, `"paddr"`, `"kdamond"`, ...
    pub kind: String,
    /// The monitoring attributes at the start of the recording.
    pub attrs: Attrs,
    /// The monitored targets, in target index order.
    pub targets: Vec<TargetInfo>,
    /// For simulated recordings, how to reproduce them.
    pub sim: Option<SimInfo>,
    /// Free-form extra parameters (command line, host, ...).
    #[serde(default)]
    pub params: serde_json::Value,
}

impl Header {
    /// A header with no targets, no simulation info, no parameters, and
    /// `created_by` set to `"udamon <this crate's version>"`.
    pub fn new(kind: &str, attrs: Attrs) -> Self {
        Self {
            version: VERSION,
            created_by: format!("udamon {}", env!("CARGO_PKG_VERSION")),
            kind: kind.to_string(),
            attrs,
            targets: Vec::new(),
            sim: None,
            params: serde_json::Value::Null,
        }
    }
}

/// One monitored target. A record's targets are the header's, in target
/// index order, then those of its `target` entries with `"event":
/// "arrive"` (see [`TargetEvent`]), each at the next index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// The process id, 0 for the physical address space or a simulated one.
    pub pid: u32,
    /// A human-readable name (command line, workload name, ...).
    pub label: String,
    /// The process's start time (clock ticks after boot, `/proc/PID/stat`
    /// field 22): with the pid, the process's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// The process's name (`/proc/PID/comm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// The process's cgroup v2 path (`/proc/PID/cgroup`), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

impl TargetInfo {
    /// A target known by its pid and label only.
    pub fn new(pid: u32, label: impl Into<String>) -> Self {
        Self {
            pid,
            label: label.into(),
            ..Self::default()
        }
    }
}

/// The kind of the JSON entries that say a target arrived or left.
pub const TARGET_EVENT: &str = "target";

/// A target arriving after the start, or leaving, written as a JSON entry of
/// kind [`TARGET_EVENT`]. An arrival takes the next target index (the
/// header's targets come first); the snapshots from then on may carry it.
/// A target that left appears in no later snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum TargetEvent {
    Arrive {
        /// Wall time since the start of monitoring (us).
        at_us: u64,
        idx: u32,
        #[serde(flatten)]
        target: TargetInfo,
    },
    Exit {
        at_us: u64,
        idx: u32,
        /// "exited", "replaced" (its pid names another process now),
        /// "left" (no longer a member: it left the cgroup or the tree),
        /// "exec" (it exec'd; the new program arrives as a new target).
        why: String,
    },
}

/// The kind of the JSON entries that hold a target's mappings.
pub const MAPS_EVENT: &str = "maps";

/// A target's mappings (`/proc/PID/maps`, or a simulated workload's
/// layout), written as a JSON entry of kind [`MAPS_EVENT`] when monitoring
/// of the target starts and again whenever they changed (compared once per
/// ops update). Each entry is the whole list, so every frame names its
/// regions without reading earlier ones; the mappings hold from `at_us`
/// until the target's next `maps` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapsEvent {
    /// Wall time since the start of monitoring (us).
    pub at_us: u64,
    /// The target's index.
    pub idx: u32,
    pub maps: Vec<MapInfo>,
}

/// One mapping of a target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MapInfo {
    pub start: u64,
    pub end: u64,
    /// `rwxp`-style permissions, as `/proc/PID/maps` prints them.
    pub perms: String,
    /// Offset into the file (0 for anonymous memory).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: u64,
    /// `major:minor` of the file's device, as `/proc/PID/maps` prints it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dev: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inode: u64,
    /// The file, a pseudo-name (`[heap]`, `[stack]`, `[vdso]`, `[anon:NAME]`),
    /// a shared memory object (`/dev/zero (deleted)`, `/memfd:x`), a
    /// simulated object's name, or empty for anonymous memory.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// The GNU build-id of a mapped ELF file (lowercase hex), read when the
    /// mapping was recorded: a report names symbols only from a file with
    /// the same build-id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// How a simulated recording was made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimInfo {
    /// The workload specification, as TOML.
    pub spec_toml: String,
    pub seed: u64,
    /// `"adaptive"`, `"fixed-regions N"` or `"full-scan"`.
    pub monitor: String,
}

/// One entry of a record, in recording order.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    Snapshot(Snapshot),
    /// Anything else (scheme statistics, run summaries), tagged with a kind.
    Json {
        kind: String,
        value: serde_json::Value,
    },
}

/// A frame's summary, read from its uncompressed header without
/// decompressing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// Byte offset of the frame (its header) in the record.
    pub offset: u64,
    /// Length of the frame in bytes, header included.
    pub len: u64,
    pub nr_snapshots: u32,
    /// `start_us` of the frame's first snapshot (0 if it has none).
    pub first_start_us: u64,
    /// `end_us` of the frame's last snapshot (0 if it has none).
    pub last_end_us: u64,
    /// The lowest region start over the frame's snapshots (0 if no regions).
    pub min_addr: u64,
    /// The highest region end over the frame's snapshots (0 if no regions).
    pub max_addr: u64,
}

/// A damaged or truncated stretch of a record (a crash, a full disk, a
/// flipped bit). The frames before it are intact; reading goes on at the
/// next intact frame after it, if there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset where the unreadable bytes start.
    pub offset: u64,
    /// How many bytes are not read (up to the next intact frame, or to the
    /// end of the record).
    pub len: u64,
    /// What is wrong, naming the frame, e.g. "frame 12 declares 8000 bytes
    /// but only 311 remain".
    pub reason: String,
    /// Number of intact frames before it.
    pub frames_ok: usize,
    /// Number of snapshots in those frames.
    pub snapshots_ok: u64,
    /// Snapshots lost in it: exact when [`Damage::lost_exact`] (one frame
    /// whose header is intact), else estimated from the time the gap spans
    /// at the pace of the frame before; `None` when neither is known.
    pub snapshots_lost: Option<u64>,
    pub lost_exact: bool,
    /// Where reading resumes: the next intact frame, `None` at the end.
    pub resumes_at: Option<u64>,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "record is damaged at byte {}: {} ",
            self.offset, self.reason
        )?;
        if let Some(at) = self.resumes_at {
            let lost = match (self.snapshots_lost, self.lost_exact) {
                (Some(1), true) => "1 snapshot lost".to_string(),
                (Some(n), true) => format!("{n} snapshots lost"),
                (Some(n), false) => format!("about {n} snapshots lost"),
                (None, _) => "an unknown number of snapshots lost".to_string(),
            };
            return write!(
                f,
                "({} bytes skipped, {lost}; reading resumes at byte {at})",
                self.len
            );
        }
        if self.snapshots_ok == 1 {
            write!(f, "(the 1 snapshot before it is readable)")
        } else {
            write!(
                f,
                "(the {} snapshots before it are readable)",
                self.snapshots_ok
            )
        }
    }
}

impl std::error::Error for Damage {}

/// Errors of reading and writing records.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading, creating or writing a record file failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Writing to a [`Writer`] made with [`Writer::new`] failed.
    #[error("cannot write the record: {0}")]
    Write(#[source] std::io::Error),
    #[error("{path} is not a udamon record (magic {found}, expected \"UDAMONR\\0\"); give a file written by udamon")]
    NotARecord {
        /// The file's path, or "input" for [`Reader::from_bytes`].
        path: String,
        /// The file's first bytes, escaped.
        found: String,
    },
    #[error("record format version {0} is not supported (this udamon reads version {VERSION}); read it with a newer udamon")]
    UnsupportedVersion(u16),
    /// The header is truncated, fails its CRC, or is not valid JSON.
    #[error("damaged record header: {0}")]
    Header(String),
    /// A frame that passed its CRC does not decode (a writer bug or a forged
    /// file).
    #[error("record is corrupt at byte {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// The writer was given a snapshot it cannot store.
    #[error("cannot record the snapshot: {0}")]
    InvalidSnapshot(String),
    /// The writer was given an entry it cannot store.
    #[error("cannot record the entry: {0}")]
    InvalidEntry(String),
}

impl Error {
    /// Reading or writing failed: a runtime failure. Anything else is what
    /// the file (or the caller's snapshot) holds: bad input.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        match self {
            Error::Io { .. } | Error::Write(_) => udamon_core::ErrorKind::Failure,
            _ => udamon_core::ErrorKind::Usage,
        }
    }
}

/// Bytes as printable ASCII with escapes, quoted.
pub(crate) fn escape(b: &[u8]) -> String {
    format!("\"{}\"", b.escape_ascii())
}
