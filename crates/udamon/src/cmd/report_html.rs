//! `udamon report html`: one self-contained page of a record's reports.

use std::io::{BufWriter, Write};

use anyhow::{bail, Context, Result};
use udamon_cli::HtmlArgs;
use udamon_report::html::{self, HtmlOptions};

use crate::inputs::{open, target_set, title};
use crate::output::WholeFile;
use crate::UsageError;

pub fn run(a: HtmlArgs) -> Result<()> {
    if a.output.extension().and_then(|e| e.to_str()) != Some("html") {
        bail!(UsageError(format!(
            "--output {}: the page's name must end in .html",
            a.output.display()
        )));
    }
    let reader = open(&a.file)?;
    let opts = HtmlOptions {
        targets: target_set(&reader, &a.file, &a.select, None)?,
        time_range: a.select.time_range()?,
        address_range: a.select.address_range()?,
        ..HtmlOptions::default()
    };
    crate::output::check_output("--output", &a.output, &[&a.file], &[])?;
    let mut report = html::build(&reader, &opts)?;
    let mut namer = crate::inputs::namer(&reader, &a.file, &a.names, None)?;
    report.name_objects(&mut namer);
    crate::inputs::say_notes(&namer);
    let page_title = a.title.unwrap_or_else(|| title(&reader, &a.file));
    let source = a.file.file_name().map_or_else(
        || a.file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let cannot = || format!("cannot write {}", a.output.display());
    let (out, file) = WholeFile::create(&a.output)?;
    let mut f = BufWriter::new(file);
    html::write_html(&mut f, &report, &page_title, &source).with_context(cannot)?;
    f.flush().with_context(cannot)?;
    drop(f);
    out.commit()?;
    let bytes = std::fs::metadata(&a.output).map_or(0, |m| m.len());
    let hm = &report.heatmap;
    if a.json {
        // One line, as every report's JSON.
        let summary = serde_json::json!({
            "output": a.output.display().to_string(),
            "html_bytes": bytes,
            "snapshots": hm.nr_snapshots,
            "time_bins": hm.time_bins,
            "addr_bins": hm.addr_bins,
            "processes": report.processes.as_ref().map_or(0, |p| p.total),
            "processes_shown": report.processes.as_ref().map_or(0, |p| p.views.len()),
        });
        println!("{summary}");
        return Ok(());
    }
    println!(
        "wrote {} ({})",
        a.output.display(),
        udamon_report::fmt_bytes(bytes)
    );
    Ok(())
}
