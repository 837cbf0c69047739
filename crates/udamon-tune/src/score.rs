//! Scores: one number per run, higher is better, from the run's metrics and
//! those of the scheme-less run of the same workload and seed.
//!
//! The default is the DAOS paper's Listing 2:
//!
//! ```text
//! pscore = -1 * (runtime / orig_runtime - 1)
//! mscore = -1 * (rss / orig_rss - 1)
//! if pscore > -0.1:
//!     score = 0.5 * pscore + 0.5 * mscore
//!     prev_scores.append(score)
//!     return score
//! return min(prev_scores)
//! ```
//!
//! so a run 10% slower than without schemes (or worse) breaks the SLA and
//! scores the worst score seen so far. The scheme-less run is scored first
//! (0 by construction), so `prev_scores` is never empty and an SLA breach
//! never scores above "no schemes". The weights, the SLA, and the two
//! metrics are options; an expression ([`Formula::Expr`]) or a command
//! ([`Formula::Cmd`]) may replace the weighted sum.

use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What one run measured. Runtime and the resident set are what the
/// default score uses; the rest are there for custom scores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// What the workload took, stalls included (seconds).
    pub runtime_s: f64,
    /// Time-weighted average resident set (bytes).
    pub rss_avg_bytes: f64,
    pub rss_peak_bytes: f64,
    /// First touches plus refaults.
    pub faults: f64,
    /// Faults on paged-out pages.
    pub refaults: f64,
    /// Time stalled on faults and direct reclaim (seconds).
    pub stall_s: f64,
    /// "some" memory pressure stall time (seconds).
    pub psi_some_s: f64,
    /// Paged out at the end (bytes).
    pub swapped_bytes: f64,
    /// Resident in huge pages at the end (bytes).
    pub huge_bytes: f64,
    /// Reclaimed under the memory limit (bytes).
    pub reclaimed_bytes: f64,
    /// Time the actions took (seconds; kdamond's, not the workload's).
    pub action_s: f64,
}

impl From<&udamon_sim::SimMetrics> for Metrics {
    fn from(m: &udamon_sim::SimMetrics) -> Metrics {
        Metrics {
            runtime_s: m.runtime_s,
            rss_avg_bytes: m.rss_avg_bytes as f64,
            rss_peak_bytes: m.rss_peak_bytes as f64,
            faults: m.faults as f64,
            refaults: m.refaults as f64,
            stall_s: m.stall_us as f64 / 1e6,
            psi_some_s: m.psi_some_us as f64 / 1e6,
            swapped_bytes: m.swapped_bytes as f64,
            huge_bytes: m.huge_bytes as f64,
            reclaimed_bytes: m.reclaimed_bytes as f64,
            action_s: m.action_us as f64 / 1e6,
        }
    }
}

/// A metric by name: (variable name, environment variable, getter).
type MetricDef = (&'static str, &'static str, fn(&Metrics) -> f64);

/// Every metric: its name in expressions and `--perf-metric`/`--mem-metric`,
/// and its environment variable for `--score-cmd` (the scheme-less run's
/// value is `base_<name>` and `UDAMON_BASE_<...>`).
pub const METRICS: &[MetricDef] = &[
    ("runtime", "UDAMON_RUNTIME_S", |m| m.runtime_s),
    ("rss_avg", "UDAMON_RSS_AVG_BYTES", |m| m.rss_avg_bytes),
    ("rss_peak", "UDAMON_RSS_PEAK_BYTES", |m| m.rss_peak_bytes),
    ("faults", "UDAMON_FAULTS", |m| m.faults),
    ("refaults", "UDAMON_REFAULTS", |m| m.refaults),
    ("stall", "UDAMON_STALL_S", |m| m.stall_s),
    ("psi_some", "UDAMON_PSI_SOME_S", |m| m.psi_some_s),
    ("swapped", "UDAMON_SWAPPED_BYTES", |m| m.swapped_bytes),
    ("huge", "UDAMON_HUGE_BYTES", |m| m.huge_bytes),
    ("reclaimed", "UDAMON_RECLAIMED_BYTES", |m| m.reclaimed_bytes),
    ("action", "UDAMON_ACTION_S", |m| m.action_s),
];

