//! `udamon eval`: workloads run under monitoring configurations (the seeds'
//! orig, rec, prec, thp, ethp, prcl, and damo doing the same), repeated and
//! interleaved, measured as DAMON's evaluation harness measures them, saved
//! as each run ends (so an interrupted evaluation resumes), and summarised
//! as overhead against `orig`.
//!
//! A command workload runs with `sh -c` on this machine (see [`run`]); a
//! simulated one runs through a [`SimRunner`]: [`Simulator`], on session's
//! sim driver, in `udamon eval` ([`harness`], the whole command but its
//! flags and its printing).

pub mod harness;
pub mod measure;
pub mod plot;
pub mod result;
pub mod run;
pub mod simulated;
pub mod suite;
pub mod table;
pub mod tuning;

use std::path::{Path, PathBuf};

use udamon_core::schemes::Damos;

pub use result::{plan, RunResult, Store, TuningInfo};
pub use simulated::Simulator;
pub use suite::{Config, Kind, Suite, Workload};
pub use table::{summarise, Summary};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: the suite, a flag, the results directory.
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Usage is bad input; anything else failed while running.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        match self {
            Error::Usage(_) => udamon_core::ErrorKind::Usage,
            Error::Other(_) => udamon_core::ErrorKind::Failure,
        }
    }
}

/// A simulated workload's figures for one run.
#[derive(Debug, Clone, Default)]
pub struct SimFigures {
    pub runtime_s: f64,
    pub rss_avg_kb: Option<f64>,
    pub rss_peak_kb: Option<u64>,
    pub faults: Option<u64>,
    /// The CPU time the simulation took (the monitor's and the model's).
    pub cpu_s: f64,
}

/// Runs a simulated workload with schemes (none for orig and rec); each
/// repeat uses another seed.
pub trait SimRunner {
    fn run(
        &mut self,
        spec: &Path,
        duration_us: Option<u64>,
        schemes: &[Damos],
        repeat: u32,
    ) -> Result<SimFigures, Error>;
}

/// Which runs to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only these workloads / configurations (all when empty).
    pub only_workloads: Vec<String>,
    pub only_configs: Vec<String>,
    /// Run again the runs whose saved result failed.
    pub retry_failed: bool,
}

/// What the caller hears about as the evaluation goes.
pub enum Event<'a> {
    /// Run `index` (1-based) of `total` starts.
    Start {
        index: usize,
        total: usize,
        workload: &'a str,
        config: &'a str,
        repeat: u32,
    },
    /// Run `done` of the `total` runs tuning `config` for `workload` (a
    /// `tuned-*` configuration's first run tunes it) ended.
    Tune {
        workload: &'a str,
        config: &'a str,
        done: usize,
        total: usize,
    },
    /// It ended and was saved.
    Done {
        index: usize,
        total: usize,
        result: &'a RunResult,
    },
}

pub enum Outcome {
    Finished,
    /// Stopped on request; the run under way was not saved.
    Interrupted,
}

/// The machine-facing parts of an evaluation.
pub struct Machine<'a> {
    pub udamon: &'a Path,
    pub damo: Option<PathBuf>,
    /// Where /proc is read ("/" but in tests).
    pub root: &'a Path,
    pub thp_path: &'a Path,
    pub stop: &'a dyn Fn() -> bool,
}

/// The scheme file a udamon monitor reads for a scheme configuration:
/// the user's own file, or the built-in text written under `dir/schemes/`.
pub fn scheme_file(dir: &Path, name: &str, config: &Config) -> Result<PathBuf, Error> {
    match config {
        Config::Schemes {
            file: suite::SchemeSource::File(p),
            ..
        } => Ok(p.clone()),
        Config::Schemes {
            file: suite::SchemeSource::Builtin(text),
            ..
        } => {
            let d = dir.join("schemes");
            std::fs::create_dir_all(&d)
                .map_err(|e| Error::Other(format!("{}: {e}", d.display())))?;
            let p = d.join(format!("{name}.txt"));
            write_whole(&p, text.as_bytes())?;
            Ok(p)
        }
        _ => Err(Error::Other(format!(
            "{name} is not a scheme configuration"
        ))),
    }
}

/// Writes `bytes` to `path` whole: into a temporary file beside it
/// (`.NAME.udamon-PID.tmp`, made new), renamed over `path` once complete,
/// so that a killed evaluation leaves the previous file or none, never a
/// part of one.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{name}.udamon-{}.tmp", std::process::id()));
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
    };
    // One there already is a dead process's (the name carries our pid).
    let written = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&tmp).and_then(|()| create())
        }
        r => r,
    }
    .and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_data()
    })
    .and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Other(format!("{}: {e}", path.display()))
    })
}

