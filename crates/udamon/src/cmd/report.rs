//! `udamon report`: read a record, print or draw a report.

use std::io::{self, BufWriter, Write};

use anyhow::{bail, Result};
use udamon_core::units::{
    parse_address, parse_duration_us, parse_range, parse_size, Fraction, UnitError, UnitErrorKind,
};
use udamon_record::{Entry, Reader};
use udamon_report::{
    heatmap, hot, wss, HeatmapFormat, HeatmapOptions, HotOptions, ImageOptions, Selected,
    Selection, WssOptions,
};
use udamon_session::SchemeReport;
use udamon_sim::{AccuracyAcc, AccuracyOptions};

use crate::cli::{
    AccuracyArgs, HeatmapArgs, HotArgs, JsonFileArgs, RawArgs, ReportCommand, SelectArgs, WssArgs,
};
use crate::inputs::{duration_arg, sim_model};
pub use crate::inputs::{open, title};
use crate::output::{print_accuracy, print_json, print_scheme_table, reset_period};
use crate::UsageError;

pub fn run(r: ReportCommand) -> Result<()> {
    match r {
        ReportCommand::Heatmap(a) => heatmap_cmd(a),
        ReportCommand::Html(a) => super::report_html::run(a),
        ReportCommand::Wss(a) => wss_cmd(a),
        ReportCommand::Hot(a) => hot_cmd(a),
        ReportCommand::Raw(a) => raw_cmd(a),
        ReportCommand::Accuracy(a) => accuracy_cmd(a),
        ReportCommand::Stats(a) => stats_cmd(a),
        ReportCommand::Summary(a) => summary_cmd(a),
    }
}

/// Parses "START-END" with `parse` for each side.
fn range_arg(
    flag: &str,
    s: &str,
    parse: impl Fn(&str) -> Result<u64, UnitError>,
) -> Result<(u64, u64)> {
    parse_range(s, parse).map_err(|e| {
        match e.kind {
            // The range as a whole: its message names it.
            UnitErrorKind::NotARange | UnitErrorKind::EmptyRange => {
                UsageError(format!("--{flag} {e}"))
            }
            _ => UsageError(format!("--{flag}: {e}")),
        }
        .into()
    })
}

/// Checks `--target N` against the record's targets.
pub(super) fn target_arg(reader: &Reader, target: Option<u32>) -> Result<Option<u32>> {
    let n = reader.header().targets.len();
    match target {
        Some(t) if n > 0 && t as usize >= n => {
            let has = if n == 1 {
                "one target, 0".to_string()
            } else {
                format!("targets 0..{}", n - 1)
            };
            bail!(UsageError(format!("--target {t}: the record has {has}")))
        }
        t => Ok(t),
    }
}

/// `--time-range START-END`: durations since the record's start, in
/// microseconds.
pub(super) fn time_range_arg(s: Option<&str>) -> Result<Option<(u64, u64)>> {
    s.map(|s| range_arg("time-range", s, |t| parse_duration_us(t, Fraction::Round)))
        .transpose()
}

/// `--address-range START-END`: hex addresses or sizes.
pub(super) fn address_range_arg(s: Option<&str>) -> Result<Option<(u64, u64)>> {
    s.map(|s| range_arg("address-range", s, parse_address))
        .transpose()
}

/// The part of a record the selection flags select.
pub(super) fn selected(reader: &Reader, a: &SelectArgs) -> Result<Selection> {
    selection(
        reader,
        time_range_arg(a.time_range.as_deref())?,
        address_range_arg(a.address_range.as_deref())?,
        a.target,
    )
}

/// The part of a record a time range (microseconds since the record's
/// start), an address range and `--target` select.
pub(super) fn selection(
    reader: &Reader,
    time_range: Option<(u64, u64)>,
    address_range: Option<(u64, u64)>,
    target: Option<u32>,
) -> Result<Selection> {
    let origin = reader
        .frames()
        .iter()
        .find(|f| f.nr_snapshots > 0)
        .map_or(0, |f| f.first_start_us);
    Ok(Selection {
        time_us: time_range.map(|(x, y)| (origin.saturating_add(x), origin.saturating_add(y))),
        address: address_range,
        target: target_arg(reader, target)?,
    })
}

