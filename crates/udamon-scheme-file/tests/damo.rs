//! Import of damo's JSON layout: a kdamonds dump as `damo args damon
//! --format json` prints it (formatted values), the same with raw numbers,
//! and the older flat access pattern.

use udamon_core::schemes::{
    AccessPattern, Action, Damos, Dest, Filter, FilterKind, GoalMetric, GoalTuner, Quota,
    QuotaGoal, QuotaWeights, WatermarkMetric, Watermarks,
};
use udamon_scheme_file::{parse, to_damo, Format};

const KDAMONDS: &str = r#"{
    "kdamonds": [
        {
            "state": null,
            "pid": null,
            "contexts": [
                {
                    "ops": "paddr",
                    "targets": [{"pid": null, "regions": [{"start": "4,294,967,296", "end": "68,719,476,736"}]}],
                    "intervals": {"sample_us": "5 ms", "aggr_us": "100 ms", "ops_update_us": "1 s"},
                    "nr_regions": {"min": "10", "max": "1,000"},
                    "schemes": [
                        {
                            "action": "pageout",
                            "dests": [],
                            "access_pattern": {
                                "sz_bytes": {"min": "4.000 KiB", "max": "max"},
                                "nr_accesses": {"min": "0 %", "max": "0 %"},
                                "age": {"min": "2 m", "max": "max"}
                            },
                            "apply_interval_us": "0 ns",
                            "quotas": {
                                "time_ms": "10 ms",
                                "sz_bytes": "128.000 MiB",
                                "reset_interval_ms": "1 s",
                                "goals": [
                                    {"metric": "some_mem_psi_us", "nid": null, "target_value": "1,000", "current_value": "0"},
                                    {"metric": "node_mem_free_bp", "nid": "1", "target_value": "2,000", "current_value": "0"}
                                ],
                                "effective_sz_bytes": "0 B",
                                "weights": {"sz_permil": "0 %", "nr_accesses_permil": "100 %", "age_permil": "100 %"}
                            },
                            "watermarks": {
                                "metric": "free_mem_rate",
                                "interval_us": "5 s",
                                "high_permil": "50 %",
                                "mid_permil": "40 %",
                                "low_permil": "20 %"
                            },
                            "filters": [
                                {"filter_type": "memcg", "matching": true, "allow": false, "memcg_path": "/workloads/a",
                                 "address_range": null, "damon_target_idx": null, "hugepage_size": null},
                                {"filter_type": "young", "matching": false, "allow": true, "memcg_path": "",
                                 "address_range": null, "damon_target_idx": null, "hugepage_size": null},
                                {"filter_type": "addr", "matching": true, "allow": false, "memcg_path": "",
                                 "address_range": {"start": "4,096", "end": "1,048,576"}, "damon_target_idx": null,
                                 "hugepage_size": null},
                                {"filter_type": "hugepage_size", "matching": true, "allow": false, "memcg_path": "",
                                 "address_range": null, "damon_target_idx": null, "hugepage_size": ["2.000 MiB", "2.000 MiB"]}
                            ],
                            "stats": {"nr_tried": "0", "sz_tried": "0 B", "nr_applied": "0", "sz_applied": "0 B",
                                      "sz_ops_filter_passed": "0 B", "qt_exceeds": "0"},
                            "tried_regions": []
                        },
                        {
                            "action": "migrate_hot",
                            "target_nid": 0,
                            "dests": [],
                            "access_pattern": {
                                "sz_bytes": {"min": "min", "max": "max"},
                                "nr_accesses": {"min": "5 %", "max": "100 %"},
                                "age": {"min": "0 ns", "max": "max"}
                            },
                            "apply_interval_us": "1 s"
                        }
                    ]
                }
            ]
        }
    ]
}"#;

