//! Proof that a kdamond is udamon's: a claim file written when a udamon run
//! creates its kdamond and removed when the run removes it.
//!
//! A run that dies without cleaning up (SIGKILL, a crash) leaves its
//! kdamond, and the claim. A later udamon treats that kdamond as its own
//! only when all of this holds: the claim's udamon process is gone (no
//! process of that pid with that start time), the kdamonds are still the
//! ones it created (as many), and each still is what its claim says (its
//! thread's pid while it runs, its operations set, target pids and
//! intervals). Anything else is someone else's kdamond and is never
//! touched.
//!
//! A run of one kdamond (`record`, `apply`) claims kdamond 0 at
//! `ROOT/run/udamon/kdamond.claim`. A service that creates a set of
//! kdamonds ([`crate::KdamondSet`]) also writes the set's claim,
//! `ROOT/run/udamon/kdamonds.claim` (its size), and each kdamond of the set
//! that runs has its own claim, `kdamond.claim` for kdamond 0 and
//! `kdamond-I.claim` for kdamond I; a kdamond of the set without a claim
//! must be off. All are `key=value` lines.

use std::fs;
use std::path::{Path, PathBuf};

/// What a udamon run wrote about the kdamond it created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub udamon_pid: u32,
    /// Start time of that udamon process (`/proc/PID/stat` field 22).
    pub udamon_start: u64,
    /// The kdamond thread's pid once it ran.
    pub kdamond_pid: Option<u32>,
    pub ops: String,
    pub target_pids: Vec<u32>,
    pub sample_us: u64,
    pub aggr_us: u64,
    /// The kernel tunes the intervals (an intervals goal): the files then
    /// hold the tuned values, which the claim cannot know, and are not
    /// compared.
    pub intervals_tuned: bool,
    /// The kdamond's index (`kdamonds/INDEX`): 0 but in a set.
    pub index: usize,
}

/// `ROOT/run/udamon/kdamond.claim`: kdamond 0's claim.
pub fn claim_path(root: &Path) -> PathBuf {
    index_claim_path(root, 0)
}

/// The claim of kdamond `index`: `kdamond.claim` (0), `kdamond-I.claim`.
pub fn index_claim_path(root: &Path, index: usize) -> PathBuf {
    if index == 0 {
        root.join("run/udamon/kdamond.claim")
    } else {
        root.join(format!("run/udamon/kdamond-{index}.claim"))
    }
}

/// `ROOT/run/udamon/kdamonds.claim`: the claim of a set of kdamonds.
pub fn set_claim_path(root: &Path) -> PathBuf {
    root.join("run/udamon/kdamonds.claim")
}

/// What a udamon process wrote about the set of kdamonds it created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetClaim {
    pub udamon_pid: u32,
    pub udamon_start: u64,
    /// How many kdamonds it created (`nr_kdamonds` it wrote).
    pub nr_kdamonds: usize,
}

impl SetClaim {
    pub fn write(&self, root: &Path) -> std::io::Result<()> {
        write_file(
            &set_claim_path(root),
            &format!(
                "udamon_pid={}\nudamon_start={}\nnr_kdamonds={}\n",
                self.udamon_pid, self.udamon_start, self.nr_kdamonds
            ),
        )
    }

    pub fn read(root: &Path) -> Option<SetClaim> {
        let text = fs::read_to_string(set_claim_path(root)).ok()?;
        Some(SetClaim {
            udamon_pid: get(&text, "udamon_pid")?.parse().ok()?,
            udamon_start: get(&text, "udamon_start")?.parse().ok()?,
            nr_kdamonds: get(&text, "nr_kdamonds")?.parse().ok()?,
        })
    }
}

fn get<'a>(text: &'a str, k: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
        .map(str::trim)
}

fn write_file(p: &Path, text: &str) -> std::io::Result<()> {
    if let Some(d) = p.parent() {
        fs::create_dir_all(d)?;
    }
    fs::write(p, text)
}

