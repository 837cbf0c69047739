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
//!
//! Whatever the input, memory stays bounded: a line of perf script text,
//! a JSON string or number, the regions of one window and the targets of
//! a record each have a cap ([`MAX_LINE_BYTES`], [`MAX_TOKEN_BYTES`],
//! [`MAX_REGIONS`], [`MAX_TARGETS`]), and an input past one is refused with
//! the place and the cap, as is a value damo never writes (a negative
//! count, a region that ends before it starts, a window that ends before it
//! starts, a sampling interval of 0, an address past 2^64).

use std::cell::{Cell, RefCell};
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

/// The longest line of `perf script` text read: a `damon_aggregated` line
/// is about 120 bytes, and a longer line is refused rather than held (a
/// file of zeros is one endless line).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// The longest JSON string or number read (damo's are a few dozen bytes):
/// the JSON parser holds one whole, so a longer one is refused.
pub const MAX_TOKEN_BYTES: usize = 1 << 20;
/// The most regions one window of a record may hold, over all its
/// targets (the kernel's default `max_nr_regions` is 1,000 per target).
pub const MAX_REGIONS: usize = 1 << 20;
/// The most targets a record may hold: each is spilled to a file of its
/// own and read back by a thread of its own.
pub const MAX_TARGETS: usize = 256;

/// Snapshots per frame of a spill: the merge holds a decoded frame of
/// every target at once.
const SPILL_FRAME_SNAPSHOTS: usize = 8;

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
    /// What was read but not imported, and why (a perf script file cut
    /// in the middle of a window).
    pub warnings: Vec<String>,
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
    /// The caller's progress callback asked to stop.
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// The damo file given, unreadable or malformed: bad input. Writing
    /// the record or its spills, or being stopped: a runtime failure.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        match self {
            Error::Read { .. } | Error::Format { .. } => udamon_core::ErrorKind::Usage,
            Error::Write(e) => e.kind(),
            Error::Spill { .. } | Error::Interrupted => udamon_core::ErrorKind::Failure,
        }
    }
}

