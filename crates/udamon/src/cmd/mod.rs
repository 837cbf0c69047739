//! One module per subcommand.

mod apply;
mod bench;
mod cleanup;
mod cut;
mod damon_stat;
mod demo;
mod eval;
mod export;
mod features;
mod hints;
mod import;
mod record;
mod replay;
mod report;
mod report_html;
mod service;
mod topology;
mod tune;

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;
use udamon_cli::{Cli, Command, ManArgs, ReportCommand};

use crate::UsageError;

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Record(a) => record::run(a),
        Command::Apply(a) => apply::run(a),
        Command::Schemes(c) => apply::schemes(c),
        Command::Report(r) => match r {
            ReportCommand::Heatmap(a) => report::heatmap_cmd(a),
            ReportCommand::Html(a) => report_html::run(a),
            ReportCommand::Wss(a) => report::wss_cmd(a),
            ReportCommand::Hot(a) => report::hot_cmd(a),
            ReportCommand::Objects(a) => report::objects_cmd(a),
            ReportCommand::Raw(a) => report::raw_cmd(a),
            ReportCommand::Accuracy(a) => report::accuracy_cmd(a),
            ReportCommand::Stats(a) => report::stats_cmd(a),
            ReportCommand::Summary(a) => report::summary_cmd(a),
        },
        Command::Features(a) => features::run(a),
        Command::DamonStat(a) => damon_stat::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Cleanup(a) => cleanup::run(a),
        Command::Topology(a) => topology::run(a),
        Command::Run(a) => service::run(a),
        Command::Ctl(a) => service::ctl(a),
        Command::Tune(a) => tune::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Import(a) => import::run(a),
        Command::Export(a) => export::run(a),
        Command::Cut(a) => cut::run(a),
        Command::Hints(a) => hints::run(a),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "udamon", &mut std::io::stdout());
            Ok(())
        }
        Command::Man(a) => man(a),
    }
}

/// Writes the page of `cmd` and of each of its subcommands into `dir`, as
/// `clap_mangen::generate_to` names them, each page whole.
fn man_pages(cmd: &clap::Command, dir: &std::path::Path) -> Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, dir)?;
    }
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    man.render(&mut page)?;
    crate::output::replace_whole(&dir.join(man.get_filename()), &page)
}

/// The command tree the man pages describe: every subcommand has a page,
/// so `help` (which only repeats them) has none.
pub fn man_tree() -> clap::Command {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

fn man(a: ManArgs) -> Result<()> {
    let root = man_tree();
    if let Some(dir) = &a.dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        return man_pages(&root, dir);
    }
    let mut cmd = &root;
    for name in &a.command {
        cmd = cmd.find_subcommand(name).ok_or_else(|| {
            let known: Vec<&str> = cmd
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(|c| c.get_name())
                .collect();
            UsageError(format!(
                "man: {} has no subcommand \"{name}\" (expected one of {})",
                cmd.get_bin_name().unwrap_or(cmd.get_name()),
                known.join(", ")
            ))
        })?;
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    std::io::stdout().write_all(&out)?;
    Ok(())
}
