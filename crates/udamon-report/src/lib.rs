//! udamon-report: turns recorded snapshots into reports.
//!
//! Role: the read side of udamon. Snapshots come in through a
//! [`SnapshotSource`] (a record read by `udamon_record::Reader`, or a plain
//! slice of [`udamon_core::Snapshot`]s); report models come out, and
//! renderers write them as terminal text, JSON, PNG, SVG or HTML. Collaborators:
//! `udamon-core` defines the snapshots, `udamon-record` reads and writes
//! them on disk, and the `udamon` binary maps its flags onto the option
//! structs here ([`HeatmapOptions`], [`WssOptions`], [`HotOptions`],
//! [`ImageOptions`]) and calls the `build` and `write_*` functions. The
//! crate does no monitoring and touches no backend.
//!
//! Reports:
//! - [`heatmap`]: access frequency over time and address, with unmonitored
//!   gaps collapsed and the active address window chosen automatically;
//! - [`wss`]: working set size per snapshot, its average and percentiles;
//! - [`hot`]: hottest regions of a snapshot, or hottest address ranges
//!   averaged over time;
//! - [`raw`] and [`write_raw`]: the record as JSON lines;
//! - [`summary`]: the run's summary a record ends with, in words;
//! - [`targets`]: a record's processes (targets), when each arrived and
//!   left; `wss`, `hot` and `summary` break down by them;
//! - [`html`]: one self-contained page of the heatmap (zoomable), the
//!   working set, the hot table and the schemes' statistics.
//!
//! Every report streams: the heatmap makes two passes over the source, the
//! others one, and none holds all the snapshots.
//!
//! ```
//! use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};
//! use udamon_report::{heatmap, wss, HeatmapFormat, HeatmapOptions, WssOptions};
//!
//! // 1 MiB: the first 64 KiB always hot, the rest never accessed.
//! let snaps: Vec<Snapshot> = (0..10u64)
//!     .map(|i| Snapshot {
//!         start_us: i * 100_000,
//!         end_us: (i + 1) * 100_000,
//!         sample_us: 5_000,
//!         aggr_us: 100_000,
//!         targets: vec![TargetSnapshot {
//!             target_idx: 0,
//!             regions: vec![
//!                 RegionSnapshot { start: 0, end: 64 << 10, nr_accesses: 20, age: i as u32 },
//!                 RegionSnapshot { start: 64 << 10, end: 1 << 20, nr_accesses: 0, age: i as u32 },
//!             ],
//!         }],
//!     })
//!     .collect();
//!
//! let w = wss::build(&snaps, &WssOptions::default()).unwrap();
//! assert_eq!(w.wss_avg_bytes, 64 << 10);
//!
//! let opts = HeatmapOptions { all: true, time_bins: Some(2), addr_bins: Some(16), ..Default::default() };
//! let hm = heatmap::build(&snaps, &opts, HeatmapFormat::Text).unwrap();
//! assert_eq!(hm.cell(0, 0), Some(1.0)); // the hot 64 KiB is the first of 16 bins
//! assert_eq!(hm.cell(1, 15), Some(0.0));
//! let mut text = Vec::new();
//! hm.write_text(&mut text, false).unwrap();
//! assert!(String::from_utf8(text).unwrap().contains("9000000000000000"));
//! ```

pub mod color;
mod error;
pub mod heatmap;
pub mod hot;
pub mod html;
mod human;
pub mod raw;
mod record;
pub mod select;
mod source;
pub mod summary;
pub mod targets;
pub mod wss;

pub use error::Error;

/// What a target's addresses hold, by name, for the reports that name
/// them (`report hot`, the HTML page); `udamon_objects::Namer` is one.
/// Times are microseconds since the record's start.
pub trait Names {
    /// The object holding most of `start..end`, and "+N" others.
    fn main_object(&mut self, target: u32, at_us: u64, start: u64, end: u64) -> Option<String>;
    /// Every object within `start..end`, clipped to it, in address order.
    fn pieces(&mut self, target: u32, at_us: u64, start: u64, end: u64) -> Vec<(u64, u64, String)>;
}
pub use heatmap::{Heatmap, HeatmapFormat, HeatmapOptions, ImageOptions};
pub use hot::{Hot, HotOptions};
pub use html::{HtmlOptions, HtmlReport};
pub use human::{fmt_addr, fmt_bytes, fmt_us};
pub use record::write_raw;
pub use select::{Selected, Selection};
pub use source::SnapshotSource;
pub use targets::{TargetRow, TargetTable};
pub use wss::{Wss, WssOptions};