impl Claim {
    fn to_text(&self) -> String {
        let pids: Vec<String> = self.target_pids.iter().map(u32::to_string).collect();
        format!(
            "udamon_pid={}\nudamon_start={}\nkdamond_pid={}\nops={}\ntarget_pids={}\nsample_us={}\naggr_us={}\nintervals_tuned={}\nindex={}\n",
            self.udamon_pid,
            self.udamon_start,
            self.kdamond_pid.map_or(String::new(), |p| p.to_string()),
            self.ops,
            pids.join(","),
            self.sample_us,
            self.aggr_us,
            u8::from(self.intervals_tuned),
            self.index
        )
    }

    fn parse(text: &str) -> Option<Claim> {
        let get = |k: &str| get(text, k);
        Some(Claim {
            udamon_pid: get("udamon_pid")?.parse().ok()?,
            udamon_start: get("udamon_start")?.parse().ok()?,
            kdamond_pid: get("kdamond_pid")?.parse().ok(),
            ops: get("ops")?.to_string(),
            target_pids: get("target_pids")?
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().ok())
                .collect::<Option<_>>()?,
            sample_us: get("sample_us")?.parse().ok()?,
            aggr_us: get("aggr_us")?.parse().ok()?,
            // Claims written before this field: intervals as configured.
            intervals_tuned: get("intervals_tuned") == Some("1"),
            // Claims written before sets: kdamond 0.
            index: get("index").and_then(|i| i.parse().ok()).unwrap_or(0),
        })
    }

    /// Writes the claim of its kdamond (replacing any).
    pub fn write(&self, root: &Path) -> std::io::Result<()> {
        write_file(&index_claim_path(root, self.index), &self.to_text())
    }

    /// Kdamond 0's claim under `root`, if there is a readable one.
    pub fn read(root: &Path) -> Option<Claim> {
        Claim::read_index(root, 0)
    }

    /// Kdamond `index`'s claim under `root`, if there is a readable one
    /// that names that index.
    pub fn read_index(root: &Path, index: usize) -> Option<Claim> {
        let c = Claim::parse(&fs::read_to_string(index_claim_path(root, index)).ok()?)?;
        (c.index == index).then_some(c)
    }

    /// The claim of a set's kdamond that has none of its own yet.
    fn of_set(s: &SetClaim) -> Claim {
        Claim {
            udamon_pid: s.udamon_pid,
            udamon_start: s.udamon_start,
            kdamond_pid: None,
            ops: String::new(),
            target_pids: Vec::new(),
            sample_us: 0,
            aggr_us: 0,
            intervals_tuned: false,
            index: 0,
        }
    }
}

/// Removes kdamond 0's claim file (nothing if there is none).
pub fn remove(root: &Path) {
    remove_index(root, 0);
}

/// Removes kdamond `index`'s claim file (nothing if there is none).
pub fn remove_index(root: &Path, index: usize) {
    let _ = fs::remove_file(index_claim_path(root, index));
}

/// What a claim says of the kdamond on the machine now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No claim: any kdamond is someone else's.
    NoClaim,
    /// The claiming udamon still runs: the kdamond is that run's.
    Running(Claim),
    /// Provably a kdamond left by a udamon run that died.
    Leftover(Claim),
    /// A claim that does not match the kdamond there now (or there is
    /// none): the kdamond is not provably udamon's; the reason says why.
    Stale(Claim, String),
}

/// A process's start time by pid (`/proc/PID/stat` field 22), if it runs:
/// the caller's, so this crate reads no process files of its own.
pub type StartTime<'a> = &'a dyn Fn(u32) -> Option<u64>;

/// The claims under `root`: the set's (if any) and each kdamond's, in
/// index order; `None` when there is none at all.
fn claims(root: &Path) -> Option<(Option<SetClaim>, Vec<Claim>)> {
    let set = SetClaim::read(root);
    let nr = set.map_or(1, |s| s.nr_kdamonds);
    let each: Vec<Claim> = (0..nr).filter_map(|i| Claim::read_index(root, i)).collect();
    (set.is_some() || !each.is_empty()).then_some((set, each))
}

