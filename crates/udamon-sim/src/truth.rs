//! Ground truth and accuracy of a monitor's snapshots against the model.

use serde::Serialize;
use udamon_core::{Addr, Snapshot};

use crate::model::{seg_hazard, Model, Piece};

/// Options of the accuracy report.
#[derive(Clone, Copy, Debug)]
pub struct AccuracyOptions {
    /// Aggregation windows skipped at the start while regions form.
    pub warmup_windows: usize,
    /// Access frequency (share of samples) at or above which memory is hot.
    pub hot_threshold: f64,
}

impl Default for AccuracyOptions {
    fn default() -> Self {
        Self {
            warmup_windows: 10,
            hot_threshold: 0.2,
        }
    }
}

/// Accuracy of a record's snapshots, byte-weighted over mapped memory and
/// all windows after the warm-up.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Accuracy {
    /// Mean |estimated - true| access frequency (0..1).
    pub freq_mae: f64,
    /// F1 score of "estimated hot" against "truly hot".
    pub hot_f1: f64,
    /// sum |WSS_est - WSS_true| / sum WSS_true.
    pub wss_error: f64,
    pub windows: usize,
    /// Average region count over every snapshot (warm-up included).
    pub avg_nr_regions: f64,
    pub hot_threshold: f64,
    pub warmup_windows: usize,
    /// Windows not scored because their sampling interval spans more of the
    /// workload than the model takes on (see `check_bounds`): a record
    /// written by hand or damaged, never one the simulator wrote.
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped_windows: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Truth over one address span for one window.
#[derive(Clone, Copy, Debug)]
struct TruthSpan {
    start: Addr,
    end: Addr,
    /// Mean over the window's sample intervals of P(accessed in the interval).
    freq: f64,
    /// P(accessed at least once in the window).
    p_once: f64,
}

/// Sweeping spans are cut into this many pieces per sweep width, each
/// evaluated at its middle page: truth stays O(ranges), never O(pages).
const PIECES_PER_SWEEP_WIDTH: u64 = 16;
const MAX_PIECES_PER_SPAN: u64 = 4096;
/// A window's sample intervals are kept cut into pieces up to this many
/// pieces in all; beyond, each is cut again where it is needed.
const KEPT_PIECES: u128 = 1 << 16;

impl Model {
    /// Ground truth over mapped memory for the window `[start_us, end_us)`
    /// sampled every `sample_us`.
    fn truth_spans(&self, start_us: u64, end_us: u64, sample_us: u64) -> Vec<TruthSpan> {
        let page = self.workload.page_size;
        let nr_samples = ((end_us - start_us) / sample_us.max(1)).max(1);
        let interval = |i: u64, out: &mut Vec<Piece>| {
            let a = start_us.saturating_add(i.saturating_mul(sample_us));
            self.pieces(a, a.saturating_add(sample_us), out);
        };
        // Pieces of each sample interval: kept when they are few, made
        // again for each span otherwise (memory stays that of one
        // interval, however many samples a window has).
        let mut buf = Vec::new();
        let keep = u128::from(nr_samples) * self.workload.max_pieces(sample_us) <= KEPT_PIECES;
        let mut intervals: Vec<Vec<Piece>> = Vec::new();
        let mut seen = vec![false; self.workload.phases.len()];
        for i in 0..nr_samples {
            interval(i, &mut buf);
            for p in &buf {
                seen[p.phase] = true;
            }
            if keep {
                intervals.push(buf.clone());
            }
        }
        let phases: Vec<usize> = (0..seen.len()).filter(|&i| seen[i]).collect();
        // Breakpoints: objects and the access spans of every phase in the window.
        let mut points: Vec<Addr> = Vec::new();
        for o in &self.workload.objects {
            points.extend([o.range.start, o.range.end]);
        }
        for &ph in &phases {
            for s in &self.segs[ph] {
                if s.sweeps.is_empty() {
                    points.extend([s.range.start, s.range.end]);
                } else {
                    let width = s.sweeps.iter().map(|w| w.2.width).min().unwrap_or(page);
                    let step = (width / PIECES_PER_SWEEP_WIDTH)
                        .max(s.range.sz() / MAX_PIECES_PER_SPAN)
                        .max(page);
                    let mut a = s.range.start;
                    while a < s.range.end {
                        points.push(a);
                        a += step;
                    }
                    points.push(s.range.end);
                }
            }
        }
        points.sort_unstable();
        points.dedup();
        let mut out = Vec::with_capacity(points.len());
        for w in points.windows(2) {
            let (a, b) = (w[0], w[1]);
            if !self.workload.is_mapped(a) {
                continue;
            }
            // Middle page of the span stands for the whole span.
            let mid = (a + (b - a) / 2) / page * page;
            let (mut sum_p, mut sum_h) = (0.0, 0.0);
            for i in 0..nr_samples {
                let pieces = if keep {
                    &intervals[i as usize]
                } else {
                    interval(i, &mut buf);
                    &buf
                };
                let h: f64 = pieces
                    .iter()
                    .filter_map(|p| self.seg_at(p.phase, mid).map(|s| seg_hazard(s, mid, p)))
                    .sum();
                sum_p += -(-h).exp_m1();
                sum_h += h;
            }
            out.push(TruthSpan {
                start: a,
                end: b,
                freq: sum_p / nr_samples as f64,
                p_once: -(-sum_h).exp_m1(),
            });
        }
        out
    }
}

