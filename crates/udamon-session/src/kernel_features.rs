//! Kernel DAMON's features by the Linux version that added them (6.14
//! through 7.2), in one table: what `udamon features` lists, in text and
//! as JSON (`kernel_features`), each with where it shows on a machine.
//! [`crate::features`] judges each one, read-only: from the files of a
//! kdamond that exists, else by the kernel version and config.

/// Shapes of directories in the DAMON sysfs tree, relative to
/// `/sys/kernel/mm/damon/admin`; `*` stands for any index.
pub const KDAMOND: &str = "kdamonds/*";
pub const CONTEXT: &str = "kdamonds/*/contexts/*";
pub const TARGET: &str = "kdamonds/*/contexts/*/targets/*";
pub const SCHEME: &str = "kdamonds/*/contexts/*/schemes/*";
pub const GOAL: &str = "kdamonds/*/contexts/*/schemes/*/quotas/goals/*";
/// A filter, in any of the directories that hold them (6.15+ has
/// `core_filters` and `ops_filters` beside `filters`).
const FILTERS: [&str; 3] = [
    "kdamonds/*/contexts/*/schemes/*/filters/*",
    "kdamonds/*/contexts/*/schemes/*/core_filters/*",
    "kdamonds/*/contexts/*/schemes/*/ops_filters/*",
];

