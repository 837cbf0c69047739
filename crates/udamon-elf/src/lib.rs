//! ELF files as udamon needs them to name memory: a file's build-id (so a
//! record names the exact build it saw), its load segments (to turn an
//! address in a mapping into the file's own addresses), its sections and
//! its data symbols (globals, statics, TLS templates: objects with a size).
//!
//! Files are read through `object`'s `ReadCache`, so finding a build-id
//! reads the headers and notes only, not a 100 MiB library whole.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};

/// Why an ELF file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not an ELF file udamon can read: {reason}", path.display())]
    Parse { path: PathBuf, reason: String },
}

/// The first bytes of every ELF file.
const MAGIC: &[u8; 4] = b"\x7fELF";

/// Largest number of data symbols kept from one file (a hostile or huge
/// file cannot make a report allocate without bound).
pub const MAX_SYMBOLS: usize = 4_000_000;

/// A `PT_LOAD` segment: file bytes `offset..offset + filesz` appear at
/// `vaddr`, followed by zeroes up to `memsz` (`.bss`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
}

/// An allocated section (`.data`, `.bss`, `.rodata`, `.text`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub vaddr: u64,
    pub size: u64,
}

/// A data symbol: a global or static object with a size, or a TLS
/// template's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub vaddr: u64,
    pub size: u64,
    pub tls: bool,
}

