//! `udamon_core::schemes::Damos` to the files of a sysfs scheme directory.
//!
//! A translation is a list of `(path relative to the scheme dir, value)`
//! writes in the order they must happen: every `nr_*` write comes before
//! the files of the directories it creates.

use udamon_core::schemes::{Damos, Filter, FilterKind, GoalMetric, GoalTuner, KernelPattern};
use udamon_core::Attrs;

use crate::Error;

/// One planned write.
pub type Write = (String, String);

/// Where filters go: the 6.15+ `core_filters`/`ops_filters` pair, or the
/// legacy `filters` directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterDirs {
    Split,
    Legacy,
}

fn w(out: &mut Vec<Write>, path: impl Into<String>, value: impl ToString) {
    out.push((path.into(), value.to_string()));
}

/// The access pattern files, in kernel units for `attrs`.
pub fn pattern_writes(s: &Damos, attrs: &Attrs) -> Vec<Write> {
    let KernelPattern {
        min_sz,
        max_sz,
        min_nr_accesses,
        max_nr_accesses,
        min_age,
        max_age,
    } = s.pattern.resolve(attrs);
    let mut out = Vec::new();
    w(&mut out, "access_pattern/sz/min", min_sz);
    w(&mut out, "access_pattern/sz/max", max_sz);
    w(&mut out, "access_pattern/nr_accesses/min", min_nr_accesses);
    w(&mut out, "access_pattern/nr_accesses/max", max_nr_accesses);
    w(&mut out, "access_pattern/age/min", min_age);
    w(&mut out, "access_pattern/age/max", max_age);
    out
}

/// Every write that configures scheme `s` (relative to its directory).
/// Fails, before anything is written, on parts the kernel has no
/// equivalent for.
pub fn scheme_writes(s: &Damos, attrs: &Attrs, dirs: FilterDirs) -> Result<Vec<Write>, Error> {
    let Some(action) = s.action.kernel_name() else {
        return Err(Error::NoKernelEquivalent {
            what: format!("action {}", s.action.name()),
            fix: "use it with udamon's own engine (the sim or proc backend)",
        });
    };
    let mut out = Vec::new();
    w(&mut out, "action", action);
    if let Some(nid) = s.target_nid {
        w(&mut out, "target_nid", nid);
    }
    // Written only when set, so kernels before 6.17 take the rest.
    if !s.dests.is_empty() {
        w(&mut out, "dests/nr_dests", s.dests.len());
        for (i, d) in s.dests.iter().enumerate() {
            w(&mut out, format!("dests/{i}/id"), d.node);
            w(&mut out, format!("dests/{i}/weight"), d.weight);
        }
    }
    if s.max_nr_snapshots != 0 {
        w(&mut out, "stats/max_nr_snapshots", s.max_nr_snapshots);
    }
    if s.apply_interval_us != 0 {
        w(&mut out, "apply_interval_us", s.apply_interval_us);
    }
    out.extend(pattern_writes(s, attrs));

    let q = &s.quota;
    w(&mut out, "quotas/ms", q.ms);
    w(&mut out, "quotas/bytes", q.sz);
    w(&mut out, "quotas/reset_interval_ms", q.reset_interval_ms);
    w(&mut out, "quotas/weights/sz_permil", q.weights.sz);
    w(
        &mut out,
        "quotas/weights/nr_accesses_permil",
        q.weights.nr_accesses,
    );
    w(&mut out, "quotas/weights/age_permil", q.weights.age);
    if q.fail_charge_denom != 0 {
        w(&mut out, "quotas/fail_charge_num", q.fail_charge_num);
        w(&mut out, "quotas/fail_charge_denom", q.fail_charge_denom);
    }
    // The default is not written, so that kernels before 7.1 take it.
    match (q.goal_tuner, q.goal_tuner.kernel_name()) {
        (GoalTuner::Consist, _) => {}
        (_, Some(name)) => w(&mut out, "quotas/goal_tuner", name),
        (_, None) => {
            return Err(Error::NoKernelEquivalent {
                what: "quota goal tuner fast".into(),
                fix: "use consist or temporal (Linux 7.1+) on kernel DAMON; fast is udamon's \
                      own engine's",
            })
        }
    }
    if !q.goals.is_empty() {
        w(&mut out, "quotas/goals/nr_goals", q.goals.len());
        for (i, g) in q.goals.iter().enumerate() {
            let Some(metric) = g.metric.kernel_name() else {
                return Err(Error::NoKernelEquivalent {
                    what: format!("quota goal metric {:?}", g.metric),
                    fix: "use user_input and feed the value in, or udamon's own engine",
                });
            };
            let d = format!("quotas/goals/{i}");
            w(&mut out, format!("{d}/target_metric"), metric);
            w(&mut out, format!("{d}/target_value"), g.target_value);
            if g.metric == GoalMetric::UserInput {
                w(&mut out, format!("{d}/current_value"), g.current_value);
            }
            if g.metric.is_per_node() {
                w(&mut out, format!("{d}/nid"), g.nid);
            }
            if let Some(p) = &g.path {
                w(&mut out, format!("{d}/path"), p);
            }
        }
    }

    let wm = &s.watermarks;
    w(&mut out, "watermarks/metric", wm.metric.name());
    w(&mut out, "watermarks/interval_us", wm.interval_us);
    w(&mut out, "watermarks/high", wm.high);
    w(&mut out, "watermarks/mid", wm.mid);
    w(&mut out, "watermarks/low", wm.low);

    let groups: Vec<(&str, Vec<&Filter>)> = match dirs {
        FilterDirs::Legacy => vec![("filters", s.filters.iter().collect())],
        FilterDirs::Split => vec![
            (
                "core_filters",
                s.filters.iter().filter(|f| f.kind.is_core()).collect(),
            ),
            (
                "ops_filters",
                s.filters.iter().filter(|f| !f.kind.is_core()).collect(),
            ),
        ],
    };
    for (dir, filters) in groups {
        if filters.is_empty() {
            continue;
        }
        w(&mut out, format!("{dir}/nr_filters"), filters.len());
        for (i, f) in filters.iter().enumerate() {
            filter_writes(&mut out, &format!("{dir}/{i}"), f);
        }
    }
    Ok(out)
}

fn yn(b: bool) -> &'static str {
    if b {
        "Y"
    } else {
        "N"
    }
}

fn filter_writes(out: &mut Vec<Write>, d: &str, f: &Filter) {
    w(out, format!("{d}/type"), f.kind.filter_type().name());
    match &f.kind {
        FilterKind::Addr { start, end } => {
            w(out, format!("{d}/addr_start"), start);
            w(out, format!("{d}/addr_end"), end);
        }
        FilterKind::Target { idx } => w(out, format!("{d}/damon_target_idx"), idx),
        FilterKind::Memcg { path } => w(out, format!("{d}/memcg_path"), path),
        FilterKind::HugepageSize { min, max } => {
            w(out, format!("{d}/min"), min);
            w(out, format!("{d}/max"), max);
        }
        _ => {}
    }
    w(out, format!("{d}/matching"), yn(f.matching));
    // `allow` exists from 6.14; before, every filter rejected. Write it only
    // when it matters, so reject filters work on older kernels.
    if f.allow {
        w(out, format!("{d}/allow"), "Y");
    }
}
