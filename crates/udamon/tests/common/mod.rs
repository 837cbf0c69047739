//! What every integration test of the binary needs: run it, read its output.

use std::path::Path;
use std::process::{Command, Output};

/// Runs the real binary in `dir`, without colour.
pub fn udamon(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_udamon"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run udamon")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
