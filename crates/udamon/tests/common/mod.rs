//! What every integration test of the binary needs: run it, read its output,
//! within a time and memory bound that the harness enforces (a command that
//! never ends fails its test instead of hanging the suite; one that grows
//! without bound is stopped by its address-space limit).

#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use wait_timeout::ChildExt;

/// Bounds of one run of the binary.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub secs: u64,
    /// Address-space limit (RLIMIT_AS) in bytes.
    pub mem_bytes: u64,
}

/// Generous for any test command on a loaded 2-core machine in a debug
/// build, far below "never ends" and "grows until the machine swaps".
pub const DEFAULT: Bounds = Bounds {
    secs: 300,
    mem_bytes: 4 << 30,
};

/// Runs the real binary in `dir`, without colour, within [`DEFAULT`].
pub fn udamon(dir: &Path, args: &[&str]) -> Output {
    udamon_within(dir, args, DEFAULT)
}

/// Runs the real binary in `dir`, without colour, within `bounds`.
pub fn udamon_within(dir: &Path, args: &[&str], bounds: Bounds) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_udamon"));
    c.args(args).current_dir(dir).env("NO_COLOR", "1");
    run_bounded(c, bounds, &format!("udamon {}", args.join(" ")))
}

/// The binary as a child with piped output and the memory bound set, for
/// tests that signal it; finish it with [`finish`].
pub fn spawn(dir: &Path, args: &[&str], bounds: Bounds) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_udamon"));
    c.args(args).current_dir(dir).env("NO_COLOR", "1");
    limit(&mut c, bounds);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start udamon")
}

fn limit(c: &mut Command, bounds: Bounds) {
    let mem = bounds.mem_bytes;
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: mem,
                rlim_max: mem,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Runs `c` with `bounds`; panics naming `what` when it does not finish in
/// time (after killing it).
pub fn run_bounded(mut c: Command, bounds: Bounds, what: &str) -> Output {
    limit(&mut c, bounds);
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    finish(child, bounds.secs, what)
}

/// Waits for a child started with piped output, at most `secs`.
pub fn finish(mut child: Child, secs: u64, what: &str) -> Output {
    // Drain both pipes while waiting, so a chatty child cannot block.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = match child.wait_timeout(Duration::from_secs(secs)).expect("wait") {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = e.join().unwrap_or_default();
            panic!(
                "{what} did not finish within {secs} s (killed); stderr: {}",
                String::from_utf8_lossy(&stderr)
            );
        }
    };
    Output {
        status,
        stdout: o.join().unwrap_or_default(),
        stderr: e.join().unwrap_or_default(),
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
