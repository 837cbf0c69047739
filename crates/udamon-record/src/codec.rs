//! Encoding of the entries inside a frame's (uncompressed) payload.
//!
//! A payload is a sequence of entries, each `tag: u8`, `len: varint`,
//! `body: [u8; len]`; a reader skips tags it does not know. The snapshot
//! body is columnar and, after the first snapshot of a frame, relative to the
//! previous snapshot of the same frame; see docs/record-format.md.

use udamon_core::{RegionSnapshot, Snapshot, TargetSnapshot};

use crate::varint::{put, unzigzag, zigzag, Cursor};

/// Entry tag: one [`Snapshot`].
pub(crate) const TAG_SNAPSHOT: u8 = 1;
/// Entry tag: a JSON value with a kind string.
pub(crate) const TAG_JSON: u8 = 2;

/// Snapshot flag: times and regions are relative to the previous snapshot
/// of the same frame.
const FLAG_RELATIVE: u8 = 1;

/// How far past the cursor the encoder looks for the previous region the
/// current one ends in (a run of more merged regions is stored as a literal
/// size).
const MAX_K: usize = 64;

/// The granule DAMON aligns split points to (`MIN_REGION_SZ`).
const SPLIT_ALIGN: u64 = 4096;
/// Split codes per previous region: 0 is the region's end, 1..=9 the point
/// DAMON's split puts at d/10 of the region, 10..=90 the point at d2/10 of
/// the left piece of a split at d1/10 (code 10 + 9 (d1 - 1) + (d2 - 1)).
const NR_SPLITS: u64 = 91;

/// The offset of split point `split` (1..NR_SPLITS) in a region of `sz` bytes.
#[inline]
fn split_offset(sz: u64, split: u64) -> u64 {
    let tenth = |d: u64, sz: u64| {
        ((u128::from(d) * u128::from(sz) / 10) as u64) / SPLIT_ALIGN * SPLIT_ALIGN
    };
    if split < 10 {
        tenth(split, sz)
    } else {
        let c = split - 10;
        tenth(c % 9 + 1, tenth(c / 9 + 1, sz))
    }
}

/// The end code of a region ending at `end`, given the previous snapshot's
/// regions and the cursor `p` (the first of them ending after the region's
/// start): `1 + j * NR_SPLITS + split` when the end is the end (split 0) or a
/// split point of `prev[p + j]`, 0 when it is neither (a literal size follows).
fn end_code(prev: &[RegionSnapshot], p: usize, end: u64) -> u64 {
    for (j, q) in prev[p.min(prev.len())..].iter().take(MAX_K).enumerate() {
        let base = 1 + j as u64 * NR_SPLITS;
        if q.end == end {
            return base;
        }
        if q.end > end {
            if q.start < end && q.end >= q.start && (end - q.start).is_multiple_of(SPLIT_ALIGN) {
                let (off, sz) = (end - q.start, q.end - q.start);
                // Splits at d/10 first, then at d2/10 of the left piece.
                let d = (1..10).find(|&d| split_offset(sz, d) == off);
                let d = d.or_else(|| (10..NR_SPLITS).find(|&c| split_offset(sz, c) == off));
                if let Some(d) = d {
                    return base + d;
                }
            }
            return 0;
        }
    }
    0
}

/// Number of per-target columns.
const NR_COLS: usize = 5;
/// The gap column (region start minus the previous region's end).
const COL_GAP: usize = 0;

/// Scratch buffers of the snapshot encoder.
#[derive(Default)]
pub(crate) struct Encoder {
    cols: [Vec<u8>; NR_COLS],
}

/// The regions of `prev` that target `i` of the current snapshot is
/// encoded against: the target at the same position, if it has the same
/// index; nothing otherwise.
fn prev_regions(prev: Option<&Snapshot>, i: usize, target_idx: u32) -> &[RegionSnapshot] {
    match prev.and_then(|p| p.targets.get(i)) {
        Some(t) if t.target_idx == target_idx => &t.regions,
        _ => &[],
    }
}

