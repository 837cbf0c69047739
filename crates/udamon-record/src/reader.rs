//! Reading records.

use std::ops::{ControlFlow, Range};
use std::path::{Path, PathBuf};

use udamon_core::Snapshot;

use crate::codec::{decode_json, decode_snapshot, TAG_JSON, TAG_SNAPSHOT};
use crate::frame::{FrameHeader, FRAME_HEADER_LEN, FRAME_MARKER};
use crate::index::{self, TRAILER_LEN};
use crate::varint::Cursor;
use crate::{escape, Damage, Entry, Error, FrameInfo, Header, MAGIC, VERSION};

/// Bytes before the header JSON: magic, version, header length, header CRC32.
pub(crate) const PREAMBLE_LEN: usize = 18;

/// Bytes read at a time while looking for the next frame after a damaged one.
const RESYNC_CHUNK: usize = 1 << 20;

/// Where a record's bytes are: in memory, or in a file read a frame at a
/// time (then a report's memory does not grow with the record's length).
enum Source {
    Bytes(Vec<u8>),
    File { file: std::fs::File, path: PathBuf },
}

impl Source {
    /// The `len` bytes at `off` (which the caller knows to be there),
    /// borrowed from memory or read into `scratch`.
    fn read<'a>(
        &'a self,
        off: u64,
        len: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], Error> {
        match self {
            Source::Bytes(b) => {
                let off = off as usize;
                b.get(off..off + len).ok_or_else(|| Error::Corrupt {
                    offset: off as u64,
                    reason: format!("{len} bytes asked for past the end"),
                })
            }
            Source::File { file, path } => {
                scratch.resize(len, 0);
                std::os::unix::fs::FileExt::read_exact_at(file, scratch, off).map_err(
                    |source| Error::Io {
                        path: path.clone(),
                        source,
                    },
                )?;
                Ok(&scratch[..])
            }
        }
    }
}

/// Called with each damaged frame found while reading (see
/// [`Reader::on_damage`]).
type DamageHook = Box<dyn Fn(&Damage) + Send + Sync + std::panic::RefUnwindSafe>;

/// A record opened for reading: its header parsed and its frames located,
/// but not yet decompressed. A closed record is opened from its frame index
/// (its last bytes), and each frame is checked (CRC32) when it is read; a
/// record without an index (a run killed before it closed) is scanned and
/// every frame checked at open. A record opened from a file stays there:
/// frames are read as they are decoded.
pub struct Reader {
    source: Source,
    len: u64,
    header: Header,
    frames: Vec<FrameInfo>,
    /// Per frame: the payload's offset and the frame header.
    metas: Vec<(u64, FrameHeader)>,
    /// Damage found at open (by the scan).
    damage: Vec<Damage>,
    /// Whether the frames come from the index: their payloads are checked
    /// when read, and damage found then goes to `late`.
    indexed: bool,
    late: std::sync::Mutex<Vec<Damage>>,
    hook: Option<DamageHook>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("header", &self.header)
            .field("frames", &self.frames.len())
            .field("indexed", &self.indexed)
            .field("damage", &self.damage())
            .finish()
    }
}

/// A frame decoder's reusable buffers.
struct Decoder {
    dctx: zstd::bulk::Decompressor<'static>,
    raw: Vec<u8>,
    /// The compressed payload, when it is read from a file.
    payload: Vec<u8>,
}

impl Decoder {
    fn new(offset: u64) -> Result<Self, Error> {
        let dctx = zstd::bulk::Decompressor::new().map_err(|e| Error::Corrupt {
            offset,
            reason: format!("cannot start the zstd decoder: {e}"),
        })?;
        Ok(Self {
            dctx,
            raw: Vec::new(),
            payload: Vec::new(),
        })
    }
}

/// A frame's summary from its header.
fn frame_info(offset: u64, h: &FrameHeader) -> FrameInfo {
    FrameInfo {
        offset,
        len: FRAME_HEADER_LEN as u64 + u64::from(h.payload_len),
        nr_snapshots: h.nr_snapshots,
        first_start_us: h.first_start_us,
        last_end_us: h.last_end_us,
        min_addr: h.min_addr,
        max_addr: h.max_addr,
    }
}

/// Frames decoded ahead of the callback per decoding thread.
const AHEAD_PER_THREAD: usize = 2;

/// What checking the frame at an offset found.
enum Check {
    Good(FrameHeader),
    /// Why it cannot be read, and its header when that much is intact.
    Bad {
        reason: String,
        header: Option<FrameHeader>,
    },
}

