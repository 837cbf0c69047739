//! The bench's simulated runs: udamon-session's driver, the progress of
//! each run reported through the sink.

use std::path::Path;

use udamon_core::Attrs;
use udamon_session::sim::{self, Hooks, RunSummary, Setup, SimError, SimRun};
use udamon_sim::MonitorKind;

use crate::Sink;

/// A bench's simulated run: no schemes, no seed but the spec's, the
/// kernel's soft-dirty reset.
pub(crate) fn bench_run<'a>(
    spec: &'a str,
    origin: &'a str,
    duration_us: Option<u64>,
    attrs: Attrs,
    kind: MonitorKind,
    score: bool,
) -> SimRun<'a> {
    SimRun {
        duration_us,
        setup: Setup {
            kind,
            ..Setup::adaptive(attrs)
        },
        score,
        ..SimRun::new(spec, origin)
    }
}

/// Runs `run` to its end (writing a record to `out`), its progress
/// reported to `sink`.
pub(crate) fn run(
    run: &SimRun,
    out: Option<&Path>,
    sink: &mut dyn Sink,
) -> Result<RunSummary, SimError> {
    let mut progress = |done: u64, total: u64| sink.progress(done, total);
    let hooks = Hooks {
        progress: Some(&mut progress),
        ..Hooks::default()
    };
    let s = sim::run(run, out, hooks);
    sink.progress_end();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen {
        progress: Vec<(u64, u64)>,
        ends: usize,
    }

    impl Sink for Seen {
        fn line(&mut self, _: &str) {}
        fn note(&mut self, _: &str) {}
        fn progress(&mut self, done: u64, total: u64) {
            self.progress.push((done, total));
        }
        fn progress_end(&mut self) {
            self.ends += 1;
        }
    }

    #[test]
    fn a_run_reports_its_progress_from_0_to_its_duration_then_ends() {
        let mut seen = Seen::default();
        let r = bench_run(
            udamon_sim::DEMO_SPEC,
            "demo",
            Some(2_000_000),
            Attrs::default(),
            MonitorKind::Adaptive,
            true,
        );
        let s = run(&r, None, &mut seen).unwrap();
        assert!(s.accuracy.is_some() && s.snapshots == 20, "{}", s.snapshots);
        assert_eq!(seen.progress.first(), Some(&(0, 2_000_000)));
        assert_eq!(seen.progress.last(), Some(&(2_000_000, 2_000_000)));
        assert_eq!(seen.progress.len(), 21);
        assert_eq!(seen.ends, 1);
        // A run that cannot be made ends its progress too.
        let mut r = bench_run(
            udamon_sim::DEMO_SPEC,
            "demo",
            Some(2_000_000),
            Attrs::default(),
            MonitorKind::FullScan,
            true,
        );
        r.setup.schemes =
            udamon_scheme_file::parse("4K max 0 0 10m max pageout", "x", None).unwrap();
        match run(&r, None, &mut seen) {
            Err(e) => assert!(e.to_string().contains("not --full-scan"), "{e}"),
            Ok(_) => panic!("schemes ran on the full scan"),
        }
        assert_eq!(seen.ends, 2);
    }
}
