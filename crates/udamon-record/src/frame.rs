//! The fixed, uncompressed frame header.

/// Marks the start of every frame.
pub(crate) const FRAME_MARKER: &[u8; 4] = b"UDFR";
/// Size of the frame header in bytes.
pub(crate) const FRAME_HEADER_LEN: usize = 60;
/// Largest uncompressed payload a reader accepts (and a writer produces).
pub(crate) const MAX_RAW_LEN: u32 = 1 << 30;

/// The fields of a frame header (all little-endian on disk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    /// Bytes of zstd-compressed payload following the header.
    pub payload_len: u32,
    /// Bytes of the payload once decompressed.
    pub raw_len: u32,
    /// CRC32 of the compressed payload.
    pub payload_crc: u32,
    pub nr_entries: u32,
    pub nr_snapshots: u32,
    pub first_start_us: u64,
    pub last_end_us: u64,
    pub min_addr: u64,
    pub max_addr: u64,
}

impl FrameHeader {
    pub(crate) fn to_bytes(self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0..4].copy_from_slice(FRAME_MARKER);
        b[4..8].copy_from_slice(&self.payload_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.raw_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.payload_crc.to_le_bytes());
        b[16..20].copy_from_slice(&self.nr_entries.to_le_bytes());
        b[20..24].copy_from_slice(&self.nr_snapshots.to_le_bytes());
        b[24..32].copy_from_slice(&self.first_start_us.to_le_bytes());
        b[32..40].copy_from_slice(&self.last_end_us.to_le_bytes());
        b[40..48].copy_from_slice(&self.min_addr.to_le_bytes());
        b[48..56].copy_from_slice(&self.max_addr.to_le_bytes());
        let crc = crc32fast::hash(&b[..56]);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses a frame header; `Err` says what is wrong with it.
    pub(crate) fn parse(b: &[u8; FRAME_HEADER_LEN]) -> Result<Self, String> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        if &b[0..4] != FRAME_MARKER {
            return Err(format!(
                "does not start with the frame marker \"UDFR\" (found {})",
                crate::escape(&b[0..4])
            ));
        }
        let stored = u32_at(56);
        let computed = crc32fast::hash(&b[..56]);
        if stored != computed {
            return Err(format!(
                "has a damaged frame header (crc32 {stored:08x} stored, {computed:08x} computed)"
            ));
        }
        let h = Self {
            payload_len: u32_at(4),
            raw_len: u32_at(8),
            payload_crc: u32_at(12),
            nr_entries: u32_at(16),
            nr_snapshots: u32_at(20),
            first_start_us: u64_at(24),
            last_end_us: u64_at(32),
            min_addr: u64_at(40),
            max_addr: u64_at(48),
        };
        if h.raw_len > MAX_RAW_LEN {
            return Err(format!(
                "declares {} uncompressed bytes, above the limit of {MAX_RAW_LEN}",
                h.raw_len
            ));
        }
        if h.nr_snapshots > h.nr_entries {
            return Err(format!(
                "declares {} snapshots but only {} entries",
                h.nr_snapshots, h.nr_entries
            ));
        }
        Ok(h)
    }
}
