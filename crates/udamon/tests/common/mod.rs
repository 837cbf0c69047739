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

/// The demo's workload spec in the repository.
pub fn demo_spec() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/specs/demo.toml")
}

/// A loopback port free now (bound and released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every directory and file under `root` with its bytes (a directory's
/// empty), sorted: two of them differ when anything was written, made or
/// removed in between.
pub fn snapshot_tree(root: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.push((p.clone(), Vec::new()));
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Writes `s` at `p` under `root`, making the directories.
pub fn write(root: &Path, p: &str, s: &str) {
    let p = root.join(p);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

/// The heap every fake process has (`HEAP_MAP` in its maps).
pub const HEAP_MAP: &str = "10000000-10400000 rw-p 00000000 00:00 0 [heap]\n";

/// A process `pid` under a fake root: `maps` (which must include
/// [`HEAP_MAP`]), its command line, comm "worker", a 4 MiB resident set,
/// and a pagemap whose heap pages are present, the first half soft-dirty.
pub fn fake_process(root: &Path, pid: u32, maps: &str, cmdline: &str) {
    use std::os::unix::fs::FileExt;
    // A process appears in /proc whole: one made while a service scans is
    // built beside the tree and renamed into place, so no scan sees its
    // cmdline without its pagemap.
    let whole = format!("proc/{pid}");
    let fresh = !root.join(&whole).exists();
    let d = if fresh {
        format!("proc/.new-{pid}")
    } else {
        whole.clone()
    };
    write(root, &format!("{d}/maps"), maps);
    write(root, &format!("{d}/cmdline"), cmdline);
    write(root, &format!("{d}/comm"), "worker\n");
    // Parent 1, started at tick 1000 + pid, 1 MiB of address space.
    write(
        root,
        &format!("{d}/stat"),
        &format!(
            "{pid} (worker) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {} 1048576 0\n",
            1000 + u64::from(pid)
        ),
    );
    write(
        root,
        &format!("{d}/status"),
        "VmRSS:\t 4096 kB\nVmSwap:\t 0 kB\n",
    );
    write(root, &format!("{d}/clear_refs"), "");
    let pm = std::fs::File::create(root.join(format!("{d}/pagemap"))).unwrap();
    let (present, soft_dirty) = (1u64 << 63, 1u64 << 55);
    for page in 0x10000u64..0x10400 {
        let e = present | if page < 0x10200 { soft_dirty } else { 0 } | page;
        pm.write_all_at(&e.to_ne_bytes(), page * 8).unwrap();
    }
    if fresh {
        std::fs::rename(root.join(&d), root.join(&whole)).unwrap();
    }
}

/// `p` in the repository (a path relative to its root).
pub fn repo(p: &str) -> String {
    format!("{}/../../{p}", env!("CARGO_MANIFEST_DIR"))
}

/// The JSON a successful run printed (fails the test, with its stderr,
/// when the run failed).
pub fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

/// Runs udamon and checks it succeeded; its stdout.
pub fn ok(d: &Path, args: &[&str]) -> String {
    let out = udamon(d, args);
    assert!(
        out.status.success(),
        "udamon {}: {}",
        args.join(" "),
        text(&out.stderr)
    );
    text(&out.stdout)
}
