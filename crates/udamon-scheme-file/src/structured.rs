//! The structured form (TOML `[[scheme]]` tables, or the same in JSON), on
//! the shared [`Reader`] (reader.rs); damo's documents found in it are read
//! by damo.rs.

use udamon_core::schemes::{
    AccessPattern, Damos, Dest, Filter, FilterKind, FilterType, Quota, QuotaGoal, QuotaWeights,
    Watermarks,
};

use crate::damo;
use crate::error::Error;
use crate::fields::{self, Problem, TimeUnit};
use crate::reader::{
    fail_charge, filter_type, goal_metric, goal_tuner, goal_value, simple_filter, wmark_metric,
    Reader,
};
use crate::tree::{Node, V};

pub(crate) const SCHEME_KEYS: &[&str] = &[
    "action",
    "access_pattern",
    "apply_interval",
    "quota",
    "watermarks",
    "filters",
    "target_nid",
    "dests",
    "max_nr_snapshots",
];
const PATTERN_KEYS: &[&str] = &["sz", "size", "freq", "access_rate", "age"];
const QUOTA_KEYS: &[&str] = &[
    "time",
    "size",
    "reset_interval",
    "weights",
    "goals",
    "goal_tuner",
    "fail_charge",
];
const WEIGHT_KEYS: &[&str] = &["sz", "nr_accesses", "age"];
const GOAL_KEYS: &[&str] = &[
    "metric",
    "target",
    "target_value",
    "current",
    "current_value",
    "nid",
    "path",
];
const WMARK_KEYS: &[&str] = &["metric", "interval", "high", "mid", "low"];

impl<'a> Reader<'a> {
    pub fn schemes(&self, root: &Node) -> Result<Vec<Damos>, Error> {
        match &root.v {
            V::Arr(items) => items.iter().map(|s| self.any_scheme(s)).collect(),
            V::Obj(_) if damo::is_damo_document(root) => damo::document(self, root),
            V::Obj(_) => {
                self.keys(root, &["scheme", "schemes"], "the document")?;
                match root.get(&["scheme", "schemes"]) {
                    None => Ok(Vec::new()),
                    Some(list) => self
                        .array(list, "scheme")?
                        .iter()
                        .map(|s| self.any_scheme(s))
                        .collect(),
                }
            }
            _ => Err(self.fail(
                root,
                Problem::new(
                    "the document is not a list of schemes",
                    "[[scheme]] tables, or {\"schemes\": [...]}",
                ),
            )),
        }
    }

    fn any_scheme(&self, n: &Node) -> Result<Damos, Error> {
        if damo::looks_like_damo(n) {
            damo::scheme(self, n)
        } else {
            self.scheme(n)
        }
    }

    fn scheme(&self, n: &Node) -> Result<Damos, Error> {
        self.keys(n, SCHEME_KEYS, "scheme")?;
        let action = self.scalar(self.require(n, &["action"], "scheme")?, fields::action)?;
        let pattern = match n.get(&["access_pattern"]) {
            Some(p) => self.pattern(p)?,
            None => AccessPattern::default(),
        };
        let mut s = Damos::new(pattern, action);
        if let Some(v) = n.get(&["apply_interval"]) {
            s.apply_interval_us =
                self.scalar(v, |t| fields::time(t, None, "apply interval", TimeUnit::Us))?;
        }
        if let Some(q) = n.get(&["quota"]) {
            s.quota = self.quota(q)?;
        }
        if let Some(w) = n.get(&["watermarks"]) {
            s.watermarks = self.watermarks(w)?;
        }
        if let Some(f) = n.get(&["filters"]) {
            s.filters = self
                .array(f, "filters")?
                .iter()
                .map(|f| self.filter(f))
                .collect::<Result<_, _>>()?;
        }
        if let Some(t) = n.get(&["target_nid"]) {
            s.target_nid = self.nid(t)?;
        }
        if let Some(d) = n.get(&["dests"]) {
            s.dests = self.dests(d)?;
        }
        if let Some(v) = n.get(&["max_nr_snapshots"]) {
            s.max_nr_snapshots =
                self.scalar(v, |t| fields::uint(t, "max_nr_snapshots", u64::MAX))?;
        }
        Ok(s)
    }

