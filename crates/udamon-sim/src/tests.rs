use super::*;

fn run(
    spec: &str,
    kind: MonitorKind,
    seed: u64,
    attrs: Attrs,
) -> (Arc<Model>, Vec<udamon_core::Snapshot>) {
    let model = Arc::new(Model::new(Workload::from_toml(spec, "test").unwrap()));
    let mut mon = build_monitor(&model, attrs, seed, kind).unwrap();
    let mut snaps = Vec::new();
    while mon.now_us() < model.workload.duration_us {
        snaps.extend(mon.next_snapshot().unwrap());
    }
    (model, snaps)
}

#[test]
fn spec_errors_name_line_column_and_token() {
    let cases: &[(&str, &str)] = &[
        ("duration = \"2sx\"\n", "spec t line 1, column 12: unknown unit \"sx\" in duration \"2sx\" (expected us, ms, s, m or h)"),
        ("duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = \"4Q\"\n", "line 4, column 8: unknown unit \"Q\""),
        ("duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = \"4K\"\n[[phase]]\nduration = \"1s\"\n[[phase.access]]\nobject = \"b\"\nrate = 1\n", "line 8, column 10: unknown object \"b\" (the layout has: a)"),
        ("duration = \"2s\"\ncolour = 1\n", "line 2, column 1: unknown field `colour`"),
        ("duration = \"2s\"\n", "the layout has no object"),
        ("duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = \"6K\"\n", "not a positive multiple of the page size"),
        ("duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = \"4M\"\n[[phase]]\nduration = \"1s\"\n[[phase.access]]\nobject = \"a\"\nrange = [\"50%\", \"10%\"]\nrate = 1\n", "line 9, column 9: range"),
        ("duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = \"4M\"\n[[phase]]\nduration = \"1s\"\n[[phase.access]]\nobject = \"a\"\nrate = -1\n", "line 9, column 8: rate -1"),
        ("duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = \"4M\"\n[[phase]]\nduration = \"1s\"\n[[phase.access]]\nobject = \"a\"\nrate = 1\nsweep = { width = \"8M\", period = \"1s\" }\n", "sweep width 8388608 must be positive and at most the range size"),
        ("duration = 2\n", "line 1, column 12: duration 2 has no unit (expected a string with us, ms, s, m or h, like \"2s\")"),
        ("duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = -4096\n", "line 4, column 8: size -4096 is negative"),
        ("duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = 1.5\n", "line 4, column 8: invalid type: floating point `1.5`, expected a size like \"64M\" or a number of bytes"),
    ];
    for (spec, want) in cases {
        let err = Workload::from_toml(spec, "t").unwrap_err().to_string();
        assert!(
            err.contains(want),
            "spec {spec:?}\n got: {err}\nwant: {want}"
        );
    }
}

/// docs/sim-spec.md: "A bare number is bytes", wherever a size is written.
#[test]
fn bare_integer_sizes_are_bytes() {
    let spec = |sz: &str, gap: &str, range: &str, width: &str, extra: &str| {
        format!(
            "duration = \"2s\"\npage_size = {sz}\n{extra}[[layout]]\nobject = \"a\"\nsize = {sz}\n\
             [[layout]]\ngap = {gap}\n[[layout]]\nobject = \"b\"\nsize = \"8K\"\n[[phase]]\n\
             duration = \"1s\"\n[[phase.access]]\nobject = \"a\"\nrange = [0, {range}]\nrate = 1\n\
             sweep = {{ width = {width}, period = \"1s\" }}\n"
        )
    };
    let machine = |limit: &str| {
        format!("[machine]\nmemory_limit = {limit}\n[[machine.node]]\ncapacity = {limit}\n")
    };
    let ints = Workload::from_toml(&spec("4096", "8192", "4096", "4096", ""), "t").unwrap();
    let strs = Workload::from_toml(&spec("\"4K\"", "\"8K\"", "\"4K\"", "\"4K\"", ""), "t").unwrap();
    assert_eq!(ints, strs);
    assert_eq!(ints.objects[0].range.sz(), 4096);
    assert_eq!(
        ints.objects[1].range.start - ints.objects[0].range.end,
        8192
    );
    let ints =
        Workload::from_toml(&spec("4096", "0", "4096", "4096", &machine("1048576")), "t").unwrap();
    let strs =
        Workload::from_toml(&spec("4096", "0", "4096", "4096", &machine("\"1M\"")), "t").unwrap();
    assert_eq!(ints, strs);
}

