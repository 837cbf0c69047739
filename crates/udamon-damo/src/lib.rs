//! damo's record files read into udamon records, streaming.
//!
//! damo (the kernel DAMON's user-space tool) writes records in three
//! formats: `json`, `json_compressed` (the same JSON through zlib) and the
//! `perf script` text of `damon:damon_aggregated` events. [`import`] reads
//! any of them and writes a udamon record, holding one snapshot at a time
//! (plus zlib's window and the record writer's frame), whatever the
//! record's length: an hour of damo's records is a gigabyte and more of
//! JSON text.
//!
//! damo's JSON is a list of per-target records, each with all of its
//! snapshots, while a udamon snapshot holds every target of one window. A
//! record's snapshots are therefore spilled, as they are read, into a
//! temporary udamon record each (next to the output, compressed), and the
//! spills are then read in step, the i-th snapshot of every target making
//! the i-th snapshot of the output, as damo's own reports pair them.
//! `perf script` text is read twice instead: once for the targets, once to
//! assemble the windows.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use udamon_core::{Attrs, RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_kdamon::trace::{parse_aggregated, Assembler};
use udamon_record::{Entry, Header, Reader, TargetInfo, Writer};

/// What an import read and wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// `"json"`, `"json_compressed"` or `"perf_script"`.
    pub format: &'static str,
    pub attrs: Attrs,
    /// Snapshots written to the udamon record.
    pub snapshots: u64,
    pub targets: usize,
    /// End of the last snapshot, from the first one's start.
    pub duration_us: u64,
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The damo file cannot be opened or read.
    #[error("cannot read damo record {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    /// The file is not a damo record this reads, or holds bad values.
    #[error("{}: {msg}", path.display())]
    Format { path: PathBuf, msg: String },
    /// Writing the udamon record (or a spill file next to it) failed.
    #[error(transparent)]
    Write(#[from] udamon_record::Error),
    #[error("cannot write a temporary file in {}: {source}", dir.display())]
    Spill { dir: PathBuf, source: io::Error },
}

