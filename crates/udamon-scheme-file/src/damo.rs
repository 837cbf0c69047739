//! Import of damo's JSON scheme layout (`damo args damon --format json`,
//! kdamonds dumps), where it maps onto the model.
//!
//! damo writes values either raw (`4096`, `0`) or formatted (`"4.000 KiB"`,
//! `"0 %"`, `"2 m 30 s"`, `"1,024"`, `"max"`); both are read. Access
//! frequencies must be given in percent and ages in time: damo's `samples`
//! and `aggr_intervals` depend on the monitoring intervals, which a scheme
//! file does not carry. Runtime state (`stats`, `tried_regions`,
//! `effective_sz_bytes`) is ignored; anything else without an equivalent is
//! an error naming the key.

use udamon_core::schemes::{
    AccessPattern, Action, Damos, Dest, Filter, FilterKind, FilterType, GoalMetric, Quota,
    QuotaGoal, QuotaWeights, Watermarks,
};

use crate::error::{quote, Error};
use crate::fields::{self, Problem, TimeUnit};
use crate::reader::{self as st, Reader};
use crate::tree::{Node, V};
use crate::units::{placeholder, Side};

const SCHEME_KEYS: &[&str] = &[
    "action",
    "access_pattern",
    "apply_interval_us",
    "quotas",
    "watermarks",
    "filters",
    "target_nid",
    "dests",
    "stats",
    "tried_regions",
    "tried_bytes",
];
const PATTERN_KEYS: &[&str] = &[
    "sz_bytes",
    "nr_accesses",
    "age",
    "nr_accesses_unit",
    "age_unit",
    "min_sz_bytes",
    "max_sz_bytes",
    "min_nr_accesses",
    "max_nr_accesses",
    "min_age",
    "max_age",
];
const QUOTA_KEYS: &[&str] = &[
    "time_ms",
    "sz_bytes",
    "reset_interval_ms",
    "goals",
    "effective_sz_bytes",
    "weights",
    "goal_tuner",
    "fail_charge_num",
    "fail_charge_denom",
];
const WEIGHT_KEYS: &[&str] = &["sz_permil", "nr_accesses_permil", "age_permil"];
const GOAL_KEYS: &[&str] = &[
    "metric",
    "target_metric",
    "target_value",
    "current_value",
    "nid",
    "memcg_path",
    "complement",
    "target_value_bp",
    "current_value_bp",
];
const WMARK_KEYS: &[&str] = &[
    "metric",
    "interval_us",
    "high_permil",
    "mid_permil",
    "low_permil",
];
const FILTER_KEYS: &[&str] = &[
    "filter_type",
    "type",
    "matching",
    "allow",
    "filter_pass",
    "memcg_path",
    "address_range",
    "damon_target_idx",
    "hugepage_size",
];

/// A whole damo dump: `{"kdamonds": [...]}`, one kdamond `{"contexts":
/// [...]}`, or one context (has `ops`/`targets`/`intervals` beside
/// `schemes`).
pub(crate) fn is_damo_document(root: &Node) -> bool {
    [
        "kdamonds",
        "contexts",
        "ops",
        "targets",
        "intervals",
        "nr_regions",
    ]
    .iter()
    .any(|k| root.has(k))
}

/// A scheme written in damo's layout rather than udamon's.
pub(crate) fn looks_like_damo(n: &Node) -> bool {
    let any = |n: Option<&Node>, keys: &[&str]| n.is_some_and(|n| keys.iter().any(|k| n.has(k)));
    let filters_damo = match n.get(&["filters"]).map(|f| &f.v) {
        Some(V::Arr(items)) => items.iter().any(|f| {
            [
                "filter_type",
                "filter_pass",
                "memcg_path",
                "address_range",
                "damon_target_idx",
            ]
            .iter()
            .any(|k| f.has(k))
        }),
        _ => false,
    };
    // udamon's dests name a `node`, damo's an `id`
    let dests_damo = matches!(n.get(&["dests"]).map(|d| &d.v),
        Some(V::Arr(items)) if items.iter().any(|d| d.has("id")));
    // every damo pattern key but "age", which udamon's layout has too
    let damo_pattern: Vec<&str> = PATTERN_KEYS
        .iter()
        .copied()
        .filter(|k| *k != "age")
        .collect();
    any(
        Some(n),
        &[
            "quotas",
            "apply_interval_us",
            "stats",
            "tried_regions",
            "tried_bytes",
        ],
    ) || any(n.get(&["access_pattern"]), &damo_pattern)
        || any(
            n.get(&["watermarks"]),
            &["interval_us", "high_permil", "mid_permil", "low_permil"],
        )
        || filters_damo
        || dests_damo
}

