//! Writing records.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use udamon_core::Snapshot;

use crate::codec::{encode_json, Encoder, TAG_JSON, TAG_SNAPSHOT};
use crate::frame::{FrameHeader, FRAME_HEADER_LEN, MAX_RAW_LEN};
use crate::index::{self, MAX_INDEXED_FRAMES};
use crate::reader::PREAMBLE_LEN;
use crate::{varint, Error, Header, MAGIC, VERSION};

/// Snapshots per frame unless [`Writer::set_frame_snapshots`] says otherwise.
pub const DEFAULT_FRAME_SNAPSHOTS: usize = 64;
/// zstd level unless [`Writer::set_zstd_level`] says otherwise. Measured with
/// `cargo run --release -p udamon-record --example size`: the payload is
/// mostly entropy, so levels 1 and 9 give the same size (level 3 up to 7%
/// more) while level 9 costs 3 to 4 times the CPU of level 1; level 19 saves
/// 5 to 8% for 30 to 40 times the CPU.
pub const DEFAULT_ZSTD_LEVEL: i32 = 1;
/// A frame is ended early once its uncompressed payload exceeds this.
const FRAME_RAW_SOFT_LIMIT: usize = 64 << 20;

/// Writes a record: the header at once, then entries buffered into frames.
///
/// Entries are buffered and written as one frame every `frame_snapshots`
/// snapshots (64 by default), on [`Writer::flush_frame`], on
/// [`Writer::finish`], and, best effort, when the writer is dropped. Each frame
/// is flushed to the inner writer as soon as it is written, so a crash loses
/// at most the entries buffered since the last frame. Closing it (finish or
/// drop) appends the frame index, so readers open the record without
/// reading it through.
pub struct Writer<W: Write> {
    inner: Option<W>,
    path: Option<PathBuf>,
    bytes_written: u64,
    frame_snapshots: usize,
    compressor: zstd::bulk::Compressor<'static>,
    encoder: Encoder,
    /// The current frame's uncompressed payload.
    raw: Vec<u8>,
    body: Vec<u8>,
    compressed: Vec<u8>,
    /// The last snapshot of the current frame, valid if `summary.nr_snapshots > 0`.
    prev: Snapshot,
    summary: FrameHeader,
    /// Every frame written so far (offset, header), for the index written
    /// at close; `None` when the index is off, was given up (too many
    /// frames) or cannot be trusted (a frame failed to write).
    index: Option<Vec<(u64, [u8; FRAME_HEADER_LEN])>>,
    /// Bytes of magic, version and header: where the first frame goes.
    preamble_len: u64,
}

impl Writer<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes the header.
    pub fn create(path: &Path, header: &Header) -> Result<Self, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let f = File::create(path).map_err(io)?;
        Self::with_path(BufWriter::new(f), header, Some(path.to_path_buf()))
    }

    /// Writes the header to `file`, opened by the caller (with the flags
    /// it needs, such as `O_EXCL | O_NOFOLLOW`); `path` names it in errors.
    pub fn from_file(file: File, path: &Path, header: &Header) -> Result<Self, Error> {
        Self::with_path(BufWriter::new(file), header, Some(path.to_path_buf()))
    }
}

fn empty_summary() -> FrameHeader {
    FrameHeader {
        payload_len: 0,
        raw_len: 0,
        payload_crc: 0,
        nr_entries: 0,
        nr_snapshots: 0,
        first_start_us: 0,
        last_end_us: 0,
        min_addr: u64::MAX,
        max_addr: 0,
    }
}

/// Copies `src` into `dst`, reusing `dst`'s allocations.
fn copy_snapshot(dst: &mut Snapshot, src: &Snapshot) {
    dst.start_us = src.start_us;
    dst.end_us = src.end_us;
    dst.sample_us = src.sample_us;
    dst.aggr_us = src.aggr_us;
    dst.targets.truncate(src.targets.len());
    for (i, t) in src.targets.iter().enumerate() {
        match dst.targets.get_mut(i) {
            Some(d) => {
                d.target_idx = t.target_idx;
                d.regions.clear();
                d.regions.extend_from_slice(&t.regions);
            }
            None => dst.targets.push(t.clone()),
        }
    }
}

impl<W: Write> Writer<W> {
    /// Writes the header to `inner` and returns a writer for the entries.
    pub fn new(inner: W, header: &Header) -> Result<Self, Error> {
        Self::with_path(inner, header, None)
    }

