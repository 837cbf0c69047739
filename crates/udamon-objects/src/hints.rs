//! Placement hints: the hot objects of a record, written for a program's
//! next run (`udamon hints`). Each hint names an object as the objects
//! report does and says what to do with it: `mlock` (keep it in memory,
//! the seeds' out-of-core case study) or `node` (place it on a NUMA node).
//! The file is TOML that people read and edit; the preloaded allocation
//! library applies it as the program allocates, and for a simulated
//! workload it becomes `mlock` schemes over the objects' addresses.

use serde::{Deserialize, Serialize};
use udamon_core::schemes::{Action, Damos, Filter, FilterKind};

use crate::namer::{Kind, Namer, Object};
use crate::report::ObjectsReport;

/// A part of an object smaller than this is not hinted.
pub const PART_MIN: u64 = 2 << 20;

const PAGE: u64 = 4096;

/// What the hints ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HintAction {
    /// Keep the object in memory (`mlock2(MLOCK_ONFAULT)`).
    Mlock,
    /// Place the object on a NUMA node (`mbind`).
    Node,
}

/// How hints are chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct HintsOptions {
    /// At most this many bytes hinted in all (the objects' mean sizes);
    /// `None`: no limit.
    pub max_bytes: Option<u64>,
    /// Only objects at least this hot (access frequency, `0..=1`).
    pub min_frequency: f64,
    pub action: HintAction,
    /// The node of [`HintAction::Node`].
    pub node: Option<u32>,
}

impl Default for HintsOptions {
    fn default() -> Self {
        Self {
            max_bytes: None,
            min_frequency: 0.05,
            action: HintAction::Mlock,
            node: None,
        }
    }
}

/// One object's hint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hint {
    /// The object's name, as `udamon report objects` prints it.
    pub object: String,
    pub kind: Kind,
    /// The file a symbol or section belongs to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
    /// The file's build-id: a hint for a symbol applies to that build only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// A symbol's address and size in its file (hex), which a new run
    /// finds at the file's load address plus this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol_vaddr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol_size: Option<u64>,
    /// An allocation site's return addresses in their files:
    /// `[build-id or "-", file name, "0xvaddr"]` (a later run's allocation
    /// from there is hinted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<(String, String, String)>,
    pub action: HintAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// Where the record saw it at its end: `[target, "0xstart", "0xend"]`
    /// (a simulated workload's objects stay there in every run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<(u32, String, String)>,
    /// Only the first `bytes` of the object (all of it did not fit in
    /// `--max-bytes`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub part: bool,
    /// What the record measured (for people; not read back), `bytes` the
    /// object's mean size or the part's.
    #[serde(default)]
    pub bytes: u64,
    #[serde(default)]
    pub access_frequency: f64,
    #[serde(default)]
    pub access_share: f64,
}

/// A hints file: `[[hint]]` tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hints {
    #[serde(default, rename = "hint")]
    pub hints: Vec<Hint>,
}

/// Why a hints file is not usable.
#[derive(Debug, thiserror::Error)]
pub enum HintsError {
    #[error("not a hints file: {0}")]
    Parse(String),
    #[error("hint {index} ({object}): {why}")]
    Bad {
        index: usize,
        object: String,
        why: String,
    },
}