    /// `dests = [{node = 0, weight = 3}, {node = 2, weight = 1}]`.
    fn dests(&self, d: &Node) -> Result<Vec<Dest>, Error> {
        let list = self.array(d, "dests")?;
        let mut out = Vec::with_capacity(list.len());
        for one in list {
            self.keys(one, &["node", "weight"], "dest")?;
            let node = self
                .nid(self.require(one, &["node"], "dest")?)?
                .unwrap_or(0);
            let weight = match one.get(&["weight"]) {
                Some(w) => {
                    self.scalar(w, |t| fields::uint(t, "dest weight", u64::from(u32::MAX)))? as u32
                }
                None => 1,
            };
            if out.iter().any(|o: &Dest| o.node == node) {
                return Err(self.fail(
                    one,
                    Problem::new(
                        format!("node {node} is a destination twice"),
                        "each node once in dests",
                    ),
                ));
            }
            out.push(Dest { node, weight });
        }
        if !out.is_empty() && out.iter().all(|o| o.weight == 0) {
            return Err(self.fail(
                d,
                Problem::new(
                    "every dest weight is 0: nothing would be migrated",
                    "at least one weight above 0",
                ),
            ));
        }
        Ok(out)
    }

    fn pattern(&self, n: &Node) -> Result<AccessPattern, Error> {
        self.keys(n, PATTERN_KEYS, "access_pattern")?;
        let mut p = AccessPattern::default();
        let mut max_nodes = [n; 3];
        if let Some(r) = n.get(&["sz", "size"]) {
            let (lo, hi, at) =
                self.range(r, "sz", |t, side| fields::size(t, Some(side), "size"))?;
            (p.min_sz, p.max_sz, max_nodes[0]) = (lo, hi, at);
        }
        if let Some(r) = n.get(&["freq", "access_rate"]) {
            let (lo, hi, at) = self.range(r, "freq", |t, side| fields::freq(t, Some(side)))?;
            (p.min_freq_bp, p.max_freq_bp, max_nodes[1]) = (lo, hi, at);
        }
        if let Some(r) = n.get(&["age"]) {
            let (lo, hi, at) = self.range(r, "age", |t, side| {
                fields::time(t, Some(side), "age", TimeUnit::Us)
            })?;
            (p.min_age_us, p.max_age_us, max_nodes[2]) = (lo, hi, at);
        }
        if let Err((i, prob)) = fields::check_pattern(&p) {
            return Err(self.fail(max_nodes[i], prob));
        }
        Ok(p)
    }

    fn quota(&self, n: &Node) -> Result<Quota, Error> {
        self.keys(n, QUOTA_KEYS, "quota")?;
        let mut q = Quota::default();
        if let Some(v) = n.get(&["time"]) {
            q.ms = self.scalar(v, |t| fields::time(t, None, "quota time", TimeUnit::Ms))?;
        }
        if let Some(v) = n.get(&["size"]) {
            q.sz = self.scalar(v, |t| fields::size(t, None, "quota size"))?;
        }
        if let Some(v) = n.get(&["reset_interval"]) {
            q.reset_interval_ms =
                self.scalar(v, |t| fields::time(t, None, "reset interval", TimeUnit::Ms))?;
        }
        if let Some(w) = n.get(&["weights"]) {
            self.keys(w, WEIGHT_KEYS, "weights")?;
            let weight = |k: &str| -> Result<u32, Error> {
                match w.get(&[k]) {
                    Some(v) => self
                        .scalar(v, |t| fields::uint(t, "weight", u64::from(u32::MAX)))
                        .map(|v| v as u32),
                    None => Ok(0),
                }
            };
            q.weights = QuotaWeights {
                sz: weight("sz")?,
                nr_accesses: weight("nr_accesses")?,
                age: weight("age")?,
            };
        }
        if let Some(g) = n.get(&["goals"]) {
            q.goals = self
                .array(g, "goals")?
                .iter()
                .map(|g| self.goal(g))
                .collect::<Result<_, _>>()?;
        }
        if let Some(v) = n.get(&["goal_tuner"]) {
            q.goal_tuner = self.scalar(v, goal_tuner)?;
        }
        if let Some(v) = n.get(&["fail_charge"]) {
            (q.fail_charge_num, q.fail_charge_denom) = self.scalar(v, fail_charge)?;
        }
        Ok(q)
    }

