//! A job's record directory, opened once: record files are created in it
//! with `O_CREAT | O_EXCL | O_NOFOLLOW` (a name planted there, a symlink
//! above all, is never opened, followed or truncated), and pruning removes
//! only regular files whose names are exactly the job's
//! (`JOB-SESSION-UNIXTIME[.N].udr`, which no other job name can produce),
//! through the same directory handle.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Names tried for one new record before giving up (`NAME.udr`,
/// `NAME.1.udr`, ...).
const MAX_TRIES: u32 = 100;

/// An open record directory.
#[derive(Debug)]
pub struct RecordDir {
    dir: OwnedFd,
    path: PathBuf,
}

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

impl RecordDir {
    /// Opens `path`, creating its last component (mode 0700) when it is
    /// missing; never its parents, and never through a symlink as the
    /// last component.
    pub fn open(path: &Path) -> Result<RecordDir, String> {
        let cpath = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{}: the path holds a NUL byte", path.display()))?;
        // SAFETY: a valid C string; mkdir has no memory effects.
        if unsafe { libc::mkdir(cpath.as_ptr(), 0o700) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                return Err(format!(
                    "cannot create {}: its parent directory does not exist (udamon creates the \
                     record directory itself, never its parents)",
                    path.display()
                ));
            }
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(format!("cannot create {}: {e}", path.display()));
            }
        }
        // SAFETY: a valid C string; the descriptor returned is owned below.
        let fd = unsafe {
            libc::open(
                cpath.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP | libc::ENOTDIR) if link => format!(
                    "{} is a symbolic link: give the directory it points to, not the link",
                    path.display()
                ),
                Some(libc::ENOTDIR) => format!("{} is not a directory", path.display()),
                _ => format!("cannot open {}: {e}", path.display()),
            });
        }
        Ok(RecordDir {
            // SAFETY: fd is a fresh descriptor nobody else owns.
            dir: unsafe { OwnedFd::from_raw_fd(fd) },
            path: path.to_path_buf(),
        })
    }

    /// Creates a new record file `JOB-ID-UNIXTIME.udr` (or `.N.udr` when
    /// that name is taken), mode 0600, never opening an existing name.
    pub fn create(&self, job: &str, id: u64, unix_s: u64) -> Result<(PathBuf, File), String> {
        for n in 0..MAX_TRIES {
            let name = if n == 0 {
                format!("{job}-{id}-{unix_s}.udr")
            } else {
                format!("{job}-{id}-{unix_s}.{n}.udr")
            };
            let c = c_name(&name).map_err(|e| format!("{name}: {e}"))?;
            // SAFETY: a valid C string and an open directory descriptor.
            let fd = unsafe {
                libc::openat(
                    self.dir.as_raw_fd(),
                    c.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o600 as libc::c_uint,
                )
            };
            if fd >= 0 {
                // SAFETY: fd is a fresh descriptor nobody else owns.
                return Ok((self.path.join(&name), unsafe { File::from_raw_fd(fd) }));
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(format!(
                    "cannot create {}: {e}",
                    self.path.join(&name).display()
                ));
            }
        }
        Err(format!(
            "cannot create a record in {}: {MAX_TRIES} names for {job}-{id}-{unix_s} are taken \
             (something else writes files by the job's names there)",
            self.path.display()
        ))
    }

    /// The names in the directory (read through the open handle where
    /// /proc is mounted, else through the path).
    fn names(&self) -> Vec<String> {
        let via_fd = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()));
        let list = std::fs::read_dir(&via_fd).or_else(|_| std::fs::read_dir(&self.path));
        list.into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect()
    }

    /// (modification time, size) of a regular file named `name`; None for
    /// anything else (a symlink, a directory, a FIFO) or a vanished name.
    fn regular(&self, name: &str) -> Option<(i64, i64, u64)> {
        let c = c_name(name).ok()?;
        // SAFETY: an all-zero stat is a valid value to be filled.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid directory descriptor, C string and stat buffer.
        let r = unsafe {
            libc::fstatat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        (r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG).then_some((
            st.st_mtime,
            st.st_mtime_nsec,
            st.st_size as u64,
        ))
    }

    /// Removes the job's oldest record files until they fit `max_total`,
    /// never `keep` (the one being written); returns the removed paths.
    pub fn prune(&self, job: &str, max_total: u64, keep: &Path) -> Vec<PathBuf> {
        let keep = keep.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let mut files: Vec<(i64, i64, u64, String)> = self
            .names()
            .into_iter()
            .filter(|n| is_record_of(n, job))
            .filter_map(|n| {
                let (s, ns, len) = self.regular(&n)?;
                Some((s, ns, len, n))
            })
            .collect();
        files.sort();
        let mut total: u64 = files.iter().map(|f| f.2).sum();
        let mut removed = Vec::new();
        for (_, _, len, name) in files {
            if total <= max_total {
                break;
            }
            if name == keep {
                continue;
            }
            let Ok(c) = c_name(&name) else { continue };
            // SAFETY: a valid directory descriptor and C string.
            if unsafe { libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), 0) } == 0 {
                total -= len;
                removed.push(self.path.join(&name));
            }
        }
        removed
    }
}

