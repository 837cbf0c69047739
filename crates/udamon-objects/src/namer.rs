//! Naming a region: which objects its bytes belong to, at a time.
//!
//! A target's mappings at a time are its last `maps` entry at or before it
//! (the first one before that). Each mapping is cut into pieces, each one
//! object:
//! - in a mapped ELF file whose build-id on disk is the one recorded, a
//!   data symbol's bytes are the symbol's, the rest of a section is
//!   `FILE SECTION` (`libc.so.6 .data`), the rest of the mapping is the
//!   file's; the anonymous mapping right after an ELF file's last one is
//!   its `.bss` when the file's load segments say so;
//! - a file mapping otherwise is the file;
//! - anonymous memory is `[heap]`, `[stack]`, `[anon:NAME]`, or
//!   `[anon 0xSTART]` named by where the mapping starts;
//! - a simulated workload's mapping is its object.
//!
//! Pieces are computed once per distinct mapping, and ELF files are read
//! once per file and build-id, so naming a long record costs a lookup per
//! region.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use udamon_elf::ElfFile;
use udamon_record::{MapInfo, MapsEvent};

use crate::paths::basename;

/// What kind of object a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Heap memory by the allocation site that made it (`record
    /// --alloc-sites`).
    AllocSite,
    /// A data symbol of an ELF file.
    Symbol,
    /// The part of an ELF file's section no symbol covers.
    Section,
    /// A mapped file (not ELF, or not readable as recorded).
    File,
    /// Anonymous memory: heap, stack, other anonymous mappings.
    Anon,
    /// A simulated workload's object.
    Object,
    /// Memory no recorded mapping covers (the mappings changed between
    /// two reads, or the record has none).
    Unmapped,
}

/// An object, by name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Object {
    pub kind: Kind,
    pub name: String,
    /// The file it belongs to, for symbols, sections and files.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub file: String,
}

/// An object's index in [`Namer::object`].
pub type ObjId = u32;

/// One object's bytes in a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    start: u64,
    end: u64,
    obj: ObjId,
}

/// A target's mappings at one time, cut into pieces.
#[derive(Debug, Default)]
struct Layout {
    /// Mapping start, end and its pieces, by start.
    maps: Vec<(u64, u64, Arc<Vec<Piece>>)>,
}

impl Layout {
    /// Its pieces within `start..end`, each clipped to it, in address
    /// order.
    fn clipped(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64, ObjId)> + '_ {
        let first = self.maps.partition_point(|m| m.1 <= start);
        self.maps[first..]
            .iter()
            .take_while(move |(ms, _, _)| *ms < end)
            .flat_map(move |(_, _, pieces)| {
                let p0 = pieces.partition_point(|p| p.end <= start);
                pieces[p0..].iter().take_while(move |p| p.start < end)
            })
            .map(move |p| (p.start.max(start), p.end.min(end), p.obj))
    }
}

/// Which mappings hold from when, per target.
#[derive(Debug, Default)]
struct Versions {
    at_us: Vec<u64>,
    maps: Vec<Arc<Vec<MapInfo>>>,
    layouts: Vec<Option<Arc<Layout>>>,
}

/// Where to find files and what to say about them.
#[derive(Clone, Debug)]
pub struct NamerOptions {
    /// The files a record names are read under this root (default `/`).
    pub root: PathBuf,
    /// Separate debug files by build-id (default `/usr/lib/debug`).
    pub debug_root: Option<PathBuf>,
    /// Name data symbols at all (default yes).
    pub symbols: bool,
}

impl Default for NamerOptions {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/"),
            debug_root: Some(PathBuf::from("/usr/lib/debug")),
            symbols: true,
        }
    }
}

/// A mapping's identity for the piece cache: the mapping, and the ELF
/// file and bias an anonymous `.bss` continues.
type PieceKey = (MapInfo, Option<(String, String, u64)>);

/// Names regions of a record's targets (see the module's documentation).
#[derive(Debug, Default)]
pub struct Namer {
    opts: NamerOptions,
    targets: HashMap<u32, Versions>,
    objects: Vec<Object>,
    ids: HashMap<Object, ObjId>,
    /// ELF files by (path, build-id); `None`: not usable.
    elves: HashMap<(String, String), Option<Arc<ElfFile>>>,
    pieces: HashMap<PieceKey, Arc<Vec<Piece>>>,
    notes: Vec<String>,
    /// Sampled allocations per target, and each site's object.
    allocs: HashMap<u32, crate::allocs::TargetAllocs>,
    site_objs: Vec<ObjId>,
    sites: HashMap<ObjId, crate::allocs::Site>,
}

