//! Auto-tuning of DAMOS schemes: the DAOS paper's auto-tuning runtime
//! (section 3.5), and what-if replay of records.
//!
//! Roles:
//!
//! - [`Knob`] names the number tuned (`min_age` of the first scheme by
//!   default, any pattern bound or quota number of any scheme), parses its
//!   range in its units and sets it in a copy of the schemes; [`Domain`] is
//!   the range and the grid of values tried.
//! - [`Runner`] runs a workload with schemes and returns its [`Metrics`]:
//!   [`SimRunner`] over a simulator spec today, command or pid runners later.
//! - [`ScoreFn`] turns a run's metrics into one score, relative to the
//!   scheme-less run: the paper's Listing 2 by default (performance and
//!   memory weighted 0.5 each, a 10% slowdown SLA that, when broken, scores
//!   the worst score seen), or weights, an SLA, an expression, or a command
//!   of the user's.
//! - [`Sampler`] picks the values: 60% spread at random over the range,
//!   40% in a shrinking window around the best so far; [`polyfit`] fits a
//!   least-squares polynomial of degree `samples / 3` (nalgebra SVD) and
//!   [`Fit::peaks`] finds its maxima from the derivative's sign changes.
//! - [`tune()`] is the runtime: baseline, samples, fit, the highest peak
//!   confirmed by one more run. [`sweep`] runs a grid densely.
//! - [`replay`] turns a record's snapshots into a simulator [`Workload`]
//!   (Poisson rates from `nr_accesses`, phases from merged snapshots), so
//!   [`replay_tune`] can sweep many candidates on what was observed and
//!   confirm the winner with one real run.
//! - [`classify`] names which of the paper's six score-curve patterns
//!   (Figure 3) a swept curve shows.
//! - [`plot`] draws the curve, the samples and the choice (PNG or SVG).
//!
//! The `udamon tune` and `udamon replay` commands are thin layers over
//! these; `docs/tuning.md` describes the method and its measured accuracy.
//!
//! ```
//! use udamon_core::Attrs;
//! use udamon_tune::{tune, Domain, Knob, ScoreFn, SimRunner, TuneConfig};
//!
//! // 64 MiB hot, 448 MiB never touched again: the sooner cold memory is
//! // paged out the better (the paper's first pattern).
//! let spec = r#"
//!     duration = "12s"
//!     [[layout]]
//!     object = "hot"
//!     size = "64M"
//!     [[layout]]
//!     object = "cold"
//!     size = "448M"
//!     [[phase]]
//!     duration = "12s"
//!     [[phase.access]]
//!     object = "hot"
//!     rate = 400
//! "#;
//! let schemes = udamon_scheme_file::parse("4K max min min 5s max pageout", "doc", None)?;
//! let mut runner = SimRunner::from_spec(spec, "doc", Some(1), None, Attrs::default())?;
//! let knob = Knob::default(); // min_age of scheme 0
//! let cfg = TuneConfig {
//!     knob,
//!     domain: Domain::new(0.0, 10e6, 1e6)?, // 0 s to 10 s, 1 s steps
//!     samples: 6,
//!     seed: 1,
//!     trust_fit: false,
//! };
//! let mut score = ScoreFn::default(); // Listing 2
//! let t = tune(&schemes, &cfg, &mut runner, &mut score, &mut |_, _| {})?;
//! assert_eq!(t.samples.len(), 6);
//! assert_eq!(t.fit.as_ref().unwrap().degree, 2);
//! // the earliest pageout wins: the chosen min_age is small, and it saves memory
//! assert!(t.chosen.value <= 2e6, "{}", t.chosen.display);
//! assert!(t.chosen.measured.as_ref().unwrap().score > 0.2);
//! assert_eq!(t.schemes[0].pattern.min_age_us as f64, t.chosen.value);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod bench;
mod error;
pub mod fit;
pub mod knob;
pub mod patterns;
pub mod plan;
pub mod plot;
pub mod replay;
pub mod runner;
pub mod sample;
pub mod score;
mod tune;
pub mod whatif;

pub use error::{Error, Result};
pub use fit::{degree_for, polyfit, Fit, Peak};
pub use knob::{Domain, Field, Kind, Knob};
pub use patterns::{classify, Pattern};
pub use replay::{Replay, ReplayOptions, ReplayStats};
pub use runner::{default_threads, run_all, Runner, SimRunner};
pub use sample::{Sampler, Stage};
pub use score::{Formula, Metric, Metrics, ScoreFn, ScoreOptions, Scored, Sla, METRICS};
pub use tune::{
    check, replay_tune, smoothed_best, sweep, tune, Choice, Sample, Source, TuneConfig, Tuned,
    PEAK_GRID, REPLAY_TIE,
};
pub use udamon_sim::Workload;