/// The record's bytes and the buffers its checks reuse.
struct Scan<'a> {
    source: &'a Source,
    len: u64,
    scratch: Vec<u8>,
    chunk: Vec<u8>,
}

impl Scan<'_> {
    /// Checks the frame at `off` (frame `i`): header, length and payload CRC.
    fn check(&mut self, off: u64, i: usize) -> Result<Check, Error> {
        let bad = |reason: String, header| Ok(Check::Bad { reason, header });
        let rem = self.len - off;
        if rem < FRAME_HEADER_LEN as u64 {
            return bad(
                format!(
                    "frame {i} is cut inside its header: only {rem} of {FRAME_HEADER_LEN} bytes remain"
                ),
                None,
            );
        }
        let hb: [u8; FRAME_HEADER_LEN] = self
            .source
            .read(off, FRAME_HEADER_LEN, &mut self.scratch)?
            .try_into()
            .expect("a whole frame header");
        let h = match FrameHeader::parse(&hb) {
            Ok(h) => h,
            Err(what) => return bad(format!("frame {i} {what}"), None),
        };
        let payload_len = u64::from(h.payload_len);
        let avail = rem - FRAME_HEADER_LEN as u64;
        if payload_len > avail {
            return bad(
                format!("frame {i} declares {payload_len} bytes but only {avail} remain"),
                Some(h),
            );
        }
        let payload = self.source.read(
            off + FRAME_HEADER_LEN as u64,
            h.payload_len as usize,
            &mut self.scratch,
        )?;
        let computed = crc32fast::hash(payload);
        if computed != h.payload_crc {
            return bad(
                format!(
                    "frame {i} payload is damaged (crc32 {:08x} stored, {computed:08x} computed)",
                    h.payload_crc
                ),
                Some(h),
            );
        }
        Ok(Check::Good(h))
    }

    /// The index frame's offset, if the record ends with a trailer.
    fn trailer(&mut self, data_start: u64) -> Result<Option<u64>, Error> {
        if self.len < data_start + (FRAME_HEADER_LEN + TRAILER_LEN) as u64 {
            return Ok(None);
        }
        let t: [u8; TRAILER_LEN] = self
            .source
            .read(
                self.len - TRAILER_LEN as u64,
                TRAILER_LEN,
                &mut self.scratch,
            )?
            .try_into()
            .expect("a whole trailer");
        Ok(index::parse_trailer(&t).filter(|&at| {
            at >= data_start && at <= self.len - (FRAME_HEADER_LEN + TRAILER_LEN) as u64
        }))
    }

    /// The frames the index frame at `at` lists, if it is intact and they
    /// tile the record from `data_start` to it; `None` sends the caller to
    /// a scan.
    fn index(
        &mut self,
        at: u64,
        data_start: u64,
    ) -> Result<Option<Vec<(u64, FrameHeader)>>, Error> {
        let h = match self.check(at, 0)? {
            Check::Good(h)
                if h.nr_snapshots == 0
                    && h.nr_entries == 1
                    && at + FRAME_HEADER_LEN as u64 + u64::from(h.payload_len) == self.len =>
            {
                h
            }
            _ => return Ok(None),
        };
        let payload = self.source.read(
            at + FRAME_HEADER_LEN as u64,
            h.payload_len as usize,
            &mut self.scratch,
        )?;
        let Ok(raw) = zstd::bulk::decompress(payload, h.raw_len as usize) else {
            return Ok(None);
        };
        if raw.len() != h.raw_len as usize {
            return Ok(None);
        }
        Ok(index::decode(&raw, data_start, at))
    }

    /// The first intact frame at or after `from`: the next frame marker
    /// whose header and payload check out.
    fn next_frame(&mut self, from: u64, i: usize) -> Result<Option<(u64, FrameHeader)>, Error> {
        let finder = memchr::memmem::Finder::new(FRAME_MARKER);
        let mut pos = from;
        while pos + FRAME_HEADER_LEN as u64 <= self.len {
            let n = ((self.len - pos) as usize).min(RESYNC_CHUNK);
            let mut chunk = std::mem::take(&mut self.chunk);
            let hits: Vec<u64> = finder
                .find_iter(self.source.read(pos, n, &mut chunk)?)
                .map(|k| pos + k as u64)
                .collect();
            self.chunk = chunk;
            for at in hits {
                if let Check::Good(h) = self.check(at, i)? {
                    return Ok(Some((at, h)));
                }
            }
            if n < RESYNC_CHUNK {
                break;
            }
            // Overlap by less than a marker, so one across the boundary is
            // found and none twice.
            pos += (n - (FRAME_MARKER.len() - 1)) as u64;
        }
        Ok(None)
    }

    /// Scans the frames from `data_start` to the end, checking each; a
    /// damaged stretch is noted and skipped to the next intact frame. The
    /// index frame (at `index_at`) is left out.
    fn frames(&mut self, data_start: u64, index_at: Option<u64>) -> Result<Scanned, Error> {
        let n = self.len;
        let mut frames: Vec<FrameInfo> = Vec::new();
        let mut metas = Vec::new();
        let mut damage = Vec::new();
        let mut snapshots_ok = 0u64;
        let mut off = data_start;
        while off < n {
            let i = frames.len();
            let h = match self.check(off, i)? {
                Check::Good(h) => h,
                Check::Bad { reason, header } => {
                    let (d, next) = self.damage(off, i, reason, header, &frames, snapshots_ok)?;
                    damage.push(d);
                    match next {
                        Some((at, h)) => {
                            off = at;
                            h
                        }
                        None => break,
                    }
                }
            };
            let start = off + FRAME_HEADER_LEN as u64;
            // The index frame (whose trailer points at it) holds no entry
            // for reports.
            if index_at == Some(off) && start + u64::from(h.payload_len) == n {
                break;
            }
            frames.push(frame_info(off, &h));
            metas.push((start, h));
            snapshots_ok += u64::from(h.nr_snapshots);
            off = start + u64::from(h.payload_len);
        }
        Ok(Scanned {
            frames,
            metas,
            damage,
        })
    }

    /// The damage found at `off` (frame `i`, after `frames`, with
    /// `snapshots_ok` snapshots before it) up to the next intact frame,
    /// which is returned with it.
    fn damage(
        &mut self,
        off: u64,
        i: usize,
        reason: String,
        header: Option<FrameHeader>,
        frames: &[FrameInfo],
        snapshots_ok: u64,
    ) -> Result<(Damage, Option<(u64, FrameHeader)>), Error> {
        let next = self.next_frame(off + 1, i)?;
        let end = next.map_or(self.len, |(at, _)| at);
        // Exact when the damage is one frame whose header is
        // intact; else estimated from the time it spans.
        let (snapshots_lost, lost_exact) = match (header, next) {
            (Some(h), _)
                if next.is_none()
                    || off + FRAME_HEADER_LEN as u64 + u64::from(h.payload_len) == end =>
            {
                (Some(u64::from(h.nr_snapshots)), true)
            }
            (_, Some((_, nh))) => {
                let before = frames.iter().rev().find(|f| f.nr_snapshots > 0);
                let est = match before {
                    Some(b) if nh.nr_snapshots > 0 && nh.first_start_us > b.last_end_us => {
                        let window =
                            (b.last_end_us - b.first_start_us) / u64::from(b.nr_snapshots.max(1));
                        (window > 0).then(|| (nh.first_start_us - b.last_end_us) / window)
                    }
                    _ => None,
                };
                (est, false)
            }
            _ => (None, false),
        };
        let d = Damage {
            offset: off,
            len: end - off,
            reason,
            frames_ok: i,
            snapshots_ok,
            snapshots_lost,
            lost_exact,
            resumes_at: next.map(|(at, _)| at),
        };
        Ok((d, next))
    }
}