/// Every scheme of every context of every kdamond, in order.
pub(crate) fn document(r: &Reader, root: &Node) -> Result<Vec<Damos>, Error> {
    let mut out = Vec::new();
    if let Some(k) = root.get(&["kdamonds"]) {
        for kdamond in r.array(k, "kdamonds")? {
            contexts(r, kdamond, &mut out)?;
        }
    } else if root.has("contexts") {
        contexts(r, root, &mut out)?;
    } else {
        context(r, root, &mut out)?;
    }
    Ok(out)
}

fn contexts(r: &Reader, kdamond: &Node, out: &mut Vec<Damos>) -> Result<(), Error> {
    if let Some(c) = kdamond.get(&["contexts"]) {
        for ctx in r.array(c, "contexts")? {
            context(r, ctx, out)?;
        }
    }
    Ok(())
}

fn context(r: &Reader, ctx: &Node, out: &mut Vec<Damos>) -> Result<(), Error> {
    if let Some(s) = ctx.get(&["schemes"]) {
        for scheme_node in r.array(s, "schemes")? {
            out.push(scheme(r, scheme_node)?);
        }
    }
    Ok(())
}

/// The error for a damo key udamon cannot express.
fn cannot(r: &Reader, pos: usize, key: &str, why: &str) -> Error {
    r.src.err(
        pos,
        key,
        format!("cannot import damo key {}: {why}", quote(key)),
        "",
    )
}

/// Like [`Reader::keys`], with damo's wording.
fn keys(r: &Reader, n: &Node, allowed: &[&str], what: &str) -> Result<(), Error> {
    r.keys(n, allowed, what).map_err(|mut e| {
        if e.msg.starts_with("unknown key") {
            e.msg = format!(
                "cannot import damo key {} in {what}: udamon has no equivalent",
                quote(&e.token)
            );
            e.expected = String::new();
        }
        e
    })
}

pub(crate) fn scheme(r: &Reader, n: &Node) -> Result<Damos, Error> {
    keys(r, n, SCHEME_KEYS, "scheme")?;
    let action = match n.get(&["action"]) {
        Some(a) => r.scalar(a, fields::action)?,
        None => Action::Stat,
    };
    let pattern = match n.get(&["access_pattern"]) {
        Some(p) => pattern(r, p)?,
        None => AccessPattern::default(),
    };
    let mut s = Damos::new(pattern, action);
    if let Some(v) = n.get(&["apply_interval_us"]) {
        s.apply_interval_us =
            r.scalar(v, |t| fields::time(t, None, "apply interval", TimeUnit::Us))?;
    }
    if let Some(q) = n.get(&["quotas"]) {
        s.quota = quotas(r, q)?;
    }
    if let Some(w) = n.get(&["watermarks"]) {
        s.watermarks = watermarks(r, w)?;
    }
    if let Some(f) = n.get(&["filters"]) {
        s.filters = r
            .array(f, "filters")?
            .iter()
            .map(|f| filter(r, f))
            .collect::<Result<_, _>>()?;
    }
    if let Some(t) = n.get(&["target_nid"]) {
        s.target_nid = r.nid(t)?;
    }
    if let Some(d) = n.get(&["dests"]) {
        let mut dests = Vec::new();
        for one in r.array(d, "dests")? {
            keys(r, one, &["id", "weight"], "dests")?;
            let node = r.nid(r.require(one, &["id"], "dest")?)?.unwrap_or(0);
            let weight = match one.get(&["weight"]) {
                Some(w) => {
                    r.scalar(w, |t| fields::uint(t, "dest weight", u64::from(u32::MAX)))? as u32
                }
                None => 1,
            };
            dests.push(Dest { node, weight });
        }
        s.dests = dests;
    }
    // damo keeps the user's max_nr_snapshots among the statistics.
    if let Some(v) = n
        .get(&["stats"])
        .and_then(|st| st.get(&["max_nr_snapshots"]))
    {
        if !matches!(v.v, V::Null) {
            s.max_nr_snapshots = r.scalar(v, |t| fields::uint(t, "max_nr_snapshots", u64::MAX))?;
        }
    }
    Ok(s)
}

