//! The normalised structured form (TOML and JSON from one description), and
//! the one-line human description.

use std::fmt::Write as _;

use udamon_core::schemes::{
    AccessPattern, Damos, FilterKind, GoalTuner, Quota, QuotaWeights, WatermarkMetric, Watermarks,
};
use udamon_core::units::{fmt_size, fmt_time, fmt_time_us, human_size, Human, TimeUnit};

use crate::units::fmt_percent;

/// A size in a description: `4.0 KiB`, `128 MiB`.
fn short_size(v: u64) -> String {
    human_size(v.into(), Human::Short)
}

fn fmt_time_ms(ms: u64) -> String {
    fmt_time(ms, TimeUnit::Ms)
}

/// A value of the normalised form.
enum E {
    Str(String),
    Int(u64),
    Bool(bool),
    Arr(Vec<E>),
    /// Inline table.
    Tab(Vec<(&'static str, E)>),
}

type Table = Vec<(&'static str, E)>;

/// One scheme: its own keys, then the sub-tables TOML writes under their own
/// headers.
struct Out {
    top: Table,
    quota: Option<(Table, Vec<Table>)>,
    watermarks: Option<Table>,
    filters: Vec<Table>,
}

fn s(v: impl Into<String>) -> E {
    E::Str(v.into())
}

fn bound_size(v: u64, lower: bool) -> E {
    match v {
        0 if lower => s("min"),
        u64::MAX => s("max"),
        v => s(fmt_size(v)),
    }
}

fn bound_time_us(v: u64, lower: bool) -> E {
    match v {
        0 if lower => s("min"),
        u64::MAX => s("max"),
        v => s(fmt_time_us(v)),
    }
}

fn time_ms(v: u64) -> E {
    if v == u64::MAX {
        s("max")
    } else {
        s(fmt_time_ms(v))
    }
}

fn pattern(p: &AccessPattern) -> E {
    E::Tab(vec![
        (
            "sz",
            E::Arr(vec![
                bound_size(p.min_sz, true),
                bound_size(p.max_sz, false),
            ]),
        ),
        (
            "freq",
            E::Arr(vec![
                s(fmt_percent(p.min_freq_bp)),
                s(fmt_percent(p.max_freq_bp)),
            ]),
        ),
        (
            "age",
            E::Arr(vec![
                bound_time_us(p.min_age_us, true),
                bound_time_us(p.max_age_us, false),
            ]),
        ),
    ])
}

fn quota(q: &Quota) -> Option<(Table, Vec<Table>)> {
    if *q == Quota::default() {
        return None;
    }
    let mut t = Table::new();
    if q.ms != 0 {
        t.push(("time", time_ms(q.ms)));
    }
    if q.sz != 0 {
        t.push((
            "size",
            if q.sz == u64::MAX {
                s("max")
            } else {
                s(fmt_size(q.sz))
            },
        ));
    }
    if q.reset_interval_ms != 0 {
        t.push(("reset_interval", time_ms(q.reset_interval_ms)));
    }
    if q.weights != QuotaWeights::default() {
        let w = q.weights;
        t.push((
            "weights",
            E::Tab(vec![
                ("sz", E::Int(w.sz.into())),
                ("nr_accesses", E::Int(w.nr_accesses.into())),
                ("age", E::Int(w.age.into())),
            ]),
        ));
    }
    if q.goal_tuner != GoalTuner::default() {
        t.push(("goal_tuner", s(q.goal_tuner.name())));
    }
    if q.fail_charge_denom != 0 {
        t.push((
            "fail_charge",
            s(format!("{}/{}", q.fail_charge_num, q.fail_charge_denom)),
        ));
    }
    let goals = q
        .goals
        .iter()
        .map(|g| {
            let mut gt: Table = vec![
                ("metric", s(g.metric.name())),
                ("target", E::Int(g.target_value)),
            ];
            if g.current_value != 0 {
                gt.push(("current", E::Int(g.current_value)));
            }
            if g.nid != 0 || g.metric.is_per_node() {
                gt.push(("nid", E::Int(g.nid.into())));
            }
            if let Some(p) = &g.path {
                gt.push(("path", s(p.clone())));
            }
            gt
        })
        .collect();
    Some((t, goals))
}

fn watermarks(w: &Watermarks) -> Option<Table> {
    if *w == Watermarks::default() {
        return None;
    }
    let mut t: Table = vec![("metric", s(w.metric.name()))];
    if w.interval_us != 0 {
        t.push(("interval", bound_time_us(w.interval_us, false)));
    }
    t.extend([
        ("high", E::Int(w.high.into())),
        ("mid", E::Int(w.mid.into())),
        ("low", E::Int(w.low.into())),
    ]);
    Some(t)
}

fn out(d: &Damos) -> Out {
    let mut top: Table = vec![
        ("action", s(d.action.name())),
        ("access_pattern", pattern(&d.pattern)),
    ];
    if d.apply_interval_us != 0 {
        top.push(("apply_interval", bound_time_us(d.apply_interval_us, false)));
    }
    if let Some(nid) = d.target_nid {
        top.push(("target_nid", E::Int(nid.into())));
    }
    if !d.dests.is_empty() {
        let dests = d
            .dests
            .iter()
            .map(|x| {
                E::Tab(vec![
                    ("node", E::Int(x.node.into())),
                    ("weight", E::Int(x.weight.into())),
                ])
            })
            .collect();
        top.push(("dests", E::Arr(dests)));
    }
    if d.max_nr_snapshots != 0 {
        top.push(("max_nr_snapshots", E::Int(d.max_nr_snapshots)));
    }
    let filters = d
        .filters
        .iter()
        .map(|f| {
            let mut t: Table = vec![("type", s(f.kind.filter_type().name()))];
            match &f.kind {
                FilterKind::Addr { start, end } => {
                    t.push(("start", s(format!("{start:#x}"))));
                    t.push(("end", s(format!("{end:#x}"))));
                }
                FilterKind::Target { idx } => t.push(("idx", E::Int((*idx).into()))),
                FilterKind::Memcg { path } => t.push(("path", s(path.clone()))),
                FilterKind::HugepageSize { min, max } => {
                    t.push(("min", s(fmt_size(*min))));
                    t.push(("max", bound_size(*max, false)));
                }
                _ => {}
            }
            t.push(("matching", E::Bool(f.matching)));
            t.push(("allow", E::Bool(f.allow)));
            t
        })
        .collect();
    Out {
        top,
        quota: quota(&d.quota),
        watermarks: watermarks(&d.watermarks),
        filters,
    }
}

/// A TOML basic string.
fn toml_str(v: &str) -> String {
    let mut o = String::with_capacity(v.len() + 2);
    o.push('"');
    for c in v.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn toml_value(e: &E) -> String {
    match e {
        E::Str(v) => toml_str(v),
        // TOML integers are signed 64-bit: larger values go as strings
        E::Int(v) if *v > i64::MAX as u64 => toml_str(&v.to_string()),
        E::Int(v) => v.to_string(),
        E::Bool(b) => b.to_string(),
        E::Arr(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        E::Tab(t) => format!(
            "{{ {} }}",
            t.iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn toml_table(o: &mut String, t: &Table) {
    for (k, v) in t {
        let _ = writeln!(o, "{k} = {}", toml_value(v));
    }
}

pub(crate) fn to_toml(schemes: &[Damos]) -> String {
    let mut o = String::new();
    for (i, d) in schemes.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        let x = out(d);
        o.push_str("[[scheme]]\n");
        toml_table(&mut o, &x.top);
        if let Some((q, goals)) = &x.quota {
            o.push_str("\n[scheme.quota]\n");
            toml_table(&mut o, q);
            for g in goals {
                o.push_str("\n[[scheme.quota.goals]]\n");
                toml_table(&mut o, g);
            }
        }
        if let Some(w) = &x.watermarks {
            o.push_str("\n[scheme.watermarks]\n");
            toml_table(&mut o, w);
        }
        for f in &x.filters {
            o.push_str("\n[[scheme.filters]]\n");
            toml_table(&mut o, f);
        }
    }
    o
}

fn json_value(e: &E) -> serde_json::Value {
    use serde_json::Value;
    match e {
        E::Str(v) => Value::String(v.clone()),
        E::Int(v) => Value::from(*v),
        E::Bool(b) => Value::Bool(*b),
        E::Arr(items) => Value::Array(items.iter().map(json_value).collect()),
        E::Tab(t) => json_table(t),
    }
}

fn json_table(t: &Table) -> serde_json::Value {
    serde_json::Value::Object(
        t.iter()
            .map(|(k, v)| (k.to_string(), json_value(v)))
            .collect(),
    )
}

pub(crate) fn to_json(schemes: &[Damos]) -> serde_json::Value {
    let list = schemes
        .iter()
        .map(|d| {
            let x = out(d);
            let mut m = serde_json::Map::new();
            for (k, v) in &x.top {
                m.insert(k.to_string(), json_value(v));
            }
            if let Some((q, goals)) = &x.quota {
                let mut qv = json_table(q);
                if !goals.is_empty() {
                    qv["goals"] = serde_json::Value::Array(goals.iter().map(json_table).collect());
                }
                m.insert("quota".into(), qv);
            }
            if let Some(w) = &x.watermarks {
                m.insert("watermarks".into(), json_table(w));
            }
            if !x.filters.is_empty() {
                m.insert(
                    "filters".into(),
                    serde_json::Value::Array(x.filters.iter().map(json_table).collect()),
                );
            }
            serde_json::Value::Object(m)
        })
        .collect();
    serde_json::json!({ "schemes": serde_json::Value::Array(list) })
}

fn human_time_us(us: u64) -> String {
    fmt_interval_us(us)
}

/// `lo..hi`, `lo..` when `hi` is the top, `any` when both are the extremes.
fn span(lo: u64, hi: u64, bottom: u64, top: u64, f: impl Fn(u64) -> String) -> Option<String> {
    match (lo == bottom, hi == top) {
        (true, true) => None,
        (_, true) => Some(format!("{}..", f(lo))),
        _ => Some(format!("{}..{}", f(lo), f(hi))),
    }
}

pub(crate) fn describe(d: &Damos) -> String {
    let p = &d.pattern;
    let mut o = format!("{} regions of ", d.action.name());
    match span(p.min_sz, p.max_sz, 0, u64::MAX, short_size) {
        Some(sz) => o.push_str(&sz),
        None => o.push_str("any size"),
    }
    match span(
        p.min_freq_bp.into(),
        p.max_freq_bp.into(),
        0,
        10_000,
        |bp| fmt_percent(bp as u32),
    ) {
        Some(f) => {
            let _ = write!(o, " with access {f}");
        }
        None => o.push_str(" with any access"),
    }
    if let Some(age) = span(p.min_age_us, p.max_age_us, 0, u64::MAX, human_time_us) {
        let _ = write!(
            o,
            " {} {age}",
            if p.max_freq_bp == 0 {
                "idle for"
            } else {
                "for"
            }
        );
    }
    if !d.dests.is_empty() {
        let nodes: Vec<String> = d
            .dests
            .iter()
            .map(|x| format!("{}:{}", x.node, x.weight))
            .collect();
        let _ = write!(o, " to nodes {} (node:weight)", nodes.join(", "));
    } else if let Some(nid) = d.target_nid {
        let _ = write!(o, " to node {nid}");
    }
    if d.apply_interval_us != 0 {
        let _ = write!(o, " every {}", fmt_interval_us(d.apply_interval_us));
    }
    let q = &d.quota;
    if q.is_set() {
        let mut parts = Vec::new();
        if q.ms != 0 {
            parts.push(if q.ms == u64::MAX {
                "unlimited time".into()
            } else {
                fmt_time_ms(q.ms)
            });
        }
        if q.sz != 0 {
            parts.push(if q.sz == u64::MAX {
                "unlimited size".into()
            } else {
                short_size(q.sz)
            });
        }
        let mut quota = parts.join(", ");
        if q.reset_interval_ms != 0 && q.reset_interval_ms != u64::MAX {
            let _ = write!(quota, " per {}", fmt_time_ms(q.reset_interval_ms));
        }
        for g in &q.goals {
            if !quota.is_empty() {
                quota.push_str(", ");
            }
            let _ = write!(quota, "goal {} {}", g.metric.name(), g.target_value);
            if let Some(p) = &g.path {
                let _ = write!(quota, " of {}", p.escape_debug());
            }
            if g.metric.is_per_node() {
                let _ = write!(quota, " on node {}", g.nid);
            }
        }
        if q.fail_charge_denom != 0 {
            let _ = write!(
                quota,
                ", failures charged {}/{}",
                q.fail_charge_num, q.fail_charge_denom
            );
        }
        if q.goal_tuner != GoalTuner::default() {
            let _ = write!(quota, ", {} tuner", q.goal_tuner.name());
        }
        let _ = write!(o, " (quota {quota})");
    }
    if d.max_nr_snapshots != 0 {
        let _ = write!(o, " (for {} passes)", d.max_nr_snapshots);
    }
    let w = &d.watermarks;
    if w.metric != WatermarkMetric::None {
        let _ = write!(
            o,
            " (while {} {}/{}/{} per-mille)",
            w.metric.name(),
            w.high,
            w.mid,
            w.low
        );
    }
    if !d.filters.is_empty() {
        let filters: Vec<String> = d
            .filters
            .iter()
            .map(|f| {
                let mut words = vec![if f.allow { "allow" } else { "reject" }.to_string()];
                if !f.matching {
                    words.push("none".into());
                }
                words.push(f.kind.filter_type().name().into());
                match &f.kind {
                    FilterKind::Addr { start, end } => words.push(format!("{start:#x}-{end:#x}")),
                    FilterKind::Target { idx } => words.push(idx.to_string()),
                    FilterKind::Memcg { path } => words.push(path.escape_debug().to_string()),
                    FilterKind::HugepageSize { min, max } => {
                        words.push(format!("{}..{}", short_size(*min), short_size(*max)))
                    }
                    _ => {}
                }
                words.join(" ")
            })
            .collect();
        let _ = write!(o, " (filters: {})", filters.join(", "));
    }
    o
}

fn fmt_interval_us(us: u64) -> String {
    if us == u64::MAX {
        "max".into()
    } else {
        fmt_time_us(us)
    }
}
