//! The `udamon` command: the only crate that sees every other one, picks a
//! backend and talks to the person at the terminal.

mod cli;
mod cmd;
mod inputs;
mod live;

mod output;
mod stop;

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

/// The tuner's errors as the binary's: bad input (a flag value, a record
/// that cannot be replayed) exits with 2.
pub fn tune_error(e: udamon_tune::Error) -> anyhow::Error {
    match e {
        udamon_tune::Error::Usage(m) | udamon_tune::Error::Record(m) => UsageError(m).into(),
        other => anyhow::anyhow!(other),
    }
}

/// A simulated run's error as the binary's: what the user asked (the
/// spec, a monitor that cannot take it) exits with 2; a run or a write that
/// failed keeps its cause, as it comes.
pub fn sim_error(e: udamon_session::sim::SimError) -> anyhow::Error {
    use udamon_session::sim::SimError as E;
    match e {
        E::Spec(e) => e.into(),
        E::Usage(_) | E::Build { .. } => UsageError(e.to_string()).into(),
        E::Monitor(e) => e.into(),
        E::Create { path, source } => {
            anyhow::Error::new(source).context(format!("cannot write {}", path.display()))
        }
        E::Record(e) => e.into(),
        E::Json(e) => e.into(),
    }
}

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
        match cause.downcast_ref::<udamon_session::SessionError>() {
            Some(udamon_session::SessionError::Usage(_)) => return 2,
            Some(udamon_session::SessionError::Capability(_)) => return 3,
            _ => {}
        }
        if let Some(e) = cause.downcast_ref::<udamon_core::Error>() {
            if matches!(e, udamon_core::Error::InvalidAttrs(_)) {
                return 2;
            }
        }
        if let Some(e) = cause.downcast_ref::<udamon_report::Error>() {
            // What the user asked of the record, not what happened writing.
            use udamon_report::Error as R;
            match e {
                R::Io(_) | R::Plot(_) | R::Source(_) => {}
                R::Record(udamon_record::Error::Io { .. }) => {}
                _ => return 2,
            }
        }
        if let Some(e) = cause.downcast_ref::<udamon_record::Error>() {
            // Reading or writing failed: a runtime failure, not bad input.
            if !matches!(
                e,
                udamon_record::Error::Io { .. } | udamon_record::Error::Write(_)
            ) {
                return 2;
            }
        }
    }
    1
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
    let cli = cli::Cli::parse();
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
