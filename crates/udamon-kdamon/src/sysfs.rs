//! File access under the sysfs root, behind a trait so tests can put a fake
//! "kernel" (which creates numbered directories after `nr_*` writes) between
//! the driver and a temporary tree.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;

/// The file operations the driver uses. Paths are absolute.
pub trait Sysfs {
    fn read(&mut self, path: &Path) -> io::Result<String>;
    /// Writes `value` to an existing file; never creates one.
    fn write(&mut self, path: &Path, value: &str) -> io::Result<()>;
    fn exists(&mut self, path: &Path) -> bool;
    /// Names of the entries of a directory.
    fn list(&mut self, dir: &Path) -> io::Result<Vec<String>>;
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct FsIo;

impl Sysfs for FsIo {
    fn read(&mut self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write(&mut self, path: &Path, value: &str) -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
        f.write_all(value.as_bytes())
    }

    fn exists(&mut self, path: &Path) -> bool {
        path.exists()
    }

    fn list(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    }
}
