//! The HTML report: one self-contained page with the heatmap (zoomable and
//! pannable on a canvas, with a readout of the cell under the pointer), the
//! working set size over time and its percentiles, the hottest address
//! ranges, and, for records made with schemes, the schemes' applied bytes
//! and quotas over time.
//!
//! [`build`] reads a record into an [`HtmlReport`] (the heatmap, wss and
//! hot models of this crate, plus the mean age of each heatmap cell and the
//! scheme statistics entries); [`write_html`] turns that model into the
//! page. The page needs no network when it is viewed: its script and style
//! (`html/report.js`, `html/report.css`, written by hand) are inlined, and
//! the models are embedded as JSON, the heatmap's cells as base64 of one
//! byte each (see [`freq_code`] and [`AgeCodes`]), so an hour of record
//! at the default 1500 x 600 cells makes a page of about 2.5 MB.

use std::io::Write;
use std::ops::{ControlFlow, Range};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;

use serde_json::{json, Value};
use udamon_core::Snapshot;
use udamon_record::{Entry, Reader};

use crate::heatmap::{self, Heatmap, HeatmapFormat, HeatmapOptions};
use crate::hot::{self, Hot, HotOptions};
use crate::human::{fmt_addr, fmt_bytes, fmt_us};
use crate::wss::{self, Wss, WssByProcess, WssOptions};
use crate::{Error, Selection, SnapshotSource, TargetRow, TargetTable};

/// Most time bins (columns) of the page's heatmap; fewer when the record
/// has fewer snapshots in the time range.
pub const HTML_TIME_BINS: usize = 1500;
/// Address bins (rows) of the page's heatmap.
pub const HTML_ADDR_BINS: usize = 600;
/// Most points of the working-set chart: longer series are cut into this
/// many equal time buckets, each drawn as its minimum, maximum and mean.
pub const WSS_CHART_POINTS: usize = 3000;
/// Rows of the hot table.
pub const HOT_ROWS: usize = 20;
/// Most processes (targets) in the page's process picker: those seen in
/// the most windows.
pub const HTML_PROCESSES: usize = 12;
/// Most time bins of a process's own heatmap.
pub const PROCESS_TIME_BINS: usize = 500;
/// Most address bins of a process's own heatmap.
pub const PROCESS_ADDR_BINS: usize = 200;

const CSS: &str = include_str!("html/report.css");
const JS: &str = include_str!("html/report.js");

/// What the page shows. Every field but the bins maps to one command-line
/// flag of `udamon report html`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HtmlOptions {
    /// The only targets (by index, sorted) the page shows: the heatmap
    /// draws the first of them in the time range, the working set, hot
    /// table and process picker count them. Default: the heatmap draws the
    /// first target of the first snapshot in the time range; the others
    /// cover all targets.
    pub targets: Option<Vec<u32>>,
    /// Time range `[start, end)` in microseconds since the record's start.
    /// Default: the whole record.
    pub time_range: Option<(u64, u64)>,
    /// Address range `[start, end)`: the heatmap's window, and the only
    /// addresses the working set and hot table count. Default: the
    /// heatmap's automatic active window; all addresses for the others.
    pub address_range: Option<(u64, u64)>,
    /// Heatmap time bins. Default: the snapshots in the time range, at most
    /// [`HTML_TIME_BINS`].
    pub time_bins: Option<usize>,
    /// Heatmap address bins. Default: [`HTML_ADDR_BINS`].
    pub addr_bins: Option<usize>,
}

/// Everything the page shows, built by [`build`].
#[derive(Clone, Debug, PartialEq)]
pub struct HtmlReport {
    pub heatmap: Heatmap,
    /// Mean age of each heatmap cell in microseconds (see
    /// [`heatmap::build_with_ages`]), NaN where nothing was monitored.
    pub ages_us: Vec<f64>,
    /// The working set over the time range, times since the record's start.
    pub wss: Wss,
    /// The hottest address ranges over the time range (aggregate mode).
    pub hot: Hot,
    /// Scheme statistics, when the record has any in the time range.
    pub schemes: Option<SchemeSeries>,
    /// The processes (targets) the snapshots hold, when there are two or
    /// more: the page's process picker.
    pub processes: Option<ProcessPicker>,
    /// What the heatmap's addresses hold, by name, when the caller named
    /// them ([`HtmlReport::name_objects`]): shown as the pointer moves.
    pub objects: Vec<(u64, u64, String)>,
}

/// The page's process picker: each process's own heatmap and working set.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessPicker {
    /// Processes the selected snapshots hold.
    pub total: usize,
    /// Those seen in the most windows, at most [`HTML_PROCESSES`], by index.
    pub views: Vec<ProcessView>,
}

/// One process on the page.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessView {
    pub process: TargetRow,
    /// Snapshots that hold it.
    pub windows: usize,
    /// Its heatmap, over the page's time range.
    pub heatmap: Heatmap,
    pub ages_us: Vec<f64>,
    /// Its working set over the windows that hold it.
    pub wss: Wss,
    /// What its heatmap's addresses hold, as [`HtmlReport::objects`].
    pub objects: Vec<(u64, u64, String)>,
}

/// At most this many named pieces per heatmap (the largest kept).
pub const HTML_OBJECTS: usize = 20_000;

/// The objects within a heatmap's segments at the end of its time range.
fn heatmap_objects(hm: &Heatmap, names: &mut dyn crate::Names) -> Vec<(u64, u64, String)> {
    let mut out = Vec::new();
    for g in &hm.segments {
        out.extend(names.pieces(hm.target_idx, hm.end_us, g.addr_start, g.addr_end));
    }
    if out.len() > HTML_OBJECTS {
        out.sort_by_key(|(a, b, _)| std::cmp::Reverse(b - a));
        out.truncate(HTML_OBJECTS);
        out.sort_by_key(|(a, _, _)| *a);
    }
    out
}

