//! `udamon bench`: the command line's side of udamon-bench (the parts
//! asked for, their tables on stdout as they are measured, a progress bar
//! over each simulated run, the figures as JSON with `--json`).

use anyhow::{Context, Result};
use udamon_bench::{Options, Sink};
use udamon_session::sim::SimError;

use crate::cli::BenchArgs;
use crate::output::{print_json, Progress};

/// The bench's lines: tables on stdout, notes on stderr, nothing of them
/// with `--json` (which prints the figures at the end instead); the
/// progress bar of a simulated run either way.
struct Terminal {
    json: bool,
    bar: Option<Progress>,
}

impl Sink for Terminal {
    fn line(&mut self, text: &str) {
        if !self.json {
            println!("{text}");
        }
    }

    fn note(&mut self, text: &str) {
        if !self.json {
            eprintln!("udamon: {text}");
        }
    }

    fn progress(&mut self, done: u64, total: u64) {
        let bar = self
            .bar
            .get_or_insert_with(|| Progress::new(0, "recording"));
        bar.set_len(total);
        bar.set(done);
    }

    fn progress_end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
}

/// A bench error as the rest of the binary has its errors: a bad part is
/// a usage error, a simulated run's or the tuner's error maps as `record
/// --sim`'s and `tune`'s do, another crate's error keeps its type (and so
/// its exit code).
fn bench_err(e: udamon_bench::Error) -> anyhow::Error {
    match e {
        udamon_bench::Error::Usage(m) => crate::UsageError(m).into(),
        udamon_bench::Error::Inner(cause) => match cause.downcast::<SimError>() {
            Ok(e) => crate::sim_error(*e),
            Err(cause) => match cause.downcast::<udamon_tune::Error>() {
                Ok(e) => crate::tune_error(*e),
                Err(cause) => anyhow::anyhow!(cause),
            },
        },
        e => e.into(),
    }
}

pub fn run(a: BenchArgs) -> Result<()> {
    let opts = Options {
        quick: a.quick,
        only: a.only,
        udamon: std::env::current_exe().context("cannot find the udamon executable")?,
    };
    let mut sink = Terminal {
        json: a.json,
        bar: None,
    };
    let report = udamon_bench::run(&opts, &mut sink).map_err(bench_err)?;
    if a.json {
        print_json(&report)?;
    }
    Ok(())
}
