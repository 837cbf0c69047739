//! Monitoring attributes and their validation (kernel `damon_set_attrs`).

use serde::{Deserialize, Serialize};

use crate::Error;

/// Goal of the monitoring intervals auto-tuner: keep the observed share of
/// access events near `access_bp` by scaling the sampling interval, every
/// `aggrs` aggregations, within `[min_sample_us, max_sample_us]`.
/// `aggrs == 0` disables tuning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalsGoal {
    pub access_bp: u32,
    pub aggrs: u32,
    pub min_sample_us: u64,
    pub max_sample_us: u64,
}

impl IntervalsGoal {
    /// The kernel's recommended goal: `access_bp` of the maximum accesses
    /// (400, 4%, is the recommendation), checked every 3 aggregations,
    /// sampling between 5 ms and 10 s, as the kernel's DAMON_STAT module
    /// and damo (`--monitoring_intervals_goal 4% 3 5ms 10s`) set it. The
    /// lower bound is 5 ms, not the 1 ms `udamon record --intervals-goal`
    /// used: 5 ms is the default sampling interval, so from the defaults
    /// the tuner lengthens the interval when few accesses are seen but
    /// never samples faster than untuned, as with the kernel's own users;
    /// 1 ms allowed five times the sampling work. A `sample_us` below 5 ms
    /// lowers the bound to it, so the attributes stay valid.
    pub fn recommended(access_bp: u32, sample_us: u64) -> Self {
        Self {
            access_bp,
            aggrs: 3,
            min_sample_us: sample_us.min(5_000),
            max_sample_us: 10_000_000,
        }
    }
}

/// How regions adapt: as kernel DAMON's (the default, faithful), or the
/// enhanced mode ([`crate::enhanced`]): fitted to resident memory, and
/// following windows that move at a steady rate. Same region budget, same
/// one check per region per sample. Kernel DAMON (the kdamond path) adapts
/// its own regions, so only udamon's engine runs the enhanced mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Kernel,
    Enhanced,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::Enhanced => "enhanced",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kernel" => Ok(Mode::Kernel),
            "enhanced" => Ok(Mode::Enhanced),
            _ => Err(format!(
                "unknown mode '{s}': give kernel (DAMON's adaptive regions, the default) or \
                 enhanced (fitted to resident memory, following moving windows)"
            )),
        }
    }
}

/// Monitoring attributes. Defaults follow the kernel, except the ops update
/// interval, which follows damo (1 s rather than 60 s), as users of a
/// user-space tool expect new mappings to be picked up quickly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attrs {
    pub sample_us: u64,
    pub aggr_us: u64,
    pub update_us: u64,
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
    #[serde(default)]
    pub intervals_goal: IntervalsGoal,
    /// Region adaptation (udamon's engine only; not a kernel attribute).
    #[serde(default, skip_serializing_if = "is_kernel")]
    pub mode: Mode,
}

fn is_kernel(m: &Mode) -> bool {
    *m == Mode::Kernel
}

impl Default for Attrs {
    fn default() -> Self {
        Self {
            sample_us: 5_000,
            aggr_us: 100_000,
            update_us: 1_000_000,
            min_nr_regions: 10,
            max_nr_regions: 1_000,
            intervals_goal: IntervalsGoal::default(),
            mode: Mode::Kernel,
        }
    }
}

/// `aggr_us / sample_us`: the theoretical maximum of `nr_accesses`
/// (a zero sampling interval counts as 1 us; clamped to u32).
pub fn max_nr_accesses(sample_us: u64, aggr_us: u64) -> u32 {
    (aggr_us / sample_us.max(1)).min(u64::from(u32::MAX)) as u32
}

