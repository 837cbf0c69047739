//! Allocation sites: the side files `udamon record --alloc-sites` leaves
//! beside a record (`udamon_preload`'s format), read into the sampled
//! allocations live at each time, each named by its site: the first frame
//! of its call stack outside the allocator (`function (file:line)`).
//!
//! A region of anonymous memory is then attributed to the sites live in
//! it: an allocation at or above the sampler's threshold (all of them are
//! recorded) by its exact bytes in the region; the rest of the region, in
//! proportion to the weights (bytes each sample stands for) of the smaller
//! sampled allocations live inside it, when there are any; the mapping's
//! own name otherwise.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use udamon_elf::{CodeFile, ElfFile};
use udamon_report::TargetTable;

/// A sampled allocation, live from `from_us` to `to_us` (record time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Live {
    pub addr: u64,
    pub end: u64,
    pub from_us: u64,
    pub to_us: u64,
    pub weight: u64,
    pub site: u32,
}

impl Live {
    fn alive(&self, at_us: u64) -> bool {
        self.from_us <= at_us && at_us < self.to_us
    }
}

/// One target's sampled allocations, by address.
#[derive(Debug, Default)]
pub(crate) struct TargetAllocs {
    /// At or above the threshold: exact.
    pub big: Vec<Live>,
    pub max_big: u64,
    /// Below it: samples, each standing for `weight` bytes.
    pub small: Vec<Live>,
}

impl TargetAllocs {
    fn finish(&mut self) {
        self.big.sort_by_key(|l| l.addr);
        self.small.sort_by_key(|l| l.addr);
        self.max_big = self.big.iter().map(|l| l.end - l.addr).max().unwrap_or(0);
    }

    /// `start..end` at `at_us`: each site's bytes, and the bytes no big
    /// allocation covers, split by the small samples' weights (`None`
    /// when no sample lies there).
    pub fn split(&self, at_us: u64, start: u64, end: u64, out: &mut Vec<(u32, u64)>) -> u64 {
        let from = start.saturating_sub(self.max_big);
        let first = self.big.partition_point(|l| l.addr < from);
        let mut covered = 0;
        for l in self.big[first..].iter().take_while(|l| l.addr < end) {
            let (a, b) = (l.addr.max(start), l.end.min(end));
            if a < b && l.alive(at_us) {
                covered += b - a;
                out.push((l.site, b - a));
            }
        }
        let rest = (end - start).saturating_sub(covered);
        let first = self.small.partition_point(|l| l.addr < start);
        let mut weights: Vec<(u32, u64)> = Vec::new();
        for l in self.small[first..]
            .iter()
            .take_while(|l| l.addr < end)
            .filter(|l| l.alive(at_us))
        {
            match weights.iter_mut().find(|(s, _)| *s == l.site) {
                Some((_, w)) => *w += l.weight,
                None => weights.push((l.site, l.weight)),
            }
        }
        let total: u64 = weights.iter().map(|(_, w)| w).sum();
        if total == 0 || rest == 0 {
            return rest;
        }
        let mut given = 0;
        for (i, (site, w)) in weights.iter().enumerate() {
            let share = if i + 1 == weights.len() {
                rest - given
            } else {
                (rest as u128 * *w as u128 / total as u128) as u64
            };
            given += share;
            out.push((*site, share));
        }
        0
    }
}