    fn with_path(mut inner: W, header: &Header, path: Option<PathBuf>) -> Result<Self, Error> {
        let io = |source| match &path {
            Some(p) => Error::Io {
                path: p.clone(),
                source,
            },
            None => Error::Write(source),
        };
        let mut header = header.clone();
        header.version = VERSION;
        let json = serde_json::to_vec(&header)
            .map_err(|e| Error::Header(format!("cannot serialize the header: {e}")))?;
        let len = u32::try_from(json.len()).map_err(|_| {
            Error::Header(format!(
                "the header is {} bytes of JSON, above 4 GiB; shorten its params",
                json.len()
            ))
        })?;
        let mut pre = Vec::with_capacity(PREAMBLE_LEN + json.len());
        pre.extend_from_slice(MAGIC);
        pre.extend_from_slice(&VERSION.to_le_bytes());
        pre.extend_from_slice(&len.to_le_bytes());
        pre.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        pre.extend_from_slice(&json);
        inner.write_all(&pre).map_err(io)?;
        inner.flush().map_err(io)?;
        let compressor = zstd::bulk::Compressor::new(DEFAULT_ZSTD_LEVEL).map_err(io)?;
        Ok(Self {
            inner: Some(inner),
            path,
            bytes_written: pre.len() as u64,
            preamble_len: pre.len() as u64,
            frame_snapshots: DEFAULT_FRAME_SNAPSHOTS,
            index: Some(Vec::new()),
            compressor,
            encoder: Encoder::default(),
            raw: Vec::new(),
            body: Vec::new(),
            compressed: Vec::new(),
            prev: Snapshot::default(),
            summary: empty_summary(),
        })
    }

    fn io_err(&self, source: io::Error) -> Error {
        match &self.path {
            Some(p) => Error::Io {
                path: p.clone(),
                source,
            },
            None => Error::Write(source),
        }
    }

    /// Sets the number of snapshots per frame (at least 1) for the frames
    /// ended from now on. Smaller frames lose less on a crash but compress
    /// worse.
    pub fn set_frame_snapshots(&mut self, n: usize) {
        self.frame_snapshots = n.max(1);
    }

    /// Whether to append the frame index at close (on by default; it can be
    /// turned on again only before the first frame). A record without one is
    /// read by scanning its frames.
    pub fn set_index(&mut self, enabled: bool) {
        if !enabled {
            self.index = None;
        } else if self.index.is_none() && self.bytes_written == self.preamble_len {
            self.index = Some(Vec::new());
        }
    }

    /// Sets the zstd compression level (1 to 22, 0 for zstd's default) for
    /// the frames written from now on.
    pub fn set_zstd_level(&mut self, level: i32) -> Result<(), Error> {
        self.compressor.set_compression_level(level).map_err(|e| {
            Error::InvalidEntry(format!(
                "zstd level {level} is not usable ({e}); give a level from 1 to 22"
            ))
        })
    }

    /// Bytes handed to the inner writer so far: the header and the frames
    /// written, not the entries still buffered.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Appends the buffered entry in `self.body` with `tag`.
    fn append_entry(&mut self, tag: u8) -> Result<(), Error> {
        if self.body.len() + 11 > MAX_RAW_LEN as usize {
            return Err(Error::InvalidEntry(format!(
                "the entry is {} bytes, above the frame limit of {MAX_RAW_LEN}",
                self.body.len()
            )));
        }
        if self.raw.len() + self.body.len() + 11 > MAX_RAW_LEN as usize {
            self.flush_frame()?;
        }
        self.raw.push(tag);
        varint::put(&mut self.raw, self.body.len() as u64);
        self.raw.extend_from_slice(&self.body);
        self.summary.nr_entries += 1;
        Ok(())
    }

    /// Buffers a snapshot; ends the frame once it holds `frame_snapshots`
    /// snapshots. Fails without buffering anything if a region ends before
    /// it starts.
    pub fn push_snapshot(&mut self, s: &Snapshot) -> Result<(), Error> {
        self.body.clear();
        let prev = (self.summary.nr_snapshots > 0).then_some(&self.prev);
        self.encoder
            .encode(s, prev, &mut self.body)
            .map_err(Error::InvalidSnapshot)?;
        if prev.is_some() && self.raw.len() + self.body.len() + 11 > MAX_RAW_LEN as usize {
            // The next frame must start with a self-contained snapshot.
            self.flush_frame()?;
            self.body.clear();
            self.encoder
                .encode(s, None, &mut self.body)
                .map_err(Error::InvalidSnapshot)?;
        }
        self.append_entry(TAG_SNAPSHOT)?;
        let sum = &mut self.summary;
        if sum.nr_snapshots == 0 {
            sum.first_start_us = s.start_us;
        }
        sum.nr_snapshots += 1;
        sum.last_end_us = s.end_us;
        for r in s.targets.iter().flat_map(|t| &t.regions) {
            sum.min_addr = sum.min_addr.min(r.start);
            sum.max_addr = sum.max_addr.max(r.end);
        }
        copy_snapshot(&mut self.prev, s);
        if self.summary.nr_snapshots as usize >= self.frame_snapshots
            || self.raw.len() >= FRAME_RAW_SOFT_LIMIT
        {
            self.flush_frame()?;
        }
        Ok(())
    }

