//! Allocation-site sampling for `udamon record --alloc-sites -- CMD`.
//!
//! The command runs with [`LIBRARY`] in `LD_PRELOAD` (written out by
//! [`install`], its variables from [`env`]). The library (src/preload.c)
//! interposes glibc's malloc family and writes, per process, a side file of
//! sampled allocations with their call stacks, the frees of those, and the
//! text of `/proc/self/maps`; [`read`] parses it. The format and what each
//! number means are documented in [`reader`].
//!
//! What is sampled: every allocation of at least [`Options::threshold`]
//! bytes, and smaller ones by a Poisson process over the bytes allocated with
//! mean interval [`Options::sample_interval`], as tcmalloc's heap profiler
//! does; each sample carries the bytes it stands for.
//!
//! # Placement hints
//!
//! The library also applies placement hints, with or without sampling: a
//! file that [`write_hints`] writes and [`Options::hints`] names. A hint
//! locks (`mlock2(MLOCK_ONFAULT)`) or binds (`mbind(MPOL_PREFERRED)`) either
//! a global of a module, when the module is loaded, or the whole pages of
//! every allocation of at least [`Options::hint_min`] bytes whose call stack
//! (its first 16 frames) passes through a return address (an allocation
//! site). What the hints did is counted in the side file
//! ([`reader::HintCounters`]) and, with [`Options::hints_verbose`], in one
//! line on stderr at exit.
//!
//! The file is text, one hint a line, fields separated by single spaces;
//! lines that start with `#` and blank lines are ignored; the first other
//! line is `udamon-hints 1`:
//!
//! ```text
//! udamon-hints 1
//! site <build-id hex | -> <file basename> <vaddr hex> <action>
//! symbol <build-id hex | -> <file basename> <vaddr hex> <size decimal> <action>
//! ```
//!
//! - The module: the loaded module whose GNU build-id is the one given, or,
//!   given `-`, whose file basename is `<file basename>` (for the program,
//!   the basename of `/proc/self/exe`).
//! - `<vaddr>`: an ELF virtual address of the module (hex, `0x` optional).
//!   For a site, the return address of a call in the stack minus the
//!   module's load bias (`l_addr`; 0 for a non-PIE executable), as
//!   `_Unwind_GetIP` gives it (not minus 1). For a symbol, its `st_value`,
//!   with `<size>` bytes (1 to 2^48): the pages that cover
//!   `[l_addr + vaddr, + size)` are acted on, once per load of the module.
//! - `<action>`: `mlock`, or `node=N` (N from 0 to 1023).
//!
//! A site hint acts on the pages wholly inside an allocation, right after the
//! real allocator returns it, for the innermost frame that matches a hint.
//! The same site (same module spelling, same vaddr) on two lines is one site
//! with both actions. At most [`MAX_HINTS`] hints are read (the first ones;
//! the library says so on stderr); a file that cannot be read or has a
//! malformed line is refused as a whole, with one line on stderr naming the
//! file and the line, and the program runs without hints.
//!
//! Modules that the program loads with `dlopen` are noticed at its next
//! allocation of at least [`Options::hint_min`] bytes (`dlopen` is not
//! interposed). Locks and bindings are the kernel's usual ones: unmapped
//! memory loses them, and memory freed back to the heap keeps them (a later
//! allocation in those pages stays locked or bound). A fork child does not
//! inherit memory locks: it applies the symbol hints again, but not the site
//! hints of blocks its parent allocated.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub mod reader;

pub use reader::{parse, read, Allocation, Counters, Free, HintCounters, Maps, SideFile};

/// The preload library (an ELF shared object for the build's target),
/// compiled from src/preload.c by build.rs.
pub const LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libudamon_preload.so"));

/// The default of [`Options::threshold`]: 64 KiB.
pub const DEFAULT_THRESHOLD: u64 = 64 << 10;
/// The default of [`Options::sample_interval`]: 512 KiB, tcmalloc's.
pub const DEFAULT_SAMPLE_INTERVAL: u64 = 512 << 10;
/// The default of [`Options::hint_min`]: 4 KiB.
pub const DEFAULT_HINT_MIN: u64 = 4096;
/// The most hints the library reads from a file (the first ones).
pub const MAX_HINTS: usize = 4096;
/// The highest NUMA node a hint can name.
pub const MAX_NODE: u32 = 1023;

