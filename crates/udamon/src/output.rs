//! Terminal conventions shared by every subcommand: colour, progress, JSON.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::UsageError;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and NO_COLOR is not set.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stdout().is_terminal()
            }
        }
    }
}

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

/// Gets an output file ready before any work starts, so that nothing is lost
/// and no long run ends in "cannot write": refuses a path that is one of the
/// `inputs` or another output of the same command (`others`), a directory,
/// or a directory that does not exist or cannot be written; an existing
/// regular file is kept as `NAME.old`, as `perf record` keeps `perf.data.old`
/// (one generation: an older `.old` is replaced). Devices and pipes such as
/// `/dev/null` are written as they are. Returns a note for stderr when a
/// file was kept.
pub fn prepare_output(
    flag: &str,
    path: &Path,
    inputs: &[&Path],
    others: &[&Path],
) -> anyhow::Result<Option<String>> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).ok();
    if let Some(m) = &meta {
        let same =
            |p: &Path| std::fs::metadata(p).is_ok_and(|o| o.dev() == m.dev() && o.ino() == m.ino());
        if let Some(i) = inputs.iter().find(|i| same(i)) {
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
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "{flag} {shown}: directory {} does not exist",
            dir.display()
        ))
        .into());
    }
    let Some(m) = meta else {
        // A new file: make sure the directory takes one now, not after the run.
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let probe = dir.join(format!(".{name}.udamon-{}", std::process::id()));
        return match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
        {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
                Ok(None)
            }
            Err(e) => Err(UsageError(format!(
                "{flag} {shown}: cannot create a file in {}: {}",
                dir.display(),
                plain_io(&e)
            ))
            .into()),
        };
    };
    if !m.is_file() {
        return Ok(None);
    }
    let mut old = path.as_os_str().to_owned();
    old.push(".old");
    let old = PathBuf::from(old);
    std::fs::rename(path, &old).map_err(|e| {
        UsageError(format!(
            "{flag} {shown}: exists and cannot be kept as {}: {}",
            old.display(),
            plain_io(&e)
        ))
    })?;
    Ok(Some(format!(
        "kept the previous {shown} as {}",
        old.display()
    )))
}

/// [`prepare_output`], printing its note on stderr.
pub fn prepare(flag: &str, path: &Path, inputs: &[&Path], others: &[&Path]) -> anyhow::Result<()> {
    if let Some(note) = prepare_output(flag, path, inputs, others)? {
        eprintln!("udamon: {note}");
    }
    Ok(())
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
