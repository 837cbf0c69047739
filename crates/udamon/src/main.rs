//! The `udamon` command: the only crate that sees every other one, picks a
//! backend and talks to the person at the terminal.

mod cmd;
mod inputs;
mod live;

mod output;
mod stop;

use std::process::ExitCode;

use clap::Parser;
use udamon_core::ErrorKind;

/// A usage or input error (bad flag value, bad spec, bad file): exit code 2.
pub use udamon_cli::UsageError;

/// The machine lacks a capability udamon needs: exit code 3.
#[derive(Debug)]
pub struct CapabilityError(pub String);

impl std::fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CapabilityError {}

/// What `cause` says of itself, when it is one of udamon's errors: every
/// library crate's error type classifies itself (`kind()`), so this only
/// names the types.
fn kind_of(cause: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    if cause.is::<UsageError>() {
        return Some(ErrorKind::Usage);
    }
    if cause.is::<CapabilityError>() {
        return Some(ErrorKind::Capability);
    }
    macro_rules! kind_of {
        ($($t:ty),* $(,)?) => {
            $(if let Some(e) = cause.downcast_ref::<$t>() {
                return Some(e.kind());
            })*
        };
    }
    kind_of!(
        udamon_core::Error,
        udamon_core::units::UnitError,
        udamon_record::Error,
        udamon_sim::Error,
        udamon_scheme_file::Error,
        udamon_scheme_file::NotForDamo,
        udamon_kdamon::Error,
        udamon_proc::Error,
        udamon_report::Error,
        udamon_objects::Error,
        udamon_damo::Error,
        udamon_session::Error,
        udamon_session::sim::SimError,
        udamon_tune::Error,
        udamon_eval::Error,
        udamon_service::Error,
        udamon_service::ConfigError,
        udamon_bench::Error,
    );
    None
}

/// The exit code: 2 when any error in the chain is bad input, 3 when one is
/// a missing capability (the first such one decides), else 1.
fn exit_code(err: &anyhow::Error) -> u8 {
    err.chain()
        .filter_map(kind_of)
        .find(|k| *k != ErrorKind::Failure)
        .unwrap_or(ErrorKind::Failure)
        .exit_code()
}

/// The error and its causes on one line, each said once (a cause already
/// quoted by the message above it is not repeated) and in plain words (no
/// Rust "(os error N)" suffixes, no debug formatting).
fn error_message(err: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in err.chain() {
        let c = output::plain_words(&cause.to_string());
        if msg.to_lowercase().contains(&c.to_lowercase()) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&c);
    }
    msg
}

fn main() -> ExitCode {
    output::mark_start();
    // Like other Unix filters, end quietly when the reader of our output
    // goes away (`udamon report raw x.udr | head`) instead of panicking.
    // SAFETY: restoring a signal's default disposition at start-up, before
    // any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = udamon_cli::Cli::parse();
    match cmd::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("udamon: {}", error_message(&err));
            ExitCode::from(exit_code(&err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_comes_from_the_first_error_that_is_not_a_failure() {
        let io = || std::io::Error::from_raw_os_error(5);
        // A failure wrapping nothing else: 1.
        let err = anyhow::Error::new(udamon_service::Error::Setup("bind".into()));
        assert_eq!(exit_code(&err), 1);
        // Bad input, also under a context: 2.
        let err = anyhow::Error::new(udamon_report::Error::NoSnapshots).context("heatmap");
        assert_eq!(exit_code(&err), 2);
        let err = anyhow::Error::new(udamon_tune::Error::Record("not a record".into()));
        assert_eq!(exit_code(&err), 2);
        // A record read that failed inside a report error stays a failure.
        let err = anyhow::Error::new(udamon_report::Error::Record(udamon_record::Error::Io {
            path: "x.udr".into(),
            source: io(),
        }));
        assert_eq!(exit_code(&err), 1);
        // A missing capability: 3, whichever crate says so.
        let err = anyhow::Error::new(udamon_kdamon::Error::Foreign {
            path: "/sys/kernel/mm/damon/admin/kdamonds/0".into(),
            state: "on".into(),
            pid: "42".into(),
        });
        assert_eq!(exit_code(&err), 3);
        let err = anyhow::Error::new(udamon_session::Error::Capability("no bitmap".into()));
        assert_eq!(exit_code(&err), 3);
        // An error that is not udamon's: 1.
        assert_eq!(exit_code(&anyhow::Error::new(io())), 1);
    }

    #[test]
    fn an_error_names_its_cause_once_in_plain_words() {
        let io = std::io::Error::from_raw_os_error(2);
        let err = anyhow::Error::new(udamon_record::Error::Io {
            path: "x.udr".into(),
            source: io,
        });
        assert_eq!(error_message(&err), "x.udr: no such file or directory");
        let err = anyhow::anyhow!("outer").context("cannot write y.png");
        assert_eq!(error_message(&err), "cannot write y.png: outer");
    }
}
