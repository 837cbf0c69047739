//! DAMON_STAT (`CONFIG_DAMON_STAT`, Linux 6.17+), read only.
//!
//! The kernel module monitors all physical memory with a kdamond of its own
//! and publishes, under `/sys/module/damon_stat/parameters/`, an estimate
//! of the memory bandwidth and the idle time of memory by size percentile,
//! refreshed at most every 5 s. udamon reads these files and nothing else:
//! it never enables the module nor changes its parameters (an
//! administrator does, with [`ENABLE_HINT`]).
//!
//! ```
//! let root = tempfile::tempdir().unwrap();
//! // No module: nothing to read.
//! assert!(udamon_kdamon::damon_stat::read(root.path()).unwrap().is_none());
//! ```

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::Error;

/// The module's parameters, relative to the root.
pub const PARAMETERS: &str = "sys/module/damon_stat/parameters";
/// What provides the module.
pub const NEEDS: &str = "Linux 6.17+ with CONFIG_DAMON_STAT";
/// How an administrator turns it on (udamon never does).
pub const ENABLE_HINT: &str = "echo Y > /sys/module/damon_stat/parameters/enabled";
/// Percentiles p0 to p100.
pub const NR_PERCENTILES: usize = 101;
/// The most a parameter file may hold: the percentiles take about 500
/// bytes; anything near this is not the kernel's.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// What DAMON_STAT publishes, as read at one moment.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DamonStat {
    /// Whether the module runs (`enabled`: Y or N).
    pub enabled: bool,
    /// `estimated_memory_bandwidth`: bytes per second, estimated from the
    /// regions' sizes and access frequencies.
    pub estimated_memory_bandwidth: u64,
    /// `memory_idle_ms_percentiles`: p0 to p100 (exactly 101) of the idle
    /// time of memory, by size, in milliseconds: pN is the idle time that
    /// N% of the memory does not exceed. Since 6.18 a negative value is a
    /// region accessed in the last aggregation interval, hot for that long
    /// (`-(age + 1) * aggregation interval`).
    pub idle_ms_percentiles: Vec<i64>,
    /// `aggr_interval_us` (6.18+; `None` before).
    pub aggr_interval_us: Option<u64>,
    /// `kdamond_pid` (7.2+; `None` before, and while the module does not
    /// run: the kernel then shows -1 or 0).
    pub kdamond_pid: Option<u32>,
}

impl DamonStat {
    /// Percentile `p` (0 to 100) of the idle time, in milliseconds.
    pub fn idle_ms(&self, p: usize) -> Option<i64> {
        self.idle_ms_percentiles.get(p).copied()
    }
}

/// Reads DAMON_STAT's parameters under `root` ("/" for the machine);
/// `Ok(None)` when the module's parameters directory does not exist (no
/// module, or not loaded). A file that cannot be read, is larger than
/// [`MAX_FILE_BYTES`] or holds what the kernel does not write there is an
/// error naming the file and what it holds.
pub fn read(root: &Path) -> Result<Option<DamonStat>, Error> {
    let dir = root.join(PARAMETERS);
    match fs::metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(Error::Read { path: dir, source }),
        Ok(_) => {}
    }
    let file = |name: &str| dir.join(name);
    let enabled = {
        let path = file("enabled");
        let text = read_capped(&path)?;
        match text.trim() {
            "Y" | "y" | "1" => true,
            "N" | "n" | "0" => false,
            other => return Err(malformed(path, other, "Y or N".into())),
        }
    };
    let path = file("estimated_memory_bandwidth");
    let bw = read_capped(&path)?;
    let estimated_memory_bandwidth = number(path, &bw)?;
    let path = file("memory_idle_ms_percentiles");
    let text = read_capped(&path)?;
    let idle_ms_percentiles = percentiles(path, &text)?;
    let aggr_interval_us = match optional(&file("aggr_interval_us"))? {
        Some((path, text)) => Some(number(path, &text)?),
        None => None,
    };
    let kdamond_pid = match optional(&file("kdamond_pid"))? {
        Some((path, text)) => {
            let pid: i64 = number(path.clone(), &text)?;
            if pid <= 0 {
                None
            } else {
                Some(u32::try_from(pid).map_err(|_| parse(path, &text))?)
            }
        }
        None => None,
    };
    Ok(Some(DamonStat {
        enabled,
        estimated_memory_bandwidth,
        idle_ms_percentiles,
        aggr_interval_us,
        kdamond_pid,
    }))
}

