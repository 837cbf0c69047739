//! What a simulated run may cost, checked before anything is allocated.
//!
//! The model never keeps state per page, but a few of its structures grow
//! with what it is given:
//!
//! - every interval it evaluates is cut into the phase instances it spans
//!   ([`Model::pieces`](crate::Model)): one entry per phase per cycle of the
//!   workload, so a sampling interval of `1000000h` over a workload whose
//!   phases repeat every few seconds lists a billion of them;
//! - the simulated machine advances in steps of at most 10 ms, so one
//!   sample costs its interval divided by 10 ms in steps;
//! - a phase's accesses are cut into spans, each listing the sweeps that
//!   cover it (quadratic in overlapping sweeps), and the ground truth
//!   cuts every sweeping span into up to 4097 points.
//!
//! [`check_bounds`] refuses attributes and workloads that would take more
//! than [`MODEL_MEMORY_BOUND`] bytes or [`MAX_STEPS_PER_SAMPLE`] machine
//! steps per sample, naming the value and the way out. Every way the crate
//! starts a run on attributes ([`build_engine`](crate::build_engine),
//! [`build_monitor`](crate::build_monitor), [`FullScan::new`](crate::FullScan),
//! [`run_tiering`](crate::run_tiering)) calls it first; the spec parser
//! checks the workload part ([`Workload::from_toml`](crate::Workload)).

use std::collections::BTreeMap;

use udamon_core::units::{fmt_time_us, human_size, Human};
use udamon_core::{AddrRange, Attrs};

use crate::machine::{Cell, MAX_STEP_US};
use crate::model::{Piece, Seg};
use crate::spec::{Phase, Sweep, Workload};
use crate::Error;

/// The most memory the simulator's model may need for a run: 1 GiB.
pub const MODEL_MEMORY_BOUND: u64 = 1 << 30;

/// Bytes as the bounds' messages write them: `1 GiB`, `21.5 GiB`.
fn format_bytes(b: u128) -> String {
    human_size(b, Human::Trimmed)
}

/// The most steps the simulated machine may take for one sample: a
/// sampling interval of at most 3 h (in steps of 10 ms).
pub const MAX_STEPS_PER_SAMPLE: u64 = 1_080_000;

/// Attributes or a workload beyond what the simulator takes on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value}: {reason}: {fix}")]
pub struct BoundsError {
    /// What is too large, as a config names it ("sampling interval").
    pub what: String,
    /// Its value as a config writes it ("1000000h").
    pub value: String,
    /// What it would cost, and the bound ("the simulator's model would
    /// need 21.5 GiB (at most 1 GiB)").
    pub reason: String,
    /// What to give instead.
    pub fix: String,
}

impl Workload {
    /// Parses and checks a spec; `origin` names it in errors (a file name).
    /// A spec whose model would not fit is refused here, at its phase's
    /// line, before anything is built on it.
    pub fn from_toml(text: &str, origin: &str) -> Result<Workload, Error> {
        let (w, places) = Workload::parse_toml(text, origin)?;
        if let Err(e) = check_workload(&w) {
            return Err(match e.phase.and_then(|i| places.get(i).map(|p| (i, p))) {
                Some((i, &(line, col, accesses))) => Error::at(
                    origin,
                    line,
                    col,
                    format!(
                        "phase {} ({accesses} accesses): {}: {}",
                        i + 1,
                        e.reason,
                        e.fix
                    ),
                ),
                None => Error::at(
                    origin,
                    0,
                    0,
                    format!("{}: {}: {}", e.subject, e.reason, e.fix),
                ),
            });
        }
        Ok(w)
    }
}

/// Checks that a run of `workload` under `attrs` stays within
/// [`MODEL_MEMORY_BOUND`] and [`MAX_STEPS_PER_SAMPLE`]: the workload's own
/// model, and the longest sampling interval the attributes allow (the
/// sampling interval, or the intervals goal's `max_sample` when the goal is
/// on). Pure: reads nothing, allocates little (O(accesses)).
pub fn check_bounds(workload: &Workload, attrs: &Attrs) -> Result<(), BoundsError> {
    check_with(workload, attrs, engine_piece_bytes())
}

/// [`check_bounds`] for the full-scan monitor, whose samples also list the
/// spans of every phase instance.
pub(crate) fn check_full_scan(workload: &Workload, attrs: &Attrs) -> Result<(), BoundsError> {
    check_with(workload, attrs, full_scan_piece_bytes(workload))
}

