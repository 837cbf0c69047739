//! The `udamon` command: the only crate that sees every other one, picks a
//! backend and talks to the person at the terminal.

mod cli;
mod cmd;
mod features;
mod output;

use std::process::ExitCode;

use clap::Parser;

/// A usage or input error (bad flag value, bad spec, bad file): exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The machine lacks a capability udamon needs: exit code 3.
#[derive(Debug)]
pub struct CapabilityError(pub String);

impl std::fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CapabilityError {}

fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if cause.is::<UsageError>()
            || cause.is::<udamon_sim::SpecError>()
            || cause.is::<udamon_scheme_file::ParseError>()
        {
            return 2;
        }
        if cause.is::<CapabilityError>() {
            return 3;
        }
        if let Some(e) = cause.downcast_ref::<udamon_core::Error>() {
            if matches!(e, udamon_core::Error::InvalidAttrs(_)) {
                return 2;
            }
        }
        if let Some(e) = cause.downcast_ref::<udamon_record::Error>() {
            if !matches!(e, udamon_record::Error::Io { .. }) {
                return 2;
            }
        }
    }
    1
}

fn main() -> ExitCode {
    // Like other Unix filters, end quietly when the reader of our output
    // goes away (`udamon report raw x.udr | head`) instead of panicking.
    // SAFETY: restoring a signal's default disposition at start-up, before
    // any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = cli::Cli::parse();
    match cmd::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let msg = err
                .chain()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(": ");
            eprintln!("udamon: {msg}");
            ExitCode::from(exit_code(&err))
        }
    }
}