impl HtmlReport {
    /// Names the hot table's ranges and what each heatmap's addresses
    /// hold.
    pub fn name_objects(&mut self, names: &mut dyn crate::Names) {
        self.hot.name_objects(names);
        self.objects = heatmap_objects(&self.heatmap, names);
        if let Some(p) = &mut self.processes {
            for v in &mut p.views {
                v.objects = heatmap_objects(&v.heatmap, names);
            }
        }
    }
}

/// The scheme statistics a record holds (JSON entries of kind `schemes`,
/// written about once a second by `udamon apply`, `udamon run` and
/// recording with schemes), per scheme.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeSeries {
    /// Readings in the time range.
    pub readings: usize,
    pub schemes: Vec<SchemeTrack>,
}

/// One scheme's statistics over time.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeTrack {
    pub index: u64,
    pub action: String,
    pub description: String,
    /// In reading order. The kernel's counters (`sz_tried`, `sz_applied`,
    /// `qt_exceeds`) add up over every apply pass since the start.
    pub points: Vec<SchemePoint>,
}

/// One reading of one scheme; `None` where the record does not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchemePoint {
    /// Time of the reading, microseconds since the record's start.
    pub at_us: u64,
    pub sz_tried: Option<u64>,
    pub sz_applied: Option<u64>,
    pub nr_applied: Option<u64>,
    pub qt_exceeds: Option<u64>,
    /// The effective size quota of the current quota window; `None` when
    /// unlimited or unknown.
    pub effective_quota_bytes: Option<u64>,
}

impl SchemeSeries {
    /// The series from a record's `schemes` entries (`{end_us, schemes:
    /// [...]}`, `end_us` in the snapshots' clock), keeping the readings
    /// whose time since `record_start_us` is in `time_range`. `None` when
    /// no reading is left.
    pub fn from_entries(
        record_start_us: u64,
        entries: &[Value],
        time_range: Option<(u64, u64)>,
    ) -> Option<SchemeSeries> {
        let mut out = SchemeSeries {
            readings: 0,
            schemes: Vec::new(),
        };
        for e in entries {
            let Some(end_us) = e["end_us"].as_u64() else {
                continue;
            };
            let at_us = end_us.saturating_sub(record_start_us);
            if time_range.is_some_and(|(a, b)| at_us < a || at_us >= b) {
                continue;
            }
            let Some(list) = e["schemes"].as_array() else {
                continue;
            };
            out.readings += 1;
            for (i, s) in list.iter().enumerate() {
                let index = s["index"].as_u64().unwrap_or(i as u64);
                let track = match out.schemes.iter().position(|t| t.index == index) {
                    Some(k) => &mut out.schemes[k],
                    None => {
                        out.schemes.push(SchemeTrack {
                            index,
                            action: s["action"].as_str().unwrap_or("?").to_string(),
                            description: s["description"].as_str().unwrap_or("").to_string(),
                            points: Vec::new(),
                        });
                        out.schemes.last_mut().expect("just pushed")
                    }
                };
                track.points.push(SchemePoint {
                    at_us,
                    sz_tried: s["sz_tried"].as_u64(),
                    sz_applied: s["sz_applied"].as_u64(),
                    nr_applied: s["nr_applied"].as_u64(),
                    qt_exceeds: s["qt_exceeds"].as_u64(),
                    effective_quota_bytes: s["effective_quota_bytes"].as_u64(),
                });
            }
        }
        out.schemes.sort_by_key(|t| t.index);
        (out.readings > 0).then_some(out)
    }
}

/// Reads `reader` into the page's models. The record is decoded twice
/// (the heatmap makes two passes) on this thread, and each pass is handed
/// in batches to the reports, each on a thread of its own: the heatmap
/// (with ages) reads both passes, the working set the first, and the
/// scheme statistics are kept from the first. The hot table reads the
/// record on its own thread. With a time range, only the frames that may
/// hold it are read.
pub fn build(reader: &Reader, opts: &HtmlOptions) -> Result<HtmlReport, Error> {
    let (hopts, wopts, kopts) = report_options(reader, opts);
    let record_start = reader.record_start_us()?.ok_or(Error::NoSnapshots)?;
    let abs_range = opts.time_range.map(|(a, b)| {
        (
            record_start.saturating_add(a),
            record_start.saturating_add(b),
        )
    });
    // Only the frames that may hold the time range: every report counts
    // time from the record's start, which the pipes give.
    let frames = Selection {
        time_us: abs_range,
        ..Selection::default()
    }
    .frames(reader.frames());
    let pipe = || {
        let (tx, rx) = mpsc::sync_channel(2);
        (
            Some(tx),
            Piped {
                rx,
                record_start_us: record_start,
            },
        )
    };
    let cut = |inner, drop_empty| Cut {
        inner,
        address: opts.address_range,
        time_us: abs_range,
        targets: opts.targets.clone(),
        drop_empty,
    };
    let (htx, hsrc) = pipe();
    let (wtx, wsrc) = pipe();
    let (ktx, ksrc) = pipe();
    let (ptx, psrc) = pipe();
    let (hsrc, wsrc, ksrc, psrc) = (
        Cut {
            address: None,
            ..cut(hsrc, true)
        },
        cut(wsrc, false),
        cut(ksrc, false),
        cut(psrc, true),
    );
    let (report, by_process, entries) = std::thread::scope(|scope| {
        let hm = scope.spawn(move || heatmap::build_with_ages(&hsrc, &hopts, HeatmapFormat::Json));
        let ws = scope.spawn(move || wss::build(&wsrc, &wopts));
        let hot = scope.spawn(move || hot::build(&ksrc, &kopts));
        let wopts = WssOptions::default();
        let pw = scope.spawn(move || wss::build_by_process(&psrc, &wopts, &TargetTable::default()));
        let mut entries = Vec::new();
        let mut to = [htx, wtx, ktx, ptx];
        let read = feed(reader, &frames, &mut to, Some(&mut entries)).and_then(|()| {
            // Only the heatmap reads twice.
            to[1..].iter_mut().for_each(|t| *t = None);
            feed(reader, &frames, &mut to[..1], None)
        });
        drop(to);
        let hm = join(hm);
        let ws = join(ws);
        let hot = join(hot);
        let pw = join(pw);
        // A failure to read the record explains the reports' failures.
        read?;
        let (heatmap, ages_us) = hm?;
        let (schemes, targets): (Vec<_>, Vec<_>) =
            entries.into_iter().partition(|(k, _)| k == "schemes");
        let report = HtmlReport {
            heatmap,
            ages_us,
            wss: ws?,
            hot: hot?,
            schemes: SchemeSeries::from_entries(
                record_start,
                &schemes.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
                opts.time_range,
            ),
            processes: None,
            objects: Vec::new(),
        };
        Ok::<_, Error>((report, pw?, targets))
    })?;
    let mut report = report;
    if by_process.processes.len() >= 2 {
        let table = if frames == (0..reader.frames().len()) {
            TargetTable::from_values(
                &reader.header().targets,
                entries.iter().map(|(_, v)| v),
                crate::targets::MAX_TARGETS,
            )?
        } else {
            TargetTable::read(reader)?
        };
        let views = PickerPlan {
            reader,
            frames: &frames,
            record_start,
            abs_range,
            opts,
            time_bins: report.heatmap.time_bins.min(PROCESS_TIME_BINS),
            addr_bins: report.heatmap.addr_bins.min(PROCESS_ADDR_BINS),
        }
        .views(&by_process, &table)?;
        report.processes = Some(ProcessPicker {
            total: by_process.processes.len(),
            views,
        });
    }
    Ok(report)
}