/// Reads the damo record at `input` (any of its formats) and writes it as
/// the udamon record `output`. `progress` is called now and then with the
/// bytes of `input` read so far and its size; it returns `Break` to stop
/// the import ([`Error::Interrupted`], the temporary files removed).
pub fn import(
    input: &Path,
    output: &Path,
    progress: &mut dyn FnMut(u64, u64) -> ControlFlow<()>,
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
        return import_json(z, "json_compressed", 0, input, output, dir, &mut tick);
    }
    // JSON starts with a list (an object is JSON too, but not damo's: the
    // parser says so); anything else is read as perf script text.
    let mut skipped = 0;
    loop {
        let buf = r.fill_buf().map_err(read_err)?;
        let Some(&b) = buf.first() else { break };
        if b.is_ascii_whitespace() {
            r.consume(1);
            skipped += 1;
            continue;
        }
        if b == b'[' || b == b'{' {
            return import_json(r, "json", skipped, input, output, dir, &mut tick);
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

/// JSON text read through a lexer that stops at a string or number longer
/// than [`MAX_TOKEN_BYTES`]: serde_json gathers each one whole in memory,
/// so an endless string (or a file of digits) would grow it without end.
/// Where it stopped is kept in `over` (the byte's offset in the JSON text).
struct TokenCap<R> {
    inner: R,
    /// Offset of the next byte in the JSON text.
    at: u64,
    /// Bytes of the string or number under way, and the most it may hold
    /// ([`MAX_TOKEN_BYTES`]).
    run: usize,
    cap: usize,
    in_string: bool,
    escaped: bool,
    over: Rc<Cell<Option<u64>>>,
}

impl<R> TokenCap<R> {
    /// `at`: the offset of `inner`'s first byte in the JSON text.
    fn new(inner: R, at: u64, over: Rc<Cell<Option<u64>>>) -> Self {
        TokenCap {
            inner,
            at,
            run: 0,
            cap: MAX_TOKEN_BYTES,
            in_string: false,
            escaped: false,
            over,
        }
    }

    /// Takes `bytes`; the offset within them of the byte past the cap, if
    /// any. Strings are crossed with `memchr` and the bytes between them
    /// looked at one by one only where they could hold a number past the
    /// cap, so that the scan costs little beside the parsing.
    fn scan(&mut self, bytes: &[u8]) -> Option<usize> {
        let delim = |b: u8| {
            matches!(
                b,
                b',' | b':' | b'[' | b']' | b'{' | b'}' | b' ' | b'\t' | b'\n' | b'\r'
            )
        };
        // Where the run reaches past the cap, `len` bytes from `at` on.
        let cap = self.cap;
        let past = |run: usize, at: usize, len: usize| (run + len > cap).then(|| at + (cap - run));
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string {
                if self.escaped {
                    // The escaped byte is the string's.
                    self.escaped = false;
                    if let Some(p) = past(self.run, i, 1) {
                        return Some(p);
                    }
                    self.run += 1;
                    i += 1;
                    continue;
                }
                let Some(k) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else {
                    let len = bytes.len() - i;
                    if let Some(p) = past(self.run, i, len) {
                        return Some(p);
                    }
                    self.run += len;
                    return None;
                };
                if bytes[i + k] == b'"' {
                    if let Some(p) = past(self.run, i, k) {
                        return Some(p);
                    }
                    self.in_string = false;
                    self.run = 0;
                } else {
                    // The backslash is the string's too.
                    if let Some(p) = past(self.run, i, k + 1) {
                        return Some(p);
                    }
                    self.run += k + 1;
                    self.escaped = true;
                }
                i += k + 1;
            } else {
                let quote = memchr::memchr(b'"', &bytes[i..]).map(|k| i + k);
                let end = quote.unwrap_or(bytes.len());
                let stretch = &bytes[i..end];
                if self.run + stretch.len() > cap {
                    // Long enough to hold a number past the cap.
                    for (j, &b) in stretch.iter().enumerate() {
                        if delim(b) {
                            self.run = 0;
                        } else {
                            self.run += 1;
                            if self.run > cap {
                                return Some(i + j);
                            }
                        }
                    }
                } else {
                    match stretch.iter().rposition(|&b| delim(b)) {
                        Some(p) => self.run = stretch.len() - p - 1,
                        None => self.run += stretch.len(),
                    }
                }
                let q = quote?;
                self.in_string = true;
                self.run = 0;
                i = q + 1;
            }
        }
        None
    }
}

impl<R: Read> Read for TokenCap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let past = || io::Error::new(io::ErrorKind::InvalidData, "a JSON value past udamon's cap");
        // Once past the cap, always: the first place is the one to name.
        if self.over.get().is_some() {
            return Err(past());
        }
        let n = self.inner.read(buf)?;
        if let Some(i) = self.scan(&buf[..n]) {
            self.over.set(Some(self.at + i as u64));
            return Err(past());
        }
        self.at += n as u64;
        Ok(n)
    }
}

