//! `udamon cut`: a part of a record (a time range, an address range, some
//! targets) as a record of its own, to keep or share the minute that
//! matters without the hours around it. The snapshots are read from the
//! frames that hold the time range only; the other frames are read for
//! their `target` entries, which say which process each kept index is.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use udamon_cli::CutArgs;
use udamon_record::{Entry, Writer, MAPS_EVENT, TARGET_EVENT};
use udamon_report::{targets, Selected};

use crate::inputs::{open, selected};
use crate::output::{print_json, WholeFile};
use crate::UsageError;

#[derive(Serialize)]
struct CutSummary {
    input: String,
    output: String,
    snapshots: u64,
    of_snapshots: u64,
    record_bytes: u64,
}

pub fn run(a: CutArgs) -> Result<()> {
    let (time_range, address_range) = (&a.select.time_range, &a.select.address_range);
    if time_range.is_none() && address_range.is_none() && !a.select.names_targets() {
        bail!(UsageError(
            "give what to keep: --time-range, --address-range, --target, --pid or --comm \
             (or several)"
                .into()
        ));
    }
    crate::output::check_output("--output", &a.output, &[&a.record], &[])?;
    let reader = open(&a.record)?;
    let frames = reader.frames();
    let with_snapshots = || frames.iter().filter(|f| f.nr_snapshots > 0);
    let Some(origin) = with_snapshots().next().map(|f| f.first_start_us) else {
        bail!(UsageError(format!(
            "{} holds no snapshot to cut",
            a.record.display()
        )));
    };
    let span_end = with_snapshots()
        .next_back()
        .map_or(origin, |f| f.last_end_us);
    let sel = selected(&reader, &a.record, &a.select)?;
    // The kept targets' `target` entries outside the frames read for the
    // snapshots: those before go first, those after last.
    let read = sel.frames(frames);
    let keep = |i: u32| sel.keeps_target(i);
    let before = targets::entries_in(&reader, 0..read.start, keep)?;
    let after = targets::entries_in(&reader, read.end..frames.len(), keep)?;
    // Each kept target's mappings as they were when the part starts: the
    // last `maps` entry before it, then those written before its first
    // snapshot, go in first (the reports name regions by them).
    let mut pending_maps = targets::last_maps_in(&reader, 0..read.start, keep)?;
    let mut header = reader.header().clone();
    let from = serde_json::json!({
        "record": a.record.display().to_string(),
        "time_range": time_range,
        "address_range": address_range,
        "target": sel.single_target(),
        "targets": sel.targets,
        "pid": a.select.pid,
        "comm": a.select.comm,
    });
    match header.params.as_object_mut() {
        Some(p) => {
            p.insert("cut_from".into(), from);
        }
        None => header.params = serde_json::json!({ "cut_from": from }),
    }
    // Written whole: the name shows the complete cut or the previous file.
    let mut w: Option<(WholeFile, Writer<_>)> = None;
    let mut kept = 0u64;
    let mut res: Result<()> = Ok(());
    // `target` entries read before the first kept snapshot.
    let mut pending: Vec<serde_json::Value> = before;
    Selected::new(&reader, sel.clone()).for_each_entry(|e| {
        let step = (|| -> Result<()> {
            match e {
                Entry::Snapshot(s) => {
                    if w.is_none() {
                        let (out, file) = WholeFile::create(&a.output)?;
                        let mut writer = Writer::new(std::io::BufWriter::new(file), &header)
                            .with_context(|| format!("cannot write {}", a.output.display()))?;
                        for v in pending.drain(..) {
                            writer.push_json(TARGET_EVENT, &v)?;
                        }
                        for v in std::mem::take(&mut pending_maps).into_values() {
                            writer.push_json(MAPS_EVENT, &v)?;
                        }
                        w = Some((out, writer));
                    }
                    w.as_mut().expect("made above").1.push_snapshot(s)?;
                    kept += 1;
                }
                Entry::Json { kind, value } if kind == TARGET_EVENT => match w.as_mut() {
                    Some((_, w)) => w.push_json(kind, value)?,
                    None => pending.push(value.clone()),
                },
                Entry::Json { kind, value } if kind == MAPS_EVENT => match w.as_mut() {
                    Some((_, w)) => w.push_json(kind, value)?,
                    None => {
                        if let Some(i) = targets::event_idx(value) {
                            pending_maps.insert(i, value.clone());
                        }
                    }
                },
                // What happened while the range was being recorded (scheme
                // statistics, gaps, execs); the run's summary describes the
                // whole run, not the part.
                Entry::Json { kind, value } if kind != "summary" => {
                    if let Some((_, w)) = w.as_mut() {
                        w.push_json(kind, value)?;
                    }
                }
                Entry::Json { .. } => {}
            }
            Ok(())
        })();
        match step {
            Ok(()) => std::ops::ControlFlow::Continue(()),
            Err(e) => {
                res = Err(e);
                std::ops::ControlFlow::Break(())
            }
        }
    })?;
    res?;
    let Some((out, mut w)) = w else {
        bail!(UsageError(format!(
            "nothing of {} is in the selection (its snapshots span {:.1}-{:.1} s from its start{})",
            a.record.display(),
            0.0,
            (span_end - origin) as f64 / 1e6,
            match sel.address {
                Some(_) => ", and none of its regions may lie in --address-range",
                None => "",
            }
        )));
    };
    for v in pending.iter().chain(&after) {
        w.push_json(TARGET_EVENT, v)?;
    }
    w.finish()
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    out.commit()?;
    let summary = CutSummary {
        input: a.record.display().to_string(),
        output: a.output.display().to_string(),
        snapshots: kept,
        of_snapshots: reader.nr_snapshots(),
        record_bytes: std::fs::metadata(&a.output).map_or(0, |m| m.len()),
    };
    if a.json {
        return print_json(&summary);
    }
    println!(
        "cut {} of {} snapshots from {} into {} ({})",
        summary.snapshots,
        summary.of_snapshots,
        summary.input,
        summary.output,
        udamon_report::fmt_bytes(summary.record_bytes)
    );
    Ok(())
}
