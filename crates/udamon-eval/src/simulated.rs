//! The [`SimRunner`] of `udamon eval`: simulated workloads run on session's
//! sim driver (`udamon_session::sim`), in this process.

use std::path::Path;

use udamon_core::schemes::Damos;
use udamon_core::Attrs;
use udamon_session::sim::{self, Hooks, Prepared, Setup};

use crate::{SimFigures, SimRunner};

/// Simulated workloads run on udamon's simulator, at default attributes;
/// repeat N uses the spec's seed + N.
pub struct Simulator;

impl SimRunner for Simulator {
    fn run(
        &mut self,
        spec: &Path,
        duration_us: Option<u64>,
        schemes: &[Damos],
        repeat: u32,
    ) -> Result<SimFigures, String> {
        let text = std::fs::read_to_string(spec).map_err(|e| format!("{}: {e}", spec.display()))?;
        let origin = spec.display().to_string();
        // The spec's seed (else 0) + the repeat.
        let mut p =
            Prepared::from_spec(&text, &origin, None, duration_us).map_err(|e| e.to_string())?;
        p.seed += u64::from(repeat);
        let setup = Setup {
            schemes: schemes.to_vec(),
            ..Setup::adaptive(Attrs::default())
        };
        let cpu0 = udamon_session::self_cpu_s();
        let s = sim::run_prepared(&p, &setup, false, None, Hooks::default())
            .map_err(|e| with_causes(&e))?;
        let num = |k: &str| s.metrics.get(k).and_then(|v| v.as_f64());
        Ok(SimFigures {
            runtime_s: num("runtime_s").unwrap_or(s.simulated_s),
            rss_avg_kb: num("rss_avg_bytes").map(|b| b / 1024.0),
            rss_peak_kb: num("rss_peak_bytes").map(|b| (b / 1024.0) as u64),
            faults: num("faults").map(|f| f as u64),
            cpu_s: udamon_session::self_cpu_s() - cpu0,
        })
    }
}

/// An error and each of its causes, joined by ": ".
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_error_is_said_with_its_causes() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(with_causes(&e), "outer: inner");
    }
}
