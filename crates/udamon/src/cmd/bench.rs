//! `udamon bench`: the command line's side of udamon-bench (the parts
//! asked for, their tables on stdout as they are measured, a progress bar
//! over each simulated run, the figures as JSON with `--json`).

use anyhow::{Context, Result};
use udamon_bench::{Options, Sink};
use udamon_cli::BenchArgs;

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
    let report = udamon_bench::run(&opts, &mut sink)?;
    if a.json {
        print_json(&report)?;
    }
    Ok(())
}