/// Judges the claims under `root` against the kdamonds there.
pub fn judge(root: &Path, start_time: StartTime) -> Verdict {
    let Some((set, each)) = claims(root) else {
        return Verdict::NoClaim;
    };
    let c = each
        .first()
        .cloned()
        .unwrap_or_else(|| Claim::of_set(set.as_ref().expect("a claim")));
    let (pid, start) = set.map_or((c.udamon_pid, c.udamon_start), |s| {
        (s.udamon_pid, s.udamon_start)
    });
    if start_time(pid) == Some(start) {
        return Verdict::Running(c);
    }
    match set_mismatch(root, set, &each) {
        None => Verdict::Leftover(c),
        Some(why) => Verdict::Stale(c, why),
    }
}

/// Why the kdamonds under `root` are not the ones the claims describe.
fn set_mismatch(root: &Path, set: Option<SetClaim>, each: &[Claim]) -> Option<String> {
    let admin = crate::admin_dir(root);
    let nr = set.map_or(1, |s| s.nr_kdamonds);
    let there = fs::read_to_string(admin.join("kdamonds/nr_kdamonds")).ok();
    if there.as_deref().map(str::trim) != Some(nr.to_string().as_str()) {
        return Some(if nr == 1 {
            "there is not exactly one kdamond".into()
        } else {
            format!("there are not exactly the {nr} kdamonds of the claim")
        });
    }
    if let Some(s) = set {
        if each
            .iter()
            .any(|c| (c.udamon_pid, c.udamon_start) != (s.udamon_pid, s.udamon_start))
        {
            return Some("a kdamond's claim names another udamon run than the set's".into());
        }
    }
    for i in 0..nr {
        match each.iter().find(|c| c.index == i) {
            Some(c) => {
                if let Some(why) = mismatch(root, c) {
                    return Some(why);
                }
            }
            // Of a set, a kdamond without a claim of its own never ran or
            // was turned off by its session.
            None if set.is_some() => {
                let state = fs::read_to_string(admin.join(format!("kdamonds/{i}/state")))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default();
                if state != "off" {
                    return Some(format!("kdamond {i} runs and has no claim"));
                }
            }
            None => return Some("kdamond 0 has no claim".into()),
        }
    }
    None
}

