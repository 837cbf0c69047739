//! The inputs several subcommands read, each read one way: flag values
//! (durations), workload specs, scheme files, records and the part of one
//! the selection flags select. A file that cannot be used is bad input
//! (exit code 2), named once in plain words.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use udamon_cli::SelectArgs;
use udamon_core::schemes::Damos;
use udamon_record::Reader;
use udamon_report::{Selection, TargetTable};
use udamon_session::OpsChoice;
use udamon_sim::{Model, Workload};

use crate::UsageError;

/// A duration flag's value (`5ms`, `10s`), in microseconds.
pub use udamon_cli::duration_arg;

/// `--duration`, when given: a positive duration (a spec refuses 0 too).
pub fn run_duration(s: Option<&str>) -> Result<Option<u64>> {
    let Some(s) = s else { return Ok(None) };
    match duration_arg("duration", s)? {
        0 => Err(UsageError(format!(
            "--duration {s}: a run needs a positive duration, like 10s"
        ))
        .into()),
        d => Ok(Some(d)),
    }
}

/// `--ops` names a live path, which `--sim` does not take; `what` says what
/// the live path does ("watches", "acts on").
pub fn refuse_ops_with_sim(ops: OpsChoice, what: &str) -> Result<()> {
    if ops == OpsChoice::Auto {
        return Ok(());
    }
    Err(UsageError(format!(
        "--ops {} {what} a live process (--pid or -- CMD); --sim runs the simulator",
        ops.name()
    ))
    .into())
}

/// Reads a workload spec file; a failure is a usage error naming the file.
pub fn read_spec(p: &Path) -> Result<String> {
    std::fs::read_to_string(p)
        .map_err(|e| UsageError(format!("cannot read spec {}: {e}", p.display())).into())
}

/// The schemes of a scheme file; a file without any is bad input.
pub fn read_schemes(path: &Path) -> Result<Vec<Damos>> {
    let schemes = udamon_scheme_file::parse_file(path)?;
    if schemes.is_empty() {
        return Err(UsageError(format!("{}: no scheme in the file", path.display())).into());
    }
    Ok(schemes)
}

/// Opens a record; every damaged stretch is reported on stderr and the
/// readable frames are used.
pub fn open(path: &Path) -> Result<Reader> {
    let mut reader = open_record(path)?;
    for d in reader.damage() {
        eprintln!("udamon: warning: {}: {d}", path.display());
    }
    // A closed record's frames are checked as they are read.
    let name = path.display().to_string();
    reader.on_damage(move |d| eprintln!("udamon: warning: {name}: {d}"));
    if write_only(&reader) {
        eprintln!(
            "udamon: note: {} was recorded with soft-dirty bits: it shows writes only; reads are not seen",
            path.display()
        );
    }
    Ok(reader)
}

/// Opens a record file the user named: a file that cannot be read (missing,
/// a directory, no permission) is bad input, named once in plain words.
pub fn open_record(path: &Path) -> Result<Reader> {
    Reader::open(path).map_err(|e| match e {
        udamon_record::Error::Io { path, source } => UsageError(format!(
            "cannot read record {}: {}",
            path.display(),
            crate::output::plain_io(&source)
        ))
        .into(),
        e => e.into(),
    })
}

/// The record's target table (its processes); a record announcing more
/// than the reports read is named.
pub fn target_table(reader: &Reader, path: &Path) -> Result<TargetTable> {
    TargetTable::read(reader).with_context(|| path.display().to_string())
}

/// `table`, or the record's read now.
fn table_or_read<'a>(
    reader: &Reader,
    path: &Path,
    table: Option<&'a TargetTable>,
) -> Result<std::borrow::Cow<'a, TargetTable>> {
    Ok(match table {
        Some(t) => std::borrow::Cow::Borrowed(t),
        None => std::borrow::Cow::Owned(target_table(reader, path)?),
    })
}

/// The targets `--target`, `--pid` and `--comm` name, sorted, checked
/// against the record (`table`, else read when needed); `None` when they
/// name none. `--target` within the header's targets needs no table.
pub fn target_set(
    reader: &Reader,
    path: &Path,
    a: &SelectArgs,
    table: Option<&TargetTable>,
) -> Result<Option<Vec<u32>>> {
    if !a.names_targets() {
        return Ok(None);
    }
    let n = reader.header().targets.len();
    if table.is_none()
        && a.pid.is_empty()
        && a.comm.is_empty()
        && a.target.iter().all(|&t| (t as usize) < n)
    {
        let mut t = a.target.clone();
        t.sort_unstable();
        t.dedup();
        return Ok(Some(t));
    }
    let table = table_or_read(reader, path, table)?;
    Ok(Some(table.select(&a.target, &a.pid, &a.comm)?))
}