/// A metric of [`METRICS`], by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric(usize);

impl Metric {
    pub const RUNTIME: Metric = Metric(0);
    pub const RSS_AVG: Metric = Metric(1);

    /// A metric by its name (`runtime`, `rss_avg`, ...).
    pub fn parse(flag: &str, s: &str) -> Result<Metric> {
        METRICS
            .iter()
            .position(|(n, _, _)| *n == s.trim())
            .map(Metric)
            .ok_or_else(|| {
                Error::usage(format!(
                    "--{flag} {s}: unknown metric (expected one of {})",
                    names()
                ))
            })
    }

    pub fn name(self) -> &'static str {
        METRICS[self.0].0
    }

    pub fn get(self, m: &Metrics) -> f64 {
        (METRICS[self.0].2)(m)
    }
}

fn names() -> String {
    METRICS
        .iter()
        .map(|(n, _, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How the unified score is computed before the SLA check.
#[derive(Clone, Debug)]
pub enum Formula {
    /// `w_perf * pscore + w_mem * mscore`, where `xscore = -(x / base_x - 1)`
    /// (Listing 2 line 4 with `perf = runtime`, `mem = rss_avg`, 0.5 each).
    Weighted {
        perf: Metric,
        mem: Metric,
        w_perf: f64,
        w_mem: f64,
    },
    /// An expression over the metrics (evalexpr syntax).
    Expr { text: String, node: evalexpr::Node },
    /// A shell command that prints the score; metrics in its environment.
    Cmd(String),
}

/// The SLA: a run whose performance metric is `max_slowdown` or more above
/// the scheme-less run's breaks it (Listing 2 line 3: `pscore > -0.1`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sla {
    pub max_slowdown: f64,
    pub metric: Metric,
}

/// A score and how it came about.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Scored {
    /// The score the tuner uses (after the SLA rule).
    pub score: f64,
    /// The formula's value, before the SLA rule.
    pub raw: f64,
    /// Whether the SLA held (always true without an SLA).
    pub sla_ok: bool,
}

/// A score function with Listing 2's memory of previous scores.
#[derive(Clone, Debug)]
pub struct ScoreFn {
    pub formula: Formula,
    pub sla: Option<Sla>,
    prev: Vec<f64>,
}

impl Default for ScoreFn {
    /// Listing 2: runtime and average RSS, 0.5 each, 10% SLA.
    fn default() -> Self {
        ScoreFn::new(
            Formula::Weighted {
                perf: Metric::RUNTIME,
                mem: Metric::RSS_AVG,
                w_perf: 0.5,
                w_mem: 0.5,
            },
            Some(Sla {
                max_slowdown: 0.10,
                metric: Metric::RUNTIME,
            }),
        )
    }
}

/// `xscore = -(x / base - 1)`: the relative gain of a lower-is-better metric.
pub fn gain(x: f64, base: f64) -> f64 {
    -(x / base - 1.0)
}

impl ScoreFn {
    pub fn new(formula: Formula, sla: Option<Sla>) -> ScoreFn {
        ScoreFn {
            formula,
            sla,
            prev: Vec::new(),
        }
    }

    /// A fresh copy: the same formula and SLA, no previous scores.
    pub fn fresh(&self) -> ScoreFn {
        ScoreFn::new(self.formula.clone(), self.sla)
    }

    /// Scores seen so far within the SLA (Listing 2's `prev_scores`).
    pub fn previous(&self) -> &[f64] {
        &self.prev
    }

    /// Scores one run. `knob` is the tuned value (in the knob's unit), for
    /// expressions and commands that want it.
    pub fn score(&mut self, m: &Metrics, base: &Metrics, knob: f64) -> Result<Scored> {
        let raw = self.formula_value(m, base, knob)?;
        let sla_ok = match self.sla {
            None => true,
            Some(sla) => {
                let b = sla.metric.get(base);
                if b == 0.0 {
                    return Err(Error::Score(format!(
                        "the scheme-less run's {} is 0, so the sla cannot be checked (pick \
                         another metric or --sla none)",
                        sla.metric.name()
                    )));
                }
                gain(sla.metric.get(m), b) > -sla.max_slowdown
            }
        };
        if sla_ok {
            self.prev.push(raw);
            return Ok(Scored {
                score: raw,
                raw,
                sla_ok,
            });
        }
        let worst = self.prev.iter().copied().fold(f64::INFINITY, f64::min);
        Ok(Scored {
            score: if worst.is_finite() { worst } else { raw },
            raw,
            sla_ok,
        })
    }

    /// The formula alone (Listing 2 line 4, or the expression or command).
    pub fn formula_value(&self, m: &Metrics, base: &Metrics, knob: f64) -> Result<f64> {
        let v = match &self.formula {
            Formula::Weighted {
                perf,
                mem,
                w_perf,
                w_mem,
            } => {
                let (bp, bm) = (perf.get(base), mem.get(base));
                for (metric, b) in [(perf, bp), (mem, bm)] {
                    if b == 0.0 {
                        return Err(Error::Score(format!(
                            "the scheme-less run's {} is 0, so relative scores are undefined \
                             (pick another --perf-metric or --mem-metric)",
                            metric.name()
                        )));
                    }
                }
                w_perf * gain(perf.get(m), bp) + w_mem * gain(mem.get(m), bm)
            }
            Formula::Expr { text, node } => eval_expr(text, node, m, base, knob)?,
            Formula::Cmd(cmd) => run_cmd(cmd, m, base, knob)?,
        };
        if !v.is_finite() {
            return Err(Error::Score(format!(
                "the score is {v}, not a finite number (check the score's formula)"
            )));
        }
        Ok(v)
    }
}

/// How runs are scored, as the command line gives it (`--weights`,
/// `--sla`, `--perf-metric`, `--mem-metric`, `--score-expr`, `--score-cmd`);
/// [`ScoreOptions::build`] makes the [`ScoreFn`].
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreOptions {
    /// Weights of the default score, `perf=W,mem=W`.
    pub weights: String,
    /// Largest slowdown, `10%` or `none` [default: 10%, none with an
    /// expression or a command].
    pub sla: Option<String>,
    pub perf_metric: String,
    pub mem_metric: String,
    /// An expression over the metrics instead of the weighted sum.
    pub expr: Option<String>,
    /// A command that prints the score instead of the weighted sum.
    pub cmd: Option<String>,
}

impl Default for ScoreOptions {
    /// Listing 2: perf=0.5,mem=0.5 over runtime and rss_avg, 10% SLA.
    fn default() -> Self {
        ScoreOptions {
            weights: "perf=0.5,mem=0.5".into(),
            sla: None,
            perf_metric: "runtime".into(),
            mem_metric: "rss_avg".into(),
            expr: None,
            cmd: None,
        }
    }
}

impl ScoreOptions {
    /// The score function the options describe.
    pub fn build(&self) -> Result<ScoreFn> {
        let perf = Metric::parse("perf-metric", &self.perf_metric)?;
        let mem = Metric::parse("mem-metric", &self.mem_metric)?;
        let custom = self.expr.is_some() || self.cmd.is_some();
        let sla = match &self.sla {
            Some(s) => parse_sla(s)?,
            None if custom => None,
            None => Some(0.10),
        };
        let formula = if let Some(e) = &self.expr {
            parse_expr(e)?
        } else if let Some(c) = &self.cmd {
            if c.trim().is_empty() {
                return Err(Error::usage(
                    "--score-cmd is empty (expected a command that prints a number)",
                ));
            }
            Formula::Cmd(c.clone())
        } else {
            let (w_perf, w_mem) = parse_weights(&self.weights)?;
            Formula::Weighted {
                perf,
                mem,
                w_perf,
                w_mem,
            }
        };
        Ok(ScoreFn::new(
            formula,
            sla.map(|max_slowdown| Sla {
                max_slowdown,
                metric: perf,
            }),
        ))
    }
}

/// Parses `--weights perf=0.5,mem=0.5` (a missing key weighs 0).
pub fn parse_weights(s: &str) -> Result<(f64, f64)> {
    let (mut wp, mut wm) = (0.0, 0.0);
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            Error::usage(format!(
                "--weights {s}: \"{part}\" has no \"=\" (expected perf=W,mem=W, e.g. perf=0.5,mem=0.5)"
            ))
        })?;
        let w: f64 = v.trim().parse().ok().filter(|w: &f64| w.is_finite() && *w >= 0.0).ok_or_else(|| {
            Error::usage(format!(
                "--weights {s}: weight \"{}\" is not a number of 0 or more (expected perf=0.5,mem=0.5)",
                v.trim()
            ))
        })?;
        match k.trim() {
            "perf" | "performance" => wp = w,
            "mem" | "memory" => wm = w,
            other => {
                return Err(Error::usage(format!(
                    "--weights {s}: unknown key \"{other}\" (expected perf and mem)"
                )))
            }
        }
    }
    if wp == 0.0 && wm == 0.0 {
        return Err(Error::usage(format!(
            "--weights {s}: every weight is 0 (expected at least one above 0, e.g. perf=0.5,mem=0.5)"
        )));
    }
    Ok((wp, wm))
}