/// Reads the damo record at `input` (any of its formats) and writes it as
/// the udamon record `output`. `progress` is called now and then with the
/// bytes of `input` read so far and its size.
pub fn import(
    input: &Path,
    output: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Summary, Error> {
    let read_err = |source| Error::Read {
        path: input.to_path_buf(),
        source,
    };
    let file = File::open(input).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if meta.is_dir() {
        return Err(read_err(io::Error::from(io::ErrorKind::IsADirectory)));
    }
    let total = meta.len();
    let read = Rc::new(Cell::new(0u64));
    let mut r = BufReader::with_capacity(
        1 << 16,
        Counted {
            inner: file,
            read: Rc::clone(&read),
        },
    );
    let head = r.fill_buf().map_err(read_err)?;
    // json_compressed is zlib: 0x78 then a check byte.
    let zlib = head.len() > 2
        && head[0] == 0x78
        && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0;
    let dir = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tick = || progress(read.get(), total);
    if zlib {
        let z = BufReader::with_capacity(1 << 16, flate2::bufread::ZlibDecoder::new(r));
        return import_json(z, "json_compressed", input, output, dir, &mut tick);
    }
    // JSON starts with a list (an object is JSON too, but not damo's: the
    // parser says so); anything else is read as perf script text.
    loop {
        let buf = r.fill_buf().map_err(read_err)?;
        let Some(&b) = buf.first() else { break };
        if b.is_ascii_whitespace() {
            r.consume(1);
            continue;
        }
        if b == b'[' || b == b'{' {
            return import_json(r, "json", input, output, dir, &mut tick);
        }
        break;
    }
    drop(r);
    import_perf_script(input, output, total, progress)
}

/// A reader that counts the bytes read through it.
struct Counted<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// The header of an imported record.
fn header(input: &Path, format: &str, attrs: Attrs, targets: usize) -> Header {
    Header {
        targets: (0..targets)
            .map(|i| TargetInfo {
                pid: 0,
                label: format!("damo target {i}"),
            })
            .collect(),
        params: serde_json::json!({
            "imported_from": input.display().to_string(),
            "damo_format": format,
        }),
        ..Header::new("damo", attrs)
    }
}

/// A number as damo writes it: a JSON number, or a string of digits with
/// thousands separators (damo prints `"40,960"` even in raw mode),
/// optionally followed by a unit word it uses for sizes (`"0 B"`); negative
/// numbers stay negative (damo's fake region has `nr_accesses` -1).
#[derive(Clone, Copy, Debug)]
struct Num(f64);

impl<'de> serde::Deserialize<'de> for Num {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, or a string of digits as damo writes them")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Num, E> {
                let digits = s.split_whitespace().next().unwrap_or("").replace(',', "");
                digits.parse::<f64>().map(Num).map_err(|_| {
                    E::custom(format!(
                        "{s:?} is not a number in damo's raw format (record with damo's raw numbers)"
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// The parts of a damo snapshot udamon keeps (serde skips the rest).
#[derive(serde::Deserialize)]
struct DamoSnapshot {
    start_time: Num,
    end_time: Num,
    regions: Vec<DamoRegion>,
}

#[derive(serde::Deserialize)]
struct DamoRegion {
    start: Num,
    end: Num,
    nr_accesses: DamoAccesses,
    #[serde(default)]
    age: Option<DamoAge>,
}

#[derive(serde::Deserialize)]
struct DamoAccesses {
    samples: Num,
}

/// A damo record's `intervals`.
#[derive(serde::Deserialize)]
struct DamoIntervals {
    sample_us: Num,
    aggr_us: Num,
    ops_update_us: Num,
}

#[derive(serde::Deserialize)]
struct DamoAge {
    #[serde(default)]
    aggr_intervals: Option<Num>,
}

/// One damo record's snapshots, spilled into a temporary udamon record.
struct Spill {
    file: tempfile::NamedTempFile,
    writer: Writer<BufWriter<File>>,
}

/// The state of a streaming JSON import.
struct JsonImport<'a> {
    dir: &'a Path,
    attrs: Attrs,
    spills: Vec<Spill>,
    /// A failure that is not the input's fault (writing a spill), kept
    /// to be returned instead of the parser's error that stopped it.
    failed: Option<Error>,
    /// Index of the damo record being read, and of its snapshot.
    record: usize,
    snapshot: usize,
    tick: &'a mut dyn FnMut(),
}

impl JsonImport<'_> {
    fn intervals(&mut self, iv: Option<DamoIntervals>) -> Result<(), String> {
        // The first record's intervals stand for the whole record, as
        // damo's reports take them.
        let Some(iv) = iv.filter(|_| self.record == 0) else {
            return Ok(());
        };
        let us = |n: Num, what: &str| {
            if n.0 >= 0.0 {
                Ok(n.0 as u64)
            } else {
                Err(format!(
                    "intervals.{what}: {} is not a non-negative number",
                    n.0
                ))
            }
        };
        self.attrs.sample_us = us(iv.sample_us, "sample_us")?;
        self.attrs.aggr_us = us(iv.aggr_us, "aggr_us")?;
        self.attrs.update_us = us(iv.ops_update_us, "ops_update_us")?;
        Ok(())
    }

    /// Spills one snapshot of the current record.
    fn snapshot(&mut self, s: DamoSnapshot) -> Result<(), String> {
        let (ti, si) = (self.record, self.snapshot);
        let negative = |what: String, n: Num| {
            Err(format!(
                "record {ti} snapshot {si} {what}: {} is not a non-negative number",
                n.0
            ))
        };
        for (what, n) in [("start_time", s.start_time), ("end_time", s.end_time)] {
            if n.0.is_nan() || n.0 < 0.0 {
                return negative(what.into(), n);
            }
        }
        let mut regions = Vec::with_capacity(s.regions.len());
        for (ri, g) in s.regions.into_iter().enumerate() {
            for (what, n) in [("start", g.start), ("end", g.end)] {
                if n.0.is_nan() || n.0 < 0.0 {
                    return negative(format!("region {ri} {what}"), n);
                }
            }
            // damo's fake snapshot (nr_accesses -1) closes single-snapshot
            // records; empty regions mean nothing.
            if g.nr_accesses.samples.0 < 0.0 || g.end.0 <= g.start.0 {
                continue;
            }
            regions.push(RegionSnapshot {
                start: g.start.0 as u64,
                end: g.end.0 as u64,
                nr_accesses: g.nr_accesses.samples.0 as u32,
                age: g
                    .age
                    .and_then(|a| a.aggr_intervals)
                    .map_or(0, |a| a.0 as u32),
            });
        }
        // Times in nanoseconds; the i-th snapshots of all records are paired
        // later, so an empty one is kept too.
        let snap = Snapshot {
            start_us: s.start_time.0 as u64 / 1000,
            end_us: s.end_time.0 as u64 / 1000,
            sample_us: self.attrs.sample_us,
            aggr_us: self.attrs.aggr_us,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions,
            }],
        };
        self.snapshot += 1;
        if let Err(e) = self.spill().and_then(|w| Ok(w.push_snapshot(&snap)?)) {
            self.failed = Some(e);
            return Err("stopped".into());
        }
        (self.tick)();
        Ok(())
    }

    /// The current record's spill, made at its first snapshot.
    fn spill(&mut self) -> Result<&mut Writer<BufWriter<File>>, Error> {
        if self.spills.len() <= self.record {
            let spill_err = |source| Error::Spill {
                dir: self.dir.to_path_buf(),
                source,
            };
            let file = tempfile::Builder::new()
                .prefix(".udamon-import-")
                .suffix(".udr")
                .tempfile_in(self.dir)
                .map_err(spill_err)?;
            let f = file.as_file().try_clone().map_err(spill_err)?;
            let mut h = Header::new("damo-spill", self.attrs);
            h.targets = vec![TargetInfo {
                pid: 0,
                label: format!("damo record {}", self.record),
            }];
            let mut writer = Writer::new(BufWriter::new(f), &h)?;
            // Read back once, right away: speed over size.
            writer.set_zstd_level(1)?;
            self.spills.push(Spill { file, writer });
        }
        Ok(&mut self.spills[self.record].writer)
    }
}

/// The top level: a list of damo records.
struct Records<'a, 'b>(&'a mut JsonImport<'b>);
/// One damo record: a map whose `snapshots` list is streamed.
struct Record<'a, 'b>(&'a mut JsonImport<'b>);
/// A record's `snapshots` list, one snapshot at a time.
struct Snapshots<'a, 'b>(&'a mut JsonImport<'b>);

impl<'de> DeserializeSeed<'de> for Records<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Records<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON list of damo records (damo's json format)")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Record(&mut *self.0))?.is_some() {
            self.0.record += 1;
            self.0.snapshot = 0;
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Record<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Record<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "damo record {} as a JSON object", self.0.record)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut snapshots = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "intervals" => {
                    let v: Option<DamoIntervals> = map.next_value()?;
                    self.0.intervals(v).map_err(de::Error::custom)?;
                }
                "snapshots" => {
                    map.next_value_seed(Snapshots(&mut *self.0))?;
                    snapshots = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !snapshots {
            return Err(de::Error::custom(format!(
                "record {}: no \"snapshots\" list",
                self.0.record
            )));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Snapshots<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Snapshots<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "record {}: a \"snapshots\" list", self.0.record)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            let (ti, si) = (self.0.record, self.0.snapshot);
            let s = match seq.next_element::<DamoSnapshot>() {
                Ok(Some(s)) => s,
                Ok(None) => return Ok(()),
                Err(e) => return Err(de::Error::custom(format!("record {ti} snapshot {si}: {e}"))),
            };
            self.0.snapshot(s).map_err(de::Error::custom)?;
        }
    }
}

