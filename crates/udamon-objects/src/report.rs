//! The objects report: what the monitored memory holds, by name, and how
//! hot each object was over a time and address range.
//!
//! One pass over the record in order: each snapshot is named by the
//! `maps` entries written before it. For each object, summed over the
//! snapshots kept, with `dt` a snapshot's window and `b` the object's
//! bytes in a region:
//! - **bytes**: the mean monitored bytes, `sum(b * dt) / T` (`T` the time
//!   covered);
//! - **access frequency**: `sum(f * b * dt) / sum(b * dt)`, `f` the
//!   region's `nr_accesses / max_nr_accesses`;
//! - **age**: `sum(age * b * dt) / sum(b * dt)`, age in real time;
//! - **share**: the object's part of all access-weighted bytes,
//!   `sum(f * b * dt)` over the total: the share of sampled accesses that
//!   fell in it, since a region's accesses are spread over its bytes.

use std::collections::HashMap;
use std::io::Write;
use std::ops::ControlFlow;

use serde::Serialize;
use udamon_record::{Entry, Reader, MAPS_EVENT};
use udamon_report::{fmt_bytes, fmt_us, SnapshotSource, TargetTable};

use crate::namer::{Kind, Namer, ObjId};
use crate::Error;

/// What to list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectsOptions {
    /// Rows, by share of accesses; 0 lists all. Default 20.
    pub top: usize,
    /// One row per object and process (default: objects of every process
    /// summed, when several processes map the same one).
    pub by_process: bool,
}

impl Default for ObjectsOptions {
    fn default() -> Self {
        Self {
            top: 20,
            by_process: false,
        }
    }
}

/// One object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ObjectRow {
    pub kind: Kind,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub file: String,
    /// The process (with `by_process`, or when the record has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_idx: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// Mean monitored bytes over the time covered.
    pub bytes: u64,
    /// Access frequency (`0..=1`), weighted by bytes and time.
    pub access_frequency: f64,
    /// Mean age (us), weighted by bytes and time.
    pub age_us: u64,
    /// The object's share (`0..=1`) of all sampled accesses.
    pub access_share: f64,
}

/// The objects report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ObjectsReport {
    /// The time covered, us since the record's start.
    pub start_us: u64,
    pub end_us: u64,
    pub nr_snapshots: u64,
    /// Objects found, listed or not.
    pub nr_objects: usize,
    pub objects: Vec<ObjectRow>,
    /// Whether the record has mappings at all (records made before
    /// udamon recorded them have not: every byte is `[unmapped]`).
    pub has_maps: bool,
    /// Files whose symbols could not be used, and why.
    pub notes: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    byte_us: f64,
    freq_byte_us: f64,
    age_byte_us: f64,
}