/// The header of an imported record.
fn header(input: &Path, format: &str, attrs: Attrs, targets: usize) -> Header {
    Header {
        targets: (0..targets)
            .map(|i| TargetInfo::new(0, format!("damo target {i}")))
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
/// Integers are kept exact (addresses run past 2^53).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    /// The number as a whole number from 0 to `max`, if it is one.
    fn whole(self, max: u64) -> Option<u64> {
        match self {
            Num::Int(v) => u64::try_from(v).ok().filter(|&v| v <= max),
            Num::Float(f) if f.fract() == 0.0 && f >= 0.0 && f <= max as f64 => {
                // `max as f64` rounds up to 2^64 for u64::MAX.
                (f < 18_446_744_073_709_551_616.0).then_some(f as u64)
            }
            Num::Float(_) => None,
        }
    }

    /// A time or an interval: 0 or more (a fraction is cut off).
    fn non_negative(self) -> Option<u64> {
        match self {
            Num::Float(f) if f.is_finite() && f >= 0.0 => Num::Float(f.trunc()).whole(u64::MAX),
            n => n.whole(u64::MAX),
        }
    }

    fn is(self, v: i128) -> bool {
        match self {
            Num::Int(x) => x == v,
            Num::Float(f) => f == v as f64,
        }
    }
}

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Num::Int(v) => write!(f, "{v}"),
            Num::Float(v) => write!(f, "{v}"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Num {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, or a string of digits as damo writes them")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num::Int(v.into()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num::Int(v.into()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num::Float(v))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Num, E> {
                let digits = s.split_whitespace().next().unwrap_or("").replace(',', "");
                if let Ok(v) = digits.parse::<i128>() {
                    return Ok(Num::Int(v));
                }
                match digits.parse::<f64>() {
                    Ok(v) if v.is_finite() => Ok(Num::Float(v)),
                    _ => Err(E::custom(format!(
                        "{s:?} is not a number in damo's raw format (record with damo's raw numbers)"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A region as damo writes it (serde skips the keys udamon does not keep).
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

/// Where a value sits, for messages: `record 0 snapshot 3 (end_time
/// 100300000000 ns)`.
struct Place {
    record: usize,
    snapshot: usize,
    end_ns: Option<u64>,
    /// Set when a check refuses a value (see [`Place::refuse`]).
    refused: Rc<Cell<bool>>,
    /// Snapshots cut short where their regions went back (see [`Regions`]).
    cuts: Rc<RefCell<Cuts>>,
}

/// Snapshots whose regions go out of order, one starting before the one
/// before it ends (damo 3.4.3, under load, closes a record with a last
/// window whose regions repeat, the whole list over and over or one region
/// twice): each is kept up to that point, and the import says so.
#[derive(Default)]
struct Cuts {
    snapshots: usize,
    regions: usize,
    first: Option<String>,
}

impl Place {
    /// The error of a check that refused a value: its message stands on
    /// its own (it names the place), unlike serde_json's.
    fn refuse<E: de::Error>(&self, msg: String) -> E {
        self.refused.set(true);
        E::custom(msg)
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "record {} snapshot {}", self.record, self.snapshot)?;
        if let Some(t) = self.end_ns {
            write!(f, " (end_time {t} ns)")?;
        }
        Ok(())
    }
}

/// A region of damo's, checked: `Ok(None)` for damo's fake region (0-0,
/// nr_accesses -1), which only closes a single-snapshot record.
fn region(at: &Place, ri: usize, g: &DamoRegion) -> Result<Option<RegionSnapshot>, String> {
    let samples = g.nr_accesses.samples;
    if g.start.is(0) && g.end.is(0) && samples.is(-1) {
        return Ok(None);
    }
    let addr = |what: &str, n: Num| {
        n.whole(u64::MAX).ok_or_else(|| {
            format!(
                "{at} region {ri} {what}: {n} is not an address (a whole number from 0 to 2^64-1)"
            )
        })
    };
    let (start, end) = (addr("start", g.start)?, addr("end", g.end)?);
    if end <= start {
        return Err(format!(
            "{at} region {ri}: {start:#x}-{end:#x} does not end after it starts"
        ));
    }
    let count =
        |what: &str, n: Num| {
            n.whole(u64::from(u32::MAX)).map(|v| v as u32).ok_or_else(|| {
            format!("{at} region {ri} {what}: {n} is not a count (a whole number from 0 to 2^32-1)")
        })
        };
    let nr_accesses = count("nr_accesses.samples", samples)?;
    let age = match g.age.as_ref().and_then(|a| a.aggr_intervals) {
        Some(a) => count("age.aggr_intervals", a)?,
        None => 0,
    };
    Ok(Some(RegionSnapshot {
        start,
        end,
        nr_accesses,
        age,
    }))
}

/// One damo record's snapshots, spilled into a temporary udamon record.
struct Spill {
    file: tempfile::NamedTempFile,
    writer: Option<Writer<BufWriter<File>>>,
    /// The most regions one of its snapshots held.
    max_regions: usize,
}

/// The state of a streaming JSON import.
struct JsonImport<'a> {
    input: &'a Path,
    dir: &'a Path,
    attrs: Attrs,
    spills: Vec<Spill>,
    /// A failure that is not the input's fault (writing a spill), kept
    /// to be returned instead of the parser's error that stopped it.
    failed: Option<Error>,
    /// Index of the damo record being read, and of its snapshot.
    record: usize,
    snapshot: usize,
    /// Set when a check refused a value (its message names the place).
    refused: Rc<Cell<bool>>,
    cuts: Rc<RefCell<Cuts>>,
    tick: &'a mut dyn FnMut() -> ControlFlow<()>,
}

impl JsonImport<'_> {
    fn intervals(&mut self, iv: Option<DamoIntervals>) -> Result<(), String> {
        // The first record's intervals stand for the whole record, as
        // damo's reports take them.
        let Some(iv) = iv.filter(|_| self.record == 0) else {
            return Ok(());
        };
        let us = |n: Num, what: &str| {
            n.non_negative().ok_or_else(|| {
                format!(
                    "record 0 intervals.{what}: {n} is not a number of microseconds (0 or more)"
                )
            })
        };
        let (sample_us, aggr_us) = (us(iv.sample_us, "sample_us")?, us(iv.aggr_us, "aggr_us")?);
        if sample_us == 0 {
            return Err(
                "record 0 intervals.sample_us: 0; a sampling interval is at least 1 us".into(),
            );
        }
        if aggr_us < sample_us {
            return Err(format!(
                "record 0 intervals: aggr_us {aggr_us} is shorter than sample_us {sample_us}; \
                 an aggregation window holds at least one sample"
            ));
        }
        self.attrs.sample_us = sample_us;
        self.attrs.aggr_us = aggr_us;
        self.attrs.update_us = us(iv.ops_update_us, "ops_update_us")?;
        Ok(())
    }

    /// Spills one snapshot of the current record.
    fn snapshot(&mut self, mut snap: Snapshot) -> Result<(), String> {
        self.snapshot += 1;
        snap.aggr_us = self.attrs.aggr_us;
        let n = snap.targets[0].regions.len();
        if let Err(e) = self.spill().and_then(|s| {
            s.max_regions = s.max_regions.max(n);
            let w = s
                .writer
                .as_mut()
                .expect("a spill is written until its record ends");
            Ok(w.push_snapshot(&snap)?)
        }) {
            self.failed = Some(e);
            return Err("stopped".into());
        }
        let window: usize = self.spills.iter().map(|s| s.max_regions).sum();
        if window > MAX_REGIONS {
            return Err(format!(
                "record {} snapshot {}: {n} regions, with the other targets' {}, make more than \
                 {MAX_REGIONS} regions in one window, udamon's cap on a window",
                self.record,
                self.snapshot - 1,
                window - self.spills[self.record].max_regions
            ));
        }
        if (self.tick)().is_break() {
            self.failed = Some(Error::Interrupted);
            return Err("stopped".into());
        }
        Ok(())
    }

    /// The current record's spill, made at its first snapshot (with empty
    /// ones for the records before it that had none).
    fn spill(&mut self) -> Result<&mut Spill, Error> {
        while self.spills.len() <= self.record {
            if self.spills.len() >= MAX_TARGETS {
                return Err(Error::Format {
                    path: self.input.to_path_buf(),
                    msg: format!(
                        "record {}: more than {MAX_TARGETS} damo records (targets), udamon's cap \
                         on the targets of one record",
                        self.spills.len()
                    ),
                });
            }
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
            h.targets = vec![TargetInfo::new(
                0,
                format!("damo record {}", self.spills.len()),
            )];
            let mut writer = Writer::new(BufWriter::new(f), &h)?;
            // Read back once, right away: speed over size.
            writer.set_zstd_level(1)?;
            writer.set_frame_snapshots(SPILL_FRAME_SNAPSHOTS);
            self.spills.push(Spill {
                file,
                writer: Some(writer),
                max_regions: 0,
            });
        }
        Ok(&mut self.spills[self.record])
    }

    /// The current record ended: its spill is written out (records come
    /// one after another, so one spill is written at a time).
    fn end_record(&mut self) -> Result<(), Error> {
        if let Some(w) = self
            .spills
            .get_mut(self.record)
            .and_then(|s| s.writer.take())
        {
            w.finish()?;
        }
        Ok(())
    }
}

/// The top level: a list of damo records.
struct Records<'a, 'b>(&'a mut JsonImport<'b>);
/// One damo record: a map whose `snapshots` list is streamed.
struct Record<'a, 'b>(&'a mut JsonImport<'b>);
/// A record's `snapshots` list, one snapshot at a time.
struct Snapshots<'a, 'b>(&'a mut JsonImport<'b>);
/// One snapshot, its regions checked as they come.
struct SnapshotSeed {
    at: Place,
    sample_us: u64,
}
/// A snapshot's `regions` list.
struct Regions<'a> {
    at: &'a Place,
    out: &'a mut Vec<RegionSnapshot>,
}

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
            if let Err(e) = self.0.end_record() {
                self.0.failed = Some(e);
                return Err(de::Error::custom("stopped"));
            }
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
                    if let Err(m) = self.0.intervals(v) {
                        self.0.refused.set(true);
                        return Err(de::Error::custom(m));
                    }
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
            let seed = SnapshotSeed {
                at: Place {
                    record: self.0.record,
                    snapshot: self.0.snapshot,
                    end_ns: None,
                    refused: Rc::clone(&self.0.refused),
                    cuts: Rc::clone(&self.0.cuts),
                },
                sample_us: self.0.attrs.sample_us,
            };
            // Every error names the snapshot (the checks' own messages do).
            let (ti, si) = (self.0.record, self.0.snapshot);
            let s = match seq.next_element_seed(seed) {
                Ok(Some(s)) => s,
                Ok(None) => return Ok(()),
                Err(e) if self.0.refused.get() => return Err(e),
                Err(e) => return Err(de::Error::custom(format!("record {ti} snapshot {si}: {e}"))),
            };
            if let Err(m) = self.0.snapshot(s) {
                self.0.refused.set(true);
                return Err(de::Error::custom(m));
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for SnapshotSeed {
    type Value = Snapshot;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Snapshot, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SnapshotSeed {
    type Value = Snapshot;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}: a snapshot as a JSON object", self.at)
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Snapshot, A::Error> {
        let (mut start, mut end, mut sample, mut seen) = (None, None, None, false);
        let mut regions = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "start_time" => start = Some(map.next_value::<Num>()?),
                "end_time" => {
                    let t: Num = map.next_value()?;
                    self.at.end_ns = t.non_negative();
                    end = Some(t);
                }
                "sample_interval_us" => sample = map.next_value::<Option<Num>>()?,
                "regions" => {
                    map.next_value_seed(Regions {
                        at: &self.at,
                        out: &mut regions,
                    })?;
                    seen = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let at = &self.at;
        let missing = |what: &str| at.refuse(format!("{at}: no {what:?}"));
        let time = |what: &str, n: Option<Num>| {
            let n = n.ok_or_else(|| missing(what))?;
            n.non_negative().ok_or_else(|| {
                at.refuse(format!(
                    "{at} {what}: {n} is not a time in nanoseconds (0 or more)"
                ))
            })
        };
        let (start_ns, end_ns) = (time("start_time", start)?, time("end_time", end)?);
        if !seen {
            return Err(missing("regions"));
        }
        if start_ns > end_ns {
            return Err(at.refuse(format!(
                "{at}: start_time {start_ns} is after end_time {end_ns}"
            )));
        }
        let sample_us = match sample {
            None => self.sample_us,
            Some(n) => n.non_negative().filter(|&v| v > 0).ok_or_else(|| {
                at.refuse(format!(
                    "{at} sample_interval_us: {n}; a sampling interval is at least 1 us"
                ))
            })?,
        };
        // Times in nanoseconds; the i-th snapshots of all records are paired
        // later, so an empty one is kept too.
        Ok(Snapshot {
            start_us: start_ns / 1000,
            end_us: end_ns / 1000,
            sample_us,
            aggr_us: 0,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions,
            }],
        })
    }
}

impl<'de> DeserializeSeed<'de> for Regions<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Regions<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}: a \"regions\" list", self.at)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut ri = 0;
        let mut cut = 0;
        while let Some(g) = seq.next_element::<DamoRegion>()? {
            let prev_end = self.out.last().map(|r| r.end);
            if cut > 0 {
                cut += 1;
                continue;
            }
            // A region that starts before the one before it ends: the rest
            // of the list is dropped (the regions so far are in order), and
            // the import says so.
            if let (Some(p), Some(start)) = (prev_end, g.start.whole(u64::MAX)) {
                if start < p && !(g.start.is(0) && g.end.is(0)) {
                    cut = 1;
                    let mut c = self.at.cuts.borrow_mut();
                    c.snapshots += 1;
                    c.first.get_or_insert_with(|| {
                        format!("{} region {ri} ({start:#x}, before {p:#x})", self.at)
                    });
                    continue;
                }
            }
            if let Some(r) = region(self.at, ri, &g).map_err(|m| self.at.refuse(m))? {
                if self.out.len() >= MAX_REGIONS {
                    return Err(self.at.refuse(format!(
                        "{}: more than {MAX_REGIONS} regions, udamon's cap on a window",
                        self.at
                    )));
                }
                self.out.push(r);
            }
            ri += 1;
        }
        self.at.cuts.borrow_mut().regions += cut;
        Ok(())
    }
}

