//! Properties: the normalised form reads back to the same schemes, and
//! `parse` never panics, on arbitrary text or on damaged valid files.

use proptest::prelude::*;
use udamon_core::schemes::{
    AccessPattern, Action, Damos, Dest, Filter, FilterKind, GoalMetric, GoalTuner, Quota,
    QuotaGoal, QuotaWeights, WatermarkMetric, Watermarks,
};
use udamon_scheme_file::{describe, parse, to_damo, to_json, to_toml, Format};

/// Values near the edges as well as anywhere.
fn u64_edge() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        (0u64..1 << 20),
        (0u64..1 << 30).prop_map(|v| v * 4096),
        (0u64..100_000).prop_map(|v| v * 1_000_000),
        any::<u64>(),
    ]
}

fn sorted<T: Ord>(a: T, b: T) -> (T, T) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

fn pattern() -> impl Strategy<Value = AccessPattern> {
    (
        u64_edge(),
        u64_edge(),
        0u32..=10_000,
        0u32..=10_000,
        u64_edge(),
        u64_edge(),
    )
        .prop_map(|(a, b, c, d, e, f)| {
            let (min_sz, max_sz) = sorted(a, b);
            let (min_freq_bp, max_freq_bp) = sorted(c, d);
            let (min_age_us, max_age_us) = sorted(e, f);
            AccessPattern {
                min_sz,
                max_sz,
                min_freq_bp,
                max_freq_bp,
                min_age_us,
                max_age_us,
            }
        })
}

fn goal() -> impl Strategy<Value = QuotaGoal> {
    let metric = prop::sample::select(GoalMetric::ALL.to_vec());
    (
        metric,
        u64_edge(),
        u64_edge(),
        any::<u32>(),
        "/[a-z0-9./-]{0,12}",
    )
        .prop_map(
            |(metric, target_value, current_value, nid, path)| QuotaGoal {
                metric,
                target_value,
                current_value,
                nid,
                path: metric.needs_memcg().then_some(path),
            },
        )
}

fn quota() -> impl Strategy<Value = Quota> {
    (
        u64_edge(),
        u64_edge(),
        u64_edge(),
        any::<(u32, u32, u32)>(),
        prop::collection::vec(goal(), 0..3),
        prop_oneof![Just(GoalTuner::Consist), Just(GoalTuner::Temporal)],
        prop_oneof![Just((0, 0)), (u64_edge(), 1..=u64::MAX)],
    )
        .prop_map(
            |(ms, sz, reset_interval_ms, (a, b, c), goals, goal_tuner, (num, denom))| Quota {
                fail_charge_num: num,
                fail_charge_denom: denom,
                ms,
                sz,
                reset_interval_ms,
                weights: QuotaWeights {
                    sz: a,
                    nr_accesses: b,
                    age: c,
                },
                goals,
                goal_tuner,
            },
        )
}

fn watermarks() -> impl Strategy<Value = Watermarks> {
    (
        prop_oneof![
            Just(WatermarkMetric::None),
            Just(WatermarkMetric::FreeMemRate)
        ],
        u64_edge(),
        any::<[u32; 3]>(),
    )
        .prop_map(|(metric, interval_us, mut levels)| {
            levels.sort_unstable();
            Watermarks {
                metric,
                interval_us,
                high: levels[2],
                mid: levels[1],
                low: levels[0],
            }
        })
}

fn filter() -> impl Strategy<Value = Filter> {
    let kind = prop_oneof![
        (any::<u64>(), any::<u64>()).prop_filter_map("empty range", |(a, b)| {
            let (start, end) = sorted(a, b);
            (start < end).then_some(FilterKind::Addr { start, end })
        }),
        any::<u32>().prop_map(|idx| FilterKind::Target { idx }),
        Just(FilterKind::Anon),
        Just(FilterKind::Young),
        ".+".prop_map(|path| FilterKind::Memcg { path }),
        (u64_edge(), u64_edge()).prop_map(|(a, b)| {
            let (min, max) = sorted(a, b);
            FilterKind::HugepageSize { min, max }
        }),
        Just(FilterKind::Unmapped),
        Just(FilterKind::Active),
    ];
    (kind, any::<bool>(), any::<bool>()).prop_map(|(kind, matching, allow)| Filter {
        kind,
        matching,
        allow,
    })
}