/// Streams damo's JSON from `r` into spills, then merges them into `output`.
fn import_json(
    r: impl Read,
    format: &'static str,
    input: &Path,
    output: &Path,
    dir: &Path,
    tick: &mut dyn FnMut(),
) -> Result<Summary, Error> {
    let mut imp = JsonImport {
        dir,
        attrs: Attrs::default(),
        spills: Vec::new(),
        failed: None,
        record: 0,
        snapshot: 0,
        tick,
    };
    let bad = |msg: String| Error::Format {
        path: input.to_path_buf(),
        msg,
    };
    let mut de = serde_json::Deserializer::from_reader(r);
    let parsed = Records(&mut imp)
        .deserialize(&mut de)
        .and_then(|()| de.end());
    if let Some(e) = imp.failed.take() {
        return Err(e);
    }
    if let Err(e) = parsed {
        let inflate = format == "json_compressed"
            && e.io_error_kind().is_some_and(|k| {
                matches!(
                    k,
                    io::ErrorKind::InvalidInput
                        | io::ErrorKind::InvalidData
                        | io::ErrorKind::UnexpectedEof
                )
            });
        return Err(match e.classify() {
            serde_json::error::Category::Io if !inflate => Error::Read {
                path: input.to_path_buf(),
                source: e.into(),
            },
            _ => bad(if format == "json_compressed" {
                format!("zlib data that does not inflate to damo's JSON: {e}")
            } else {
                format!("not damo's JSON: {e}")
            }),
        });
    }
    if imp.record == 0 {
        return Err(bad("the damo record holds no target".into()));
    }
    let attrs = imp.attrs;
    let mut spills = Vec::with_capacity(imp.spills.len());
    for s in imp.spills {
        s.writer.finish()?;
        spills.push(s.file);
    }
    merge(&spills, header(input, format, attrs, spills.len()), output).map(
        |(snapshots, duration_us)| Summary {
            format,
            attrs,
            snapshots,
            targets: spills.len(),
            duration_us,
        },
    )
}

