//! Errors of the sysfs driver.

use std::io;
use std::path::PathBuf;

/// What went wrong driving kernel DAMON.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A kdamond exists that this driver did not create.
    #[error("{} holds a kdamond udamon did not create (state {state:?}, pid {pid:?}); udamon never takes over another user's kdamond: stop it with the tool that started it (e.g. `damo stop`) and retry", path.display())]
    Foreign {
        path: PathBuf,
        state: String,
        pid: String,
    },
    /// A file or directory the configuration needs does not exist.
    #[error("{} is missing: {feature} needs {needs}", path.display())]
    Missing {
        path: PathBuf,
        feature: String,
        needs: &'static str,
    },
    /// The kernel rejected a keyword it does not know.
    #[error("the running kernel rejected {value:?} in {}: {needs}", path.display())]
    Unsupported {
        path: PathBuf,
        value: String,
        needs: String,
    },
    /// Part of the configuration has no kernel equivalent at all.
    #[error("{what} has no kernel DAMON equivalent; {fix}")]
    NoKernelEquivalent { what: String, fix: &'static str },
    #[error("writing {value:?} to {} failed: {source}", path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
    #[error("reading {} failed: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{} holds {value:?}, expected a number", path.display())]
    Parse { path: PathBuf, value: String },
    #[error(transparent)]
    Attrs(#[from] udamon_core::Error),
    #[error("no kdamond of this driver exists yet; call start first")]
    NotStarted,
    #[error("this driver's kdamond runs; stop it first")]
    Running,
    #[error(
        "snapshots are off in this driver's config; set `snapshots: true` to read tried regions"
    )]
    NoSnapshots,
    /// A file holds what the kernel does not write there (a DAMON_STAT
    /// parameter of the wrong shape).
    #[error("{} holds {value:?}, expected {expected}", path.display())]
    Malformed {
        path: PathBuf,
        value: String,
        expected: String,
    },
    #[error("this driver's kdamond is paused; resume it to take snapshots")]
    Paused,
}

impl Error {
    /// A kdamond that is not ours, or a kernel without the feature: a
    /// missing capability. A configuration kernel DAMON cannot express:
    /// bad input. The rest failed while running.
    pub fn kind(&self) -> udamon_core::ErrorKind {
        use udamon_core::ErrorKind as K;
        match self {
            Error::Foreign { .. } | Error::Missing { .. } | Error::Unsupported { .. } => {
                K::Capability
            }
            Error::NoKernelEquivalent { .. } => K::Usage,
            Error::Attrs(e) => e.kind(),
            Error::Write { .. }
            | Error::Read { .. }
            | Error::Parse { .. }
            | Error::NotStarted
            | Error::Running
            | Error::NoSnapshots
            | Error::Malformed { .. }
            | Error::Paused => K::Failure,
        }
    }
}

/// The kernel version or config that provides a sysfs entry, by its name.
pub fn needs_for_entry(name: &str) -> Option<&'static str> {
    Some(match name {
        "admin" | "kdamonds" | "nr_kdamonds" => "Linux 5.18+ with CONFIG_DAMON_SYSFS",
        "avail_operations" => "Linux 5.19+",
        "tried_regions" => "Linux 6.2+",
        "filters" => "Linux 6.3+",
        "total_bytes" => "Linux 6.6+",
        "apply_interval_us" => "Linux 6.7+",
        "goals" | "nr_goals" => "Linux 6.8+",
        "target_metric" | "effective_bytes" => "Linux 6.9+",
        "target_nid" => "Linux 6.11+",
        "allow" | "sz_ops_filter_passed" => "Linux 6.14+",
        "core_filters" | "ops_filters" | "intervals_goal" => "Linux 6.15+",
        "nid" => "Linux 6.16+",
        "refresh_ms" | "dests" | "nr_dests" => "Linux 6.17+",
        "addr_unit" => "Linux 6.18+",
        "path" | "obsolete_target" => "Linux 6.19+",
        "nr_snapshots" | "max_nr_snapshots" => "Linux 7.0+",
        "goal_tuner" => "Linux 7.1+",
        "pause" | "fail_charge_num" | "fail_charge_denom" => "Linux 7.2+",
        _ => return None,
    })
}

/// The kernel version or config that accepts a keyword (action, filter
/// type, goal metric, operations set).
pub fn needs_for_keyword(kw: &str) -> Option<&'static str> {
    Some(match kw {
        "vaddr" => "CONFIG_DAMON_VADDR",
        "paddr" => "CONFIG_DAMON_PADDR",
        "fvaddr" => "Linux 5.19+ with CONFIG_DAMON_VADDR",
        "lru_prio" | "lru_deprio" => "Linux 6.0+ with CONFIG_DAMON_PADDR",
        "anon" | "memcg" => "Linux 6.3+",
        "addr" | "target" => "Linux 6.6+",
        "some_mem_psi_us" => "Linux 6.9+",
        "young" => "Linux 6.10+",
        "migrate_hot" | "migrate_cold" => "Linux 6.11+",
        "hugepage_size" | "unmapped" | "active" => "Linux 6.15+",
        "node_mem_used_bp" | "node_mem_free_bp" => "Linux 6.16+",
        "node_memcg_used_bp" | "node_memcg_free_bp" => "Linux 6.19+",
        "active_mem_bp" | "inactive_mem_bp" => "Linux 7.0+",
        "temporal" | "consist" => "Linux 7.1+",
        "collapse" | "node_eligible_mem_bp" => "Linux 7.2+",
        _ => return None,
    })
}