/// The options of the page's heatmap, working set and hot table.
fn report_options(reader: &Reader, opts: &HtmlOptions) -> (HeatmapOptions, WssOptions, HotOptions) {
    let single = match opts.targets.as_deref() {
        Some([t]) => Some(*t),
        _ => None,
    };
    let hopts = HeatmapOptions {
        target: single,
        time_range: opts.time_range,
        address_range: opts.address_range,
        all: false,
        time_bins: Some(
            opts.time_bins
                .unwrap_or_else(|| auto_time_bins(reader, opts.time_range)),
        ),
        addr_bins: Some(opts.addr_bins.unwrap_or(HTML_ADDR_BINS)),
    };
    let wopts = WssOptions {
        target: single,
        ..WssOptions::default()
    };
    let kopts = HotOptions {
        aggregate: true,
        time_range: opts.time_range,
        top: HOT_ROWS,
        target: single,
        at_us: None,
    };
    (hopts, wopts, kopts)
}

/// What the process picker's heatmaps read.
struct PickerPlan<'a> {
    reader: &'a Reader,
    frames: &'a Range<usize>,
    record_start: u64,
    abs_range: Option<(u64, u64)>,
    opts: &'a HtmlOptions,
    time_bins: usize,
    addr_bins: usize,
}

impl PickerPlan<'_> {
    /// The views of the processes seen in the most windows, each its own
    /// heatmap (two more passes, one thread each) and working set. A
    /// process with nothing to draw (no region in the address range) is
    /// left out.
    fn views(&self, by: &WssByProcess, table: &TargetTable) -> Result<Vec<ProcessView>, Error> {
        let mut chosen: Vec<&wss::ProcessWss> = by.processes.iter().collect();
        chosen.sort_by_key(|p| (std::cmp::Reverse(p.windows), p.process.target_idx));
        chosen.truncate(HTML_PROCESSES);
        chosen.sort_by_key(|p| p.process.target_idx);
        let mut to = Vec::new();
        let mut srcs = Vec::new();
        for _ in &chosen {
            let (tx, rx) = mpsc::sync_channel(2);
            to.push(Some(tx));
            srcs.push(Cut {
                inner: Piped {
                    rx,
                    record_start_us: self.record_start,
                },
                address: None,
                time_us: self.abs_range,
                targets: None,
                drop_empty: false,
            });
        }
        let maps = std::thread::scope(|scope| {
            let threads: Vec<_> = chosen
                .iter()
                .zip(srcs)
                .map(|(p, src)| {
                    let hopts = HeatmapOptions {
                        target: Some(p.process.target_idx),
                        time_range: self.opts.time_range,
                        address_range: self.opts.address_range,
                        all: false,
                        time_bins: Some(self.time_bins),
                        addr_bins: Some(self.addr_bins),
                    };
                    scope.spawn(move || heatmap::build_with_ages(&src, &hopts, HeatmapFormat::Json))
                })
                .collect();
            let read = feed(self.reader, self.frames, &mut to, None)
                .and_then(|()| feed(self.reader, self.frames, &mut to, None));
            drop(to);
            let maps: Vec<_> = threads.into_iter().map(join).collect();
            read.map(|()| maps)
        })?;
        let mut views = Vec::new();
        for (p, map) in chosen.into_iter().zip(maps) {
            let (heatmap, ages_us) = match map {
                Ok(m) => m,
                Err(Error::NoTarget(_) | Error::NoSnapshots | Error::EmptyAddressRange { .. }) => {
                    continue
                }
                Err(e) => return Err(e),
            };
            views.push(ProcessView {
                objects: Vec::new(),
                process: table.row(p.process.target_idx),
                windows: p.windows,
                heatmap,
                ages_us,
                wss: Wss {
                    target_idx: Some(p.process.target_idx),
                    acc_thres: by.acc_thres,
                    sz_thres_bytes: by.sz_thres_bytes,
                    skipped: 0,
                    wss_avg_bytes: p.wss_avg_bytes,
                    percentiles: p.percentiles.clone(),
                    series: p.series.clone(),
                },
            });
        }
        Ok(views)
    }
}