/// The count and age the previous snapshot predicts for a region whose
/// cursor is `p` (the first previous region ending after the region's start):
/// that region's count, and its age plus one; `(0, 0)` if there is none.
#[inline]
fn predict(prev: &[RegionSnapshot], p: usize) -> (u32, u32) {
    prev.get(p)
        .map_or((0, 0), |r| (r.nr_accesses, r.age.saturating_add(1)))
}

/// The two likeliest ages of a region with count `nr`, given the predicted
/// count and age: DAMON resets the age when the count moved by more than
/// the threshold (a tenth of the maximum count) or switched between zero and
/// non-zero, and increments it otherwise.
#[inline]
fn likely_ages(nr: u32, pred_nr: u32, pred_age: u32, thres: u32) -> (u32, u32) {
    if nr.abs_diff(pred_nr) > thres || (nr == 0) != (pred_nr == 0) {
        (0, pred_age)
    } else {
        (pred_age, 0)
    }
}

/// The age-reset threshold DAMON uses in a window with these intervals.
fn age_threshold(sample_us: u64, aggr_us: u64) -> u32 {
    udamon_core::max_nr_accesses(sample_us, aggr_us) / 10
}

impl Encoder {
    /// Appends the body of a snapshot entry for `s` to `out`, relative to
    /// `prev` when given. Fails (with a reason naming the bad region) when a
    /// region ends before it starts.
    pub(crate) fn encode(
        &mut self,
        s: &Snapshot,
        prev: Option<&Snapshot>,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        out.push(if prev.is_some() { FLAG_RELATIVE } else { 0 });
        match prev {
            Some(p) => {
                put(out, zigzag(s.start_us.wrapping_sub(p.end_us) as i64));
                put(out, zigzag(s.end_us.wrapping_sub(s.start_us) as i64));
                put(out, zigzag(s.sample_us.wrapping_sub(p.sample_us) as i64));
                put(out, zigzag(s.aggr_us.wrapping_sub(p.aggr_us) as i64));
            }
            None => {
                put(out, s.start_us);
                put(out, zigzag(s.end_us.wrapping_sub(s.start_us) as i64));
                put(out, s.sample_us);
                put(out, s.aggr_us);
            }
        }
        put(out, s.targets.len() as u64);
        for (i, t) in s.targets.iter().enumerate() {
            self.encode_target(s, i, t, prev_regions(prev, i, t.target_idx), out)?;
        }
        Ok(())
    }

    fn encode_target(
        &mut self,
        s: &Snapshot,
        ti: usize,
        t: &TargetSnapshot,
        prev: &[RegionSnapshot],
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let mut or = 0u64;
        for (ri, r) in t.regions.iter().enumerate() {
            if r.end < r.start {
                return Err(format!(
                    "snapshot ending at {}us: target {} (index {}) region {} ends at {:#x}, before its start {:#x}; \
                     a region must have end >= start",
                    s.end_us, ti, t.target_idx, ri, r.end, r.start
                ));
            }
            or |= r.start | r.end;
        }
        // Addresses are stored in units of the largest power of two that
        // divides all of them: 4 KiB pages for page-aligned regions.
        let shift = if or == 0 { 0 } else { or.trailing_zeros() };
        let thres = age_threshold(s.sample_us, s.aggr_us);
        for c in &mut self.cols {
            c.clear();
        }
        let [gaps, ends, sizes, nrs, ages] = &mut self.cols;
        let mut last_end = 0u64;
        let mut p = 0usize;
        for r in &t.regions {
            let gap = (r.start.wrapping_sub(last_end) as i64) >> shift;
            put(gaps, zigzag(gap));
            while p < prev.len() && prev[p].end <= r.start {
                p += 1;
            }
            let code = end_code(prev, p, r.end);
            put(ends, code);
            if code == 0 {
                put(sizes, (r.end - r.start) >> shift);
            }
            let (pred_nr, pred_age) = predict(prev, p);
            put(nrs, zigzag(i64::from(r.nr_accesses) - i64::from(pred_nr)));
            let (first, second) = likely_ages(r.nr_accesses, pred_nr, pred_age, thres);
            let code = if r.age == first {
                0
            } else if r.age == second {
                1
            } else {
                2 + zigzag(i64::from(r.age) - i64::from(pred_age))
            };
            put(ages, code);
            last_end = r.end;
        }
        put(out, u64::from(t.target_idx));
        put(out, t.regions.len() as u64);
        out.push(shift as u8);
        for c in &self.cols {
            put(out, c.len() as u64);
        }
        for c in &self.cols {
            out.extend_from_slice(c);
        }
        Ok(())
    }
}

