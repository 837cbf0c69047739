//! `udamon features`.

use anyhow::Result;

use crate::cli::FeaturesArgs;
use crate::features::probe;
use crate::output::print_json;

pub fn run(a: FeaturesArgs) -> Result<()> {
    let f = probe(&a.root);
    if a.json {
        return print_json(&f);
    }
    println!("kernel {}", f.kernel);
    let w = f.features.iter().map(|x| x.name.len()).max().unwrap_or(0);
    for x in &f.features {
        let mark = if x.available { "yes" } else { "no " };
        println!("  {:<w$}  {mark}  {}", x.name, x.detail);
    }
    if f.foreign_kdamonds.is_empty() {
        println!("no kdamond exists");
    } else {
        for k in &f.foreign_kdamonds {
            let pid = k.pid.map_or("-".into(), |p| p.to_string());
            println!(
                "kdamond {} exists (state {}, pid {pid}) and was not started by udamon: udamon never touches it",
                k.index, k.state
            );
        }
    }
    Ok(())
}