/// The errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// A side file that this reader cannot read: not one, another version,
    /// or damaged (a record no writer makes, at `offset`).
    #[error("{}: at offset {offset}: {what}", path.display())]
    Format {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("cannot install the preload library as {}: {what}", path.display())]
    Install { path: PathBuf, what: String },
    /// A hint that the hints file cannot say (the `index`th given).
    #[error("hint {index}: {what}")]
    Hint { index: usize, what: String },
}

/// What the library samples, and the hints it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Allocations of at least this many bytes are all recorded.
    pub threshold: u64,
    /// Smaller allocations are sampled once per this many bytes on average
    /// (0: every one).
    pub sample_interval: u64,
    /// A hints file (see [`write_hints`]) for the library to apply, with or
    /// without sampling; `None`: no hints.
    pub hints: Option<PathBuf>,
    /// Allocations of at least this many bytes are checked against the
    /// site hints (when there are hints).
    pub hint_min: u64,
    /// The library says what the hints did in one line on stderr at exit.
    pub hints_verbose: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: DEFAULT_THRESHOLD,
            sample_interval: DEFAULT_SAMPLE_INTERVAL,
            hints: None,
            hint_min: DEFAULT_HINT_MIN,
            hints_verbose: false,
        }
    }
}

/// One line of a hints file (the grammar is in the crate doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintLine {
    /// The module's GNU build-id in hex (even length, at most 128 digits);
    /// `None`: the module is found by `file` alone.
    pub build_id: Option<String>,
    /// The module's file basename (no `/`, no white space, 1 to 255 bytes).
    pub file: String,
    pub target: HintTarget,
    pub action: HintAction,
}

/// What a hint is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintTarget {
    /// Allocations whose stack has a frame with this return address (an
    /// ELF virtual address of the module: the address minus the load bias).
    Site { vaddr: u64 },
    /// A global: `size` bytes at this ELF virtual address of the module.
    Symbol { vaddr: u64, size: u64 },
}

/// What a hint does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintAction {
    /// `mlock2(MLOCK_ONFAULT)`: the pages stay in memory once touched.
    Mlock,
    /// `mbind(MPOL_PREFERRED)` to this NUMA node (at most [`MAX_NODE`]).
    Node(u32),
}

impl HintLine {
    /// The line as the library reads it (no newline), or what is wrong.
    pub fn to_line(&self) -> Result<String, String> {
        let id = match &self.build_id {
            None => "-".to_owned(),
            Some(id) => {
                if id.is_empty()
                    || id.len() % 2 != 0
                    || id.len() > 128
                    || !id.bytes().all(|b| b.is_ascii_hexdigit())
                {
                    return Err(format!(
                        "build-id {id:?} is not an even number (2 to 128) of hex digits"
                    ));
                }
                id.to_ascii_lowercase()
            }
        };
        let f = &self.file;
        if f.is_empty()
            || f.len() > 255
            || f == "-"
            || f.bytes()
                .any(|b| b == b'/' || b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(format!(
                "file {f:?} is not a basename of 1 to 255 bytes without '/' or white space"
            ));
        }
        let action = match self.action {
            HintAction::Mlock => "mlock".to_owned(),
            HintAction::Node(n) if n <= MAX_NODE => format!("node={n}"),
            HintAction::Node(n) => return Err(format!("node {n} is above {MAX_NODE}")),
        };
        Ok(match self.target {
            HintTarget::Site { vaddr } => format!("site {id} {f} {vaddr:x} {action}"),
            HintTarget::Symbol { vaddr, size } => {
                if size == 0 || size > 1 << 48 || vaddr.checked_add(size).is_none() {
                    return Err(format!("symbol size {size} at {vaddr:#x}"));
                }
                format!("symbol {id} {f} {vaddr:x} {size} {action}")
            }
        })
    }
}