fn resol_arg(s: &str) -> Result<(usize, usize)> {
    let bad = || UsageError(format!("--resol {s}: expected TIMExADDR bins, like 40x80"));
    let (t, a) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    Ok((
        t.trim().parse().map_err(|_| bad())?,
        a.trim().parse().map_err(|_| bad())?,
    ))
}

fn heatmap_cmd(a: HeatmapArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let (time_bins, addr_bins) = match a.resol.as_deref().map(resol_arg).transpose()? {
        Some((t, ad)) => (Some(t), Some(ad)),
        None => (None, None),
    };
    if a.all && a.select.address_range.is_some() {
        bail!(UsageError(
            "--all and --address-range cannot be combined".into()
        ));
    }
    let opts = HeatmapOptions {
        target: target_arg(&reader, a.select.target)?,
        time_range: time_range_arg(a.select.time_range.as_deref())?,
        address_range: address_range_arg(a.select.address_range.as_deref())?,
        all: a.all,
        time_bins,
        addr_bins,
    };
    let format = match &a.output {
        Some(p) => match p.extension().and_then(|e| e.to_str()) {
            Some("png") => HeatmapFormat::Png,
            Some("svg") => HeatmapFormat::Svg,
            _ => bail!(UsageError(format!(
                "{}: the image name must end in .png or .svg",
                p.display()
            ))),
        },
        None if a.json => HeatmapFormat::Json,
        None => HeatmapFormat::Text,
    };
    if let Some(p) = &a.output {
        crate::output::check_output("--output", p, &[&a.file], &[])?;
    }
    // Only the frames that may hold the time range are read; the heatmap
    // itself cuts the range and the addresses.
    let src = Selected::new(&reader, selection(&reader, opts.time_range, None, None)?);
    let hm = heatmap::build(&src, &opts, format)?;
    let image = ImageOptions {
        width: a.width,
        height: a.height,
        title: Some(a.title.unwrap_or_else(|| title(&reader, &a.file))),
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match (format, &a.output) {
        (HeatmapFormat::Png | HeatmapFormat::Svg, Some(p)) => {
            crate::output::write_image(&hm, format, &image, p)?
        }
        (HeatmapFormat::Json, _) => hm.write_json(&mut out)?,
        _ => hm.write_text(&mut out, a.color.enabled())?,
    }
    if let Some(p) = &a.output {
        writeln!(out, "wrote {}", p.display())?;
    }
    out.flush()?;
    Ok(())
}

fn wss_cmd(a: WssArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let sel = selected(&reader, &a.select)?;
    let opts = WssOptions {
        percentiles: a.percentiles.iter().map(|&p| f64::from(p)).collect(),
        acc_thres: a.acc_thres,
        sz_thres: parse_size(&a.sz_thres, Fraction::Round)
            .map_err(|m| UsageError(format!("--sz-thres: {m}")))?,
        skip: a.skip,
        target: sel.target,
    };
    let w = wss::build(&Selected::new(&reader, sel), &opts)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        w.write_json(&mut out)?;
    } else {
        w.write_text(&mut out, a.series)?;
    }
    out.flush()?;
    Ok(())
}

fn hot_cmd(a: HotArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let time_range = time_range_arg(a.select.time_range.as_deref())?;
    let sel = selected(&reader, &a.select)?;
    let opts = HotOptions {
        at_us: a.at.as_deref().map(|s| duration_arg("at", s)).transpose()?,
        aggregate: a.aggregate,
        // Without --aggregate the selection's last snapshot is shown.
        time_range: time_range.filter(|_| a.aggregate),
        top: a.top,
        target: sel.target,
    };
    let h = hot::build(&Selected::new(&reader, sel), &opts)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        h.write_json(&mut out)?;
    } else {
        h.write_text(&mut out)?;
    }
    out.flush()?;
    Ok(())
}

