use super::*;
use crate::spec::Workload;
use udamon_core::AddrRange;

const M: u64 = 1 << 20;

/// 64 MiB cold on node 0 (full), 64 MiB hot and 64 MiB barely touched on
/// node 1.
const SPEC: &str = r#"
duration = "20s"
[machine]
placement = "first-touch"
[[machine.node]]
capacity = "64M"
[[machine.node]]
capacity = "256M"
latency = "250ns"
[[layout]]
object = "cold"
size = "64M"
[[layout]]
object = "hot"
size = "64M"
[[layout]]
object = "rare"
size = "64M"
[[phase]]
duration = "20s"
[[phase.access]]
object = "hot"
rate = 200
[[phase.access]]
object = "rare"
rate = 0.01
"#;

fn setup(p: Numab2Params) -> (Model, Machine) {
    let model = Model::new(Workload::from_toml(SPEC, "numab").unwrap());
    let mut m = Machine::new(&model.workload);
    m.numab = Some(Numab2::new(p));
    (model, m)
}

fn on_node(m: &Machine, start: u64, node: u32) -> f64 {
    let (_, on) = m.resident_on(&[AddrRange::new(start, start + 64 * M)], node);
    on * 4096.0
}

#[test]
fn first_touch_fills_node0_then_node1() {
    let (_, m) = setup(Numab2Params::default());
    let base = crate::DEFAULT_BASE;
    assert_eq!(on_node(&m, base, 0), (64 * M) as f64);
    assert_eq!(on_node(&m, base + 64 * M, 1), (64 * M) as f64);
    assert_eq!(on_node(&m, base + 128 * M, 1), (64 * M) as f64);
}

#[test]
fn promotion_respects_the_rate_limit() {
    let limit = 4 * M;
    let (model, mut m) = setup(Numab2Params {
        rate_limit_bytes_per_s: limit,
        ..Numab2Params::default()
    });
    let mut last = 0;
    for s in 1..=10u64 {
        m.advance_to(&model, s * 1_000_000);
        let p = m.metrics().promoted_bytes;
        // At most the limit per one-second window (plus a page of rounding
        // per candidate batch).
        assert!(
            p - last <= limit + 64 * 4096,
            "second {s}: {} bytes",
            p - last
        );
        last = p;
    }
    assert!(last >= 8 * limit, "the limit is the bottleneck: {last}");
    let nb = m.numab.as_ref().unwrap();
    assert!(nb.rate_limited > 0.0);
}

#[test]
fn a_page_is_promoted_at_its_second_quick_hint_fault() {
    let (model, m) = setup(Numab2Params::default());
    let cfg = &m.cfg;
    let mut acc = Acc {
        node_used: vec![0.0; 2],
        node_accesses: vec![0.0; 2],
        ..Acc::default()
    };
    let (&start, cell) = m
        .cells
        .iter()
        .find(|(_, c)| c.node == 1 && c.resident() > 0.0)
        .unwrap();
    let mut cell = cell.clone();
    let n = (cell.end - start) as f64 / 4096.0;
    let mut h = HintCtx {
        fast: 0,
        threshold_us: 1e6,
        fault_us: 1.0,
        cands: Vec::new(),
    };
    let arm = |c: &mut Cell, t: f64| {
        c.nb_armed = c.resident();
        c.nb_arm_us = t;
    };
    // Every page accessed ~10 times: each armed page faults.
    let a = 10.0 * n;
    // First quick fault: primes, promotes nothing.
    arm(&mut cell, 0.0);
    hint_faults(&mut h, cfg, &mut acc, start, &mut cell, a, 500_000.0);
    assert!(h.cands.is_empty());
    assert!(cell.nb_primed > 0.99 * n);
    assert!(acc.hint_faults > 0.99 * n);
    // A slow fault (after the threshold) unprimes.
    let mut slow = cell.clone();
    arm(&mut slow, 1e6);
    hint_faults(&mut h, cfg, &mut acc, start, &mut slow, a, 3e6);
    assert!(h.cands.is_empty());
    assert!(slow.nb_primed < 0.01 * n);
    // A second quick fault: candidates.
    arm(&mut cell, 1e6);
    hint_faults(&mut h, cfg, &mut acc, start, &mut cell, a, 1.2e6);
    let c: f64 = h.cands.iter().map(|c| c.1).sum();
    assert!(c > 0.99 * n, "{c}");
    // Not armed: no fault at all.
    let before = acc.hint_faults;
    hint_faults(&mut h, cfg, &mut acc, start, &mut cell, a, 1.3e6);
    assert!(acc.hint_faults - before < 0.02 * n);
    let _ = model;
}

#[test]
fn hot_pages_are_promoted_rare_ones_stay_and_cold_ones_are_demoted() {
    let (model, mut m) = setup(Numab2Params::default());
    m.advance_to(&model, 20_000_000);
    let base = crate::DEFAULT_BASE;
    let hot = on_node(&m, base + 64 * M, 0);
    let rare = on_node(&m, base + 128 * M, 0);
    assert!(hot > 0.9 * (64 * M) as f64, "hot on node 0: {hot}");
    assert!(rare < 0.01 * (64 * M) as f64, "rare on node 0: {rare}");
    let me = m.metrics();
    assert!(me.demoted_bytes > 0);
    assert!(me.hint_faults > 0);
    // Node 0 never goes over its capacity.
    assert!(me.node_used_bytes[0] <= 64 * M);
}

#[test]
fn numab_is_deterministic() {
    let run = || {
        let (model, mut m) = setup(Numab2Params::default());
        m.advance_to(&model, 5_000_000);
        let me = m.metrics();
        (
            me.promoted_bytes,
            me.demoted_bytes,
            me.hint_faults,
            me.runtime_s,
        )
    };
    assert_eq!(run(), run());
}
