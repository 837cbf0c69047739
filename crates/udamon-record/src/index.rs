//! The frame index a writer appends when it closes a record: every frame's
//! offset and header, so a reader opens a record of any length by reading
//! its last bytes, and a report of a time range reads only the frames that
//! hold it. A record without one (a run killed before it closed) is
//! scanned instead.
//!
//! The index is itself a frame, so every reader can walk past it: one
//! entry of tag [`TAG_INDEX`] (readers skip tags they do not know), and its
//! payload ends with a zstd skippable frame (which zstd's decoder skips)
//! holding the index frame's offset. That skippable frame is the last 20
//! bytes of the file; see docs/record-format.md.

use crate::frame::{FrameHeader, FRAME_HEADER_LEN};
use crate::varint::{self, Cursor};

/// Entry tag: the frame index.
pub(crate) const TAG_INDEX: u8 = 3;
/// The zstd skippable-frame magic the trailer uses (one of the sixteen
/// zstd reserves for skippable frames).
const SKIPPABLE_MAGIC: u32 = 0x184D_2A55;
/// Marks the trailer's data.
const TRAILER_MARKER: &[u8; 4] = b"UDIX";
/// The trailer: skippable magic, its data length (12), the marker, and the
/// index frame's offset.
pub(crate) const TRAILER_LEN: usize = 20;
/// Frames a writer indexes at most (68 bytes each in memory); a record
/// with more is written without an index and scanned when read.
pub(crate) const MAX_INDEXED_FRAMES: usize = 1 << 18;
/// Bytes per frame in the index: offset, then the frame's header.
const ENTRY_LEN: usize = 8 + FRAME_HEADER_LEN;

/// The payload (before compression) of the index frame: one entry.
pub(crate) fn encode(frames: &[(u64, [u8; FRAME_HEADER_LEN])], out: &mut Vec<u8>) {
    let mut body = Vec::with_capacity(10 + frames.len() * ENTRY_LEN);
    varint::put(&mut body, frames.len() as u64);
    for (off, h) in frames {
        body.extend_from_slice(&off.to_le_bytes());
        body.extend_from_slice(h);
    }
    out.push(TAG_INDEX);
    varint::put(out, body.len() as u64);
    out.extend_from_slice(&body);
}

/// The trailer that ends the index frame's payload and the file.
pub(crate) fn trailer(index_offset: u64) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[0..4].copy_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    t[4..8].copy_from_slice(&12u32.to_le_bytes());
    t[8..12].copy_from_slice(TRAILER_MARKER);
    t[12..20].copy_from_slice(&index_offset.to_le_bytes());
    t
}

/// The index frame's offset, if `t` (a file's last bytes) is a trailer.
pub(crate) fn parse_trailer(t: &[u8; TRAILER_LEN]) -> Option<u64> {
    (t[0..4] == SKIPPABLE_MAGIC.to_le_bytes()
        && t[4..8] == 12u32.to_le_bytes()
        && &t[8..12] == TRAILER_MARKER)
        .then(|| u64::from_le_bytes(t[12..20].try_into().expect("8 bytes")))
}

/// Decodes an index frame's payload into the frames' offsets and headers,
/// checking that they tile `[first, end)` of the file back to back. `None`
/// when anything is off: the caller then scans the file.
pub(crate) fn decode(raw: &[u8], first: u64, end: u64) -> Option<Vec<(u64, FrameHeader)>> {
    let mut c = Cursor::new(raw);
    if c.u8()? != TAG_INDEX {
        return None;
    }
    let len = c.len(c.remaining())?;
    let body = c.bytes(len)?;
    if !c.is_empty() {
        return None;
    }
    let mut c = Cursor::new(body);
    let n = c.len(c.remaining() / ENTRY_LEN)?;
    let mut out = Vec::with_capacity(n);
    let mut at = first;
    for _ in 0..n {
        let off = u64::from_le_bytes(c.bytes(8)?.try_into().ok()?);
        let h = FrameHeader::parse(c.bytes(FRAME_HEADER_LEN)?.try_into().ok()?).ok()?;
        if off != at {
            return None;
        }
        at = off.checked_add((FRAME_HEADER_LEN as u64).checked_add(u64::from(h.payload_len))?)?;
        out.push((off, h));
    }
    (c.is_empty() && at == end).then_some(out)
}