/// Streams damo's JSON from `r` (from byte `at` of the JSON text on) into
/// spills, then merges them into `output`.
#[allow(clippy::too_many_arguments)]
fn import_json(
    r: impl Read,
    format: &'static str,
    at: u64,
    input: &Path,
    output: &Path,
    dir: &Path,
    tick: &mut dyn FnMut() -> ControlFlow<()>,
) -> Result<Summary, Error> {
    let mut imp = JsonImport {
        input,
        dir,
        attrs: Attrs::default(),
        spills: Vec::new(),
        failed: None,
        record: 0,
        snapshot: 0,
        refused: Rc::new(Cell::new(false)),
        cuts: Rc::default(),
        tick,
    };
    let bad = |msg: String| Error::Format {
        path: input.to_path_buf(),
        msg,
    };
    let over = Rc::new(Cell::new(None));
    // Under serde_json's buffer, so that it scans whole buffers.
    let r = BufReader::with_capacity(1 << 16, TokenCap::new(r, at, Rc::clone(&over)));
    let mut de = serde_json::Deserializer::from_reader(r);
    let parsed = Records(&mut imp)
        .deserialize(&mut de)
        .and_then(|()| de.end());
    if let Some(e) = imp.failed.take() {
        return Err(e);
    }
    if let Some(at) = over.get() {
        let of = if format == "json_compressed" {
            " of the inflated JSON"
        } else {
            ""
        };
        return Err(bad(format!(
            "byte {at}{of}: a JSON string or number longer than {} MiB, udamon's cap on one \
             value (damo's are a few dozen bytes); not damo's JSON",
            MAX_TOKEN_BYTES >> 20
        )));
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
            // Well-formed JSON holding a value damo never writes: the
            // message names the value and its place.
            _ if imp.refused.get() => bad(e.to_string()),
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
        if let Some(w) = s.writer {
            w.finish()?;
        }
        spills.push(s.file);
    }
    let header = header(input, format, attrs, spills.len());
    let cuts = imp.cuts.borrow();
    let warnings = cuts.first.iter().map(|first| {
        format!(
            "{}: {} snapshot(s) listed regions out of order, starting before the region \
             before them ends ({} region(s) in all, first at {first}; damo's last window of a \
             record ended under load repeats regions so): each was kept up to that point",
            input.display(),
            cuts.snapshots,
            cuts.regions
        )
    });
    let warnings: Vec<String> = warnings.collect();
    merge(&spills, header, output, imp.tick).map(|(snapshots, duration_us)| Summary {
        format,
        attrs,
        snapshots,
        targets: spills.len(),
        duration_us,
        warnings,
    })
}