impl Namer {
    pub fn new(opts: NamerOptions) -> Self {
        Self {
            opts,
            ..Self::default()
        }
    }

    /// Takes a `maps` entry; entries of a target come in time order.
    pub fn add_maps(&mut self, e: MapsEvent) {
        let v = self.targets.entry(e.idx).or_default();
        let mut maps = e.maps;
        maps.sort_by_key(|m| m.start);
        v.at_us.push(e.at_us);
        v.maps.push(Arc::new(maps));
        v.layouts.push(None);
    }

    /// Whether any target has mappings.
    pub fn has_maps(&self) -> bool {
        !self.targets.is_empty()
    }

    /// Every object named so far, by id.
    pub fn object(&self, id: ObjId) -> &Object {
        &self.objects[id as usize]
    }

    /// The id of an object named so far.
    pub fn id_of(&self, o: &Object) -> Option<ObjId> {
        self.ids.get(o).copied()
    }

    /// Where object `obj` lies in target `idx`'s last mappings (the
    /// record's end), in address order.
    pub fn ranges_of(&mut self, idx: u32, obj: ObjId) -> Vec<(u64, u64)> {
        let last = self.targets.get(&idx).map(|v| v.maps.len() - 1);
        let Some(layout) = last.and_then(|i| self.layout(idx, i)) else {
            return Vec::new();
        };
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (_, _, pieces) in &layout.maps {
            for p in pieces.iter().filter(|p| p.obj == obj) {
                match out.last_mut() {
                    Some(r) if r.1 == p.start => r.1 = p.end,
                    _ => out.push((p.start, p.end)),
                }
            }
        }
        out
    }

    /// An allocation site: where its return addresses are, and the most
    /// bytes its allocations held at once.
    pub fn site(&self, obj: ObjId) -> Option<&crate::allocs::Site> {
        self.sites.get(&obj)
    }

    /// The targets with mappings.
    pub fn targets(&self) -> Vec<u32> {
        let mut t: Vec<u32> = self.targets.keys().copied().collect();
        t.sort_unstable();
        t
    }

    /// A data symbol's address and size in its file, and the file's
    /// build-id, from the file the record named (read as it was).
    pub fn symbol_in_file(&self, file: &str, name: &str) -> Option<(u64, u64, String)> {
        self.elves.iter().find_map(|((path, id), f)| {
            let f = f.as_ref().filter(|_| path == file)?;
            let s = f.symbols.iter().find(|s| s.name == name)?;
            Some((s.vaddr, s.size, id.clone()))
        })
    }

