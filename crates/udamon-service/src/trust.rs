//! Which files a root service may act on, as sshd's StrictModes decides:
//! a config, scheme file or workload spec that another user could have
//! written (owned by another user, or writable by group or others, itself
//! or through a directory above it) is refused, since whoever writes it
//! chooses what the root service reads, writes and removes.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Whether this process runs as root (the check applies only then).
pub fn running_as_root() -> bool {
    // SAFETY: geteuid cannot fail and has no memory effects.
    unsafe { libc::geteuid() == 0 }
}

/// Checks `path` (a file the service reads its orders from) and every
/// directory above it for `uid`: each must be owned by root or `uid`, and
/// none writable by group or others, except directories with the sticky
/// bit (/tmp), where others cannot replace an entry they do not own.
pub fn check(path: &Path, what: &str, uid: u32) -> Result<(), String> {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let fix = "(fix the owner or mode, e.g. chown root: and chmod go-w, or pass \
               --allow-insecure-files to accept it)";
    let mut first = true;
    for p in abs.ancestors() {
        if p.as_os_str().is_empty() {
            continue;
        }
        // The file itself is followed (a config may be a link into a
        // package's tree); each directory of the path as given is checked.
        let meta = if first {
            std::fs::metadata(p)
        } else {
            std::fs::symlink_metadata(p)
        };
        let Ok(m) = meta else { continue };
        let kind = if first { what } else { "directory" };
        if m.uid() != 0 && m.uid() != uid {
            return Err(format!(
                "{kind} {} is owned by uid {}, not by root: that user could change what the \
                 root service does {fix}",
                p.display(),
                m.uid()
            ));
        }
        let sticky_dir = m.is_dir() && m.mode() & 0o1000 != 0;
        if m.mode() & 0o022 != 0 && !sticky_dir && !m.file_type().is_symlink() {
            return Err(format!(
                "{kind} {} is writable by {} (mode {:04o}): anyone who can write it could \
                 change what the root service does {fix}",
                p.display(),
                if m.mode() & 0o002 != 0 {
                    "every user"
                } else {
                    "its group"
                },
                m.mode() & 0o7777
            ));
        }
        first = false;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    #[test]
    fn writable_or_foreign_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        mode(d.path(), 0o755);
        let f = d.path().join("udamon.toml");
        std::fs::write(&f, "x").unwrap();
        mode(&f, 0o644);
        let me = unsafe { libc::geteuid() };
        check(&f, "config", me).unwrap();
        mode(&f, 0o666);
        let e = check(&f, "config", me).unwrap_err();
        assert!(e.contains("writable by every user (mode 0666)"), "{e}");
        assert!(e.contains("--allow-insecure-files"), "{e}");
        mode(&f, 0o664);
        let e = check(&f, "config", me).unwrap_err();
        assert!(e.contains("its group"), "{e}");
        mode(&f, 0o644);
        // The directory above it.
        mode(d.path(), 0o777);
        let e = check(&f, "config", me).unwrap_err();
        assert!(e.starts_with("directory "), "{e}");
        // A sticky one, like /tmp, is fine.
        mode(d.path(), 0o1777);
        check(&f, "config", me).unwrap();
        mode(d.path(), 0o755);
        // Owned by someone else (when we can make it so: as root).
        if me == 0 {
            std::os::unix::fs::chown(&f, Some(4242), None).unwrap();
            let e = check(&f, "scheme file", 0).unwrap_err();
            assert!(e.contains("owned by uid 4242"), "{e}");
        } else {
            let e = check(&f, "config", me + 1).unwrap_err();
            assert!(e.contains(&format!("owned by uid {me}")), "{e}");
        }
    }
}