/// Parses `--sla 10%` (a bare number is a percentage too) or `none`.
/// Returns the largest allowed slowdown as a fraction.
pub fn parse_sla(s: &str) -> Result<Option<f64>> {
    let t = s.trim();
    if matches!(t, "none" | "off") {
        return Ok(None);
    }
    let num = t.strip_suffix('%').unwrap_or(t).trim();
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v / 100.0)),
        _ => Err(Error::usage(format!(
            "--sla {s}: not a percentage (expected the largest slowdown like 10%, or none)"
        ))),
    }
}

/// Compiles `--score-expr`, checking its variables.
pub fn parse_expr(text: &str) -> Result<Formula> {
    let node = evalexpr::build_operator_tree(text).map_err(|e| {
        Error::usage(format!(
            "--score-expr \"{text}\": {} (expected an expression like \"0.5 * (1 - runtime / \
             base_runtime) + 0.5 * (1 - rss_avg / base_rss_avg)\")",
            e.to_string().to_lowercase().trim_end_matches('.')
        ))
    })?;
    for v in node.iter_read_variable_identifiers() {
        if !is_variable(v) {
            return Err(Error::usage(format!(
                "--score-expr \"{text}\": unknown variable \"{v}\" (expected {}, each also with \
                 base_ for the scheme-less run, or knob)",
                names()
            )));
        }
    }
    // An expression that parses but cannot give a number ("1 +", a
    // comparison) fails on any metrics: find out now, not after the runs.
    let m = Metrics::default();
    if let Err(Error::Score(msg)) = eval_expr(text, &node, &m, &m, 0.0) {
        return Err(Error::usage(msg));
    }
    Ok(Formula::Expr {
        text: text.to_string(),
        node,
    })
}

