//! Compiles src/preload.c into the shared object that src/lib.rs carries as
//! bytes, so the `udamon` binary needs nothing beside it at run time.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "src/preload.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=build.rs");
    // The tests compile their C programs for the same target.
    for var in ["TARGET", "HOST"] {
        let value = env::var(var).unwrap_or_default();
        println!("cargo:rustc-env=UDAMON_PRELOAD_{var}={value}");
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let lib = out.join("libudamon_preload.so");
    let compiler = cc::Build::new().get_compiler();
    let mut cmd: Command = compiler.to_command();
    // Given last, so they win over the profile's -O and -g.
    cmd.args([
        "-shared",
        "-fPIC",
        "-O2",
        "-g0",
        "-std=gnu11",
        "-Wall",
        "-Wextra",
        // Only the malloc family is exported: nothing of ours can be
        // interposed or collide with the program's symbols.
        "-fvisibility=hidden",
        "-o",
    ])
    .arg(&lib)
    .arg(src)
    // Every symbol resolved at link time; libgcc_s for _Unwind_Backtrace
    // (Debian's programs have no frame pointers), libm for log1p/expm1.
    .args(["-Wl,-z,defs", "-ldl", "-lgcc_s", "-lm", "-pthread"]);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {:?}: {e}", compiler.path()));
    assert!(status.success(), "compiling {src} failed: {cmd:?}");
}
