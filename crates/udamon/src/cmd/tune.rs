//! `udamon tune`: the flags made into a tuning plan (`udamon_tune::plan`),
//! run under a progress bar, and its outcome printed and written.

use std::path::Path;

use anyhow::{Context, Result};
use udamon_cli::TuneArgs;
use udamon_core::schemes::Damos;
use udamon_scheme_file::parse_file;
use udamon_tune::plan::{self, Mode, Plan, Spec};
use udamon_tune::{default_threads, Knob, Sample, Tuned};

use crate::inputs::{open, run_duration};
use crate::output::{check_output, print_json, Progress, WholeFile};
use crate::UsageError;

pub fn run(a: TuneArgs) -> Result<()> {
    let schemes = parse_file(&a.schemes)?;
    let (knob, domain) = plan::knob_and_domain(
        &schemes,
        &a.schemes.display().to_string(),
        &a.knob,
        a.range.as_deref(),
        a.step.as_deref(),
    )?;
    let attrs = a.attrs.attrs()?;
    let duration_us = run_duration(a.duration.as_deref())?;
    // Tuning can take hours: make sure its results can be written first.
    let inputs: Vec<&Path> = [
        Some(a.schemes.as_path()),
        a.sim.as_deref(),
        a.replay.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some(p) = &a.plot {
        udamon_tune::plot::is_png(p)?;
        check_output("--plot", p, &inputs, a.output.as_deref().as_slice())?;
    }
    if let Some(p) = &a.output {
        check_output("--output", p, &inputs, a.plot.as_deref().as_slice())?;
    }
    let score = a.score.options().build()?;
    let threads = a.threads.unwrap_or_else(default_threads);
    let reader;
    let (mode, what) = if let Some(rec) = &a.replay {
        if a.samples.is_some() || a.time_limit.is_some() {
            return Err(UsageError(
                "--samples and --time-limit count real runs; with --replay every --step value is \
                 predicted (expected --step to change how many)"
                    .into(),
            )
            .into());
        }
        reader = open(rec)?;
        let mode = Mode::Replay {
            record: &reader,
            name: rec.display().to_string(),
            check: a.sim.clone().map(Spec::File),
        };
        (mode, "tuning by replay")
    } else {
        let spec = a.sim.clone().context("--sim SPEC or --replay RECORD")?;
        (Mode::Sim(Spec::File(spec)), "tuning")
    };
    let plan = Plan {
        seed: a.seed,
        duration_us,
        attrs,
        budget: a.budget(),
        threads,
        trust_fit: a.trust_fit,
        score,
        ..Plan::new(schemes.clone(), knob, domain, mode)
    };
    let mut bar = (!a.json).then(|| Progress::new(0, what));
    let tuned = plan::run(plan, &mut |done, total| {
        if let Some(b) = bar.as_mut() {
            b.set_len(total);
            b.set(done);
        }
    })?;
    if let Some(b) = bar {
        b.finish();
    }
    if a.json {
        let mut v = tuned.to_json(&knob)?;
        if let Some(m) = v.as_object_mut() {
            m.insert(
                "output".into(),
                serde_json::json!(a.output.as_ref().map(|p| p.display().to_string())),
            );
            m.insert(
                "plot".into(),
                serde_json::json!(a.plot.as_ref().map(|p| p.display().to_string())),
            );
        }
        print_json(&v)?;
    } else {
        print_tuned(&tuned, &knob, &schemes);
    }
    // The results are on stdout before the files are written, so a failed
    // write loses nothing.
    if let Some(p) = &a.output {
        crate::output::write_whole(p, tuned.schemes_toml().as_bytes())?;
    }
    if let Some(p) = &a.plot {
        let png = udamon_tune::plot::is_png(p)?;
        let (out, file) = WholeFile::create(p)?;
        drop(file);
        udamon_tune::plot::write_as(&tuned, &knob, &[], out.path(), png)
            .with_context(|| format!("cannot write {}", p.display()))?;
        out.commit()?;
    }
    if !a.json {
        for p in [&a.output, &a.plot].into_iter().flatten() {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn fmt_mib(b: f64) -> String {
    udamon_report::fmt_bytes(b.max(0.0) as u64)
}

fn print_sample_row(s: &Sample) {
    println!(
        "{:>3}  {:<7} {:>10} {:>10.3}s {:>11} {:>9} {:>9.4}{}",
        s.index,
        s.stage,
        s.display,
        s.metrics.runtime_s,
        fmt_mib(s.metrics.rss_avg_bytes),
        s.metrics.refaults as u64,
        s.score,
        if s.sla_ok { "" } else { "  sla broken" }
    );
}

fn print_tuned(t: &Tuned, knob: &Knob, schemes: &[Damos]) {
    println!(
        "tuning {} of scheme {} ({}) over {}..{} on {}",
        t.field_name(),
        t.scheme,
        udamon_scheme_file::describe(&schemes[t.scheme]),
        knob.format(t.domain.lo),
        knob.format(t.domain.hi),
        t.workload
    );
    let what = if t.mode == "replay" { "predicted " } else { "" };
    println!(
        "{what}without schemes: runtime {:.3}s, rss avg {}",
        t.baseline.runtime_s,
        fmt_mib(t.baseline.rss_avg_bytes)
    );
    println!(
        "{:>3}  {:<7} {:>10} {:>11} {:>11} {:>9} {:>9}",
        "#",
        "stage",
        t.field_name(),
        "runtime",
        "rss avg",
        "refaults",
        "score"
    );
    for s in &t.samples {
        print_sample_row(s);
    }
    if let Some(f) = &t.fit {
        println!(
            "fit: degree {} in u = 2 (x - {}) / {} - 1, rmse {:.4}, coefficients {}",
            f.degree,
            knob.format(f.x_lo),
            knob.format(f.x_hi - f.x_lo),
            f.rmse,
            f.coeffs
                .iter()
                .map(|c| format!("{c:.4}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let peaks: Vec<String> = t
            .peaks
            .iter()
            .map(|p| format!("{} ({:.4})", knob.format(p.x), p.y))
            .collect();
        println!(
            "peaks: {}",
            if peaks.is_empty() {
                "none".into()
            } else {
                peaks.join(", ")
            }
        );
    }
    if let Some(p) = &t.fit_peak {
        if let Some(m) = &p.measured {
            println!(
                "fit peak {}: predicted {:.4}, measured {:.4} (runtime {:.3}s, rss avg {}){}",
                p.display,
                p.predicted_score.unwrap_or(f64::NAN),
                m.score,
                m.metrics.runtime_s,
                fmt_mib(m.metrics.rss_avg_bytes),
                if m.sla_ok { "" } else { ", sla broken" }
            );
        }
    }
    if t.mode == "replay" {
        if let (Some(m), Some(b)) = (&t.chosen.measured, &t.confirm_baseline) {
            println!(
                "confirmed by a real run: runtime {:.3}s (without schemes {:.3}s), rss avg {} (without {}), score {:.4}{}",
                m.metrics.runtime_s,
                b.runtime_s,
                fmt_mib(m.metrics.rss_avg_bytes),
                fmt_mib(b.rss_avg_bytes),
                m.score,
                if m.sla_ok { "" } else { ", sla broken" }
            );
        } else {
            println!("no real workload to confirm on (give --sim SPEC)");
        }
    }
    println!(
        "chosen {} = {}: {}",
        t.knob,
        t.chosen.display,
        t.source_text()
    );
}