/// Writes `output` from the spills read in step: snapshot i of the output
/// holds snapshot i of every spill (its window spanning theirs, its
/// sampling interval the first one's), times counted from the earliest
/// start.
fn merge(
    spills: &[tempfile::NamedTempFile],
    header: Header,
    output: &Path,
    tick: &mut dyn FnMut() -> ControlFlow<()>,
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
            let (tx, rx) = sync_channel::<Snapshot>(2);
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
            let (mut start, mut end, mut sample_us) = (u64::MAX, 0, None);
            for (ti, rx) in rxs.iter().enumerate() {
                let Ok(s) = rx.recv() else { continue };
                start = start.min(s.start_us);
                end = end.max(s.end_us);
                sample_us.get_or_insert(s.sample_us);
                let regions = s.targets.into_iter().next().map(|t| t.regions);
                if let Some(regions) = regions.filter(|r| !r.is_empty()) {
                    targets.push(TargetSnapshot {
                        target_idx: ti as u32,
                        regions,
                    });
                }
            }
            let Some(sample_us) = sample_us else { break };
            if targets.is_empty() {
                continue;
            }
            let snap = Snapshot {
                start_us: start.saturating_sub(origin),
                end_us: end.saturating_sub(origin),
                sample_us,
                aggr_us: header.attrs.aggr_us,
                targets,
            };
            w.push_snapshot(&snap)?;
            n += 1;
            duration = snap.end_us;
            if n % 64 == 0 && tick().is_break() {
                return Err(Error::Interrupted);
            }
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

/// Reads one line into `line` (without holding more than
/// [`MAX_LINE_BYTES`] of it); `Ok(0)` at the end of the input,
/// `Err(None)` for a line past the cap.
fn read_line_capped(r: &mut impl BufRead, line: &mut Vec<u8>) -> Result<usize, Option<io::Error>> {
    line.clear();
    let mut n = 0;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Some(e)),
        };
        if buf.is_empty() {
            return Ok(n);
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > MAX_LINE_BYTES {
            return Err(None);
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        n += take;
        if done {
            return Ok(n);
        }
    }
}