fn check_with(w: &Workload, attrs: &Attrs, per_piece: u128) -> Result<(), BoundsError> {
    let base = workload_bytes(w);
    if let Err(e) = check_workload(w) {
        return Err(BoundsError {
            what: "workload".into(),
            value: format!("\"{}\" ({})", w.name, e.subject),
            reason: e.reason,
            fix: e.fix,
        });
    }
    let mut intervals = vec![("sampling interval", attrs.sample_us)];
    let g = &attrs.intervals_goal;
    if g.aggrs != 0 && g.max_sample_us > attrs.sample_us {
        intervals.push(("intervals goal max_sample", g.max_sample_us));
    }
    let cycle = fmt_time_us(w.cycle_us());
    for (what, us) in intervals {
        let need = base + w.max_pieces(us) * per_piece;
        if need > u128::from(MODEL_MEMORY_BOUND) {
            return Err(BoundsError {
                what: what.into(),
                value: fmt_time_us(us),
                reason: format!(
                    "the simulator's model would need {} (at most {})",
                    format_bytes(need),
                    format_bytes(MODEL_MEMORY_BOUND.into())
                ),
                fix: format!(
                    "give a shorter interval (the model lists every phase the interval spans, \
                     and this workload's {} phases repeat every {cycle})",
                    w.phases.len()
                ),
            });
        }
        let steps = us.div_ceil(MAX_STEP_US);
        if steps > MAX_STEPS_PER_SAMPLE {
            return Err(BoundsError {
                what: what.into(),
                value: fmt_time_us(us),
                reason: format!(
                    "the simulated machine would advance {steps} steps of {} for each sample \
                     (at most {MAX_STEPS_PER_SAMPLE})",
                    fmt_time_us(MAX_STEP_US)
                ),
                fix: format!(
                    "give a shorter interval (at most {})",
                    fmt_time_us(MAX_STEPS_PER_SAMPLE * MAX_STEP_US)
                ),
            });
        }
    }
    Ok(())
}

/// Bytes per piece of an interval the engine's checks evaluate: the
/// vector of pieces, which may grow to twice its length.
fn engine_piece_bytes() -> u128 {
    2 * std::mem::size_of::<Piece>() as u128
}

/// Bytes per piece of a full-scan sample: the pieces, the spans of every
/// phase instance (with their boundaries), and the pieces kept per span.
fn full_scan_piece_bytes(w: &Workload) -> u128 {
    let max_segs = w
        .phases
        .iter()
        .map(|p| 2 * p.accesses.len() as u128)
        .max()
        .unwrap_or(0);
    2 * std::mem::size_of::<Piece>() as u128
        + max_segs * 2 * (2 * 8 + 2 * 8)
        + 2 * (8 + std::mem::size_of::<Piece>() as u128)
}

/// Why a workload's own model is too large.
pub(crate) struct WorkloadTooLarge {
    /// The phase (0-based) that alone is beyond the bound, if one is.
    pub phase: Option<usize>,
    /// What is too large ("phase 1, 6000 accesses").
    pub subject: String,
    pub reason: String,
    pub fix: String,
}

/// Checks the model of the workload itself (its spans, the sweeps listed
/// per span, the ground truth's points, the machine's cells) against
/// [`MODEL_MEMORY_BOUND`].
pub(crate) fn check_workload(w: &Workload) -> Result<(), WorkloadTooLarge> {
    let bound = u128::from(MODEL_MEMORY_BOUND);
    let reason = |need: u128| {
        format!(
            "the simulator's model would need {} (at most {})",
            format_bytes(need),
            format_bytes(bound)
        )
    };
    for (i, p) in w.phases.iter().enumerate() {
        let need = phase_bytes(p, w.page_size);
        if need > bound {
            return Err(WorkloadTooLarge {
                phase: Some(i),
                subject: format!("phase {}, {} accesses", i + 1, p.accesses.len()),
                reason: reason(need),
                fix: "give fewer accesses, or fewer sweeps overlapping one another".into(),
            });
        }
    }
    let need = workload_bytes(w);
    if need > bound {
        let accesses: usize = w.phases.iter().map(|p| p.accesses.len()).sum();
        return Err(WorkloadTooLarge {
            phase: None,
            subject: format!(
                "{} objects, {accesses} accesses in {} phases",
                w.objects.len(),
                w.phases.len()
            ),
            reason: reason(need),
            fix: "give fewer objects, phases or accesses".into(),
        });
    }
    Ok(())
}