/// Reads and checks the record's preamble (magic number, format version,
/// header length and checksum) and its JSON header; returns the header and
/// its length.
fn read_header(
    source: &Source,
    n: u64,
    name: &str,
    scratch: &mut Vec<u8>,
) -> Result<(Header, u64), Error> {
    let bytes = source
        .read(0, n.min(PREAMBLE_LEN as u64) as usize, scratch)?
        .to_vec();
    let n_pre = bytes.len();
    if n_pre < MAGIC.len() {
        if MAGIC.starts_with(&bytes) {
            return Err(Error::Header(format!(
                "{name} ends inside the magic number, after {n_pre} of 8 bytes; it holds no data"
            )));
        }
        return Err(Error::NotARecord {
            path: name.to_string(),
            found: escape(&bytes),
        });
    }
    if &bytes[..8] != MAGIC {
        return Err(Error::NotARecord {
            path: name.to_string(),
            found: escape(&bytes[..8]),
        });
    }
    if n_pre < 10 {
        return Err(Error::Header(format!(
            "{name} ends inside the format version, after {n_pre} bytes; it holds no data"
        )));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(Error::UnsupportedVersion(version));
    }
    if n_pre < PREAMBLE_LEN {
        return Err(Error::Header(format!(
            "{name} ends inside the header length and checksum, after {n_pre} of {PREAMBLE_LEN} bytes; it holds no data"
        )));
    }
    let len = u32::from_le_bytes(bytes[10..14].try_into().unwrap()) as u64;
    let stored = u32::from_le_bytes(bytes[14..18].try_into().unwrap());
    let rem = n - PREAMBLE_LEN as u64;
    if len > rem {
        return Err(Error::Header(format!(
            "{name}: the header declares {len} bytes but only {rem} remain; the record was cut before its first frame"
        )));
    }
    let json = source.read(PREAMBLE_LEN as u64, len as usize, scratch)?;
    let computed = crc32fast::hash(json);
    if stored != computed {
        return Err(Error::Header(format!(
            "{name}: header checksum mismatch (crc32 {stored:08x} stored, {computed:08x} computed)"
        )));
    }
    let mut header: Header = serde_json::from_slice(json)
        .map_err(|e| Error::Header(format!("{name}: the header JSON is invalid: {e}")))?;
    header.version = version;
    Ok((header, len))
}

