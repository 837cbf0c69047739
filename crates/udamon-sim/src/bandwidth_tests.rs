//! Node bandwidth (docs/sim-spec.md, "Bandwidth"): unlimited changes
//! nothing, a saturated node slows its accesses down, and spreading the
//! same accesses over two nodes costs less when one of them saturates.

use udamon_core::schemes::AccessPattern;

use super::*;
use crate::model::Model;

/// One 64 MiB object (16,384 pages: 1 MiB moved per access per page) on
/// node 0, accessed `rate` times per page per second for a second, on two
/// nodes: 100 ns and `bw0`, 200 ns and `bw1` (absent: unlimited).
fn spec(rate: f64, bw0: Option<&str>, bw1: Option<&str>) -> String {
    let bw = |b: Option<&str>| b.map_or(String::new(), |b| format!("bandwidth = \"{b}\"\n"));
    format!(
        r#"
        duration = "1s"
        [machine]
        [[machine.node]]
        capacity = "1G"
        latency = "100ns"
        {}
        [[machine.node]]
        capacity = "1G"
        latency = "200ns"
        {}
        [[layout]]
        object = "hot"
        size = "64M"
        [[phase]]
        duration = "1s"
        [[phase.access]]
        object = "hot"
        rate = {rate}
        "#,
        bw(bw0),
        bw(bw1)
    )
}

/// Runs `spec` for a second, first migrating the object by `dests` when
/// given; the machine's figures.
fn run(spec: &str, dests: Option<Vec<Dest>>) -> SimMetrics {
    let model = Model::new(Workload::from_toml(spec, "test").unwrap());
    let mut m = Machine::new(&model.workload);
    if let Some(dests) = dests {
        let mut s = Damos::new(AccessPattern::default(), Action::MigrateHot);
        s.dests = dests;
        let r = model.workload.objects[0].range;
        m.apply(&model, r, &s, 0);
    }
    m.advance_to(&model, 1_000_000);
    m.metrics()
}

fn three_to_one() -> Option<Vec<Dest>> {
    Some(vec![
        Dest { node: 0, weight: 3 },
        Dest { node: 1, weight: 1 },
    ])
}

/// Mean time of one access (ns): node 0's latency plus the extra.
fn mean_ns(m: &SimMetrics) -> f64 {
    let a: f64 = m.node_accesses.iter().sum();
    100.0 + m.access_extra_us * 1e3 / a
}

#[test]
fn queueing_factor_is_m_m_1_then_proportional_and_continuous() {
    assert_eq!(queueing_factor(0.0), 1.0);
    assert_eq!(queueing_factor(0.5), 2.0);
    let below = queueing_factor(RHO_KNEE);
    let above = queueing_factor(RHO_KNEE + 1e-12);
    assert!((below - 20.0).abs() < 1e-9 && (above - below).abs() < 1e-6);
    assert!((queueing_factor(2.0) - 2.0 * 20.0 / RHO_KNEE).abs() < 1e-9);
    let mut last = 0.0;
    for i in 0..400 {
        let f = queueing_factor(i as f64 / 100.0);
        assert!(f > last, "{i}");
        last = f;
    }
}

#[test]
fn unlimited_bandwidth_changes_nothing() {
    let none = run(&spec(128.0, None, None), three_to_one());
    assert!(none.node_bandwidth_wait_us.is_empty());
    // Nor does the machine's output change: the key is left out.
    let text = toml::to_string(&none).unwrap();
    assert!(!text.contains("bandwidth"), "{text}");
    // What node latency alone costs: a quarter of the accesses at 100 ns more.
    let a: f64 = none.node_accesses.iter().sum();
    assert!((a - 16_384.0 * 128.0).abs() < 1e-3, "{a}");
    assert!(
        (none.access_extra_us - a / 4.0 * 0.1).abs() < 1e-3,
        "{none:?}"
    );
    // A bandwidth far above the demand: the same machine, to rounding.
    let huge = run(&spec(128.0, Some("1P/s"), Some("1P/s")), three_to_one());
    assert_eq!(
        (none.node_used_bytes.clone(), none.node_accesses.clone()),
        (huge.node_used_bytes.clone(), huge.node_accesses.clone())
    );
    assert!((huge.runtime_s - none.runtime_s).abs() < 1e-6, "{huge:?}");
    assert_eq!(huge.node_bandwidth_wait_us.len(), 2);
}

#[test]
fn a_saturated_node_slows_its_accesses() {
    // 64 MiB/s on node 0: rate 32 is utilisation 0.5, 128 is 2.
    for (rate, rho) in [(32.0, 0.5), (128.0, 2.0)] {
        let m = run(&spec(rate, Some("64M/s"), None), None);
        let a = 16_384.0 * rate;
        let want = a * 0.1 * (queueing_factor(rho) - 1.0);
        assert!(
            (m.access_extra_us - want).abs() < 1e-6 * want,
            "{rate}: {} against {want}",
            m.access_extra_us
        );
        assert_eq!(m.node_bandwidth_wait_us[0], m.access_extra_us);
        assert!(m.runtime_s > 1.0, "{m:?}");
    }
    // Without the limit the same run takes its duration.
    let free = run(&spec(128.0, None, None), None);
    assert_eq!(free.runtime_s, 1.0);
}

#[test]
fn spreading_over_two_nodes_costs_less_only_when_one_saturates() {
    // Node 0 64 MiB/s, node 1 a third of it and twice node 0's latency.
    let (b0, b1) = (Some("64M/s"), Some("21.33M/s"));
    // Saturated on node 0 alone (utilisation 1): 3:1 brings both to 0.75.
    let heavy = spec(64.0, b0, b1);
    let (one, spread) = (run(&heavy, None), run(&heavy, three_to_one()));
    assert_eq!(spread.node_used_bytes, vec![48 << 20, 16 << 20]);
    let (t1, t2) = (mean_ns(&one), mean_ns(&spread));
    assert!(t2 < t1 / 2.0, "{t1} ns on node 0 alone, {t2} ns spread");
    assert!(spread.runtime_s < one.runtime_s);
    // Far from saturation (utilisation 0.125), node 1's latency decides:
    // everything on node 0 is faster.
    let light = spec(8.0, b0, b1);
    let (one, spread) = (run(&light, None), run(&light, three_to_one()));
    let (t1, t2) = (mean_ns(&one), mean_ns(&spread));
    assert!(t1 < t2, "{t1} ns on node 0 alone, {t2} ns spread");
    assert!(one.runtime_s < spread.runtime_s);
}

#[test]
fn bandwidth_is_read_with_the_unit_grammar() {
    let w = Workload::from_toml(&spec(1.0, Some("40GB/s"), Some("1G/100ms")), "t").unwrap();
    let g = (1u64 << 30) as f64;
    assert_eq!(w.machine.nodes[0].bandwidth, Some(40.0 * g));
    assert_eq!(w.machine.nodes[1].bandwidth, Some(10.0 * g));
    let e = Workload::from_toml(&spec(1.0, Some("40GB"), None), "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("SIZE/DURATION") && e.contains("line"), "{e}");
}