/// What udamon knows of one ELF file.
#[derive(Clone, Debug, Default)]
pub struct ElfFile {
    /// The GNU build-id, in lowercase hex.
    pub build_id: Option<String>,
    pub segments: Vec<Segment>,
    /// Allocated sections, by address.
    pub sections: Vec<Section>,
    /// Data symbols, by address, each address once (the first name).
    pub symbols: Vec<Symbol>,
    /// The largest size in `symbols`.
    pub max_symbol_size: u64,
    /// Function symbols with a size, by address (for naming code where
    /// there is no debug information).
    pub functions: Vec<Symbol>,
    /// Whether `symbols` came from a separate debug file.
    pub debug_file: Option<PathBuf>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn open(path: &Path) -> Result<File, Error> {
    File::open(path).map_err(|source| Error::Open {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether the file starts with the ELF magic (a mapped font or database
/// file is not an error, just not ELF).
fn is_elf(file: &mut File) -> bool {
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic).is_ok() && &magic == MAGIC
}

/// The build-id of the ELF file at `path`: `Ok(None)` when the file is
/// not ELF or has no build-id note.
pub fn build_id(path: &Path) -> Result<Option<String>, Error> {
    let mut file = open(path)?;
    if !is_elf(&mut file) {
        return Ok(None);
    }
    let cache = ReadCache::new(file);
    let parsed = object::File::parse(&cache).map_err(|e| parse_error(path, e))?;
    let id = parsed.build_id().map_err(|e| parse_error(path, e))?;
    Ok(id.map(hex))
}

fn parse_error(path: &Path, e: object::Error) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Where Debian's `-dbgsym` packages (and most distributions) put the
/// separate debug file of a build: `/usr/lib/debug/.build-id/ab/cdef.debug`.
pub fn debug_file_path(debug_root: &Path, build_id: &str) -> Option<PathBuf> {
    if build_id.len() < 3 || !build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (dir, rest) = build_id.split_at(2);
    Some(
        debug_root
            .join(".build-id")
            .join(dir)
            .join(format!("{rest}.debug")),
    )
}

impl ElfFile {
    /// Reads the file at `path`: `Ok(None)` when it is not ELF. When
    /// `debug_root` is given and holds a debug file of the same build-id,
    /// the symbols come from it when it has more (a stripped binary keeps
    /// only its exported ones).
    pub fn load(path: &Path, debug_root: Option<&Path>) -> Result<Option<Self>, Error> {
        let mut file = open(path)?;
        if !is_elf(&mut file) {
            return Ok(None);
        }
        let cache = ReadCache::new(file);
        let parsed = object::File::parse(&cache).map_err(|e| parse_error(path, e))?;
        let mut out = ElfFile {
            build_id: parsed
                .build_id()
                .map_err(|e| parse_error(path, e))?
                .map(hex),
            ..Self::default()
        };
        for seg in parsed.segments() {
            let (offset, filesz) = seg.file_range();
            out.segments.push(Segment {
                offset,
                vaddr: seg.address(),
                filesz,
                memsz: seg.size(),
            });
        }
        for sec in parsed.sections() {
            let allocated = !matches!(
                sec.kind(),
                SectionKind::Metadata
                    | SectionKind::Debug
                    | SectionKind::DebugString
                    | SectionKind::Other
                    | SectionKind::Linker
                    | SectionKind::Note
                    | SectionKind::Unknown
            );
            if !allocated || sec.size() == 0 || sec.address() == 0 {
                continue;
            }
            let name = sec.name().unwrap_or("?").to_string();
            out.sections.push(Section {
                name,
                vaddr: sec.address(),
                size: sec.size(),
            });
        }
        out.sections.sort_by_key(|s| (s.vaddr, s.size));
        out.symbols = data_symbols(&parsed);
        out.functions = symbols_of(&parsed, |k| k == SymbolKind::Text);
        if let (Some(root), Some(id)) = (debug_root, out.build_id.as_deref()) {
            if let Some(debug) = debug_file_path(root, id).filter(|p| p.is_file()) {
                if let Ok(more) = debug_symbols(&debug, id) {
                    if more.len() > out.symbols.len() {
                        out.symbols = more;
                        out.debug_file = Some(debug);
                    }
                }
            }
        }
        out.max_symbol_size = out.symbols.iter().map(|s| s.size).max().unwrap_or(0);
        Ok(Some(out))
    }

    /// The file's own address of the byte at `file_offset`, through the
    /// load segment holding it.
    pub fn vaddr_of_offset(&self, file_offset: u64) -> Option<u64> {
        // A mapping's offset is page-aligned, and its segment may start
        // within that page: the segment whose page-rounded range holds it.
        // Two can (one ends in the page the next starts in, both mapped
        // from it): a mapping starting there maps the later one.
        self.segments
            .iter()
            .filter(|s| {
                let start = s.offset & !0xfff;
                start <= file_offset && file_offset < s.offset + s.filesz.max(1)
            })
            .max_by_key(|s| s.offset)
            .map(|s| {
                let start = s.offset & !0xfff;
                (s.vaddr - (s.offset - start)) + (file_offset - start)
            })
    }

    /// Whether the file's address `vaddr` lies in one of its load segments
    /// (its file part or the zeroes after it).
    pub fn in_segment(&self, vaddr: u64) -> bool {
        self.segments
            .iter()
            .any(|s| s.vaddr <= vaddr && vaddr < s.vaddr + s.memsz)
    }

    /// The function symbol whose bytes hold `vaddr` (by its size: a
    /// stripped file's nearest symbol before an address is often not its
    /// function, and is not guessed at).
    pub fn function_at(&self, vaddr: u64) -> Option<&Symbol> {
        let i = self.functions.partition_point(|s| s.vaddr <= vaddr);
        self.functions[..i]
            .iter()
            .rev()
            .take(8)
            .find(|s| s.vaddr <= vaddr && vaddr < s.vaddr + s.size)
    }

    /// The allocated section holding `vaddr`, the innermost if they nest.
    pub fn section_at(&self, vaddr: u64) -> Option<&Section> {
        self.sections
            .iter()
            .filter(|s| s.vaddr <= vaddr && vaddr < s.vaddr + s.size)
            .min_by_key(|s| s.size)
    }

    /// The data symbols overlapping `lo..hi` (file addresses), with the
    /// overlap in bytes.
    pub fn symbols_in(&self, lo: u64, hi: u64) -> impl Iterator<Item = (&Symbol, u64)> {
        // Symbols are sorted by address: none starting more than the
        // largest symbol's size before `lo` can reach it.
        let from = lo.saturating_sub(self.max_symbol_size);
        let first = self.symbols.partition_point(|s| s.vaddr < from);
        self.symbols[first..]
            .iter()
            .take_while(move |s| s.vaddr < hi)
            .filter_map(move |s| {
                let (a, b) = (s.vaddr.max(lo), (s.vaddr + s.size).min(hi));
                (a < b).then(|| (s, b - a))
            })
    }
}

/// Where a code address is: the function (demangled) and, with debug
/// information, its source file and line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeLocation {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

impl std::fmt::Display for CodeLocation {
    /// `function (file:line)`, `function`, or `file:line`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match (&self.file, self.line) {
            (Some(file), Some(line)) => Some(format!(
                "{}:{line}",
                file.rsplit('/').next().unwrap_or(file)
            )),
            (Some(file), None) => Some(file.rsplit('/').next().unwrap_or(file).to_string()),
            _ => None,
        };
        match (&self.function, place) {
            (Some(func), Some(p)) => write!(f, "{func} ({p})"),
            (Some(func), None) => f.write_str(func),
            (None, Some(p)) => f.write_str(&p),
            (None, None) => f.write_str("?"),
        }
    }
}

/// A file's code, for naming code addresses: DWARF line tables and inline
/// information where the file (or its debug file) has them, else its
/// symbol table.
pub struct CodeFile {
    loader: addr2line::Loader,
}

impl std::fmt::Debug for CodeFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CodeFile")
    }
}