/// Writes `hints` as a hints file at `path` (replacing it), in their order:
/// the library applies the first [`MAX_HINTS`] of them. A hint the file
/// cannot say is refused before anything is written.
pub fn write_hints(path: &Path, hints: &[HintLine]) -> Result<(), Error> {
    let mut text = String::from("udamon-hints 1\n");
    for (index, hint) in hints.iter().enumerate() {
        let line = hint.to_line().map_err(|what| Error::Hint { index, what })?;
        text.push_str(&line);
        text.push('\n');
    }
    fs::write(path, text).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// Writes [`LIBRARY`] into `dir` as `libudamon_preload-<hash>.so` (0644) and
/// returns its absolute path. A file of that name with the same content is
/// reused; anything else there is replaced atomically (a fresh file is
/// written under a private name, then renamed), so a concurrent run or a
/// running program never sees a partial library.
pub fn install(dir: &Path) -> Result<PathBuf, Error> {
    let name = format!("libudamon_preload-{:016x}.so", fnv1a(LIBRARY));
    let path = std::path::absolute(dir.join(&name)).map_err(|source| Error::Io {
        path: dir.to_owned(),
        source,
    })?;
    // ld.so splits LD_PRELOAD at colons and white space.
    if path
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|b| *b == b':' || b.is_ascii_whitespace())
    {
        return Err(Error::Install {
            path,
            what: "LD_PRELOAD cannot name a path with ':' or white space".into(),
        });
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    if same_content(&path).map_err(io(&path))? {
        return Ok(path);
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = path.with_file_name(format!(".{name}.{}.{nanos}", std::process::id()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        file.write_all(LIBRARY)?;
        // The umask may have narrowed the mode; the command may run as
        // another user.
        file.set_permissions(fs::Permissions::from_mode(0o644))?;
        fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(io(&path))?;
    Ok(path)
}

/// Whether `path` is a regular file holding exactly [`LIBRARY`] (a symlink
/// is not).
fn same_content(path: &Path) -> io::Result<bool> {
    let file = match File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() != LIBRARY.len() as u64 {
        return Ok(false);
    }
    let mut content = Vec::with_capacity(LIBRARY.len());
    file.take(LIBRARY.len() as u64 + 1)
        .read_to_end(&mut content)?;
    Ok(content == LIBRARY)
}

/// 64-bit FNV-1a: names the library by its content.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The variables to set on the command: `LD_PRELOAD` with `lib` (from
/// [`install`]) first, before any preload already in our environment, so
/// that the library wraps whatever allocator those bring (its
/// `dlsym(RTLD_NEXT)` finds theirs; placed after them, theirs would shadow
/// it); `UDAMON_ALLOC_OUT`, the side files' path prefix (made absolute: the
/// command may change directory), empty when `out` is `None` (no sampling);
/// `UDAMON_ALLOC_THRESHOLD` and `UDAMON_ALLOC_SAMPLE`, in bytes;
/// `UDAMON_HINTS`, the absolute path of [`Options::hints`] (empty without
/// hints), and with hints `UDAMON_HINT_MIN` and `UDAMON_HINTS_VERBOSE`. An
/// empty variable is the library's "off", so none is inherited from our own
/// environment.
pub fn env(lib: &Path, out: Option<&Path>, opts: &Options) -> Vec<(OsString, OsString)> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let mut preload = OsString::from(absolute(lib));
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let mut vars = vec![
        ("LD_PRELOAD".into(), preload),
        (
            "UDAMON_ALLOC_OUT".into(),
            out.map(|o| absolute(o).into()).unwrap_or_default(),
        ),
        (
            "UDAMON_ALLOC_THRESHOLD".into(),
            opts.threshold.to_string().into(),
        ),
        (
            "UDAMON_ALLOC_SAMPLE".into(),
            opts.sample_interval.to_string().into(),
        ),
        (
            "UDAMON_HINTS".into(),
            opts.hints
                .as_deref()
                .map(|h| absolute(h).into())
                .unwrap_or_default(),
        ),
    ];
    if opts.hints.is_some() {
        vars.push(("UDAMON_HINT_MIN".into(), opts.hint_min.to_string().into()));
        vars.push((
            "UDAMON_HINTS_VERBOSE".into(),
            if opts.hints_verbose { "1" } else { "" }.into(),
        ));
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_is_an_elf_shared_object() {
        assert!(LIBRARY.len() > 64);
        assert_eq!(&LIBRARY[..4], b"\x7fELF");
        // e_type (offset 16, little-endian on our targets): ET_DYN.
        assert_eq!(u16::from_le_bytes([LIBRARY[16], LIBRARY[17]]), 3);
    }

    #[test]
    fn install_writes_once_and_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let a = install(dir.path()).unwrap();
        assert!(a.is_absolute());
        let meta = fs::metadata(&a).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o644);
        assert_eq!(fs::read(&a).unwrap(), LIBRARY);
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        let b = install(dir.path()).unwrap();
        assert_eq!(a, b);
        let again = fs::metadata(&b).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&again), inode);
        // Damaged content is replaced; nothing else is left in the directory.
        fs::write(&a, b"not a library").unwrap();
        install(dir.path()).unwrap();
        assert_eq!(fs::read(&a).unwrap(), LIBRARY);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn install_refuses_a_path_ld_so_would_split() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("a:b");
        fs::create_dir(&bad).unwrap();
        let err = install(&bad).unwrap_err();
        assert!(err.to_string().contains("':'"), "{err}");
    }

    fn get(vars: &[(OsString, OsString)], k: &str) -> Option<OsString> {
        vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn env_names_the_variables() {
        let vars = env(
            Path::new("/x/lib.so"),
            Some(Path::new("/y/out")),
            &Options {
                threshold: 1,
                sample_interval: 2,
                ..Options::default()
            },
        );
        assert!(get(&vars, "UDAMON_HINT_MIN").is_none());
        let get = |k| get(&vars, k).unwrap();
        assert!(get("LD_PRELOAD").to_string_lossy().starts_with("/x/lib.so"));
        assert_eq!(get("UDAMON_ALLOC_OUT"), "/y/out");
        assert_eq!(get("UDAMON_ALLOC_THRESHOLD"), "1");
        assert_eq!(get("UDAMON_ALLOC_SAMPLE"), "2");
        assert_eq!(get("UDAMON_HINTS"), "");
    }

    #[test]
    fn env_with_hints_only() {
        let vars = env(
            Path::new("/x/lib.so"),
            None,
            &Options {
                hints: Some("/z/hints".into()),
                hint_min: 8192,
                hints_verbose: true,
                ..Options::default()
            },
        );
        let get = |k| get(&vars, k).unwrap();
        assert_eq!(get("UDAMON_ALLOC_OUT"), "");
        assert_eq!(get("UDAMON_HINTS"), "/z/hints");
        assert_eq!(get("UDAMON_HINT_MIN"), "8192");
        assert_eq!(get("UDAMON_HINTS_VERBOSE"), "1");
    }

    #[test]
    fn hints_are_written_as_the_library_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hints");
        let hints = [
            HintLine {
                build_id: None,
                file: "prog".into(),
                target: HintTarget::Site { vaddr: 0x12e6 },
                action: HintAction::Mlock,
            },
            HintLine {
                build_id: Some("6FC1BEE9".into()),
                file: "libfoo.so.1".into(),
                target: HintTarget::Symbol {
                    vaddr: 0x40c0,
                    size: 3 << 20,
                },
                action: HintAction::Node(1),
            },
        ];
        write_hints(&path, &hints).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "udamon-hints 1\n\
             site - prog 12e6 mlock\n\
             symbol 6fc1bee9 libfoo.so.1 40c0 3145728 node=1\n"
        );
        let bad = |h: HintLine, what: &str| {
            let err = write_hints(&path, &[hints[0].clone(), h]).unwrap_err();
            assert!(
                matches!(&err, Error::Hint { index: 1, what: w } if w.contains(what)),
                "{err}"
            );
        };
        let base = hints[0].clone();
        bad(
            HintLine {
                build_id: Some("abc".into()),
                ..base.clone()
            },
            "build-id",
        );
        bad(
            HintLine {
                file: "a/b".into(),
                ..base.clone()
            },
            "basename",
        );
        bad(
            HintLine {
                file: "a b".into(),
                ..base.clone()
            },
            "basename",
        );
        bad(
            HintLine {
                action: HintAction::Node(1024),
                ..base.clone()
            },
            "node 1024",
        );
        bad(
            HintLine {
                target: HintTarget::Symbol { vaddr: 1, size: 0 },
                ..base
            },
            "size 0",
        );
        // Refused before anything is written.
        assert!(fs::read_to_string(&path).unwrap().contains("libfoo"));
    }
}
