use udamon_core::schemes::{AccessPattern, Filter};

use super::*;
use crate::model::Model;

const M: u64 = 1 << 20;
const PAGES_64M: f64 = (64 * M / 4096) as f64;

struct Sim {
    model: Model,
    m: Machine,
}

impl Sim {
    fn new(spec: &str) -> Sim {
        let model = Model::new(Workload::from_toml(spec, "test").unwrap());
        let m = Machine::new(&model.workload);
        Sim { model, m }
    }

    fn obj(&self, name: &str) -> AddrRange {
        self.model
            .workload
            .objects
            .iter()
            .find(|o| o.name == name)
            .unwrap()
            .range
    }

    fn run_to(&mut self, t_us: u64) {
        self.m.advance_to(&self.model, t_us);
    }

    fn apply(&mut self, obj: &str, scheme: &Damos, now: u64) -> ApplyOutcome {
        let r = self.obj(obj);
        self.m.apply(&self.model, r, scheme, now)
    }

    fn act(&mut self, obj: &str, action: Action, now: u64) -> ApplyOutcome {
        self.apply(obj, &Damos::new(AccessPattern::default(), action), now)
    }

    fn resident(&self, obj: &str) -> f64 {
        self.m.resident_in(self.obj(obj))
    }

    fn metrics(&self) -> SimMetrics {
        self.m.metrics()
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

/// Two 64 MiB objects: `a` idle for 2 s then hot, `b` always warm.
const COLD_THEN_HOT: &str = r#"
    duration = "4s"
    [machine]
    fault_latency = "30us"
    [[layout]]
    object = "a"
    size = "64M"
    [[layout]]
    object = "b"
    size = "64M"
    [[phase]]
    duration = "2s"
    [[phase.access]]
    object = "b"
    rate = 100
    [[phase]]
    duration = "2s"
    [[phase.access]]
    object = "a"
    rate = 1000
    [[phase.access]]
    object = "b"
    rate = 100
"#;

#[test]
fn a_scheme_less_run_of_a_populated_spec_takes_its_duration() {
    let mut s = Sim::new(crate::DEMO_SPEC);
    s.run_to(40_000_000);
    let m = s.metrics();
    assert_eq!(m.runtime_s, 40.0);
    assert_eq!(m.faults, 0);
    let mapped = s.model.workload.mapped_bytes();
    assert_eq!(
        (m.rss_bytes, m.rss_avg_bytes, m.rss_peak_bytes),
        (mapped, mapped, mapped)
    );
    assert_eq!(m.node_used_bytes, vec![mapped]);
}

#[test]
fn pageout_cuts_rss_and_a_later_touch_refaults_with_the_latency() {
    let mut s = Sim::new(COLD_THEN_HOT);
    s.run_to(1_000_000);
    assert_eq!(s.metrics().rss_bytes, 128 * M);
    let out = s.act("a", Action::Pageout, 1_000_000);
    assert_eq!(out.sz_applied, 64 * M);
    assert_eq!(out.sz_ops_filter_passed, 64 * M);
    // 10 us per 4 KiB page by default, plus the walk.
    assert!(
        close(out.cost_us as f64, PAGES_64M * 10.02, 1e-3),
        "{out:?}"
    );
    assert_eq!(s.metrics().rss_bytes, 64 * M);
    // Paging out what is already out does nothing.
    assert_eq!(s.act("a", Action::Pageout, 1_000_000).sz_applied, 0);
    s.run_to(2_000_000);
    let m = s.metrics();
    assert_eq!(
        (m.rss_bytes, m.refaults, m.swapped_bytes),
        (64 * M, 0, 64 * M)
    );
    // Phase 2 touches every page of `a` within milliseconds.
    s.run_to(4_000_000);
    let m = s.metrics();
    assert_eq!(m.refaults, PAGES_64M as u64);
    assert_eq!(m.faults, m.refaults);
    assert!(close(m.psi_some_us as f64, PAGES_64M * 30.0, 1e-6), "{m:?}");
    assert!(
        close(m.runtime_s, 4.0 + PAGES_64M * 30.0 / 1e6, 1e-6),
        "{m:?}"
    );
    assert_eq!(m.rss_bytes, 128 * M);
    // Half the time at 64 MiB, then back: the average is near 96 MiB... of
    // the time-weighted kind: 1 s at 128, 1 s at 64, then 2 s at ~128.
    let avg = m.rss_avg_bytes as f64 / M as f64;
    assert!((avg - 112.0).abs() < 0.5, "{avg}");
}

#[test]
fn paging_out_a_hot_range_refaults_every_time() {
    let mut s = Sim::new(COLD_THEN_HOT);
    for i in 0..4 {
        let t = 2_500_000 + i * 300_000;
        s.run_to(t);
        assert!(s.act("a", Action::Pageout, t).sz_applied > 63 * M);
    }
    s.run_to(4_000_000);
    let m = s.metrics();
    assert!(close(m.refaults as f64, 4.0 * PAGES_64M, 1e-3), "{m:?}");
    assert!(m.rss_avg_bytes < 128 * M);
}

/// A sparsely touched, never populated object and a densely accessed one.
fn thp_spec(thp: &str) -> String {
    format!(
        r#"
        duration = "4s"
        [machine]
        thp = "{thp}"
        [[layout]]
        object = "sparse"
        size = "64M"
        populated = false
        [[layout]]
        object = "dense"
        size = "64M"
        [[phase]]
        duration = "4s"
        [[phase.access]]
        object = "sparse"
        rate = 0.05
        [[phase.access]]
        object = "dense"
        rate = 1000
    "#
    )
}

#[test]
fn hugepage_bloats_sparse_objects_and_speeds_up_dense_ones() {
    let mut plain = Sim::new(&thp_spec("madvise"));
    plain.run_to(4_000_000);
    let plain = plain.metrics();
    // First touches of 4 KiB pages: 1 - e^-0.2 of the sparse object.
    let touched = 1.0 - (-0.2f64).exp();
    assert!(
        close(plain.faults as f64, PAGES_64M * touched, 1e-3),
        "{plain:?}"
    );
    assert!(close(
        plain.rss_bytes as f64,
        (64 * M) as f64 * (1.0 + touched),
        1e-4
    ));
    assert_eq!(plain.huge_bytes, 0);

    let mut ethp = Sim::new(&thp_spec("madvise"));
    ethp.run_to(1_000_000);
    let rss0 = ethp.resident("sparse");
    let out = ethp.act("sparse", Action::Hugepage, 1_000_000);
    assert_eq!(
        out.sz_applied,
        64 * M,
        "the hint changed for the whole range"
    );
    // About 5% of the pages were touched: every 2 MiB extent holds one.
    assert!(ethp.resident("sparse") > 63.9 * M as f64, "{rss0} -> bloat");
    assert_eq!(
        ethp.act("dense", Action::Hugepage, 1_000_000).sz_applied,
        64 * M
    );
    // Again: the hint is there, nothing left to collapse.
    assert_eq!(ethp.act("dense", Action::Hugepage, 1_000_000).sz_applied, 0);
    ethp.run_to(4_000_000);
    let ethp = ethp.metrics();
    assert_eq!(ethp.huge_bytes, 128 * M);
    assert!(ethp.rss_avg_bytes > plain.rss_avg_bytes);
    // 3 s of 1000 accesses per page per second on 16,384 pages, each 17.5 ns cheaper.
    let saved = 3.0 * 1000.0 * PAGES_64M * 0.0175e-6;
    assert!(
        close(plain.runtime_s - ethp.runtime_s, saved, 0.01),
        "{plain:?} {ethp:?}"
    );

    // THP everywhere: faster still, and the most memory.
    let mut always = Sim::new(&thp_spec("always"));
    always.run_to(4_000_000);
    let always = always.metrics();
    assert!(always.runtime_s < ethp.runtime_s, "{always:?}");
    assert!(always.rss_avg_bytes > ethp.rss_avg_bytes);
    // A huge page's first touch is one fault.
    assert!(always.faults <= 32, "{always:?}");

    // nohugepage splits them back: the memory stays until paged out.
    let mut split = Sim::new(&thp_spec("always"));
    split.run_to(1_000_000);
    let out = split.act("sparse", Action::Nohugepage, 1_000_000);
    assert_eq!(out.sz_applied, 64 * M);
    let m = split.metrics();
    assert_eq!((m.huge_bytes, m.rss_bytes), (64 * M, 128 * M));
}

#[test]
fn collapse_needs_no_hint_and_never_mode_ignores_hugepage() {
    let mut s = Sim::new(&thp_spec("never"));
    s.run_to(1_000_000);
    assert_eq!(s.act("dense", Action::Hugepage, 1_000_000).sz_applied, 0);
    assert_eq!(
        s.act("dense", Action::Collapse, 1_000_000).sz_applied,
        64 * M
    );
    assert_eq!(s.metrics().huge_bytes, 64 * M);
}

#[test]
fn ops_filters_follow_the_kernel_rules() {
    let mut s = Sim::new(&thp_spec("madvise"));
    s.run_to(1_000_000);
    s.act("dense", Action::Collapse, 1_000_000);
    // Reject young pages: the dense object is young, nothing is paged out.
    let mut pageout = Damos::new(AccessPattern::default(), Action::Pageout);
    pageout.filters = vec![Filter {
        kind: FilterKind::Young,
        matching: true,
        allow: false,
    }];
    let out = s.apply("dense", &pageout, 1_000_000);
    assert_eq!((out.sz_applied, out.sz_ops_filter_passed), (0, 0));
    // Allow only base pages: the last filter allows, so huge pages that
    // match no filter are rejected.
    pageout.filters = vec![Filter {
        kind: FilterKind::HugepageSize {
            min: 4096,
            max: 4096,
        },
        matching: true,
        allow: true,
    }];
    assert_eq!(s.apply("dense", &pageout, 1_000_000).sz_applied, 0);
    let sparse_rss = s.resident("sparse");
    let out = s.apply("sparse", &pageout, 1_000_000);
    assert!(
        (out.sz_applied as f64 - sparse_rss).abs() <= 4096.0,
        "{out:?} {sparse_rss}"
    );
    // Memcg never matches: a memcg allow filter rejects everything.
    pageout.filters = vec![Filter {
        kind: FilterKind::Memcg { path: "/a".into() },
        matching: true,
        allow: true,
    }];
    assert_eq!(s.apply("dense", &pageout, 1_000_000).sz_applied, 0);
    // Stat counts filter-passed bytes only with ops filters.
    let mut stat = Damos::new(AccessPattern::default(), Action::Stat);
    let out = s.apply("dense", &stat, 1_000_000);
    assert_eq!((out.sz_applied, out.sz_ops_filter_passed), (0, 0));
    stat.filters = vec![Filter {
        kind: FilterKind::Anon,
        matching: true,
        allow: true,
    }];
    let out = s.apply("dense", &stat, 1_000_000);
    assert_eq!((out.sz_applied, out.sz_ops_filter_passed), (0, 64 * M));
}

const TIERS: &str = r#"
    duration = "2s"
    [machine]
    access_cost = "100ns"
    [[machine.node]]
    capacity = "1G"
    [[machine.node]]
    capacity = "48M"
    latency = "300ns"
    [[layout]]
    object = "cold"
    size = "64M"
    [[layout]]
    object = "hot"
    size = "64M"
    [[phase]]
    duration = "2s"
    [[phase.access]]
    object = "hot"
    rate = 100
"#;

#[test]
fn migrate_cold_moves_what_fits_to_the_slow_node() {
    let mut s = Sim::new(TIERS);
    s.run_to(500_000);
    let mut mig = Damos::new(AccessPattern::default(), Action::MigrateCold);
    assert_eq!(
        s.apply("cold", &mig, 500_000).sz_applied,
        0,
        "no target node"
    );
    mig.target_nid = Some(1);
    let out = s.apply("cold", &mig, 500_000);
    assert_eq!(out.sz_applied, 48 * M);
    assert_eq!(s.metrics().node_used_bytes, vec![80 * M, 48 * M]);
    assert_eq!(
        s.apply("cold", &mig, 500_000).sz_applied,
        0,
        "node 1 is full"
    );
    assert_eq!(
        s.apply("hot", &mig, 500_000).sz_applied,
        0,
        "node 1 is full"
    );
    s.run_to(2_000_000);
    let m = s.metrics();
    assert_eq!(m.runtime_s, 2.0, "nothing on node 1 is accessed");
    assert_eq!(m.rss_bytes, 128 * M);
    let avg = m.node_used_avg_bytes[1] as f64 / M as f64;
    assert!((avg - 36.0).abs() < 0.01, "{avg}");

    // The hot object on the slow node pays 200 ns more per access.
    let mut s = Sim::new(&TIERS.replace("48M", "1G"));
    s.run_to(1_000_000);
    mig.action = Action::MigrateHot;
    assert_eq!(s.apply("hot", &mig, 1_000_000).sz_applied, 64 * M);
    s.run_to(2_000_000);
    let m = s.metrics();
    assert!(
        close(m.access_extra_us, 100.0 * PAGES_64M * 0.2, 1e-6),
        "{m:?}"
    );
    let used = |nid| {
        let g = QuotaGoal {
            metric: GoalMetric::NodeMemUsedBp,
            target_value: 0,
            current_value: 0,
            nid,
            path: None,
        };
        s.m.goal_metric(&g)
    };
    assert_eq!(used(1), Some(625), "64 MiB of 1 GiB");
    assert_eq!(used(2), None);
}

const LIMITED: &str = r#"
    duration = "3s"
    [machine]
    memory_limit = "160M"
    reclaim_latency = "4us"
    [[layout]]
    object = "a"
    size = "64M"
    [[layout]]
    object = "b"
    size = "64M"
    [[layout]]
    object = "c"
    size = "64M"
    populated = false
    [[phase]]
    duration = "1s"
    [[phase]]
    duration = "2s"
    [[phase.access]]
    object = "c"
    rate = 500
"#;

#[test]
fn limit_reclaim_takes_the_deprioritised_range_first() {
    let mut s = Sim::new(LIMITED);
    s.run_to(500_000);
    assert!(s.act("b", Action::LruDeprio, 500_000).sz_applied == 64 * M);
    s.run_to(3_000_000);
    assert_eq!(s.resident("a"), (64 * M) as f64);
    assert!(close(s.resident("b"), (32 * M) as f64, 1e-9));
    assert!(close(s.resident("c"), (64 * M) as f64, 1e-9));
    let m = s.metrics();
    assert_eq!(m.reclaimed_bytes, 32 * M);
    assert!(
        close(m.psi_some_us as f64, (8192 * 4) as f64, 1e-6),
        "{m:?}"
    );
    let free = s.m.free_mem_rate();
    assert_eq!(free, 0);

    // Without the hint, the lowest addresses go first among equals.
    let mut s = Sim::new(LIMITED);
    s.run_to(3_000_000);
    assert!(close(s.resident("a"), (32 * M) as f64, 1e-9));
    assert_eq!(s.resident("b"), (64 * M) as f64);
}

#[test]
fn mlock_survives_pageout_and_reclaim() {
    let mut s = Sim::new(LIMITED);
    assert_eq!(s.act("a", Action::Mlock, 0).sz_applied, 64 * M);
    assert_eq!(s.act("a", Action::Mlock, 0).sz_applied, 0);
    assert_eq!(s.act("a", Action::Pageout, 0).sz_applied, 0);
    s.run_to(3_000_000);
    assert_eq!(s.resident("a"), (64 * M) as f64);
    assert!(close(s.resident("b"), (32 * M) as f64, 1e-9));
}

#[test]
fn willneed_prefaults_a_never_populated_object() {
    let mut plain = Sim::new(LIMITED.replace("memory_limit = \"160M\"", "").as_str());
    plain.run_to(3_000_000);
    let p = plain.metrics();
    assert_eq!(p.faults, PAGES_64M as u64);
    assert_eq!(p.refaults, 0);
    assert!(
        close(p.stall_us as f64, PAGES_64M, 1e-6),
        "1 us per first touch: {p:?}"
    );

    let mut s = Sim::new(LIMITED.replace("memory_limit = \"160M\"", "").as_str());
    s.run_to(500_000);
    assert_eq!(s.act("c", Action::Willneed, 500_000).sz_applied, 64 * M);
    s.run_to(3_000_000);
    let m = s.metrics();
    assert_eq!((m.faults, m.stall_us), (0, 0));
    assert_eq!(m.runtime_s, 3.0);
}

#[test]
fn fluid_first_touches_are_exact_for_uniform_rates_and_sweeps() {
    let spec = r#"
        duration = "4s"
        [[layout]]
        object = "u"
        size = "64M"
        populated = false
        [[layout]]
        object = "w"
        size = "64M"
        populated = false
        [[phase]]
        duration = "4s"
        [[phase.access]]
        object = "u"
        rate = 1
        [[phase.access]]
        object = "w"
        rate = 100
        sweep = { width = "8M", period = "2s" }
    "#;
    let mut s = Sim::new(spec);
    s.run_to(1_000_000);
    assert!(close(
        s.resident("u"),
        (64 * M) as f64 * (1.0 - (-1.0f64).exp()),
        1e-9
    ));
    s.run_to(2_000_000);
    // After one period every page of the swept object was covered for 0.25 s.
    assert!(s.resident("w") > 63.9 * M as f64);
}

#[test]
fn goals_and_watermark_metrics() {
    let mut s = Sim::new(LIMITED);
    let g = |metric| QuotaGoal {
        metric,
        target_value: 0,
        current_value: 0,
        nid: 0,
        path: None,
    };
    // 128 MiB of 192 MiB mapped; limit 160 MiB.
    assert_eq!(s.m.goal_metric(&g(GoalMetric::RssBp)), Some(6666));
    assert_eq!(s.m.free_mem_rate(), 200);
    assert_eq!(s.m.goal_metric(&g(GoalMetric::NodeMemUsedBp)), Some(8000));
    assert_eq!(s.m.goal_metric(&g(GoalMetric::NodeMemFreeBp)), Some(2000));
    assert_eq!(s.m.goal_metric(&g(GoalMetric::UserInput)), None);
    s.act("a", Action::Pageout, 0);
    s.run_to(3_000_000);
    assert_eq!(s.m.goal_metric(&g(GoalMetric::RefaultRate)), Some(0));
    assert_eq!(
        s.m.goal_metric(&g(GoalMetric::SomeMemPsiUs)),
        Some(0),
        "c fits"
    );
}

#[test]
fn a_64_tib_space_costs_ranges_not_pages() {
    let started = std::time::Instant::now();
    let mut s = Sim::new(include_str!("../../../examples/specs/cost-64t.toml"));
    let heap = s.obj("heap");
    let half = AddrRange::new(heap.start, heap.start + heap.sz() / 2 + 12345 * 4096);
    for (i, a) in [
        Action::Pageout,
        Action::Hugepage,
        Action::LruDeprio,
        Action::Willneed,
        Action::Pageout,
        Action::Collapse,
        Action::Nohugepage,
    ]
    .into_iter()
    .enumerate()
    {
        let t = 1_000_000 + i as u64 * 3_000_000;
        s.run_to(t);
        s.m.apply(&s.model, half, &Damos::new(AccessPattern::default(), a), t);
    }
    s.run_to(30_000_000);
    let m = s.metrics();
    assert!(m.refaults > 1 << 30, "{m:?}");
    assert!(s.m.nr_cells() < 100, "{}", s.m.nr_cells());
    assert!(
        started.elapsed().as_secs_f64() < 5.0,
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn the_machine_is_deterministic() {
    let run = || {
        let mut s = Sim::new(LIMITED);
        s.run_to(1_200_000);
        s.act("a", Action::Pageout, 1_200_000);
        s.run_to(3_000_000);
        s.metrics()
    };
    assert_eq!(run(), run());
}

#[test]
fn machine_spec_errors() {
    let base = "duration = \"1s\"\n[[layout]]\nobject = \"a\"\nsize = \"4M\"\n";
    for (extra, want) in [
        (
            "[machine]\nthp = \"sometimes\"\n",
            "line 6, column 7: unknown thp mode \"sometimes\"",
        ),
        ("[machine]\nfault_latency = \"30\"\n", "has no unit"),
        ("[machine]\nhuge_tlb_factor = 0.5\n", "huge_tlb_factor 0.5"),
        (
            "[machine.action_cost]\nteleport = \"1us/4K\"\n",
            "unknown action \"teleport\"",
        ),
        (
            "[machine.action_cost]\npageout = \"1us\"\n",
            "is not TIME/SIZE",
        ),
        ("[machine]\nswap = 1\n", "unknown field `swap`"),
        ("[[machine.node]]\ncapacity = \"0\"\n", "node capacity is 0"),
    ] {
        let err = Workload::from_toml(&format!("{base}{extra}"), "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{extra:?}\n got: {err}\nwant: {want}");
    }
    let err = Workload::from_toml(
        "duration = \"1s\"\n[[layout]]\ngap = \"4M\"\npopulated = false\n",
        "t",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("a gap has no populated"), "{err}");
    let w = Workload::from_toml(
        &format!("{base}populated = false\nfile = true\n[machine]\nthp = \"always\"\nmemory_limit = \"1G\"\n[machine.action_cost]\nwalk = \"0us/4K\"\npageout = \"4us/4K\"\n"),
        "t",
    )
    .unwrap();
    assert!(!w.objects[0].populated && w.objects[0].file);
    assert_eq!(w.machine.thp, ThpMode::Always);
    assert_eq!(w.machine.memory_limit, Some(1 << 30));
    assert_eq!(w.machine.action_cost(Action::Pageout), 4.0 / 4096.0);
    assert_eq!(w.machine.walk_cost_us_per_byte, 0.0);
}

#[test]
fn migrate_to_weighted_dests_splits_memory_by_weight() {
    let mut s = Sim::new(&TIERS.replace("48M", "1G"));
    s.run_to(500_000);
    let mut mig = Damos::new(AccessPattern::default(), Action::MigrateHot);
    mig.dests = vec![
        udamon_core::schemes::Dest { node: 0, weight: 1 },
        udamon_core::schemes::Dest { node: 1, weight: 3 },
    ];
    // Everything starts on node 0: a quarter of the 2 MiB units stays,
    // three quarters move.
    let out = s.apply("hot", &mig, 500_000);
    assert_eq!(out.sz_applied, 48 * M);
    assert_eq!(s.metrics().node_used_bytes, vec![80 * M, 48 * M]);
    // Applied again, nothing is where it should not be.
    assert_eq!(s.apply("hot", &mig, 500_000).sz_applied, 0);
    // A full destination takes what fits, as with one target node.
    let mut s = Sim::new(&TIERS.replace("48M", "16M"));
    s.run_to(500_000);
    let out = s.apply("hot", &mig, 500_000);
    assert_eq!(out.sz_applied, 16 * M);
    assert_eq!(s.metrics().node_used_bytes, vec![112 * M, 16 * M]);
}

#[test]
fn active_and_inactive_goals_split_resident_memory() {
    let mut s = Sim::new(TIERS);
    s.run_to(1_900_000);
    let g = |m| s.m.goal_metric(&QuotaGoal::new(m, 0));
    let (a, i) = (g(GoalMetric::ActiveMemBp), g(GoalMetric::InactiveMemBp));
    // The hot half is accessed all along, the cold half never since it
    // was faulted in: about half of it is active.
    let (a, i) = (a.unwrap(), i.unwrap());
    assert!(a + i >= 9_999 && a + i <= 10_000, "{a} {i}");
    assert!((4_000..=6_000).contains(&a), "{a}");
    assert_eq!(
        g(GoalMetric::NodeMemcgUsedBp),
        None,
        "no memcgs in the simulator"
    );
}
