//! Workload specs: TOML in, a resolved [`Workload`] out. The format is
//! documented in `docs/sim-spec.md`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;
use udamon_core::schemes::Action;
use udamon_core::units::{parse_address, parse_duration_us, parse_size, Fraction};
use udamon_core::{Addr, AddrRange};

use crate::machine_spec::{MachineSpec, NodeSpec, Placement, ThpMode, MAX_NODES};
use crate::units::{parse_bandwidth, parse_cost_us_per_byte, parse_latency_us};
use crate::Error;

/// Where objects start when the spec does not say.
pub const DEFAULT_BASE: Addr = 0x1000_0000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<String>,
    duration: Spanned<DurationStr>,
    seed: Option<u64>,
    page_size: Option<Spanned<SizeOrInt>>,
    base: Option<Spanned<SizeOrInt>>,
    #[serde(default)]
    layout: Vec<RawLayout>,
    #[serde(default)]
    phase: Vec<RawPhase>,
    machine: Option<RawMachine>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMachine {
    memory_limit: Option<Spanned<SizeOrInt>>,
    thp: Option<Spanned<String>>,
    fault_latency: Option<Spanned<String>>,
    first_touch_latency: Option<Spanned<String>>,
    huge_fault_latency: Option<Spanned<String>>,
    reclaim_latency: Option<Spanned<String>>,
    access_cost: Option<Spanned<String>>,
    tlb_miss_cost: Option<Spanned<String>>,
    huge_tlb_factor: Option<Spanned<f64>>,
    placement: Option<Spanned<String>>,
    #[serde(default)]
    node: Vec<RawNode>,
    #[serde(default)]
    action_cost: BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    capacity: Option<Spanned<SizeOrInt>>,
    latency: Option<Spanned<String>>,
    bandwidth: Option<Spanned<String>>,
}

/// A size as a spec writes it: a string with a unit (`"64M"`; `base` also
/// takes hex) or a bare integer of bytes.
enum SizeOrInt {
    Int(u64),
    Str(String),
}

impl SizeOrInt {
    fn bytes(&self) -> Result<u64, String> {
        match self {
            SizeOrInt::Int(v) => Ok(*v),
            // Fractions of a byte rounded, as specs always read them.
            SizeOrInt::Str(s) => parse_size(s, Fraction::Round).map_err(|e| e.to_string()),
        }
    }
}

