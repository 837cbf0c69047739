//! `udamon import`: damo's record files (json, json_compressed, perf-script
//! text) into a udamon record, so every udamon report reads them.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;
use udamon_core::{Attrs, RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_kdamon::trace::{parse_aggregated, Assembler};
use udamon_record::{Header, TargetInfo, Writer};

use crate::cli::ImportArgs;
use crate::output::print_json;
use crate::UsageError;

/// What was read from a damo file.
#[derive(Debug, PartialEq)]
pub struct Imported {
    /// "json", "json_compressed" or "perf_script".
    pub format: &'static str,
    pub attrs: Attrs,
    pub snapshots: Vec<Snapshot>,
}

/// A damo number: a JSON number, or a string of digits with thousands
/// separators (damo prints `"40,960"` even in raw mode), optionally followed
/// by a unit word it uses for sizes (`"0 B"`).
fn num(v: &Value, what: &str) -> Result<u64, String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .ok_or_else(|| format!("{what}: {n} is not a non-negative number")),
        Value::String(s) => {
            let digits = s.split_whitespace().next().unwrap_or("").replace(',', "");
            digits
                .parse::<f64>()
                .ok()
                .filter(|f| *f >= 0.0)
                .map(|f| f as u64)
                .ok_or_else(|| format!("{what}: {s:?} is not a number in damo's raw format (record with damo's raw numbers)"))
        }
        _ => Err(format!("{what}: {v} is not a number")),
    }
}

/// Parses damo's JSON record (a list of per-target records, each with its
/// intervals and snapshots; times in nanoseconds).
pub fn parse_damo_json(text: &str, format: &'static str) -> Result<Imported, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let records = v
        .as_array()
        .ok_or("expected a JSON list of damo records (damo's json format)")?;
    if records.is_empty() {
        return Err("the damo record holds no target".into());
    }
    let mut attrs = Attrs::default();
    let iv = &records[0]["intervals"];
    if iv.is_object() {
        attrs.sample_us = num(&iv["sample_us"], "intervals.sample_us")?;
        attrs.aggr_us = num(&iv["aggr_us"], "intervals.aggr_us")?;
        attrs.update_us = num(&iv["ops_update_us"], "intervals.ops_update_us")?;
    }
    let mut per_target: Vec<Vec<(u64, u64, Vec<RegionSnapshot>)>> = Vec::new();
    for (ti, r) in records.iter().enumerate() {
        let snaps = r["snapshots"]
            .as_array()
            .ok_or_else(|| format!("record {ti}: no \"snapshots\" list"))?;
        let mut out = Vec::with_capacity(snaps.len());
        for (si, s) in snaps.iter().enumerate() {
            let at = |k: &str| num(&s[k], &format!("record {ti} snapshot {si} {k}"));
            let (start, end) = (at("start_time")?, at("end_time")?);
            let regs = s["regions"]
                .as_array()
                .ok_or_else(|| format!("record {ti} snapshot {si}: no \"regions\" list"))?;
            let mut regions = Vec::with_capacity(regs.len());
            for (ri, g) in regs.iter().enumerate() {
                let w = format!("record {ti} snapshot {si} region {ri}");
                let samples = &g["nr_accesses"]["samples"];
                // damo's fake snapshot (nr_accesses -1) closes single-snapshot records.
                if samples.as_i64().is_some_and(|n| n < 0) {
                    continue;
                }
                let (rs, re) = (num(&g["start"], &w)?, num(&g["end"], &w)?);
                if re <= rs {
                    continue;
                }
                regions.push(RegionSnapshot {
                    start: rs,
                    end: re,
                    nr_accesses: num(samples, &format!("{w} nr_accesses.samples"))? as u32,
                    age: num(
                        &g["age"]["aggr_intervals"],
                        &format!("{w} age.aggr_intervals"),
                    )
                    .unwrap_or(0) as u32,
                });
            }
            out.push((start / 1000, end / 1000, regions));
        }
        per_target.push(out);
    }
    let origin = per_target
        .iter()
        .filter_map(|t| t.first().map(|s| s.0))
        .min()
        .unwrap_or(0);
    let n = per_target.iter().map(Vec::len).max().unwrap_or(0);
    let mut snapshots = Vec::with_capacity(n);
    for i in 0..n {
        let mut targets = Vec::new();
        let (mut start, mut end) = (u64::MAX, 0);
        for (ti, t) in per_target.iter().enumerate() {
            if let Some((s, e, regs)) = t.get(i) {
                start = start.min(*s);
                end = end.max(*e);
                if !regs.is_empty() {
                    targets.push(TargetSnapshot {
                        target_idx: ti as u32,
                        regions: regs.clone(),
                    });
                }
            }
        }
        if targets.is_empty() {
            continue;
        }
        snapshots.push(Snapshot {
            start_us: start - origin,
            end_us: end - origin,
            sample_us: attrs.sample_us,
            aggr_us: attrs.aggr_us,
            targets,
        });
    }
    Ok(Imported {
        format,
        attrs,
        snapshots,
    })
}

