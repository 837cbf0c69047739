//! The kernel's adaptive regions against the enhanced mode, and static
//! regions of the enhanced mode's average count, on simulated specs over
//! several seeds, scored against the exact truth (docs/enhanced.md):
//!
//! `cargo run --release -p udamon-sim --example modes -- examples/specs/*.toml`
//!
//! `MODES_SEEDS=N` sets the number of seeds (1..=N; default 5). Printed per
//! spec and monitor: hot_f1's mean and minimum over the seeds, the average
//! region count, CPU seconds per simulated second, and for the enhanced
//! mode how many windows predicted a move.
use std::sync::Arc;
use std::time::Instant;

use udamon_core::{Attrs, Monitor};
use udamon_sim::{
    accuracy, build_engine, build_monitor, AccuracyOptions, Model, MonitorKind, Workload,
};

struct Row {
    f1: Vec<f64>,
    regions: f64,
    cpu: f64,
    predicted: u64,
    windows: u64,
}

fn run(model: &Arc<Model>, kind: MonitorKind, seeds: u64) -> Row {
    let mut row = Row {
        f1: Vec::new(),
        regions: 0.0,
        cpu: 0.0,
        predicted: 0,
        windows: 0,
    };
    let sim_s = model.workload.duration_us as f64 / 1e6;
    for seed in 1..=seeds {
        let t0 = Instant::now();
        let mut snaps = Vec::new();
        if kind == MonitorKind::Enhanced {
            let mut e = build_engine(model, Attrs::default(), seed, kind).expect("engine");
            e.set_deadline(Some(model.workload.duration_us));
            while let Some(s) = e.next_snapshot().expect("snapshot") {
                snaps.push(s);
            }
            row.predicted += e.movement().predictions;
        } else {
            let mut m = build_monitor(model, Attrs::default(), seed, kind).expect("monitor");
            m.set_deadline(Some(model.workload.duration_us));
            while let Some(s) = m.next_snapshot().expect("snapshot") {
                snaps.push(s);
            }
        }
        row.cpu += t0.elapsed().as_secs_f64() / sim_s;
        row.windows += snaps.len() as u64;
        let a = accuracy(model, &snaps, AccuracyOptions::default());
        row.f1.push(a.hot_f1);
        row.regions += a.avg_nr_regions;
    }
    let n = seeds as f64;
    row.regions /= n;
    row.cpu /= n;
    row
}

fn main() {
    let seeds: u64 = std::env::var("MODES_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    println!(
        "{:<16} {:<19} {:>8} {:>7} {:>8} {:>11} {:>10}",
        "spec", "monitor", "f1_mean", "f1_min", "regions", "cpu_s/sim_s", "predicted"
    );
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path).expect("spec");
        let w = Workload::from_toml(&text, &path).expect("spec");
        let name = w.name.clone();
        let model = Arc::new(Model::new(w));
        let kernel = run(&model, MonitorKind::Adaptive, seeds);
        let enhanced = run(&model, MonitorKind::Enhanced, seeds);
        let own = enhanced.regions.round().max(1.0) as u32;
        let fixed = run(&model, MonitorKind::FixedRegions(own), seeds);
        for (kind, r) in [
            (MonitorKind::Adaptive, &kernel),
            (MonitorKind::Enhanced, &enhanced),
            (MonitorKind::FixedRegions(own), &fixed),
        ] {
            let mean = r.f1.iter().sum::<f64>() / r.f1.len() as f64;
            let min = r.f1.iter().copied().fold(f64::INFINITY, f64::min);
            let predicted = if kind == MonitorKind::Enhanced {
                format!("{}/{}", r.predicted, r.windows)
            } else {
                "-".into()
            };
            println!(
                "{:<16} {:<19} {:>8.3} {:>7.3} {:>8.0} {:>11.5} {:>10}",
                name,
                kind.label(),
                mean,
                min,
                r.regions,
                r.cpu,
                predicted
            );
        }
    }
}