/// The frames a scan found, and the damage between them.
struct Scanned {
    frames: Vec<FrameInfo>,
    metas: Vec<(u64, FrameHeader)>,
    damage: Vec<Damage>,
}

impl Reader {
    /// Opens the record at `path`, parses its header and checks its frames
    /// (reading the file once, a frame at a time). A damaged or truncated
    /// frame is not an error: reading goes on at the next intact frame, see
    /// [`Reader::damage`].
    pub fn open(path: &Path) -> Result<Reader, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory",
            )));
        }
        let len = meta.len();
        Self::parse(
            Source::File {
                file,
                path: path.to_path_buf(),
            },
            len,
            &path.display().to_string(),
            true,
        )
    }

    /// Like [`Reader::open`], for a record already in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Reader, Error> {
        let len = bytes.len() as u64;
        Self::parse(Source::Bytes(bytes), len, "input", true)
    }

    /// Like [`Reader::from_bytes`], scanning and checking every frame even
    /// when the record has an index (tests compare the two ways).
    #[doc(hidden)]
    pub fn from_bytes_scanned(bytes: Vec<u8>) -> Result<Reader, Error> {
        let len = bytes.len() as u64;
        Self::parse(Source::Bytes(bytes), len, "input", false)
    }

    fn parse(source: Source, n: u64, name: &str, use_index: bool) -> Result<Reader, Error> {
        let mut scratch = Vec::new();
        let (header, len) = read_header(&source, n, name, &mut scratch)?;

        let mut scan = Scan {
            source: &source,
            len: n,
            scratch,
            chunk: Vec::new(),
        };
        let data_start = PREAMBLE_LEN as u64 + len;
        let index_at = scan.trailer(data_start)?;
        if let Some(ix) = index_at.filter(|_| use_index) {
            if let Some(found) = scan.index(ix, data_start)? {
                let frames = found.iter().map(|&(off, h)| frame_info(off, &h)).collect();
                let metas = found
                    .into_iter()
                    .map(|(off, h)| (off + FRAME_HEADER_LEN as u64, h))
                    .collect();
                drop(scan);
                return Ok(Reader {
                    source,
                    len: n,
                    header,
                    frames,
                    metas,
                    damage: Vec::new(),
                    indexed: true,
                    late: Default::default(),
                    hook: None,
                });
            }
        }
        let Scanned {
            frames,
            metas,
            damage,
        } = scan.frames(data_start, index_at)?;
        drop(scan);
        Ok(Reader {
            source,
            len: n,
            header,
            frames,
            metas,
            damage,
            indexed: false,
            late: Default::default(),
            hook: None,
        })
    }

    /// Whether the frames were located by the record's index (a record
    /// closed by its writer) rather than by a scan.
    pub fn uses_index(&self) -> bool {
        self.indexed
    }

    /// Calls `hook` with each damaged frame found while reading a record
    /// opened from its index (where frames are checked as they are read,
    /// not at open); each is also in [`Reader::damage`] from then on.
    pub fn on_damage(
        &mut self,
        hook: impl Fn(&Damage) + Send + Sync + std::panic::RefUnwindSafe + 'static,
    ) {
        self.hook = Some(Box::new(hook));
    }

    /// Records damage found while reading frame `i` (once per frame).
    fn note_damage(&self, i: usize, reason: String) {
        let f = &self.frames[i];
        let mut late = self.late.lock().unwrap_or_else(|e| e.into_inner());
        if late.iter().any(|d| d.offset == f.offset) {
            return;
        }
        let end = f.offset + f.len;
        let d = Damage {
            offset: f.offset,
            len: f.len,
            reason,
            frames_ok: i,
            snapshots_ok: self.frames[..i]
                .iter()
                .map(|f| u64::from(f.nr_snapshots))
                .sum(),
            snapshots_lost: Some(u64::from(f.nr_snapshots)),
            lost_exact: true,
            resumes_at: (end < self.len).then_some(end),
        };
        if let Some(h) = &self.hook {
            h(&d);
        }
        late.push(d);
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The intact frames, in file order.
    pub fn frames(&self) -> &[FrameInfo] {
        &self.frames
    }

    /// Number of snapshots in the intact frames (from their headers).
    pub fn nr_snapshots(&self) -> u64 {
        self.frames.iter().map(|f| u64::from(f.nr_snapshots)).sum()
    }

    /// Every damaged or truncated stretch of the record found so far, in
    /// file order: all of them for a scanned record; for one opened from its
    /// index, those in the frames read so far. Reading goes on at the next
    /// intact frame after each; the frames in between are lost, no others.
    pub fn damage(&self) -> Vec<Damage> {
        let mut all = self.damage.clone();
        all.extend(
            self.late
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        all.sort_by_key(|d| d.offset);
        all
    }

    /// Where and why the record stops early, if it ends with a truncated or
    /// damaged frame that no intact frame follows.
    pub fn tail(&self) -> Option<Damage> {
        self.damage().pop().filter(|d| d.resumes_at.is_none())
    }

    /// Calls `f` on every entry of every intact frame, in recording order,
    /// until it returns [`ControlFlow::Break`]. Frames are decompressed and
    /// decoded on all cores, ahead of `f`, into reused buffers: clone an
    /// entry to keep it. A frame that fails to decode (it passed its CRC, so
    /// only a writer bug or a forged file does this) ends the walk with
    /// [`Error::Corrupt`] after the entries of the frames before it.
    pub fn for_each_entry(&self, f: impl FnMut(&Entry) -> ControlFlow<()>) -> Result<(), Error> {
        self.for_each_entry_in(0..self.frames.len(), f)
    }

    /// Like [`Reader::for_each_entry`], for the frames in `frames` only
    /// (indexes into [`Reader::frames`]; frames decode independently).
    pub fn for_each_entry_in(
        &self,
        frames: Range<usize>,
        mut f: impl FnMut(&Entry) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        let frames = frames.start.min(self.frames.len())..frames.end.min(self.frames.len());
        if frames.is_empty() {
            return Ok(());
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        if threads > 1 && frames.len() > 2 {
            return self.for_each_entry_parallel(frames, threads, f);
        }
        let mut d = Decoder::new(self.frames[frames.start].offset)?;
        let mut entries = Vec::new();
        for i in frames {
            self.decode_frame(i, &mut d, &mut entries)?;
            for e in &entries {
                if f(e).is_break() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Decodes frames on `threads` threads, at most `AHEAD_PER_THREAD` each
    /// ahead of the callback, and hands them to `f` in order on this thread.
    fn for_each_entry_parallel(
        &self,
        frames: Range<usize>,
        threads: usize,
        mut f: impl FnMut(&Entry) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        use std::collections::BTreeMap;
        use std::panic::{catch_unwind, AssertUnwindSafe};
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::{mpsc, Condvar, Mutex};

        /// The first frame not yet handed to `f` (decoders wait to stay
        /// within reach of it), and whether to stop.
        struct Progress {
            consumed: Mutex<usize>,
            moved: Condvar,
            stop: AtomicBool,
        }
        impl Progress {
            fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
                self.consumed.lock().unwrap_or_else(|e| e.into_inner())
            }
        }
        /// Stops the decoders when the consumer leaves, even by a panic in `f`.
        struct StopOnDrop<'a>(&'a Progress);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.stop.store(true, Ordering::Relaxed);
                let _guard = self.0.lock();
                self.0.moved.notify_all();
            }
        }

        type Decoded = (usize, Result<Vec<Entry>, Error>);
        let next = AtomicUsize::new(frames.start);
        let progress = Progress {
            consumed: Mutex::new(frames.start),
            moved: Condvar::new(),
            stop: AtomicBool::new(false),
        };
        let pool: Mutex<Vec<Vec<Entry>>> = Mutex::new(Vec::new());
        let ahead = threads * AHEAD_PER_THREAD;
        let (tx, rx) = mpsc::channel::<Decoded>();

        std::thread::scope(|scope| {
            for _ in 0..threads {
                let tx = tx.clone();
                let (next, progress, pool, end) = (&next, &progress, &pool, frames.end);
                scope.spawn(move || {
                    let mut d = None;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= end {
                            return;
                        }
                        {
                            let mut c = progress.lock();
                            while i >= *c + ahead && !progress.stop.load(Ordering::Relaxed) {
                                c = progress.moved.wait(c).unwrap_or_else(|e| e.into_inner());
                            }
                        }
                        if progress.stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let mut entries = pool
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .pop()
                            .unwrap_or_default();
                        // The decoder does not panic on any input (it is
                        // fuzzed); should it, report the frame as corrupt
                        // rather than leave the consumer waiting for it.
                        let res = catch_unwind(AssertUnwindSafe(|| {
                            let d = match &mut d {
                                Some(d) => d,
                                None => d.insert(Decoder::new(self.frames[i].offset)?),
                            };
                            self.decode_frame(i, d, &mut entries)
                        }))
                        .unwrap_or_else(|_| {
                            d = None;
                            Err(Error::Corrupt {
                                offset: self.frames[i].offset,
                                reason: format!("frame {i}: the decoder panicked"),
                            })
                        });
                        if tx.send((i, res.map(|()| entries))).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(tx);

            let _stop = StopOnDrop(&progress);
            let mut waiting: BTreeMap<usize, Result<Vec<Entry>, Error>> = BTreeMap::new();
            for i in frames {
                let entries = loop {
                    if let Some(r) = waiting.remove(&i) {
                        break r?;
                    }
                    // Every frame claimed is sent, so the channel stays open
                    // until frame i arrives.
                    let Ok((j, r)) = rx.recv() else { return Ok(()) };
                    waiting.insert(j, r);
                };
                for e in &entries {
                    if f(e).is_break() {
                        return Ok(());
                    }
                }
                pool.lock().unwrap_or_else(|e| e.into_inner()).push(entries);
                *progress.lock() = i + 1;
                progress.moved.notify_all();
            }
            Ok(())
        })
    }

    /// Calls `f` on every snapshot, in recording order.
    pub fn for_each_snapshot(&self, mut f: impl FnMut(&Snapshot)) -> Result<(), Error> {
        self.for_each_entry(|e| {
            if let Entry::Snapshot(s) = e {
                f(s);
            }
            ControlFlow::Continue(())
        })
    }

    /// All snapshots, in recording order.
    pub fn snapshots(&self) -> Result<Vec<Snapshot>, Error> {
        let mut v = Vec::with_capacity(self.nr_snapshots().min(1 << 20) as usize);
        self.for_each_snapshot(|s| v.push(s.clone()))?;
        Ok(v)
    }

    /// Decodes frame `i` into `entries`, reusing the snapshots already there.
    fn decode_frame(
        &self,
        i: usize,
        d: &mut Decoder,
        entries: &mut Vec<Entry>,
    ) -> Result<(), Error> {
        let offset = self.frames[i].offset;
        let corrupt = |reason: String| Error::Corrupt {
            offset,
            reason: format!("frame {i}: {reason}"),
        };
        let (start, h) = self.metas[i];
        let Decoder { dctx, raw, payload } = d;
        let payload = if self.indexed {
            // Located by the index, unchecked so far: the header must be
            // the one indexed, and the payload must pass its CRC.
            let all =
                self.source
                    .read(offset, FRAME_HEADER_LEN + h.payload_len as usize, payload)?;
            let (hb, p) = all.split_at(FRAME_HEADER_LEN);
            let hb: &[u8; FRAME_HEADER_LEN] = hb.try_into().expect("a whole frame header");
            let problem = match FrameHeader::parse(hb) {
                Err(what) => Some(format!("frame {i} {what}")),
                Ok(fh) if fh != h => Some(format!(
                    "frame {i} has a header other than the one in the record's index"
                )),
                Ok(_) => {
                    let computed = crc32fast::hash(p);
                    (computed != h.payload_crc).then(|| {
                        format!(
                            "frame {i} payload is damaged (crc32 {:08x} stored, {computed:08x} computed)",
                            h.payload_crc
                        )
                    })
                }
            };
            if let Some(reason) = problem {
                self.note_damage(i, reason);
                entries.clear();
                return Ok(());
            }
            p
        } else {
            self.source.read(start, h.payload_len as usize, payload)?
        };
        raw.clear();
        raw.reserve(h.raw_len as usize);
        let got = dctx
            .decompress_to_buffer(payload, raw)
            .map_err(|e| corrupt(format!("payload does not decompress: {e}")))?;
        if got != h.raw_len as usize {
            return Err(corrupt(format!(
                "payload decompresses to {got} bytes, not the {} declared",
                h.raw_len
            )));
        }
        let mut c = Cursor::new(raw);
        let mut n = 0usize;
        let mut prev_snapshot: Option<usize> = None;
        let (mut nr_entries, mut nr_snapshots) = (0u32, 0u32);
        while !c.is_empty() {
            let (at, idx) = (c.pos(), nr_entries);
            let bad = |what: &str| corrupt(format!("entry {idx} at payload byte {at}: {what}"));
            let tag = c.u8().ok_or_else(|| bad("missing tag"))?;
            let len = c
                .len(c.remaining())
                .ok_or_else(|| bad("length runs past the payload"))?;
            let body = c
                .bytes(len)
                .ok_or_else(|| bad("length runs past the payload"))?;
            nr_entries = nr_entries.saturating_add(1);
            match tag {
                TAG_SNAPSHOT => {
                    if n == entries.len() {
                        entries.push(Entry::Snapshot(Snapshot::default()));
                    }
                    let (before, rest) = entries.split_at_mut(n);
                    let prev = prev_snapshot.and_then(|j| match &before[j] {
                        Entry::Snapshot(s) => Some(s),
                        Entry::Json { .. } => None,
                    });
                    if !matches!(rest[0], Entry::Snapshot(_)) {
                        rest[0] = Entry::Snapshot(Snapshot::default());
                    }
                    let Entry::Snapshot(out) = &mut rest[0] else {
                        unreachable!()
                    };
                    decode_snapshot(body, prev, out).map_err(|e| bad(&e))?;
                    prev_snapshot = Some(n);
                    nr_snapshots = nr_snapshots.saturating_add(1);
                }
                TAG_JSON => {
                    let (kind, value) = decode_json(body).map_err(|e| bad(&e))?;
                    let e = Entry::Json { kind, value };
                    if n == entries.len() {
                        entries.push(e);
                    } else {
                        entries[n] = e;
                    }
                }
                // A tag from a newer writer: skip it.
                _ => continue,
            }
            n += 1;
        }
        entries.truncate(n);
        if nr_entries != h.nr_entries || nr_snapshots != h.nr_snapshots {
            return Err(corrupt(format!(
                "holds {nr_entries} entries and {nr_snapshots} snapshots, but its header declares {} and {}",
                h.nr_entries, h.nr_snapshots
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;

    use proptest::prelude::*;
    use udamon_core::{Attrs, RegionSnapshot, TargetSnapshot};

    use super::*;
    use crate::codec::Encoder;
    use crate::varint::put;
    use crate::Writer;

    /// A record whose only frame holds `raw` as its payload.
    fn record_with_payload(raw: &[u8], nr_entries: u32, nr_snapshots: u32) -> Vec<u8> {
        // No index: frames are appended by hand after the writer's.
        let mut w = Writer::new(Vec::new(), &Header::new("sim", Attrs::default())).unwrap();
        w.set_index(false);
        let mut bytes = w.finish().unwrap();
        push_frame(&mut bytes, raw, nr_entries, nr_snapshots);
        bytes
    }

    fn push_frame(bytes: &mut Vec<u8>, raw: &[u8], nr_entries: u32, nr_snapshots: u32) {
        let payload = zstd::bulk::compress(raw, 3).unwrap();
        let h = FrameHeader {
            payload_len: payload.len() as u32,
            raw_len: raw.len() as u32,
            payload_crc: crc32fast::hash(&payload),
            nr_entries,
            nr_snapshots,
            first_start_us: 0,
            last_end_us: 0,
            min_addr: 0,
            max_addr: 0,
        };
        bytes.extend_from_slice(&h.to_bytes());
        bytes.extend_from_slice(&payload);
    }

    fn entry(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
        out.push(tag);
        put(out, body.len() as u64);
        out.extend_from_slice(body);
    }

    fn snap(t: u64) -> Snapshot {
        let regions = (0..20u64)
            .map(|i| RegionSnapshot {
                start: (i * 7 + t) << 12,
                end: (i * 7 + t + 5) << 12,
                nr_accesses: (i % 3) as u32,
                age: t as u32,
            })
            .collect();
        Snapshot {
            start_us: t,
            end_us: t + 1,
            sample_us: 5,
            aggr_us: 100,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions,
            }],
        }
    }

    /// Raw payload of two snapshots (the second relative) and a JSON entry.
    fn valid_raw() -> Vec<u8> {
        let (a, b) = (snap(1), snap(2));
        let mut raw = Vec::new();
        let mut body = Vec::new();
        let mut enc = Encoder::default();
        enc.encode(&a, None, &mut body).unwrap();
        entry(&mut raw, TAG_SNAPSHOT, &body);
        body.clear();
        crate::codec::encode_json("k", &serde_json::json!({"a": [1, 2]}), &mut body).unwrap();
        entry(&mut raw, TAG_JSON, &body);
        body.clear();
        enc.encode(&b, Some(&a), &mut body).unwrap();
        entry(&mut raw, TAG_SNAPSHOT, &body);
        raw
    }

    fn decode_all(bytes: Vec<u8>) -> Result<Vec<Entry>, Error> {
        let r = Reader::from_bytes(bytes).unwrap();
        assert!(r.tail().is_none());
        let mut v = Vec::new();
        r.for_each_entry(|e| {
            v.push(e.clone());
            ControlFlow::Continue(())
        })?;
        Ok(v)
    }

    #[test]
    fn unknown_tags_are_skipped() {
        let mut raw = Vec::new();
        entry(&mut raw, 0x7f, b"from the future");
        raw.extend_from_slice(&valid_raw());
        entry(&mut raw, 0x00, b"");
        let got = decode_all(record_with_payload(&raw, 5, 2)).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], Entry::Snapshot(snap(1)));
        assert_eq!(
            got[1],
            Entry::Json {
                kind: "k".into(),
                value: serde_json::json!({"a": [1, 2]})
            }
        );
        assert_eq!(got[2], Entry::Snapshot(snap(2)));
    }

    #[test]
    fn inconsistent_frames_are_corrupt() {
        let raw = valid_raw();
        let e = decode_all(record_with_payload(&raw, 3, 1)).unwrap_err();
        assert!(
            e.to_string()
                .contains("holds 3 entries and 2 snapshots, but its header declares 3 and 1"),
            "{e}"
        );
        // A relative snapshot first in its frame.
        let mut raw2 = Vec::new();
        let mut body = Vec::new();
        Encoder::default()
            .encode(&snap(2), Some(&snap(1)), &mut body)
            .unwrap();
        entry(&mut raw2, TAG_SNAPSHOT, &body);
        let e = decode_all(record_with_payload(&raw2, 1, 1)).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }));
        assert!(e.to_string().contains("first snapshot of its frame"), "{e}");
        // Not zstd at all, with a valid CRC.
        let mut bytes = record_with_payload(&raw, 3, 2);
        let start = bytes.len() - zstd::bulk::compress(&raw, 3).unwrap().len();
        for b in &mut bytes[start..] {
            *b = 0x55;
        }
        let crc = crc32fast::hash(&bytes[start..]);
        let hstart = start - FRAME_HEADER_LEN;
        let mut h = FrameHeader::parse(bytes[hstart..start].try_into().unwrap()).unwrap();
        h.payload_crc = crc;
        bytes[hstart..start].copy_from_slice(&h.to_bytes());
        let e = decode_all(bytes).unwrap_err();
        assert!(e.to_string().contains("does not decompress"), "{e}");
    }

    #[test]
    fn a_corrupt_frame_ends_the_walk_after_the_frames_before_it() {
        let mut bytes = record_with_payload(&valid_raw(), 3, 2);
        for _ in 0..4 {
            push_frame(&mut bytes, &valid_raw(), 3, 2);
        }
        // Frame 5 passes its CRC but lies about its count.
        push_frame(&mut bytes, &valid_raw(), 3, 1);
        for _ in 0..4 {
            push_frame(&mut bytes, &valid_raw(), 3, 2);
        }
        let r = Reader::from_bytes(bytes).unwrap();
        assert_eq!(r.frames().len(), 10);
        for range in [0..10, 4..6] {
            let mut n = 0;
            let e = r
                .for_each_entry_in(range.clone(), |_| {
                    n += 1;
                    ControlFlow::Continue(())
                })
                .unwrap_err();
            assert_eq!(n, 3 * (5 - range.start), "{range:?}");
            assert!(
                e.to_string().starts_with(&format!(
                    "record is corrupt at byte {}: frame 5:",
                    r.frames()[5].offset
                )),
                "{e}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_payloads_never_panic(raw in prop::collection::vec(any::<u8>(), 0..512), n in 0u32..4, s in 0u32..4) {
            let _ = decode_all(record_with_payload(&raw, n.max(s), s));
        }

        #[test]
        fn mutated_payloads_never_panic(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
            let mut raw = valid_raw();
            for (i, v) in edits {
                let i = i.index(raw.len());
                raw[i] = v;
            }
            let _ = decode_all(record_with_payload(&raw, 3, 2));
        }
    }
}
