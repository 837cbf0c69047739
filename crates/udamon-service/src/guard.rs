//! Guardrails: limits a job's actions never cross, whatever its schemes
//! say. Pure decisions here; the job loop reads the inputs (pressure,
//! resident set, applied bytes) and carries the decisions out.

use udamon_core::schemes::{Action, Damos};

/// Limits each acting scheme's size quota to `max_bps` bytes per second
/// (per its reset interval; a scheme without one gets a 1 s interval), so
/// that kernel DAMON or our engine enforces the cap itself, exactly, at
/// the rate the scheme's own priorities pick. `stat` schemes are left
/// alone.
pub fn cap_quotas(schemes: &[Damos], max_bps: Option<u64>) -> Vec<Damos> {
    let Some(bps) = max_bps else {
        return schemes.to_vec();
    };
    schemes
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if s.action != Action::Stat {
                if s.quota.reset_interval_ms == 0 {
                    s.quota.reset_interval_ms = 1_000;
                }
                let cap = bps.saturating_mul(s.quota.reset_interval_ms) / 1_000;
                if s.quota.sz == 0 || s.quota.sz > cap {
                    s.quota.sz = cap.max(1);
                }
            }
            s
        })
        .collect()
}

/// Whether the byte-rate guardrail is what limits scheme `s` (its quota
/// was capped by it), so that the scheme's quota exceeds are the
/// guardrail's trips.
pub fn capped_by_rate(original: &Damos, effective: &Damos) -> bool {
    original.action != Action::Stat && original.quota.sz != effective.quota.sz
}

/// The memory-pressure breaker: open (actions paused) above `pause_above`,
/// closed again below `resume_below`, with nothing changing in between.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Breaker {
    pub open: bool,
    pub trips: u64,
}

impl Breaker {
    /// Takes one reading of `some` avg10 (%); returns the new state when
    /// it changes.
    pub fn update(&mut self, avg10: f64, pause_above: f64, resume_below: f64) -> Option<bool> {
        if !self.open && avg10 > pause_above {
            self.open = true;
            self.trips += 1;
            return Some(true);
        }
        if self.open && avg10 < resume_below {
            self.open = false;
            return Some(false);
        }
        None
    }
}

/// The paged-out share of a resident set, per minute: at most `share` of
/// the RSS the minute began with may be paged out before the minute ends.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RssBudget {
    minute_start_us: u64,
    rss_at_start: u64,
    applied_at_start: u64,
    pub open: bool,
    pub trips: u64,
}

impl RssBudget {
    /// Takes the time (us, any monotonic clock), the target's RSS (bytes)
    /// and the bytes paged out so far; returns the new state when it
    /// changes (true: pause until the minute ends).
    pub fn update(&mut self, now_us: u64, rss: u64, paged_out: u64, share: f64) -> Option<bool> {
        if self.rss_at_start == 0 || now_us >= self.minute_start_us + 60_000_000 {
            self.minute_start_us = now_us;
            self.rss_at_start = rss;
            self.applied_at_start = paged_out;
            if self.open {
                self.open = false;
                return Some(false);
            }
            return None;
        }
        let used = paged_out.saturating_sub(self.applied_at_start);
        if !self.open && used as f64 > share * self.rss_at_start as f64 {
            self.open = true;
            self.trips += 1;
            return Some(true);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_core::schemes::AccessPattern;

    #[test]
    fn the_rate_cap_becomes_a_size_quota_of_acting_schemes_only() {
        let mut page = Damos::new(AccessPattern::default(), Action::Pageout);
        page.quota.sz = 1 << 30;
        page.quota.reset_interval_ms = 2_000;
        let free = Damos::new(AccessPattern::default(), Action::Cold);
        let stat = Damos::new(AccessPattern::default(), Action::Stat);
        let out = cap_quotas(&[page.clone(), free, stat.clone()], Some(10 << 20));
        assert_eq!(out[0].quota.sz, 20 << 20);
        assert_eq!(out[0].quota.reset_interval_ms, 2_000);
        assert_eq!(
            (out[1].quota.sz, out[1].quota.reset_interval_ms),
            (10 << 20, 1_000)
        );
        assert_eq!(out[2], stat);
        assert!(capped_by_rate(&page, &out[0]));
        // A quota already below the cap stays.
        page.quota.sz = 1 << 20;
        assert_eq!(
            cap_quotas(&[page.clone()], Some(10 << 20))[0].quota.sz,
            1 << 20
        );
        assert!(!capped_by_rate(
            &page,
            &cap_quotas(&[page.clone()], Some(10 << 20))[0]
        ));
        assert_eq!(cap_quotas(&[page.clone()], None), vec![page]);
    }

    #[test]
    fn the_breaker_has_hysteresis() {
        let mut b = Breaker::default();
        assert_eq!(b.update(30.0, 40.0, 20.0), None);
        assert_eq!(b.update(41.0, 40.0, 20.0), Some(true));
        assert_eq!(b.update(50.0, 40.0, 20.0), None);
        assert_eq!(b.update(25.0, 40.0, 20.0), None);
        assert_eq!(b.update(19.0, 40.0, 20.0), Some(false));
        assert_eq!(b.update(41.0, 40.0, 20.0), Some(true));
        assert_eq!(b.trips, 2);
    }

    #[test]
    fn the_rss_budget_pauses_until_the_minute_ends() {
        let mut r = RssBudget::default();
        let gb = 1u64 << 30;
        assert_eq!(r.update(0, gb, 0, 0.05), None);
        assert_eq!(r.update(10_000_000, gb, gb / 40, 0.05), None);
        assert_eq!(r.update(20_000_000, gb, gb / 10, 0.05), Some(true));
        assert_eq!(r.update(30_000_000, gb, gb / 5, 0.05), None);
        assert_eq!(r.update(60_000_000, gb, gb / 5, 0.05), Some(false));
        assert_eq!(r.update(70_000_000, gb, gb / 5 + gb / 100, 0.05), None);
        assert_eq!(r.trips, 1);
    }
}