/// A thread's result, its panic passed on.
fn join<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    match h.join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Time bins when not given: one per snapshot in the time range (estimated
/// from the frames' times, which are read without decoding), at most
/// [`HTML_TIME_BINS`].
fn auto_time_bins(reader: &Reader, time_range: Option<(u64, u64)>) -> usize {
    let n = reader.nr_snapshots();
    let frames = reader.frames().iter().filter(|f| f.nr_snapshots > 0);
    let first = frames.clone().map(|f| f.first_start_us).min().unwrap_or(0);
    let last = frames.map(|f| f.last_end_us).max().unwrap_or(0);
    let span = last.saturating_sub(first);
    let est = match time_range {
        Some((a, b)) if span > 0 => {
            let inside = crate::source::overlap(a, b, 0, span);
            (n as u128 * inside as u128).div_ceil(span as u128) as u64
        }
        _ => n,
    };
    (est as usize).clamp(1, HTML_TIME_BINS)
}

/// What the reading thread hands a report's thread.
enum Msg {
    Batch(Arc<Vec<Snapshot>>),
    EndOfPass,
    Failed(String),
}

/// Snapshots per batch, and regions: a batch holds at most about this many
/// regions (a few MiB), so the pipes hold little whatever the record.
const BATCH_SNAPSHOTS: usize = 32;
const BATCH_REGIONS: usize = 1 << 16;

/// Decodes `frames` once and hands every snapshot
/// to each report still reading, then marks the end of the pass; a report
/// that stopped reading is left out, and reading stops when none is left.
/// The `schemes` and `target` entries are kept in `entries`.
fn feed(
    reader: &Reader,
    frames: &Range<usize>,
    to: &mut [Option<SyncSender<Msg>>],
    mut entries: Option<&mut Vec<(String, Value)>>,
) -> Result<(), Error> {
    let send = |to: &mut [Option<SyncSender<Msg>>], batch: Vec<Snapshot>| {
        let batch = Arc::new(batch);
        for t in to.iter_mut() {
            if t.as_ref()
                .is_some_and(|tx| tx.send(Msg::Batch(Arc::clone(&batch))).is_err())
            {
                *t = None;
            }
        }
        to.iter().any(Option::is_some)
    };
    let mut batch: Vec<Snapshot> = Vec::new();
    let mut regions = 0;
    let res = reader.for_each_entry_in(frames.clone(), |e| {
        match e {
            Entry::Snapshot(s) => {
                regions += s.nr_regions();
                batch.push(s.clone());
                if batch.len() >= BATCH_SNAPSHOTS || regions >= BATCH_REGIONS {
                    regions = 0;
                    if !send(to, std::mem::take(&mut batch)) {
                        return ControlFlow::Break(());
                    }
                }
            }
            Entry::Json { kind, value } => {
                if let Some(e) = entries.as_deref_mut() {
                    if kind == "schemes" || kind == udamon_record::TARGET_EVENT {
                        e.push((kind.clone(), value.clone()));
                    }
                }
            }
        }
        ControlFlow::Continue(())
    });
    let end = match &res {
        Ok(()) => {
            if !batch.is_empty() {
                send(to, batch);
            }
            Msg::EndOfPass
        }
        Err(e) => Msg::Failed(e.to_string()),
    };
    for t in to.iter().flatten() {
        let _ = t.send(match &end {
            Msg::EndOfPass => Msg::EndOfPass,
            Msg::Failed(m) => Msg::Failed(m.clone()),
            Msg::Batch(_) => unreachable!(),
        });
    }
    res.map_err(Error::from)
}

/// A report's side of [`feed`]: every pass reads one stream of batches.
struct Piped {
    rx: Receiver<Msg>,
    record_start_us: u64,
}

impl SnapshotSource for Piped {
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        let mut stopped = false;
        loop {
            match self.rx.recv() {
                Ok(Msg::Batch(b)) if !stopped => {
                    stopped = b.iter().any(|s| f(s).is_break());
                }
                // A pass stopped early still reads to its end, so the next
                // pass starts at the start.
                Ok(Msg::Batch(_)) => {}
                Ok(Msg::EndOfPass) => return Ok(()),
                Ok(Msg::Failed(m)) => return Err(Error::Source(m)),
                Err(_) => return Err(Error::Source("the record's reader stopped".into())),
            }
        }
    }

    fn record_start_us(&self) -> Result<Option<u64>, Error> {
        Ok(Some(self.record_start_us))
    }

    fn last_snapshot(&self) -> Result<Option<Snapshot>, Error> {
        Err(Error::Source(
            "the page's reports read the record in passes, not from its end".into(),
        ))
    }
}

/// A source as the page's reports read it: snapshots outside `time_us`
/// (the snapshots' own clock) left out, and regions cut to `address` and
/// `targets` (a snapshot with none left is still handed on, empty, so it
/// counts as a working set of 0, unless `drop_empty`). Times still count
/// from the record's start.
struct Cut<S> {
    inner: S,
    address: Option<(u64, u64)>,
    time_us: Option<(u64, u64)>,
    targets: Option<Vec<u32>>,
    drop_empty: bool,
}

impl<S: SnapshotSource> SnapshotSource for Cut<S> {
    fn for_each_snapshot(
        &self,
        f: &mut dyn FnMut(&Snapshot) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        let sel = Selection {
            address: self.address,
            time_us: self.time_us,
            targets: self.targets.clone(),
        };
        let mut cut = Snapshot::default();
        self.inner.for_each_snapshot(&mut |s| {
            if !sel.in_time(s.start_us, s.end_us) {
                return ControlFlow::Continue(());
            }
            if self.address.is_none() && self.targets.is_none() {
                return f(s);
            }
            if !sel.apply(s, &mut cut) && self.drop_empty {
                return ControlFlow::Continue(());
            }
            f(&cut)
        })
    }