/// Appends the body of a JSON entry.
pub(crate) fn encode_json(
    kind: &str,
    value: &serde_json::Value,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    put(out, kind.len() as u64);
    out.extend_from_slice(kind.as_bytes());
    serde_json::to_writer(&mut *out, value)
        .map_err(|e| format!("cannot serialize the {kind:?} entry: {e}"))
}

/// Decodes a JSON entry body.
pub(crate) fn decode_json(body: &[u8]) -> Result<(String, serde_json::Value), String> {
    let mut c = Cursor::new(body);
    let n = c.len(body.len()).ok_or("json entry: bad kind length")?;
    let kind = c.bytes(n).ok_or("json entry: kind runs past the entry")?;
    let kind =
        std::str::from_utf8(kind).map_err(|_| "json entry: kind is not utf-8".to_string())?;
    let value =
        serde_json::from_slice(c.rest()).map_err(|e| format!("json entry {kind:?}: {e}"))?;
    Ok((kind.to_string(), value))
}

/// Decodes a snapshot body into `out`, reusing its allocations. `prev` is the
/// previous snapshot of the same frame, if any.
pub(crate) fn decode_snapshot(
    body: &[u8],
    prev: Option<&Snapshot>,
    out: &mut Snapshot,
) -> Result<(), String> {
    const TRUNC: &str = "snapshot entry ends early";
    let mut c = Cursor::new(body);
    let flags = c.u8().ok_or(TRUNC)?;
    if flags & !FLAG_RELATIVE != 0 {
        return Err(format!("snapshot entry has unknown flags {flags:#04x}"));
    }
    let prev = if flags & FLAG_RELATIVE != 0 {
        Some(prev.ok_or("relative snapshot entry is the first snapshot of its frame")?)
    } else {
        None
    };
    let a = c.varint().ok_or(TRUNC)?;
    let dur = unzigzag(c.varint().ok_or(TRUNC)?) as u64;
    let sample = c.varint().ok_or(TRUNC)?;
    let aggr = c.varint().ok_or(TRUNC)?;
    match prev {
        Some(p) => {
            out.start_us = p.end_us.wrapping_add(unzigzag(a) as u64);
            out.sample_us = p.sample_us.wrapping_add(unzigzag(sample) as u64);
            out.aggr_us = p.aggr_us.wrapping_add(unzigzag(aggr) as u64);
        }
        None => {
            out.start_us = a;
            out.sample_us = sample;
            out.aggr_us = aggr;
        }
    }
    out.end_us = out.start_us.wrapping_add(dur);
    let thres = age_threshold(out.sample_us, out.aggr_us);
    let nr_targets = c
        .len(c.remaining())
        .ok_or("snapshot entry: bad number of targets")?;
    out.targets.truncate(nr_targets);
    while out.targets.len() < nr_targets {
        out.targets.push(TargetSnapshot {
            target_idx: 0,
            regions: Vec::new(),
        });
    }
    for i in 0..nr_targets {
        let target_idx = c.varint().ok_or(TRUNC)?;
        let target_idx = u32::try_from(target_idx)
            .map_err(|_| format!("snapshot entry: target index {target_idx} is above u32"))?;
        let n = c
            .len(c.remaining())
            .ok_or("snapshot entry: bad number of regions")?;
        let shift = u32::from(c.u8().ok_or(TRUNC)?);
        if shift > 63 {
            return Err(format!(
                "snapshot entry: address unit 2^{shift} is too large"
            ));
        }
        let mut lens = [0usize; NR_COLS];
        for l in &mut lens {
            *l = c
                .len(c.remaining())
                .ok_or("snapshot entry: column runs past the entry")?;
        }
        let mut cols: [&[u8]; NR_COLS] = [&[]; NR_COLS];
        for (col, l) in cols.iter_mut().zip(lens) {
            *col = c
                .bytes(l)
                .ok_or("snapshot entry: column runs past the entry")?;
        }
        let prev = prev_regions(prev, i, target_idx);
        let t = &mut out.targets[i];
        t.target_idx = target_idx;
        decode_regions(n, shift, thres, cols, prev, &mut t.regions)
            .map_err(|e| format!("target {i}: {e}"))?;
    }
    if !c.is_empty() {
        return Err(format!(
            "snapshot entry has {} bytes left over",
            c.remaining()
        ));
    }
    Ok(())
}