/// Writes `output` from the spills read in step: snapshot i of the output
/// holds snapshot i of every spill (its window spanning theirs), times
/// counted from the earliest start.
fn merge(
    spills: &[tempfile::NamedTempFile],
    header: Header,
    output: &Path,
) -> Result<(u64, u64), Error> {
    use std::sync::mpsc::sync_channel;
    let readers = spills
        .iter()
        .map(|s| Reader::open(s.path()))
        .collect::<Result<Vec<_>, _>>()?;
    let origin = readers
        .iter()
        .filter_map(|r| r.frames().iter().find(|f| f.nr_snapshots > 0))
        .map(|f| f.first_start_us)
        .min()
        .unwrap_or(0);
    let mut w = Writer::create(output, &header)?;
    let (mut n, mut duration) = (0u64, 0u64);
    std::thread::scope(|scope| -> Result<(), Error> {
        let mut rxs = Vec::new();
        let mut workers = Vec::new();
        for r in &readers {
            let (tx, rx) = sync_channel::<Snapshot>(16);
            rxs.push(rx);
            workers.push(scope.spawn(move || {
                r.for_each_entry(|e| match e {
                    Entry::Snapshot(s) if tx.send(s.clone()).is_err() => ControlFlow::Break(()),
                    _ => ControlFlow::Continue(()),
                })
            }));
        }
        loop {
            let mut targets = Vec::new();
            let (mut start, mut end, mut any) = (u64::MAX, 0, false);
            for (ti, rx) in rxs.iter().enumerate() {
                let Ok(s) = rx.recv() else { continue };
                any = true;
                start = start.min(s.start_us);
                end = end.max(s.end_us);
                let regions = s.targets.into_iter().next().map(|t| t.regions);
                if let Some(regions) = regions.filter(|r| !r.is_empty()) {
                    targets.push(TargetSnapshot {
                        target_idx: ti as u32,
                        regions,
                    });
                }
            }
            if !any {
                break;
            }
            if targets.is_empty() {
                continue;
            }
            let snap = Snapshot {
                start_us: start.saturating_sub(origin),
                end_us: end.saturating_sub(origin),
                sample_us: header.attrs.sample_us,
                aggr_us: header.attrs.aggr_us,
                targets,
            };
            w.push_snapshot(&snap)?;
            n += 1;
            duration = snap.end_us;
        }
        drop(rxs);
        for h in workers {
            h.join().expect("a spill reader panicked")?;
        }
        Ok(())
    })?;
    w.finish()?;
    Ok((n, duration))
}