#[test]
fn demo_spec_parses() {
    let w = Workload::from_toml(DEMO_SPEC, "demo").unwrap();
    assert_eq!(w.name, "eight-objects");
    assert_eq!(w.phases.len(), 8);
    assert_eq!(w.objects[1].range.start, DEFAULT_BASE + (72 << 20));
}

#[test]
fn adaptive_monitoring_is_accurate_on_the_demo() {
    let (model, snaps) = run(DEMO_SPEC, MonitorKind::Adaptive, 1, Attrs::default());
    let acc = accuracy(&model, &snaps, AccuracyOptions::default());
    assert!(acc.hot_f1 >= 0.85, "{acc:?}");
    assert!(acc.avg_nr_regions <= 1000.0);
}

#[test]
fn full_scan_is_near_exact() {
    let spec = r#"
        duration = "4s"
        [[layout]]
        object = "a"
        size = "16M"
        [[layout]]
        gap = "1G"
        [[layout]]
        object = "b"
        size = "16M"
        [[phase]]
        duration = "2s"
        [[phase.access]]
        object = "a"
        range = ["0%", "25%"]
        rate = 100
        [[phase]]
        duration = "2s"
        [[phase.access]]
        object = "b"
        rate = 20
        sweep = { width = "4M", period = "1s" }
    "#;
    let (model, snaps) = run(spec, MonitorKind::FullScan, 3, Attrs::default());
    let acc = accuracy(
        &model,
        &snaps,
        AccuracyOptions {
            warmup_windows: 0,
            ..Default::default()
        },
    );
    // Per-page sampling noise only: 20 Bernoulli samples per page per window.
    assert!(acc.freq_mae < 0.05, "{acc:?}");
    assert!(acc.hot_f1 > 0.9, "{acc:?}");
}

#[test]
fn full_scan_refuses_huge_spaces() {
    let spec = "duration = \"1s\"\n[[layout]]\nobject = \"a\"\nsize = \"1T\"\n";
    let model = Arc::new(Model::new(Workload::from_toml(spec, "t").unwrap()));
    let err = build_monitor(&model, Attrs::default(), 1, MonitorKind::FullScan)
        .err()
        .unwrap();
    assert!(err.to_string().contains("impractical"), "{err}");
}

#[test]
fn same_seed_same_snapshots() {
    let (_, a) = run(
        DEMO_SPEC.replace("40s", "3s").as_str(),
        MonitorKind::Adaptive,
        5,
        Attrs::default(),
    );
    let (_, b) = run(
        DEMO_SPEC.replace("40s", "3s").as_str(),
        MonitorKind::Adaptive,
        5,
        Attrs::default(),
    );
    assert_eq!(a, b);
}

#[test]
fn truth_of_an_idle_spec_is_zero_and_estimates_agree() {
    let spec = "duration = \"2s\"\n[[layout]]\nobject = \"a\"\nsize = \"64M\"\n";
    let (model, snaps) = run(spec, MonitorKind::Adaptive, 1, Attrs::default());
    let acc = accuracy(&model, &snaps, AccuracyOptions::default());
    assert_eq!(acc.freq_mae, 0.0);
    assert_eq!(acc.hot_f1, 1.0);
    assert_eq!(acc.wss_error, 0.0);
}

#[test]
fn engine_with_schemes_reports_the_machine_metrics() {
    use udamon_core::schemes::{AccessPattern, Action, Damos};
    let spec = DEMO_SPEC.replace("duration = \"40s\"", "duration = \"20s\"");
    let model = Arc::new(Model::new(Workload::from_toml(&spec, "demo").unwrap()));
    let run = |schemes: Vec<Damos>| {
        let mut e = build_engine(&model, Attrs::default(), 3, MonitorKind::Adaptive).unwrap();
        e.set_schemes(schemes);
        while e.now_us() < model.workload.duration_us {
            e.next_snapshot().unwrap();
        }
        e.ops().metrics()
    };
    let base = run(Vec::new());
    assert_eq!(base.runtime_s, base.sim_time_s, "{base:?}");
    assert_eq!(base.rss_avg_bytes, model.workload.mapped_bytes());
    // prcl: page out what was not accessed for 5 s.
    let prcl = Damos::new(
        AccessPattern {
            max_freq_bp: 0,
            min_age_us: 5_000_000,
            ..AccessPattern::default()
        },
        Action::Pageout,
    );
    let with = run(vec![prcl.clone()]);
    assert!(
        (with.rss_avg_bytes as f64) < 0.7 * base.rss_avg_bytes as f64,
        "{with:?}"
    );
    assert!(with.rss_bytes < 600 << 20, "{with:?}");
    assert!(with.runtime_s >= base.runtime_s);
    assert!(with.action_us > 0);
    assert_eq!(run(vec![prcl]), with, "same seed, same metrics");
    assert!(build_engine(&model, Attrs::default(), 3, MonitorKind::FullScan).is_err());
}

