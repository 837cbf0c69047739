//! `udamon eval`: the command line's side of udamon-eval (suite, progress,
//! the summary), and the simulator behind its simulated workloads.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use udamon_core::schemes::Damos;
use udamon_core::Attrs;
use udamon_eval::{Event, Machine, Options, Outcome, SimFigures, SimRunner, Store, Suite};
use udamon_session::sim::{self, Hooks, Prepared, Setup};

use crate::cli::EvalArgs;
use crate::output::{print_json, replace_whole, WholeFile};
use crate::UsageError;

fn eval_err(e: udamon_eval::Error) -> anyhow::Error {
    match e {
        udamon_eval::Error::Usage(m) => UsageError(m).into(),
        udamon_eval::Error::Other(m) => anyhow::anyhow!(m),
    }
}

/// Simulated workloads run on udamon's simulator, at default attributes;
/// repeat N uses the spec's seed + N.
struct Simulator;

impl SimRunner for Simulator {
    fn run(
        &mut self,
        spec: &Path,
        duration_us: Option<u64>,
        schemes: &[Damos],
        repeat: u32,
    ) -> Result<SimFigures, String> {
        let text = std::fs::read_to_string(spec).map_err(|e| format!("{}: {e}", spec.display()))?;
        let origin = spec.display().to_string();
        // The spec's seed (else 0) + the repeat.
        let mut p =
            Prepared::from_spec(&text, &origin, None, duration_us).map_err(|e| e.to_string())?;
        p.seed += u64::from(repeat);
        let setup = Setup {
            schemes: schemes.to_vec(),
            ..Setup::adaptive(Attrs::default())
        };
        let cpu0 = udamon_session::self_cpu_s();
        let s = sim::run_prepared(&p, &setup, false, None, Hooks::default())
            .map_err(|e| format!("{:#}", crate::sim_error(e)))?;
        let num = |k: &str| s.metrics.get(k).and_then(|v| v.as_f64());
        Ok(SimFigures {
            runtime_s: num("runtime_s").unwrap_or(s.simulated_s),
            rss_avg_kb: num("rss_avg_bytes").map(|b| b / 1024.0),
            rss_peak_kb: num("rss_peak_bytes").map(|b| (b / 1024.0) as u64),
            faults: num("faults").map(|f| f as u64),
            cpu_s: udamon_session::self_cpu_s() - cpu0,
        })
    }
}

pub fn run(a: EvalArgs) -> Result<()> {
    let mut suite = Suite::load(&a.suite).map_err(eval_err)?;
    if let Some(n) = a.repeats {
        if n == 0 || n > 1000 {
            return Err(UsageError(format!("--repeats {n}: give 1 to 1000")).into());
        }
        suite.repeats = n;
    }
    if a.report {
        let store = Store::read(&a.output).map_err(eval_err)?;
        if store.results.is_empty() {
            return Err(UsageError(format!(
                "{}: no saved results: run `udamon eval {}` first",
                a.output.display(),
                a.suite.display()
            ))
            .into());
        }
        return finish(&a, &suite, &store, false).map(drop);
    }
    let opts = Options {
        only_workloads: a.workloads.clone(),
        only_configs: a.configs.clone(),
        retry_failed: a.retry_failed,
    };
    // Everything asked is checked before the results directory is made.
    udamon_eval::check(&suite, &opts).map_err(eval_err)?;
    let mut store = Store::open(&a.output, &suite).map_err(eval_err)?;
    crate::stop::install();
    let udamon =
        std::env::current_exe().context("cannot find udamon's own binary for the monitors")?;
    let thp_path = a.root.join("sys/kernel/mm/transparent_hugepage/enabled");
    // Each run restores the THP setting it changed; a second signal exits
    // at once, so it restores the setting the evaluation started with.
    let touches_thp = suite.thp.is_some()
        || suite
            .configs
            .iter()
            .any(|(_, c)| matches!(c, udamon_eval::Config::Thp));
    if let Some(mode) = udamon_eval::run::thp_mode(&thp_path).filter(|_| touches_thp) {
        let p = thp_path.clone();
        crate::stop::on_force(Some(Box::new(move || {
            let _ = std::fs::write(&p, &mode);
        })));
    }
    let machine = Machine {
        udamon: &udamon,
        damo: udamon_eval::find_damo(&suite),
        root: Path::new("/"),
        thp_path: &thp_path,
        stop: &crate::stop::requested,
    };
    let t0 = Instant::now();
    let mut progress = |e: Event| match e {
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
    };
    let outcome = udamon_eval::evaluate(
        &suite,
        &mut store,
        &opts,
        &machine,
        &mut Simulator,
        &mut progress,
    )
    .map_err(eval_err)?;
    if let Outcome::Interrupted = outcome {
        eprintln!(
            "udamon: interrupted; the run under way was dropped, {} finished run(s) are saved in {}. Run the same command again to resume.",
            store.results.len(),
            a.output.display()
        );
        finish(&a, &suite, &store, true)?;
        std::process::exit(130);
    }
    let summary = finish(&a, &suite, &store, false)?;
    // A workload none of whose runs worked measured nothing: a failure,
    // said with its reasons (the summary above has the details).
    let failed: Vec<String> = summary
        .failed_workloads()
        .into_iter()
        .filter(|(w, _)| {
            opts.only_workloads.is_empty() || opts.only_workloads.iter().any(|x| x == w)
        })
        .map(|(w, why)| format!("{w} ({})", why.join("; ")))
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "every run of {} failed: {} (the results are in {}; --retry-failed runs them again)",
            if failed.len() == 1 {
                "a workload"
            } else {
                "some workloads"
            },
            failed.join(", "),
            a.output.display()
        );
    }
    Ok(())
}

fn elapsed(s: u64) -> String {
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Writes results.tsv and the charts (each whole), and prints the summary.
fn finish(
    a: &EvalArgs,
    suite: &Suite,
    store: &Store,
    partial: bool,
) -> Result<udamon_eval::Summary> {
    let summary = udamon_eval::summarise(suite, &store.results);
    let dir = &store.dir;
    let tsv = dir.join("results.tsv");
    // Made again from the results each time: no `.old` kept.
    replace_whole(&tsv, udamon_eval::table::tsv(suite, &summary).as_bytes())?;
    let mut charts = Vec::new();
    for (fig, file, title) in [
        ("perf", "perf.svg", "performance relative to orig"),
        ("rss.avg", "rss.svg", "average RSS relative to orig"),
    ] {
        let p = dir.join(file);
        let (out, f) = WholeFile::create(&p)?;
        drop(f);
        if udamon_eval::plot::bars(&summary, fig, title, out.path()).map_err(eval_err)? {
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
