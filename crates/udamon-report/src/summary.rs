//! The run's summary a record ends with (`udamon report summary`): read
//! from the record, written in words or kept as JSON. A record imported
//! from damo has none; what was imported stands in for it.

use std::io::{self, Write};
use std::ops::ControlFlow;

use serde::Serialize;
use serde_json::Value;
use udamon_record::{Entry, Reader};

use crate::wss::{self, WssOptions};
use crate::{fmt_bytes, fmt_us, Error, SnapshotSource, TargetRow, TargetTable};

/// A record's summary.
#[derive(Clone, Debug, PartialEq)]
pub enum Summary {
    /// The `summary` entry the run wrote at its end: a live run's (it names
    /// its `ops`) or a simulated one's.
    Run(Value),
    /// A record imported from damo, whose formats carry no run summary:
    /// `imported_from`, `damo_format`, `snapshots` and `targets`.
    Imported(Value),
}

/// The JSON entries of `kind` in a record, in order.
pub fn json_entries(reader: &Reader, kind: &str) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    reader.for_each_entry(|e| {
        if let Entry::Json { kind: k, value } = e {
            if k == kind {
                out.push(value.clone());
            }
        }
        ControlFlow::Continue(())
    })?;
    Ok(out)
}

/// The record's summary: its last `summary` entry, what was imported for
/// a damo record, and `None` when the run did not finish (or the record is
/// damaged before its end).
pub fn read(reader: &Reader) -> Result<Option<Summary>, Error> {
    if let Some(summary) = json_entries(reader, "summary")?.pop() {
        return Ok(Some(Summary::Run(summary)));
    }
    let h = reader.header();
    if h.kind != "damo" {
        return Ok(None);
    }
    // An imported record is whole: damo's formats carry no run summary.
    Ok(Some(Summary::Imported(serde_json::json!({
        "imported_from": h.params["imported_from"].as_str().unwrap_or("?"),
        "damo_format": h.params["damo_format"].as_str().unwrap_or("?"),
        "snapshots": reader.nr_snapshots(),
        "targets": h.targets.len(),
    }))))
}

impl Summary {
    /// The summary as JSON.
    pub fn json(&self) -> &Value {
        match self {
            Summary::Run(v) | Summary::Imported(v) => v,
        }
    }

    /// The summary in words, one figure a line.
    pub fn write_text(&self, out: &mut dyn Write) -> io::Result<()> {
        let summary = match self {
            Summary::Imported(v) => {
                return writeln!(
                    out,
                    "imported from damo's {} record {}: {} snapshots of {} target(s); \
                     damo records carry no run summary (heatmap, wss and hot read it as any \
                     record)",
                    v["damo_format"].as_str().unwrap_or("?"),
                    v["imported_from"].as_str().unwrap_or("?"),
                    v["snapshots"],
                    v["targets"]
                );
            }
            Summary::Run(v) => v,
        };
        let f = |k: &str| summary[k].as_f64();
        if summary.get("ops").is_some() {
            write_live(out, summary)?;
        } else {
            writeln!(
                out,
                "{} ({}, seed {}): {:.1}s simulated, {} snapshots, {:.0} regions on average",
                summary["workload"].as_str().unwrap_or("?"),
                summary["monitor"].as_str().unwrap_or("?"),
                summary["seed"],
                f("simulated_s").unwrap_or(0.0),
                summary["snapshots"],
                f("avg_nr_regions").unwrap_or(0.0)
            )?;
        }
        if let (Some(avg), Some(peak)) = (f("rss_avg_bytes"), f("rss_peak_bytes")) {
            writeln!(
                out,
                "rss        {} on average, {} at peak",
                fmt_bytes(avg as u64),
                fmt_bytes(peak as u64)
            )?;
        }
        if let Some(rt) = f("runtime_s") {
            writeln!(out, "runtime    {rt:.3}s")?;
        }
        if let Some(faults) = f("faults") {
            writeln!(out, "faults     {}", faults as u64)?;
        }
        let empty = Vec::new();
        for s in summary["schemes"].as_array().unwrap_or(&empty) {
            writeln!(
                out,
                "scheme {}   {} applied to {} (tried {})",
                s["index"],
                s["action"].as_str().unwrap_or("?"),
                fmt_bytes(s["sz_applied"].as_u64().unwrap_or(0)),
                fmt_bytes(s["sz_tried"].as_u64().unwrap_or(0))
            )?;
        }
        Ok(())
    }
}