/// Parses `perf script` output of `damon:damon_aggregated` (damo's
/// perf_script format, or a tracefs `trace` file).
pub fn parse_perf_script(text: &str, attrs: Attrs) -> Result<Imported, String> {
    let mut events = text.lines().filter_map(parse_aggregated).peekable();
    let Some(first) = events.peek() else {
        return Err("no damon_aggregated line in the file".into());
    };
    let _ = first;
    let evs: Vec<_> = events.collect();
    let mut ids: Vec<u64> = evs.iter().map(|e| e.target_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut asm = Assembler::new(ids.len(), attrs.sample_us, attrs.aggr_us);
    let snapshots = evs.into_iter().filter_map(|e| asm.push(e)).collect();
    Ok(Imported {
        format: "perf_script",
        attrs,
        snapshots,
    })
}

/// Reads a damo record file of any of the three formats.
pub fn read_damo(path: &Path) -> Result<Imported> {
    let bytes = std::fs::read(path).map_err(|e| {
        UsageError(format!(
            "cannot read damo record {}: {}",
            path.display(),
            crate::output::plain_io(&e)
        ))
    })?;
    let bad = |m: String| UsageError(format!("{}: {m}", path.display()));
    // json_compressed is zlib: 0x78 then a check byte.
    if bytes.len() > 2
        && bytes[0] == 0x78
        && (u16::from(bytes[0]) << 8 | u16::from(bytes[1])) % 31 == 0
    {
        let mut s = String::new();
        flate2::read::ZlibDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .map_err(|e| bad(format!("zlib data that does not inflate to text: {e}")))?;
        return Ok(parse_damo_json(&s, "json_compressed").map_err(bad)?);
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        bad("neither damo's json, json_compressed nor perf_script format (perf.data files need `damo convert --format json` first)".into())
    })?;
    if text.trim_start().starts_with('[') {
        return Ok(parse_damo_json(&text, "json").map_err(bad)?);
    }
    Ok(parse_perf_script(&text, Attrs::default()).map_err(bad)?)
}

#[derive(Serialize)]
struct ImportSummary {
    input: String,
    output: String,
    format: &'static str,
    snapshots: usize,
    targets: usize,
    duration_s: f64,
}

pub fn run(a: ImportArgs) -> Result<()> {
    crate::output::prepare("--output", &a.output, &[&a.file], &[])?;
    let imp = read_damo(&a.file)?;
    let nr_targets = imp
        .snapshots
        .iter()
        .flat_map(|s| s.targets.iter().map(|t| t.target_idx as usize + 1))
        .max()
        .unwrap_or(0);
    let header = Header {
        targets: (0..nr_targets)
            .map(|i| TargetInfo {
                pid: 0,
                label: format!("damo target {i}"),
            })
            .collect(),
        params: serde_json::json!({
            "imported_from": a.file.display().to_string(),
            "damo_format": imp.format,
        }),
        ..Header::new("damo", imp.attrs)
    };
    let mut w = Writer::create(&a.output, &header)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    for s in &imp.snapshots {
        w.push_snapshot(s)?;
    }
    w.finish()?;
    let summary = ImportSummary {
        input: a.file.display().to_string(),
        output: a.output.display().to_string(),
        format: imp.format,
        snapshots: imp.snapshots.len(),
        targets: nr_targets,
        duration_s: imp.snapshots.last().map_or(0.0, |s| s.end_us as f64 / 1e6),
    };
    if a.json {
        return print_json(&summary);
    }
    println!(
        "imported {} (damo {}): {} snapshots of {} target(s) over {:.1}s into {}",
        summary.input,
        summary.format,
        summary.snapshots,
        summary.targets,
        summary.duration_s,
        summary.output
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by damo 3.4.3's own writer (`write_damon_records(.., 'json')`)
    /// from three synthetic aggregations of one target.
    const DAMO_JSON: &str = include_str!("../../tests/data/damo-3.4.3.json");

    #[test]
    fn damo_json_imports_with_its_numbers_and_times() {
        let imp = parse_damo_json(DAMO_JSON, "json").unwrap();
        assert_eq!((imp.attrs.sample_us, imp.attrs.aggr_us), (5_000, 100_000));
        assert_eq!(imp.snapshots.len(), 3);
        let s = &imp.snapshots[1];
        assert_eq!((s.start_us, s.end_us), (100_000, 200_000));
        let r = &s.targets[0].regions;
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].start, r[0].end, r[0].nr_accesses),
            (40_960, 81_920, 5)
        );
        assert_eq!((r[1].nr_accesses, r[1].age), (20, 3));
    }

    #[test]
    fn perf_script_text_imports_the_same_snapshots() {
        let mut text = String::new();
        let mut t = 100.0f64;
        for snap in 0..3u64 {
            for (s, e, n, a) in [
                (10u64, 20u64, if snap == 1 { 5 } else { 0 }, snap),
                (20, 40, 20, 3),
                (100, 110, 0, 7),
            ] {
                text += &format!(
                    "kdamond.0  4452 [000] {t:.6}: damon:damon_aggregated: target_id=0 nr_regions=3 {}-{}: {n} {a}\n",
                    s * 4096,
                    e * 4096
                );
            }
            t += 0.1;
        }
        let a = parse_perf_script(&text, Attrs::default()).unwrap();
        let b = parse_damo_json(DAMO_JSON, "json").unwrap();
        let regions = |i: &Imported| -> Vec<Vec<RegionSnapshot>> {
            i.snapshots
                .iter()
                .map(|s| s.targets[0].regions.clone())
                .collect()
        };
        assert_eq!(regions(&a), regions(&b));
    }

    #[test]
    fn bad_input_names_the_place() {
        let e = parse_damo_json("{}", "json").unwrap_err();
        assert!(e.contains("JSON list"), "{e}");
        let e = parse_damo_json(
            r#"[{"snapshots":[{"start_time":"x","end_time":1,"regions":[]}]}]"#,
            "json",
        )
        .unwrap_err();
        assert!(e.contains("record 0 snapshot 0 start_time"), "{e}");
        assert!(parse_perf_script("hello\n", Attrs::default()).is_err());
    }
}
