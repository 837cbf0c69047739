//! `udamon run CONFIG` (the service) and `udamon ctl` (its control).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Result;
use udamon_cli::{CtlArgs, CtlRequest, RunArgs};
use udamon_service::log::{self, Level};
use udamon_service::{Check, Options, Verdict};

use crate::output::print_json;
use crate::{CapabilityError, UsageError};

pub fn run(a: RunArgs) -> Result<()> {
    let level = Level::parse(&a.log_level).ok_or_else(|| {
        UsageError(format!(
            "--log-level {}: give error, warn, info or debug",
            a.log_level
        ))
    })?;
    log::set_level(level);
    let opts = Options {
        root: a.root.clone(),
        allow_insecure_files: a.allow_insecure_files,
    };
    if a.check {
        let c = udamon_service::check(&a.config, &opts)?;
        if a.json {
            print_json(&c)?;
        } else {
            print_check(&c);
        }
        let say = |what: &str| format!("{}: {what} (see above)", a.config.display());
        return match c.verdict() {
            Verdict::Ok => Ok(()),
            Verdict::Usage => Err(UsageError(say("some jobs' schemes cannot run here")).into()),
            Verdict::Capability => {
                Err(CapabilityError(say("some jobs cannot run on this machine")).into())
            }
            Verdict::Setup => Err(anyhow::anyhow!(say("the service could not start"))),
        };
    }
    udamon_service::run(&a.config, &opts, Arc::new(AtomicBool::new(false)))?;
    Ok(())
}

fn print_check(c: &Check) {
    println!("{}: {} job(s)", c.config, c.jobs.len());
    println!(
        "  metrics: {}",
        c.listen
            .as_ref()
            .map_or("off (no listen)".to_string(), |l| format!(
                "http://{l}/metrics"
            ))
    );
    println!("  control socket: {}", c.socket);
    for p in &c.problems {
        println!("  CANNOT START: {p}");
    }
    for j in &c.jobs {
        println!();
        println!("job {}: {}", j.name, j.target);
        if !j.processes.is_empty() {
            let list: Vec<String> = j.processes.iter().map(u32::to_string).collect();
            println!("  processes now: {}", list.join(", "));
        }
        match &j.path {
            Ok(p) => println!("  path: {p} ({})", j.because),
            Err(e) if j.optional => println!("  path: skipped (optional), cannot run here: {e}"),
            Err(e) => println!("  path: CANNOT RUN HERE: {e}"),
        }
        let a = &j.attrs;
        println!(
            "  attrs: sample {} us, aggr {} us, update {} us, regions {}..{}{}",
            a.sample_us,
            a.aggr_us,
            a.update_us,
            a.min_nr_regions,
            a.max_nr_regions,
            if a.intervals_goal.aggrs > 0 {
                ", intervals auto-tuned"
            } else {
                ""
            }
        );
        if j.softdirty_reset != "sample" {
            println!("  soft-dirty reset: {}", j.softdirty_reset);
        }
        for (i, s) in j.schemes.iter().enumerate() {
            println!("  scheme {i}: {s}");
        }
        println!("  guardrails: {}", j.guardrails);
        if let Some(r) = &j.record {
            println!("  record: {r}");
        }
    }
}

