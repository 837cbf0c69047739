//! What the integration tests share: compiling a C program and running it
//! under the library.

use std::ffi::OsString;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Compiles `src` with the C compiler the cc crate finds for this target,
/// at -O0 (each site keeps its frame).
pub fn compile(src: &str, dir: &Path, name: &str) -> PathBuf {
    compile_with(src, dir, name, &[])
}

/// [`compile`] with more compiler arguments (`-shared -fPIC` for a library).
pub fn compile_with(src: &str, dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let tool = cc::Build::new()
        .target(env!("UDAMON_PRELOAD_TARGET"))
        .host(env!("UDAMON_PRELOAD_HOST"))
        .opt_level(0)
        .debug(false)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .get_compiler();
    let mut cmd = tool.to_command();
    cmd.args(["-O0", "-pthread"])
        .args(extra)
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .arg("-ldl");
    let status = cmd.status().unwrap();
    assert!(status.success(), "{cmd:?} failed");
    fs::canonicalize(exe).unwrap()
}

pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `exe` with `vars` added, bounded in time (a deadlock fails the test
/// instead of hanging it).
pub fn run(exe: &Path, args: &[&str], vars: &[(OsString, OsString)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(exe)
        .args(args)
        .env_remove("UDAMON_ALLOC_OUT")
        .env_remove("UDAMON_HINTS")
        .env_remove("UDAMON_HINTS_VERBOSE")
        .env_remove("UDAMON_HINT_MIN")
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{} did not finish in time", exe.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        status,
        stdout: fs::read_to_string(out).unwrap(),
        stderr: fs::read_to_string(err).unwrap(),
    }
}

pub fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}