/// `perf script` text of `damon:damon_aggregated` (damo's perf_script
/// format, or a tracefs `trace` file): a pass for the targets, a pass to
/// assemble the windows.
fn import_perf_script(
    input: &Path,
    output: &Path,
    total: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Summary, Error> {
    let bad = |msg: &str| Error::Format {
        path: input.to_path_buf(),
        msg: msg.to_string(),
    };
    let read_err = |source| Error::Read {
        path: input.to_path_buf(),
        source,
    };
    let not_text = "neither damo's json, json_compressed nor perf_script format (perf.data files need `damo convert --format json` first)";
    // Calls `f` on every damon_aggregated event; `base` offsets progress.
    let each = |base: u64,
                progress: &mut dyn FnMut(u64, u64),
                f: &mut dyn FnMut(udamon_kdamon::trace::AggregatedEvent) -> Result<(), Error>|
     -> Result<(), Error> {
        let mut r = BufReader::new(File::open(input).map_err(read_err)?);
        let (mut line, mut done) = (String::new(), 0u64);
        loop {
            line.clear();
            let n = match r.read_line(&mut line) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(bad(not_text)),
                Err(e) => return Err(read_err(e)),
            };
            if n == 0 {
                return Ok(());
            }
            done += n as u64;
            if let Some(ev) = parse_aggregated(&line) {
                f(ev)?;
            }
            if done % (1 << 20) < n as u64 {
                progress(base + done, 2 * total);
            }
        }
    };
    let mut ids = Vec::new();
    each(0, progress, &mut |ev| {
        if !ids.contains(&ev.target_id) {
            ids.push(ev.target_id);
        }
        Ok(())
    })?;
    if ids.is_empty() {
        return Err(bad("no damon_aggregated line in the file"));
    }
    let attrs = Attrs::default();
    let mut w = Writer::create(output, &header(input, "perf_script", attrs, ids.len()))?;
    let mut asm = Assembler::new(ids.len(), attrs.sample_us, attrs.aggr_us);
    let (mut n, mut duration) = (0u64, 0u64);
    each(total, progress, &mut |ev| {
        if let Some(s) = asm.push(ev) {
            w.push_snapshot(&s)?;
            n += 1;
            duration = s.end_us;
        }
        Ok(())
    })?;
    w.finish()?;
    Ok(Summary {
        format: "perf_script",
        attrs,
        snapshots: n,
        targets: ids.len(),
        duration_us: duration,
    })
}

#[cfg(test)]
mod tests;

/// A damo record format [`export`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// damo's `json`: a list of per-target records.
    Json,
    /// damo's `json_compressed`: the same through zlib (damo's default).
    JsonCompressed,
    /// `perf script` text of `damon:damon_aggregated` events.
    PerfScript,
}

impl ExportFormat {
    /// damo's name for it (`--output_type`).
    pub fn damo_name(self) -> &'static str {
        match self {
            ExportFormat::Json => "json",
            ExportFormat::JsonCompressed => "json_compressed",
            ExportFormat::PerfScript => "perf_script",
        }
    }
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Exported {
    /// Snapshots of the udamon record, over all targets.
    pub snapshots: u64,
    pub targets: usize,
}

/// The indexes of the targets of `reader`'s record: its header's, or those
/// its snapshots name when the header lists none.
fn target_indexes(reader: &Reader) -> Result<Vec<u32>, udamon_record::Error> {
    if !reader.header().targets.is_empty() {
        return Ok((0..reader.header().targets.len() as u32).collect());
    }
    let mut ids = Vec::new();
    reader.for_each_snapshot(|s| {
        for t in &s.targets {
            if !ids.contains(&t.target_idx) {
                ids.push(t.target_idx);
            }
        }
    })?;
    ids.sort_unstable();
    Ok(ids)
}

/// One snapshot of one target in damo's JSON layout (what damo 3.4.3's
/// `DamonSnapshot.from_kvpairs` reads; numbers as JSON numbers, which its
/// parsers take as they take its strings).
fn damo_snapshot(s: &Snapshot, regions: &[RegionSnapshot], sample_us: u64) -> Value {
    let total: u64 = regions.iter().map(|r| r.end - r.start).sum();
    serde_json::json!({
        "start_time": s.start_us * 1000,
        "end_time": s.end_us * 1000,
        "regions": regions.iter().map(|r| serde_json::json!({
            "start": r.start,
            "end": r.end,
            "nr_accesses": { "samples": r.nr_accesses, "percent": null },
            "age": { "usec": null, "aggr_intervals": r.age },
            "probe_hits": [],
            "sz_filter_passed": 0,
        })).collect::<Vec<_>>(),
        "total_bytes": total,
        "damos_stats": null,
        // Only when the sampling interval was tuned away from the record's.
        "sample_interval_us": (s.sample_us != sample_us).then_some(s.sample_us),
    })
}