/// The objects of the report worth a hint: data symbols, allocation sites
/// and simulated objects at least `min_frequency` hot, hottest first (by
/// access frequency: the bytes that gain the most per byte locked), while
/// they fit in `max_bytes` (a symbol or an object that does not fit whole
/// gets a part; an allocation site does not, its hint acting on whole
/// allocations).
pub fn choose(report: &ObjectsReport, namer: &mut Namer, opts: &HintsOptions) -> Hints {
    // Objects a later run finds again: data symbols, allocation sites, a
    // simulated workload's objects (sections, files and anonymous
    // mappings have no name a program's next run can be given).
    let mut rows: Vec<_> = report
        .objects
        .iter()
        // Less than a page is not worth a hint: the page around it holds
        // other things, and memory is kept by the page.
        .filter(|r| r.access_frequency >= opts.min_frequency && r.bytes >= PAGE)
        .filter(|r| matches!(r.kind, Kind::Symbol | Kind::AllocSite | Kind::Object))
        .collect();
    rows.sort_by(|a, b| {
        b.access_frequency
            .total_cmp(&a.access_frequency)
            .then(a.name.cmp(&b.name))
    });
    let mut left = opts.max_bytes.unwrap_or(u64::MAX);
    let mut out = Hints::default();
    for r in rows {
        let id = namer.id_of(&Object {
            kind: r.kind,
            name: r.name.clone(),
            file: r.file.clone(),
        });
        let site = id.and_then(|id| namer.site(id)).cloned();
        // An allocation site's hint acts on its whole allocations: it
        // costs what they held at the most, and is never given in part.
        // Anything else larger than what is left gets a part (its first
        // ranges, up to what is left), as the seeds locked "a portion of
        // the hot memory area" when all of it did not fit; less than
        // PART_MIN left is not worth a hint.
        let size = site.as_ref().map_or(r.bytes, |s| s.peak.max(r.bytes));
        let bytes = size.min(left);
        if bytes < size && (bytes < PART_MIN || r.kind == Kind::AllocSite) {
            continue;
        }
        left -= bytes;
        let targets: Vec<u32> = match r.target_idx {
            Some(t) => vec![t],
            None => namer.targets(),
        };
        let sites = site.map_or_else(Vec::new, |s| {
            s.keys
                .iter()
                .map(|k| {
                    (
                        k.build_id.clone().unwrap_or_else(|| "-".into()),
                        k.file.clone(),
                        format!("{:#x}", k.vaddr),
                    )
                })
                .collect()
        });
        let mut ranges = Vec::new();
        let mut want = bytes;
        if let Some(id) = id {
            for t in targets {
                for (a, b) in namer.ranges_of(t, id) {
                    if want == 0 {
                        break;
                    }
                    let b = if b - a > want {
                        // Page-aligned, so the part is what mlock locks.
                        (a + want).next_multiple_of(PAGE)
                    } else {
                        b
                    };
                    want = want.saturating_sub(b - a);
                    ranges.push((t, format!("{a:#x}"), format!("{b:#x}")));
                }
            }
        }
        let sym = (r.kind == Kind::Symbol)
            .then(|| namer.symbol_in_file(&r.file, &r.name))
            .flatten();
        out.hints.push(Hint {
            object: r.name.clone(),
            kind: r.kind,
            file: r.file.clone(),
            build_id: sym.as_ref().map(|s| s.2.clone()),
            symbol_vaddr: sym.as_ref().map(|s| format!("{:#x}", s.0)),
            symbol_size: sym.as_ref().map(|s| s.1.min(bytes)),
            sites,
            action: opts.action,
            node: opts.node.filter(|_| opts.action == HintAction::Node),
            ranges,
            part: bytes < size,
            bytes,
            access_frequency: (r.access_frequency * 1e4).round() / 1e4,
            access_share: (r.access_share * 1e4).round() / 1e4,
        });
    }
    out
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

impl Hints {
    /// The hints as TOML, with a comment saying where they came from.
    pub fn to_toml(&self, comment: &str) -> String {
        let mut out = String::new();
        for line in comment.lines() {
            out.push_str(&format!("# {line}\n"));
        }
        out.push_str(&toml::to_string(self).unwrap_or_default());
        out
    }

    /// Reads and checks a hints file.
    pub fn parse(text: &str) -> Result<Self, HintsError> {
        let h: Hints = toml::from_str(text).map_err(|e| HintsError::Parse(e.to_string()))?;
        for (i, hint) in h.hints.iter().enumerate() {
            let bad = |why: &str| HintsError::Bad {
                index: i + 1,
                object: hint.object.clone(),
                why: why.to_string(),
            };
            if hint.action == HintAction::Node && hint.node.is_none() {
                return Err(bad("action = \"node\" needs node = N"));
            }
            for (_, a, b) in &hint.ranges {
                match (hex(a), hex(b)) {
                    (Some(a), Some(b)) if a < b => {}
                    _ => {
                        return Err(bad(&format!(
                            "range {a}..{b} is not two hex addresses, start below end"
                        )))
                    }
                }
            }
            if let Some(v) = &hint.symbol_vaddr {
                if hex(v).is_none() {
                    return Err(bad(&format!("symbol_vaddr {v} is not a hex address")));
                }
            }
            for (id, file, v) in &hint.sites {
                let id_ok =
                    id == "-" || (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()));
                let file_ok =
                    !file.is_empty() && !file.contains(char::is_whitespace) && !file.contains('/');
                if !id_ok || !file_ok || hex(v).is_none() {
                    return Err(bad(&format!(
                        "site [{id}, {file}, {v}] is not [build-id or \"-\", file name, \"0xaddress\"]"
                    )));
                }
            }
        }
        Ok(h)
    }

    /// The hints the preloaded library can apply (one line per symbol
    /// and per site return address; see `udamon_preload`), and the
    /// objects it cannot (named by their mapping: they have no site or
    /// symbol a new run can find).
    pub fn to_library(&self) -> (Vec<udamon_preload::HintLine>, Vec<String>) {
        use udamon_preload::{HintAction as A, HintLine, HintTarget};
        let mut lines = Vec::new();
        let mut skipped = Vec::new();
        for h in &self.hints {
            let action = match (h.action, h.node) {
                (HintAction::Mlock, _) => A::Mlock,
                (HintAction::Node, Some(n)) => A::Node(n),
                (HintAction::Node, None) => {
                    skipped.push(h.object.clone());
                    continue;
                }
            };
            let before = lines.len();
            let file = crate::paths::basename(&h.file).to_string();
            if let (Some(v), Some(size)) = (h.symbol_vaddr.as_deref().and_then(hex), h.symbol_size)
            {
                lines.push(HintLine {
                    build_id: h.build_id.clone(),
                    file,
                    target: HintTarget::Symbol { vaddr: v, size },
                    action,
                });
            }
            for (id, file, v) in &h.sites {
                if let Some(vaddr) = hex(v) {
                    lines.push(HintLine {
                        build_id: (id != "-").then(|| id.clone()),
                        file: file.clone(),
                        target: HintTarget::Site { vaddr },
                        action,
                    });
                }
            }
            if lines.len() == before {
                skipped.push(h.object.clone());
            }
        }
        (lines, skipped)
    }

    /// The `mlock` hints as DAMOS schemes over the recorded addresses: one
    /// `mlock` scheme for all regions, whatever their access, allowed only
    /// in the hinted ranges (for a simulated workload, whose objects stay
    /// where they were; a live program's may move between runs).
    pub fn to_schemes(&self) -> Vec<Damos> {
        let mut filters = Vec::new();
        for h in self.hints.iter().filter(|h| h.action == HintAction::Mlock) {
            for (_, a, b) in &h.ranges {
                if let (Some(start), Some(end)) = (hex(a), hex(b)) {
                    filters.push(Filter {
                        kind: FilterKind::Addr { start, end },
                        matching: true,
                        allow: true,
                    });
                }
            }
        }
        if filters.is_empty() {
            return Vec::new();
        }
        let mut s = Damos::new(Default::default(), Action::Mlock);
        s.filters = filters;
        vec![s]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(kind: Kind) -> Hint {
        Hint {
            object: "x".into(),
            kind,
            file: "/usr/bin/prog".into(),
            build_id: Some("ab12".into()),
            symbol_vaddr: None,
            symbol_size: None,
            sites: Vec::new(),
            action: HintAction::Mlock,
            node: None,
            ranges: Vec::new(),
            part: false,
            bytes: 4096,
            access_frequency: 0.5,
            access_share: 0.5,
        }
    }

    #[test]
    fn symbols_and_sites_become_library_lines_and_mappings_do_not() {
        let mut sym = hint(Kind::Symbol);
        sym.symbol_vaddr = Some("0x4010".into());
        sym.symbol_size = Some(64);
        let mut site = hint(Kind::AllocSite);
        site.sites = vec![
            ("-".into(), "prog".into(), "0x1234".into()),
            ("cd34".into(), "libfoo.so".into(), "0x99".into()),
        ];
        site.action = HintAction::Node;
        site.node = Some(1);
        let mut heap = hint(Kind::Anon);
        heap.object = "[heap]".into();
        let h = Hints {
            hints: vec![sym, site, heap],
        };
        let (lines, skipped) = h.to_library();
        assert_eq!(skipped, ["[heap]"]);
        let text: Vec<String> = lines.iter().map(|l| l.to_line().unwrap()).collect();
        assert_eq!(
            text,
            [
                "symbol ab12 prog 4010 64 mlock",
                "site - prog 1234 node=1",
                "site cd34 libfoo.so 99 node=1"
            ]
        );
        // Written and read back as TOML, they are the same hints.
        let again = Hints::parse(&h.to_toml("a comment\non two lines")).unwrap();
        assert_eq!(again, h);
    }

    #[test]
    fn a_hints_file_with_bad_values_is_refused_naming_the_hint() {
        let bad = [
            ("[[hint]]\nobject = \"a\"\nkind = \"symbol\"\naction = \"node\"\n", "needs node = N"),
            ("[[hint]]\nobject = \"a\"\nkind = \"object\"\naction = \"mlock\"\nranges = [[0, \"0x20\", \"0x10\"]]\n", "range 0x20..0x10"),
            ("[[hint]]\nobject = \"a\"\nkind = \"symbol\"\naction = \"mlock\"\nsymbol_vaddr = \"zz\"\n", "symbol_vaddr zz"),
            ("[[hint]]\nobject = \"a\"\nkind = \"symbol\"\naction = \"mlock\"\nsurprise = 1\n", "not a hints file"),
        ];
        for (text, want) in bad {
            let e = Hints::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
