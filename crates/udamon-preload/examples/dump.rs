//! Prints a summary of side files: `cargo run -p udamon-preload --example
//! dump -- FILE...`.

fn main() {
    let mut failed = false;
    for path in std::env::args_os().skip(1) {
        match udamon_preload::read(&path) {
            Ok(s) => {
                let weight: u64 = s.allocations.iter().map(|a| a.weight).sum();
                println!(
                    "{}: version {}, pid {}, {} allocations ({} bytes estimated), {} frees, {} stacks, {} maps, {:?}, hints {:?}, complete {}, truncated {:?}",
                    path.to_string_lossy(),
                    s.version,
                    s.pid,
                    s.allocations.len(),
                    weight,
                    s.frees.len(),
                    s.stacks.len(),
                    s.maps.len(),
                    s.counters,
                    s.hints,
                    s.complete,
                    s.truncated
                );
            }
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
