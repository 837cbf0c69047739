//! What every structured reader shares: [`Reader`], which reads values
//! out of a [`Node`] tree and fails at the value's position, and the
//! parsers of the kernel's names (goal metrics, filter types, watermark
//! metrics, goal tuners). The structured form (structured.rs) and damo's
//! (damo.rs) both build on it.

use udamon_core::schemes::{
    FilterKind, FilterType, GoalMetric, GoalTuner, WatermarkMetric, Watermarks,
};
use udamon_core::units::fmt_size;

use crate::error::{quote, Error, Src};
use crate::fields::{self, Problem, TimeUnit};
use crate::tree::{Node, V};
use crate::units::Side;

pub(crate) const GOAL_METRIC_EXPECTED: &str =
    "one of user_input, some_mem_psi_us, node_mem_used_bp, node_mem_free_bp, node_memcg_used_bp, \
     node_memcg_free_bp, active_mem_bp, inactive_mem_bp, node_eligible_mem_bp, rss_bp, refault_rate";
pub(crate) const FILTER_TYPE_EXPECTED: &str =
    "one of addr, target, anon, young, memcg, hugepage_size, unmapped, active";

/// Reads values out of a [`Node`] tree, failing at the value's position.
pub(crate) struct Reader<'a> {
    pub src: Src<'a>,
}

impl<'a> Reader<'a> {
    pub fn fail(&self, n: &Node, p: Problem) -> Error {
        self.src.err(n.pos, n.token(), p.msg, p.expected)
    }

    /// Parses a scalar through `parse`; other kinds fail the same way with
    /// their token (`bad size "true"`).
    pub fn scalar<T>(
        &self,
        n: &Node,
        parse: impl FnOnce(&str) -> Result<T, Problem>,
    ) -> Result<T, Error> {
        let text = n.scalar_text().unwrap_or_else(|| n.token());
        parse(&text).map_err(|p| self.fail(n, p))
    }

    /// Fails on the first key of `n` not in `allowed`. `n` must be a table.
    pub fn keys(&self, n: &Node, allowed: &[&str], what: &str) -> Result<(), Error> {
        let Some(entries) = n.entries() else {
            return Err(self.fail(
                n,
                Problem::new(
                    format!("{what} must be a table, not {}", quote(&n.token())),
                    "a table (an object in json)",
                ),
            ));
        };
        for (k, pos, _) in entries {
            if !allowed.contains(&k.as_str()) {
                return Err(self.src.err(
                    *pos,
                    k.clone(),
                    format!("unknown key {} in {what}", quote(k)),
                    format!("one of {}", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }

    pub fn require<'n>(
        &self,
        parent: &'n Node,
        keys: &[&str],
        what: &str,
    ) -> Result<&'n Node, Error> {
        parent.get(keys).ok_or_else(|| {
            self.src.err(
                parent.pos,
                "",
                format!("{what} has no {}", quote(keys[0])),
                format!("a key {}", quote(keys[0])),
            )
        })
    }

    pub fn array<'n>(&self, n: &'n Node, what: &str) -> Result<&'n [Node], Error> {
        match &n.v {
            V::Arr(items) => Ok(items),
            _ => Err(self.fail(
                n,
                Problem::new(format!("{what} must be a list"), "an array of tables"),
            )),
        }
    }

    /// `true`/`false`, and damo's `yes`/`no`/`y`/`n` as strings.
    pub fn boolean(&self, n: &Node, what: &str) -> Result<bool, Error> {
        let word = match &n.v {
            V::Bool(b) => return Ok(*b),
            V::Str(s) => s.to_ascii_lowercase(),
            _ => String::new(),
        };
        match word.as_str() {
            "true" | "yes" | "y" => Ok(true),
            "false" | "no" | "n" => Ok(false),
            _ => Err(self.fail(
                n,
                Problem::new(format!("bad {what} {}", quote(&n.token())), "true or false"),
            )),
        }
    }

    /// A `[min, max]` pair, also written `{ min = .., max = .. }` (a missing
    /// side is unbounded). Returns the values and the node of the max (or
    /// of the pair) for range errors.
    pub fn range<'n, T>(
        &self,
        n: &'n Node,
        what: &str,
        parse: impl Fn(&str, Side) -> Result<T, Problem>,
    ) -> Result<(T, T, &'n Node), Error> {
        let (lo, hi) = match &n.v {
            V::Arr(items) if items.len() == 2 => (Some(&items[0]), Some(&items[1])),
            V::Obj(_) => {
                self.keys(n, &["min", "max"], what)?;
                (n.get(&["min"]), n.get(&["max"]))
            }
            _ => {
                return Err(self.fail(
                    n,
                    Problem::new(
                        format!(
                            "{what} must be a [min, max] pair, not {}",
                            quote(&n.token())
                        ),
                        "two values like [\"4K\", \"max\"]",
                    ),
                ))
            }
        };
        let one = |side, v: Option<&Node>| match v {
            Some(v) => self.scalar(v, |t| parse(t, side)),
            None => parse(if side == Side::Lower { "min" } else { "max" }, side)
                .map_err(|p| self.fail(n, p)),
        };
        Ok((
            one(Side::Lower, lo)?,
            one(Side::Upper, hi)?,
            hi.unwrap_or(n),
        ))
    }