fn is_variable(v: &str) -> bool {
    let name = v.strip_prefix("base_").unwrap_or(v);
    v == "knob" || METRICS.iter().any(|(n, _, _)| *n == name)
}

fn eval_expr(
    text: &str,
    node: &evalexpr::Node,
    m: &Metrics,
    base: &Metrics,
    knob: f64,
) -> Result<f64> {
    use evalexpr::{ContextWithMutableVariables, HashMapContext, Value};
    let mut ctx = HashMapContext::new();
    let mut set = |k: String, v: f64| {
        // Fresh context, every name once: setting cannot fail.
        let _ = ctx.set_value(k, Value::Float(v));
    };
    for (name, _, get) in METRICS {
        set((*name).to_string(), get(m));
        set(format!("base_{name}"), get(base));
    }
    set("knob".into(), knob);
    node.eval_number_with_context(&ctx).map_err(|e| {
        Error::Score(format!(
            "--score-expr \"{text}\": {} (expected an expression that gives a number)",
            e.to_string().to_lowercase().trim_end_matches('.')
        ))
    })
}

fn run_cmd(cmd: &str, m: &Metrics, base: &Metrics, knob: f64) -> Result<f64> {
    let mut c = Command::new("sh");
    c.arg("-c").arg(cmd);
    for (_, env, get) in METRICS {
        c.env(env, format!("{}", get(m)));
        c.env(
            env.replacen("UDAMON_", "UDAMON_BASE_", 1),
            format!("{}", get(base)),
        );
    }
    c.env("UDAMON_KNOB", format!("{knob}"));
    let out = c
        .output()
        .map_err(|e| Error::Score(format!("--score-cmd \"{cmd}\": cannot run sh: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(Error::Score(format!(
            "--score-cmd \"{cmd}\" failed ({}){} (expected it to print a number and exit 0)",
            out.status,
            err.lines()
                .next()
                .map(|l| format!(": {l}"))
                .unwrap_or_default()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("");
    last.parse::<f64>().map_err(|_| {
        Error::Score(format!(
            "--score-cmd \"{cmd}\" printed \"{last}\" (expected a number on its last line)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(runtime_s: f64, rss_mib: f64) -> Metrics {
        Metrics {
            runtime_s,
            rss_avg_bytes: rss_mib * 1048576.0,
            faults: 100.0,
            ..Metrics::default()
        }
    }

    /// An expression that parses but cannot give a number is refused when
    /// it is given, as bad input, before any run.
    #[test]
    fn an_expression_without_a_number_is_bad_input() {
        for e in ["1 +", "runtime < base_runtime"] {
            match parse_expr(e) {
                Err(Error::Usage(m)) => assert!(m.contains(e), "{m}"),
                other => panic!("{e}: {other:?}"),
            }
        }
        assert!(parse_expr("1 - rss_avg / base_rss_avg").is_ok());
    }

    /// Listing 2, line by line, on a table of runs against a 100 s, 1 GiB
    /// scheme-less run, in order (the SLA rule remembers scores).
    #[test]
    fn listing2_table() {
        let base = run(100.0, 1024.0);
        let mut f = ScoreFn::default();
        // The scheme-less run itself: 0, and the first of prev_scores.
        assert_eq!(f.score(&base, &base, 0.0).unwrap().score, 0.0);
        let table = [
            // runtime, rss MiB, score, sla ok
            (101.0, 512.0, 0.5 * -0.01 + 0.5 * 0.5, true),
            (105.0, 256.0, 0.5 * -0.05 + 0.5 * 0.75, true),
            // 10% slower: pscore = -0.1 is not > -0.1: the worst score so far (0).
            (110.0, 128.0, 0.0, false),
            (100.0, 1536.0, 0.5 * 0.0 + 0.5 * -0.5, true),
            // broken again: now the worst is -0.25
            (150.0, 0.0, -0.25, false),
            (90.0, 1024.0, 0.05, true),
        ];
        for (rt, rss, want, ok) in table {
            let s = f.score(&run(rt, rss), &base, 0.0).unwrap();
            assert!(
                (s.score - want).abs() < 1e-12,
                "{rt} {rss}: {s:?} want {want}"
            );
            assert_eq!(s.sla_ok, ok, "{rt} {rss}");
        }
        assert_eq!(f.previous().len(), 5);
        // raw keeps the formula's value for a broken SLA
        let s = f.score(&run(120.0, 0.0), &base, 0.0).unwrap();
        assert!((s.raw - (0.5 * -0.2 + 0.5 * 1.0)).abs() < 1e-12);
        assert_eq!(s.score, -0.25);
    }

    #[test]
    fn sla_none_and_weights() {
        let base = run(100.0, 1024.0);
        let (wp, wm) = parse_weights("perf=1,mem=0.25").unwrap();
        let mut f = ScoreFn::new(
            Formula::Weighted {
                perf: Metric::RUNTIME,
                mem: Metric::RSS_AVG,
                w_perf: wp,
                w_mem: wm,
            },
            parse_sla("none").unwrap().map(|max_slowdown| Sla {
                max_slowdown,
                metric: Metric::RUNTIME,
            }),
        );
        let s = f.score(&run(150.0, 0.0), &base, 0.0).unwrap();
        assert!((s.score - (-0.5 + 0.25)).abs() < 1e-12);
        assert_eq!(parse_sla("5%").unwrap(), Some(0.05));
        assert_eq!(parse_sla("5").unwrap(), Some(0.05));
        assert!(parse_sla("fast").is_err());
        assert!(parse_weights("perf=0,mem=0").is_err());
        assert_eq!(
            parse_weights("perf=0.5,cpu=1").unwrap_err().to_string(),
            "--weights perf=0.5,cpu=1: unknown key \"cpu\" (expected perf and mem)"
        );
        assert_eq!(
            Metric::parse("mem-metric", "rss_peak").unwrap().name(),
            "rss_peak"
        );
        assert!(Metric::parse("mem-metric", "rss")
            .unwrap_err()
            .to_string()
            .contains("rss_avg"));
    }

    #[test]
    fn expressions_and_commands() {
        let base = run(100.0, 1024.0);
        let f = ScoreFn::new(
            parse_expr("0.5 * (1 - runtime / base_runtime) + 0.5 * (1 - rss_avg / base_rss_avg)")
                .unwrap(),
            None,
        );
        let v = f.formula_value(&run(110.0, 512.0), &base, 0.0).unwrap();
        assert!((v - (0.5 * -0.1 + 0.5 * 0.5)).abs() < 1e-12);
        let f = ScoreFn::new(
            parse_expr("if(runtime > 1.05 * base_runtime, -1.0, knob / 1e6)").unwrap(),
            None,
        );
        assert_eq!(f.formula_value(&run(110.0, 1.0), &base, 5e6).unwrap(), -1.0);
        assert_eq!(f.formula_value(&run(100.0, 1.0), &base, 5e6).unwrap(), 5.0);
        let e = parse_expr("runtime / rss").unwrap_err().to_string();
        assert!(e.contains("unknown variable \"rss\""), "{e}");
        assert!(parse_expr("(runtime + 2").is_err());

        let f = ScoreFn::new(
            Formula::Cmd("echo 'note'; echo \"$UDAMON_RUNTIME_S $UDAMON_BASE_FAULTS $UDAMON_KNOB\" | awk '{print $1 + $2 + $3}'".into()),
            None,
        );
        assert_eq!(
            f.formula_value(&run(110.0, 1.0), &base, 3.0).unwrap(),
            213.0
        );
        let f = ScoreFn::new(Formula::Cmd("echo nope".into()), None);
        let e = f.formula_value(&base, &base, 0.0).unwrap_err().to_string();
        assert!(
            e.contains("printed \"nope\" (expected a number on its last line)"),
            "{e}"
        );
        let f = ScoreFn::new(Formula::Cmd("exit 3".into()), None);
        assert!(f.formula_value(&base, &base, 0.0).is_err());
    }
}
