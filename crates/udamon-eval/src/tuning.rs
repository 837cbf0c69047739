//! `tuned-*` configurations: before a workload's first tuned run, the
//! suite's `[tune]` knob is tuned on the workload's own runs by the DAOS
//! runtime (`udamon-tune`: a run without schemes, sampled values, a
//! polynomial fit, its peak confirmed by one more run, Listing 2's score),
//! and the tuned schemes are kept in `DIR/tuned/` for every repeat.
//!
//! The runs without schemes are `orig` runs (nothing monitors), as the
//! paper's `orig_runtime` and `orig_rss` are. A workload's performance is
//! its runtime, or its metric: a rate (higher is better) counts as its
//! inverse, the time per operation, so Listing 2's slowdown and SLA read
//! the same. Simulated workloads tune on their first repeat's seed (common
//! random numbers: candidates differ by their schemes only).
//!
//! An interrupted tuning is not saved: it starts over when the evaluation
//! resumes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use udamon_core::schemes::Damos;
use udamon_tune::{Metrics, Runner, ScoreFn, TuneConfig};

use crate::result::{RunResult, TuningInfo};
use crate::run::{self, Ctx};
use crate::suite::{Config, Kind, SchemeSource, Suite, Workload};
use crate::{Error, SimRunner};

/// A workload's tuned schemes, as the measured runs use them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tuning {
    pub workload: String,
    pub config: String,
    /// The knob (`min_age`) and its chosen value, with its unit (`3s`).
    pub knob: String,
    pub value: f64,
    pub display: String,
    /// Wall time the tuning took, and its runs (the scheme-less one and
    /// the confirming one included).
    pub tuning_s: f64,
    pub runs: u32,
    /// Whether the chosen value's run kept Listing 2's SLA (no more than
    /// 10% slower than the scheme-less runs); false when no run did.
    pub sla_met: bool,
    /// The tuned schemes (TOML, as `udamon apply` reads), next to this file.
    pub schemes_file: PathBuf,
    /// What `udamon tune --json` prints for the same tuning.
    pub tune: serde_json::Value,
    /// The tuning's own runs, measured as every run is.
    pub run_results: Vec<RunResult>,
}

/// Why a tuning did not end with schemes.
pub enum Outcome {
    Tuned(Tuning),
    /// A run failed, or the tuner refused; the tuned runs fail with this.
    Failed(String),
    /// A run was skipped (the machine cannot run the monitor); so are the
    /// tuned runs, with this reason.
    Skipped(String),
    /// The user asked to stop.
    Interrupted,
}

impl Tuning {
    /// What each tuned run carries.
    pub fn info(&self) -> TuningInfo {
        TuningInfo {
            tuned: format!("{} = {}", self.knob, self.display),
            tuning_s: self.tuning_s,
            tuning_runs: self.runs,
            tuning_sla_met: Some(self.sla_met),
        }
    }
}

fn json_path(dir: &Path, workload: &str, config: &str) -> PathBuf {
    dir.join("tuned").join(format!("{workload}.{config}.json"))
}

/// The saved tuning of `workload` under `config`, with its schemes;
/// `None` when there is none. A damaged one is bad input (it is not tuned
/// again over it unasked).
pub fn load(
    dir: &Path,
    workload: &str,
    config: &str,
) -> Result<Option<(Tuning, Vec<Damos>)>, Error> {
    let p = json_path(dir, workload, config);
    let damaged = |why: String| {
        Error::Usage(format!(
            "{} is damaged ({why}): remove it to tune {config} for {workload} again",
            p.display()
        ))
    };
    let text = match std::fs::read(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {
            return Err(damaged("a directory, not a file".into()))
        }
        Err(e) => return Err(Error::Other(format!("{}: {e}", p.display()))),
    };
    let t: Tuning = serde_json::from_slice(&text).map_err(|e| damaged(e.to_string()))?;
    let schemes = udamon_scheme_file::parse_file(&t.schemes_file)
        .map_err(|e| damaged(format!("its schemes file: {e}")))?;
    Ok(Some((t, schemes)))
}

/// The performance figure Listing 2 calls runtime.
fn perf(w: &Workload, r: &RunResult) -> Option<f64> {
    match &w.kind {
        Kind::Command {
            metric: Some(m), ..
        } => {
            let v = r.metric?;
            if m.higher_is_better {
                (v > 0.0).then(|| 1.0 / v)
            } else {
                Some(v)
            }
        }
        _ => r.runtime_s,
    }
}