/// Why the kdamond under `root` that `c` names is not the one it describes.
fn mismatch(root: &Path, c: &Claim) -> Option<String> {
    let admin = crate::admin_dir(root);
    let read = |p: &str| {
        fs::read_to_string(admin.join(p))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let k = format!("kdamonds/{}", c.index);
    let state = read(&format!("{k}/state")).unwrap_or_default();
    if state == "on" {
        let pid = read(&format!("{k}/pid")).and_then(|p| p.parse::<u32>().ok());
        if pid.is_none() || pid != c.kdamond_pid {
            return Some(format!(
                "kdamond {} runs as pid {}, the claim says {}",
                c.index,
                pid.map_or("?".into(), |p| p.to_string()),
                c.kdamond_pid.map_or("?".into(), |p| p.to_string())
            ));
        }
    }
    let ctx = format!("{k}/contexts/0");
    if read(&format!("{ctx}/operations")).as_deref() != Some(c.ops.as_str()) {
        return Some("its operations set differs from the claim's".into());
    }
    let nr: usize = read(&format!("{ctx}/targets/nr_targets"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let pids: Vec<u32> = (0..nr)
        .filter_map(|i| read(&format!("{ctx}/targets/{i}/pid_target"))?.parse().ok())
        .collect();
    if c.ops != "paddr" && pids != c.target_pids {
        return Some("its target pids differ from the claim's".into());
    }
    let iv = |k: &str| read(&format!("{ctx}/monitoring_attrs/intervals/{k}"));
    if !c.intervals_tuned
        && (iv("sample_us") != Some(c.sample_us.to_string())
            || iv("aggr_us") != Some(c.aggr_us.to_string()))
    {
        return Some("its intervals differ from the claim's".into());
    }
    None
}

/// Why [`clean_up`] removed nothing.
#[derive(Debug, thiserror::Error)]
pub enum NotRemoved {
    #[error("no kdamond of a udamon run is left")]
    NoClaim,
    #[error("the kdamond belongs to udamon pid {0}, which is still running")]
    Running(u32),
    #[error("the kdamond there is not provably udamon's ({0}); it stays untouched")]
    Stale(String),
    #[error("{0}")]
    Failed(#[from] std::io::Error),
}

/// Removes a kdamond that [`judge`] found to be a leftover: turns it off,
/// removes it (`nr_kdamonds` 0), removes the dead run's tracefs instance
/// and the claim. Checks the verdict again first; refuses anything else.
pub fn clean_up(root: &Path, start_time: StartTime) -> Result<Claim, NotRemoved> {
    let c = match judge(root, start_time) {
        Verdict::Leftover(c) => c,
        Verdict::NoClaim => return Err(NotRemoved::NoClaim),
        Verdict::Running(c) => return Err(NotRemoved::Running(c.udamon_pid)),
        Verdict::Stale(_, why) => return Err(NotRemoved::Stale(why)),
    };
    remove_kdamond(root, c.udamon_pid)?;
    Ok(c)
}

/// Turns off every kdamond of this process's claims that runs: a request
/// blocked in the kernel (a tried-regions walk that waits for every
/// scheme) returns then. Returns whether it turned one off.
pub fn turn_off_own(root: &Path, start_time: StartTime) -> bool {
    let me = std::process::id();
    if !matches!(judge(root, start_time), Verdict::Running(c) if c.udamon_pid == me) {
        return false;
    }
    let nr = SetClaim::read(root).map_or(1, |s| s.nr_kdamonds);
    // Each one tried, whatever the others' writes did.
    let turned: Vec<bool> = (0..nr)
        .map(|i| turn_off(root, i).is_ok_and(|t| t))
        .collect();
    turned.contains(&true)
}

/// A write to a file of DAMON's sysfs that failed: the file, the value.
pub(crate) type WriteFailed = (PathBuf, &'static str, std::io::Error);

/// Writes `off` to kdamond `i`'s `state` if it reads `on`; returns
/// whether it did.
fn turn_off(root: &Path, i: usize) -> Result<bool, WriteFailed> {
    let state = crate::admin_dir(root).join(format!("kdamonds/{i}/state"));
    if !fs::read_to_string(&state).is_ok_and(|s| s.trim() == "on") {
        return Ok(false);
    }
    fs::write(&state, "off").map_err(|e| (state, "off", e))?;
    Ok(true)
}

/// Turns kdamonds `0..nr` off where they run, removes them all
/// (`nr_kdamonds` 0) and removes their claims and the set's: the end of
/// a set of udamon's, or of its one kdamond (`nr` 1).
pub(crate) fn remove_all(root: &Path, nr: usize) -> Result<(), WriteFailed> {
    for i in 0..nr {
        turn_off(root, i)?;
    }
    let p = crate::admin_dir(root).join("kdamonds/nr_kdamonds");
    fs::write(&p, "0").map_err(|e| (p, "0", e))?;
    for i in 0..nr {
        remove_index(root, i);
    }
    let _ = fs::remove_file(set_claim_path(root));
    Ok(())
}

/// Turns the kdamonds of the claims off, removes them (`nr_kdamonds` 0),
/// the tracefs instances of udamon pid `udamon_pid` and the claims. Only
/// for kdamonds proven udamon's (a leftover, or this process's own on a
/// forced exit).
pub fn remove_kdamond(root: &Path, udamon_pid: u32) -> std::io::Result<()> {
    let nr = SetClaim::read(root).map_or(1, |s| s.nr_kdamonds);
    remove_all(root, nr).map_err(|(_, _, e)| e)?;
    if let Some(t) = crate::trace::tracefs_dir(root) {
        let own = format!("udamon-{udamon_pid}");
        if let Ok(dir) = fs::read_dir(t.join("instances")) {
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name == own || name.starts_with(&format!("{own}-")) {
                    let _ = fs::remove_dir(e.path());
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, p: &str, s: &str) {
        let p = root.join(p);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    /// A kdamond as udamon's driver leaves it, and the claim of a udamon
    /// pid 50 whose process is gone.
    fn leftover_tree(root: &Path) -> Claim {
        let k = "sys/kernel/mm/damon/admin/kdamonds";
        put(root, &format!("{k}/nr_kdamonds"), "1\n");
        put(root, &format!("{k}/0/state"), "on\n");
        put(root, &format!("{k}/0/pid"), "900\n");
        let c = format!("{k}/0/contexts/0");
        put(root, &format!("{c}/operations"), "vaddr\n");
        put(root, &format!("{c}/targets/nr_targets"), "1\n");
        put(root, &format!("{c}/targets/0/pid_target"), "4242\n");
        put(
            root,
            &format!("{c}/monitoring_attrs/intervals/sample_us"),
            "5000\n",
        );
        put(
            root,
            &format!("{c}/monitoring_attrs/intervals/aggr_us"),
            "100000\n",
        );
        let claim = Claim {
            udamon_pid: 50,
            udamon_start: 777,
            kdamond_pid: Some(900),
            ops: "vaddr".into(),
            target_pids: vec![4242],
            sample_us: 5000,
            aggr_us: 100_000,
            intervals_tuned: false,
            index: 0,
        };
        claim.write(root).unwrap();
        claim
    }

    /// With interval auto-tuning the kernel's interval files hold the tuned
    /// values: a leftover is still provably udamon's.
    #[test]
    fn a_leftover_with_tuned_intervals_is_still_provable() {
        let d = tempfile::tempdir().unwrap();
        let mut c = leftover_tree(d.path());
        c.intervals_tuned = true;
        c.write(d.path()).unwrap();
        put(
            d.path(),
            "sys/kernel/mm/damon/admin/kdamonds/0/contexts/0/monitoring_attrs/intervals/aggr_us",
            "257680\n",
        );
        assert_eq!(judge(d.path(), &|_| None), Verdict::Leftover(c.clone()));
        c.intervals_tuned = false;
        c.write(d.path()).unwrap();
        assert!(
            matches!(judge(d.path(), &|_| None), Verdict::Stale(_, why) if why.contains("intervals"))
        );
    }

    #[test]
    fn a_claim_reads_back() {
        let d = tempfile::tempdir().unwrap();
        let c = leftover_tree(d.path());
        assert_eq!(Claim::read(d.path()), Some(c));
    }

    #[test]
    fn only_a_provable_leftover_is_cleaned_up() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let c = leftover_tree(root);
        let admin = crate::admin_dir(root);
        // The claiming udamon still runs (same pid, same start time).
        let running = |p: u32| (p == 50).then_some(777);
        assert_eq!(judge(root, &running), Verdict::Running(c.clone()));
        assert!(clean_up(root, &running).is_err());
        // Its pid now names another process: the run is gone.
        let gone = |p: u32| (p == 50).then_some(999);
        // Someone else's kdamond in its place (another thread pid): untouched.
        put(root, "sys/kernel/mm/damon/admin/kdamonds/0/pid", "901\n");
        assert!(matches!(judge(root, &gone), Verdict::Stale(..)));
        assert!(clean_up(root, &gone).is_err());
        assert_eq!(
            fs::read_to_string(admin.join("kdamonds/nr_kdamonds")).unwrap(),
            "1\n"
        );
        // The kdamond the claim describes: removed, claim gone.
        put(root, "sys/kernel/mm/damon/admin/kdamonds/0/pid", "900\n");
        assert_eq!(judge(root, &gone), Verdict::Leftover(c));
        clean_up(root, &gone).unwrap();
        assert_eq!(
            fs::read_to_string(admin.join("kdamonds/nr_kdamonds")).unwrap(),
            "0"
        );
        assert_eq!(
            fs::read_to_string(admin.join("kdamonds/0/state")).unwrap(),
            "off"
        );
        assert!(Claim::read(root).is_none());
    }
}
