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

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub mod reader;

pub use reader::{parse, read, Allocation, Counters, Free, Maps, SideFile};

/// The preload library (an ELF shared object for the build's target),
/// compiled from src/preload.c by build.rs.
pub const LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libudamon_preload.so"));

/// The default of [`Options::threshold`]: 64 KiB.
pub const DEFAULT_THRESHOLD: u64 = 64 << 10;
/// The default of [`Options::sample_interval`]: 512 KiB, tcmalloc's.
pub const DEFAULT_SAMPLE_INTERVAL: u64 = 512 << 10;

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
}

/// What the library samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Allocations of at least this many bytes are all recorded.
    pub threshold: u64,
    /// Smaller allocations are sampled once per this many bytes on average
    /// (0: every one).
    pub sample_interval: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: DEFAULT_THRESHOLD,
            sample_interval: DEFAULT_SAMPLE_INTERVAL,
        }
    }
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
/// command may change directory); `UDAMON_ALLOC_THRESHOLD` and
/// `UDAMON_ALLOC_SAMPLE`, in bytes.
pub fn env(lib: &Path, out: &Path, opts: &Options) -> Vec<(OsString, OsString)> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let mut preload = OsString::from(absolute(lib));
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    vec![
        ("LD_PRELOAD".into(), preload),
        ("UDAMON_ALLOC_OUT".into(), absolute(out).into()),
        (
            "UDAMON_ALLOC_THRESHOLD".into(),
            opts.threshold.to_string().into(),
        ),
        (
            "UDAMON_ALLOC_SAMPLE".into(),
            opts.sample_interval.to_string().into(),
        ),
    ]
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

    #[test]
    fn env_names_the_variables() {
        let vars = env(
            Path::new("/x/lib.so"),
            Path::new("/y/out"),
            &Options {
                threshold: 1,
                sample_interval: 2,
            },
        );
        let get = |k: &str| {
            vars.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert!(get("LD_PRELOAD").to_string_lossy().starts_with("/x/lib.so"));
        assert_eq!(get("UDAMON_ALLOC_OUT"), "/y/out");
        assert_eq!(get("UDAMON_ALLOC_THRESHOLD"), "1");
        assert_eq!(get("UDAMON_ALLOC_SAMPLE"), "2");
    }
}
