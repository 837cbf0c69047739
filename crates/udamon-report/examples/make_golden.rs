//! Writes the record behind the golden tests,
//! `crates/udamon-report/tests/data/golden.udr`, from the synthetic
//! snapshots in `tests/common/golden.rs`.
//!
//! Re-generate: `cargo run -p udamon-report --example make_golden`
//! Then accept the changed report outputs:
//! `INSTA_UPDATE=always cargo test -p udamon-report --test golden`
//! (or `cargo insta review` where cargo-insta is installed).

#[path = "../tests/common/golden.rs"]
mod golden;

use std::path::Path;

fn main() -> Result<(), udamon_record::Error> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden.udr");
    let mut w = udamon_record::Writer::create(&path, &golden::header())?;
    for s in golden::snapshots() {
        w.push_snapshot(&s)?;
    }
    w.push_json("summary", &golden::summary())?;
    w.finish()?;
    println!("wrote {}", path.display());
    Ok(())
}