    fn record_start_us(&self) -> Result<Option<u64>, Error> {
        self.inner.record_start_us()
    }
}

/// The byte a heatmap cell's access frequency is embedded as: 0 for a cell
/// nothing monitored, else `1 + round(254 x frequency)` (steps of 0.4%).
pub fn freq_code(freq: f64) -> u8 {
    if freq.is_nan() {
        0
    } else {
        1 + (freq.clamp(0.0, 1.0) * 254.0).round() as u8
    }
}

/// How cell ages are embedded: 0 for a cell nothing monitored, else
/// `1 + round(k x log2(1 + age_ms))`, with `k` chosen so that the oldest
/// cell is 255; each step is a few percent of the age.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AgeCodes {
    pub k: f64,
}

impl AgeCodes {
    /// Codes for ages up to the largest of `ages_us`.
    pub fn for_ages(ages_us: &[f64]) -> Self {
        let max = ages_us
            .iter()
            .copied()
            .filter(|a| a.is_finite())
            .fold(0.0f64, f64::max);
        Self {
            k: 254.0 / (1.0 + max / 1000.0).log2().max(1.0),
        }
    }

    pub fn code(&self, age_us: f64) -> u8 {
        if age_us.is_nan() {
            0
        } else {
            (1.0 + (self.k * (1.0 + age_us.max(0.0) / 1000.0).log2()).round()).min(255.0) as u8
        }
    }