fn raw_cmd(a: RawArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let sel = selected(&reader, &a.select)?;
    let whole = sel.is_all();
    let mut out = BufWriter::new(io::stdout().lock());
    udamon_report::raw::write_header_line(&mut out, reader.header())?;
    let mut buf = Vec::new();
    let mut err = None;
    Selected::new(&reader, sel).for_each_entry(|e| {
        let r = match e {
            Entry::Snapshot(s) => udamon_report::raw::write_snapshot_line(&mut out, s, &mut buf),
            // A run's summary describes the whole run, not a part of it.
            Entry::Json { kind, .. } if !whole && kind == "summary" => Ok(()),
            Entry::Json { kind, value } => {
                udamon_report::raw::write_json_line(&mut out, kind, value)
            }
        };
        match r {
            Ok(()) => std::ops::ControlFlow::Continue(()),
            Err(e) => {
                err = Some(e);
                std::ops::ControlFlow::Break(())
            }
        }
    })?;
    match err {
        // A closed pipe (`| head`) is a normal way to stop reading.
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        Some(e) => return Err(e.into()),
        None => {}
    }
    out.flush().or_else(|e| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Ok(())
        } else {
            Err(e)
        }
    })?;
    Ok(())
}

fn accuracy_cmd(a: AccuracyArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&a.hot_threshold) {
        bail!(UsageError(format!(
            "--hot-threshold {}: expected a frequency between 0 and 1",
            a.hot_threshold
        )));
    }
    let reader = open(&a.file)?;
    let (model, _) = sim_model(&reader, &a.file)?;
    let opts = AccuracyOptions {
        warmup_windows: a.warmup,
        hot_threshold: a.hot_threshold,
    };
    let mut acc = AccuracyAcc::new(opts);
    reader.for_each_snapshot(|s| acc.push(&model, s))?;
    let acc = acc.finish();
    if acc.windows == 0 {
        bail!(UsageError(format!(
            "--warmup {}: no window is left to score; {} has {} aggregation windows \
             (give a warm-up below that, like the default 10)",
            a.warmup,
            a.file.display(),
            reader.nr_snapshots()
        )));
    }
    if a.json {
        return print_json(&acc);
    }
    print_accuracy(
        &acc,
        &reader
            .header()
            .sim
            .as_ref()
            .map_or(String::new(), |s| s.monitor.clone()),
    );
    Ok(())
}

/// The JSON entries of `kind` in a record, in order.
fn json_entries(reader: &Reader, kind: &str) -> Result<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    reader.for_each_entry(|e| {
        if let Entry::Json { kind: k, value } = e {
            if k == kind {
                out.push(value.clone());
            }
        }
        std::ops::ControlFlow::Continue(())
    })?;
    Ok(out)
}

fn stats_cmd(a: JsonFileArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let series = json_entries(&reader, "schemes")?;
    let Some(last) = series.last() else {
        bail!(UsageError(format!(
            "{}: the record has no scheme statistics (it was made without schemes)",
            a.file.display()
        )));
    };
    if a.json {
        return print_json(&serde_json::json!({ "final": last, "series": series }));
    }
    let end_us = last["end_us"].as_u64().unwrap_or(0);
    println!(
        "scheme statistics at {} ({} readings in the record)",
        udamon_report::fmt_us(end_us),
        series.len()
    );
    let reports: Vec<SchemeReport> =
        serde_json::from_value(last["schemes"].clone()).map_err(|e| {
            UsageError(format!(
                "{}: malformed scheme statistics in the record: {e}",
                a.file.display()
            ))
        })?;
    print_scheme_table(&reports);
    Ok(())
}

