//! `udamon export`: a udamon record written in damo's record formats, so
//! that damo's reports and the scripts built on them read what udamon
//! recorded. The writing is `udamon-damo`'s, streaming.

use std::ops::ControlFlow;

use anyhow::{Context, Result};
use serde::Serialize;
use udamon_cli::{ExportArgs, ExportFormatArg};
use udamon_damo::ExportFormat;

use crate::output::{print_json, Progress, WholeFile};

#[derive(Serialize)]
struct ExportSummary {
    input: String,
    output: String,
    format: &'static str,
    snapshots: u64,
    targets: usize,
}

pub fn run(a: ExportArgs) -> Result<()> {
    crate::output::check_output("--output", &a.output, &[&a.record], &[])?;
    let reader = crate::inputs::open(&a.record)?;
    let format = match a.format {
        ExportFormatArg::DamoJsonCompressed => ExportFormat::JsonCompressed,
        ExportFormatArg::DamoJson => ExportFormat::Json,
        ExportFormatArg::PerfScript => ExportFormat::PerfScript,
    };
    crate::stop::install();
    let (out, file) = WholeFile::create(&a.output)?;
    let total = reader.nr_snapshots() * reader.header().targets.len().max(1) as u64;
    let mut bar = Progress::new(total, "exporting");
    let mut done = 0u64;
    let exported = udamon_damo::export(&reader, file, format, &mut || {
        done += 1;
        if done.is_multiple_of(64) {
            bar.set(done);
        }
        match crate::stop::requested() {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    });
    bar.finish();
    if let Err(udamon_damo::Error::Interrupted) = exported {
        drop(out);
        crate::stop::exit_interrupted(&a.output);
    }
    let exported = exported.with_context(|| format!("cannot write {}", a.output.display()))?;
    out.commit()?;
    let summary = ExportSummary {
        input: a.record.display().to_string(),
        output: a.output.display().to_string(),
        format: format.damo_name(),
        snapshots: exported.snapshots,
        targets: exported.targets,
    };
    if a.json {
        return print_json(&summary);
    }
    println!(
        "exported {} into {} (damo {}): {} snapshots of {} target(s)",
        summary.input, summary.output, summary.format, summary.snapshots, summary.targets
    );
    Ok(())
}