/// The model of the workload itself, whatever the attributes: every
/// phase's spans, the machine's cells and cuts.
fn workload_bytes(w: &Workload) -> u128 {
    let phases: u128 = w.phases.iter().map(|p| phase_bytes(p, w.page_size)).sum();
    let accesses: u128 = w.phases.iter().map(|p| p.accesses.len() as u128).sum();
    // Cuts at every object and access boundary; each piece of an object
    // between two cuts is at most three cells (a head, a 2 MiB-aligned
    // middle, a tail).
    let cuts = 2 * (w.objects.len() as u128 + accesses);
    let cells = 3 * (cuts + w.objects.len() as u128);
    // A B-tree entry: the key, the cell, and the tree's share of overhead.
    let cell = 8 + std::mem::size_of::<Cell>() as u128 + 16;
    2 * 8 * w.phases.len() as u128 + 2 * 8 * cuts + cells * cell + phases
}

/// One phase's spans (with the sweeps each lists) and the ground truth's
/// points over them, counted with one pass over the accesses' boundaries
/// (sorted), never by building them.
fn phase_bytes(p: &Phase, page: u64) -> u128 {
    // Boundaries: +1 / -1 of plain accesses and of sweeps, by address.
    let mut ev: Vec<(u64, i8, Option<u64>)> = Vec::with_capacity(2 * p.accesses.len());
    for a in &p.accesses {
        let width = a.sweep.map(|s: Sweep| s.width);
        ev.push((a.range.start, 1, width));
        ev.push((a.range.end, -1, width));
    }
    ev.sort_unstable_by_key(|e| e.0);
    let (mut plain, mut sweeps) = (0i64, 0u128);
    // Widths of the sweeps covering the current span (a multiset).
    let mut widths: BTreeMap<u64, u64> = BTreeMap::new();
    let (mut spans, mut listed, mut points) = (0u128, 0u128, 0u128);
    let mut i = 0;
    while i < ev.len() {
        let x = ev[i].0;
        while i < ev.len() && ev[i].0 == x {
            let (_, d, width) = ev[i];
            match width {
                None => plain += i64::from(d),
                Some(wd) => {
                    if d > 0 {
                        sweeps += 1;
                        *widths.entry(wd).or_default() += 1;
                    } else {
                        sweeps -= 1;
                        if let Some(c) = widths.get_mut(&wd) {
                            *c -= 1;
                            if *c == 0 {
                                widths.remove(&wd);
                            }
                        }
                    }
                }
            }
            i += 1;
        }
        let Some(&(next, _, _)) = ev.get(i) else {
            break;
        };
        if plain == 0 && sweeps == 0 {
            continue;
        }
        spans += 1;
        listed += sweeps;
        points += match widths.keys().next() {
            // As the ground truth cuts a sweeping span (truth.rs).
            Some(&width) => {
                let sz = AddrRange::new(x, next).sz();
                let step = (width / 16).max(sz / 4096).max(page).max(1);
                u128::from(sz.div_ceil(step)) + 1
            }
            None => 2,
        };
    }
    let sweep_entry = std::mem::size_of::<(AddrRange, f64, Sweep)>() as u128;
    // The truth's points and the spans it makes of them.
    let point = 8 + 32;
    // Vectors grown by pushing may hold twice their length.
    2 * (spans * std::mem::size_of::<Seg>() as u128 + listed * sweep_entry + points * point)
        + 2 * 8 * p.accesses.len() as u128
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_core::units::{parse_duration_us, Fraction};

    fn us(s: &str) -> u64 {
        parse_duration_us(s, Fraction::Round).unwrap()
    }

    fn workload(spec: &str) -> Workload {
        Workload::from_toml(spec, "test").unwrap()
    }

    fn attrs(sample: &str, aggr: &str) -> Attrs {
        Attrs {
            sample_us: us(sample),
            aggr_us: us(aggr),
            update_us: us(aggr),
            ..Attrs::default()
        }
    }

    /// The report's numbers: `sample = "1000000h"`, `aggr = "2000000h"`
    /// over the demo workload allocated 4 GiB at once and aborted; now it
    /// is refused, naming the value.
    #[test]
    fn the_reported_intervals_are_refused_naming_the_value() {
        let w = workload(crate::DEMO_SPEC);
        let e = check_bounds(&w, &attrs("1000000h", "2000000h")).unwrap_err();
        assert_eq!(e.what, "sampling interval");
        assert_eq!(e.value, "1000000h");
        let msg = e.to_string();
        assert!(
            msg.starts_with("sampling interval 1000000h: the simulator's model would need "),
            "{msg}"
        );
        assert!(
            msg.contains("GiB (at most 1 GiB): give a shorter interval"),
            "{msg}"
        );
    }

    /// No way of starting a run takes them: each refuses before
    /// allocating.
    #[test]
    fn runs_refuse_the_reported_intervals_before_allocating() {
        let model = std::sync::Arc::new(crate::Model::new(workload(crate::DEMO_SPEC)));
        let a = attrs("1000000h", "2000000h");
        for kind in [
            crate::MonitorKind::Adaptive,
            crate::MonitorKind::Enhanced,
            crate::MonitorKind::FixedRegions(10),
            crate::MonitorKind::FullScan,
        ] {
            let e = crate::build_monitor(&model, a, 0, kind).err().unwrap();
            assert!(
                e.to_string()
                    .contains("sampling interval 1000000h: the simulator's model"),
                "{kind:?}: {e}"
            );
        }
        let policy = crate::TierPolicy::Damos {
            attrs: a,
            schemes: Vec::new(),
        };
        let e = crate::run_tiering(&model, &policy, &crate::TierOptions::default()).unwrap_err();
        assert!(e.to_string().contains("sampling interval 1000000h"), "{e}");
    }

    #[test]
    fn every_example_spec_passes_with_the_default_attributes() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/specs");
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            let w = Workload::from_toml(&text, &p.display().to_string()).unwrap();
            check_bounds(&w, &Attrs::default()).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            // An hour's sampling interval is slow, but allowed.
            check_bounds(&w, &attrs("1h", "1h")).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
    }

    /// Long intervals pass the memory bound over a long cycle but would
    /// step the machine for hours per sample.
    #[test]
    fn intervals_the_machine_would_step_for_hours_are_refused() {
        let w = workload(
            r#"
            duration = "1000000h"
            [[layout]]
            object = "a"
            size = "4M"
            "#,
        );
        let e = check_bounds(&w, &attrs("1000h", "1000h")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sampling interval 1000h: the simulated machine would advance 360000000 steps of \
             10ms for each sample (at most 1080000): give a shorter interval (at most 3h)"
        );
        assert!(check_bounds(&w, &attrs("2h", "2h")).is_ok());
    }

    /// The intervals goal may stretch the sampling interval: its longest
    /// is checked too.
    #[test]
    fn the_intervals_goals_longest_sample_is_checked() {
        let w = workload(crate::DEMO_SPEC);
        let mut a = Attrs::default();
        a.intervals_goal.aggrs = 3;
        a.intervals_goal.access_bp = 400;
        a.intervals_goal.min_sample_us = 1;
        a.intervals_goal.max_sample_us = us("1000000h");
        let e = check_bounds(&w, &a).unwrap_err();
        assert_eq!(e.what, "intervals goal max_sample");
        assert_eq!(e.value, "1000000h");
    }

    /// Overlapping sweeps make a phase's spans list them quadratically.
    #[test]
    fn many_overlapping_sweeps_are_refused() {
        let n = 6000;
        let mut spec = String::from(
            "duration = \"1s\"\n[[layout]]\nobject = \"a\"\nsize = \"64G\"\n[[phase]]\nduration = \"1s\"\n",
        );
        for i in 0..n {
            spec += &format!(
                "[[phase.access]]\nobject = \"a\"\nrange = [\"{}M\", \"{}M\"]\nrate = 1\nsweep = {{ width = \"4K\", period = \"1s\" }}\n",
                i,
                32768 + i
            );
        }
        let e = Workload::from_toml(&spec, "big.toml").unwrap_err();
        assert!(
            e.msg
                .starts_with("phase 1 (6000 accesses): the simulator's model would need "),
            "{e}"
        );
        assert!(
            e.msg.ends_with(
                "GiB (at most 1 GiB): give fewer accesses, or fewer sweeps overlapping one another"
            ),
            "{e}"
        );
        assert_eq!(e.line, 6, "{e}");
        // Built in code, the same workload is refused by check_bounds.
        let mut w = workload(crate::DEMO_SPEC);
        w.name = "big".into();
        w.phases[0].accesses = (0..n)
            .map(|i| crate::Access {
                range: AddrRange::new(i << 20, (32768 + i) << 20),
                rate: 1.0,
                sweep: Some(Sweep {
                    width: 4096,
                    period_us: 1_000_000,
                }),
            })
            .collect();
        let e = check_bounds(&w, &Attrs::default()).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "workload \"big\" (phase 1, 6000 accesses): the simulator's model would need"
            ),
            "{e}"
        );
    }
}