fn metrics(w: &Workload, r: &RunResult) -> Result<Metrics, udamon_tune::Error> {
    let missing = |what: &str| {
        udamon_tune::Error::Run(format!(
            "tuning run {} has no {what}: the tuner needs it",
            r.id()
        ))
    };
    Ok(Metrics {
        runtime_s: perf(w, r).ok_or_else(|| missing("performance figure"))?,
        rss_avg_bytes: r.rss_avg_kb.ok_or_else(|| missing("RSS"))? * 1024.0,
        rss_peak_bytes: r.rss_peak_kb.unwrap_or(0) as f64 * 1024.0,
        faults: r.pgmajfault.unwrap_or(0) as f64,
        ..Metrics::default()
    })
}

/// Runs the workload for the tuner, each run measured as `run::run` measures
/// every run, and kept.
struct Live<'a, 'b> {
    ctx: &'a Ctx<'b>,
    sim: &'a mut dyn SimRunner,
    w: &'a Workload,
    config: &'a str,
    runs: Vec<RunResult>,
    baseline_runs: usize,
    interrupted: bool,
    skipped: Option<String>,
    progress: &'a mut dyn FnMut(usize),
}

impl Runner for Live<'_, '_> {
    fn run(&mut self, schemes: &[Damos]) -> udamon_tune::Result<Metrics> {
        if !schemes.is_empty() || self.baseline_runs <= 1 {
            return self.run_once(schemes);
        }
        let mut ms = Vec::new();
        for _ in 0..self.baseline_runs {
            ms.push(self.run_once(schemes)?);
        }
        Ok(median(&ms))
    }

    fn describe(&self) -> String {
        format!("udamon eval workload {}", self.w.name)
    }
}

/// Each figure's median over `ms` (the lower middle of an even count).
fn median(ms: &[Metrics]) -> Metrics {
    let mid = |f: fn(&Metrics) -> f64| {
        let mut v: Vec<f64> = ms.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    };
    Metrics {
        runtime_s: mid(|m| m.runtime_s),
        rss_avg_bytes: mid(|m| m.rss_avg_bytes),
        rss_peak_bytes: mid(|m| m.rss_peak_bytes),
        faults: mid(|m| m.faults),
        ..Metrics::default()
    }
}

impl Live<'_, '_> {
    fn run_once(&mut self, schemes: &[Damos]) -> udamon_tune::Result<Metrics> {
        let n = self.runs.len() + 1;
        let name = format!("{}.tuning{n}", self.config);
        let r = match &self.w.kind {
            Kind::Command { .. } => {
                let config = if schemes.is_empty() {
                    Config::Orig
                } else {
                    let d = self.ctx.dir.join("tuned");
                    let p = d.join(format!("{}.{name}.toml", self.w.name));
                    std::fs::create_dir_all(&d)
                        .map_err(|e| Error::Other(format!("{}: {e}", d.display())))
                        .and_then(|()| {
                            crate::write_whole(&p, udamon_scheme_file::to_toml(schemes).as_bytes())
                        })
                        .map_err(|e| udamon_tune::Error::Run(e.to_string()))?;
                    Config::Schemes {
                        file: SchemeSource::File(p),
                        schemes: schemes.to_vec(),
                    }
                };
                match run::run(self.ctx, self.w, &name, &config, 0)
                    .map_err(|e| udamon_tune::Error::Run(e.to_string()))?
                {
                    Ok(r) => r,
                    Err(run::Interrupted) => {
                        self.interrupted = true;
                        return Err(udamon_tune::Error::Run("interrupted".into()));
                    }
                }
            }
            Kind::Sim { spec, duration_us } => {
                let cfg = if schemes.is_empty() {
                    Config::Orig
                } else {
                    Config::Tuned {
                        schemes: schemes.to_vec(),
                    }
                };
                crate::sim_run(self.sim, spec, *duration_us, &self.w.name, &name, &cfg, 0)
                    .map_err(|e| udamon_tune::Error::Run(e.to_string()))?
            }
        };
        if r.status == "skipped" {
            self.skipped = r.reason.clone();
        }
        let out = if r.ok() {
            metrics(self.w, &r)
        } else {
            Err(udamon_tune::Error::Run(format!(
                "tuning run {} {}: {}",
                r.id(),
                r.status,
                r.reason.as_deref().unwrap_or("")
            )))
        };
        self.runs.push(r);
        (self.progress)(self.runs.len());
        out
    }
}

