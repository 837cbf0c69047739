//! `/proc/PID/stat`: a process's command name, its fields, and its start
//! time, which with the pid names the process (not whichever one has the
//! pid later). The operations (ops.rs) and the actions (act.rs) both read
//! it.

use std::path::Path;

/// `ROOT/proc/PID/stat`, read once: the command name and the fields after it.
#[derive(Debug, Clone)]
pub struct ProcStat {
    /// Field 2, without its parentheses.
    pub comm: String,
    /// Fields 3 and later (the state first), as text.
    rest: String,
}

/// Reads a `/proc` file whole into `buf` (cleared first) with `read(2)`
/// alone: `std::fs::read` asks the file's size first (`statx`), which for
/// a `/proc` file is 0 and costs a system call for nothing, one that
/// counts when a program's processes are read every second. A line file
/// (`line`: one line, as `stat`) ends at its newline without the read that
/// would find the end.
pub fn read_proc_file(path: &Path, buf: &mut Vec<u8>, line: bool) -> std::io::Result<()> {
    use std::io::Read;
    buf.clear();
    let mut f = std::fs::File::open(path)?;
    let mut len = 0;
    loop {
        if buf.len() - len < 1024 {
            buf.resize(len + 4096.max(len), 0);
        }
        let n = match f.read(&mut buf[len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        };
        len += n;
        if n == 0 || (line && buf[..len].ends_with(b"\n")) {
            break;
        }
    }
    buf.truncate(len);
    Ok(())
}

impl ProcStat {
    pub fn read(root: &Path, pid: u32) -> Option<ProcStat> {
        let mut buf = Vec::new();
        read_proc_file(&root.join(format!("proc/{pid}/stat")), &mut buf, true).ok()?;
        let s = String::from_utf8_lossy(&buf);
        // The command name is in parentheses and may hold spaces and ')'.
        let (open, close) = (s.find('(')?, s.rfind(')')?);
        Some(ProcStat {
            comm: s.get(open + 1..close)?.to_string(),
            rest: s.get(close + 2..)?.to_string(),
        })
    }

    /// Field 3, the state: `R`, `S`, `D`, `Z` (zombie), ...
    pub fn state(&self) -> char {
        self.rest.chars().next().unwrap_or('?')
    }

    /// Numeric fields `n`, `n + 1`, ... (1-based, as proc(5) numbers
    /// them; 3 and later), read in one pass: `None` for one that is not a
    /// number.
    pub fn fields_from(&self, n: usize) -> impl Iterator<Item = Option<u64>> + '_ {
        self.rest
            .split_whitespace()
            .skip(n.saturating_sub(3))
            .take(if n < 3 { 0 } else { usize::MAX })
            .map(|w| w.parse().ok())
    }

    /// Numeric field `n` (1-based, as proc(5) numbers them; 3 and later).
    pub fn field(&self, n: usize) -> Option<u64> {
        self.rest
            .split_whitespace()
            .nth(n.checked_sub(3)?)?
            .parse()
            .ok()
    }
}

/// Numeric field `n` (1-based, as proc(5) numbers them; 3 and later) of
/// `ROOT/proc/PID/stat`.
pub fn stat_field(root: &Path, pid: u32, n: usize) -> Option<u64> {
    ProcStat::read(root, pid)?.field(n)
}

/// Clock ticks per second, the unit of `/proc/PID/stat`'s times.
pub fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// A process's start time (`/proc/PID/stat` field 22, clock ticks since
/// boot): with its pid, it names the process, not whichever one has the
/// pid later.
pub fn start_time(root: &Path, pid: u32) -> Option<u64> {
    stat_field(root, pid, 22)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_whole_and_its_fields_numbered_as_proc5_does() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("proc/7");
        std::fs::create_dir_all(&d).unwrap();
        // A command name with a space and a parenthesis in it.
        std::fs::write(
            d.join("stat"),
            "7 (a b) c) S 1 0 0 0 -1 0 0 0 0 0 11 12 0 0 20 0 1 0 345 6789 x\n",
        )
        .unwrap();
        let st = ProcStat::read(t.path(), 7).unwrap();
        assert_eq!(st.comm, "a b) c");
        assert_eq!(st.state(), 'S');
        assert_eq!((st.field(14), st.field(15)), (Some(11), Some(12)));
        let f: Vec<Option<u64>> = st.fields_from(22).collect();
        assert_eq!(f, vec![Some(345), Some(6789), None]);
        assert_eq!(st.fields_from(2).count(), 0);
        assert_eq!(start_time(t.path(), 7), Some(345));
        assert!(ProcStat::read(t.path(), 8).is_none());
    }

    #[test]
    fn a_file_longer_than_one_read_is_read_whole() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("maps");
        let text: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, &text).unwrap();
        let mut buf = b"left over".to_vec();
        read_proc_file(&p, &mut buf, false).unwrap();
        assert_eq!(buf, text.as_bytes());
        // A line file stops at its first read ending in a newline.
        read_proc_file(&p, &mut buf, true).unwrap();
        assert!(buf.ends_with(b"\n") && text.as_bytes().starts_with(&buf));
        assert!(read_proc_file(&t.path().join("none"), &mut buf, false).is_err());
    }
}