/// What [`import_perf_script`] refuses a file that is not perf script
/// text with.
const NOT_PERF_SCRIPT: &str = "neither damo's json, json_compressed nor perf_script format (perf.data files need `damo convert --format json` first)";

/// `perf script` text of `damon:damon_aggregated` (damo's perf_script
/// format, or a tracefs `trace` file): a pass for the targets, a pass to
/// assemble the windows.
fn import_perf_script(
    input: &Path,
    output: &Path,
    total: u64,
    progress: &mut dyn FnMut(u64, u64) -> ControlFlow<()>,
) -> Result<Summary, Error> {
    let ps = PerfScript { input, total };
    let ids = ps.targets(progress)?;
    if ids.is_empty() {
        return Err(ps.bad("no damon_aggregated line in the file".into()));
    }
    let attrs = Attrs::default();
    let mut w = Writer::create(output, &header(input, "perf_script", attrs, ids.len()))?;
    let mut asm = Assembler::new(ids.len(), attrs.sample_us, attrs.aggr_us);
    let windows = ps.windows(&mut w, &mut asm, progress)?;
    w.finish()?;
    let mut warnings = Vec::new();
    let Windows {
        snapshots: n,
        duration_us: duration,
        pending,
        last,
    } = windows;
    if pending > 0 {
        let (nr, time_us) = last;
        let at = time_us.map_or(String::new(), |t| {
            format!(" at {}.{:06} s", t / 1_000_000, t % 1_000_000)
        });
        warnings.push(format!(
            "{}: the last window ({pending} damon_aggregated event(s) up to line {nr}{at}) is \
             incomplete, cut short, and was dropped",
            input.display()
        ));
    }
    Ok(Summary {
        format: "perf_script",
        attrs,
        snapshots: n,
        targets: ids.len(),
        duration_us: duration,
        warnings,
    })
}