/// Tunes `schemes` for `w` under the config named `config` and saves the
/// result; `progress(done, total)` after each tuning run.
pub fn tune(
    ctx: &Ctx,
    sim: &mut dyn SimRunner,
    suite: &Suite,
    w: &Workload,
    config: &str,
    schemes: &[Damos],
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Outcome, Error> {
    let t = &suite.tune;
    let cfg = TuneConfig {
        knob: t.knob,
        domain: t.domain,
        samples: t.samples,
        seed: t.seed,
        trust_fit: false,
    };
    let total = udamon_tune::Sampler::new(t.domain, t.samples, t.seed).plan();
    let total = total.0 + total.1 + 1 + t.baseline_runs;
    let t0 = Instant::now();
    let mut report = |n: usize| progress(n, total);
    let mut live = Live {
        ctx,
        sim,
        w,
        config,
        runs: Vec::new(),
        baseline_runs: t.baseline_runs,
        interrupted: false,
        skipped: None,
        progress: &mut report,
    };
    let tuned = udamon_tune::tune(
        schemes,
        &cfg,
        &mut live,
        &mut ScoreFn::default(),
        &mut |_, _| {},
    );
    if live.interrupted {
        return Ok(Outcome::Interrupted);
    }
    if let Some(why) = live.skipped {
        return Ok(Outcome::Skipped(why));
    }
    let runs = std::mem::take(&mut live.runs);
    let tuned = match tuned {
        Ok(x) => x,
        Err(e) => return Ok(Outcome::Failed(format!("tuning {config} failed: {e}"))),
    };
    let dir = ctx.dir.join("tuned");
    let io = |p: &Path, e: std::io::Error| Error::Other(format!("{}: {e}", p.display()));
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let schemes_file = dir.join(format!("{}.{config}.toml", w.name));
    crate::write_whole(
        &schemes_file,
        udamon_scheme_file::to_toml(&tuned.schemes).as_bytes(),
    )?;
    let tuning = Tuning {
        workload: w.name.clone(),
        config: config.to_string(),
        knob: tuned.knob.clone(),
        value: tuned.chosen.value,
        display: tuned.chosen.display.clone(),
        tuning_s: t0.elapsed().as_secs_f64(),
        runs: runs.len() as u32,
        sla_met: tuned.chosen.measured.as_ref().is_some_and(|m| m.sla_ok),
        schemes_file,
        tune: serde_json::to_value(&tuned).map_err(|e| Error::Other(e.to_string()))?,
        run_results: runs,
    };
    let p = json_path(ctx.dir, &w.name, config);
    let text = serde_json::to_string_pretty(&tuning).map_err(|e| Error::Other(e.to_string()))?;
    // Written whole: a tuning file is there complete or not at all.
    crate::write_whole(&p, (text + "\n").as_bytes())?;
    Ok(Outcome::Tuned(tuning))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_counts_as_time_per_operation_and_a_time_as_itself() {
        let s = Suite::parse(
            Path::new("s.toml"),
            "configs = [\"tuned-prcl\"]\n[[workload]]\nname = \"r\"\nrun = \"x\"\nmetric = { regex = \"([0-9.]+) ops/s\", name = \"ops/s\" }\n[[workload]]\nname = \"t\"\nrun = \"x\"\nmetric = { regex = \"([0-9.]+) s\", name = \"s\", higher_is_better = false }\n[[workload]]\nname = \"w\"\nrun = \"x\"\n",
        )
        .unwrap();
        let mut r = RunResult::new("r", "tuned-prcl", 0);
        r.metric = Some(2000.0);
        r.runtime_s = Some(7.0);
        r.rss_avg_kb = Some(4.0);
        assert_eq!(
            metrics(&s.workloads[0], &r).unwrap().runtime_s,
            1.0 / 2000.0
        );
        assert_eq!(metrics(&s.workloads[1], &r).unwrap().runtime_s, 2000.0);
        assert_eq!(metrics(&s.workloads[2], &r).unwrap().runtime_s, 7.0);
        assert_eq!(metrics(&s.workloads[2], &r).unwrap().rss_avg_bytes, 4096.0);
        r.rss_avg_kb = None;
        let e = metrics(&s.workloads[2], &r).unwrap_err().to_string();
        assert!(e.contains("has no RSS"), "{e}");
    }

    #[test]
    fn the_baseline_is_each_figures_median() {
        let m = |t: f64, rss: f64| Metrics {
            runtime_s: t,
            rss_avg_bytes: rss,
            ..Metrics::default()
        };
        let x = median(&[m(53.7, 90.0), m(39.0, 88.0), m(41.0, 91.0)]);
        assert_eq!((x.runtime_s, x.rss_avg_bytes), (41.0, 90.0));
        let x = median(&[m(2.0, 5.0), m(1.0, 6.0)]);
        assert_eq!((x.runtime_s, x.rss_avg_bytes), (1.0, 5.0));
    }
}