/// Where a feature shows on a machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// A file or directory in the DAMON sysfs tree: (directory shape, path
    /// under it), any of them. Seen when such a directory exists, else
    /// judged by the kernel version.
    Entry(&'static [(&'static str, &'static str)]),
    /// A keyword the kernel accepts (an action, a filter type, a goal
    /// metric): nothing in the tree lists them, so judged by the kernel
    /// version.
    Keyword,
    /// The DAMON_STAT module (`/sys/module/damon_stat/parameters`).
    Module,
    /// A file of DAMON_STAT's parameters.
    ModuleParameter(&'static str),
    /// A tracepoint of the `damon` events in tracefs.
    Tracepoint,
}

/// One kernel DAMON feature.
#[derive(Clone, Copy, Debug)]
pub struct KernelFeature {
    /// The kernel's name for it: the sysfs file, keyword or tracepoint.
    pub name: &'static str,
    /// What it is (a filter type, a goal metric, a context file...).
    pub kind: &'static str,
    /// The Linux version that added it ("6.14").
    pub since: &'static str,
    pub probe: Probe,
}

const fn entry(
    name: &'static str,
    kind: &'static str,
    since: &'static str,
    at: &'static [(&'static str, &'static str)],
) -> KernelFeature {
    KernelFeature {
        name,
        kind,
        since,
        probe: Probe::Entry(at),
    }
}

const fn keyword(name: &'static str, kind: &'static str, since: &'static str) -> KernelFeature {
    KernelFeature {
        name,
        kind,
        since,
        probe: Probe::Keyword,
    }
}

/// Every feature, in the order of the versions that added them.
pub const KERNEL_FEATURES: &[KernelFeature] = &[
    entry(
        "allow",
        "filter file",
        "6.14",
        &[
            (FILTERS[0], "allow"),
            (FILTERS[1], "allow"),
            (FILTERS[2], "allow"),
        ],
    ),
    entry(
        "sz_ops_filter_passed",
        "scheme stat",
        "6.14",
        &[(SCHEME, "stats/sz_ops_filter_passed")],
    ),
    entry(
        "core_filters",
        "scheme directory",
        "6.15",
        &[(SCHEME, "core_filters")],
    ),
    entry(
        "ops_filters",
        "scheme directory",
        "6.15",
        &[(SCHEME, "ops_filters")],
    ),
    entry(
        "intervals_goal",
        "auto-tuned intervals",
        "6.15",
        &[(CONTEXT, "monitoring_attrs/intervals/intervals_goal")],
    ),
    keyword("hugepage_size", "filter type", "6.15"),
    keyword("unmapped", "filter type", "6.15"),
    keyword("active", "filter type", "6.15"),
    keyword("node_mem_used_bp", "goal metric", "6.16"),
    keyword("node_mem_free_bp", "goal metric", "6.16"),
    entry("nid", "goal file", "6.16", &[(GOAL, "nid")]),
    entry(
        "dests",
        "weighted multi-node migration",
        "6.17",
        &[(SCHEME, "dests")],
    ),
    entry(
        "refresh_ms",
        "kdamond file",
        "6.17",
        &[(KDAMOND, "refresh_ms")],
    ),
    KernelFeature {
        name: "damon_stat",
        kind: "module DAMON_STAT",
        since: "6.17",
        probe: Probe::Module,
    },
    entry(
        "addr_unit",
        "context file",
        "6.18",
        &[(CONTEXT, "addr_unit")],
    ),
    keyword("node_memcg_used_bp", "goal metric", "6.19"),
    keyword("node_memcg_free_bp", "goal metric", "6.19"),
    entry("path", "goal file", "6.19", &[(GOAL, "path")]),
    entry(
        "obsolete_target",
        "target file",
        "6.19",
        &[(TARGET, "obsolete_target")],
    ),
    entry(
        "nr_snapshots",
        "scheme stat",
        "7.0",
        &[(SCHEME, "stats/nr_snapshots")],
    ),
    entry(
        "max_nr_snapshots",
        "scheme stat",
        "7.0",
        &[(SCHEME, "stats/max_nr_snapshots")],
    ),
    keyword("active_mem_bp", "goal metric", "7.0"),
    keyword("inactive_mem_bp", "goal metric", "7.0"),
    KernelFeature {
        name: "damos_stat_after_apply_interval",
        kind: "tracepoint",
        since: "7.0",
        probe: Probe::Tracepoint,
    },
    entry(
        "goal_tuner",
        "quota file",
        "7.1",
        &[(SCHEME, "quotas/goal_tuner")],
    ),
    keyword("collapse", "action", "7.2"),
    keyword("node_eligible_mem_bp", "goal metric", "7.2"),
    entry("pause", "context file", "7.2", &[(CONTEXT, "pause")]),
    entry(
        "fail_charge_num",
        "quota file",
        "7.2",
        &[(SCHEME, "quotas/fail_charge_num")],
    ),
    entry(
        "fail_charge_denom",
        "quota file",
        "7.2",
        &[(SCHEME, "quotas/fail_charge_denom")],
    ),
    KernelFeature {
        name: "kdamond_pid",
        kind: "DAMON_STAT parameter",
        since: "7.2",
        probe: Probe::ModuleParameter("kdamond_pid"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_kdamon::{needs_for_entry, needs_for_keyword};

    /// The table and the driver's own landmarks (which its errors name)
    /// agree on every version.
    #[test]
    fn versions_agree_with_the_drivers_landmarks() {
        let mut last = (0u32, 0u32);
        for f in KERNEL_FEATURES {
            let (a, b) = f.since.split_once('.').unwrap();
            let v = (a.parse().unwrap(), b.parse().unwrap());
            assert!(v >= last, "{} is out of version order", f.name);
            last = v;
            let want = format!("Linux {}+", f.since);
            match f.probe {
                Probe::Entry(at) => {
                    for (_, file) in at {
                        let leaf = file.rsplit('/').next().unwrap();
                        assert_eq!(needs_for_entry(leaf), Some(want.as_str()), "{}", f.name);
                    }
                }
                Probe::Keyword => {
                    assert_eq!(needs_for_keyword(f.name), Some(want.as_str()), "{}", f.name)
                }
                _ => {}
            }
        }
        let names: std::collections::BTreeSet<_> = KERNEL_FEATURES.iter().map(|f| f.name).collect();
        assert_eq!(names.len(), KERNEL_FEATURES.len(), "names are unique");
    }
}