    /// The age a code stands for (the page's script does the same).
    pub fn age_us(&self, code: u8) -> Option<f64> {
        (code > 0).then(|| 1000.0 * ((f64::from(code) - 1.0) / self.k).exp2() - 1000.0)
    }
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                out.push(ABC[(n >> shift & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The models as the page's script reads them (embedded as JSON):
/// addresses are hex strings (JavaScript numbers hold 53 bits), times are
/// microseconds since the record's start, sizes bytes.
pub fn page_data(r: &HtmlReport) -> Value {
    let schemes = r.schemes.as_ref().map(|s| {
        let tracks: Vec<Value> = s
            .schemes
            .iter()
            .map(|t| {
                json!({
                    "index": t.index,
                    "action": t.action,
                    "t": t.points.iter().map(|p| p.at_us).collect::<Vec<_>>(),
                    "applied": t.points.iter().map(|p| p.sz_applied).collect::<Vec<_>>(),
                    "quota": t.points.iter().map(|p| p.effective_quota_bytes).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({ "readings": s.readings, "schemes": tracks })
    });
    json!({
        "heatmap": heatmap_data(&r.heatmap, &r.ages_us, &r.objects),
        "wss": wss_chart(&r.wss),
        "schemes": schemes,
    })
}

/// The process picker's data, `null` without one: `total` (processes the
/// selected snapshots hold) and `list`, per process its `target_idx`,
/// `pid`, `start`, `comm`, `cgroup`, `label`, `arrived_us`, `left_us`,
/// `left_why`, `name`, `windows`, and its own `heatmap` and `wss` as in
/// [`page_data`].
pub fn process_data(r: &HtmlReport) -> Value {
    let Some(p) = &r.processes else {
        return Value::Null;
    };
    let list: Vec<Value> = p
        .views
        .iter()
        .map(|v| {
            let mut o = serde_json::to_value(&v.process).unwrap_or(Value::Null);
            if let Some(m) = o.as_object_mut() {
                m.insert("name".into(), v.process.name().into());
                m.insert("windows".into(), v.windows.into());
                m.insert(
                    "heatmap".into(),
                    heatmap_data(&v.heatmap, &v.ages_us, &v.objects),
                );
                m.insert("wss".into(), wss_chart(&v.wss));
            }
            o
        })
        .collect();
    json!({ "total": p.total, "list": list })
}

/// A heatmap as the page's script reads it.
/// Named pieces as the page reads them: `names`, and `spans`, three
/// numbers per piece (axis start, axis end, index into `names`), in axis
/// order. Axis positions (bytes from the axis start) stay below 2^53,
/// unlike addresses.
fn objects_data(hm: &Heatmap, objects: &[(u64, u64, String)]) -> Value {
    let mut names: Vec<&str> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut spans: Vec<u64> = Vec::with_capacity(objects.len() * 3);
    for (a, b, name) in objects {
        let Some(g) = hm
            .segments
            .iter()
            .find(|g| g.addr_start <= *a && *a < g.addr_end)
        else {
            continue;
        };
        let n = *index.entry(name).or_insert_with(|| {
            names.push(name);
            names.len() - 1
        });
        let off = g.axis_offset + (a - g.addr_start);
        spans.extend([off, off + (b.min(&g.addr_end) - a), n as u64]);
    }
    json!({ "names": names, "spans": spans })
}

fn heatmap_data(hm: &Heatmap, ages_us: &[f64], objects: &[(u64, u64, String)]) -> Value {
    let ages = AgeCodes::for_ages(ages_us);
    let freq: Vec<u8> = hm.cells.iter().map(|&f| freq_code(f)).collect();
    let age: Vec<u8> = ages_us.iter().map(|&a| ages.code(a)).collect();
    let segments: Vec<Value> = hm
        .segments
        .iter()
        .map(|g| {
            json!({
                "start": fmt_addr(g.addr_start),
                "len": g.len(),
                "off": g.axis_offset,
                "gap": g.gap_before,
            })
        })
        .collect();
    json!({
        "target_idx": hm.target_idx,
        "start_us": hm.start_us,
        "end_us": hm.end_us,
        "time_bins": hm.time_bins,
        "addr_bins": hm.addr_bins,
        "axis_bytes": hm.axis_bytes,
        "segments": segments,
        "freq": base64(&freq),
        "age": base64(&age),
        "age_k": ages.k,
        "objects": objects_data(hm, objects),
    })
}

/// The working-set series as chart points `{t, lo, hi, mean}`: every
/// snapshot up to [`WSS_CHART_POINTS`], else that many equal time buckets.
fn wss_chart(w: &Wss) -> Value {
    let s = &w.series;
    let (mut t, mut lo, mut hi, mut mean) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if s.len() <= WSS_CHART_POINTS {
        for p in s {
            t.push(p.end_us);
            lo.push(p.wss_bytes);
            hi.push(p.wss_bytes);
            mean.push(p.wss_bytes);
        }
    } else {
        let (t0, t1) = (s[0].end_us, s[s.len() - 1].end_us);
        let width = (t1 - t0) as f64 / WSS_CHART_POINTS as f64;
        let mut i = 0;
        while i < s.len() {
            let b = (((s[i].end_us - t0) as f64 / width) as usize).min(WSS_CHART_POINTS - 1);
            let (mut n, mut sum_t, mut sum, mut mn, mut mx) = (0u64, 0u128, 0u128, u64::MAX, 0);
            while i < s.len()
                && (((s[i].end_us - t0) as f64 / width) as usize).min(WSS_CHART_POINTS - 1) == b
            {
                n += 1;
                sum_t += u128::from(s[i].end_us);
                sum += u128::from(s[i].wss_bytes);
                mn = mn.min(s[i].wss_bytes);
                mx = mx.max(s[i].wss_bytes);
                i += 1;
            }
            t.push((sum_t / u128::from(n)) as u64);
            lo.push(mn);
            hi.push(mx);
            mean.push((sum / u128::from(n)) as u64);
        }
    }
    json!({ "t": t, "lo": lo, "hi": hi, "mean": mean, "bucketed": s.len() > WSS_CHART_POINTS })
}

/// Text for HTML element content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A time since the record's start: "0 s" rather than "0 us".
fn since(us: u64) -> String {
    if us == 0 {
        "0 s".to_string()
    } else {
        fmt_us(us)
    }
}

fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

/// Writes the page: `title` on top, `source` (the record's name) under it.
pub fn write_html(
    w: &mut impl Write,
    r: &HtmlReport,
    title: &str,
    source: &str,
) -> Result<(), Error> {
    let hm = &r.heatmap;
    let window = match hm.window {
        heatmap::AddressWindow::Active => match hm.access_share {
            Some(s) => format!("the active window, {} of the accesses", pct(s)),
            None => "the active window".to_string(),
        },
        heatmap::AddressWindow::All => "every monitored range".to_string(),
        heatmap::AddressWindow::Given => "the given address range".to_string(),
    };
    writeln!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">"
    )?;
    writeln!(
        w,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    )?;
    writeln!(
        w,
        "<meta name=\"generator\" content=\"udamon {}\">",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(w, "<title>{} - udamon</title>", esc(title))?;
    // No favicon to ask for.
    writeln!(w, "<link rel=\"icon\" href=\"data:,\">")?;
    writeln!(w, "<style>\n{CSS}</style>\n</head>\n<body>")?;
    writeln!(w, "<header>\n<h1>{}</h1>", esc(title))?;
    writeln!(
        w,
        "<p class=\"meta\">{} &middot; target {} &middot; {} to {} since the record's start &middot; \
         {} snapshots &middot; {} of {} monitored shown ({})</p>\n</header>",
        esc(source),
        hm.target_idx,
        since(hm.start_us),
        since(hm.end_us),
        hm.nr_snapshots,
        fmt_bytes(hm.axis_bytes),
        fmt_bytes(hm.monitored_bytes),
        esc(&window)
    )?;
    if let Some(p) = &r.processes {
        write_picker(w, p, hm.target_idx)?;
    }

    w.write_all(
        br#"<section id="heat-section">
<h2>Access frequency over time and address</h2>
<div class="toolbar"><button id="reset" type="button">Reset zoom</button>
<span id="view"></span>
<span class="hint">wheel: zoom time &middot; shift+wheel: zoom addresses &middot; ctrl+wheel: both &middot; drag: pan</span></div>
<div class="plot">
<div id="addr-axis" class="axis y"></div>
<div class="canvas-box"><canvas id="heatmap"></canvas><div id="readout" hidden></div></div>
<div class="corner"></div>
<div id="time-axis" class="axis x"></div>
</div>
<div class="legend"><span>access frequency</span><span class="rampbox"><span class="ramp"></span>
<span class="ends"><span>0%</span><span>50%</span><span>100%</span></span></span>
<span class="unmon"></span><span>not monitored</span><span class="gapkey"></span><span>collapsed gap</span></div>
"#,
    )?;
    writeln!(
        w,
        "<p class=\"note\">{} time bins of {} x {} address bins of {}. A cell's frequency is the \
         average of <code>nr_accesses / max_nr_accesses</code> over the part of it regions \
         covered, weighted by time and bytes; its age is the mean age of those regions \
         (aggregation intervals the frequency stayed similar, times the window length), \
         weighted the same way. Gaps larger than 5% of the monitored size are collapsed to a \
         white line. Zooming enlarges these cells; for a finer grid, cut the ranges with \
         <code>--time-range</code> and <code>--address-range</code>.</p>\n</section>",
        hm.time_bins,
        fmt_us(hm.time_bin_us().round() as u64),
        hm.addr_bins,
        fmt_bytes(hm.addr_bin_bytes().round() as u64),
    )?;

    write_wss(w, &r.wss)?;
    write_hot(w, &r.hot)?;
    if let Some(s) = &r.schemes {
        write_schemes(w, s)?;
    }
    writeln!(
        w,
        "<footer>udamon {} &middot; <code>udamon report html</code> &middot; a self-contained \
         page: nothing is fetched when it is viewed</footer>",
        env!("CARGO_PKG_VERSION")
    )?;
    // JSON in a script element: "<" only occurs inside strings, where
    // "\u003c" reads the same, and no "</script>" can end the element early.
    let mut data = page_data(r);
    data["processes"] = process_data(r);
    let data = data.to_string().replace('<', "\\u003c");
    writeln!(
        w,
        "<script id=\"udamon-data\" type=\"application/json\">{data}</script>"
    )?;
    writeln!(w, "<script>\n{JS}</script>\n</body>\n</html>")?;
    Ok(())
}

/// The process picker: "all processes", then each process the page holds.
fn write_picker(w: &mut impl Write, p: &ProcessPicker, target_idx: u32) -> Result<(), Error> {
    writeln!(
        w,
        "<p class=\"picker\"><label for=\"process\">process</label> <select id=\"process\">\n\
         <option value=\"\" selected>all processes (heatmap: target {target_idx})</option>"
    )?;
    for v in &p.views {
        let r = &v.process;
        writeln!(
            w,
            "<option value=\"{}\">{} &middot; target {}{}</option>",
            r.target_idx,
            esc(&r.name()),
            r.target_idx,
            match (r.arrived_us, r.left_us) {
                (None, None) => String::new(),
                (a, l) => format!(
                    " &middot; {} to {}",
                    a.map_or("start".to_string(), since),
                    l.map_or("end".to_string(), since)
                ),
            }
        )?;
    }
    let more = if p.total > p.views.len() {
        format!(
            " {} of the {} processes are listed, those seen longest; select others with \
             <code>--pid</code> or <code>--comm</code>.",
            p.views.len(),
            p.total
        )
    } else {
        String::new()
    };
    writeln!(
        w,
        "</select> <span class=\"hint\">redraws the heatmap and the working-set chart for one \
         process; the tables cover all.{more}</span></p>"
    )?;
    Ok(())
}

fn write_wss(w: &mut impl Write, ws: &Wss) -> Result<(), Error> {
    let whose = match ws.target_idx {
        Some(t) => format!("target {t}"),
        None => "all targets".to_string(),
    };
    writeln!(
        w,
        "<section id=\"wss-section\">\n<h2>Working set size</h2>\n<div class=\"row\">\n\
         <div class=\"chart-box\"><canvas id=\"wss\" class=\"chart\"></canvas>\
         <div id=\"wss-readout\" class=\"chart-readout\"></div></div>"
    )?;
    writeln!(
        w,
        "<table id=\"wss-percentiles\" class=\"num\">\n<thead><tr><th>percentile</th><th>working set</th><th>bytes</th></tr></thead>\n<tbody>"
    )?;
    for p in &ws.percentiles {
        writeln!(
            w,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.percentile,
            fmt_bytes(p.wss_bytes),
            p.wss_bytes
        )?;
    }
    writeln!(
        w,
        "<tr class=\"avg\"><td>avg</td><td>{}</td><td>{}</td></tr>\n</tbody>\n</table>\n</div>",
        fmt_bytes(ws.wss_avg_bytes),
        ws.wss_avg_bytes
    )?;
    writeln!(
        w,
        "<p class=\"note\">Bytes of the regions of {whose} with <code>nr_accesses &gt;= {}</code>, \
         per snapshot ({} snapshots); the chart follows the heatmap's time zoom{}.</p>\n</section>",
        ws.acc_thres,
        ws.series.len(),
        if ws.series.len() > WSS_CHART_POINTS {
            format!(
                ", and draws the series as {WSS_CHART_POINTS} time buckets (band: lowest to \
                 highest; line: mean)"
            )
        } else {
            String::new()
        }
    )?;
    Ok(())
}

fn write_hot(w: &mut impl Write, h: &Hot) -> Result<(), Error> {
    writeln!(
        w,
        "<section id=\"hot-section\">\n<h2>Hottest address ranges</h2>"
    )?;
    let Hot::Aggregate(a) = h else {
        // `build` always aggregates; a snapshot's regions are listed the same way.
        return Err(Error::InvalidOption(
            "the page's hot table needs the aggregate hot report".into(),
        ));
    };
    let named = a.ranges.iter().any(|r| r.object.is_some());
    writeln!(
        w,
        "<table id=\"hot\" class=\"num\">\n<thead><tr><th>#</th><th>target</th><th>start</th>\
         <th>end</th><th>size</th><th>access frequency</th><th>monitored for</th>{}</tr></thead>\n<tbody>",
        if named { "<th>object</th>" } else { "" }
    )?;
    for (i, r) in a.ranges.iter().enumerate() {
        writeln!(
            w,
            "<tr><td>{}</td><td>{}</td><td class=\"addr\">{}</td><td class=\"addr\">{}</td>\
             <td>{}</td><td><span class=\"freqbar\" style=\"width:{:.0}px\"></span>{}</td><td>{}</td>{}</tr>",
            i + 1,
            r.target_idx,
            fmt_addr(r.start),
            fmt_addr(r.end),
            fmt_bytes(r.size_bytes),
            r.access_frequency * 60.0,
            pct(r.access_frequency),
            fmt_us(r.monitored_us),
            match (&r.object, named) {
                (Some(o), _) => format!("<td class=\"obj\">{}</td>", esc(o)),
                (None, true) => "<td></td>".to_string(),
                (None, false) => String::new(),
            }
        )?;
    }
    writeln!(
        w,
        "</tbody>\n</table>\n<p class=\"note\">The {} hottest of {} ranges from {} to {} \
         ({} snapshots): each address gets the time-weighted average frequency of the regions \
         that covered it, and neighbours of equal average are merged (<code>udamon report hot \
         --aggregate</code>).</p>\n</section>",
        a.ranges.len(),
        a.nr_ranges,
        since(a.start_us),
        since(a.end_us),
        a.nr_snapshots
    )?;
    Ok(())
}

fn write_schemes(w: &mut impl Write, s: &SchemeSeries) -> Result<(), Error> {
    writeln!(
        w,
        "<section id=\"schemes-section\">\n<h2>Schemes</h2>\n<div class=\"charts2\">\
         <div><h3>applied, total since the start</h3><canvas id=\"scheme-applied\" class=\"chart\"></canvas></div>\
         <div><h3>effective size quota</h3><canvas id=\"scheme-quota\" class=\"chart\"></canvas></div></div>\
         <div id=\"scheme-legend\" class=\"chart-legend\"></div>"
    )?;
    let opt = |v: Option<u64>| v.map_or("n/a".to_string(), fmt_bytes);
    writeln!(
        w,
        "<table id=\"schemes\" class=\"num\">\n<thead><tr><th>#</th><th>action</th>\
         <th class=\"text\">scheme</th><th>tried</th><th>applied</th><th>applied</th>\
         <th>quota exceeded</th><th>quota now</th></tr></thead>\n<tbody>"
    )?;
    for t in &s.schemes {
        let Some(last) = t.points.last() else {
            continue;
        };
        let quota = match last.effective_quota_bytes {
            Some(q) => fmt_bytes(q),
            None => "unlimited".to_string(),
        };
        writeln!(
            w,
            "<tr><td>{}</td><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{}</td>\
             <td>{} times</td><td>{}</td><td>{}</td></tr>",
            t.index,
            esc(&t.action),
            esc(&t.description),
            opt(last.sz_tried),
            opt(last.sz_applied),
            last.nr_applied.map_or("n/a".to_string(), |n| n.to_string()),
            last.qt_exceeds.map_or("n/a".to_string(), |n| n.to_string()),
            quota
        )?;
    }
    writeln!(
        w,
        "</tbody>\n</table>\n<p class=\"note\">{} readings (about one a second). Tried and \
         applied add up over every apply pass, so they can exceed the memory's size; the quota \
         is the size quota of the current quota window (\"unlimited\" when the scheme has none). \
         The charts follow the heatmap's time zoom.</p>\n</section>",
        s.readings
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard() {
        for (raw, want) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"\xff\x00\xfe", "/wD+"),
        ] {
            assert_eq!(base64(raw), want);
        }
    }

    #[test]
    fn codes_keep_frequency_and_age_close() {
        assert_eq!(freq_code(f64::NAN), 0);
        assert_eq!(freq_code(0.0), 1);
        assert_eq!(freq_code(1.0), 255);
        assert_eq!(freq_code(0.5), 128);
        let ages = [f64::NAN, 0.0, 100_000.0, 3_600_000_000.0];
        let c = AgeCodes::for_ages(&ages);
        assert_eq!(c.code(f64::NAN), 0);
        assert_eq!(c.age_us(0), None);
        assert_eq!(c.code(0.0), 1);
        assert_eq!(c.code(3_600_000_000.0), 255);
        for a in [100_000.0, 2_500_000.0, 60e6, 3_600e6] {
            let back = c.age_us(c.code(a)).unwrap();
            assert!((back - a).abs() / a < 0.05, "{a} -> {back}");
        }
    }

    #[test]
    fn scheme_entries_become_tracks_in_the_time_range() {
        let entry = |end_us: u64, applied: u64, quota: Option<u64>| {
            json!({"end_us": end_us, "schemes": [
                {"index": 0, "action": "pageout", "description": "d", "sz_tried": 2 * applied,
                 "sz_applied": applied, "nr_applied": 1, "qt_exceeds": 0,
                 "effective_quota_bytes": quota},
                {"index": 1, "action": "stat", "sz_applied": 0, "effective_quota_bytes": null}]})
        };
        let entries = [
            entry(5_100_000, 0, Some(4096)),
            entry(6_100_000, 8192, Some(4096)),
            entry(7_100_000, 16384, None),
            json!({"not": "a reading"}),
        ];
        let s =
            SchemeSeries::from_entries(5_000_000, &entries, Some((1_000_000, 3_000_000))).unwrap();
        assert_eq!(s.readings, 2);
        assert_eq!(s.schemes.len(), 2);
        let t = &s.schemes[0];
        assert_eq!((t.action.as_str(), t.points.len()), ("pageout", 2));
        assert_eq!(t.points[0].at_us, 1_100_000);
        assert_eq!(t.points[1].sz_applied, Some(16384));
        assert_eq!(t.points[1].effective_quota_bytes, None);
        assert_eq!(s.schemes[1].points[0].sz_tried, None);
        assert!(SchemeSeries::from_entries(0, &entries[3..], None).is_none());
    }

    #[test]
    fn long_wss_series_are_bucketed_with_their_extremes() {
        let series: Vec<wss::WssPoint> = (0..10 * WSS_CHART_POINTS as u64)
            .map(|i| wss::WssPoint {
                end_us: (i + 1) * 100_000,
                wss_bytes: if i == 12_345 {
                    1 << 30
                } else {
                    4096 * (i % 10)
                },
            })
            .collect();
        let w = Wss {
            target_idx: None,
            acc_thres: 1,
            sz_thres_bytes: 1,
            skipped: 0,
            wss_avg_bytes: 0,
            percentiles: Vec::new(),
            series,
        };
        let v = wss_chart(&w);
        let hi = v["hi"].as_array().unwrap();
        assert!(hi.len() <= WSS_CHART_POINTS && hi.len() > WSS_CHART_POINTS - 10);
        assert!(hi.iter().any(|x| x.as_u64() == Some(1 << 30)));
        // Every bucket holds 9 or 10 consecutive snapshots, so a 0 or 4096.
        assert!(v["lo"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x.as_u64().unwrap() <= 4096));
    }

    #[test]
    fn the_page_escapes_what_it_embeds() {
        assert_eq!(esc("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
    }
}