#[test]
fn schemes_keep_the_machine_small_over_a_whole_run() {
    use udamon_core::schemes::{AccessPattern, Action, Damos};
    let model = Arc::new(Model::new(Workload::from_toml(DEMO_SPEC, "demo").unwrap()));
    let mut e = build_engine(&model, Attrs::default(), 3, MonitorKind::Adaptive).unwrap();
    // The DAOS paper's ethp and prcl (its listing 3).
    let pattern = |min_sz, min_freq_bp, max_freq_bp, min_age_us| AccessPattern {
        min_sz,
        min_freq_bp,
        max_freq_bp,
        min_age_us,
        ..AccessPattern::default()
    };
    e.set_schemes(vec![
        Damos::new(pattern(0, 500, 10_000, 0), Action::Hugepage),
        Damos::new(pattern(2 << 20, 0, 0, 7_000_000), Action::Nohugepage),
        Damos::new(pattern(4096, 0, 0, 5_000_000), Action::Pageout),
    ]);
    let mut max_cells = 0;
    while e.now_us() < model.workload.duration_us {
        e.next_snapshot().unwrap();
        max_cells = max_cells.max(e.ops().nr_cells());
    }
    let m = e.ops().metrics();
    assert!(max_cells < 1000, "{max_cells}");
    assert!(
        m.huge_bytes > 0 && m.swapped_bytes > 0 && m.refaults > 0,
        "{m:?}"
    );
    assert!(m.rss_avg_bytes < model.workload.mapped_bytes() / 2, "{m:?}");
}

#[test]
fn every_example_spec_parses() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/specs");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let text = std::fs::read_to_string(&p).unwrap();
            Workload::from_toml(&text, &p.display().to_string()).unwrap();
            n += 1;
        }
    }
    assert!(n >= 7, "{n}");
}

#[test]
fn the_machine_example_under_prcl() {
    use udamon_core::schemes::{AccessPattern, Action, Damos};
    let text = include_str!("../../../examples/specs/machine.toml").replace("60s", "20s");
    let model = Arc::new(Model::new(Workload::from_toml(&text, "machine").unwrap()));
    let run = |schemes: Vec<Damos>| {
        let mut e = build_engine(&model, Attrs::default(), 1, MonitorKind::Adaptive).unwrap();
        e.set_schemes(schemes);
        while e.now_us() < model.workload.duration_us {
            e.next_snapshot().unwrap();
        }
        e.ops().metrics()
    };
    let base = run(Vec::new());
    let prcl = run(vec![Damos::new(
        AccessPattern {
            max_freq_bp: 0,
            min_age_us: 5_000_000,
            ..AccessPattern::default()
        },
        Action::Pageout,
    )]);
    assert!(prcl.rss_avg_bytes < base.rss_avg_bytes);
}

mod goals {
    use super::*;
    use udamon_core::schemes::{AccessPattern, Action, Damos, GoalMetric, Quota, QuotaGoal};
    use udamon_core::Operations;

    /// 1 GiB of data, a tenth of it hot, the rest touched now and then (each
    /// page about once in 40 s), so memory paged out too eagerly comes back.
    const MOSTLY_COLD: &str = r#"
        duration = "150s"
        seed = 11
        [[layout]]
        object = "code"
        size = "4M"
        [[layout]]
        gap = "1G"
        [[layout]]
        object = "data"
        size = "1G"
        [[layout]]
        gap = "64G"
        [[layout]]
        object = "stack"
        size = "8M"
        [[phase]]
        duration = "150s"
        [[phase.access]]
        object = "data"
        range = ["0%", "10%"]
        rate = 50
        [[phase.access]]
        object = "data"
        range = ["10%", "100%"]
        rate = 0.025
        [[phase.access]]
        object = "code"
        rate = 50
    "#;

