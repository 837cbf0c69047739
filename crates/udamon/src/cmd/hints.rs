//! `udamon hints`: a record's hot objects as placement hints for the
//! program's next run, or as mlock schemes (docs/objects.md).

use anyhow::{bail, Context, Result};
use serde::Serialize;
use udamon_cli::HintsArgs;
use udamon_objects::{HintAction, ObjectsOptions};

use crate::inputs::{open, selected_in, target_table};
use crate::output::{print_json, write_whole};
use crate::UsageError;

#[derive(Serialize)]
struct HintsSummary {
    output: String,
    hints: usize,
    bytes: u64,
    objects: Vec<String>,
    schemes: bool,
}

pub fn run(a: HintsArgs) -> Result<()> {
    let opts = a.options()?;
    if a.schemes && opts.action != HintAction::Mlock {
        bail!(UsageError(
            "--schemes writes mlock schemes; a --node hint is applied by the preloaded \
             library (udamon record --hints): leave out one of the two"
                .into()
        ));
    }
    crate::output::check_output("--output", &a.output, &[&a.file], &[])?;
    let reader = open(&a.file)?;
    let table = target_table(&reader, &a.file)?;
    let sel = selected_in(&reader, &a.file, &a.select, Some(&table))?;
    let mut namer = crate::inputs::namer(&reader, &a.file, &a.names, Some(&table))?;
    let report = udamon_objects::build(
        &udamon_report::Selected::new(&reader, sel),
        &mut namer,
        &table,
        &ObjectsOptions {
            top: 0,
            by_process: false,
        },
    )
    .with_context(|| a.file.display().to_string())?;
    let hints = udamon_objects::hints::choose(&report, &mut namer, &opts);
    crate::inputs::say_notes(&namer);
    if hints.hints.is_empty() {
        eprintln!(
            "udamon: note: no object of {} is at least {:.1}% hot{}: the hints file is empty",
            a.file.display(),
            opts.min_frequency * 100.0,
            opts.max_bytes.map_or(String::new(), |m| format!(
                " and fits in {}",
                udamon_report::fmt_bytes(m)
            ))
        );
    }
    let comment = format!(
        "hints from {} by udamon {}: the objects at least {:.1}% hot, hottest first{}",
        a.file.display(),
        env!("CARGO_PKG_VERSION"),
        opts.min_frequency * 100.0,
        opts.max_bytes.map_or(String::new(), |m| format!(
            ", at most {} in all",
            udamon_report::fmt_bytes(m)
        ))
    );
    let text = if a.schemes {
        let mut t = format!(
            "# {comment}\n# mlock over the objects' recorded addresses (udamon apply --sim)\n"
        );
        t.push_str(&udamon_scheme_file::to_toml(&hints.to_schemes()));
        t
    } else {
        hints.to_toml(&comment)
    };
    write_whole(&a.output, text.as_bytes())?;
    let summary = HintsSummary {
        output: a.output.display().to_string(),
        hints: hints.hints.len(),
        bytes: hints.hints.iter().map(|h| h.bytes).sum(),
        objects: hints.hints.iter().map(|h| h.object.clone()).collect(),
        schemes: a.schemes,
    };
    if a.json {
        return print_json(&summary);
    }
    println!(
        "wrote {}: {} hints, {} ({})",
        summary.output,
        summary.hints,
        udamon_report::fmt_bytes(summary.bytes),
        summary.objects.join(", ")
    );
    Ok(())
}