fn damos() -> impl Strategy<Value = Damos> {
    (
        pattern(),
        prop::sample::select(Action::ALL.to_vec()),
        u64_edge(),
        prop_oneof![Just(Quota::default()), quota()],
        prop_oneof![Just(Watermarks::default()), watermarks()],
        prop::collection::vec(filter(), 0..4),
        prop::option::of(any::<u32>()),
        prop::collection::btree_map(any::<u32>(), 1..=u32::MAX, 0..4),
        prop_oneof![Just(0), u64_edge()],
    )
        .prop_map(
            |(
                pattern,
                action,
                apply_interval_us,
                quota,
                watermarks,
                filters,
                target_nid,
                dests,
                max_nr_snapshots,
            )| Damos {
                pattern,
                action,
                apply_interval_us,
                quota,
                watermarks,
                filters,
                target_nid,
                dests: dests
                    .into_iter()
                    .map(|(node, weight)| Dest { node, weight })
                    .collect(),
                max_nr_snapshots,
            },
        )
}

/// A valid file of each kind, to damage.
fn corpus() -> Vec<String> {
    let mut d = Damos::new(
        AccessPattern {
            min_sz: 4096,
            ..AccessPattern::default()
        },
        Action::Pageout,
    );
    d.quota.sz = 128 << 20;
    d.quota.reset_interval_ms = 1000;
    d.quota.goals.push(QuotaGoal {
        metric: GoalMetric::NodeMemFreeBp,
        target_value: 2000,
        current_value: 0,
        nid: 0,
        path: None,
    });
    d.watermarks = Watermarks {
        metric: WatermarkMetric::FreeMemRate,
        interval_us: 5_000_000,
        high: 500,
        mid: 400,
        low: 200,
    };
    d.filters.push(Filter {
        kind: FilterKind::Addr {
            start: 4096,
            end: 8192,
        },
        matching: true,
        allow: false,
    });
    d.filters.push(Filter {
        kind: FilterKind::Memcg { path: "/a".into() },
        matching: true,
        allow: true,
    });
    vec![
        "# ethp\nmin max 5 max min max hugepage\n2M max min min 7 s max nohugepage\n4K max 0 0 5s max pageout\n".into(),
        "na 500M 90 99 100ms mlock\n2MB max 80% max 1m max thp\n".into(),
        to_toml(std::slice::from_ref(&d)),
        to_json(std::slice::from_ref(&d)).to_string(),
        r#"{"kdamonds": [{"contexts": [{"schemes": [{"action": "pageout", "access_pattern": {"sz_bytes": {"min": "4.000 KiB", "max": "max"}, "nr_accesses": {"min": "0 %", "max": "0 %"}, "age": {"min": "2 m", "max": "max"}}, "quotas": {"time_ms": "10 ms", "sz_bytes": "128.000 MiB", "reset_interval_ms": "1 s", "goals": [{"metric": "some_mem_psi_us", "target_value": "1,000", "current_value": "0"}], "weights": {"sz_permil": "0 %", "nr_accesses_permil": "100 %", "age_permil": "100 %"}}, "watermarks": {"metric": "free_mem_rate", "interval_us": "5 s", "high_permil": "50 %", "mid_permil": "40 %", "low_permil": "20 %"}, "filters": [{"filter_type": "addr", "matching": true, "allow": false, "address_range": {"start": "4,096", "end": "8,192"}}]}]}]}]}"#.into(),
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, String),
    Duplicate(usize, usize),
    Replace(usize, char),
}

fn edit() -> impl Strategy<Value = Edit> {
    let piece = prop_oneof![
        Just("[".to_string()),
        Just("]]".to_string()),
        Just("{".to_string()),
        Just("\"".to_string()),
        Just(" = ".to_string()),
        Just(",".to_string()),
        Just("\n".to_string()),
        Just("max".to_string()),
        Just("0x".to_string()),
        Just("%".to_string()),
        Just("99999999999999999999999".to_string()),
        Just("\\u".to_string()),
        Just("#".to_string()),
        ".{0,4}",
    ];
    prop_oneof![
        (any::<usize>(), 0usize..8).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), piece).prop_map(|(a, s)| Edit::Insert(a, s)),
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Edit::Duplicate(a, n)),
        (any::<usize>(), any::<char>()).prop_map(|(a, c)| Edit::Replace(a, c)),
    ]
}