pub fn ctl(a: CtlArgs) -> Result<()> {
    let request = match &a.request {
        CtlRequest::Status => "status".to_string(),
        CtlRequest::Reload => "reload".to_string(),
        CtlRequest::Pause { job } | CtlRequest::Resume { job } => {
            // One line on the socket: a name is one word of the config's
            // letters, digits, '-' and '_'.
            if job.is_empty() || job.contains(char::is_whitespace) {
                return Err(UsageError(format!(
                    "job name {job:?}: give a job's name as in the config (one word)"
                ))
                .into());
            }
            let verb = if matches!(a.request, CtlRequest::Pause { .. }) {
                "pause"
            } else {
                "resume"
            };
            format!("{verb} {job}")
        }
    };
    let v = udamon_service::ctl_request(&a.socket, &request)?;
    if a.json {
        return print_json(&v);
    }
    match a.request {
        CtlRequest::Pause { .. } | CtlRequest::Resume { .. } => {
            let msg = v["message"].as_str().unwrap_or("");
            if v["ok"] == true {
                println!("{msg}");
                Ok(())
            } else if msg.starts_with("no job named") {
                Err(UsageError(msg.to_string()).into())
            } else {
                Err(anyhow::anyhow!("{msg}"))
            }
        }
        CtlRequest::Reload => {
            let msg = v["message"].as_str().unwrap_or("");
            if v["ok"] == true {
                println!("reloaded:\n{msg}");
                Ok(())
            } else {
                Err(UsageError(msg.to_string()).into())
            }
        }
        CtlRequest::Status => {
            print_status(&v);
            Ok(())
        }
    }
}

fn print_status(v: &serde_json::Value) {
    let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    println!(
        "udamon {} (pid {}), config {}; reloads: {} ok, {} failed",
        s(&v["version"]),
        v["pid"],
        s(&v["config"]),
        v["reloads_ok"],
        v["reloads_failed"]
    );
    if let Some(e) = v["last_reload_error"].as_str() {
        println!("  last reload: {e}");
    }
    for j in v["jobs"].as_array().into_iter().flatten() {
        println!();
        println!(
            "job {}: {}{}",
            s(&j["name"]),
            s(&j["target"]),
            if j["dry_run"] == true {
                " (dry run)"
            } else {
                ""
            }
        );
        if let Some(e) = j["last_error"].as_str() {
            println!("  last problem: {e}");
        }
        let workers = j["workers"].as_object();
        if workers.is_none_or(|w| w.is_empty()) {
            println!(
                "  no session: waiting for a process matching {}",
                s(&j["target"])
            );
        }
        for w in workers.into_iter().flat_map(|w| w.values()) {
            let who = if w["pid"] == 0 {
                s(&w["command"])
            } else {
                format!("pid {} ({})", w["pid"], s(&w["command"]))
            };
            println!(
                "  {who}: {} on {}{}",
                s(&w["state"]),
                s(&w["path"]),
                w["reason"]
                    .as_str()
                    .map_or(String::new(), |r| format!(": {r}"))
            );
            println!(
                "    {} regions, sample {} us, aggr {} us, WSS {}, {} snapshots",
                w["regions"],
                w["sample_us"],
                w["aggr_us"],
                udamon_report::fmt_bytes(w["wss_bytes"].as_u64().unwrap_or(0)),
                w["snapshots"]
            );
            if let Some(p) = w["paused_by"].as_array().filter(|p| !p.is_empty()) {
                let names: Vec<String> = p.iter().map(s).collect();
                println!("    PAUSED by guardrail: {}", names.join(", "));
            }
            if let Some(p) = w["paused"].as_str() {
                println!("    paused: {p}");
            }
            for sc in w["schemes"].as_array().into_iter().flatten() {
                let quota = sc["effective_quota_bytes"]
                    .as_u64()
                    .map_or("no quota".into(), |q| {
                        format!("quota {}", udamon_report::fmt_bytes(q))
                    });
                println!(
                    "    scheme {} {}: applied {} of {} tried; {quota}{}",
                    sc["index"],
                    s(&sc["action"]),
                    udamon_report::fmt_bytes(sc["applied_bytes"].as_u64().unwrap_or(0)),
                    udamon_report::fmt_bytes(sc["tried_bytes"].as_u64().unwrap_or(0)),
                    if sc["capped_by_guardrail"] == true {
                        " (capped by max_bytes_per_second)"
                    } else {
                        ""
                    }
                );
                for g in sc["goals"].as_array().into_iter().flatten() {
                    println!(
                        "      goal {}: {} of {}",
                        s(&g["metric"]),
                        g["current"],
                        g["target"]
                    );
                }
            }
            if let Some(r) = w["record"].as_str() {
                println!("    record: {r}");
            }
        }
    }
}