fn prcl() -> Damos {
    let mut d = Damos::new(
        AccessPattern {
            min_sz: 4096,
            max_sz: u64::MAX,
            min_freq_bp: 0,
            max_freq_bp: 0,
            min_age_us: 120_000_000,
            max_age_us: u64::MAX,
        },
        Action::Pageout,
    );
    d.quota = Quota {
        ms: 10,
        sz: 128 << 20,
        reset_interval_ms: 1000,
        weights: QuotaWeights {
            sz: 0,
            nr_accesses: 1000,
            age: 1000,
        },
        goals: vec![
            QuotaGoal {
                metric: GoalMetric::SomeMemPsiUs,
                target_value: 1000,
                current_value: 0,
                nid: 0,
                path: None,
            },
            QuotaGoal {
                metric: GoalMetric::NodeMemFreeBp,
                target_value: 2000,
                current_value: 0,
                nid: 1,
                path: None,
            },
        ],
        goal_tuner: GoalTuner::Consist,
        ..Quota::default()
    };
    d.watermarks = Watermarks {
        metric: WatermarkMetric::FreeMemRate,
        interval_us: 5_000_000,
        high: 500,
        mid: 400,
        low: 200,
    };
    d.filters = vec![
        Filter {
            kind: FilterKind::Memcg {
                path: "/workloads/a".into(),
            },
            matching: true,
            allow: false,
        },
        Filter {
            kind: FilterKind::Young,
            matching: false,
            allow: true,
        },
        Filter {
            kind: FilterKind::Addr {
                start: 4096,
                end: 1 << 20,
            },
            matching: true,
            allow: false,
        },
        Filter {
            kind: FilterKind::HugepageSize {
                min: 2 << 20,
                max: 2 << 20,
            },
            matching: true,
            allow: false,
        },
    ];
    d
}

fn promote() -> Damos {
    let mut d = Damos::new(
        AccessPattern {
            min_freq_bp: 500,
            ..AccessPattern::default()
        },
        Action::MigrateHot,
    );
    d.target_nid = Some(0);
    d.apply_interval_us = 1_000_000;
    d
}

#[test]
fn kdamonds_dump() {
    for format in [None, Some(Format::Json)] {
        assert_eq!(
            parse(KDAMONDS, "damo.json", format).unwrap(),
            vec![prcl(), promote()]
        );
    }
}

#[test]
fn raw_numbers_and_unit_objects() {
    let src = r#"[{
        "action": "pageout",
        "access_pattern": {
            "sz_bytes": {"min": 4096, "max": 18446744073709551615},
            "nr_accesses": {"min": {"samples": 0, "percent": 0}, "max": {"samples": 0, "percent": 0}},
            "age": {"min": {"usec": 120000000, "aggr_intervals": 1200}, "max": {"usec": "max", "aggr_intervals": null}}
        },
        "apply_interval_us": 0,
        "quotas": {"time_ms": 10, "sz_bytes": 134217728, "reset_interval_ms": 1000,
                   "weights": {"sz_permil": 0, "nr_accesses_permil": 1000, "age_permil": 1000},
                   "goals": [{"target_metric": "some_mem_psi_us", "target_value": 1000, "current_value": 0},
                             {"metric": "node_mem_free_bp", "target_value": 2000, "current_value": 0, "nid": 1}]},
        "watermarks": {"metric": "free_mem_rate", "interval_us": 5000000, "high_permil": 500, "mid_permil": 400, "low_permil": 200},
        "filters": [{"type": "memcg", "matching": "yes", "filter_pass": false, "memcg_path": "/workloads/a"},
                    {"type": "young", "matching": false, "allow": true},
                    {"type": "addr", "matching": true, "allow": false, "address_range": {"start": 4096, "end": 1048576}},
                    {"type": "hugepage_size", "matching": true, "allow": false, "hugepage_size": {"min": 2097152, "max": 2097152}}]
    }]"#;
    assert_eq!(parse(src, "raw.json", None).unwrap(), vec![prcl()]);
}

#[test]
fn older_flat_pattern_and_single_dest() {
    let src = r#"{"schemes": [{
        "action": "migrate_hot",
        "access_pattern": {"min_sz_bytes": 0, "max_sz_bytes": "max", "min_nr_accesses": "5 %",
                           "max_nr_accesses": "max", "min_age": "0 ns", "max_age": "max"},
        "apply_interval_us": "1 s",
        "dests": [{"id": 0, "weight": 1}]
    }]}"#;
    let mut want = promote();
    want.target_nid = None;
    want.dests = vec![Dest { node: 0, weight: 1 }];
    assert_eq!(parse(src, "old.json", None).unwrap(), vec![want]);
}

