//! `udamon topology`: NUMA nodes, memory tiers and tiering pairs, and the
//! tiering schemes for them (of this machine, or of a simulated one).

use anyhow::Result;
use udamon_cli::TopologyArgs;
use udamon_core::schemes::Action;
use udamon_report::fmt_bytes;
use udamon_session::topology::{
    discover, interleaved_tiering_schemes, sim_topology, tiering_schemes, Space, TieringParams,
    Topology,
};

use crate::inputs::read_spec;
use crate::output::print_json;
use crate::UsageError;

pub fn run(a: TopologyArgs) -> Result<()> {
    let t = match &a.sim {
        Some(spec) => {
            let w =
                udamon_sim::Workload::from_toml(&read_spec(spec)?, &spec.display().to_string())?;
            sim_topology(&w.machine, w.mapped_bytes())
        }
        None => discover(&a.root),
    };
    if let Some(out) = &a.tiering_schemes {
        let space = if a.processes || a.sim.is_some() {
            Space::Virtual
        } else {
            Space::Physical
        };
        let p = TieringParams::default();
        let schemes = match a.interleave {
            Some(how) => interleaved_tiering_schemes(&t, space, &p, how),
            None => tiering_schemes(&t, space, &p),
        }
        .map_err(|e| crate::CapabilityError(format!("no tiering schemes here: {e}")))?;
        let mut inputs = Vec::new();
        if let Some(spec) = &a.sim {
            inputs.push(spec.as_path());
        }
        crate::output::check_output("--tiering-schemes", out, &inputs, &[])?;
        // The interleaving promotions' weights, pair by pair.
        let interleaved: Vec<String> = schemes
            .iter()
            .filter(|s| s.action == Action::MigrateHot && !s.dests.is_empty())
            .map(|s| {
                let w: Vec<String> = s
                    .dests
                    .iter()
                    .map(|d| format!("node {} weight {}", d.node, d.weight))
                    .collect();
                w.join(", ")
            })
            .collect();
        let promotion = if interleaved.is_empty() {
            "promotion aims at 99.7% of it used".to_string()
        } else {
            format!(
                "promotion aims at 99.7% of it used,\n# interleaving hot memory ({}; kernel \
                 DAMON's dests, Linux 6.17+)",
                interleaved.join("; ")
            )
        };
        let machine = if a.sim.is_some() {
            "the simulated machine"
        } else {
            "this machine"
        };
        let how_to = match &a.sim {
            Some(spec) => format!(
                "In the simulator: udamon apply FILE --sim {}.",
                spec.display()
            ),
            None if a.processes => "For processes: udamon apply FILE --pid PID (or -- CMD).".into(),
            None => "For physical memory: udamon apply FILE --paddr --ops kdamond.".into(),
        };
        let text = format!(
            "# Self-tuned tiering for {machine}'s pairs ({}), written by `udamon \
             topology`:\n# for each pair, demotion keeps 0.5% of the upper node free and \
             {promotion},\n# at most 200 MiB/s each, with the temporal goal tuner \
             (Linux 7.1+ on kernel DAMON: on older kernels,\n# set goal_tuner = \"consist\" \
             in each [scheme.quota]). {how_to}\n{}",
            t.pairs
                .iter()
                .map(|p| format!("node {} over node {}", p.upper, p.lower))
                .collect::<Vec<_>>()
                .join(", "),
            udamon_scheme_file::to_toml(&schemes)
        );
        crate::output::write_whole(out, text.as_bytes())?;
        if !a.json {
            eprintln!(
                "udamon: wrote {} schemes for {} pair(s) to {}",
                schemes.len(),
                t.pairs.len(),
                out.display()
            );
        }
    }
    if a.json {
        return print_json(&t);
    }
    print_topology(&t);
    if t.nodes.is_empty() {
        return Err(UsageError(
            "no NUMA nodes under /sys/devices/system/node (kernel without CONFIG_NUMA?)".into(),
        )
        .into());
    }
    Ok(())
}

fn print_topology(t: &Topology) {
    for n in &t.nodes {
        let cpus = if n.has_cpus() {
            format!("cpus {}", n.cpus)
        } else {
            "no cpus".into()
        };
        let tier = n.tier.map_or(String::new(), |t| format!(", tier {t}"));
        println!(
            "node {}: {cpus}, {} ({} used, {} free){tier}",
            n.id,
            fmt_bytes(n.total_bytes),
            fmt_bytes(n.used_bytes),
            fmt_bytes(n.free_bytes)
        );
        if !n.ranges.is_empty() {
            let r: Vec<String> = n
                .ranges
                .iter()
                .map(|r| format!("{:#x}-{:#x}", r.start, r.end))
                .collect();
            println!("  physical: {}", r.join(", "));
        }
        if !n.distances.is_empty() {
            let d: Vec<String> = n.distances.iter().map(u32::to_string).collect();
            println!("  distances: {}", d.join(" "));
        }
        if let Some(h) = &n.hmat {
            let f = |v: Option<u64>, unit: &str| v.map_or("?".into(), |v| format!("{v} {unit}"));
            println!(
                "  HMAT: read {} / {}, write {} / {}",
                f(h.read_latency_ns, "ns"),
                f(h.read_bandwidth_mbps, "MB/s"),
                f(h.write_latency_ns, "ns"),
                f(h.write_bandwidth_mbps, "MB/s")
            );
        }
    }
    if !t.tiers.is_empty() {
        let tiers: Vec<String> = t
            .tiers
            .iter()
            .map(|(id, nodes)| {
                let n: Vec<String> = nodes.iter().map(u32::to_string).collect();
                format!("{id} (nodes {})", n.join(","))
            })
            .collect();
        println!("memory tiers (fastest first): {}", tiers.join(", "));
    }
    let word = |b: Option<bool>| b.map_or("unknown", |b| if b { "on" } else { "off" });
    let numab = match t.numa_balancing {
        None => "unknown".to_string(),
        Some(0) => "0 (off)".into(),
        Some(1) => "1 (NUMA balancing)".into(),
        Some(2) => "2 (tiering mode)".into(),
        Some(m) => format!("{m}"),
    };
    println!(
        "demotion_enabled: {}; numa_balancing: {numab}",
        word(t.demotion_enabled)
    );
    if t.pairs.is_empty() {
        println!("tiering pairs: none ({})", t.pairs_from);
    } else {
        let p: Vec<String> = t
            .pairs
            .iter()
            .map(|p| format!("node {} over node {}", p.upper, p.lower))
            .collect();
        println!("tiering pairs (from {}): {}", t.pairs_from, p.join(", "));
    }
    for w in &t.warnings {
        println!("warning: {w}");
    }
}