impl CodeFile {
    pub fn open(path: &Path) -> Result<Self, Error> {
        let loader = addr2line::Loader::new(path).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(Self { loader })
    }

    /// The function and line of the file address `vaddr` from the debug
    /// information: the innermost (inlined) frame, as the source has it;
    /// nothing where there is none (see [`ElfFile::function_at`]).
    pub fn locate(&self, vaddr: u64) -> CodeLocation {
        let mut out = CodeLocation::default();
        if let Ok(mut frames) = self.loader.find_frames(vaddr) {
            if let Ok(Some(fr)) = frames.next() {
                out.function = fr
                    .function
                    .as_ref()
                    .and_then(|n| n.demangle().ok().map(|c| c.into_owned()));
                if let Some(loc) = fr.location {
                    out.file = loc.file.map(str::to_string);
                    out.line = loc.line;
                }
            }
        }
        out
    }
}

fn debug_symbols(path: &Path, build_id: &str) -> Result<Vec<Symbol>, Error> {
    let mut file = open(path)?;
    if !is_elf(&mut file) {
        return Ok(Vec::new());
    }
    let cache = ReadCache::new(file);
    let parsed = object::File::parse(&cache).map_err(|e| parse_error(path, e))?;
    // A debug file of another build would name the wrong bytes.
    let id = parsed.build_id().map_err(|e| parse_error(path, e))?;
    if id.map(hex).as_deref() != Some(build_id) {
        return Ok(Vec::new());
    }
    Ok(data_symbols(&parsed))
}

/// Defined data and TLS symbols with a size, from the static symbol table
/// and the dynamic one, sorted by address, one per address.
fn data_symbols<'a, R: object::ReadRef<'a>>(file: &object::File<'a, R>) -> Vec<Symbol> {
    symbols_of(file, |k| k == SymbolKind::Data || k == SymbolKind::Tls)
}