/// A perf script file as [`import_perf_script`] reads it, a line at a
/// time, in two passes (each half of the progress to `total` bytes).
struct PerfScript<'a> {
    input: &'a Path,
    total: u64,
}

/// What the second pass over a perf script file did: snapshots written,
/// the last one's end, the events taken since (an incomplete window), and
/// the last event's line and time.
struct Windows {
    snapshots: u64,
    duration_us: u64,
    pending: usize,
    last: (u64, Option<u64>),
}

impl PerfScript<'_> {
    fn bad(&self, msg: String) -> Error {
        Error::Format {
            path: self.input.to_path_buf(),
            msg,
        }
    }

    fn read_err(&self, source: io::Error) -> Error {
        Error::Read {
            path: self.input.to_path_buf(),
            source,
        }
    }

    /// Calls `f` on every damon_aggregated event with its line number;
    /// `base` offsets progress.
    fn each(
        &self,
        base: u64,
        progress: &mut dyn FnMut(u64, u64) -> ControlFlow<()>,
        f: &mut dyn FnMut(u64, udamon_kdamon::trace::AggregatedEvent) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut r = BufReader::new(File::open(self.input).map_err(|e| self.read_err(e))?);
        let (mut line, mut done, mut nr) = (Vec::new(), 0u64, 0u64);
        loop {
            nr += 1;
            let n = match read_line_capped(&mut r, &mut line) {
                Ok(n) => n,
                Err(Some(e)) => return Err(self.read_err(e)),
                Err(None) => {
                    return Err(self.bad(format!(
                        "line {nr} (from byte {done}) is longer than {} MiB, udamon's cap on a \
                         line of perf script text (a damon_aggregated line is about 120 bytes); {NOT_PERF_SCRIPT}",
                        MAX_LINE_BYTES >> 20
                    )))
                }
            };
            if n == 0 {
                return Ok(());
            }
            done += n as u64;
            let Ok(text) = std::str::from_utf8(&line) else {
                return Err(self.bad(NOT_PERF_SCRIPT.into()));
            };
            match parse_aggregated(text) {
                Some(ev) => f(nr, ev)?,
                None if text.contains("damon_aggregated:") && text.contains("target_id=") => {
                    return Err(self.bad(format!(
                        "line {nr}: a damon_aggregated event udamon cannot read (expected \
                         `target_id=N nr_regions=N START-END: NR_ACCESSES AGE` in whole \
                         numbers): {}",
                        text.trim_end().chars().take(200).collect::<String>()
                    )))
                }
                None => {}
            }
            if done % (1 << 20) < n as u64 && progress(base + done, 2 * self.total).is_break() {
                return Err(Error::Interrupted);
            }
        }
    }

    /// The first pass: the targets' ids in the order they appear, every
    /// event checked against udamon's caps.
    fn targets(
        &self,
        progress: &mut dyn FnMut(u64, u64) -> ControlFlow<()>,
    ) -> Result<Vec<u64>, Error> {
        let mut ids = Vec::new();
        self.each(0, progress, &mut |nr, ev| {
            if !ids.contains(&ev.target_id) {
                if ids.len() >= MAX_TARGETS {
                    return Err(self.bad(format!(
                        "line {nr}: target_id={} makes more than {MAX_TARGETS} targets, udamon's cap \
                         on the targets of one record",
                        ev.target_id
                    )));
                }
                ids.push(ev.target_id);
            }
            let r = &ev.region;
            if r.end <= r.start {
                return Err(self.bad(format!(
                    "line {nr}: region {:#x}-{:#x} does not end after it starts",
                    r.start, r.end
                )));
            }
            if ev.nr_regions as usize > MAX_REGIONS {
                return Err(self.bad(format!(
                    "line {nr}: nr_regions={} is more than {MAX_REGIONS}, udamon's cap on a window",
                    ev.nr_regions
                )));
            }
            Ok(())
        })?;
        Ok(ids)
    }

    /// The second pass: the events assembled into windows, each written to
    /// `w` as a snapshot once complete.
    fn windows(
        &self,
        w: &mut Writer<BufWriter<File>>,
        asm: &mut Assembler,
        progress: &mut dyn FnMut(u64, u64) -> ControlFlow<()>,
    ) -> Result<Windows, Error> {
        let (mut n, mut duration) = (0u64, 0u64);
        // Events taken since the last complete window, and the last one's time.
        let (mut pending, mut last) = (0usize, (0u64, None));
        self.each(self.total, progress, &mut |nr, ev| {
            last = (nr, ev.time_us);
            match asm.push(ev) {
                Some(s) => {
                    pending = 0;
                    w.push_snapshot(&s)?;
                    n += 1;
                    duration = s.end_us;
                }
                None => {
                    pending += 1;
                    if pending > MAX_REGIONS {
                        return Err(self.bad(format!(
                            "line {nr}: more than {MAX_REGIONS} damon_aggregated events without a \
                             complete window, udamon's cap on a window"
                        )));
                    }
                }
            }
            Ok(())
        })?;
        Ok(Windows {
            snapshots: n,
            duration_us: duration,
            pending,
            last,
        })
    }
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

