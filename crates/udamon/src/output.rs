//! Terminal conventions shared by every subcommand: progress, JSON.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::UsageError;

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Marks the start of the process (call first thing in `main`).
pub fn mark_start() {
    START.get_or_init(Instant::now);
}

/// Wall time since [`mark_start`].
pub fn since_start() -> Duration {
    START.get_or_init(Instant::now).elapsed()
}

/// A progress bar on stderr that shows itself only on a terminal and only
/// once the work has taken more than a second.
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
    shown: bool,
    tty: bool,
}

impl Progress {
    pub fn new(len: u64, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:40}] {percent:>3}% eta {eta}")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        Progress {
            bar,
            started: Instant::now(),
            shown: false,
            tty: std::io::stderr().is_terminal(),
        }
    }

    pub fn set(&mut self, pos: u64) {
        if !self.shown && self.tty && self.started.elapsed() > Duration::from_secs(1) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
        self.bar.set_position(pos);
    }

    /// Sets the total, when it is known only once the work has started.
    pub fn set_len(&mut self, len: u64) {
        if self.bar.length() != Some(len) {
            self.bar.set_length(len);
        }
    }

    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Checks an output path before any work starts, so that no long run ends
/// in "cannot write" and nothing is lost: refuses a path that is one of
/// the `inputs` or another output of the same command (`others`), a
/// directory, a directory that does not exist or cannot be written, and an
/// existing file whose `NAME.old` could not be kept (a directory, or one of
/// the inputs). Devices and pipes such as `/dev/null` pass as they are.
pub fn check_output(
    flag: &str,
    path: &Path,
    inputs: &[&Path],
    others: &[&Path],
) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).ok();
    let same = |p: &Path, m: &std::fs::Metadata| {
        std::fs::metadata(p).is_ok_and(|o| o.dev() == m.dev() && o.ino() == m.ino())
    };
    if let Some(m) = &meta {
        if let Some(i) = inputs.iter().find(|i| same(i, m)) {
            return Err(UsageError(format!(
                "{flag} {shown}: that is the input {}; write the output to another file",
                i.display()
            ))
            .into());
        }
        if m.is_dir() {
            return Err(
                UsageError(format!("{flag} {shown}: is a directory; give a file name")).into(),
            );
        }
    }
    let plain = |p: &Path| -> PathBuf {
        p.components()
            .filter(|c| *c != std::path::Component::CurDir)
            .collect()
    };
    if others.iter().any(|o| plain(o) == plain(path)) {
        return Err(UsageError(format!(
            "{flag} {shown}: another output of this command goes there too; give each its own file"
        ))
        .into());
    }
    let dir = parent_dir(path);
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "{flag} {shown}: directory {} does not exist",
            dir.display()
        ))
        .into());
    }
    if written_in_place(path) {
        return Ok(());
    }
    if meta.is_some() {
        let old = old_path(path);
        if let Ok(m) = std::fs::metadata(&old) {
            if m.is_dir() || inputs.iter().any(|i| same(i, &m)) {
                return Err(UsageError(format!(
                    "{flag} {shown}: exists and cannot be kept as {}, which is {}; move one of them",
                    old.display(),
                    if m.is_dir() {
                        "a directory".to_string()
                    } else {
                        "an input".to_string()
                    }
                ))
                .into());
            }
        }
    }
    // The output (or its temporary file) is made in the directory: make
    // sure it takes one now, not after the run.
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let probe = dir.join(format!(".{name}.udamon-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(UsageError(format!(
            "{flag} {shown}: cannot create a file in {}: {}",
            dir.display(),
            plain_io(&e)
        ))
        .into()),
    }
}

/// Whether `path` is written as it is, not through a temporary file: a
/// device, a pipe or a socket, or a name under `/dev` or `/proc`
/// (`/dev/stdout` redirected to a file is that file, and no temporary
/// file belongs in `/dev`).
fn written_in_place(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
        || path.starts_with("/dev")
        || path.starts_with("/proc")
}

/// The directory a path's file goes in (`.` for a bare name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// `NAME.old`, where a previous `NAME` is kept.
fn old_path(path: &Path) -> PathBuf {
    let mut old = path.as_os_str().to_owned();
    old.push(".old");
    PathBuf::from(old)
}

/// Gets an output written as it goes (a record: a killed run keeps what it
/// recorded) ready before any work starts: [`check_output`], then an
/// existing regular file is kept as `NAME.old` at once, as `perf record`
/// keeps `perf.data.old` (one generation: an older `.old` is replaced).
/// Prints a note on stderr when a file was kept. Outputs written whole
/// use [`WholeFile`] instead, which keeps the previous file in place until
/// the new one is complete.
pub fn prepare(flag: &str, path: &Path, inputs: &[&Path], others: &[&Path]) -> anyhow::Result<()> {
    check_output(flag, path, inputs, others)?;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let old = old_path(path);
    std::fs::rename(path, &old).map_err(|e| {
        UsageError(format!(
            "{flag} {}: exists and cannot be kept as {}: {}",
            path.display(),
            old.display(),
            plain_io(&e)
        ))
    })?;
    eprintln!(
        "udamon: kept the previous {} as {}",
        path.display(),
        old.display()
    );
    Ok(())
}

