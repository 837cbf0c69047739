//! The tuner and the replay over small simulated workloads.

use udamon_core::Attrs;
use udamon_record::{Header, Reader, SimInfo, Writer};
use udamon_tune::replay::{from_record, from_snapshots, ReplayOptions};
use udamon_tune::{tune, Domain, Knob, Runner, ScoreFn, SimRunner, TuneConfig};

/// Hot, cold, a table used about every 5 s, and a buffer used for half a
/// second every 6 s: 20 s.
const SPEC: &str = r#"
duration = "20s"
seed = 4
[[layout]]
object = "hot"
size = "32M"
[[layout]]
object = "cold"
size = "128M"
[[layout]]
object = "table"
size = "64M"
[[layout]]
object = "buffer"
size = "64M"
[[phase]]
duration = "500ms"
[[phase.access]]
object = "hot"
rate = 400
[[phase.access]]
object = "table"
rate = 0.2
[[phase.access]]
object = "buffer"
rate = 40
[[phase]]
duration = "5500ms"
[[phase.access]]
object = "hot"
rate = 400
[[phase.access]]
object = "table"
rate = 0.2
"#;

fn prcl(min_age: &str) -> Vec<udamon_core::schemes::Damos> {
    udamon_scheme_file::parse(&format!("4K max min min {min_age} max pageout"), "t", None).unwrap()
}

fn runner() -> SimRunner {
    SimRunner::from_spec(SPEC, "spec", None, None, Attrs::default()).unwrap()
}

#[test]
fn same_seed_same_samples() {
    let cfg = TuneConfig {
        knob: Knob::default(),
        domain: Domain::new(0.0, 15e6, 1e6).unwrap(),
        samples: 5,
        seed: 9,
        trust_fit: false,
    };
    let schemes = prcl("5s");
    let run = |seed: u64| {
        let c = TuneConfig { seed, ..cfg };
        let t = tune(
            &schemes,
            &c,
            &mut runner(),
            &mut ScoreFn::default(),
            &mut |_, _| {},
        )
        .unwrap();
        t.samples
            .iter()
            .map(|s| (s.value, s.score, s.stage))
            .collect::<Vec<_>>()
    };
    let a = run(9);
    assert_eq!(a.len(), 5);
    assert_eq!(a.iter().filter(|s| s.2 == "global").count(), 3);
    assert_eq!(a, run(9));
    assert_ne!(
        a.iter().map(|s| s.0).collect::<Vec<_>>(),
        run(10).iter().map(|s| s.0).collect::<Vec<_>>()
    );
}

/// A record of the scheme-less run, replayed: the predicted average RSS
/// under a reclamation scheme (min_age 1-12 s) is within 10% of the
/// scheme-less RSS of the real one (measured: +3.4% to +8.3%), the runtime
/// within 5% (measured: -1.6% to +3.6%). min_age 0 is replay's weak case
/// (docs/tuning.md): RSS still within 1%, runtime 26% over.
#[test]
fn replay_of_a_known_spec_predicts_its_rss() {
    let mut real = runner();
    let (base, snaps) = real.run_keep(&[]).unwrap();
    // Through a record file's bytes, as `udamon replay` reads it.
    let mut header = Header::new("sim", Attrs::default());
    header.sim = Some(SimInfo {
        spec_toml: SPEC.into(),
        seed: real.seed(),
        monitor: "adaptive".into(),
    });
    let mut w = Writer::new(Vec::new(), &header).unwrap();
    for s in &snaps {
        w.push_snapshot(s).unwrap();
    }
    let r = Reader::from_bytes(w.finish().unwrap()).unwrap();
    let replay = from_record(&r, "rec", &ReplayOptions::default()).unwrap();
    assert_eq!(replay.seed, Some(4));
    assert_eq!(replay.stats.snapshots, 200);
    assert!(replay.stats.phases >= 4, "{:?}", replay.stats); // at least the buffer's bursts
    let mut synth = SimRunner::new(replay.workload.clone(), replay.attrs, 4, "replay");
    let pbase = synth.run(&[]).unwrap();
    // Populated objects, no limit: the scheme-less RSS is exact.
    assert_eq!(pbase.rss_avg_bytes, base.rss_avg_bytes);
    for age in ["1s", "2s", "3s", "5s", "8s", "12s"] {
        let want = real.run(&prcl(age)).unwrap();
        let got = synth.run(&prcl(age)).unwrap();
        let err = (got.rss_avg_bytes - want.rss_avg_bytes) / base.rss_avg_bytes;
        assert!(err.abs() < 0.10, "min_age {age}: rss {got:?} vs {want:?}");
        let rt = got.runtime_s / want.runtime_s - 1.0;
        assert!(
            rt.abs() < 0.05,
            "min_age {age}: runtime {} vs {}",
            got.runtime_s,
            want.runtime_s
        );
    }
    // Without the spec's layout, the monitored ranges become the objects.
    let (w2, _) = from_snapshots(&snaps, None, "bare", &ReplayOptions::default()).unwrap();
    let mapped: u64 = w2.objects.iter().map(|o| o.range.sz()).sum();
    assert!(mapped >= 288 << 20, "{mapped}");
}