    fn goal(&self, n: &Node) -> Result<QuotaGoal, Error> {
        self.keys(n, GOAL_KEYS, "goal")?;
        let metric = self.scalar(self.require(n, &["metric"], "goal")?, goal_metric)?;
        let target = self.require(n, &["target", "target_value"], "goal")?;
        let target_value = self.scalar(target, |t| goal_value(metric, t, "goal target"))?;
        let current_value = match n.get(&["current", "current_value"]) {
            Some(c) => self.scalar(c, |t| goal_value(metric, t, "goal current value"))?,
            None => 0,
        };
        let nid = match n.get(&["nid"]) {
            Some(v) => self.nid(v)?.unwrap_or(0),
            None => 0,
        };
        let path = self.goal_path(n, metric, n.get(&["path"]))?;
        Ok(QuotaGoal {
            metric,
            target_value,
            current_value,
            nid,
            path,
        })
    }

    fn watermarks(&self, n: &Node) -> Result<Watermarks, Error> {
        self.keys(n, WMARK_KEYS, "watermarks")?;
        let mut w = Watermarks::default();
        if let Some(m) = n.get(&["metric"]) {
            w.metric = self.scalar(m, wmark_metric)?;
        }
        if let Some(v) = n.get(&["interval"]) {
            w.interval_us = self.scalar(v, |t| {
                fields::time(t, None, "watermark interval", TimeUnit::Us)
            })?;
        }
        let nodes = [n.get(&["high"]), n.get(&["mid"]), n.get(&["low"])];
        self.watermark_levels(n, &mut w, nodes)?;
        Ok(w)
    }

    fn filter(&self, n: &Node) -> Result<Filter, Error> {
        self.keys(
            n,
            &[
                "type", "matching", "allow", "start", "end", "idx", "path", "min", "max",
            ],
            "filter",
        )?;
        let ty = self.require(n, &["type"], "filter")?;
        let kind = self.scalar(ty, filter_type)?;
        let what = format!("{} filter", kind.name());
        let extra: &[&str] = match kind {
            FilterType::Addr => &["start", "end"],
            FilterType::Target => &["idx"],
            FilterType::Memcg => &["path"],
            FilterType::HugepageSize => &["min", "max"],
            _ => &[],
        };
        let allowed: Vec<&str> = ["type", "matching", "allow"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        self.keys(n, &allowed, &what)?;
        let kind = match kind {
            FilterType::Addr => {
                let start = self.require(n, &["start"], &what)?;
                let end = self.require(n, &["end"], &what)?;
                self.addr_range(start, end)?
            }
            FilterType::Target => {
                let idx = self.require(n, &["idx"], &what)?;
                FilterKind::Target {
                    idx: self.scalar(idx, |t| {
                        fields::uint(t, "target index", u64::from(u32::MAX))
                    })? as u32,
                }
            }
            FilterType::Memcg => FilterKind::Memcg {
                path: self.memcg_path(self.require(n, &["path"], &what)?)?,
            },
            FilterType::HugepageSize => {
                let lo = n.get(&["min"]);
                let hi = n.get(&["max"]);
                self.hugepage_range(n, lo, hi)?
            }
            other => simple_filter(other),
        };
        let matching = match n.get(&["matching"]) {
            Some(m) => self.boolean(m, "matching")?,
            None => true,
        };
        let allow = match n.get(&["allow"]) {
            Some(a) => self.boolean(a, "allow")?,
            None => false,
        };
        Ok(Filter {
            kind,
            matching,
            allow,
        })
    }
}
