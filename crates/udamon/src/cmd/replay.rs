//! `udamon replay`: what-if analysis. A record's snapshots become a
//! simulated workload (docs/tuning.md), and schemes run on it predict the
//! resident set, faults and runtime they would give, without rerunning the
//! recorded workload (`udamon_tune::whatif`); this is its command line.

use anyhow::Result;
use udamon_cli::ReplayArgs;
use udamon_tune::plan::Spec;
use udamon_tune::whatif::{predict, Check, Prediction, WhatIf};
use udamon_tune::Metrics;

use crate::inputs::{open, read_schemes, run_duration};
use crate::output::print_json;

pub fn run(a: ReplayArgs) -> Result<()> {
    // The attribute flags are checked as `record` checks them, whether or
    // not a run uses them.
    let attrs = a.attrs.attrs()?;
    let schemes = read_schemes(&a.schemes)?;
    let score = a.score.options().build()?;
    // A damaged record replays its readable part: `open` says so.
    let reader = open(&a.record)?;
    let check = if a.check {
        Some(Check {
            spec: a.sim.clone().map(Spec::File),
            duration_us: run_duration(a.duration.as_deref())?,
            attrs,
        })
    } else {
        None
    };
    let report = predict(&WhatIf {
        record: &reader,
        name: &a.record.display().to_string(),
        schemes: &schemes,
        score: &score,
        seed: a.seed,
        check,
    })?;
    if a.json {
        return print_json(&report);
    }
    print_report(&report);
    Ok(())
}

/// A printed figure: label, getter, formatter.
type Row = (&'static str, fn(&Metrics) -> f64, fn(f64) -> String);

fn print_report(r: &Prediction) {
    let st = &r.replay;
    println!(
        "replay of {}: {} snapshots as {} phases, {} access ranges over {} cells of {} ({:.1}s)",
        r.record,
        st.snapshots,
        st.phases,
        st.accesses,
        st.cells,
        udamon_report::fmt_bytes(st.cell_bytes),
        st.duration_us as f64 / 1e6
    );
    let p = &r.predicted;
    let rows: [Row; 4] = [
        (
            "rss average",
            |m| m.rss_avg_bytes,
            |v| udamon_report::fmt_bytes(v.max(0.0) as u64),
        ),
        (
            "rss peak",
            |m| m.rss_peak_bytes,
            |v| udamon_report::fmt_bytes(v.max(0.0) as u64),
        ),
        ("runtime", |m| m.runtime_s, |v| format!("{v:.3}s")),
        ("faults", |m| m.faults, |v| format!("{}", v as u64)),
    ];
    let change = |w: f64, b: f64| {
        if b != 0.0 {
            format!("{:+.1}%", (w / b - 1.0) * 100.0)
        } else {
            "-".into()
        }
    };
    match &r.real {
        None => {
            println!(
                "{:<12} {:>13} {:>13} {:>8}",
                "predicted", "without", "with schemes", "change"
            );
            for (label, get, fmt) in rows {
                let (b, w) = (get(&p.without_schemes), get(&p.with_schemes));
                println!(
                    "{label:<12} {:>13} {:>13} {:>8}",
                    fmt(b),
                    fmt(w),
                    change(w, b)
                );
            }
            println!(
                "predicted score {:.4}{}",
                p.score,
                if p.sla_ok { "" } else { " (sla broken)" }
            );
        }
        Some(q) => {
            println!(
                "{:<12} {:>13} {:>13} {:>8} | {:>13} {:>13} {:>8}",
                "", "predicted", "with schemes", "change", "real", "with schemes", "change"
            );
            for (label, get, fmt) in rows {
                let (b, w) = (get(&p.without_schemes), get(&p.with_schemes));
                let (rb, rw) = (get(&q.without_schemes), get(&q.with_schemes));
                println!(
                    "{label:<12} {:>13} {:>13} {:>8} | {:>13} {:>13} {:>8}",
                    fmt(b),
                    fmt(w),
                    change(w, b),
                    fmt(rb),
                    fmt(rw),
                    change(rw, rb)
                );
            }
            println!(
                "score: predicted {:.4}{}, real {:.4}{} (error {:+.4})",
                p.score,
                if p.sla_ok { "" } else { " (sla broken)" },
                q.score,
                if q.sla_ok { "" } else { " (sla broken)" },
                p.score - q.score
            );
        }
    }
}