fn summary_cmd(a: JsonFileArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let Some(summary) = json_entries(&reader, "summary")?.pop() else {
        let h = reader.header();
        if h.kind == "damo" {
            // An imported record is whole: damo's formats carry no run summary.
            let from = h.params["imported_from"].as_str().unwrap_or("?");
            let format = h.params["damo_format"].as_str().unwrap_or("?");
            let snaps = reader.nr_snapshots();
            if a.json {
                return print_json(&serde_json::json!({
                    "imported_from": from,
                    "damo_format": format,
                    "snapshots": snaps,
                    "targets": h.targets.len(),
                }));
            }
            println!(
                "imported from damo's {format} record {from}: {snaps} snapshots of {} target(s); \
                 damo records carry no run summary (heatmap, wss and hot read it as any record)",
                h.targets.len()
            );
            return Ok(());
        }
        bail!(UsageError(format!(
            "{}: the record has no summary (the run did not finish, or the record is damaged before its end)",
            a.file.display()
        )));
    };
    if a.json {
        return print_json(&summary);
    }
    let f = |k: &str| summary[k].as_f64();
    if summary.get("ops").is_some() {
        // A live run.
        println!(
            "pid {} ({}) with {} for {:.1}s ({}): {} snapshots, {:.0} regions on average",
            summary["pid"],
            summary["command"].as_str().unwrap_or("?"),
            summary["ops"].as_str().unwrap_or("?"),
            f("monitored_s").unwrap_or(0.0),
            summary["ended_by"].as_str().unwrap_or("?"),
            summary["snapshots"],
            f("avg_nr_regions").unwrap_or(0.0)
        );
        println!("access     {}", summary["access"].as_str().unwrap_or("?"));
        print!(
            "udamon CPU {:.4} s/s",
            f("udamon_cpu_s_per_s").unwrap_or(0.0)
        );
        match f("udamon_monitoring_cpu_s_per_s") {
            Some(m) => println!(" ({m:.4} while monitoring)"),
            None => println!(),
        }
        if let Some(k) = f("kdamond_cpu_s_per_s") {
            println!("kdamond    {k:.4} s/s");
        }
        if let (Some(n), Some(p)) = (
            summary["softdirty_resets"].as_u64(),
            summary["softdirty_reset_period"].as_object(),
        ) {
            let w = |k: &str| p.get(k).and_then(|v| v.as_u64()).unwrap_or(0) as u32;
            println!(
                "soft-dirty {n} reset(s), {}",
                reset_period(w("last"), w("min"), w("max"))
            );
        }
        if let Some(n) = summary["gaps"].as_u64().filter(|&n| n > 0) {
            println!(
                "gaps       {n} window(s) far longer than the aggregation interval, the longest \
                 {:.1}s: no snapshot describes those times window by window",
                f("longest_gap_s").unwrap_or(0.0)
            );
        }
        if let Some(n) = summary["execs"].as_u64().filter(|&n| n > 0) {
            println!("execs      {n}: the target exec'd; regions started afresh after each");
        }
    } else {
        println!(
            "{} ({}, seed {}): {:.1}s simulated, {} snapshots, {:.0} regions on average",
            summary["workload"].as_str().unwrap_or("?"),
            summary["monitor"].as_str().unwrap_or("?"),
            summary["seed"],
            f("simulated_s").unwrap_or(0.0),
            summary["snapshots"],
            f("avg_nr_regions").unwrap_or(0.0)
        );
    }
    if let (Some(avg), Some(peak)) = (f("rss_avg_bytes"), f("rss_peak_bytes")) {
        println!(
            "rss        {} on average, {} at peak",
            udamon_report::fmt_bytes(avg as u64),
            udamon_report::fmt_bytes(peak as u64)
        );
    }
    if let Some(rt) = f("runtime_s") {
        println!("runtime    {rt:.3}s");
    }
    if let Some(faults) = f("faults") {
        println!("faults     {}", faults as u64);
    }
    let empty = Vec::new();
    for s in summary["schemes"].as_array().unwrap_or(&empty) {
        println!(
            "scheme {}   {} applied to {} (tried {})",
            s["index"],
            s["action"].as_str().unwrap_or("?"),
            udamon_report::fmt_bytes(s["sz_applied"].as_u64().unwrap_or(0)),
            udamon_report::fmt_bytes(s["sz_tried"].as_u64().unwrap_or(0))
        );
    }
    Ok(())
}
