//! `udamon cleanup`: remove a kdamond a dead udamon run left behind.

use anyhow::Result;
use udamon_cli::CleanupArgs;
use udamon_kdamon::claim;

use crate::output::print_json;

pub fn run(a: CleanupArgs) -> Result<()> {
    // A service's set of kdamonds is removed whole.
    let set = claim::SetClaim::read(&a.root);
    let r = claim::clean_up(&a.root, &|pid| udamon_proc::start_time(&a.root, pid));
    if a.json {
        return print_json(&match &r {
            Ok(c) => serde_json::json!({
                "removed": true,
                "udamon_pid": c.udamon_pid,
                "kdamonds": set.map_or(1, |s| s.nr_kdamonds),
                "kdamond_pid": c.kdamond_pid,
                "ops": c.ops,
                "target_pids": c.target_pids,
            }),
            Err(why) => serde_json::json!({ "removed": false, "reason": why.to_string() }),
        });
    }
    match r {
        Ok(c) if set.is_some_and(|s| s.nr_kdamonds > 1) => println!(
            "removed the {} kdamonds of udamon pid {} (a service's set), which died, with their \
             trace instances and claims",
            set.map_or(0, |s| s.nr_kdamonds),
            c.udamon_pid
        ),
        Ok(c) => println!(
            "removed kdamond 0 ({} of pids {:?}), left by udamon pid {} which died, with its \
             trace instance and claim",
            c.ops, c.target_pids, c.udamon_pid
        ),
        Err(why) => println!("nothing removed: {why}"),
    }
    Ok(())
}