/// Builds the report over the snapshots of `src` (a record through a
/// selection: `udamon_report::Selected`), naming regions with `namer`
/// (the record's mappings read: [`namer_of`]).
pub fn build<S: SnapshotSource + ?Sized>(
    src: &S,
    namer: &mut Namer,
    table: &TargetTable,
    opts: &ObjectsOptions,
) -> Result<ObjectsReport, Error> {
    let origin = src.record_start_us()?.unwrap_or(0);
    let mut acc: HashMap<(Option<u32>, ObjId), Acc> = HashMap::new();
    let (mut first, mut last, mut n) = (u64::MAX, 0u64, 0u64);
    let mut pieces = Vec::new();
    src.for_each_snapshot(&mut |s| {
        let dt = s.end_us.saturating_sub(s.start_us) as f64;
        let max_nr = udamon_core::max_nr_accesses(s.sample_us, s.aggr_us).max(1) as f64;
        // The mappings written just before the snapshot may be dated a
        // little after its end: a window of slack.
        let at = s.end_us + (s.end_us - s.start_us);
        first = first.min(s.start_us);
        last = last.max(s.end_us);
        n += 1;
        for t in &s.targets {
            let who = opts.by_process.then_some(t.target_idx);
            for r in &t.regions {
                let f = r.nr_accesses as f64 / max_nr;
                let age = r.age as f64 * dt;
                pieces.clear();
                namer.resolve(t.target_idx, at, r.start, r.end, &mut pieces);
                for &(obj, b) in &pieces {
                    let a = acc.entry((who, obj)).or_default();
                    let w = b as f64 * dt;
                    a.byte_us += w;
                    a.freq_byte_us += f * w;
                    a.age_byte_us += age * w;
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    let span = if n == 0 { 0 } else { last - first };
    let total_freq: f64 = acc.values().map(|a| a.freq_byte_us).sum();
    let mut rows: Vec<ObjectRow> = acc
        .into_iter()
        .map(|((who, obj), a)| {
            let o = namer.object(obj);
            let proc_row = who.and_then(|i| table.rows().iter().find(|r| r.target_idx == i));
            ObjectRow {
                kind: o.kind,
                name: o.name.clone(),
                file: o.file.clone(),
                target_idx: who,
                pid: proc_row.map(|r| r.pid).filter(|&p| p != 0),
                process: proc_row.map(|r| r.name()),
                bytes: if span == 0 {
                    0
                } else {
                    (a.byte_us / span as f64).round() as u64
                },
                access_frequency: if a.byte_us > 0.0 {
                    a.freq_byte_us / a.byte_us
                } else {
                    0.0
                },
                age_us: if a.byte_us > 0.0 {
                    (a.age_byte_us / a.byte_us).round() as u64
                } else {
                    0
                },
                access_share: if total_freq > 0.0 {
                    a.freq_byte_us / total_freq
                } else {
                    0.0
                },
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.access_share
            .total_cmp(&a.access_share)
            .then(b.access_frequency.total_cmp(&a.access_frequency))
            .then(b.bytes.cmp(&a.bytes))
            .then_with(|| (a.target_idx, &a.name).cmp(&(b.target_idx, &b.name)))
    });
    let nr_objects = rows.len();
    if opts.top > 0 {
        rows.truncate(opts.top);
    }
    Ok(ObjectsReport {
        start_us: if n == 0 { 0 } else { first - origin },
        end_us: if n == 0 { 0 } else { last - origin },
        nr_snapshots: n,
        nr_objects,
        objects: rows,
        has_maps: namer.has_maps(),
        notes: namer.notes().to_vec(),
    })
}

/// A namer of `reader`'s record with all its mappings read (one pass over
/// the record's entries), for naming regions at any time.
pub fn namer_of(reader: &Reader, opts: crate::NamerOptions) -> Result<Namer, Error> {
    let mut namer = Namer::new(opts);
    let mut bad = None;
    reader.for_each_entry(|e| {
        if let Entry::Json { kind, value } = e {
            if kind == MAPS_EVENT {
                match serde_json::from_value::<udamon_record::MapsEvent>(value.clone()) {
                    Ok(m) => namer.add_maps(m),
                    Err(err) => {
                        bad = Some(err.to_string());
                        return ControlFlow::Break(());
                    }
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    match bad {
        Some(reason) => Err(Error::BadEntry { reason }),
        None => Ok(namer),
    }
}

impl ObjectsReport {
    /// A table for people.
    pub fn write_text(&self, w: &mut dyn Write) -> Result<(), Error> {
        writeln!(
            w,
            "objects from {} to {} ({} snapshots): {} objects, {} listed, by share of accesses",
            fmt_us(self.start_us),
            fmt_us(self.end_us),
            self.nr_snapshots,
            self.nr_objects,
            self.objects.len()
        )?;
        if !self.has_maps {
            writeln!(
                w,
                "note: the record has no mappings (made before udamon recorded them, or of physical memory): every byte is [unmapped]"
            )?;
        }
        let procs = self.objects.iter().any(|r| r.process.is_some());
        let width = self
            .objects
            .iter()
            .map(|r| r.name.chars().count())
            .max()
            .unwrap_or(6)
            .clamp(6, 48);
        write!(
            w,
            "{:>7} {:>7} {:>11} {:>9}  ",
            "share", "freq", "bytes", "age"
        )?;
        if procs {
            write!(w, "{:<24} ", "process")?;
        }
        writeln!(w, "{:<width$}  {:<8} file", "object", "kind")?;
        for r in &self.objects {
            write!(
                w,
                "{:>6.1}% {:>6.1}% {:>11} {:>9}  ",
                r.access_share * 100.0,
                r.access_frequency * 100.0,
                fmt_bytes(r.bytes),
                fmt_us(r.age_us)
            )?;
            if procs {
                write!(w, "{:<24} ", r.process.as_deref().unwrap_or("-"))?;
            }
            let kind = serde_json::to_value(r.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            writeln!(w, "{:<width$}  {:<8} {}", r.name, kind, r.file)?;
        }
        Ok(())
    }

    pub fn write_json(&self, w: &mut dyn Write) -> Result<(), Error> {
        serde_json::to_writer_pretty(&mut *w, self).map_err(|e| Error::Io(e.into()))?;
        writeln!(w)?;
        Ok(())
    }
}
