//! `udamon eval`: the command line's side of udamon-eval (its flags, the
//! signals, progress, the tables and charts written and the summary
//! printed); the evaluation itself is `udamon_eval::harness`.

use std::cell::Cell;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use udamon_cli::EvalArgs;
use udamon_eval::harness::{Ended, Evaluation, Hooks, Request};
use udamon_eval::{Event, Options};

use crate::output::{print_json, replace_whole, WholeFile};

pub fn run(a: EvalArgs) -> Result<()> {
    let req = Request {
        suite: a.suite.clone(),
        output: a.output.clone(),
        repeats: a.repeats,
        report_only: a.report,
        options: Options {
            only_workloads: a.workloads.clone(),
            only_configs: a.configs.clone(),
            retry_failed: a.retry_failed,
        },
        root: a.root.clone(),
    };
    let t0 = Cell::new(Instant::now());
    let mut starting = |restore: Option<(PathBuf, String)>| {
        crate::stop::install();
        // A second signal exits at once: the THP setting the evaluation
        // started with is written back then.
        if let Some((p, mode)) = restore {
            crate::stop::on_force(Some(Box::new(move || {
                let _ = std::fs::write(&p, &mode);
            })));
        }
        t0.set(Instant::now());
    };
    let mut progress = |e: Event| print_event(e, t0.get());
    let ev = udamon_eval::harness::eval(
        &req,
        Hooks {
            starting: &mut starting,
            stop: &crate::stop::requested,
            progress: &mut progress,
        },
    )?;
    match ev.ended {
        Ended::Report => finish(&a, &ev, false).map(drop),
        Ended::Interrupted => {
            eprintln!(
                "udamon: interrupted; the run under way was dropped, {} finished run(s) are saved in {}. Run the same command again to resume.",
                ev.store.results.len(),
                a.output.display()
            );
            finish(&a, &ev, true)?;
            std::process::exit(130);
        }
        Ended::Finished => {
            let summary = finish(&a, &ev, false)?;
            // The summary above has the details of a failure.
            ev.check_failures(&summary)?;
            Ok(())
        }
    }
}

/// One line on stderr per run started, tuning run done and run done;
/// times since `t0`.
fn print_event(e: Event, t0: Instant) {
    match e {
        Event::Start {
            index,
            total,
            workload,
            config,
            repeat,
        } => {
            eprintln!(
                "[{index}/{total} {}] {workload} · {config} · repeat {}",
                elapsed(t0.elapsed().as_secs()),
                repeat + 1
            );
        }
        Event::Tune {
            workload,
            config,
            done,
            total,
        } => {
            eprintln!(
                "    [{} tuning {config} for {workload}: run {done} of {total} done]",
                elapsed(t0.elapsed().as_secs())
            );
        }
        Event::Done { result: r, .. } => {
            let mut line = String::from("    ");
            match r.status.as_str() {
                "ok" => {
                    if let Some(t) = r.runtime_s {
                        line += &format!("{t:.2} s");
                    }
                    if let Some(m) = r.metric {
                        line += &format!(", metric {m}");
                    }
                    if let Some(rss) = r.rss_avg_kb {
                        line += &format!(
                            ", RSS avg {}",
                            udamon_report::fmt_bytes((rss * 1024.0) as u64)
                        );
                    }
                    if let Some(c) = r.monitor_cpu_s {
                        line += &format!(", monitor {c:.2} CPU-s");
                    }
                    if let Some(t) = &r.tuning {
                        line += &format!(", tuned {}", t.tuned);
                    }
                }
                s => line += &format!("{s}: {}", r.reason.as_deref().unwrap_or("")),
            }
            eprintln!("{line}");
            for w in &r.warnings {
                eprintln!("    warning: {w}");
            }
        }
    }
}

fn elapsed(s: u64) -> String {
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Writes results.tsv and the charts (each whole), and prints the summary.
fn finish(a: &EvalArgs, ev: &Evaluation, partial: bool) -> Result<udamon_eval::Summary> {
    let summary = ev.summary();
    let dir = &ev.store.dir;
    let tsv = dir.join("results.tsv");
    // Made again from the results each time: no `.old` kept.
    replace_whole(
        &tsv,
        udamon_eval::table::tsv(&ev.suite, &summary).as_bytes(),
    )?;
    let mut charts = Vec::new();
    for (fig, file, title) in udamon_eval::plot::CHARTS {
        let p = dir.join(file);
        let (out, f) = WholeFile::create(&p)?;
        drop(f);
        if udamon_eval::plot::bars(&summary, fig, title, out.path())? {
            out.replace()?;
            charts.push(p);
        }
    }
    if a.json {
        print_json(&summary)?;
        return Ok(summary);
    }
    if partial {
        return Ok(summary);
    }
    print!("{}", udamon_eval::table::render(&summary));
    let count = |f: fn(&udamon_eval::table::ConfigSummary) -> u32| -> u32 {
        summary
            .workloads
            .iter()
            .flat_map(|w| &w.configs)
            .map(f)
            .sum()
    };
    println!(
        "{} of {} runs done ({} ok, {} failed, {} skipped); overheads are (mean / orig's mean - 1); ± is one standard deviation of the runs",
        summary.done_runs,
        summary.planned_runs,
        count(|c| c.ok),
        count(|c| c.failed),
        count(|c| c.skipped)
    );
    println!("wrote {}", tsv.display());
    for c in charts {
        println!("wrote {}", c.display());
    }
    Ok(summary)
}