    /// What the reader should know: files that changed since the record
    /// (their symbols are not used), files that could not be read.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    fn id(&mut self, o: Object) -> ObjId {
        if let Some(&id) = self.ids.get(&o) {
            return id;
        }
        let id = self.objects.len() as ObjId;
        self.ids.insert(o.clone(), id);
        self.objects.push(o);
        id
    }

    /// Adds to `out` the objects holding `start..end` of target `idx` at
    /// `at_us`, with their bytes (in address order; bytes no mapping
    /// covers are [`Kind::Unmapped`]).
    pub fn resolve(
        &mut self,
        idx: u32,
        at_us: u64,
        start: u64,
        end: u64,
        out: &mut Vec<(ObjId, u64)>,
    ) {
        let layout = self
            .version_at(idx, at_us)
            .and_then(|i| self.layout(idx, i));
        let mut cursor = start;
        for (a, b, obj) in layout.iter().flat_map(|l| l.clipped(start, end)) {
            if a > cursor {
                self.unmapped(cursor, a, out);
            }
            self.push_piece(idx, at_us, obj, a, b, out);
            cursor = b;
        }
        if cursor < end {
            self.unmapped(cursor, end, out);
        }
    }

    /// The objects of target `idx` at `at_us` within `start..end`, each
    /// piece clipped to it, in address order (gaps between mappings left
    /// out): what a heatmap names as the pointer moves.
    pub fn pieces_in(
        &mut self,
        idx: u32,
        at_us: u64,
        start: u64,
        end: u64,
    ) -> Vec<(u64, u64, ObjId)> {
        self.version_at(idx, at_us)
            .and_then(|i| self.layout(idx, i))
            .map_or_else(Vec::new, |l| l.clipped(start, end).collect())
    }

    /// `a..b` of mapping object `obj`: anonymous memory goes to the
    /// allocation sites live in it, where the record has them.
    fn push_piece(
        &mut self,
        idx: u32,
        at_us: u64,
        obj: ObjId,
        a: u64,
        b: u64,
        out: &mut Vec<(ObjId, u64)>,
    ) {
        let anon = self.objects[obj as usize].kind == Kind::Anon;
        let Some(allocs) = self.allocs.get(&idx).filter(|_| anon) else {
            push(out, obj, b - a);
            return;
        };
        let mut sites = Vec::new();
        let rest = allocs.split(at_us, a, b, &mut sites);
        for (site, bytes) in sites {
            push(out, self.site_objs[site as usize], bytes);
        }
        if rest > 0 {
            push(out, obj, rest);
        }
    }

    /// Reads the allocation sites of a record made with `--alloc-sites`
    /// (its header's `params.alloc_sites`; nothing otherwise): the side
    /// files beside `record`, their call stacks named from the files under
    /// the root (the build the record's mappings name). Call it after the
    /// record's mappings are added. Returns how many side files were read.
    pub fn load_alloc_sites(
        &mut self,
        header: &udamon_record::Header,
        record: &std::path::Path,
        table: &udamon_report::TargetTable,
    ) -> usize {
        let p = &header.params;
        let Some(prefix) = p["alloc_sites"]["prefix"].as_str() else {
            return 0;
        };
        // Only a file name, beside the record: a record never points
        // elsewhere.
        let name = std::path::Path::new(prefix).file_name().unwrap_or_default();
        let path = record.with_file_name(name);
        let start = p["monotonic_start_ns"].as_u64().unwrap_or(0);
        let mut recorded = HashMap::new();
        for v in self.targets.values() {
            for maps in &v.maps {
                for m in maps.iter() {
                    if let Some(id) = &m.build_id {
                        recorded.insert(m.path.clone(), id.clone());
                    }
                }
            }
        }
        let mut sym = crate::allocs::Symbolizer::new(&self.opts.root, recorded);
        let loaded = crate::allocs::load(&path, start, table, &mut sym);
        self.site_objs = loaded
            .sites
            .iter()
            .map(|site| {
                self.id(Object {
                    kind: Kind::AllocSite,
                    name: site.name.clone(),
                    file: String::new(),
                })
            })
            .collect();
        self.sites = self.site_objs.iter().copied().zip(loaded.sites).collect();
        self.allocs = loaded.targets;
        self.notes.extend(loaded.notes);
        self.notes.extend(sym.notes);
        loaded.files
    }

    /// The one object holding most of `start..end`, and how many others
    /// share it ("libc.so.6 .data +3").
    pub fn main_object(&mut self, idx: u32, at_us: u64, start: u64, end: u64) -> Option<String> {
        self.targets.get(&idx)?;
        let mut out = Vec::new();
        self.resolve(idx, at_us, start, end, &mut out);
        let mut by: HashMap<ObjId, u64> = HashMap::new();
        for (o, b) in &out {
            *by.entry(*o).or_default() += b;
        }
        let (&best, _) = by
            .iter()
            .max_by_key(|(o, b)| (**b, std::cmp::Reverse(**o)))?;
        let name = self.object(best).name.clone();
        Some(match by.len() - 1 {
            0 => name,
            n => format!("{name} +{n}"),
        })
    }

    fn unmapped(&mut self, a: u64, b: u64, out: &mut Vec<(ObjId, u64)>) {
        let id = self.id(Object {
            kind: Kind::Unmapped,
            name: "[unmapped]".into(),
            file: String::new(),
        });
        push(out, id, b - a);
    }

    /// The version of target `idx`'s mappings holding at `at_us`: the last
    /// at or before it, else the first.
    fn version_at(&self, idx: u32, at_us: u64) -> Option<usize> {
        let v = self.targets.get(&idx)?;
        Some(v.at_us.partition_point(|&t| t <= at_us).saturating_sub(1))
    }

    /// Version `i` of target `idx`'s mappings, cut into pieces on first use.
    fn layout(&mut self, idx: u32, i: usize) -> Option<Arc<Layout>> {
        let v = self.targets.get(&idx)?;
        if let Some(l) = v.layouts.get(i)? {
            return Some(l.clone());
        }
        let maps = v.maps[i].clone();
        let layout = Arc::new(self.build_layout(&maps));
        self.targets.get_mut(&idx)?.layouts[i] = Some(layout.clone());
        Some(layout)
    }

    fn build_layout(&mut self, maps: &[MapInfo]) -> Layout {
        let mut out = Layout::default();
        // The ELF file the previous mapping belongs to and its bias, for
        // the anonymous `.bss` that may follow it.
        let mut prev: Option<(Arc<ElfFile>, String, String, u64, u64)> = None;
        for m in maps {
            if m.end <= m.start {
                continue;
            }
            // The ELF file this mapping maps, with its load bias.
            let elf = self.elf_of(m).and_then(|f| {
                let v = f.vaddr_of_offset(m.offset)?;
                Some((f, m.start.wrapping_sub(v)))
            });
            // Else, the `.bss` of the ELF file just before it.
            let ctx = match (&elf, &prev) {
                (None, Some((f, path, id, bias, end)))
                    if m.path.is_empty() && m.inode == 0 && m.start == *end =>
                {
                    f.in_segment(m.start.wrapping_sub(*bias))
                        .then(|| (f.clone(), path.clone(), id.clone(), *bias))
                }
                _ => None,
            };
            let key: PieceKey = (
                m.clone(),
                ctx.as_ref()
                    .map(|(_, p, id, b)| (p.clone(), id.clone(), *b)),
            );
            let pieces = match self.pieces.get(&key) {
                Some(p) => p.clone(),
                None => {
                    let p = Arc::new(match (&elf, &ctx) {
                        (Some((f, bias)), _) => self.elf_pieces(f, &m.path, m.start, m.end, *bias),
                        (None, Some((f, path, _, bias))) => {
                            self.elf_pieces(f, path, m.start, m.end, *bias)
                        }
                        (None, None) => self.whole(m),
                    });
                    self.pieces.insert(key, p.clone());
                    p
                }
            };
            prev = match (elf, ctx) {
                (Some((f, bias)), _) => {
                    let id = m.build_id.clone().unwrap_or_default();
                    Some((f, m.path.clone(), id, bias, m.end))
                }
                (None, Some((f, p, id, b))) => Some((f, p, id, b, m.end)),
                (None, None) => None,
            };
            out.maps.push((m.start, m.end, pieces));
        }
        out
    }

    /// A mapping that is one object.
    fn whole(&mut self, m: &MapInfo) -> Vec<Piece> {
        let o = if m.path.is_empty() {
            Object {
                kind: Kind::Anon,
                name: format!("[anon {:#x}]", m.start),
                file: String::new(),
            }
        } else if m.path.starts_with('[') {
            Object {
                kind: Kind::Anon,
                name: m.path.clone(),
                file: String::new(),
            }
        } else if m.path.starts_with('/') || m.inode != 0 {
            Object {
                kind: Kind::File,
                name: basename(&m.path).to_string(),
                file: m.path.clone(),
            }
        } else {
            Object {
                kind: Kind::Object,
                name: m.path.clone(),
                file: String::new(),
            }
        };
        let obj = self.id(o);
        vec![Piece {
            start: m.start,
            end: m.end,
            obj,
        }]
    }

    /// The pieces of `start..end` of an ELF file loaded with `bias`.
    fn elf_pieces(
        &mut self,
        f: &ElfFile,
        path: &str,
        start: u64,
        end: u64,
        bias: u64,
    ) -> Vec<Piece> {
        let base = basename(path).to_string();
        let file_obj = self.id(Object {
            kind: Kind::File,
            name: base.clone(),
            file: path.to_string(),
        });
        let (lo, hi) = (start.wrapping_sub(bias), end.wrapping_sub(bias));
        let mut out: Vec<Piece> = Vec::new();
        let add = |out: &mut Vec<Piece>, a: u64, b: u64, obj: ObjId| {
            if a >= b {
                return;
            }
            let (a, b) = (a.wrapping_add(bias), b.wrapping_add(bias));
            match out.last_mut() {
                Some(p) if p.end == a && p.obj == obj => p.end = b,
                _ => out.push(Piece {
                    start: a,
                    end: b,
                    obj,
                }),
            }
        };
        let mut cursor = lo;
        // Top-level sections in address order; `.tbss` takes no memory.
        let sections: Vec<(u64, u64, String)> = f
            .sections
            .iter()
            .filter(|s| s.name != ".tbss" && s.vaddr < hi && s.vaddr + s.size > lo)
            .map(|s| (s.vaddr.max(lo), (s.vaddr + s.size).min(hi), s.name.clone()))
            .collect();
        for (x, y, name) in sections {
            if y <= cursor {
                continue;
            }
            let x = x.max(cursor);
            add(&mut out, cursor, x, file_obj);
            let sec_obj = self.id(Object {
                kind: Kind::Section,
                name: format!("{base} {name}"),
                file: path.to_string(),
            });
            let mut c = x;
            if self.opts.symbols {
                let syms: Vec<(String, u64, u64)> = f
                    .symbols_in(x, y)
                    .filter(|(s, _)| !s.tls)
                    .map(|(s, _)| (s.name.clone(), s.vaddr.max(x), (s.vaddr + s.size).min(y)))
                    .collect();
                for (sname, a, b) in syms {
                    if b <= c {
                        continue;
                    }
                    let a = a.max(c);
                    add(&mut out, c, a, sec_obj);
                    let sym = self.id(Object {
                        kind: Kind::Symbol,
                        name: sname,
                        file: path.to_string(),
                    });
                    add(&mut out, a, b, sym);
                    c = b;
                }
            }
            add(&mut out, c, y, sec_obj);
            cursor = y;
        }
        add(&mut out, cursor, hi, file_obj);
        out
    }

    /// The ELF file a mapping maps, when it is the build recorded.
    fn elf_of(&mut self, m: &MapInfo) -> Option<Arc<ElfFile>> {
        let id = m.build_id.as_ref()?;
        if !m.path.starts_with('/') {
            return None;
        }
        let key = (m.path.clone(), id.clone());
        if let Some(f) = self.elves.get(&key) {
            return f.clone();
        }
        let path = self.opts.root.join(m.path.trim_start_matches('/'));
        let f = match ElfFile::load(&path, self.opts.debug_root.as_deref()) {
            Ok(Some(f)) if f.build_id.as_deref() == Some(id) => Some(Arc::new(f)),
            Ok(Some(f)) => {
                self.notes.push(format!(
                    "{} is not the build the record saw (build-id {} then, {} now): it is named as a file, without its symbols",
                    path.display(),
                    id,
                    f.build_id.as_deref().unwrap_or("none"),
                ));
                None
            }
            Ok(None) => None,
            Err(e) => {
                self.notes
                    .push(format!("{e}: it is named as a file, without its symbols"));
                None
            }
        };
        self.elves.insert(key, f.clone());
        f
    }
}

