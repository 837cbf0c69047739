//! udamon run in a child process, its wall time and peak resident memory
//! measured: the figures of a command as a user runs it.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::error::{Context, Error, Result};

/// Runs `udamon` (the executable at that path) with `args` in a child
/// process and returns its wall time in seconds and its peak resident
/// memory in bytes. A failure names the command's first two words and
/// quotes its stderr.
pub fn time_udamon(udamon: &Path, args: &[&OsStr]) -> Result<(f64, u64)> {
    let what = args
        .iter()
        .take(2)
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let started = Instant::now();
    let mut child = Command::new(udamon)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run udamon {what}"))?;
    let pid = child.id() as libc::pid_t;
    // SAFETY: wait4 writes only into the status and rusage we pass.
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let elapsed = started.elapsed().as_secs_f64();
    if rc != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        return Err(Error::msg(format!("udamon {what} failed: {}", err.trim())));
    }
    Ok((elapsed, ru.ru_maxrss.max(0) as u64 * 1024))
}

/// `udamon report heatmap RECORD -o PNG`, timed ([`time_udamon`]).
pub fn time_heatmap(udamon: &Path, record: &Path, png: &Path) -> Result<(f64, u64)> {
    time_udamon(
        udamon,
        &[
            "report".as_ref(),
            "heatmap".as_ref(),
            record.as_os_str(),
            "-o".as_ref(),
            png.as_os_str(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_timed_and_a_failure_quotes_its_stderr() {
        let (s, rss) =
            time_udamon(Path::new("/bin/sh"), &["-c".as_ref(), "true".as_ref()]).unwrap();
        assert!(s >= 0.0 && rss > 0, "{s} {rss}");
        let e = time_udamon(
            Path::new("/bin/sh"),
            &["-c".as_ref(), "echo no such record >&2; exit 2".as_ref()],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "udamon -c echo no such record >&2; exit 2 failed: no such record"
        );
        let e = time_udamon(Path::new("/nonexistent/udamon"), &["report".as_ref()]).unwrap_err();
        assert_eq!(e.to_string(), "cannot run udamon report");
        assert!(std::error::Error::source(&e).is_some());
    }
}