/// An output file written whole (an export, a cut, a page, an image, a
/// scheme file): the work writes a temporary file beside it,
/// `.NAME.udamon-PID.tmp`, made new, and [`WholeFile::commit`] puts it in
/// place only once it is complete, keeping the previous file as
/// `NAME.old`. A run that fails, or that a signal interrupts, removes the
/// temporary file and leaves the previous `NAME` as it was; one killed
/// outright (SIGKILL) leaves at most the temporary file. Devices and pipes
/// (`/dev/null`, `/dev/stdout`) are written directly.
///
/// Check the path with [`check_output`] before the work, and make the
/// file when the work is ready to write it.
pub struct WholeFile {
    path: PathBuf,
    /// The temporary file; `None` when `path` itself is written (a device
    /// or a pipe) or once committed.
    tmp: Option<PathBuf>,
}

impl WholeFile {
    /// Makes the temporary file for `path` (or opens `path`, a device or a
    /// pipe) and returns it open for writing.
    pub fn create(path: &Path) -> anyhow::Result<(WholeFile, std::fs::File)> {
        let cannot = |e: std::io::Error| {
            anyhow::anyhow!("cannot write {}: {}", path.display(), plain_io(&e))
        };
        if written_in_place(path) {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .map_err(cannot)?;
            return Ok((
                WholeFile {
                    path: path.to_path_buf(),
                    tmp: None,
                },
                f,
            ));
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let tmp = parent_dir(path).join(format!(".{name}.udamon-{}.tmp", std::process::id()));
        // Registered first: a signal between the two removes nothing of
        // another's, as the name carries our pid.
        crate::stop::remove_on_signal(&tmp);
        let create = || {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
        };
        // One there already is a dead process's (the name carries our
        // pid): removed (a link, not what it may point to) and made anew.
        let made = match create() {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&tmp).and_then(|()| create())
            }
            r => r,
        };
        let f = match made {
            Ok(f) => f,
            Err(e) => {
                crate::stop::forget(&tmp);
                return Err(cannot(e));
            }
        };
        Ok((
            WholeFile {
                path: path.to_path_buf(),
                tmp: Some(tmp),
            },
            f,
        ))
    }

    /// Where the work writes: the temporary file (or the device).
    pub fn path(&self) -> &Path {
        self.tmp.as_deref().unwrap_or(&self.path)
    }

    /// Puts the complete file in place: its data synced, a previous
    /// regular file at the name kept as `NAME.old` (one generation), then
    /// the temporary file renamed over the name, so the name never shows a
    /// partial file. Prints a note on stderr when a file was kept.
    pub fn commit(self) -> anyhow::Result<()> {
        self.put_in_place(true)
    }

    /// [`WholeFile::commit`] without keeping the previous file (files
    /// udamon names itself, such as man pages).
    pub fn replace(self) -> anyhow::Result<()> {
        self.put_in_place(false)
    }

    fn put_in_place(mut self, keep_old: bool) -> anyhow::Result<()> {
        let Some(tmp) = self.tmp.clone() else {
            return Ok(());
        };
        let path = self.path.clone();
        let cannot = |e: std::io::Error| {
            anyhow::anyhow!("cannot write {}: {}", path.display(), plain_io(&e))
        };
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(cannot)?;
        let mut kept = None;
        if keep_old && std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_dir()) {
            let old = old_path(&path);
            match std::fs::remove_file(&old) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(anyhow::anyhow!(
                        "cannot keep the previous {} as {}: {}",
                        path.display(),
                        old.display(),
                        plain_io(&e)
                    ))
                }
                _ => {}
            }
            // A second name for the previous file, so that the name itself
            // always holds a whole file; renamed where links are refused.
            std::fs::hard_link(&path, &old)
                .or_else(|_| std::fs::rename(&path, &old))
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot keep the previous {} as {}: {}",
                        path.display(),
                        old.display(),
                        plain_io(&e)
                    )
                })?;
            kept = Some(old);
        }
        std::fs::rename(&tmp, &path).map_err(cannot)?;
        crate::stop::forget(&tmp);
        self.tmp = None;
        if let Some(old) = kept {
            eprintln!(
                "udamon: kept the previous {} as {}",
                path.display(),
                old.display()
            );
        }
        Ok(())
    }
}

