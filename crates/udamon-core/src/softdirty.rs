//! Soft-dirty monitoring that resets the bits once per aggregation window
//! (or less often) instead of before every sample, and how its counts are
//! turned into the kernel's measure.
//!
//! The kernel's estimator asks, at every sample, whether the region's
//! sampled page was accessed during that sampling interval, so a backend
//! must clear the page's state before each sample. Soft-dirty can only be
//! cleared for a whole process at once (`/proc/PID/clear_refs`), which
//! walks every page table of the process: the cost per sample grows with
//! the process, not with the region count.
//!
//! Reset only at the start of every Nth window instead, a sample `j`
//! samples after the reset sees whether its page was written at any time
//! since. If a region's pages are each written in a sampling interval with
//! probability `q` (what the kernel's `nr_accesses / samples` estimates),
//! sample `j` is positive with probability `1 - (1 - q)^j`, and a window of
//! `n` samples starting `j0` samples after the reset expects
//! `E(q) = sum_{j=j0+1}^{j0+n} (1 - (1 - q)^j)` positives. `E` grows with
//! `q`, so a window's count `S` is turned back into `n * q` with `q` such
//! that `E(q) = S` (method of moments; `S = n` gives `q = 1`, the maximum
//! likelihood), and never below 1 when `S > 0`: a write was seen.
//! Unwritten regions stay at 0 exactly; the later in the
//! reset period, the sooner `E` saturates and the less a count tells a
//! warm region from a hot one. `udamon bench --only softdirty` measures
//! that against the simulator's truth.

use std::fmt;
use std::str::FromStr;

/// When a soft-dirty operations set resets the bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SoftDirtyReset {
    /// Before every sample, as the kernel clears accessed bits: a positive
    /// sample means written during that sampling interval.
    #[default]
    Sample,
    /// At the start of every Nth aggregation window; counts are converted
    /// at each window's end.
    Windows(u32),
    /// `Windows(N)`, with N chosen by the backend from what a reset costs
    /// it (the simulator's resets cost nothing: N = 1).
    Auto,
}

impl SoftDirtyReset {
    /// Whether counts need converting (any reset less often than a sample).
    pub fn per_window(self) -> bool {
        self != SoftDirtyReset::Sample
    }

    /// The reset period in windows a per-window backend starts with
    /// (`Auto` starts at 1); `None` for a reset before every sample.
    pub fn first_period(self) -> Option<u32> {
        match self {
            SoftDirtyReset::Sample => None,
            SoftDirtyReset::Windows(n) => Some(n),
            SoftDirtyReset::Auto => Some(1),
        }
    }
}

impl fmt::Display for SoftDirtyReset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SoftDirtyReset::Sample => f.write_str("sample"),
            SoftDirtyReset::Windows(1) => f.write_str("window"),
            SoftDirtyReset::Windows(n) => write!(f, "windows:{n}"),
            SoftDirtyReset::Auto => f.write_str("auto"),
        }
    }
}

impl FromStr for SoftDirtyReset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sample" => Ok(SoftDirtyReset::Sample),
            "window" => Ok(SoftDirtyReset::Windows(1)),
            "auto" => Ok(SoftDirtyReset::Auto),
            _ => match s.strip_prefix("windows:").map(str::parse::<u32>) {
                Some(Ok(n)) if n >= 1 => Ok(SoftDirtyReset::Windows(n)),
                _ => Err(format!(
                    "'{s}' is not a reset policy: expected sample, window, windows:N (N >= 1) \
                     or auto"
                )),
            },
        }
    }
}

/// The reset schedule of a per-window soft-dirty backend, and the
/// conversion of its counts. The backend calls [`take_reset`] before each
/// sample (and resets when it says so), [`sampled`] after each, and
/// [`end_window`] from [`Operations::end_window`].
///
/// [`take_reset`]: WindowEstimator::take_reset
/// [`sampled`]: WindowEstimator::sampled
/// [`end_window`]: WindowEstimator::end_window
/// [`Operations::end_window`]: crate::Operations::end_window
#[derive(Clone, Debug)]
pub struct WindowEstimator {
    period: u32,
    reset_due: bool,
    samples_since_reset: u32,
    samples_in_window: u32,
    windows_since_reset: u32,
    /// The conversion of the last (n, j0), kept: it is the same for every
    /// window of a given place in the period.
    table: Option<(u32, u32, Vec<u32>)>,
}

impl WindowEstimator {
    /// Resets at the first sample, then at the start of every `period`th
    /// window.
    pub fn new(period: u32) -> Self {
        Self {
            period: period.max(1),
            reset_due: true,
            samples_since_reset: 0,
            samples_in_window: 0,
            windows_since_reset: 0,
            table: None,
        }
    }

