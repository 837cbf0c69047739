//! One module per subcommand.

mod apply;
mod bench;
mod demo;
mod features;
mod import;
pub mod live;
mod record;
pub mod replay;
mod report;
pub mod tune;

use std::io::Write;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Record(a) => record::run(a),
        Command::Apply(a) => apply::run(a),
        Command::Schemes(c) => apply::schemes(c),
        Command::Report(r) => report::run(r),
        Command::Features(a) => features::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Tune(a) => tune::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Import(a) => import::run(a),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "udamon", &mut std::io::stdout());
            Ok(())
        }
        Command::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut out)?;
            std::io::stdout().write_all(&out)?;
            Ok(())
        }
    }
}