/// A file's text, refusing one larger than [`MAX_FILE_BYTES`].
fn read_capped(path: &Path) -> Result<String, Error> {
    let read = || -> io::Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(1024);
        fs::File::open(path)?
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut buf)?;
        if buf.len() as u64 > MAX_FILE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "it holds more than {} KiB, far more than the module writes",
                    MAX_FILE_BYTES / 1024
                ),
            ));
        }
        Ok(buf)
    };
    match read() {
        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Err(source) => Err(Error::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A file that older kernels do not have: `None` when it does not exist.
fn optional(path: &Path) -> Result<Option<(PathBuf, String)>, Error> {
    match read_capped(path) {
        Ok(t) => Ok(Some((path.to_path_buf(), t))),
        Err(Error::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn number<T: std::str::FromStr>(path: PathBuf, text: &str) -> Result<T, Error> {
    text.trim().parse().map_err(|_| parse(path, text))
}

/// The values of `memory_idle_ms_percentiles`: 101 comma-separated
/// integers.
fn percentiles(path: PathBuf, text: &str) -> Result<Vec<i64>, Error> {
    let t = text.trim();
    let values: Vec<&str> = if t.is_empty() {
        Vec::new()
    } else {
        t.split(',').map(str::trim).collect()
    };
    let expected = |what: String| {
        format!("{NR_PERCENTILES} comma-separated integers (p0 to p100 in ms); {what}")
    };
    let mut out = Vec::with_capacity(NR_PERCENTILES);
    for (i, v) in values.iter().enumerate() {
        match v.parse::<i64>() {
            Ok(n) => out.push(n),
            Err(_) => {
                return Err(malformed(
                    path,
                    t,
                    expected(format!("value {} is {:?}", i + 1, shown(v))),
                ))
            }
        }
    }
    if out.len() != NR_PERCENTILES {
        return Err(malformed(path, t, expected(format!("found {}", out.len()))));
    }
    Ok(out)
}

/// At most 100 characters of a value, for messages (a damaged file may
/// hold 64 KiB).
fn shown(v: &str) -> String {
    const MAX: usize = 100;
    match v.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &v[..at]),
        None => v.to_string(),
    }
}

fn parse(path: PathBuf, text: &str) -> Error {
    Error::Parse {
        path,
        value: shown(text.trim()),
    }
}

fn malformed(path: PathBuf, text: &str, expected: String) -> Error {
    Error::Malformed {
        path,
        value: shown(text.trim()),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percentiles_text(f: impl Fn(i64) -> i64) -> String {
        (0..NR_PERCENTILES as i64)
            .map(|i| f(i).to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A fake root with the module's files (name, content).
    fn module(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(PARAMETERS);
        fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            fs::write(dir.join(name), text).unwrap();
        }
        root
    }

    fn full(percentiles: &str) -> tempfile::TempDir {
        module(&[
            ("enabled", "Y\n"),
            ("estimated_memory_bandwidth", "1073741824\n"),
            ("memory_idle_ms_percentiles", percentiles),
            ("aggr_interval_us", "100000\n"),
            ("kdamond_pid", "4321\n"),
        ])
    }

    #[test]
    fn reads_every_file() {
        let root = full(&format!("{}\n", percentiles_text(|i| i * 100)));
        let s = read(root.path()).unwrap().unwrap();
        assert!(s.enabled);
        assert_eq!(s.estimated_memory_bandwidth, 1 << 30);
        assert_eq!(s.idle_ms_percentiles.len(), 101);
        assert_eq!(s.idle_ms(50), Some(5000));
        assert_eq!(s.idle_ms(100), Some(10_000));
        assert_eq!(s.idle_ms(101), None);
        assert_eq!(s.aggr_interval_us, Some(100_000));
        assert_eq!(s.kdamond_pid, Some(4321));
    }

    #[test]
    fn negative_percentiles_are_kept() {
        // 6.18+: the hottest regions first, as -(age + 1) * aggr.
        let root = full(&percentiles_text(
            |i| if i < 10 { -(10 - i) * 100 } else { i },
        ));
        let s = read(root.path()).unwrap().unwrap();
        assert_eq!(s.idle_ms(0), Some(-1000));
        assert_eq!(s.idle_ms(9), Some(-100));
        assert_eq!(s.idle_ms(10), Some(10));
    }

    #[test]
    fn optional_files_may_be_missing_and_pid_may_say_not_running() {
        let p = percentiles_text(|_| 0);
        let root = module(&[
            ("enabled", "N\n"),
            ("estimated_memory_bandwidth", "0\n"),
            ("memory_idle_ms_percentiles", &p),
        ]);
        let s = read(root.path()).unwrap().unwrap();
        assert!(!s.enabled);
        assert_eq!((s.aggr_interval_us, s.kdamond_pid), (None, None));
        for pid in ["-1\n", "0\n"] {
            fs::write(root.path().join(PARAMETERS).join("kdamond_pid"), pid).unwrap();
            assert_eq!(read(root.path()).unwrap().unwrap().kdamond_pid, None);
        }
    }

    #[test]
    fn a_wrong_count_names_the_file_and_value() {
        for (text, found) in [("1,2,3\n", "found 3"), ("\n", "found 0")] {
            let root = full(text);
            let e = read(root.path()).unwrap_err().to_string();
            assert!(e.contains("memory_idle_ms_percentiles holds"), "{e}");
            assert!(
                e.contains("expected 101 comma-separated integers (p0 to p100 in ms)"),
                "{e}"
            );
            assert!(e.ends_with(found), "{e}");
        }
        let root = full("1,2,3\n");
        let e = read(root.path()).unwrap_err().to_string();
        assert!(e.contains("holds \"1,2,3\""), "{e}");
        let root = full(&percentiles_text(|_| 1).replace(',', ",,"));
        let e = read(root.path()).unwrap_err().to_string();
        assert!(e.ends_with("value 2 is \"\""), "{e}");
    }

    #[test]
    fn garbage_is_an_error_naming_the_file() {
        let good = percentiles_text(|i| i);
        let bad = good.replacen('7', "x", 1);
        let cases: [(&str, &[u8], &str); 6] = [
            (
                "enabled",
                b"maybe\n",
                "enabled holds \"maybe\", expected Y or N",
            ),
            (
                "estimated_memory_bandwidth",
                b"lots\n",
                "estimated_memory_bandwidth holds \"lots\", expected a number",
            ),
            (
                "memory_idle_ms_percentiles",
                bad.as_bytes(),
                "value 8 is \"x\"",
            ),
            (
                "aggr_interval_us",
                b"100ms\n",
                "aggr_interval_us holds \"100ms\", expected a number",
            ),
            (
                "kdamond_pid",
                b"99999999999\n",
                "kdamond_pid holds \"99999999999\", expected a number",
            ),
            ("kdamond_pid", b"\xff\n", "kdamond_pid holds \"\u{fffd}\""),
        ];
        for (name, text, want) in cases {
            let root = full(&good);
            fs::write(root.path().join(PARAMETERS).join(name), text).unwrap();
            let e = read(root.path()).unwrap_err();
            assert!(e.to_string().contains(want), "{name}: {e}");
            assert_eq!(e.kind(), udamon_core::ErrorKind::Failure);
        }
        // A huge file is refused, and a long value is cut in the message.
        let root = full(&good);
        let big = "9".repeat(70 * 1024);
        let f = root
            .path()
            .join(PARAMETERS)
            .join("estimated_memory_bandwidth");
        fs::write(&f, &big).unwrap();
        let e = read(root.path()).unwrap_err().to_string();
        assert!(e.contains("more than 64 KiB"), "{e}");
        fs::write(&f, &big[..1000]).unwrap();
        let e = read(root.path()).unwrap_err().to_string();
        assert!(e.len() < 400 && e.contains("999...\""), "{e}");
        // A required file missing.
        fs::remove_file(&f).unwrap();
        let e = read(root.path()).unwrap_err().to_string();
        assert!(
            e.starts_with("reading ") && e.contains("estimated_memory_bandwidth failed"),
            "{e}"
        );
    }

    #[test]
    fn no_module_is_none() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read(root.path()).unwrap(), None);
        // Another module's parameters are not DAMON_STAT's.
        fs::create_dir_all(root.path().join("sys/module/damon_reclaim/parameters")).unwrap();
        assert_eq!(read(root.path()).unwrap(), None);
    }
}