    /// A NUMA node id; JSON `null` is none.
    pub fn nid(&self, n: &Node) -> Result<Option<u32>, Error> {
        if matches!(n.v, V::Null) {
            return Ok(None);
        }
        self.scalar(n, |t| fields::uint(t, "node id", u64::from(u32::MAX)))
            .map(|v| Some(v as u32))
    }

    /// Reads high, mid and low (per-mille, or percentages) and checks
    /// `low <= mid <= high` when a metric is set.
    pub fn watermark_levels(
        &self,
        parent: &Node,
        w: &mut Watermarks,
        nodes: [Option<&Node>; 3],
    ) -> Result<(), Error> {
        let names = ["high watermark", "mid watermark", "low watermark"];
        let mut vals = [0u32; 3];
        for i in 0..3 {
            if let Some(v) = nodes[i] {
                vals[i] = self
                    .scalar(v, |t| fields::ratio(t, names[i], 1000, u64::from(u32::MAX)))?
                    as u32;
            }
        }
        [w.high, w.mid, w.low] = vals;
        if w.metric != WatermarkMetric::None {
            for (hi, lo) in [(0, 1), (1, 2)] {
                if vals[lo] > vals[hi] {
                    let at = nodes[lo].unwrap_or(parent);
                    let msg = format!(
                        "{} {} is above {} {}",
                        names[lo], vals[lo], names[hi], vals[hi]
                    );
                    return Err(
                        self.fail(at, Problem::new(msg, "low <= mid <= high, in per-mille"))
                    );
                }
            }
        }
        Ok(())
    }

    pub fn addr_range(&self, start: &Node, end: &Node) -> Result<FilterKind, Error> {
        let addr =
            |n: &Node, side| self.scalar(n, |t| fields::size_with(t, Some(side), "address", false));
        let (s, e) = (addr(start, Side::Lower)?, addr(end, Side::Upper)?);
        if e <= s {
            let msg = format!("addr filter end {e:#x} is not above its start {s:#x}");
            return Err(self.fail(end, Problem::new(msg, "start < end")));
        }
        Ok(FilterKind::Addr { start: s, end: e })
    }

    pub fn hugepage_range(
        &self,
        parent: &Node,
        lo: Option<&Node>,
        hi: Option<&Node>,
    ) -> Result<FilterKind, Error> {
        let size = |n: Option<&Node>, side| match n {
            Some(n) => self.scalar(n, |t| fields::size(t, Some(side), "hugepage size")),
            None => Ok(if side == Side::Lower { 0 } else { u64::MAX }),
        };
        let (min, max) = (size(lo, Side::Lower)?, size(hi, Side::Upper)?);
        if min > max {
            let msg = format!(
                "max hugepage size {} is below min hugepage size {}",
                fmt_size(max),
                fmt_size(min)
            );
            return Err(self.fail(
                hi.unwrap_or(parent),
                Problem::new(msg, "a max at least the min"),
            ));
        }
        Ok(FilterKind::HugepageSize { min, max })
    }