/// Defined symbols of the kinds `keep` takes, with a size and a name, from
/// both symbol tables, sorted by address, one per address (demangled where
/// they are mangled).
fn symbols_of<'a, R: object::ReadRef<'a>>(
    file: &object::File<'a, R>,
    keep: impl Fn(SymbolKind) -> bool,
) -> Vec<Symbol> {
    let mut out = Vec::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if out.len() >= MAX_SYMBOLS {
            break;
        }
        if !keep(sym.kind()) || !sym.is_definition() || sym.size() == 0 {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() {
            continue;
        }
        out.push(Symbol {
            name: addr2line::demangle_auto(name.into(), None).into_owned(),
            vaddr: sym.address(),
            size: sym.size(),
            tls: sym.kind() == SymbolKind::Tls,
        });
    }
    out.sort_by(|a, b| (a.vaddr, &a.name).cmp(&(b.vaddr, &b.name)));
    out.dedup_by_key(|s| s.vaddr);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_exe() -> PathBuf {
        std::env::current_exe().unwrap()
    }

    /// The test binary's own file address of `addr`, through the mapping
    /// of /proc/self/maps that holds it.
    fn own_vaddr(f: &ElfFile, addr: u64) -> u64 {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = own_exe();
        let (start, offset) = maps
            .lines()
            .filter(|l| l.ends_with(exe.to_str().unwrap()))
            .find_map(|l| {
                let mut w = l.split_whitespace();
                let (s, e) = w.next()?.split_once('-')?;
                let (s, e) = (
                    u64::from_str_radix(s, 16).ok()?,
                    u64::from_str_radix(e, 16).ok()?,
                );
                let off = u64::from_str_radix(w.nth(1)?, 16).ok()?;
                (s <= addr && addr < e).then_some((s, off))
            })
            .expect("the address lies in a mapping of the test binary");
        f.vaddr_of_offset(addr - start + offset).unwrap()
    }

    #[test]
    fn a_file_that_is_not_elf_has_no_build_id_and_loads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("font.ttf");
        std::fs::write(&p, b"not an elf file at all").unwrap();
        assert_eq!(build_id(&p).unwrap(), None);
        assert!(ElfFile::load(&p, None).unwrap().is_none());
        assert!(matches!(
            build_id(&dir.path().join("missing")),
            Err(Error::Open { .. })
        ));
    }

    #[test]
    fn a_truncated_elf_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("broken.so");
        let bytes = std::fs::read(own_exe()).unwrap();
        std::fs::write(&p, &bytes[..100]).unwrap();
        let e = ElfFile::load(&p, None).unwrap_err().to_string();
        assert!(e.contains("broken.so"), "{e}");
    }

    #[test]
    fn the_test_binary_has_load_segments_sections_and_its_own_statics() {
        let f = ElfFile::load(&own_exe(), None).unwrap().unwrap();
        assert!(!f.segments.is_empty());
        assert!(f.sections.iter().any(|s| s.name == ".text"));
        // Rust test binaries are linked with a build-id on Debian's
        // toolchain, but not everywhere; when there is one, build_id()
        // reads the same.
        assert_eq!(build_id(&own_exe()).unwrap(), f.build_id);
        // Symbols are sorted and one per address.
        assert!(f.symbols.windows(2).all(|w| w[0].vaddr < w[1].vaddr));
        // The address of a static of this very binary, back to its file
        // address through /proc/self/maps, is named by its symbol.
        static MARKER: [u64; 64] = [7; 64];
        let addr = std::hint::black_box(&MARKER) as *const _ as u64;
        let v = own_vaddr(&f, addr);
        assert!(f.in_segment(v));
        let names: Vec<&str> = f.symbols_in(v, v + 8).map(|(s, _)| &*s.name).collect();
        assert!(
            names.iter().any(|n| n.contains("MARKER")),
            "{names:?} at {v:#x}"
        );
        assert_eq!(f.section_at(v).map(|s| &*s.name), Some(".rodata"));
    }

    #[inline(never)]
    fn a_named_function() -> usize {
        std::hint::black_box(42)
    }

    #[test]
    fn a_code_address_is_named_by_its_function_and_source_line() {
        let exe = own_exe();
        let code = CodeFile::open(&exe).unwrap();
        let f = ElfFile::load(&exe, None).unwrap().unwrap();
        let addr = a_named_function as *const () as u64;
        let v = own_vaddr(&f, addr);
        let loc = code.locate(v + 1);
        let func = loc.function.clone().unwrap_or_default();
        assert!(func.contains("a_named_function"), "{loc:?}");
        assert!(loc.to_string().starts_with(&func), "{loc}");
        if let Some(file) = &loc.file {
            assert!(file.ends_with("lib.rs"), "{loc:?}");
            assert!(loc.to_string().contains("lib.rs:"), "{loc}");
        }
        assert_eq!(CodeLocation::default().to_string(), "?");
    }

    #[test]
    fn debug_files_are_found_by_build_id_and_only_hex_ids_are_looked_up() {
        let root = Path::new("/usr/lib/debug");
        assert_eq!(
            debug_file_path(root, "ab12cd").unwrap(),
            Path::new("/usr/lib/debug/.build-id/ab/12cd.debug")
        );
        assert_eq!(debug_file_path(root, "../../etc/passwd"), None);
        assert_eq!(debug_file_path(root, "ab"), None);
    }
}
