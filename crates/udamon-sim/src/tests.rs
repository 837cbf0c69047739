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
        ("duration = 2\n", "line 1, column 12: invalid type"),
    ];
    for (spec, want) in cases {
        let err = Workload::from_toml(spec, "t").unwrap_err().to_string();
        assert!(
            err.contains(want),
            "spec {spec:?}\n got: {err}\nwant: {want}"
        );
    }
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