    /// A goal's memory cgroup: required by the `node_memcg_*` metrics,
    /// refused by the others.
    pub fn goal_path(
        &self,
        goal: &Node,
        metric: GoalMetric,
        path: Option<&Node>,
    ) -> Result<Option<String>, Error> {
        match (metric.needs_memcg(), path) {
            (true, Some(p)) => self.memcg_path(p).map(Some),
            (true, None) => Err(self.fail(
                goal,
                Problem::new(
                    format!("goal metric {} needs a memory cgroup", metric.name()),
                    "path = \"/workload\" (from the cgroup mount)",
                ),
            )),
            (false, Some(p)) if !matches!(p.v, V::Null) => Err(self.fail(
                p,
                Problem::new(
                    format!("goal metric {} takes no memory cgroup", metric.name()),
                    "path only with node_memcg_used_bp or node_memcg_free_bp",
                ),
            )),
            (false, _) => Ok(None),
        }
    }

    pub fn memcg_path(&self, n: &Node) -> Result<String, Error> {
        match &n.v {
            V::Str(s) if !s.is_empty() => Ok(s.clone()),
            _ => Err(self.fail(
                n,
                Problem::new(
                    format!("bad memcg path {}", quote(&n.token())),
                    "a cgroup path like \"/workload\"",
                ),
            )),
        }
    }
}

pub(crate) fn filter_type(t: &str) -> Result<FilterType, Problem> {
    FilterType::from_name(t).ok_or_else(|| {
        Problem::new(
            format!("unknown filter type {}", quote(t)),
            FILTER_TYPE_EXPECTED,
        )
    })
}

/// The filter of a type that takes no arguments.
pub(crate) fn simple_filter(ty: FilterType) -> FilterKind {
    ty.without_args().unwrap_or(FilterKind::Active)
}

pub(crate) fn goal_metric(t: &str) -> Result<GoalMetric, Problem> {
    GoalMetric::from_name(t).ok_or_else(|| {
        Problem::new(
            format!("unknown goal metric {}", quote(t)),
            GOAL_METRIC_EXPECTED,
        )
    })
}

/// Goal values in the metric's unit: basis points (`20%` converts),
/// microseconds of stall (`10ms` converts), or a plain count.
pub(crate) fn goal_value(metric: GoalMetric, t: &str, what: &str) -> Result<u64, Problem> {
    match metric {
        GoalMetric::SomeMemPsiUs => fields::time(t, None, what, TimeUnit::Us),
        GoalMetric::UserInput | GoalMetric::RefaultRate => fields::uint(t, what, u64::MAX),
        // The rest are shares in basis points.
        _ => fields::ratio(t, what, 10_000, u64::MAX),
    }
}

/// A quota's charge ratio for failed actions, `"1/4"` (numerator over a
/// denominator above 0).
pub(crate) fn fail_charge(t: &str) -> Result<(u64, u64), Problem> {
    let bad = || {
        Problem::new(
            format!("bad fail charge ratio {}", quote(t)),
            "num/denom with denom above 0, e.g. \"1/4\" (a failed region charges a quarter of its size)",
        )
    };
    let (n, d) = t.split_once('/').ok_or_else(bad)?;
    let (n, d): (u64, u64) = (
        n.trim().parse().map_err(|_| bad())?,
        d.trim().parse().map_err(|_| bad())?,
    );
    if d == 0 {
        return Err(bad());
    }
    Ok((n, d))
}

pub(crate) fn goal_tuner(t: &str) -> Result<GoalTuner, Problem> {
    GoalTuner::from_name(t).ok_or_else(|| {
        Problem::new(
            format!("unknown goal tuner {}", quote(t)),
            "consist, temporal or fast (udamon's engine only)",
        )
    })
}

pub(crate) fn wmark_metric(t: &str) -> Result<WatermarkMetric, Problem> {
    WatermarkMetric::from_name(t).ok_or_else(|| {
        Problem::new(
            format!("unknown watermark metric {}", quote(t)),
            "none or free_mem_rate",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lists in messages are the core's names, in its order.
    #[test]
    fn expected_lists_name_every_keyword() {
        let list = |names: Vec<&str>| format!("one of {}", names.join(", "));
        assert_eq!(
            GOAL_METRIC_EXPECTED,
            list(GoalMetric::ALL.iter().map(|m| m.name()).collect())
        );
        assert_eq!(
            FILTER_TYPE_EXPECTED,
            list(FilterType::ALL.iter().map(|t| t.name()).collect())
        );
    }
}
