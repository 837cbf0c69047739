//! `udamon import`: damo's record files (json, json_compressed, perf-script
//! text) into a udamon record, so every udamon report reads them. The
//! reading is `udamon-damo`'s, streaming: memory does not grow with the
//! record's length, and an input past its caps is refused.

use std::ops::ControlFlow;

use anyhow::Result;
use serde::Serialize;
use udamon_cli::ImportArgs;

use crate::output::{print_json, Progress, WholeFile};
use crate::UsageError;

#[derive(Serialize)]
struct ImportSummary {
    input: String,
    output: String,
    format: &'static str,
    snapshots: u64,
    targets: usize,
    duration_s: f64,
    /// What was read but not imported, and why.
    warnings: Vec<String>,
}

pub fn run(a: ImportArgs) -> Result<()> {
    crate::output::check_output("--output", &a.output, &[&a.file], &[])?;
    crate::stop::install();
    let (out, file) = WholeFile::create(&a.output)?;
    drop(file);
    let mut bar = Progress::new(0, "importing");
    let imp = udamon_damo::import(&a.file, out.path(), &mut |read, total| {
        bar.set_len(total);
        bar.set(read);
        match crate::stop::requested() {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    });
    bar.finish();
    let imp = match imp {
        Err(udamon_damo::Error::Interrupted) => {
            drop(out);
            crate::stop::exit_interrupted(&a.output);
        }
        Err(udamon_damo::Error::Read { path, source }) => {
            return Err(UsageError(format!(
                "cannot read damo record {}: {}",
                path.display(),
                crate::output::plain_io(&source)
            ))
            .into())
        }
        Err(e) => return Err(e.into()),
        Ok(imp) => imp,
    };
    out.commit()?;
    for w in &imp.warnings {
        eprintln!("udamon: warning: {w}");
    }
    let summary = ImportSummary {
        input: a.file.display().to_string(),
        output: a.output.display().to_string(),
        format: imp.format,
        snapshots: imp.snapshots,
        targets: imp.targets,
        duration_s: imp.duration_us as f64 / 1e6,
        warnings: imp.warnings,
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
