//! The whole of `udamon eval` but its flags and its printing: the suite
//! loaded, then either the saved results read (`--report`) or the runs
//! made, with simulated workloads on [`Simulator`]. The caller hears of the
//! start, the progress and the end through [`Hooks`], and writes and prints
//! the tables and charts of the [`Evaluation`] it gets back.

use std::path::{Path, PathBuf};

use crate::simulated::Simulator;
use crate::{
    check, evaluate, find_damo, run, summarise, Config, Error, Event, Machine, Options, Outcome,
    Store, Suite, Summary,
};

/// What `udamon eval` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The suite file.
    pub suite: PathBuf,
    /// The results directory.
    pub output: PathBuf,
    /// Repeats instead of the suite's (1 to 1000).
    pub repeats: Option<u32>,
    /// Summarise the saved results only; run nothing.
    pub report_only: bool,
    pub options: Options,
    /// Where the THP setting is read and written under ("/" but in tests).
    pub root: PathBuf,
}

/// The caller's side of an evaluation.
pub struct Hooks<'a> {
    /// Called once the results directory exists, before the first run:
    /// from then on `stop` is asked. With the THP setting to write back
    /// (the file and its value) when the caller exits at once, when a
    /// configuration changes it.
    pub starting: &'a mut dyn FnMut(Option<(PathBuf, String)>),
    /// Whether to stop (the run under way is dropped).
    pub stop: &'a dyn Fn() -> bool,
    pub progress: &'a mut dyn FnMut(Event),
}

/// How an evaluation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Only the saved results were read (`--report`).
    Report,
    /// Every run asked for has a result.
    Finished,
    /// Stopped on request; the run under way was not saved.
    Interrupted,
}

/// An evaluation's suite and results, once it ended.
pub struct Evaluation {
    pub suite: Suite,
    pub store: Store,
    pub ended: Ended,
    only_workloads: Vec<String>,
    output: PathBuf,
}

/// Runs `udamon eval` as `req` asks: loads the suite, then reads the saved
/// results (`--report`: there must be some), or checks everything asked
/// before it makes the results directory and makes every run that has no
/// result yet, each saved as it ends.
pub fn eval(req: &Request, hooks: Hooks) -> Result<Evaluation, Error> {
    let mut suite = Suite::load(&req.suite)?;
    if let Some(n) = req.repeats {
        if n == 0 || n > 1000 {
            return Err(Error::Usage(format!("--repeats {n}: give 1 to 1000")));
        }
        suite.repeats = n;
    }
    let done = |suite: Suite, store: Store, ended: Ended| Evaluation {
        suite,
        store,
        ended,
        only_workloads: req.options.only_workloads.clone(),
        output: req.output.clone(),
    };
    if req.report_only {
        let store = Store::read(&req.output)?;
        if store.results.is_empty() {
            return Err(Error::Usage(format!(
                "{}: no saved results: run `udamon eval {}` first",
                req.output.display(),
                req.suite.display()
            )));
        }
        return Ok(done(suite, store, Ended::Report));
    }
    // Everything asked is checked before the results directory is made.
    check(&suite, &req.options)?;
    let mut store = Store::open(&req.output, &suite)?;
    let udamon = std::env::current_exe().map_err(|e| {
        Error::Other(format!(
            "cannot find udamon's own binary for the monitors: {e}"
        ))
    })?;
    let thp_path = req.root.join("sys/kernel/mm/transparent_hugepage/enabled");
    // Each run restores the THP setting it changed; a caller that exits at
    // once (a second signal) restores the setting the evaluation started with.
    let touches_thp =
        suite.thp.is_some() || suite.configs.iter().any(|(_, c)| matches!(c, Config::Thp));
    let restore = run::thp_mode(&thp_path)
        .filter(|_| touches_thp)
        .map(|mode| (thp_path.clone(), mode));
    (hooks.starting)(restore);
    let machine = Machine {
        udamon: &udamon,
        damo: find_damo(&suite),
        root: Path::new("/"),
        thp_path: &thp_path,
        stop: hooks.stop,
    };
    let outcome = evaluate(
        &suite,
        &mut store,
        &req.options,
        &machine,
        &mut Simulator,
        hooks.progress,
    )?;
    let ended = match outcome {
        Outcome::Finished => Ended::Finished,
        Outcome::Interrupted => Ended::Interrupted,
    };
    Ok(done(suite, store, ended))
}

impl Evaluation {
    /// The summary of the latest result of every planned run.
    pub fn summary(&self) -> Summary {
        summarise(&self.suite, &self.store.results)
    }

    /// Refuses an evaluation in which a workload asked for (every one when
    /// none was named) measured nothing, none of its runs having worked:
    /// a failure, said with its reasons.
    pub fn check_failures(&self, summary: &Summary) -> Result<(), Error> {
        let only = &self.only_workloads;
        let failed: Vec<String> = summary
            .failed_workloads()
            .into_iter()
            .filter(|(w, _)| only.is_empty() || only.iter().any(|x| x == w))
            .map(|(w, why)| format!("{w} ({})", why.join("; ")))
            .collect();
        if failed.is_empty() {
            return Ok(());
        }
        Err(Error::Other(format!(
            "every run of {} failed: {} (the results are in {}; --retry-failed runs them again)",
            if failed.len() == 1 {
                "a workload"
            } else {
                "some workloads"
            },
            failed.join(", "),
            self.output.display()
        )))
    }
}