/// Writes the udamon record read by `reader` to `out` in damo's `format`,
/// holding one snapshot at a time (the record is read once per target).
/// `tick` is called after each snapshot written.
pub fn export(
    reader: &Reader,
    out: impl io::Write,
    format: ExportFormat,
    tick: &mut dyn FnMut(),
) -> Result<Exported, Error> {
    let targets = target_indexes(reader)?;
    let write_err = |e: io::Error| Error::Write(udamon_record::Error::Write(e));
    let mut snapshots = 0u64;
    match format {
        ExportFormat::PerfScript => {
            let mut w = BufWriter::new(out);
            for &t in &targets {
                let mut res = Ok(());
                reader.for_each_entry(|e| {
                    let Entry::Snapshot(s) = e else {
                        return ControlFlow::Continue(());
                    };
                    let Some(ts) = s.targets.iter().find(|x| x.target_idx == t) else {
                        return ControlFlow::Continue(());
                    };
                    let end_s = s.end_us as f64 / 1e6;
                    for r in &ts.regions {
                        res = writeln!(
                            w,
                            "kdamond.x xxxx xxxx {end_s:.6}: damon:damon_aggregated: target_id={t} nr_regions={} {}-{}: {} {}",
                            ts.regions.len(),
                            r.start,
                            r.end,
                            r.nr_accesses,
                            r.age
                        );
                        if res.is_err() {
                            return ControlFlow::Break(());
                        }
                    }
                    snapshots += 1;
                    tick();
                    ControlFlow::Continue(())
                })?;
                res.map_err(write_err)?;
            }
            w.into_inner()
                .map_err(|e| write_err(e.into_error()))?
                .flush()
                .map_err(write_err)?;
        }
        ExportFormat::Json => {
            let mut w = BufWriter::with_capacity(1 << 16, out);
            write_json(reader, &targets, &mut w, &mut snapshots, tick)?;
            w.into_inner()
                .map_err(|e| write_err(e.into_error()))?
                .flush()
                .map_err(write_err)?;
        }
        ExportFormat::JsonCompressed => {
            let z = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
            let mut w = BufWriter::with_capacity(1 << 16, z);
            write_json(reader, &targets, &mut w, &mut snapshots, tick)?;
            let z = w.into_inner().map_err(|e| write_err(e.into_error()))?;
            z.finish().map_err(write_err)?.flush().map_err(write_err)?;
        }
    }
    Ok(Exported {
        snapshots,
        targets: targets.len(),
    })
}

/// damo's JSON of every target of `reader`'s record, streamed into `w`.
fn write_json(
    reader: &Reader,
    targets: &[u32],
    w: &mut impl io::Write,
    snapshots: &mut u64,
    tick: &mut dyn FnMut(),
) -> Result<(), Error> {
    let write_err = |e: io::Error| Error::Write(udamon_record::Error::Write(e));
    let attrs = reader.header().attrs;
    let intervals = serde_json::json!({
        "sample_us": attrs.sample_us,
        "aggr_us": attrs.aggr_us,
        "ops_update_us": attrs.update_us,
    });
    w.write_all(b"[").map_err(write_err)?;
    for (k, &t) in targets.iter().enumerate() {
        let head = serde_json::json!({
            "kdamond_idx": 0,
            "context_idx": 0,
            "intervals": intervals,
            "scheme_idx": null,
            "target_id": t,
            "scheme_filters": [],
        });
        // The record's object without its closing brace, then the
        // snapshots streamed into it.
        let head = serde_json::to_string(&head).expect("JSON of JSON");
        let open = format!(
            "{}{},\"snapshots\":[",
            if k == 0 { "" } else { "," },
            &head[..head.len() - 1]
        );
        w.write_all(open.as_bytes()).map_err(write_err)?;
        let mut res = Ok(());
        let mut first = true;
        reader.for_each_entry(|e| {
            let Entry::Snapshot(s) = e else {
                return ControlFlow::Continue(());
            };
            let Some(ts) = s.targets.iter().find(|x| x.target_idx == t) else {
                return ControlFlow::Continue(());
            };
            let v = damo_snapshot(s, &ts.regions, attrs.sample_us);
            res = (if first { Ok(()) } else { w.write_all(b",") })
                .and_then(|()| serde_json::to_writer(&mut *w, &v).map_err(io::Error::from));
            first = false;
            if res.is_err() {
                return ControlFlow::Break(());
            }
            *snapshots += 1;
            tick();
            ControlFlow::Continue(())
        })?;
        res.map_err(write_err)?;
        w.write_all(b"],\"data_source\":\"unknown\"}")
            .map_err(write_err)?;
    }
    w.write_all(b"]").map_err(write_err)?;
    Ok(())
}
