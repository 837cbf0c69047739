//! The [`SimRunner`] of `udamon eval`: simulated workloads run on session's
//! sim driver (`udamon_session::sim`), in this process.

use std::path::Path;

use udamon_core::schemes::Damos;
use udamon_core::Attrs;
use udamon_session::sim::{self, Hooks, Prepared, Setup};

use crate::{Error, SimFigures, SimRunner};

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
    ) -> Result<SimFigures, Error> {
        let text = std::fs::read_to_string(spec)
            .map_err(|e| Error::Other(format!("{}: {e}", spec.display())))?;
        let origin = spec.display().to_string();
        // The spec's seed (else 0) + the repeat.
        let mut p = Prepared::from_spec(&text, &origin, None, duration_us)
            .map_err(|e| Error::Other(e.to_string()))?;
        p.seed += u64::from(repeat);
        let setup = Setup {
            schemes: schemes.to_vec(),
            ..Setup::adaptive(Attrs::default())
        };
        let cpu0 = udamon_session::self_cpu_s();
        let s = sim::run_prepared(&p, &setup, false, None, Hooks::default())
            .map_err(|e| Error::Other(udamon_core::error_chain(&e)))?;
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