/// Whether `name` is one of `job`'s record files: `JOB-ID-UNIXTIME.udr` or
/// `JOB-ID-UNIXTIME.N.udr`, digits only in ID, UNIXTIME and N. Job names
/// hold no blank or `/`, and a name of another job (`JOB-x`, `JOB-1`) has
/// a further part after `JOB-` that makes the pattern fail.
pub fn is_record_of(name: &str, job: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(job)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.strip_suffix(".udr"))
    else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some((id, rest)) = rest.split_once('-') else {
        return false;
    };
    let (time, n) = match rest.split_once('.') {
        Some((t, n)) => (t, Some(n)),
        None => (rest, None),
    };
    digits(id) && digits(time) && n.is_none_or(digits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    #[test]
    fn the_name_pattern_is_exact() {
        assert!(is_record_of("a-1-1700000000.udr", "a"));
        assert!(is_record_of("a-1-1700000000.3.udr", "a"));
        // Another job's files, whatever its name.
        assert!(!is_record_of("a-b-1-1700000000.udr", "a"));
        assert!(!is_record_of("a-1-2-1700000000.udr", "a"));
        assert!(!is_record_of("a-1-1700000000.2.udr", "a-1"));
        assert!(is_record_of("a-1-2-1700000000.udr", "a-1"));
        // Anything else a person keeps there.
        assert!(!is_record_of("a-1-1700000000.udr.old", "a"));
        assert!(!is_record_of("a-1-17x.udr", "a"));
        assert!(!is_record_of("a-.udr", "a"));
        assert!(!is_record_of("a-1-.udr", "a"));
        assert!(!is_record_of("a-1-5.x.udr", "a"));
        assert!(!is_record_of("ab-1-5.udr", "a"));
    }

    #[test]
    fn a_planted_symlink_is_never_followed_and_another_jobs_files_stay() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("rec");
        let outside = d.path().join("outside");
        std::fs::write(&outside, "precious").unwrap();
        std::fs::create_dir(&dir).unwrap();
        symlink(&outside, dir.join("a-1-100.udr")).unwrap();
        symlink(&outside, dir.join("a-1-100.1.udr")).unwrap();
        let r = RecordDir::open(&dir).unwrap();
        let (p, f) = r.create("a", 1, 100).unwrap();
        assert_eq!(p, dir.join("a-1-100.2.udr"));
        assert_eq!(f.metadata().unwrap().mode() & 0o777, 0o600);
        drop(f);
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
        // Job a-b's record and a's own older ones.
        std::fs::write(dir.join("a-b-1-50.udr"), vec![0; 4096]).unwrap();
        std::fs::write(dir.join("a-1-50.udr"), vec![0; 4096]).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let removed = r.prune("a", 0, &p);
        assert_eq!(removed, vec![dir.join("a-1-50.udr")]);
        assert!(dir.join("a-b-1-50.udr").exists());
        assert!(dir.join("notes.txt").exists());
        // The symlinks matched the pattern but are not regular files.
        assert!(std::fs::symlink_metadata(dir.join("a-1-100.udr")).is_ok());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
    }

    #[test]
    fn the_directory_itself_is_checked() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        symlink(&real, d.path().join("link")).unwrap();
        let e = RecordDir::open(&d.path().join("link")).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let e = RecordDir::open(&d.path().join("missing/rec")).unwrap_err();
        assert!(e.contains("never its parents"), "{e}");
        assert!(!d.path().join("missing").exists());
        let made = d.path().join("new");
        RecordDir::open(&made).unwrap();
        assert_eq!(
            std::fs::metadata(&made).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }
}