impl Attrs {
    /// Checks the attributes the way the kernel does before committing them,
    /// and refuses an ops update interval shorter than a sample, which the
    /// kernel takes (it then updates at every sample; README, "How udamon
    /// differs").
    pub fn validate(&self) -> Result<(), Error> {
        if self.sample_us == 0 {
            return Err(Error::InvalidAttrs(
                "sampling interval is 0 (give at least 1us)".into(),
            ));
        }
        if self.min_nr_regions < 3 {
            return Err(Error::InvalidAttrs(format!(
                "min_nr_regions is {} (must be at least 3, as vaddr starts with three regions)",
                self.min_nr_regions
            )));
        }
        if self.min_nr_regions > self.max_nr_regions {
            return Err(Error::InvalidAttrs(format!(
                "min_nr_regions {} is above max_nr_regions {}",
                self.min_nr_regions, self.max_nr_regions
            )));
        }
        if self.update_us < self.sample_us {
            return Err(Error::InvalidAttrs(format!(
                "ops update interval {}us is shorter than the sampling interval {}us (give at \
                 least the sampling interval; damo's default is 1s)",
                self.update_us, self.sample_us
            )));
        }
        if self.sample_us > self.aggr_us {
            return Err(Error::InvalidAttrs(format!(
                "sampling interval {}us is longer than aggregation interval {}us",
                self.sample_us, self.aggr_us
            )));
        }
        let g = &self.intervals_goal;
        if g.aggrs != 0 {
            if g.min_sample_us > g.max_sample_us {
                return Err(Error::InvalidAttrs(format!(
                    "intervals goal min_sample_us {} is above max_sample_us {}",
                    g.min_sample_us, g.max_sample_us
                )));
            }
            if self.sample_us < g.min_sample_us || self.sample_us > g.max_sample_us {
                return Err(Error::InvalidAttrs(format!(
                    "sampling interval {}us is outside the intervals goal range [{}us, {}us]",
                    self.sample_us, g.min_sample_us, g.max_sample_us
                )));
            }
            if g.access_bp == 0 || g.access_bp > 10_000 {
                return Err(Error::InvalidAttrs(format!(
                    "intervals goal access_bp {} is outside 1..=10000",
                    g.access_bp
                )));
            }
        }
        Ok(())
    }

    /// Sample intervals per aggregation window (at least 1).
    pub fn aggr_samples(&self) -> u64 {
        (self.aggr_us / self.sample_us.max(1)).max(1)
    }

    /// Sample intervals per ops update (at least 1).
    pub fn update_samples(&self) -> u64 {
        (self.update_us / self.sample_us.max(1)).max(1)
    }

    pub fn max_nr_accesses(&self) -> u32 {
        max_nr_accesses(self.sample_us, self.aggr_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_table() {
        let ok = Attrs::default();
        let cases: &[(Attrs, Option<&str>)] = &[
            (ok, None),
            (
                Attrs { update_us: 0, ..ok },
                Some("ops update interval 0us is shorter"),
            ),
            (
                Attrs {
                    min_nr_regions: 2,
                    ..ok
                },
                Some("at least 3"),
            ),
            (
                Attrs {
                    min_nr_regions: 20,
                    max_nr_regions: 10,
                    ..ok
                },
                Some("above max_nr_regions"),
            ),
            (
                Attrs {
                    sample_us: 200_000,
                    ..ok
                },
                Some("longer than aggregation"),
            ),
            (Attrs { sample_us: 0, ..ok }, Some("is 0")),
            (
                Attrs {
                    intervals_goal: IntervalsGoal {
                        access_bp: 400,
                        aggrs: 3,
                        min_sample_us: 10_000,
                        max_sample_us: 20_000,
                    },
                    ..ok
                },
                Some("outside the intervals goal range"),
            ),
            (
                Attrs {
                    intervals_goal: IntervalsGoal {
                        access_bp: 400,
                        aggrs: 3,
                        min_sample_us: 1_000,
                        max_sample_us: 10_000,
                    },
                    ..ok
                },
                None,
            ),
        ];
        for (attrs, want) in cases {
            match (attrs.validate(), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.to_string().contains(w), "{e} lacks {w}"),
                (got, want) => panic!("{attrs:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn derived_counts() {
        let a = Attrs::default();
        assert_eq!(a.aggr_samples(), 20);
        assert_eq!(a.update_samples(), 200);
        assert_eq!(a.max_nr_accesses(), 20);
    }
}