/// The indexes of the targets of `reader`'s record: its header's and
/// those its snapshots name (a record of whole programs holds targets that
/// arrived after the start), in index order.
fn target_indexes(reader: &Reader) -> Result<Vec<u32>, udamon_record::Error> {
    let mut ids: std::collections::BTreeSet<u32> =
        (0..reader.header().targets.len() as u32).collect();
    reader.for_each_snapshot(|s| {
        for t in &s.targets {
            ids.insert(t.target_idx);
        }
    })?;
    Ok(ids.into_iter().collect())
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

/// An error of an export's writing; `Interrupted` is the caller's stop.
fn export_err(e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::Interrupted => Error::Interrupted,
        _ => Error::Write(udamon_record::Error::Write(e)),
    }
}

/// Writes the udamon record read by `reader` to `out` in damo's `format`,
/// holding one snapshot at a time (the record is read once per target).
/// `tick` is called after each snapshot written; it returns `Break` to
/// stop the export ([`Error::Interrupted`]).
pub fn export(
    reader: &Reader,
    out: impl io::Write,
    format: ExportFormat,
    tick: &mut dyn FnMut() -> ControlFlow<()>,
) -> Result<Exported, Error> {
    let targets = target_indexes(reader)?;
    let write_err = export_err;
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
                    if tick().is_break() {
                        res = Err(io::Error::from(io::ErrorKind::Interrupted));
                        return ControlFlow::Break(());
                    }
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
    tick: &mut dyn FnMut() -> ControlFlow<()>,
) -> Result<(), Error> {
    let write_err = export_err;
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
            if tick().is_break() {
                res = Err(io::Error::from(io::ErrorKind::Interrupted));
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        })?;
        res.map_err(write_err)?;
        w.write_all(b"],\"data_source\":\"unknown\"}")
            .map_err(write_err)?;
    }
    w.write_all(b"]").map_err(write_err)?;
    Ok(())
}