/// What is wrong with a target's columns (kept small for the hot loop).
#[derive(Clone, Copy, Debug)]
enum ColumnError {
    Truncated,
    BadRef,
    Inverted { start: u64, end: u64 },
    Nr(i64),
    Age(i64),
}

impl ColumnError {
    fn message(self) -> String {
        match self {
            Self::Truncated => "snapshot entry: a column ends early".into(),
            Self::BadRef => {
                "snapshot entry: a region end refers past the previous snapshot's regions".into()
            }
            Self::Inverted { start, end } => {
                format!("snapshot entry: region ends at {end:#x}, before its start {start:#x}")
            }
            Self::Nr(nr) => format!("snapshot entry: nr_accesses {nr} is outside u32"),
            Self::Age(age) => format!("snapshot entry: age {age} is outside u32"),
        }
    }
}

/// Reads a varint at `*pos` of `buf`, with a fast path for one byte.
#[inline(always)]
fn read(buf: &[u8], pos: &mut usize) -> Result<u64, ColumnError> {
    match buf.get(*pos) {
        Some(&b) if b < 0x80 => {
            *pos += 1;
            Ok(u64::from(b))
        }
        _ => {
            let mut c = Cursor::new(buf);
            c.bytes(*pos).ok_or(ColumnError::Truncated)?;
            let v = c.varint().ok_or(ColumnError::Truncated)?;
            *pos = c.pos();
            Ok(v)
        }
    }
}

/// Decodes `n` regions from a target's columns; every column must be
/// consumed exactly.
fn decode_regions(
    n: usize,
    shift: u32,
    thres: u32,
    cols: [&[u8]; NR_COLS],
    prev: &[RegionSnapshot],
    regions: &mut Vec<RegionSnapshot>,
) -> Result<(), String> {
    regions.clear();
    // Every region takes at least one byte in the gap column.
    if n > cols[COL_GAP].len() {
        return Err(ColumnError::Truncated.message());
    }
    regions.reserve(n);
    decode_regions_loop(n, shift, thres, cols, prev, regions).map_err(ColumnError::message)
}