#[derive(Clone, Copy, PartialEq)]
enum Unit {
    /// percent, or usec
    Time,
    /// samples, or aggr_intervals
    Kernel,
}

fn unit_key(r: &Reader, n: &Node, key: &str, good: &[&str], bad: &[&str]) -> Result<Unit, Error> {
    let Some(v) = n.get(&[key]) else {
        return Ok(Unit::Time);
    };
    let word = v.scalar_text().unwrap_or_default();
    if good.contains(&word.as_str()) {
        Ok(Unit::Time)
    } else if bad.contains(&word.as_str()) {
        Ok(Unit::Kernel)
    } else {
        let expected = good
            .iter()
            .chain(bad)
            .copied()
            .collect::<Vec<_>>()
            .join(" or ");
        Err(r.fail(
            v,
            Problem::new(format!("unknown {key} {}", quote(&v.token())), expected),
        ))
    }
}

fn pattern(r: &Reader, n: &Node) -> Result<AccessPattern, Error> {
    keys(r, n, PATTERN_KEYS, "access_pattern")?;
    let nr_unit = unit_key(
        r,
        n,
        "nr_accesses_unit",
        &["percent"],
        &["samples", "sample_intervals"],
    )?;
    let age_unit = unit_key(r, n, "age_unit", &["usec"], &["aggr_intervals"])?;
    // (min, max) nodes of each bound: {"sz_bytes": {"min", "max"}} or the
    // older flat "min_sz_bytes", "max_sz_bytes"
    let pair = |nested: &str, flat: [&str; 2]| -> Result<[Option<&Node>; 2], Error> {
        match n.get(&[nested]) {
            Some(p) => match &p.v {
                V::Arr(items) if items.len() == 2 => Ok([Some(&items[0]), Some(&items[1])]),
                _ => {
                    keys(r, p, &["min", "max"], nested)?;
                    Ok([p.get(&["min"]), p.get(&["max"])])
                }
            },
            None => Ok([n.get(&[flat[0]]), n.get(&[flat[1]])]),
        }
    };
    let sides = [Side::Lower, Side::Upper];
    let sz = pair("sz_bytes", ["min_sz_bytes", "max_sz_bytes"])?;
    let nr = pair("nr_accesses", ["min_nr_accesses", "max_nr_accesses"])?;
    let age = pair("age", ["min_age", "max_age"])?;
    let mut vals = [[0u64, u64::MAX], [0, 10_000], [0, u64::MAX]];
    for i in 0..2 {
        if let Some(v) = sz[i] {
            vals[0][i] = r.scalar(v, |t| fields::size_with(t, Some(sides[i]), "size", true))?;
        }
        if let Some(v) = nr[i] {
            vals[1][i] = u64::from(nr_accesses(r, v, sides[i], nr_unit)?);
        }
        if let Some(v) = age[i] {
            vals[2][i] = age_value(r, v, sides[i], age_unit)?;
        }
    }
    let p = AccessPattern {
        min_sz: vals[0][0],
        max_sz: vals[0][1],
        min_freq_bp: vals[1][0] as u32,
        max_freq_bp: vals[1][1] as u32,
        min_age_us: vals[2][0],
        max_age_us: vals[2][1],
    };
    if let Err((i, prob)) = fields::check_pattern(&p) {
        let at = [sz, nr, age][i][1].unwrap_or(n);
        return Err(r.fail(at, prob));
    }
    Ok(p)
}

fn samples_error(r: &Reader, v: &Node) -> Error {
    r.fail(
        v,
        Problem::new(
            format!("damo access frequency {} is in samples", quote(&v.token())),
            "percent (\"5 %\" or {\"percent\": 5}): samples depend on the monitoring intervals",
        ),
    )
}

fn aggr_error(r: &Reader, v: &Node) -> Error {
    r.fail(
        v,
        Problem::new(
            format!("damo age {} is in aggregation intervals", quote(&v.token())),
            "a time (\"2 m\" or {\"usec\": 120000000}): aggregation intervals depend on the monitoring intervals",
        ),
    )
}