impl udamon_report::Names for Namer {
    fn main_object(&mut self, target: u32, at_us: u64, start: u64, end: u64) -> Option<String> {
        Namer::main_object(self, target, at_us, start, end)
    }

    fn pieces(&mut self, target: u32, at_us: u64, start: u64, end: u64) -> Vec<(u64, u64, String)> {
        self.pieces_in(target, at_us, start, end)
            .into_iter()
            .map(|(a, b, o)| (a, b, self.object(o).name.clone()))
            .collect()
    }
}

/// Adds `bytes` of `obj` to `out`, merging with the last entry.
fn push(out: &mut Vec<(ObjId, u64)>, obj: ObjId, bytes: u64) {
    match out.last_mut() {
        Some((o, b)) if *o == obj => *b += bytes,
        _ => out.push((obj, bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary's mappings, as `udamon record` writes them.
    fn own_maps() -> MapsEvent {
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::env::current_exe().unwrap();
        let id = udamon_elf::build_id(&exe).unwrap();
        let maps = text
            .lines()
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let (s, e) = w[0].split_once('-').unwrap();
                let path = w.get(5).copied().unwrap_or("").to_string();
                MapInfo {
                    start: u64::from_str_radix(s, 16).unwrap(),
                    end: u64::from_str_radix(e, 16).unwrap(),
                    perms: w[1].into(),
                    offset: u64::from_str_radix(w[2], 16).unwrap(),
                    dev: w[3].into(),
                    inode: w[4].parse().unwrap(),
                    build_id: (path == exe.to_str().unwrap())
                        .then(|| id.clone())
                        .flatten(),
                    path,
                }
            })
            .collect();
        MapsEvent {
            at_us: 0,
            idx: 0,
            maps,
        }
    }

    static mut HOT_TABLE: [u64; 1024] = [1; 1024];
    static mut ZEROED_POOL: [u8; 256 * 1024] = [0; 256 * 1024];

    #[test]
    fn statics_of_a_mapped_elf_file_are_named_by_their_symbols() {
        let maps = own_maps();
        if maps.maps.iter().all(|m| m.build_id.is_none()) {
            return; // a toolchain that links without build-ids
        }
        let data = std::hint::black_box(&raw const HOT_TABLE) as u64;
        let bss = std::hint::black_box(&raw const ZEROED_POOL) as u64;
        let mut n = Namer::new(NamerOptions::default());
        n.add_maps(maps.clone());
        for (addr, len, want) in [(data, 8192, "HOT_TABLE"), (bss, 256 * 1024, "ZEROED_POOL")] {
            let mut out = Vec::new();
            n.resolve(0, 0, addr, addr + len, &mut out);
            let names: Vec<String> = out.iter().map(|(o, _)| n.object(*o).name.clone()).collect();
            assert_eq!(out.len(), 1, "{names:?}");
            assert!(names[0].contains(want), "{names:?}");
            assert_eq!(out[0].1, len);
            assert_eq!(n.object(out[0].0).kind, Kind::Symbol);
        }
        // A range over the symbol and past it: the symbol's bytes, then the
        // section's or the next symbols'.
        let mut out = Vec::new();
        n.resolve(0, 0, data, data + 8192 + 64, &mut out);
        assert!(out.len() >= 2);
        assert_eq!(out.iter().map(|(_, b)| b).sum::<u64>(), 8192 + 64);
        // Without symbols, the same bytes are the section's.
        let mut plain = Namer::new(NamerOptions {
            symbols: false,
            ..NamerOptions::default()
        });
        plain.add_maps(maps);
        let mut out = Vec::new();
        plain.resolve(0, 0, data, data + 8, &mut out);
        let o = plain.object(out[0].0);
        assert_eq!(o.kind, Kind::Section);
        assert!(o.name.ends_with(" .data"), "{o:?}");
    }

    #[test]
    fn a_rebuilt_file_is_not_used_and_the_reader_is_told() {
        let mut maps = own_maps();
        let Some(m) = maps.maps.iter_mut().find(|m| m.build_id.is_some()) else {
            return;
        };
        m.build_id = Some("00112233".into());
        let (start, path) = (m.start, m.path.clone());
        let mut n = Namer::new(NamerOptions::default());
        n.add_maps(maps);
        let mut out = Vec::new();
        n.resolve(0, 0, start, start + 4096, &mut out);
        let o = n.object(out[0].0);
        assert_eq!((o.kind, o.file.as_str()), (Kind::File, path.as_str()));
        assert_eq!(n.notes().len(), 1);
        assert!(n.notes()[0].contains("00112233"), "{:?}", n.notes());
    }

    #[test]
    fn anonymous_memory_files_and_simulated_objects_are_named_by_their_mapping() {
        let m = |start: u64, end: u64, path: &str, inode: u64| MapInfo {
            start,
            end,
            perms: "rw-p".into(),
            inode,
            path: path.into(),
            ..MapInfo::default()
        };
        let mut n = Namer::new(NamerOptions::default());
        n.add_maps(MapsEvent {
            at_us: 0,
            idx: 3,
            maps: vec![
                m(0x1000, 0x3000, "[heap]", 0),
                m(0x3000, 0x5000, "", 0),
                m(0x8000, 0x9000, "/data/table.db", 77),
                m(0x9000, 0xa000, "obj0", 0),
            ],
        });
        // Later the heap grows: a region is named by the mappings of its
        // time.
        n.add_maps(MapsEvent {
            at_us: 5_000_000,
            idx: 3,
            maps: vec![m(0x1000, 0x8000, "[heap]", 0)],
        });
        let names = |n: &mut Namer, at: u64, s: u64, e: u64| {
            let mut out = Vec::new();
            n.resolve(3, at, s, e, &mut out);
            out.iter()
                .map(|(o, b)| (n.object(*o).name.clone(), *b))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&mut n, 0, 0x0, 0xa000),
            [
                ("[unmapped]".to_string(), 0x1000),
                ("[heap]".into(), 0x2000),
                ("[anon 0x3000]".into(), 0x2000),
                ("[unmapped]".into(), 0x3000),
                ("table.db".into(), 0x1000),
                ("obj0".into(), 0x1000),
            ]
        );
        assert_eq!(
            names(&mut n, 6_000_000, 0x2000, 0x6000),
            [("[heap]".to_string(), 0x4000)]
        );
        assert_eq!(n.main_object(3, 0, 0x1000, 0x4000).unwrap(), "[heap] +1");
        assert_eq!(n.main_object(9, 0, 0x1000, 0x4000), None);
    }
}