#[inline(never)]
fn decode_regions_loop(
    n: usize,
    shift: u32,
    thres: u32,
    cols: [&[u8]; NR_COLS],
    prev: &[RegionSnapshot],
    regions: &mut Vec<RegionSnapshot>,
) -> Result<(), ColumnError> {
    let [gaps, ends, sizes, nrs, ages] = cols;
    let (mut pg, mut pe, mut ps, mut pn, mut pa) = (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut last_end = 0u64;
    let mut p = 0usize;
    for _ in 0..n {
        let gap = unzigzag(read(gaps, &mut pg)?);
        let start = last_end.wrapping_add(gap.wrapping_shl(shift) as u64);
        while p < prev.len() && prev[p].end <= start {
            p += 1;
        }
        let k = read(ends, &mut pe)?;
        let end = if k == 0 {
            start.wrapping_add(read(sizes, &mut ps)?.wrapping_shl(shift))
        } else if k == 1 {
            prev.get(p).ok_or(ColumnError::BadRef)?.end
        } else {
            let (j, split) = ((k - 1) / NR_SPLITS, (k - 1) % NR_SPLITS);
            let q = usize::try_from(j)
                .ok()
                .and_then(|j| p.checked_add(j))
                .and_then(|q| prev.get(q))
                .ok_or(ColumnError::BadRef)?;
            if split == 0 {
                q.end
            } else {
                q.start
                    .wrapping_add(split_offset(q.end.wrapping_sub(q.start), split))
            }
        };
        if end < start {
            return Err(ColumnError::Inverted { start, end });
        }
        let (pred_nr, pred_age) = predict(prev, p);
        let nr = i64::from(pred_nr).wrapping_add(unzigzag(read(nrs, &mut pn)?));
        let nr_accesses = u32::try_from(nr).map_err(|_| ColumnError::Nr(nr))?;
        let (first, second) = likely_ages(nr_accesses, pred_nr, pred_age, thres);
        let code = read(ages, &mut pa)?;
        let age = if code < 2 {
            // Written to compile to a conditional move: 0 and 1 alternate
            // unpredictably.
            let sel = code as u32;
            (first & sel.wrapping_sub(1)) | (second & 0u32.wrapping_sub(sel))
        } else {
            let age = i64::from(pred_age).wrapping_add(unzigzag(code - 2));
            u32::try_from(age).map_err(|_| ColumnError::Age(age))?
        };
        regions.push(RegionSnapshot {
            start,
            end,
            nr_accesses,
            age,
        });
        last_end = end;
    }
    if (pg, pe, ps, pn, pa) != (gaps.len(), ends.len(), sizes.len(), nrs.len(), ages.len()) {
        return Err(ColumnError::Truncated);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(t0: u64, regions: &[(u64, u64, u32, u32)]) -> Snapshot {
        Snapshot {
            start_us: t0,
            end_us: t0.wrapping_add(100_000),
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot {
                target_idx: 0,
                regions: regions
                    .iter()
                    .map(|&(start, end, nr_accesses, age)| RegionSnapshot {
                        start,
                        end,
                        nr_accesses,
                        age,
                    })
                    .collect(),
            }],
        }
    }

    fn roundtrip(s: &Snapshot, prev: Option<&Snapshot>) -> usize {
        let mut out = Vec::new();
        Encoder::default().encode(s, prev, &mut out).unwrap();
        let mut back = Snapshot {
            start_us: 9,
            end_us: 9,
            sample_us: 9,
            aggr_us: 9,
            targets: Vec::new(),
        };
        decode_snapshot(&out, prev, &mut back).unwrap();
        assert_eq!(&back, s);
        out.len()
    }

    #[test]
    fn full_and_relative() {
        let a = snap(
            0,
            &[
                (0x1000, 0x5000, 0, 3),
                (0x5000, 0x9000, 7, 0),
                (0x20000, 0x21000, 20, 9),
            ],
        );
        // Split of the first region, merge of the others, ages +1.
        let b = snap(
            100_000,
            &[
                (0x1000, 0x3000, 0, 4),
                (0x3000, 0x5000, 0, 4),
                (0x5000, 0x21000, 3, 0),
            ],
        );
        roundtrip(&a, None);
        roundtrip(&b, Some(&a));
        roundtrip(&b, None);
        roundtrip(&a, Some(&b));
    }

    #[test]
    fn unaligned_unsorted_overlapping_and_extreme() {
        let a = snap(
            5,
            &[
                (3, 10, 1, 1),
                (0, 2, 0, 0),
                (7, 7, u32::MAX, u32::MAX),
                (u64::MAX - 5, u64::MAX, 0, 0),
                (0, u64::MAX, 1, 2),
            ],
        );
        roundtrip(&a, None);
        roundtrip(&a, Some(&a));
        let b = snap(u64::MAX - 3, &[]);
        roundtrip(&b, Some(&a));
        roundtrip(&a, Some(&b));
    }

    #[test]
    fn rejects_inverted_region() {
        let a = snap(0, &[(0x2000, 0x1000, 0, 0)]);
        let e = Encoder::default()
            .encode(&a, None, &mut Vec::new())
            .unwrap_err();
        assert!(e.contains("ends at 0x1000, before its start 0x2000"), "{e}");
    }

    #[test]
    fn stable_snapshot_is_tiny() {
        let regions: Vec<_> = (0..1000u64)
            .map(|i| (i << 20, (i + 1) << 20, 0, i as u32))
            .collect();
        let a = snap(0, &regions);
        let mut b = a.clone();
        b.start_us = a.end_us;
        b.end_us = b.start_us + 100_000;
        for r in &mut b.targets[0].regions {
            r.age += 1;
        }
        // One byte per region and column, except the empty size column.
        assert!(roundtrip(&b, Some(&a)) < 4 * 1000 + 30);
    }
}