/// A frame's module: the mapping of the side file's maps text that holds
/// it.
#[derive(Clone, Debug)]
pub(crate) struct TextMapping {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

fn parse_maps(text: &str) -> Vec<TextMapping> {
    let mut out: Vec<TextMapping> = text
        .lines()
        .filter_map(udamon_core::vaddr::parse_maps_line)
        .map(|m| TextMapping {
            start: m.range.start,
            end: m.range.end,
            offset: m.offset,
            path: m.path,
        })
        .collect();
    out.sort_by_key(|m| m.start);
    out
}

/// Modules whose frames are the allocator's, not the program's.
fn allocator_module(path: &str) -> bool {
    let base = crate::paths::basename(path);
    [
        "libc.so",
        "libc-",
        "ld-linux",
        "libstdc++",
        "libudamon_preload",
        "libjemalloc",
        "libtcmalloc",
        "libmimalloc",
    ]
    .iter()
    .any(|p| base.starts_with(p))
}

/// Functions that wrap the allocator (a program's own `zmalloc`,
/// `xmalloc`, `g_malloc`, C++'s `operator new`): the site is their caller.
fn allocator_function(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "malloc",
        "calloc",
        "realloc",
        "operator new",
        "strdup",
        "alloc_usable",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// A file read for naming code: its layout and its lines.
type Code = (Arc<ElfFile>, Rc<CodeFile>);

/// Names code addresses of the files a record's processes ran, once per
/// file and address.
#[derive(Debug, Default)]
pub(crate) struct Symbolizer {
    root: PathBuf,
    files: HashMap<String, Option<Code>>,
    /// Build-ids the record saw, by path: a file with another is not used.
    recorded: HashMap<String, String>,
    pub notes: Vec<String>,
}

impl Symbolizer {
    pub fn new(root: &Path, recorded: HashMap<String, String>) -> Self {
        Self {
            root: root.to_path_buf(),
            recorded,
            ..Self::default()
        }
    }

    fn file(&mut self, path: &str) -> Option<Code> {
        if let Some(f) = self.files.get(path) {
            return f.clone();
        }
        let on_disk = self.root.join(path.trim_start_matches('/'));
        let loaded = match ElfFile::load(&on_disk, None) {
            Ok(Some(elf)) => match (self.recorded.get(path), &elf.build_id) {
                (Some(want), got) if got.as_deref() != Some(want) => {
                    self.notes.push(format!(
                            "{} is not the build the record saw (build-id {want} then, {} now): its allocation sites are named by address",
                            on_disk.display(),
                            got.as_deref().unwrap_or("none")
                        ));
                    None
                }
                _ => CodeFile::open(&on_disk)
                    .ok()
                    .map(|c| (Arc::new(elf), Rc::new(c))),
            },
            _ => None,
        };
        self.files.insert(path.to_string(), loaded.clone());
        loaded
    }

    /// The site of a call stack (return addresses, innermost first) under
    /// `maps`: the first frame outside the allocator, `function
    /// (file:line)`, and where its return address is in its file (what a
    /// later run's preloaded library matches a hint on).
    pub fn site(&mut self, stack: &[u64], maps: &[TextMapping]) -> (String, Option<SiteKey>) {
        let mut first: Option<(String, Option<SiteKey>)> = None;
        for &ret in stack {
            let pc = ret.saturating_sub(1);
            let i = maps.partition_point(|m| m.end <= pc);
            let Some(m) = maps.get(i).filter(|m| m.start <= pc) else {
                continue;
            };
            let base = crate::paths::basename(&m.path).to_string();
            let (func, text, key) = match self.file(&m.path) {
                Some((elf, code)) => {
                    let v = elf.vaddr_of_offset(m.offset);
                    let key = v.map(|v| SiteKey {
                        build_id: elf.build_id.clone(),
                        file: base.clone(),
                        vaddr: v + (ret - m.start),
                    });
                    let loc = v.map(|v| v + (pc - m.start)).and_then(|at| {
                        let mut l = code.locate(at);
                        if l.function.is_none() {
                            l.function = elf.function_at(at).map(|f| f.name.clone());
                        }
                        l.function.is_some().then_some(l)
                    });
                    match loc {
                        Some(l) => (l.function.clone().unwrap_or_default(), l.to_string(), key),
                        None => (
                            String::new(),
                            format!("{base}+{:#x}", pc - m.start + m.offset),
                            key,
                        ),
                    }
                }
                None => (
                    String::new(),
                    format!("{base}+{:#x}", pc - m.start + m.offset),
                    None,
                ),
            };
            if first.is_none() {
                first = Some((text.clone(), key.clone()));
            }
            if allocator_module(&m.path) || allocator_function(&func) {
                continue;
            }
            return (text, key);
        }
        first.unwrap_or_else(|| ("[unknown site]".to_string(), None))
    }
}

/// Where a site's return address is in its file: the ELF virtual address
/// (a later run finds it at the file's load bias plus this).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SiteKey {
    pub build_id: Option<String>,
    /// The file's name.
    pub file: String,
    pub vaddr: u64,
}

/// At most this many return addresses kept per site (one site may be
/// reached from several inlined copies).
const MAX_SITE_KEYS: usize = 16;

/// An allocation site.
#[derive(Clone, Debug, Default)]
pub struct Site {
    /// `function (file:line)`, as the objects report names it.
    pub name: String,
    /// Where its return addresses are (at most [`MAX_SITE_KEYS`]).
    pub keys: Vec<SiteKey>,
    /// The most bytes its allocations held at once (exact for the big
    /// ones, by weight for the sampled small ones): what a hint on the
    /// site would lock.
    pub peak: u64,
}

/// What the side files of a record hold, per target, with the sites to
/// be made objects by the namer.
pub(crate) struct Loaded {
    pub targets: HashMap<u32, TargetAllocs>,
    pub sites: Vec<Site>,
    pub notes: Vec<String>,
    pub files: usize,
}

/// Reads the side files `prefix.PID` of a record whose monitoring started
/// at `mono_start_ns` (CLOCK_MONOTONIC), assigning each process's
/// allocations to the target with its pid that was monitored then.
pub(crate) fn load(
    prefix: &Path,
    mono_start_ns: u64,
    table: &TargetTable,
    sym: &mut Symbolizer,
) -> Loaded {
    let mut out = Loaded {
        targets: HashMap::new(),
        sites: Vec::new(),
        notes: Vec::new(),
        files: 0,
    };
    let paths = match udamon_preload::SideFile::paths(prefix) {
        Ok(p) => p,
        Err(e) => {
            out.notes.push(format!("no allocation sites: {e}"));
            return out;
        }
    };
    if paths.is_empty() {
        out.notes.push(format!(
            "no allocation sites: the record names side files {}.PID, and there are none",
            prefix.display()
        ));
    }
    let mut site_ids: HashMap<String, u32> = HashMap::new();
    let to_us = |ns: u64| ns.saturating_sub(mono_start_ns) / 1000;
    for path in paths {
        let f = match udamon_preload::read(&path) {
            Ok(f) => f,
            Err(e) => {
                out.notes
                    .push(format!("{e}: its allocation sites are left out"));
                continue;
            }
        };
        out.files += 1;
        if let Some(at) = f.truncated {
            out.notes.push(format!(
                "{} ends in a cut record at byte {at} (the process was killed): read up to there",
                path.display()
            ));
        }
        let rows: Vec<_> = table.rows().iter().filter(|r| r.pid == f.pid).collect();
        if rows.is_empty() {
            continue;
        }
        let maps: Vec<Vec<TextMapping>> =
            f.maps.iter().map(|m| parse_maps(&m.text_lossy())).collect();
        // Frees by address, in time order: each allocation ends at the
        // first free of its address after it.
        let mut frees: HashMap<u64, Vec<u64>> = HashMap::new();
        for fr in &f.frees {
            frees.entry(fr.addr).or_default().push(fr.time_ns);
        }
        let mut stack_sites: HashMap<u32, u32> = HashMap::new();
        for a in &f.allocations {
            let site = match stack_sites.get(&a.stack) {
                Some(&s) => s,
                None => {
                    let stack = f.stacks.get(&a.stack).map_or(&[][..], |s| s.as_slice());
                    // The maps text of the time, else the last.
                    let m = f
                        .maps
                        .iter()
                        .rposition(|m| m.time_ns <= a.time_ns)
                        .or(maps.len().checked_sub(1))
                        .map_or(&[][..], |i| maps[i].as_slice());
                    let (name, key) = sym.site(stack, m);
                    let next = site_ids.len() as u32;
                    let id = *site_ids.entry(name.clone()).or_insert_with(|| {
                        out.sites.push(Site {
                            name,
                            ..Site::default()
                        });
                        next
                    });
                    let keys = &mut out.sites[id as usize].keys;
                    if let Some(k) = key {
                        if !keys.contains(&k) && keys.len() < MAX_SITE_KEYS {
                            keys.push(k);
                        }
                    }
                    stack_sites.insert(a.stack, id);
                    id
                }
            };
            let end_ns = frees
                .get(&a.addr)
                .and_then(|ts| ts.iter().find(|&&t| t >= a.time_ns).copied());
            let from_us = to_us(a.time_ns);
            let row = rows
                .iter()
                .rev()
                .find(|r| r.arrived_us.is_none_or(|t| t <= from_us))
                .unwrap_or(&rows[0]);
            let live = Live {
                addr: a.addr,
                end: a.addr.saturating_add(a.size.max(1)),
                from_us,
                to_us: end_ns.map_or(u64::MAX, to_us),
                weight: a.weight,
                site,
            };
            let t = out.targets.entry(row.target_idx).or_default();
            if a.size >= f.threshold {
                t.big.push(live);
            } else {
                t.small.push(live);
            }
        }
    }
    for t in out.targets.values_mut() {
        t.finish();
    }
    // Each site's peak: its allocations' bytes summed over time (alloc +,
    // free -), at the highest.
    let mut events: Vec<(u64, bool, u32, u64)> = Vec::new();
    for t in out.targets.values() {
        let big = t.big.iter().map(|l| (l, l.end - l.addr));
        for (l, bytes) in big.chain(t.small.iter().map(|l| (l, l.weight))) {
            events.push((l.from_us, true, l.site, bytes));
            if l.to_us != u64::MAX {
                events.push((l.to_us, false, l.site, bytes));
            }
        }
    }
    // Frees before allocations at the same time.
    events.sort_by_key(|e| (e.0, e.1));
    let mut now = vec![0u64; out.sites.len()];
    for (_, alloc, site, bytes) in events {
        let n = &mut now[site as usize];
        if alloc {
            *n += bytes;
            let peak = &mut out.sites[site as usize].peak;
            *peak = (*peak).max(*n);
        } else {
            *n = n.saturating_sub(bytes);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(addr: u64, size: u64, weight: u64, site: u32) -> Live {
        Live {
            addr,
            end: addr + size,
            from_us: 10,
            to_us: 100,
            weight,
            site,
        }
    }

    #[test]
    fn big_allocations_count_exactly_and_samples_split_the_rest() {
        let mut t = TargetAllocs {
            big: vec![live(0x10000, 0x4000, 0x4000, 0)],
            small: vec![
                live(0x15000, 64, 3000, 1),
                live(0x16000, 64, 1000, 2),
                live(0x30000, 64, 1000, 3),
            ],
            ..TargetAllocs::default()
        };
        t.finish();
        let mut out = Vec::new();
        // 0x8000 bytes: 0x4000 of the big one, the rest 3:1.
        let rest = t.split(50, 0x10000, 0x18000, &mut out);
        assert_eq!(rest, 0);
        assert_eq!(out, [(0, 0x4000), (1, 0x3000), (2, 0x1000)]);
        // Before the allocations were made, or after they were freed,
        // nothing is theirs.
        out.clear();
        assert_eq!(t.split(5, 0x10000, 0x18000, &mut out), 0x8000);
        assert!(out.is_empty());
        assert_eq!(t.split(100, 0x10000, 0x18000, &mut out), 0x8000);
        // A region with no sample: all left to the mapping.
        out.clear();
        assert_eq!(t.split(50, 0x20000, 0x28000, &mut out), 0x8000);
        assert!(out.is_empty());
    }

    #[test]
    fn the_site_is_the_first_frame_outside_the_allocator() {
        assert!(allocator_module("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(allocator_module("/usr/lib/libudamon_preload-1a2b.so"));
        assert!(!allocator_module("/usr/bin/redis-server"));
        assert!(allocator_function("zmalloc_usable"));
        assert!(allocator_function("ztrymalloc_usable_internal"));
        assert!(allocator_function("operator new(unsigned long)"));
        assert!(!allocator_function("alloc_sessions"));
        assert!(!allocator_function("dictExpand"));
        // Frames in no known mapping are skipped; with none known, the
        // site says so.
        let mut s = Symbolizer::new(Path::new("/"), HashMap::new());
        assert_eq!(s.site(&[0x1234], &[]).0, "[unknown site]");
        let maps = parse_maps("00400000-00401000 r-xp 00001000 08:01 5 /nonexistent/prog\n");
        assert_eq!(
            s.site(&[0x400010], &maps),
            ("prog+0x100f".to_string(), None)
        );
    }
}
