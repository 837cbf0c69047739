//! `/proc/PID/maps`: the mappings of a process.

use std::path::{Path, PathBuf};

use udamon_core::AddrRange;

use crate::Error;

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub range: AddrRange,
    /// `rwxp`-style permissions, as printed.
    pub perms: String,
    pub offset: u64,
    /// `major:minor` of the backing file's device (`00:00` for anonymous).
    pub dev: String,
    /// The backing file's inode (0 for anonymous).
    pub inode: u64,
    /// The backing file or pseudo-name (`[heap]`, `[stack]`); empty for anonymous.
    pub path: String,
}

/// `ROOT/proc/PID/maps`.
pub fn maps_path(root: &Path, pid: u32) -> PathBuf {
    root.join(format!("proc/{pid}/maps"))
}

/// Parses the text of a maps file; `path` only names it in errors.
pub fn parse_maps(text: &str, path: &Path) -> Result<Vec<Mapping>, Error> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let m = udamon_core::vaddr::parse_maps_line(line).ok_or_else(|| Error::BadMaps {
            path: path.to_path_buf(),
            line: i + 1,
            text: line.to_string(),
        })?;
        out.push(Mapping {
            range: m.range,
            perms: m.perms.to_string(),
            offset: m.offset,
            dev: m.dev.to_string(),
            inode: m.inode,
            path: m.path,
        });
    }
    Ok(out)
}

/// Reads and parses `ROOT/proc/PID/maps`.
pub fn read_maps(root: &Path, pid: u32) -> Result<Vec<Mapping>, Error> {
    let path = maps_path(root, pid);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_maps(&text, &path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Gone { pid, path }),
        Err(e) => Err(Error::io("reading", &path, e)),
    }
}

/// The ranges DAMON's vaddr would monitor for these mappings (all of them
/// but the two biggest gaps), via [`udamon_core::vaddr::monitoring_ranges`].
pub fn monitoring_ranges(mappings: &[Mapping]) -> Vec<AddrRange> {
    let ranges: Vec<AddrRange> = mappings.iter().map(|m| m.range).collect();
    udamon_core::vaddr::monitoring_ranges(&ranges, udamon_core::MIN_REGION_SZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234   /usr/bin/cat
55d0c0a02000-55d0c0a07000 r-xp 00002000 fd:01 1234   /usr/bin/cat
55d0c1e00000-55d0c1e21000 rw-p 00000000 00:00 0      [heap]
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0
7f1e2c400000-7f1e2c428000 r--p 00000000 fd:01 99     /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd4a1f0000-7ffd4a211000 rw-p 00000000 00:00 0      [stack]
";

    #[test]
    fn parses_lines_and_gives_three_regions() {
        let m = parse_maps(SAMPLE, Path::new("maps")).unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(m[0].range, AddrRange::new(0x55d0c0a00000, 0x55d0c0a02000));
        assert_eq!(m[1].perms, "r-xp");
        assert_eq!(m[1].offset, 0x2000);
        assert_eq!(m[2].path, "[heap]");
        assert_eq!(m[3].path, "");
        let r = monitoring_ranges(&m);
        assert_eq!(
            r,
            vec![
                AddrRange::new(0x55d0c0a00000, 0x55d0c1e21000),
                AddrRange::new(0x7f1e2c000000, 0x7f1e2c428000),
                AddrRange::new(0x7ffd4a1f0000, 0x7ffd4a211000),
            ]
        );
    }

    #[test]
    fn bad_line_names_file_and_line() {
        let e = parse_maps("00400000-zz r-xp 0 0:0 0\n", Path::new("/p/maps")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("/p/maps line 1"), "{msg}");
    }

    #[test]
    fn missing_process_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_maps(dir.path(), 4242).unwrap_err();
        assert!(matches!(e, Error::Gone { pid: 4242, .. }), "{e}");
    }
}
