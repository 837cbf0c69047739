//! `udamon import`: damo's record files (json, json_compressed, perf-script
//! text) into a udamon record, so every udamon report reads them. The
//! reading is `udamon-damo`'s, streaming: memory does not grow with the
//! record's length.

use anyhow::Result;
use serde::Serialize;

use crate::cli::ImportArgs;
use crate::output::{print_json, Progress};
use crate::UsageError;

#[derive(Serialize)]
struct ImportSummary {
    input: String,
    output: String,
    format: &'static str,
    snapshots: u64,
    targets: usize,
    duration_s: f64,
}

pub fn run(a: ImportArgs) -> Result<()> {
    crate::output::prepare("--output", &a.output, &[&a.file], &[])?;
    let mut bar = Progress::new(0, "importing");
    let imp = udamon_damo::import(&a.file, &a.output, &mut |read, total| {
        bar.set_len(total);
        bar.set(read);
    });
    bar.finish();
    let imp = imp.map_err(|e| -> anyhow::Error {
        match e {
            udamon_damo::Error::Read { path, source } => UsageError(format!(
                "cannot read damo record {}: {}",
                path.display(),
                crate::output::plain_io(&source)
            ))
            .into(),
            e @ udamon_damo::Error::Format { .. } => UsageError(e.to_string()).into(),
            e => e.into(),
        }
    })?;
    let summary = ImportSummary {
        input: a.file.display().to_string(),
        output: a.output.display().to_string(),
        format: imp.format,
        snapshots: imp.snapshots,
        targets: imp.targets,
        duration_s: imp.duration_us as f64 / 1e6,
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