/// `"5 %"`, `5` (percent unless the unit says samples), `"5 samples"`,
/// `{"samples": 5, "percent": 10}`.
fn nr_accesses(r: &Reader, v: &Node, side: Side, unit: Unit) -> Result<u32, Error> {
    if v.entries().is_some() {
        keys(r, v, &["samples", "percent"], "nr_accesses")?;
        return match v.get(&["percent"]).filter(|p| !matches!(p.v, V::Null)) {
            Some(p) => r.scalar(p, |t| fields::freq(t, Some(side))),
            None => Err(samples_error(r, v)),
        };
    }
    let text = v.scalar_text().unwrap_or_default();
    let kernel_unit = unit == Unit::Kernel && placeholder(&text, Some(side)).is_none();
    if text.trim_end().ends_with("samples") || kernel_unit {
        return Err(samples_error(r, v));
    }
    r.scalar(v, |t| fields::freq(t, Some(side)))
}

/// `"2 m 30 s"`, `120000000` (microseconds unless the unit says
/// aggr_intervals), `"5 aggr_intervals"`, `{"usec": .., "aggr_intervals": ..}`.
fn age_value(r: &Reader, v: &Node, side: Side, unit: Unit) -> Result<u64, Error> {
    if v.entries().is_some() {
        keys(r, v, &["usec", "aggr_intervals"], "age")?;
        return match v.get(&["usec"]).filter(|p| !matches!(p.v, V::Null)) {
            Some(u) => r.scalar(u, |t| fields::time(t, Some(side), "age", TimeUnit::Us)),
            None => Err(aggr_error(r, v)),
        };
    }
    let text = v.scalar_text().unwrap_or_default();
    let kernel_unit = unit == Unit::Kernel && placeholder(&text, Some(side)).is_none();
    if text.trim_end().ends_with("aggr_intervals") || kernel_unit {
        return Err(aggr_error(r, v));
    }
    r.scalar(v, |t| fields::time(t, Some(side), "age", TimeUnit::Us))
}

fn quotas(r: &Reader, n: &Node) -> Result<Quota, Error> {
    keys(r, n, QUOTA_KEYS, "quotas")?;
    let mut q = Quota::default();
    if let Some(v) = n.get(&["time_ms"]) {
        q.ms = r.scalar(v, |t| fields::time(t, None, "quota time", TimeUnit::Ms))?;
    }
    if let Some(v) = n.get(&["sz_bytes"]) {
        q.sz = r.scalar(v, |t| fields::size_with(t, None, "quota size", true))?;
    }
    if let Some(v) = n.get(&["reset_interval_ms"]) {
        q.reset_interval_ms =
            r.scalar(v, |t| fields::time(t, None, "reset interval", TimeUnit::Ms))?;
    }
    if let Some(w) = n.get(&["weights"]) {
        keys(r, w, WEIGHT_KEYS, "weights")?;
        let weight = |k: &str| -> Result<u32, Error> {
            match w.get(&[k]) {
                Some(v) => r
                    .scalar(v, |t| fields::ratio(t, "weight", 1000, u64::from(u32::MAX)))
                    .map(|v| v as u32),
                None => Ok(0),
            }
        };
        q.weights = QuotaWeights {
            sz: weight("sz_permil")?,
            nr_accesses: weight("nr_accesses_permil")?,
            age: weight("age_permil")?,
        };
    }
    if let Some(g) = n.get(&["goals"]) {
        q.goals = r
            .array(g, "goals")?
            .iter()
            .map(|g| goal(r, g))
            .collect::<Result<_, _>>()?;
    }
    if let Some(v) = n.get(&["goal_tuner"]) {
        q.goal_tuner = r.scalar(v, st::goal_tuner)?;
    }
    let num = n.get(&["fail_charge_num"]);
    let denom = n.get(&["fail_charge_denom"]);
    if let Some(v) = num {
        q.fail_charge_num = r.scalar(v, |t| fields::uint(t, "fail_charge_num", u64::MAX))?;
    }
    if let Some(v) = denom {
        q.fail_charge_denom = r.scalar(v, |t| fields::uint(t, "fail_charge_denom", u64::MAX))?;
    }
    if q.fail_charge_denom == 0 && q.fail_charge_num != 0 {
        let at = num.map_or(n.pos, |v| v.pos);
        return Err(cannot(
            r,
            at,
            "fail_charge_num",
            "it needs fail_charge_denom above 0 (the kernel ignores it otherwise)",
        ));
    }
    Ok(q)
}