/// Checks what an evaluation is asked to do before anything is created:
/// the `--workload` and `--config` names, and the spec of every simulated
/// workload it runs (read and parsed: a missing or broken spec is bad
/// input, not a run that fails).
pub fn check(suite: &Suite, opts: &Options) -> Result<(), Error> {
    known(
        "--workload",
        "workload",
        &opts.only_workloads,
        &suite
            .workloads
            .iter()
            .map(|w| w.name.as_str())
            .collect::<Vec<_>>(),
    )?;
    known(
        "--config",
        "configuration",
        &opts.only_configs,
        &suite
            .configs
            .iter()
            .map(|(c, _)| c.as_str())
            .collect::<Vec<_>>(),
    )?;
    let wanted =
        |w: &Workload| opts.only_workloads.is_empty() || opts.only_workloads.contains(&w.name);
    for w in suite.workloads.iter().filter(|w| wanted(w)) {
        let Kind::Sim { spec, .. } = &w.kind else {
            continue;
        };
        let bad = |why: String| {
            Error::Usage(format!(
                "workload {:?}: sim {}: {why}",
                w.name,
                spec.display()
            ))
        };
        let text = std::fs::read_to_string(spec).map_err(|e| bad(e.to_string()))?;
        udamon_sim::Workload::from_toml(&text, &spec.display().to_string())
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(())
}

/// Finds damo: the suite's `damo`, else `damo` on PATH.
pub fn find_damo(suite: &Suite) -> Option<PathBuf> {
    if let Some(d) = &suite.damo {
        if d.components().count() > 1 {
            return d.is_file().then(|| d.clone());
        }
        return on_path(&d.to_string_lossy());
    }
    on_path("damo")
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Runs every planned run that has no saved result yet, saving each as it ends.
pub fn evaluate(
    suite: &Suite,
    store: &mut Store,
    opts: &Options,
    machine: &Machine,
    sim: &mut dyn SimRunner,
    progress: &mut dyn FnMut(Event),
) -> Result<Outcome, Error> {
    check(suite, opts)?;
    let wanted = |list: &[String], name: &str| list.is_empty() || list.iter().any(|x| x == name);
    let todo: Vec<(usize, usize, u32)> =
        plan(suite.workloads.len(), suite.configs.len(), suite.repeats)
            .into_iter()
            .filter(|&(w, c, r)| {
                let (wn, cn) = (&suite.workloads[w].name, &suite.configs[c].0);
                wanted(&opts.only_workloads, wn)
                    && wanted(&opts.only_configs, cn)
                    && match store.get(wn, cn, r) {
                        None => true,
                        Some(x) => opts.retry_failed && x.status == "failed",
                    }
            })
            .collect();
    let damo = machine.damo.clone();
    let ctx = run::Ctx {
        suite,
        dir: &store.dir.clone(),
        udamon: machine.udamon,
        damo: damo.as_deref(),
        stop: machine.stop,
        root: machine.root,
        thp_path: machine.thp_path,
    };
    let total = todo.len();
    // Tunings that did not end with schemes in this evaluation: the later
    // repeats end the same way instead of tuning again.
    let mut untuned: Vec<(usize, usize, RunResult)> = Vec::new();
    for (i, (w, c, r)) in todo.into_iter().enumerate() {
        if (machine.stop)() {
            return Ok(Outcome::Interrupted);
        }
        let wl = &suite.workloads[w];
        let (cname, config) = &suite.configs[c];
        progress(Event::Start {
            index: i + 1,
            total,
            workload: &wl.name,
            config: cname,
            repeat: r,
        });
        let mut tuned = None;
        let mut result = None;
        let config = match config {
            Config::Tuned { schemes } => {
                let known = untuned.iter().find(|x| x.0 == w && x.1 == c);
                let t = match known {
                    Some((_, _, res)) => Err(res.clone()),
                    None => tuned_schemes(&ctx, sim, suite, wl, cname, schemes, progress)?,
                };
                match t {
                    Ok(Some((t, schemes))) => {
                        let file = suite::SchemeSource::File(t.schemes_file.clone());
                        tuned = Some(t);
                        Config::Schemes { file, schemes }
                    }
                    Ok(None) => return Ok(Outcome::Interrupted),
                    Err(res) => {
                        if known.is_none() {
                            untuned.push((w, c, res.clone()));
                        }
                        let mut res = res;
                        res.repeat = r;
                        result = Some(res);
                        config.clone()
                    }
                }
            }
            _ => config.clone(),
        };
        let mut result = match (result, &wl.kind) {
            (Some(x), _) => x,
            (None, Kind::Command { .. }) => match run::run(&ctx, wl, cname, &config, r)? {
                Ok(x) => x,
                Err(run::Interrupted) => return Ok(Outcome::Interrupted),
            },
            (None, Kind::Sim { spec, duration_us }) => {
                sim_run(sim, spec, *duration_us, &wl.name, cname, &config, r)?
            }
        };
        result.tuning = tuned.map(|t| t.info());
        store.save(result)?;
        let saved = store.results.last().expect("just saved");
        progress(Event::Done {
            index: i + 1,
            total,
            result: saved,
        });
    }
    Ok(Outcome::Finished)
}

/// A `tuned-*` configuration's schemes for `wl`: saved by an earlier
/// tuning, else tuned now. `Ok(None)`: interrupted; `Err`: the run's
/// result when the tuning ended without schemes (failed or skipped).
#[allow(clippy::type_complexity)]
fn tuned_schemes(
    ctx: &run::Ctx,
    sim: &mut dyn SimRunner,
    suite: &Suite,
    wl: &Workload,
    cname: &str,
    schemes: &[Damos],
    progress: &mut dyn FnMut(Event),
) -> Result<Result<Option<(tuning::Tuning, Vec<Damos>)>, RunResult>, Error> {
    if let Some(x) = tuning::load(ctx.dir, &wl.name, cname)? {
        return Ok(Ok(Some(x)));
    }
    let mut tp = |done, total| {
        progress(Event::Tune {
            workload: &wl.name,
            config: cname,
            done,
            total,
        })
    };
    let mut res = RunResult::new(&wl.name, cname, 0);
    match tuning::tune(ctx, sim, suite, wl, cname, schemes, &mut tp)? {
        tuning::Outcome::Interrupted => Ok(Ok(None)),
        tuning::Outcome::Failed(why) => {
            res.fail(why);
            Ok(Err(res))
        }
        tuning::Outcome::Skipped(why) => {
            res.skip(why);
            Ok(Err(res))
        }
        tuning::Outcome::Tuned(t) => {
            let s = udamon_scheme_file::parse_file(&t.schemes_file)
                .map_err(|e| Error::Other(format!("{}: {e}", t.schemes_file.display())))?;
            Ok(Ok(Some((t, s))))
        }
    }
}

/// Refuses a `flag` value naming no `what` of the suite.
fn known(flag: &str, what: &str, asked: &[String], have: &[&str]) -> Result<(), Error> {
    match asked.iter().find(|a| !have.contains(&a.as_str())) {
        None => Ok(()),
        Some(a) => Err(Error::Usage(format!(
            "{flag} {a}: the suite has no such {what} (it has {})",
            have.join(", ")
        ))),
    }
}

fn sim_run(
    sim: &mut dyn SimRunner,
    spec: &Path,
    duration_us: Option<u64>,
    workload: &str,
    name: &str,
    config: &Config,
    repeat: u32,
) -> Result<RunResult, Error> {
    let mut r = RunResult::new(workload, name, repeat);
    let schemes: Vec<Damos> = match config {
        Config::Orig | Config::Rec => Vec::new(),
        Config::Thp => udamon_scheme_file::parse(suite::THP_SCHEME, "thp", None)
            .map_err(|e| Error::Other(format!("built-in thp scheme: {e}")))?,
        Config::Schemes { schemes, .. } | Config::Tuned { schemes } => schemes.clone(),
        Config::Prec => {
            r.skip("prec records a live machine's physical memory; a simulated workload has none");
            return Ok(r);
        }
        Config::DamoRec | Config::DamoSchemes { .. } => {
            r.skip("damo does not run simulated workloads");
            return Ok(r);
        }
    };
    match sim.run(spec, duration_us, &schemes, repeat) {
        Ok(f) => {
            r.runtime_s = Some(f.runtime_s);
            r.rss_avg_kb = f.rss_avg_kb;
            r.rss_peak_kb = f.rss_peak_kb;
            r.pgmajfault = f.faults;
            r.monitor_cpu_s = (!matches!(config, Config::Orig)).then_some(f.cpu_s);
        }
        Err(e) => r.fail(e.to_string()),
    }
    Ok(r)
}