/// Every kernel DAMON feature of 6.15 to 7.2 in damo's layout, as damo
/// 3.4 writes it, reads into the model.
#[test]
fn newer_kernel_features_import() {
    let src = r#"[{"action": "migrate_hot",
        "dests": [{"id": 0, "weight": 3}, {"id": 2, "weight": 1}],
        "access_pattern": {"sz_bytes": {"min": 4096, "max": "max"},
            "nr_accesses": {"min": "12.50 %", "max": "100 %"}, "age": {"min": 0, "max": "max"}},
        "apply_interval_us": 0,
        "quotas": {"time_ms": 0, "sz_bytes": 1073741824, "reset_interval_ms": 1000,
            "fail_charge_num": 1, "fail_charge_denom": 4,
            "goals": [
              {"metric": "node_memcg_used_bp", "complement": false, "nid": 1,
               "memcg_path": "/workload", "target_value": 3000, "current_value": 0},
              {"metric": "active_mem_bp", "complement": false, "nid": null,
               "memcg_path": null, "target_value": 5000, "current_value": 0},
              {"metric": "node_eligible_mem_bp", "nid": 0, "target_value": 7000,
               "current_value": 0}],
            "goal_tuner": "temporal", "effective_sz_bytes": 0,
            "weights": {"sz_permil": 0, "nr_accesses_permil": 0, "age_permil": 0}},
        "watermarks": {"metric": "none", "interval_us": 0, "high_permil": 0,
            "mid_permil": 0, "low_permil": 0},
        "filters": [],
        "stats": {"nr_tried": 9, "max_nr_snapshots": 30, "nr_snapshots": 2}}]"#;
    let got = parse(src, "new.json", None).unwrap();
    let s = &got[0];
    assert_eq!(
        s.dests,
        vec![Dest { node: 0, weight: 3 }, Dest { node: 2, weight: 1 }]
    );
    assert_eq!(s.pattern.min_freq_bp, 1250);
    assert_eq!((s.quota.fail_charge_num, s.quota.fail_charge_denom), (1, 4));
    let g = &s.quota.goals;
    assert_eq!(g[0].metric, GoalMetric::NodeMemcgUsedBp);
    assert_eq!((g[0].nid, g[0].path.as_deref()), (1, Some("/workload")));
    assert_eq!(
        (g[1].metric, g[1].path.as_deref()),
        (GoalMetric::ActiveMemBp, None)
    );
    assert_eq!(g[2].metric, GoalMetric::NodeEligibleMemBp);
    assert_eq!(s.quota.goal_tuner, GoalTuner::Temporal);
    assert_eq!(s.max_nr_snapshots, 30);
    // And back: damo's layout of it reads the same.
    let back = to_damo(&got).unwrap().to_string();
    assert_eq!(parse(&back, "back.json", None).unwrap(), got);
}

#[test]
fn samples_and_aggr_intervals_need_conversion() {
    let only_samples = r#"[{"action": "stat", "access_pattern": {"nr_accesses": {"min": {"samples": 3, "percent": null}, "max": "max"}}}]"#;
    let e = parse(only_samples, "d.json", None).unwrap_err();
    assert!(
        e.msg.contains("in samples") && e.expected.starts_with("percent"),
        "{e}"
    );

    let unit_samples = r#"[{"action": "stat", "access_pattern": {"nr_accesses_unit": "samples", "min_nr_accesses": 3, "max_nr_accesses": "max"}}]"#;
    let e = parse(unit_samples, "d.json", None).unwrap_err();
    assert!(e.msg.contains("in samples"), "{e}");

    let aggr = r#"[{"action": "stat", "apply_interval_us": 0, "access_pattern": {"age": {"min": "5 aggr_intervals", "max": "max"}}}]"#;
    let e = parse(aggr, "d.json", None).unwrap_err();
    assert_eq!(
        e.msg,
        r#"damo age "5 aggr_intervals" is in aggregation intervals"#
    );
}

#[test]
fn rounded_damo_sizes_are_floored() {
    let src = r#"[{"action": "stat", "access_pattern": {"sz_bytes": {"min": "1.333 MiB", "max": "max"}}}]"#;
    assert_eq!(
        parse(src, "d.json", None).unwrap()[0].pattern.min_sz,
        1_397_751
    );
}
