//! Workload runners: "run the workload with these schemes, measure it".
//!
//! [`Runner`] is the seam: the simulator ([`SimRunner`]) and the replay of a
//! record (a `SimRunner` over the synthetic workload) implement it today; a
//! command or a pid runner (start the program, or attach to it, with the
//! schemes installed, and read its runtime and RSS) slots in later without
//! touching the tuner.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use udamon_core::schemes::Damos;
use udamon_core::{Attrs, Snapshot};
use udamon_session::sim::{self, Hooks, Prepared, Setup, SimError};
use udamon_sim::{Model, Workload};

use crate::error::{Error, Result};
use crate::score::Metrics;

/// Runs a workload with schemes and measures it.
pub trait Runner {
    /// One run with `schemes` installed (an empty slice: the scheme-less
    /// run the scores are relative to).
    fn run(&mut self, schemes: &[Damos]) -> Result<Metrics>;

    /// A short description for reports: "sim tune-cold.toml, seed 11".
    fn describe(&self) -> String;

    /// An independent copy for running several candidates at once, when
    /// the workload allows it (a simulation does; a live process does not).
    fn fork(&self) -> Option<Box<dyn Runner + Send>> {
        None
    }
}

/// A simulated workload under the adaptive monitor. Every run uses the same
/// seed (common random numbers: candidates differ by their schemes only).
/// Runs go through the simulated runs' driver (`udamon_session::sim`).
#[derive(Clone)]
pub struct SimRunner {
    prepared: Prepared,
    attrs: Attrs,
}

impl SimRunner {
    pub fn new(workload: Workload, attrs: Attrs, seed: u64, label: &str) -> SimRunner {
        SimRunner {
            prepared: Prepared::from_workload(workload, seed, label),
            attrs,
        }
    }

    /// From a spec's text. `seed` and `duration_us` override the spec's.
    pub fn from_spec(
        text: &str,
        origin: &str,
        seed: Option<u64>,
        duration_us: Option<u64>,
        attrs: Attrs,
    ) -> Result<SimRunner> {
        let mut prepared = Prepared::from_spec(text, origin, seed, duration_us)
            .map_err(|e| Error::Usage(e.to_string()))?;
        prepared.name = format!("sim {origin}");
        Ok(SimRunner { prepared, attrs })
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.prepared.model
    }

    pub fn seed(&self) -> u64 {
        self.prepared.seed
    }

    pub fn attrs(&self) -> Attrs {
        self.attrs
    }

    /// One run, keeping its snapshots (what a record of it would hold).
    pub fn run_keep(&mut self, schemes: &[Damos]) -> Result<(Metrics, Vec<Snapshot>)> {
        self.run_inner(schemes, true)
    }

    fn run_inner(&self, schemes: &[Damos], keep: bool) -> Result<(Metrics, Vec<Snapshot>)> {
        let setup = Setup {
            schemes: schemes.to_vec(),
            ..Setup::adaptive(self.attrs)
        };
        let mut kept = Vec::new();
        let mut push = |s: Snapshot| kept.push(s);
        let hooks = Hooks {
            snapshot: keep.then_some(&mut push as &mut dyn FnMut(Snapshot)),
            ..Hooks::default()
        };
        let label = &self.prepared.name;
        let s =
            sim::run_prepared(&self.prepared, &setup, false, None, hooks).map_err(|e| match e {
                SimError::Monitor(err) => Error::Run(format!("{label}: {err}")),
                e => Error::Run(e.to_string()),
            })?;
        let machine = s
            .machine
            .ok_or_else(|| Error::Run(format!("{label}: the run measured no machine")))?;
        Ok((Metrics::from(&machine), kept))
    }
}

impl Runner for SimRunner {
    fn run(&mut self, schemes: &[Damos]) -> Result<Metrics> {
        Ok(self.run_inner(schemes, false)?.0)
    }

    fn describe(&self) -> String {
        format!("{}, seed {}", self.prepared.name, self.prepared.seed)
    }

    fn fork(&self) -> Option<Box<dyn Runner + Send>> {
        Some(Box::new(self.clone()))
    }
}

/// Runs every scheme set of `jobs`, on up to `threads` forks of the runner
/// when it can fork (else one after another); results in `jobs` order.
/// `done` is called on the calling thread after each finished run.
pub fn run_all(
    runner: &mut dyn Runner,
    jobs: &[Vec<Damos>],
    threads: usize,
    done: &mut dyn FnMut(usize),
) -> Result<Vec<Metrics>> {
    let forks: Vec<Box<dyn Runner + Send>> = if threads > 1 && jobs.len() > 1 {
        (0..threads.min(jobs.len()))
            .map_while(|_| runner.fork())
            .collect()
    } else {
        Vec::new()
    };
    if forks.len() < 2 {
        let mut out = Vec::with_capacity(jobs.len());
        for (i, j) in jobs.iter().enumerate() {
            out.push(runner.run(j)?);
            done(i + 1);
        }
        return Ok(out);
    }
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Result<Metrics>)>();
    let mut results: Vec<Option<Result<Metrics>>> = (0..jobs.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        for mut f in forks {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs.len() {
                    break;
                }
                let r = f.run(&jobs[i]);
                let failed = r.is_err();
                if tx.send((i, r)).is_err() || failed {
                    // Stop handing out work after a failure.
                    next.store(jobs.len(), Ordering::Relaxed);
                    break;
                }
            });
        }
        drop(tx);
        let mut n = 0;
        for (i, r) in rx {
            results[i] = Some(r);
            n += 1;
            done(n);
        }
    });
    let mut out = Vec::with_capacity(jobs.len());
    let mut skipped = false;
    for r in results {
        match r {
            Some(Ok(m)) => out.push(m),
            Some(Err(e)) => return Err(e),
            None => skipped = true,
        }
    }
    if skipped {
        return Err(Error::Run("a run was skipped".into()));
    }
    Ok(out)
}

/// Threads to use for independent runs: the machine's parallelism.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