    /// Runs pageout of idle memory steered by one goal; returns the metric
    /// read at every snapshot.
    fn steer(metric: GoalMetric, target: u64) -> Vec<(u64, u64)> {
        let model = Arc::new(Model::new(Workload::from_toml(MOSTLY_COLD, "t").unwrap()));
        let mut e = build_engine(&model, Attrs::default(), 11, MonitorKind::Adaptive).unwrap();
        let mut d = Damos::new(
            AccessPattern {
                max_freq_bp: 0,
                min_age_us: 1_000_000,
                ..AccessPattern::default()
            },
            Action::Pageout,
        );
        let goal = QuotaGoal {
            metric,
            target_value: target,
            current_value: 0,
            nid: 0,
            path: None,
        };
        d.quota = Quota {
            reset_interval_ms: 500,
            goals: vec![goal.clone()],
            ..Quota::default()
        };
        e.set_schemes(vec![d]);
        e.set_deadline(Some(model.workload.duration_us));
        let mut out = Vec::new();
        while let Some(s) = e.next_snapshot().unwrap() {
            let v = e.ops_mut().goal_metric(0, &goal, s.end_us).unwrap();
            out.push((s.end_us, v));
        }
        out
    }

    /// After `after_us`, the metric's mean is within `mean_band` of the target
    /// and every reading within `band`. (Readings swing: idle regions reach
    /// the age threshold together, are paged out together, and come back as
    /// they are touched again.)
    fn settled(trace: &[(u64, u64)], target: u64, mean_band: u64, band: u64, after_us: u64) {
        let tail: Vec<u64> = trace
            .iter()
            .filter(|(t, _)| *t >= after_us)
            .map(|(_, v)| *v)
            .collect();
        assert!(!tail.is_empty());
        let mean = tail.iter().sum::<u64>() / tail.len() as u64;
        let (lo, hi) = (tail.iter().min().unwrap(), tail.iter().max().unwrap());
        let sample: Vec<_> = trace.iter().step_by(20).collect();
        assert!(
            target.abs_diff(mean) <= mean_band,
            "mean {mean}, target {target} +- {mean_band}\n{sample:?}"
        );
        assert!(
            target.abs_diff(*lo) <= band && target.abs_diff(*hi) <= band,
            "after {after_us}us the metric ranged {lo}..{hi}, target {target} +- {band}\n{sample:?}"
        );
    }

    #[test]
    fn node_mem_free_goal_converges() {
        // 40% of node 0 free: page out about 40% of the memory, no more.
        let trace = steer(GoalMetric::NodeMemFreeBp, 4000);
        // Bounded settling: 60 s is 120 reset intervals of 500 ms.
        settled(&trace, 4000, 250, 1300, 60_000_000);
    }

    #[test]
    fn rss_goal_converges() {
        // Resident share down to 55% of the mapped size.
        let trace = steer(GoalMetric::RssBp, 5500);
        settled(&trace, 5500, 250, 1300, 60_000_000);
    }
}

/// Every monitor kind stops at its deadline: `next_snapshot` returns `None`
/// once `now_us` reaches it, so a caller that loops on it ends (the full
/// scan once ignored it, and `udamon record --full-scan` never ended).
#[test]
fn every_monitor_kind_stops_at_its_deadline() {
    let model = Arc::new(Model::new(Workload::from_toml(DEMO_SPEC, "demo").unwrap()));
    for kind in [
        MonitorKind::Adaptive,
        MonitorKind::FixedRegions(50),
        MonitorKind::FullScan,
    ] {
        let mut mon = build_monitor(&model, Attrs::default(), 1, kind).unwrap();
        mon.set_deadline(Some(1_000_000));
        let mut n = 0;
        while mon.next_snapshot().unwrap().is_some() {
            n += 1;
            assert!(n <= 10, "{}: more than 1 s of snapshots", kind.label());
        }
        assert_eq!(n, 10, "{}", kind.label());
        assert_eq!(mon.now_us(), 1_000_000, "{}", kind.label());
    }
}