impl fmt::Display for SizeOrInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeOrInt::Int(v) => write!(f, "{v}"),
            SizeOrInt::Str(s) => f.write_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for SizeOrInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SizeOrInt;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size like \"64M\" or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<SizeOrInt, E> {
                Ok(SizeOrInt::Str(s.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SizeOrInt, E> {
                Ok(SizeOrInt::Int(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeOrInt, E> {
                u64::try_from(v).map(SizeOrInt::Int).map_err(|_| {
                    E::custom(format!(
                        "size {v} is negative (expected a size like \"64M\" or a number of bytes)"
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration as a spec writes it: a string with a unit. A bare number is
/// refused, naming the units, rather than read in a guessed unit.
struct DurationStr(String);

impl<'de> Deserialize<'de> for DurationStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl V {
            fn no_unit<E: de::Error>(v: impl fmt::Display) -> E {
                E::custom(format!(
                    "duration {v} has no unit (expected a string with us, ms, s, m or h, like \"{v}s\")"
                ))
            }
        }
        impl Visitor<'_> for V {
            type Value = DurationStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration like \"2s\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<DurationStr, E> {
                Ok(DurationStr(s.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DurationStr, E> {
                Err(V::no_unit(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurationStr, E> {
                Err(V::no_unit(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<DurationStr, E> {
                Err(V::no_unit(v))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLayout {
    object: Option<Spanned<String>>,
    size: Option<Spanned<SizeOrInt>>,
    gap: Option<Spanned<SizeOrInt>>,
    populated: Option<Spanned<bool>>,
    file: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    duration: Spanned<DurationStr>,
    #[serde(default)]
    access: Vec<RawAccess>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAccess {
    object: Spanned<String>,
    range: Option<Spanned<[SizeOrInt; 2]>>,
    rate: Spanned<f64>,
    sweep: Option<Spanned<RawSweep>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    width: SizeOrInt,
    period: DurationStr,
}

/// A mapped object of the simulated space.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    pub name: String,
    pub range: AddrRange,
    /// Whether the object starts resident (default: yes, as after the
    /// program initialised it); if not, pages become resident on first touch.
    pub populated: bool,
    /// File-backed (the `anon` filter does not match it); default: anonymous.
    pub file: bool,
}

/// A window of `width` bytes moving once per `period_us` across an access
/// range, wrapping around at its end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sweep {
    pub width: u64,
    pub period_us: u64,
}

/// Accesses to one address range during a phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub range: AddrRange,
    /// Accesses per page per second (Poisson).
    pub rate: f64,
    pub sweep: Option<Sweep>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub duration_us: u64,
    pub accesses: Vec<Access>,
}

/// A resolved workload: absolute addresses, microseconds, rates.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub name: String,
    pub duration_us: u64,
    pub seed: Option<u64>,
    pub page_size: u64,
    pub objects: Vec<Object>,
    pub phases: Vec<Phase>,
    /// The simulated machine's costs and limits (`[machine]`).
    pub machine: MachineSpec,
}

/// Where a spec's phases are written, for errors found after parsing:
/// (line, column, accesses) of each phase's `duration`.
pub(crate) type PhasePlaces = Vec<(usize, usize, usize)>;

impl Workload {
    /// Phase instances (model pieces) an interval of `us` can overlap: the
    /// phases of every cycle it spans, plus one (where it starts and ends
    /// in the same phase).
    pub(crate) fn max_pieces(&self, us: u64) -> u128 {
        let n = self.phases.len() as u128;
        let cycle = u128::from(self.cycle_us().max(1));
        (u128::from(us) / cycle + 1) * n + 1
    }

    /// Parses a spec without the check of what its model would cost, which
    /// [`Workload::from_toml`] (bounds.rs) adds; `origin` names it in
    /// errors (a file name).
    pub(crate) fn parse_toml(text: &str, origin: &str) -> Result<(Workload, PhasePlaces), Error> {
        let raw: RawSpec = toml::from_str(text).map_err(|e| {
            let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            Error::at(origin, line, col, e.message().to_string())
        })?;
        let at = |span: std::ops::Range<usize>, msg: String| {
            let (line, col) = line_col(text, span.start);
            Error::at(origin, line, col, msg)
        };
        let size = |s: &Spanned<SizeOrInt>| s.get_ref().bytes().map_err(|m| at(s.span(), m));
        let dur = |s: &Spanned<DurationStr>| {
            parse_duration_us(&s.get_ref().0, Fraction::Round)
                .map_err(|e| at(s.span(), e.to_string()))
        };

        let duration_us = dur(&raw.duration)?;
        if duration_us == 0 {
            return Err(at(
                raw.duration.span(),
                "duration is 0 (give the simulated length, like \"40s\")".into(),
            ));
        }
        let page_size = match &raw.page_size {
            Some(p) => {
                let v = size(p)?;
                if !v.is_power_of_two() || v < 4096 {
                    return Err(at(
                        p.span(),
                        format!("page_size {v} is not a power of two of at least 4K"),
                    ));
                }
                v
            }
            None => 4096,
        };
        let base = match &raw.base {
            None => DEFAULT_BASE,
            Some(b) => match b.get_ref() {
                SizeOrInt::Int(v) => *v,
                SizeOrInt::Str(s) => parse_address(s).map_err(|e| at(b.span(), e.to_string()))?,
            },
        };
        if base % page_size != 0 {
            return Err(Error::at(
                origin,
                0,
                0,
                format!("base {base:#x} is not aligned to the page size {page_size}"),
            ));
        }

        let objects = parse_layout(&raw.layout, base, page_size, origin, &at)?;

        let mut phases = parse_phases(&raw.phase, &objects, page_size, &at)?;
        if phases.is_empty() {
            // No phase: nothing is ever accessed, which is a valid (idle) workload.
            phases.push(Phase {
                duration_us,
                accesses: Vec::new(),
            });
        }
        let machine = match &raw.machine {
            None => MachineSpec::default(),
            Some(m) => parse_machine(m, origin, &at)?,
        };
        let w = Workload {
            name: raw.name.unwrap_or_else(|| origin.to_string()),
            duration_us,
            seed: raw.seed,
            page_size,
            objects,
            phases,
            machine,
        };
        let places = raw
            .phase
            .iter()
            .map(|p| {
                let (line, col) = line_col(text, p.duration.span().start);
                (line, col, p.access.len())
            })
            .collect();
        Ok((w, places))
    }

    /// Mapped ranges in address order (adjacent objects are separate mappings).
    pub fn mappings(&self) -> Vec<AddrRange> {
        self.objects.iter().map(|o| o.range).collect()
    }

    /// Bytes mapped.
    pub fn mapped_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.range.sz()).sum()
    }

    /// Length of one pass through all phases.
    pub fn cycle_us(&self) -> u64 {
        self.phases.iter().map(|p| p.duration_us).sum()
    }

    /// Whether `addr` is inside a mapped object.
    pub fn is_mapped(&self, addr: Addr) -> bool {
        let i = self.objects.partition_point(|o| o.range.end <= addr);
        self.objects.get(i).is_some_and(|o| o.range.contains(addr))
    }
}

/// The `[[layout]]` entries: objects and gaps laid out from `base`, each a
/// multiple of the page size; at least one object.
fn parse_layout(
    layout: &[RawLayout],
    base: u64,
    page_size: u64,
    origin: &str,
    at: &dyn Fn(std::ops::Range<usize>, String) -> Error,
) -> Result<Vec<Object>, Error> {
    let size = |s: &Spanned<SizeOrInt>| s.get_ref().bytes().map_err(|m| at(s.span(), m));
    let mut objects: Vec<Object> = Vec::new();
    let mut addr = base;
    for l in layout {
        if let (Some(g), true) = (&l.gap, l.populated.is_some() || l.file.is_some()) {
            return Err(at(
                g.span(),
                "a gap has no populated or file setting (they belong to objects)".into(),
            ));
        }
        match (&l.object, &l.size, &l.gap) {
            (Some(name), Some(sz), None) => {
                let sz_v = size(sz)?;
                if sz_v == 0 || sz_v % page_size != 0 {
                    return Err(at(sz.span(), format!("object size {} is not a positive multiple of the page size {page_size}", sz.get_ref())));
                }
                if objects.iter().any(|o| &o.name == name.get_ref()) {
                    return Err(at(
                        name.span(),
                        format!("object \"{}\" is defined twice", name.get_ref()),
                    ));
                }
                let end = addr.checked_add(sz_v).ok_or_else(|| {
                    at(
                        sz.span(),
                        "layout runs past the end of the 64-bit address space".into(),
                    )
                })?;
                objects.push(Object {
                    name: name.get_ref().clone(),
                    range: AddrRange::new(addr, end),
                    populated: l.populated.as_ref().is_none_or(|p| *p.get_ref()),
                    file: l.file.unwrap_or(false),
                });
                addr = end;
            }
            (None, None, Some(g)) => {
                let g_v = size(g)?;
                if g_v % page_size != 0 {
                    return Err(at(
                        g.span(),
                        format!(
                            "gap {} is not a multiple of the page size {page_size}",
                            g.get_ref()
                        ),
                    ));
                }
                addr = addr.checked_add(g_v).ok_or_else(|| {
                    at(
                        g.span(),
                        "layout runs past the end of the 64-bit address space".into(),
                    )
                })?;
            }
            (Some(name), None, None) => {
                return Err(at(
                    name.span(),
                    format!(
                        "object \"{}\" has no size (add size = \"64M\")",
                        name.get_ref()
                    ),
                ))
            }
            _ => {
                return Err(Error::at(
                    origin,
                    0,
                    0,
                    "each [[layout]] entry is either object = NAME with size = SIZE, or gap = SIZE"
                        .into(),
                ))
            }
        }
    }
    if objects.is_empty() {
        return Err(Error::at(
            origin,
            0,
            0,
            "the layout has no object (add [[layout]] object = \"obj0\" size = \"64M\")".into(),
        ));
    }
    Ok(objects)
}

/// The `[[phase]]` entries, each with its accesses.
fn parse_phases(
    raw: &[RawPhase],
    objects: &[Object],
    page_size: u64,
    at: &dyn Fn(std::ops::Range<usize>, String) -> Error,
) -> Result<Vec<Phase>, Error> {
    let dur = |s: &Spanned<DurationStr>| {
        parse_duration_us(&s.get_ref().0, Fraction::Round).map_err(|e| at(s.span(), e.to_string()))
    };
    let mut phases = Vec::new();
    for p in raw {
        let duration_us = dur(&p.duration)?;
        if duration_us == 0 {
            return Err(at(p.duration.span(), "phase duration is 0".into()));
        }
        let mut accesses = Vec::new();
        for a in &p.access {
            accesses.push(parse_access(a, objects, page_size, at)?);
        }
        phases.push(Phase {
            duration_us,
            accesses,
        });
    }
    Ok(phases)
}

/// One `[[phase.access]]`: an object's range (all of it by default), the
/// rate, and the sweep.
fn parse_access(
    a: &RawAccess,
    objects: &[Object],
    page_size: u64,
    at: &dyn Fn(std::ops::Range<usize>, String) -> Error,
) -> Result<Access, Error> {
    let obj = objects
        .iter()
        .find(|o| &o.name == a.object.get_ref())
        .ok_or_else(|| {
            let known: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
            at(
                a.object.span(),
                format!(
                    "unknown object \"{}\" (the layout has: {})",
                    a.object.get_ref(),
                    known.join(", ")
                ),
            )
        })?;
    let range = match &a.range {
        None => obj.range,
        Some(r) => {
            let [lo, hi] = r.get_ref();
            let off = |s: &SizeOrInt| {
                offset_in(s, obj.range.sz(), page_size).map_err(|m| at(r.span(), m))
            };
            let (lo, hi) = (off(lo)?, off(hi)?);
            if lo >= hi {
                return Err(at(
                    r.span(),
                    format!(
                        "range [{lo:#x}, {hi:#x}) of object \"{}\" is empty",
                        obj.name
                    ),
                ));
            }
            AddrRange::new(obj.range.start + lo, obj.range.start + hi)
        }
    };
    let rate = *a.rate.get_ref();
    if !(rate.is_finite() && rate >= 0.0) {
        return Err(at(
            a.rate.span(),
            format!("rate {rate} is not a non-negative number of accesses per page per second"),
        ));
    }
    let sweep = match &a.sweep {
        None => None,
        Some(s) => {
            let width = s.get_ref().width.bytes().map_err(|m| at(s.span(), m))?;
            let period_us = parse_duration_us(&s.get_ref().period.0, Fraction::Round)
                .map_err(|e| at(s.span(), e.to_string()))?;
            if width == 0 || width > range.sz() {
                return Err(at(
                    s.span(),
                    format!(
                        "sweep width {width} must be positive and at most the range size {}",
                        range.sz()
                    ),
                ));
            }
            if period_us == 0 {
                return Err(at(s.span(), "sweep period is 0".into()));
            }
            Some(Sweep { width, period_us })
        }
    };
    Ok(Access { range, rate, sweep })
}

fn parse_machine(
    m: &RawMachine,
    origin: &str,
    at: &dyn Fn(std::ops::Range<usize>, String) -> Error,
) -> Result<MachineSpec, Error> {
    let mut spec = MachineSpec::default();
    let size = |s: &Spanned<SizeOrInt>| s.get_ref().bytes().map_err(|e| at(s.span(), e));
    let lat = |s: &Option<Spanned<String>>, dst: &mut f64| -> Result<(), Error> {
        if let Some(s) = s {
            *dst = parse_latency_us(s.get_ref()).map_err(|e| at(s.span(), e))?;
        }
        Ok(())
    };
    if let Some(l) = &m.memory_limit {
        let v = size(l)?;
        if v == 0 {
            return Err(at(l.span(), "memory_limit is 0".into()));
        }
        spec.memory_limit = Some(v);
    }
    if let Some(t) = &m.thp {
        spec.thp = match t.get_ref().as_str() {
            "never" => ThpMode::Never,
            "madvise" => ThpMode::Madvise,
            "always" => ThpMode::Always,
            other => {
                return Err(at(
                    t.span(),
                    format!("unknown thp mode \"{other}\" (expected never, madvise or always)"),
                ))
            }
        };
    }
    if let Some(p) = &m.placement {
        spec.placement = match p.get_ref().as_str() {
            "node0" => Placement::Node0,
            "first-touch" => Placement::FirstTouch,
            other => {
                return Err(at(
                    p.span(),
                    format!("unknown placement \"{other}\" (expected node0 or first-touch)"),
                ))
            }
        };
    }
    lat(&m.fault_latency, &mut spec.fault_latency_us)?;
    lat(&m.first_touch_latency, &mut spec.first_touch_latency_us)?;
    lat(&m.huge_fault_latency, &mut spec.huge_fault_latency_us)?;
    lat(&m.reclaim_latency, &mut spec.reclaim_latency_us)?;
    lat(&m.access_cost, &mut spec.access_cost_us)?;
    lat(&m.tlb_miss_cost, &mut spec.tlb_miss_cost_us)?;
    if let Some(f) = &m.huge_tlb_factor {
        let v = *f.get_ref();
        if !(v.is_finite() && v >= 1.0) {
            return Err(at(
                f.span(),
                format!("huge_tlb_factor {v} is not a number of at least 1"),
            ));
        }
        spec.huge_tlb_factor = v;
    }
    parse_nodes(m, &mut spec, origin, at)?;
    parse_action_costs(m, &mut spec, at)?;
    Ok(spec)
}

/// `[[machine.node]]`: the NUMA nodes, their capacities and access costs
/// (by default the machine's `access_cost`); one node without any.
fn parse_nodes(
    m: &RawMachine,
    spec: &mut MachineSpec,
    origin: &str,
    at: &dyn Fn(std::ops::Range<usize>, String) -> Error,
) -> Result<(), Error> {
    let size = |s: &Spanned<SizeOrInt>| s.get_ref().bytes().map_err(|e| at(s.span(), e));
    let lat = |s: &Option<Spanned<String>>, dst: &mut f64| -> Result<(), Error> {
        if let Some(s) = s {
            *dst = parse_latency_us(s.get_ref()).map_err(|e| at(s.span(), e))?;
        }
        Ok(())
    };
    if m.node.len() > MAX_NODES {
        return Err(Error::at(
            origin,
            0,
            0,
            format!("at most {MAX_NODES} [[machine.node]] entries"),
        ));
    }
    if !m.node.is_empty() {
        spec.nodes = Vec::new();
        for n in &m.node {
            let capacity = match &n.capacity {
                Some(c) => {
                    let v = size(c)?;
                    if v == 0 {
                        return Err(at(c.span(), "node capacity is 0".into()));
                    }
                    Some(v)
                }
                None => None,
            };
            let mut latency_us = spec.access_cost_us;
            lat(&n.latency, &mut latency_us)?;
            let bandwidth = match &n.bandwidth {
                Some(b) => Some(parse_bandwidth(b.get_ref()).map_err(|e| at(b.span(), e))?),
                None => None,
            };
            spec.nodes.push(NodeSpec {
                capacity,
                latency_us,
                bandwidth,
            });
        }
    } else {
        spec.nodes[0].latency_us = spec.access_cost_us;
    }
    Ok(())
}

/// `[machine.action_cost]`: the cost per byte of each action, and of the
/// walk over a region.
fn parse_action_costs(
    m: &RawMachine,
    spec: &mut MachineSpec,
    at: &dyn Fn(std::ops::Range<usize>, String) -> Error,
) -> Result<(), Error> {
    for (key, v) in &m.action_cost {
        let cost = parse_cost_us_per_byte(v.get_ref()).map_err(|e| at(v.span(), e))?;
        if key == "walk" {
            spec.walk_cost_us_per_byte = cost;
            continue;
        }
        let action = Action::ALL
            .iter()
            .find(|a| a.name() == key)
            .ok_or_else(|| {
                let known: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
                at(
                    v.span(),
                    format!(
                        "unknown action \"{key}\" in action_cost (expected walk, {})",
                        known.join(", ")
                    ),
                )
            })?;
        spec.set_action_cost(*action, cost);
    }
    Ok(())
}

/// An offset inside an object: a percentage of its size ("25%") or a size
/// ("16M"), rounded down to the page size (the end of the object stays exact).
fn offset_in(s: &SizeOrInt, obj_sz: u64, page: u64) -> Result<u64, String> {
    let v = match s {
        SizeOrInt::Str(t) if t.trim().ends_with('%') => {
            let p: f64 = t
                .trim()
                .trim_end_matches('%')
                .trim()
                .parse()
                .map_err(|_| format!("\"{s}\" is not a percentage"))?;
            if !(0.0..=100.0).contains(&p) {
                return Err(format!("percentage \"{s}\" is outside 0% to 100%"));
            }
            (obj_sz as f64 * p / 100.0) as u64
        }
        _ => s.bytes()?,
    };
    if v > obj_sz {
        return Err(format!(
            "offset \"{s}\" is past the end of the object ({obj_sz} bytes)"
        ));
    }
    Ok(if v == obj_sz { v } else { v / page * page })
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, col)
}