impl Drop for WholeFile {
    /// An uncommitted file (the work failed) is removed.
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(&tmp);
            crate::stop::forget(&tmp);
        }
    }
}

/// Writes `bytes` to `path` whole, the previous file kept as `NAME.old`
/// (see [`WholeFile`]).
pub fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let out = write_temp(path, bytes)?;
    out.commit()
}

/// Writes `bytes` to `path` whole, over the previous file (one udamon
/// names itself and makes again, such as an evaluation's table).
pub fn replace_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let out = write_temp(path, bytes)?;
    out.replace()
}

fn write_temp(path: &Path, bytes: &[u8]) -> anyhow::Result<WholeFile> {
    use std::io::Write;
    let (out, mut f) = WholeFile::create(path)?;
    f.write_all(bytes)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), plain_io(&e)))?;
    Ok(out)
}

/// Draws a heatmap into the image file `path`, whole (see [`WholeFile`]):
/// a PNG, or an SVG for [`udamon_report::HeatmapFormat::Svg`].
pub fn write_image(
    hm: &udamon_report::Heatmap,
    format: udamon_report::HeatmapFormat,
    opts: &udamon_report::ImageOptions,
    path: &Path,
) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let cannot = || format!("cannot write {}", path.display());
    let (out, file) = WholeFile::create(path)?;
    if format == udamon_report::HeatmapFormat::Svg {
        let mut f = std::io::BufWriter::new(file);
        hm.write_svg(&mut f, opts).with_context(cannot)?;
        f.flush().with_context(cannot)?;
    } else {
        drop(file);
        hm.write_png(out.path(), opts).with_context(cannot)?;
    }
    out.commit()
}

/// An I/O error in plain words, without Rust's "(os error N)" suffix.
pub fn plain_io(e: &std::io::Error) -> String {
    plain_words(&e.to_string())
}

/// A message without Rust's "(os error N)" suffixes, the system's words
/// they followed lower-cased: "x.udr: No such file or directory (os error
/// 2)" -> "x.udr: no such file or directory".
pub fn plain_words(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(" (os error ") {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        // The system's message starts after the last ": ", or at the start.
        let k = out.rfind(": ").map_or(0, |j| j + 2);
        if let Some(c) = out.get_mut(k..k + 1) {
            c.make_ascii_lowercase();
        }
        rest = tail.find(')').map_or("", |j| &tail[j + 1..]);
    }
    out.push_str(rest);
    out
}

/// A simulated run ([`udamon_session::sim::run`]) with a progress bar on
/// stderr over its simulated duration; `stop` ends it early.
pub fn run_sim(
    run: &udamon_session::sim::SimRun,
    out: Option<&Path>,
    stop: Option<&dyn Fn() -> bool>,
) -> anyhow::Result<udamon_session::sim::RunSummary> {
    let mut bar = Progress::new(0, "recording");
    let mut progress = |done: u64, total: u64| {
        bar.set_len(total);
        bar.set(done);
    };
    let hooks = udamon_session::sim::Hooks {
        progress: Some(&mut progress),
        stop,
        snapshot: None,
    };
    let s = udamon_session::sim::run(run, out, hooks)?;
    bar.finish();
    Ok(s)
}

/// The one-paragraph human summary of a live run.
pub fn print_summary(s: &udamon_session::LiveSummary) {
    let kb = |v: Option<u64>| v.map_or("?".into(), |k| udamon_report::fmt_bytes(k * 1024));
    let what = if s.pid == 0 || s.processes.is_some() {
        s.command.clone()
    } else {
        format!("pid {} ({})", s.pid, s.command)
    };
    println!(
        "monitored {what} with {} for {:.1}s ({}): {} snapshots, {:.0} regions on average",
        s.ops.name(),
        s.monitored_s,
        s.ended_by,
        s.snapshots,
        s.avg_nr_regions
    );
    println!(
        "  access checks see {}; snapshots from {}",
        s.access, s.source
    );
    print!(
        "  udamon CPU: {:.4} s per second ({:.4} while monitoring, {:.2} s to set up)",
        s.udamon_cpu_s_per_s, s.udamon_monitoring_cpu_s_per_s, s.udamon_setup_cpu_s
    );
    match s.kdamond_cpu_s_per_s {
        Some(k) => println!("; kdamond: {k:.4} s/s"),
        None => println!(),
    }
    if let (Some(n), Some(p)) = (s.softdirty_resets, s.softdirty_reset_period) {
        println!(
            "  soft-dirty: {n} reset(s), {}",
            udamon_report::summary::reset_period(p.last, p.min, p.max)
        );
    }
    if let Some(p) = s.processes {
        println!(
            "  processes: {} at the start, {} joined, {} left (each a target of the record; \
             `udamon report wss --by process` breaks it down)",
            p.at_start, p.joined, p.left
        );
    }
    if s.rss_start_kb.is_some() || s.rss_end_kb.is_some() {
        println!(
            "  target RSS {} -> {}; swap {}",
            kb(s.rss_start_kb),
            kb(s.rss_end_kb),
            kb(s.swap_end_kb)
        );
    }
    if let Some(o) = &s.output {
        println!("wrote {o} ({})", udamon_report::fmt_bytes(s.record_bytes));
    }
}