/// Applies an edit on character boundaries.
fn apply(s: &str, e: &Edit) -> String {
    let chars: Vec<char> = s.chars().collect();
    let at = |a: usize| {
        if chars.is_empty() {
            0
        } else {
            a % (chars.len() + 1)
        }
    };
    let mut out = chars.clone();
    match e {
        Edit::Delete(a, n) => {
            let a = at(*a);
            out.drain(a..(a + n).min(chars.len()));
        }
        Edit::Insert(a, p) => {
            let a = at(*a);
            out.splice(a..a, p.chars());
        }
        Edit::Duplicate(a, n) => {
            let a = at(*a);
            let piece: Vec<char> = chars[a..(a + n).min(chars.len())].to_vec();
            out.splice(a..a, piece);
        }
        Edit::Replace(a, c) => {
            if !chars.is_empty() {
                out[a % chars.len()] = *c;
            }
        }
    }
    out.into_iter().collect()
}

const FORMATS: [Option<Format>; 4] = [
    None,
    Some(Format::Text),
    Some(Format::Toml),
    Some(Format::Json),
];

proptest! {
    // PROPTEST_CASES raises the count for a longer local run
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
    ))]

    #[test]
    fn toml_round_trips(schemes in prop::collection::vec(damos(), 0..4)) {
        let toml = to_toml(&schemes);
        let back = parse(&toml, "rt.toml", Some(Format::Toml));
        prop_assert_eq!(back.as_ref(), Ok(&schemes), "{}", toml);
        // detection finds TOML too (an empty list is an empty text file)
        prop_assert_eq!(parse(&toml, "rt", None), Ok(schemes));
    }

    #[test]
    fn json_round_trips(schemes in prop::collection::vec(damos(), 0..4)) {
        let json = to_json(&schemes).to_string();
        let back = parse(&json, "rt.json", None);
        prop_assert_eq!(back.as_ref(), Ok(&schemes), "{}", json);
    }

    #[test]
    fn damo_round_trips(schemes in prop::collection::vec(damos(), 0..4)) {
        // What damo can say of them (kernel DAMON's parts) comes back whole.
        if let Ok(v) = to_damo(&schemes) {
            let json = v.to_string();
            let back = parse(&json, "rt-damo.json", Some(Format::Json));
            prop_assert_eq!(back.as_ref(), Ok(&schemes), "{}", json);
        }
    }

    #[test]
    fn describe_is_one_line(s in damos()) {
        let line = describe(&s);
        prop_assert!(!line.contains('\n'));
        prop_assert!(line.starts_with(s.action.name()));
    }

    #[test]
    fn parse_never_panics_on_text(src in ".{0,200}") {
        for f in FORMATS {
            let _ = parse(&src, "fuzz", f);
        }
    }

    #[test]
    fn parse_never_panics_on_damaged_files(
        which in 0usize..5,
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let mut src = corpus()[which].clone();
        for e in &edits {
            src = apply(&src, e);
        }
        for f in FORMATS {
            if let Err(e) = parse(&src, "fuzz", f) {
                // errors stay one line and point inside the text
                let msg = e.to_string();
                prop_assert!(!msg.contains('\n'), "{}", msg);
                prop_assert!(e.line >= 1 && e.line <= src.lines().count() + 1, "{:?} in {:?}", e, src);
            }
        }
    }
}

#[test]
fn corpus_is_valid() {
    for src in corpus() {
        let schemes = parse(&src, "corpus", None).unwrap_or_else(|e| panic!("{e}\n{src}"));
        assert!(!schemes.is_empty());
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for (open, format) in [
        ("[", Format::Json),
        ("{\"a\":", Format::Json),
        ("a = ", Format::Toml),
        ("x = [", Format::Toml),
    ] {
        let src = open.repeat(100_000);
        assert!(parse(&src, "deep", Some(format)).is_err());
    }
    let src = "[".repeat(100_000);
    assert!(parse(&src, "deep", None).is_err());
}

/// The fuzz target's seed corpus (first byte: the format) stays valid.
#[test]
fn fuzz_seeds_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/parse");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with("seed-") {
            continue;
        }
        let data = std::fs::read_to_string(entry.path()).unwrap();
        let format = match data.as_bytes()[0] % 4 {
            0 => None,
            1 => Some(Format::Text),
            2 => Some(Format::Toml),
            _ => Some(Format::Json),
        };
        let schemes = parse(&data[1..], &name, format).unwrap_or_else(|e| panic!("{e}"));
        assert!(!schemes.is_empty(), "{name}");
        n += 1;
    }
    assert!(n >= 5);
}
