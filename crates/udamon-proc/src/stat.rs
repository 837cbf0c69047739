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

impl ProcStat {
    pub fn read(root: &Path, pid: u32) -> Option<ProcStat> {
        let s = std::fs::read_to_string(root.join(format!("proc/{pid}/stat"))).ok()?;
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