fn goal(r: &Reader, n: &Node) -> Result<QuotaGoal, Error> {
    keys(r, n, GOAL_KEYS, "goal")?;
    // damo's first goals were user feedback named target_value_bp
    let (metric, target_keys, current_keys): (GoalMetric, &[&str], &[&str]) =
        match n.get(&["metric", "target_metric"]) {
            Some(m) => (
                r.scalar(m, st::goal_metric)?,
                &["target_value"],
                &["current_value"],
            ),
            None if n.has("target_value_bp") => (
                GoalMetric::UserInput,
                &["target_value_bp"],
                &["current_value_bp"],
            ),
            None => return Err(r.require(n, &["metric"], "goal").unwrap_err()),
        };
    let target = r.require(n, target_keys, "goal")?;
    let target_value = r.scalar(target, |t| st::goal_value(metric, t, "goal target"))?;
    let current_value = match n.get(current_keys) {
        Some(c) if !matches!(c.v, V::Null) => {
            r.scalar(c, |t| st::goal_value(metric, t, "goal current value"))?
        }
        _ => 0,
    };
    let nid = match n.get(&["nid"]) {
        Some(v) => r.nid(v)?.unwrap_or(0),
        None => 0,
    };
    if let Some(c) = n.get(&["complement"]) {
        if !matches!(c.v, V::Null) && r.boolean(c, "complement")? {
            return Err(cannot(
                r,
                c.pos,
                "complement",
                "a complemented goal metric is not in the kernels udamon drives",
            ));
        }
    }
    let path = r.goal_path(n, metric, n.get(&["memcg_path"]))?;
    Ok(QuotaGoal {
        metric,
        target_value,
        current_value,
        nid,
        path,
    })
}

fn watermarks(r: &Reader, n: &Node) -> Result<Watermarks, Error> {
    keys(r, n, WMARK_KEYS, "watermarks")?;
    let mut w = Watermarks::default();
    if let Some(m) = n.get(&["metric"]) {
        w.metric = r.scalar(m, st::wmark_metric)?;
    }
    if let Some(v) = n.get(&["interval_us"]) {
        w.interval_us = r.scalar(v, |t| {
            fields::time(t, None, "watermark interval", TimeUnit::Us)
        })?;
    }
    let nodes = [
        n.get(&["high_permil"]),
        n.get(&["mid_permil"]),
        n.get(&["low_permil"]),
    ];
    r.watermark_levels(n, &mut w, nodes)?;
    Ok(w)
}

fn filter(r: &Reader, n: &Node) -> Result<Filter, Error> {
    keys(r, n, FILTER_KEYS, "filter")?;
    let ty = r.require(n, &["filter_type", "type"], "filter")?;
    let kind = r.scalar(ty, st::filter_type)?;
    let what = format!("{} filter", kind.name());
    // damo writes every key, null where it does not apply: read only the
    // ones of this type
    let kind = match kind {
        FilterType::Addr => {
            let range = r.require(n, &["address_range"], &what)?;
            keys(r, range, &["start", "end"], "address_range")?;
            let start = r.require(range, &["start"], "address_range")?;
            let end = r.require(range, &["end"], "address_range")?;
            r.addr_range(start, end)?
        }
        FilterType::Target => {
            let idx = r.require(n, &["damon_target_idx"], &what)?;
            FilterKind::Target {
                idx: r.scalar(idx, |t| {
                    fields::uint(t, "target index", u64::from(u32::MAX))
                })? as u32,
            }
        }
        FilterType::Memcg => FilterKind::Memcg {
            path: r.memcg_path(r.require(n, &["memcg_path"], &what)?)?,
        },
        FilterType::HugepageSize => match n.get(&["hugepage_size"]).map(|h| (h, &h.v)) {
            Some((_, V::Arr(items))) if items.len() == 2 => {
                r.hugepage_range(n, Some(&items[0]), Some(&items[1]))?
            }
            Some((h, V::Obj(_))) => {
                keys(r, h, &["min", "max"], "hugepage_size")?;
                r.hugepage_range(h, h.get(&["min"]), h.get(&["max"]))?
            }
            Some((_, V::Null)) | None => r.hugepage_range(n, None, None)?,
            Some((h, _)) => {
                return Err(r.fail(
                    h,
                    Problem::new(
                        format!("bad hugepage_size {}", quote(&h.token())),
                        "a [min, max] pair of sizes",
                    ),
                ))
            }
        },
        other => st::simple_filter(other),
    };
    let matching = match n.get(&["matching"]) {
        Some(m) => r.boolean(m, "matching")?,
        None => true,
    };
    let allow = match n.get(&["allow", "filter_pass"]) {
        Some(a) => r.boolean(a, "allow")?,
        None => false,
    };
    Ok(Filter {
        kind,
        matching,
        allow,
    })
}
