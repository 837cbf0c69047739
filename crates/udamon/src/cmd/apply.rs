//! `udamon apply` and `udamon schemes check`.

use anyhow::Result;
use serde::Serialize;
use udamon_cli::{ApplyArgs, SchemesCommand};
use udamon_core::schemes::Damos;
use udamon_scheme_file::{to_json, to_toml};
use udamon_session::sim::{RunSummary, Setup, SimRun};

use crate::inputs::{read_schemes, read_spec, refuse_ops_with_sim, run_duration};
use crate::live::{run_from_args, How};
use crate::output::{print_json, print_scheme_table, print_summary, run_sim};
use crate::UsageError;

pub fn schemes(c: SchemesCommand) -> Result<()> {
    match c {
        SchemesCommand::Check { file, json, damo } => {
            let schemes = read_schemes(&file)?;
            if damo {
                return print_json(&udamon_scheme_file::to_damo(&schemes)?);
            }
            if json {
                return print_json(&to_json(&schemes));
            }
            for (i, s) in schemes.iter().enumerate() {
                println!("# scheme {i}: {}", udamon_scheme_file::describe(s));
            }
            print!("{}", to_toml(&schemes));
            Ok(())
        }
    }
}

#[derive(Serialize)]
struct Comparison<'a> {
    dry_run: bool,
    baseline: &'a RunSummary,
    with_schemes: &'a RunSummary,
    /// with_schemes / baseline for each machine figure both runs have.
    ratios: serde_json::Map<String, serde_json::Value>,
}

pub fn run(a: ApplyArgs) -> Result<()> {
    let schemes = read_schemes(&a.schemes)?;
    let duration_us = run_duration(a.duration.as_deref())?;
    let attrs = a.attrs.attrs()?;
    let Some(sim) = &a.sim else {
        if let Some(p) = &a.output {
            crate::output::prepare("--output", p, &[&a.schemes], &[])?;
        }
        return apply_live(&a, schemes, attrs, duration_us);
    };
    refuse_ops_with_sim(a.live.ops, "acts on")?;
    let spec_text = read_spec(sim)?;
    if let Some(p) = &a.output {
        crate::output::prepare("--output", p, &[&a.schemes, sim], &[])?;
    }
    let origin = sim.display().to_string();
    let mut run = SimRun {
        seed: a.seed,
        duration_us,
        setup: Setup {
            dry_run: a.dry_run,
            softdirty_reset: a.live.softdirty_reset,
            ..Setup::adaptive(attrs)
        },
        ..SimRun::new(&spec_text, &origin)
    };
    let baseline = run_sim(&run, None, None)?;
    run.setup.schemes = schemes;
    let with = run_sim(&run, a.output.as_deref(), None)?;
    let mut ratios = serde_json::Map::new();
    for (k, v) in &with.metrics {
        if let (Some(x), Some(b)) = (v.as_f64(), baseline.metrics.get(k).and_then(|b| b.as_f64())) {
            if b != 0.0 {
                ratios.insert(k.clone(), serde_json::json!(x / b));
            }
        }
    }
    if a.json {
        return print_json(&Comparison {
            dry_run: a.dry_run,
            baseline: &baseline,
            with_schemes: &with,
            ratios,
        });
    }
    print_schemes(&with);
    println!();
    if a.dry_run {
        print_dry_run_note();
    } else {
        print_comparison(&baseline, &with);
    }
    if let Some(p) = &a.output {
        println!("\nwrote {}", p.display());
    }
    Ok(())
}

/// Schemes on a live process: no baseline run (the process runs once);
/// the statistics table and the target's RSS before and after.
fn apply_live(
    a: &ApplyArgs,
    schemes: Vec<Damos>,
    attrs: udamon_core::Attrs,
    duration_us: Option<u64>,
) -> Result<()> {
    if a.seed.is_some() {
        return Err(UsageError("--seed applies to the simulator (--sim) only".into()).into());
    }
    let s = run_from_args(
        &a.live,
        attrs,
        schemes,
        How {
            dry_run: a.dry_run,
            progress: !a.json,
            alloc_sites: None,
            hints: Vec::new(),
        },
        duration_us,
        a.output.as_deref(),
    )?;
    if a.json {
        return print_json(&s);
    }
    print_scheme_table(&s.schemes);
    println!();
    if a.dry_run {
        print_dry_run_note();
    }
    print_summary(&s);
    Ok(())
}

fn print_dry_run_note() {
    println!(
        "dry run: no action was performed; nr_applied and sz_applied count what the actions \
         would have taken at each pass, and ages reset as if they had, so memory counts again \
         only when it qualifies again"
    );
}

pub fn print_schemes(s: &RunSummary) {
    print_scheme_table(&s.schemes);
}

fn print_comparison(base: &RunSummary, with: &RunSummary) {
    let num = |s: &RunSummary, k: &str| s.metrics.get(k).and_then(|v| v.as_f64());
    println!(
        "{:<16} {:>14} {:>14} {:>9}",
        "", "without", "with schemes", "change"
    );
    type Row = (&'static str, &'static str, fn(f64) -> String);
    let rows: [Row; 4] = [
        ("rss average", "rss_avg_bytes", |v| {
            udamon_report::fmt_bytes(v as u64)
        }),
        ("rss peak", "rss_peak_bytes", |v| {
            udamon_report::fmt_bytes(v as u64)
        }),
        ("runtime", "runtime_s", |v| format!("{v:.3}s")),
        ("faults", "faults", |v| format!("{}", v as u64)),
    ];
    for (label, key, fmt) in rows {
        if let (Some(b), Some(w)) = (num(base, key), num(with, key)) {
            let change = if b != 0.0 {
                format!("{:+.1}%", (w / b - 1.0) * 100.0)
            } else {
                "-".into()
            };
            println!("{label:<16} {:>14} {:>14} {change:>9}", fmt(b), fmt(w));
        }
    }
}
