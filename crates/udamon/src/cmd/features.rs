//! `udamon features`.

use anyhow::Result;
use udamon_cli::FeaturesArgs;

use crate::output::print_json;
use udamon_session::features::{probe, KernelFeatureRow};

pub fn run(a: FeaturesArgs) -> Result<()> {
    let f = probe(&a.root);
    if a.json {
        return print_json(&f);
    }
    let config = f.kernel_config.as_deref().map_or(
        "no kernel config readable: config-gated rows go by kernel version".into(),
        |c| format!("config {c}"),
    );
    println!("kernel {} ({config})", f.kernel);
    let w = f.features.iter().map(|x| x.name.len()).max().unwrap_or(0);
    for x in &f.features {
        let mark = if x.available { "yes" } else { "no " };
        println!("  {:<w$}  {mark}  {}", x.name, x.detail);
    }
    if f.foreign_kdamonds.is_empty() {
        println!("no kdamond exists (probing creates none)");
    }
    for m in &f.damon_modules {
        if m.enabled {
            println!(
                "{} is enabled (kdamond pid {}): it holds kernel DAMON while it runs \
                 (--ops kdamond is unavailable), and udamon leaves it alone ({})",
                m.module.to_uppercase(),
                m.kdamond_pid.map_or("-".into(), |p| p.to_string()),
                m.disable_hint()
            );
        } else {
            println!("{} is present, disabled", m.module.to_uppercase());
        }
    }
    for k in &f.foreign_kdamonds {
        let pid = k.pid.map_or("-".into(), |p| p.to_string());
        match (k.udamon_pid, k.udamon_running) {
            (Some(u), Some(true)) => println!(
                "kdamond {} (state {}, pid {pid}) is udamon pid {u}'s, which is running",
                k.index, k.state
            ),
            (Some(u), _) => println!(
                "kdamond {} (state {}, pid {pid}) was left by udamon pid {u}, which died: \
                 `udamon cleanup` removes it",
                k.index, k.state
            ),
            _ => println!(
                "kdamond {} (state {}, pid {pid}) was not created by udamon: udamon will not \
                 touch it; --ops kdamond is unavailable while it exists",
                k.index, k.state
            ),
        }
    }
    print_kernel_features(&f.kernel_features);
    Ok(())
}

/// Every kernel DAMON feature from 6.14 on, grouped by version (the
/// table's order), one a line: "6.17 dests (weighted multi-node
/// migration): yes (...)".
fn print_kernel_features(rows: &[KernelFeatureRow]) {
    println!(
        "kernel DAMON features by the Linux version that added them (read from the kdamond \
         tree where one exists, else by kernel version and config):"
    );
    for k in rows {
        let mark = if k.available { "yes" } else { "no" };
        println!(
            "  {:<4} {} ({}): {mark} ({})",
            k.since, k.name, k.kind, k.detail
        );
    }
}
