//! Export to damo's JSON scheme layout: the list `damo start --schemes
//! FILE` and `damo args damon --schemes FILE` read (each scheme as damo's
//! `Damos.to_kvpairs` writes it, raw numbers). damo.rs reads it back.
//!
//! Access frequencies are written in percent and ages in microseconds, the
//! units that do not depend on the monitoring intervals. What damo cannot
//! say (udamon's own action, tuner and goal metrics) is refused, naming the
//! scheme and the part.

use serde_json::{json, Map, Value};
use udamon_core::schemes::{Damos, FilterKind};

/// A scheme has a part damo's layout cannot carry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("scheme {index} cannot be written for damo: {what} is udamon's own ({fix})")]
pub struct NotForDamo {
    pub index: usize,
    pub what: String,
    pub fix: &'static str,
}

impl NotForDamo {
    pub fn kind(&self) -> udamon_core::ErrorKind {
        udamon_core::ErrorKind::Usage
    }
}

/// `u64::MAX` is damo's `"max"`.
fn nr(v: u64) -> Value {
    if v == u64::MAX {
        json!("max")
    } else {
        json!(v)
    }
}

/// Basis points as damo's percent text ("12.5 %").
fn percent(bp: u32) -> Value {
    let whole = bp / 100;
    match bp % 100 {
        0 => json!(format!("{whole} %")),
        frac => json!(format!("{whole}.{frac:02} %")),
    }
}

fn scheme(index: usize, d: &Damos) -> Result<Value, NotForDamo> {
    let own = |what: String, fix| Err(NotForDamo { index, what, fix });
    let Some(action) = d.action.kernel_name() else {
        return own(
            format!("action {}", d.action.name()),
            "damo drives kernel DAMON, which has no such action",
        );
    };
    let q = &d.quota;
    let Some(tuner) = q.goal_tuner.kernel_name() else {
        return own(
            format!("goal tuner {}", q.goal_tuner.name()),
            "use consist or temporal",
        );
    };
    let mut goals = Vec::new();
    for g in &q.goals {
        let Some(metric) = g.metric.kernel_name() else {
            return own(
                format!("goal metric {}", g.metric.name()),
                "kernel DAMON's metrics only",
            );
        };
        goals.push(json!({
            "metric": metric,
            "complement": false,
            "nid": if g.metric.is_per_node() || g.nid != 0 { json!(g.nid) } else { Value::Null },
            "memcg_path": g.path,
            "target_value": g.target_value,
            "current_value": g.current_value,
        }));
    }
    let p = &d.pattern;
    let filters: Vec<Value> = d
        .filters
        .iter()
        .map(|f| {
            let mut m = Map::new();
            m.insert("filter_type".into(), json!(f.kind.filter_type().name()));
            m.insert("matching".into(), json!(f.matching));
            m.insert("allow".into(), json!(f.allow));
            let (memcg, range, idx, huge) = match &f.kind {
                FilterKind::Memcg { path } => (json!(path), Value::Null, Value::Null, Value::Null),
                FilterKind::Addr { start, end } => (
                    Value::Null,
                    json!({"start": start, "end": end}),
                    Value::Null,
                    Value::Null,
                ),
                FilterKind::Target { idx } => (Value::Null, Value::Null, json!(idx), Value::Null),
                FilterKind::HugepageSize { min, max } => (
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    json!({"min": min, "max": nr(*max)}),
                ),
                _ => (Value::Null, Value::Null, Value::Null, Value::Null),
            };
            m.insert("memcg_path".into(), memcg);
            m.insert("address_range".into(), range);
            m.insert("damon_target_idx".into(), idx);
            m.insert("hugepage_size".into(), huge);
            Value::Object(m)
        })
        .collect();
    let w = &d.watermarks;
    let mut out = json!({
        "action": action,
        "dests": d.dests.iter().map(|x| json!({"id": x.node, "weight": x.weight})).collect::<Vec<_>>(),
        "access_pattern": {
            "sz_bytes": {"min": nr(p.min_sz), "max": nr(p.max_sz)},
            "nr_accesses": {"min": percent(p.min_freq_bp), "max": percent(p.max_freq_bp)},
            "age": {"min": nr(p.min_age_us), "max": nr(p.max_age_us)},
        },
        "apply_interval_us": d.apply_interval_us,
        "quotas": {
            "time_ms": q.ms,
            "sz_bytes": q.sz,
            "reset_interval_ms": nr(q.reset_interval_ms),
            "fail_charge_num": q.fail_charge_num,
            "fail_charge_denom": q.fail_charge_denom,
            "goals": goals,
            "goal_tuner": tuner,
            "weights": {
                "sz_permil": q.weights.sz,
                "nr_accesses_permil": q.weights.nr_accesses,
                "age_permil": q.weights.age,
            },
        },
        "watermarks": {
            "metric": w.metric.name(),
            "interval_us": w.interval_us,
            "high_permil": w.high,
            "mid_permil": w.mid,
            "low_permil": w.low,
        },
        "filters": filters,
    });
    if let Some(nid) = d.target_nid {
        out["target_nid"] = json!(nid);
    }
    // damo keeps max_nr_snapshots among a scheme's statistics.
    if d.max_nr_snapshots != 0 {
        out["stats"] = json!({"max_nr_snapshots": d.max_nr_snapshots});
    }
    Ok(out)
}

/// The schemes as damo's JSON list.
pub(crate) fn to_damo(schemes: &[Damos]) -> Result<Value, NotForDamo> {
    schemes
        .iter()
        .enumerate()
        .map(|(i, d)| scheme(i, d))
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}
