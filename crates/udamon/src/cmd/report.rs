//! `udamon report`: read a record, print or draw a report.

use std::io::{self, BufWriter, Write};

use anyhow::{bail, Context, Result};
use udamon_cli::{
    AccuracyArgs, HeatmapArgs, HotArgs, JsonFileArgs, ObjectsArgs, RawArgs, SummaryArgs, WssArgs,
};
use udamon_report::{
    heatmap, hot, summary, wss, HeatmapFormat, HeatmapOptions, ImageOptions, Selected, Selection,
};
use udamon_session::SchemeReport;
use udamon_sim::{AccuracyAcc, AccuracyOptions};

use crate::inputs::{open, selected, selected_in, sim_model, target_set, target_table, title};
use crate::output::{print_accuracy, print_json, print_scheme_table};
use crate::UsageError;

pub fn heatmap_cmd(a: HeatmapArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let (time_bins, addr_bins) = a.bins()?;
    if a.all && a.select.address_range.is_some() {
        bail!(UsageError(
            "--all and --address-range cannot be combined".into()
        ));
    }
    let targets = target_set(&reader, &a.file, &a.select, None)?;
    let opts = HeatmapOptions {
        target: match targets.as_deref() {
            Some([t]) => Some(*t),
            _ => None,
        },
        time_range: a.select.time_range()?,
        address_range: a.select.address_range()?,
        all: a.all,
        time_bins,
        addr_bins,
    };
    let format = a.format()?;
    if let Some(p) = &a.output {
        crate::output::check_output("--output", p, &[&a.file], &[])?;
    }
    // Only the frames that may hold the time range are read; the heatmap
    // itself cuts the range and the addresses, and draws the first of the
    // targets named.
    let src = Selected::new(
        &reader,
        Selection::since_start(&reader, opts.time_range, None, targets),
    );
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

pub fn wss_cmd(a: WssArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let table = a.by.map(|_| target_table(&reader, &a.file)).transpose()?;
    let sel = selected_in(&reader, &a.file, &a.select, table.as_ref())?;
    let opts = a.options(sel.single_target())?;
    let src = Selected::new(&reader, sel);
    let mut out = BufWriter::new(io::stdout().lock());
    if let Some(table) = &table {
        let w = wss::build_by_process(&src, &opts, table)?;
        if a.json {
            w.write_json(&mut out)?;
        } else {
            w.write_text(&mut out, a.series)?;
        }
        out.flush()?;
        return Ok(());
    }
    let w = wss::build(&src, &opts)?;
    if a.json {
        w.write_json(&mut out)?;
    } else {
        w.write_text(&mut out, a.series)?;
    }
    out.flush()?;
    Ok(())
}

pub fn hot_cmd(a: HotArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let table = a.by.map(|_| target_table(&reader, &a.file)).transpose()?;
    let sel = selected_in(&reader, &a.file, &a.select, table.as_ref())?;
    let opts = a.options(sel.single_target())?;
    let src = Selected::new(&reader, sel);
    let mut namer = crate::inputs::namer(&reader, &a.file, &a.names, table.as_ref())?;
    let mut out = BufWriter::new(io::stdout().lock());
    if let Some(table) = &table {
        let mut h = hot::build_by_process(&src, &opts, table)?;
        h.name_objects(&mut namer);
        crate::inputs::say_notes(&namer);
        if a.json {
            h.write_json(&mut out)?;
        } else {
            h.write_text(&mut out)?;
        }
        out.flush()?;
        return Ok(());
    }
    let mut h = hot::build(&src, &opts)?;
    h.name_objects(&mut namer);
    crate::inputs::say_notes(&namer);
    if a.json {
        h.write_json(&mut out)?;
    } else {
        h.write_text(&mut out)?;
    }
    out.flush()?;
    Ok(())
}

pub fn objects_cmd(a: ObjectsArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let table = target_table(&reader, &a.file)?;
    let sel = selected_in(&reader, &a.file, &a.select, Some(&table))?;
    let mut namer = crate::inputs::namer(&reader, &a.file, &a.names, Some(&table))?;
    let opts = udamon_objects::ObjectsOptions {
        top: a.top,
        by_process: a.by.is_some(),
    };
    let r = udamon_objects::build(&Selected::new(&reader, sel), &mut namer, &table, &opts)
        .with_context(|| a.file.display().to_string())?;
    crate::inputs::say_notes(&namer);
    let mut out = BufWriter::new(io::stdout().lock());
    if a.json {
        r.write_json(&mut out)?;
    } else {
        r.write_text(&mut out)?;
    }
    out.flush()?;
    Ok(())
}

pub fn raw_cmd(a: RawArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let sel = selected(&reader, &a.file, &a.select)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let written = match Selected::new(&reader, sel).write_raw(&mut out) {
        Ok(()) => out.flush(),
        Err(udamon_report::Error::Io(e)) => Err(e),
        Err(e) => return Err(e.into()),
    };
    match written {
        // A closed pipe (`| head`) is a normal way to stop reading.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

pub fn accuracy_cmd(a: AccuracyArgs) -> Result<()> {
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

pub fn stats_cmd(a: JsonFileArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let series = summary::json_entries(&reader, "schemes")?;
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

pub fn summary_cmd(a: SummaryArgs) -> Result<()> {
    let reader = open(&a.file)?;
    let summary = summary::read(&reader)?;
    let processes = match a.by {
        Some(_) => Some(summary::processes(
            &reader,
            &target_table(&reader, &a.file)?,
        )?),
        None => None,
    };
    let no_summary = || {
        format!(
            "{}: the record has no summary (the run did not finish, or the record is damaged before its end)",
            a.file.display()
        )
    };
    let Some(processes) = processes else {
        let Some(summary) = summary else {
            bail!(UsageError(no_summary()));
        };
        if a.json {
            return print_json(summary.json());
        }
        summary.write_text(&mut io::stdout().lock())?;
        return Ok(());
    };
    // With --by process, a run without a summary still has its processes.
    if summary.is_none() {
        eprintln!("udamon: note: {}", no_summary());
    }
    if a.json {
        let mut v = match summary.as_ref().map(|s| s.json()) {
            Some(j) if j.is_object() => j.clone(),
            Some(j) => serde_json::json!({ "summary": j }),
            None => serde_json::json!({}),
        };
        v["processes"] = serde_json::to_value(&processes)?;
        return print_json(&v);
    }
    let mut out = io::stdout().lock();
    if let Some(s) = &summary {
        s.write_text(&mut out)?;
    }
    summary::write_processes(&mut out, &processes)?;
    Ok(())
}