/// The part of a record the selection flags select.
pub fn selected(reader: &Reader, path: &Path, a: &SelectArgs) -> Result<Selection> {
    selected_in(reader, path, a, None)
}

/// [`selected`], with the record's target table when the caller has it.
pub fn selected_in(
    reader: &Reader,
    path: &Path,
    a: &SelectArgs,
    table: Option<&TargetTable>,
) -> Result<Selection> {
    let (time_range, address_range) = (a.time_range()?, a.address_range()?);
    Ok(Selection::since_start(
        reader,
        time_range,
        address_range,
        target_set(reader, path, a, table)?,
    ))
}

/// Whether the record saw writes only (soft-dirty monitoring).
pub fn write_only(reader: &Reader) -> bool {
    reader.header().params["write_only"] == serde_json::Value::Bool(true)
}

/// The image title: the workload and how it was monitored.
pub fn title(reader: &Reader, path: &Path) -> String {
    let h = reader.header();
    let name = h
        .targets
        .first()
        .map(|t| t.label.clone())
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| path.display().to_string());
    match &h.sim {
        Some(s) => format!("{name} ({}, simulated)", s.monitor),
        None if write_only(reader) => format!("{name} ({}, writes only)", h.kind),
        None => format!("{name} ({})", h.kind),
    }
}

/// The model a simulated record was made from, and its seed.
pub fn sim_model(reader: &Reader, path: &Path) -> Result<(Arc<Model>, u64)> {
    let h = reader.header();
    let Some(sim) = &h.sim else {
        bail!(UsageError(format!(
            "{}: accuracy needs a simulated record (this one is {}, which has no ground truth)",
            path.display(),
            h.kind
        )));
    };
    let mut w = Workload::from_toml(&sim.spec_toml, &path.display().to_string())?;
    if let Some(d) = h.params.get("duration_us").and_then(|v| v.as_u64()) {
        w.duration_us = d;
    }
    Ok((Arc::new(Model::new(w)), sim.seed))
}

/// The namer of a record's regions (`report objects`, `hot`, `html`,
/// `hints`): its mappings read, and its allocation sites where it was
/// recorded with `--alloc-sites`. Files are read as regions are named, so
/// what could not be read is said once the naming is done
/// ([`say_notes`]): a report names less, it does not fail.
pub fn namer(
    reader: &Reader,
    path: &Path,
    names: &udamon_cli::NameArgs,
    table: Option<&TargetTable>,
) -> Result<udamon_objects::Namer> {
    let mut namer = udamon_objects::namer_of(reader, names.options())
        .with_context(|| path.display().to_string())?;
    if !reader.header().params["alloc_sites"].is_null() {
        let table = table_or_read(reader, path, table)?;
        namer.load_alloc_sites(reader.header(), path, &table);
    }
    Ok(namer)
}

/// Says on stderr what the namer could not read (files rebuilt since the
/// record, files missing, side files cut short), after it named.
pub fn say_notes(namer: &udamon_objects::Namer) {
    for n in namer.notes() {
        eprintln!("udamon: note: {n}");
    }
}

/// A hints file (`udamon hints`) as the lines the preloaded library
/// applies; the hints it cannot apply (objects named by their mapping) are
/// said on stderr, and a file with none it can is refused.
pub fn read_hints(path: &Path) -> Result<Vec<udamon_preload::HintLine>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError(format!(
            "--hints: cannot read {}: {}",
            path.display(),
            crate::output::plain_io(&e)
        ))
    })?;
    let hints = udamon_objects::Hints::parse(&text)
        .map_err(|e| UsageError(format!("--hints {}: {e}", path.display())))?;
    let (lines, skipped) = hints.to_library();
    if !skipped.is_empty() {
        eprintln!(
            "udamon: note: --hints {}: {} cannot be applied in a new run (no data symbol or allocation site names them): {}",
            path.display(),
            if skipped.len() == 1 { "one hint" } else { "some hints" },
            skipped.join(", ")
        );
    }
    if lines.is_empty() {
        bail!(UsageError(format!(
            "--hints {}: no hint names a data symbol or an allocation site, so nothing can be applied \
             (record with --alloc-sites to hint heap objects)",
            path.display()
        )));
    }
    Ok(lines)
}