    pub fn period(&self) -> u32 {
        self.period
    }

    /// Changes the period from the next reset on.
    pub fn set_period(&mut self, period: u32) {
        self.period = period.max(1);
    }

    /// Before a sample: whether the bits are to be reset now (then they
    /// must be).
    pub fn take_reset(&mut self) -> bool {
        if !self.reset_due {
            return false;
        }
        self.reset_due = false;
        self.samples_since_reset = 0;
        self.windows_since_reset = 0;
        true
    }

    /// After a sample was checked.
    pub fn sampled(&mut self) {
        self.samples_since_reset += 1;
        self.samples_in_window += 1;
    }

    /// At a window's end: turns each region's count of positive samples
    /// into the kernel's measure, and schedules the next reset.
    pub fn end_window(&mut self, counts: &mut [u32]) {
        let n = self.samples_in_window;
        let j0 = self.samples_since_reset - n;
        if n > 0 {
            if self.table.as_ref().is_none_or(|t| (t.0, t.1) != (n, j0)) {
                self.table = Some((n, j0, table(n, j0)));
            }
            let t = &self.table.as_ref().expect("just made").2;
            for c in counts.iter_mut() {
                *c = t[(*c).min(n) as usize];
            }
        }
        self.samples_in_window = 0;
        self.windows_since_reset += 1;
        if self.windows_since_reset >= self.period {
            self.reset_due = true;
        }
    }
}

/// Expected positives of a window of `n` samples starting `j0` samples
/// after the reset, for a per-interval write probability `q`.
fn expected(q: f64, j0: u32, n: u32) -> f64 {
    let keep = 1.0 - q;
    (j0 + 1..=j0 + n).map(|j| 1.0 - keep.powi(j as i32)).sum()
}

/// For each count `s` in `0..=n`, `round(n * q)` with `E(q) = s`.
fn table(n: u32, j0: u32) -> Vec<u32> {
    (0..=n)
        .map(|s| {
            if s == 0 {
                return 0;
            }
            if s == n {
                return n;
            }
            let (mut lo, mut hi) = (0.0f64, 1.0f64);
            for _ in 0..50 {
                let mid = (lo + hi) / 2.0;
                if expected(mid, j0, n) < s as f64 {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            // A positive sample is a write seen: never rounded away (a
            // region with one stays apart from unwritten neighbours, as
            // under the kernel's estimator).
            (((lo + hi) / 2.0 * n as f64).round() as u32).max(1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        for s in ["sample", "window", "windows:4", "auto"] {
            let p: SoftDirtyReset = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
        }
        assert_eq!("windows:1".parse(), Ok(SoftDirtyReset::Windows(1)));
        for bad in ["windows:0", "windows:x", "every", ""] {
            let e = bad.parse::<SoftDirtyReset>().unwrap_err();
            assert!(e.contains("windows:N"), "{e}");
        }
    }

    #[test]
    fn the_first_window_after_a_reset_inverts_the_expectation() {
        // q = 0.05 expects about 7.8 positives in the first 20 samples.
        let e = expected(0.05, 0, 20);
        assert!((e - 7.83).abs() < 0.05, "{e}");
        let t = table(20, 0);
        assert_eq!(t[0], 0);
        assert_eq!(t[20], 20);
        assert_eq!(t[8], 1, "{t:?}");
        assert_eq!(t[1], 1, "a write seen is never rounded away: {t:?}");
        // Monotone, and never more than the count itself (a positive sample
        // may stand for a write in any earlier interval).
        for w in t.windows(2) {
            assert!(w[0] <= w[1], "{t:?}");
        }
        for (s, &v) in t.iter().enumerate() {
            assert!(v as usize <= s, "{t:?}");
        }
    }

    #[test]
    fn resets_come_every_period_windows_and_later_windows_saturate() {
        let mut e = WindowEstimator::new(2);
        let mut resets = 0;
        let mut seen = Vec::new();
        for w in 0..6 {
            for _ in 0..20 {
                resets += u32::from(e.take_reset());
                e.sampled();
            }
            let mut c = [16];
            e.end_window(&mut c);
            seen.push((w, c[0]));
        }
        assert_eq!(resets, 3);
        // Sixteen positives of twenty mean less in a window that starts 20
        // samples after the reset (1) than in the first window (4).
        assert_eq!((seen[0].1, seen[1].1), (4, 1), "{seen:?}");
        assert_eq!(seen[0].1, seen[2].1);
    }

    #[test]
    fn a_period_of_one_resets_every_window() {
        let mut e = WindowEstimator::new(1);
        for _ in 0..3 {
            assert!(e.take_reset());
            for _ in 0..20 {
                assert!(!e.take_reset());
                e.sampled();
            }
            e.end_window(&mut []);
        }
    }
}