/// Compares snapshots of target 0 with the model's truth.
pub fn accuracy(model: &Model, snapshots: &[Snapshot], opts: AccuracyOptions) -> Accuracy {
    let mut acc = AccuracyAcc::new(opts);
    for s in snapshots {
        acc.push(model, s);
    }
    acc.finish()
}

/// Streaming accuracy: push snapshots one by one (records can be long).
pub struct AccuracyAcc {
    opts: AccuracyOptions,
    seen: usize,
    regions_total: u64,
    abs_err_bytes: f64,
    bytes: f64,
    tp: f64,
    fp: f64,
    fneg: f64,
    wss_abs_err: f64,
    wss_true: f64,
    skipped: usize,
}

impl AccuracyAcc {
    pub fn new(opts: AccuracyOptions) -> Self {
        Self {
            opts,
            seen: 0,
            regions_total: 0,
            abs_err_bytes: 0.0,
            bytes: 0.0,
            tp: 0.0,
            fp: 0.0,
            fneg: 0.0,
            wss_abs_err: 0.0,
            wss_true: 0.0,
            skipped: 0,
        }
    }

    pub fn push(&mut self, model: &Model, s: &Snapshot) {
        self.seen += 1;
        self.regions_total += s.nr_regions() as u64;
        if self.seen <= self.opts.warmup_windows {
            return;
        }
        let Some(t) = s.targets.first() else { return };
        // The truth of a window cuts one sample interval at a time into
        // the phases it spans: refused where that alone would pass the
        // model's memory bound (a snapshot read from a file says anything).
        let pieces = model.workload.max_pieces(s.sample_us.max(1));
        if pieces * 2 * std::mem::size_of::<crate::model::Piece>() as u128
            > u128::from(crate::MODEL_MEMORY_BOUND)
            || s.end_us < s.start_us
        {
            self.skipped += 1;
            return;
        }
        let nr_samples = ((s.end_us - s.start_us) / s.sample_us.max(1)).max(1) as f64;
        let truth = model.truth_spans(s.start_us, s.end_us, s.sample_us);
        let h = self.opts.hot_threshold;
        let (mut wss_est, mut wss_true) = (0.0, 0.0);
        let mut ri = 0;
        for span in &truth {
            let mut a = span.start;
            while a < span.end {
                // The region covering `a`, or none (then the estimate is 0).
                while ri < t.regions.len() && t.regions[ri].end <= a {
                    ri += 1;
                }
                let (b, est_nr) = match t.regions.get(ri) {
                    Some(r) if r.start <= a => (r.end.min(span.end), r.nr_accesses),
                    Some(r) => (r.start.min(span.end), 0),
                    None => (span.end, 0),
                };
                let sz = (b - a) as f64;
                let est = f64::from(est_nr) / nr_samples;
                self.abs_err_bytes += (est - span.freq).abs() * sz;
                self.bytes += sz;
                match (est >= h, span.freq >= h) {
                    (true, true) => self.tp += sz,
                    (true, false) => self.fp += sz,
                    (false, true) => self.fneg += sz,
                    (false, false) => {}
                }
                if est_nr > 0 {
                    wss_est += sz;
                }
                if span.p_once >= 0.5 {
                    wss_true += sz;
                }
                a = b;
            }
        }
        self.wss_abs_err += (wss_est - wss_true).abs();
        self.wss_true += wss_true;
    }

    pub fn finish(self) -> Accuracy {
        let windows = self
            .seen
            .saturating_sub(self.opts.warmup_windows)
            .saturating_sub(self.skipped);
        let f1_den = 2.0 * self.tp + self.fp + self.fneg;
        Accuracy {
            freq_mae: if self.bytes > 0.0 {
                self.abs_err_bytes / self.bytes
            } else {
                0.0
            },
            // Nothing hot and nothing estimated hot is a perfect match.
            hot_f1: if f1_den > 0.0 {
                2.0 * self.tp / f1_den
            } else {
                1.0
            },
            wss_error: if self.wss_true > 0.0 {
                self.wss_abs_err / self.wss_true
            } else if self.wss_abs_err > 0.0 {
                f64::INFINITY
            } else {
                0.0
            },
            windows,
            avg_nr_regions: if self.seen > 0 {
                self.regions_total as f64 / self.seen as f64
            } else {
                0.0
            },
            hot_threshold: self.opts.hot_threshold,
            warmup_windows: self.opts.warmup_windows,
            skipped_windows: self.skipped,
        }
    }
}