    /// Buffers a JSON entry (scheme statistics, a run summary, ...) tagged
    /// with `kind`.
    pub fn push_json(&mut self, kind: &str, value: &serde_json::Value) -> Result<(), Error> {
        self.body.clear();
        encode_json(kind, value, &mut self.body).map_err(Error::InvalidEntry)?;
        self.append_entry(TAG_JSON)
    }

    /// Writes the buffered entries as one frame now and flushes the inner
    /// writer (call it every second or so, and on Ctrl-C). Does nothing if
    /// no entry is buffered.
    pub fn flush_frame(&mut self) -> Result<(), Error> {
        if self.summary.nr_entries == 0 {
            return Ok(());
        }
        self.compressed.clear();
        self.compressed
            .reserve(zstd::zstd_safe::compress_bound(self.raw.len()));
        self.compressor
            .compress_to_buffer(&self.raw, &mut self.compressed)
            .map_err(|e| self.io_err(e))?;
        let mut h = self.summary;
        if h.nr_snapshots == 0 || h.min_addr > h.max_addr {
            h.min_addr = 0;
            h.max_addr = 0;
        }
        h.raw_len = self.raw.len() as u32;
        h.payload_len = u32::try_from(self.compressed.len())
            .map_err(|_| Error::InvalidEntry("a compressed frame exceeds 4 GiB".into()))?;
        h.payload_crc = crc32fast::hash(&self.compressed);
        let hb = h.to_bytes();
        let inner = self.inner.as_mut().expect("writer used after finish");
        let res = inner
            .write_all(&hb)
            .and_then(|()| inner.write_all(&self.compressed))
            .and_then(|()| inner.flush());
        // The frame is gone either way: on an error it may be half written,
        // and a reader stops there.
        self.raw.clear();
        self.summary = empty_summary();
        if res.is_err() {
            self.index = None;
        }
        res.map_err(|e| self.io_err(e))?;
        if let Some(ix) = &mut self.index {
            if ix.len() < MAX_INDEXED_FRAMES {
                ix.push((self.bytes_written, hb));
            } else {
                self.index = None;
            }
        }
        self.bytes_written += (FRAME_HEADER_LEN + self.compressed.len()) as u64;
        Ok(())
    }

    /// Appends the frame index (once): a frame of one index entry whose
    /// payload ends with the trailer pointing back at it.
    fn write_index(&mut self) -> Result<(), Error> {
        let Some(ix) = self.index.take() else {
            return Ok(());
        };
        self.raw.clear();
        index::encode(&ix, &mut self.raw);
        self.compressed.clear();
        self.compressed
            .reserve(zstd::zstd_safe::compress_bound(self.raw.len()) + index::TRAILER_LEN);
        self.compressor
            .compress_to_buffer(&self.raw, &mut self.compressed)
            .map_err(|e| self.io_err(e))?;
        let offset = self.bytes_written;
        self.compressed.extend_from_slice(&index::trailer(offset));
        let h = FrameHeader {
            payload_len: u32::try_from(self.compressed.len())
                .map_err(|_| Error::InvalidEntry("the frame index exceeds 4 GiB".into()))?,
            raw_len: self.raw.len() as u32,
            payload_crc: crc32fast::hash(&self.compressed),
            nr_entries: 1,
            nr_snapshots: 0,
            first_start_us: 0,
            last_end_us: 0,
            min_addr: 0,
            max_addr: 0,
        };
        self.raw.clear();
        let inner = self.inner.as_mut().expect("writer used after finish");
        inner
            .write_all(&h.to_bytes())
            .and_then(|()| inner.write_all(&self.compressed))
            .and_then(|()| inner.flush())
            .map_err(|e| self.io_err(e))?;
        self.bytes_written += (FRAME_HEADER_LEN + self.compressed.len()) as u64;
        Ok(())
    }

    /// Writes the buffered entries and the frame index, and returns the
    /// inner writer.
    pub fn finish(mut self) -> Result<W, Error> {
        self.flush_frame()?;
        self.write_index()?;
        Ok(self.inner.take().expect("writer used after finish"))
    }
}

impl<W: Write> Drop for Writer<W> {
    /// Writes the buffered entries and the frame index, ignoring errors
    /// (call [`Writer::finish`] to see them).
    fn drop(&mut self) {
        if self.inner.is_some() && self.flush_frame().is_ok() {
            let _ = self.write_index();
        }
    }
}