/// The per-scheme statistics table, then one description line per scheme.
pub fn print_scheme_table(reports: &[udamon_session::SchemeReport]) {
    println!(
        "{:>2}  {:<12} {:>9} {:>11} {:>10} {:>11} {:>9} {:>11}",
        "#", "action", "nr_tried", "sz_tried", "nr_applied", "sz_applied", "qt_exceed", "quota"
    );
    for r in reports {
        println!(
            "{:>2}  {:<12} {:>9} {:>11} {:>10} {:>11} {:>9} {:>11}",
            r.index,
            r.action,
            r.stats.nr_tried,
            udamon_report::fmt_bytes(r.stats.sz_tried),
            r.stats.nr_applied,
            udamon_report::fmt_bytes(r.stats.sz_applied),
            r.stats.qt_exceeds,
            if r.not_available
                .iter()
                .any(|n| n.starts_with("effective_quota_bytes"))
            {
                "n/a".into()
            } else {
                r.effective_quota_bytes
                    .map_or("unlimited".into(), udamon_report::fmt_bytes)
            }
        );
    }
    for r in reports {
        println!("    {}: {}", r.index, r.description);
        if let Some(b) = r.would_apply_bytes {
            println!(
                "       dry run: {} would have been applied to {} of distinct memory",
                r.action,
                udamon_report::fmt_bytes(b)
            );
        }
    }
    println!(
        "    (tried and applied add up over every apply pass, so they can exceed the memory's size)"
    );
    let mut na: Vec<&String> = reports.iter().flat_map(|r| &r.not_available).collect();
    na.sort();
    na.dedup();
    for n in na {
        println!("    n/a: {n}");
    }
}

/// The accuracy of a simulated run against its truth, one figure a line.
pub fn print_accuracy(acc: &udamon_sim::Accuracy, monitor: &str) {
    println!(
        "accuracy of {monitor} monitoring over {} windows (after {} warm-up windows):",
        acc.windows, acc.warmup_windows
    );
    println!(
        "  freq_mae   {:.4}   mean |estimated - true| access frequency",
        acc.freq_mae
    );
    println!(
        "  hot_f1     {:.3}    F1 of hot memory (frequency >= {})",
        acc.hot_f1, acc.hot_threshold
    );
    println!(
        "  wss_error  {:.3}    relative working-set size error",
        acc.wss_error
    );
    println!("  regions    {:.0}      on average", acc.avg_nr_regions);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The name holds the previous file until the new one is complete;
    /// committed, the previous one is `NAME.old`; dropped (a failure), the
    /// temporary file goes and nothing else changes.
    #[test]
    fn a_whole_file_appears_only_complete() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        std::fs::write(&p, "old").unwrap();
        std::fs::write(dir.path().join("out.txt.old"), "older").unwrap();
        let (out, mut f) = WholeFile::create(&p).unwrap();
        assert_ne!(out.path(), p);
        f.write_all(b"new, half").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        drop((out, f));
        assert_eq!(names(dir.path()), ["out.txt", "out.txt.old"]);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");

        let (out, mut f) = WholeFile::create(&p).unwrap();
        f.write_all(b"new").unwrap();
        drop(f);
        out.commit().unwrap();
        assert_eq!(names(dir.path()), ["out.txt", "out.txt.old"]);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out.txt.old")).unwrap(),
            "old"
        );
        // Replaced: no `.old` made of the previous one.
        replace_whole(&p, b"newer").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "newer");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out.txt.old")).unwrap(),
            "old"
        );
        // A device is written as it is.
        let (out, _) = WholeFile::create(Path::new("/dev/null")).unwrap();
        assert_eq!(out.path(), Path::new("/dev/null"));
        out.commit().unwrap();
    }

    /// Checked before the work, nothing moves: the previous file stays
    /// where it is until a commit.
    #[test]
    fn checking_an_output_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        std::fs::write(&p, "old").unwrap();
        check_output("--output", &p, &[], &[]).unwrap();
        assert_eq!(names(dir.path()), ["out.txt"]);
        // Keeping it would replace an input.
        let old = dir.path().join("out.txt.old");
        std::fs::write(&old, "an input").unwrap();
        let e = check_output("--output", &p, &[&old], &[]).unwrap_err();
        assert!(e.to_string().contains("cannot be kept as"), "{e}");
    }
}