/// One process (target) of a run: who it was, when it came and went, how
/// many windows hold it and its median working set over them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessSummary {
    #[serde(flatten)]
    pub process: TargetRow,
    /// Snapshots that hold the target.
    pub windows: usize,
    /// The median (damo's percentile rule) of its working set over those
    /// windows (regions accessed at least once); `None` without windows.
    pub wss_median_bytes: Option<u64>,
}

/// The run's processes: every target of `table` and every target the
/// snapshots of `src` hold, by index.
pub fn processes<S: SnapshotSource + ?Sized>(
    src: &S,
    table: &TargetTable,
) -> Result<Vec<ProcessSummary>, Error> {
    let opts = WssOptions {
        percentiles: vec![50.0],
        ..WssOptions::default()
    };
    let seen = match wss::build_by_process(src, &opts, table) {
        Ok(w) => w.processes,
        Err(Error::NoSnapshots) => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut out: Vec<ProcessSummary> = table
        .rows()
        .iter()
        .map(|r| ProcessSummary {
            process: r.clone(),
            windows: 0,
            wss_median_bytes: None,
        })
        .collect();
    for p in seen {
        let median = p.percentiles.first().map(|x| x.wss_bytes);
        match out.binary_search_by_key(&p.process.target_idx, |x| x.process.target_idx) {
            Ok(i) => {
                out[i].windows = p.windows;
                out[i].wss_median_bytes = median;
            }
            Err(i) => out.insert(
                i,
                ProcessSummary {
                    process: p.process,
                    windows: p.windows,
                    wss_median_bytes: median,
                },
            ),
        }
    }
    Ok(out)
}

/// The processes as an aligned table, one a line.
pub fn write_processes(out: &mut dyn Write, ps: &[ProcessSummary]) -> io::Result<()> {
    writeln!(out, "processes  {}", ps.len())?;
    writeln!(
        out,
        "{:>6}  {:>8}  {:<15}  {:<24}  {:>10}  {:<20}  {:>7}  {:>10}",
        "target", "pid", "comm", "cgroup", "arrived", "left", "windows", "median wss"
    )?;
    for p in ps {
        let r = &p.process;
        writeln!(
            out,
            "{:>6}  {:>8}  {:<15}  {:<24}  {:>10}  {:<20}  {:>7}  {:>10}",
            r.target_idx,
            r.pid,
            r.comm.as_deref().unwrap_or("-"),
            r.cgroup.as_deref().unwrap_or("-"),
            r.arrived_us.map_or("-".into(), fmt_us),
            wss::left_text(r),
            p.windows,
            p.wss_median_bytes.map_or("-".into(), fmt_bytes)
        )?;
    }
    Ok(())
}

/// The lines only a live run's summary has.
fn write_live(out: &mut dyn Write, summary: &Value) -> io::Result<()> {
    let f = |k: &str| summary[k].as_f64();
    writeln!(
        out,
        "pid {} ({}) with {} for {:.1}s ({}): {} snapshots, {:.0} regions on average",
        summary["pid"],
        summary["command"].as_str().unwrap_or("?"),
        summary["ops"].as_str().unwrap_or("?"),
        f("monitored_s").unwrap_or(0.0),
        summary["ended_by"].as_str().unwrap_or("?"),
        summary["snapshots"],
        f("avg_nr_regions").unwrap_or(0.0)
    )?;
    writeln!(
        out,
        "access     {}",
        summary["access"].as_str().unwrap_or("?")
    )?;
    write!(
        out,
        "udamon CPU {:.4} s/s",
        f("udamon_cpu_s_per_s").unwrap_or(0.0)
    )?;
    match f("udamon_monitoring_cpu_s_per_s") {
        Some(m) => writeln!(out, " ({m:.4} while monitoring)")?,
        None => writeln!(out)?,
    }
    if let Some(k) = f("kdamond_cpu_s_per_s") {
        writeln!(out, "kdamond    {k:.4} s/s")?;
    }
    if let (Some(n), Some(p)) = (
        summary["softdirty_resets"].as_u64(),
        summary["softdirty_reset_period"].as_object(),
    ) {
        let w = |k: &str| p.get(k).and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        writeln!(
            out,
            "soft-dirty {n} reset(s), {}",
            reset_period(w("last"), w("min"), w("max"))
        )?;
    }
    if let Some(n) = summary["gaps"].as_u64().filter(|&n| n > 0) {
        writeln!(
            out,
            "gaps       {n} window(s) far longer than the aggregation interval, the longest \
             {:.1}s: no snapshot describes those times window by window",
            f("longest_gap_s").unwrap_or(0.0)
        )?;
    }
    if let Some(n) = summary["execs"].as_u64().filter(|&n| n > 0) {
        writeln!(
            out,
            "execs      {n}: the target exec'd; regions started afresh after each"
        )?;
    }
    Ok(())
}

/// "reset before every sample", "reset every 4 windows", "reset every 4
/// windows at the end (2 to 6 over the run)".
pub fn reset_period(last: u32, min: u32, max: u32) -> String {
    let every = |n: u32| match n {
        0 => "before every sample".to_string(),
        1 => "every window".to_string(),
        n => format!("every {n} windows"),
    };
    if min == max {
        format!("reset {}", every(last))
    } else {
        format!(
            "reset {} at the end ({min} to {max} over the run)",
            every(last)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_periods_in_words() {
        assert_eq!(reset_period(0, 0, 0), "reset before every sample");
        assert_eq!(reset_period(1, 1, 1), "reset every window");
        assert_eq!(
            reset_period(4, 2, 6),
            "reset every 4 windows at the end (2 to 6 over the run)"
        );
    }

    #[test]
    fn a_live_run_in_words() {
        let s = Summary::Run(serde_json::json!({
            "pid": 42, "command": "prog", "ops": "idle", "monitored_s": 2.04,
            "ended_by": "exit", "snapshots": 20, "avg_nr_regions": 11.6,
            "access": "reads and writes", "udamon_cpu_s_per_s": 0.01234,
            "udamon_monitoring_cpu_s_per_s": 0.02, "kdamond_cpu_s_per_s": 0.5,
            "softdirty_resets": 3,
            "softdirty_reset_period": {"last": 4, "min": 2, "max": 6},
            "gaps": 1, "longest_gap_s": 3.3, "execs": 2,
        }));
        let mut out = Vec::new();
        s.write_text(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "pid 42 (prog) with idle for 2.0s (exit): 20 snapshots, 12 regions on average\n\
             access     reads and writes\n\
             udamon CPU 0.0123 s/s (0.0200 while monitoring)\n\
             kdamond    0.5000 s/s\n\
             soft-dirty 3 reset(s), reset every 4 windows at the end (2 to 6 over the run)\n\
             gaps       1 window(s) far longer than the aggregation interval, the longest \
             3.3s: no snapshot describes those times window by window\n\
             execs      2: the target exec'd; regions started afresh after each\n"
        );
    }

    #[test]
    fn a_simulated_run_in_words() {
        let s = Summary::Run(serde_json::json!({
            "workload": "demo", "monitor": "damon", "seed": 1, "simulated_s": 2.0,
            "snapshots": 20, "avg_nr_regions": 12.4, "rss_avg_bytes": 2048.0,
            "rss_peak_bytes": 4096.0,
            "schemes": [{"index": 0, "action": "pageout", "sz_applied": 1024, "sz_tried": 2048}],
        }));
        let mut out = Vec::new();
        s.write_text(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "demo (damon, seed 1): 2.0s simulated, 20 snapshots, 12 regions on average\n\
             rss        2.0 KiB on average, 4.0 KiB at peak\n\
             scheme 0   pageout applied to 1.0 KiB (tried 2.0 KiB)\n"
        );
    }
}
