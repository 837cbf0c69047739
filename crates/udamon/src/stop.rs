//! Stop requests: SIGINT (Ctrl-C), SIGTERM and SIGHUP end a run the same way
//! on every path. The handler only sets a flag; each run loop checks it
//! between snapshots, stops, flushes its record and prints its summary.
//!
//! A command that does not check the flag (one that writes a file whole:
//! `cut`, `report html`, a heatmap image, ...) ends at the first signal
//! instead, once the temporary files it was writing are removed, so that
//! a signal leaves the previous output in place and nothing beside it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static STOP: AtomicBool = AtomicBool::new(false);

/// Whether the command checks [`requested`] (set by [`install`]).
static POLLED: AtomicBool = AtomicBool::new(false);

/// What must not outlive a forced exit (our kdamond), undone by the
/// second signal before it exits.
static ON_FORCE: Mutex<Option<Box<dyn Fn() + Send>>> = Mutex::new(None);

/// Temporary files to remove before a signal ends the process
/// ([`remove_on_signal`]).
static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Catches SIGINT, SIGTERM and SIGHUP from now on, for a command that
/// checks [`requested`]. The first asks the run to stop; a second, while it
/// cleans up, forces the exit (status 130) after running the [`on_force`]
/// hook and removing the temporary files.
pub fn install() {
    POLLED.store(true, Ordering::SeqCst);
    catch();
}

/// Catches the signals (once per process).
fn catch() {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // ctrlc runs this on its own thread, not in signal context.
        let _ = ctrlc::set_handler(|| {
            let again = STOP.swap(true, Ordering::SeqCst);
            let polled = POLLED.load(Ordering::SeqCst);
            if polled && !again {
                return;
            }
            if polled {
                if let Ok(hook) = ON_FORCE.lock() {
                    if let Some(f) = hook.as_ref() {
                        f();
                    }
                }
            }
            let mut removed = 0;
            if let Ok(temps) = TEMPS.lock() {
                for t in temps.iter() {
                    removed += usize::from(std::fs::remove_file(t).is_ok());
                }
            }
            let unfinished = if removed > 0 {
                "; the unfinished output was removed, the previous one is where it was"
            } else {
                ""
            };
            if polled {
                eprintln!("udamon: second signal: exiting now{unfinished}");
            } else {
                eprintln!("udamon: interrupted{unfinished}");
            }
            std::process::exit(130);
        });
    });
}

/// Sets (or with `None` clears) what a forced exit must undo first.
pub fn on_force(hook: Option<Box<dyn Fn() + Send>>) {
    if let Ok(mut h) = ON_FORCE.lock() {
        *h = hook;
    }
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Removes `path` (a temporary file of ours) if a signal ends the process
/// before [`forget`] is called for it; catches the signals from now on.
pub fn remove_on_signal(path: &Path) {
    if let Ok(mut t) = TEMPS.lock() {
        t.push(path.to_path_buf());
    }
    catch();
}

/// `path` is no longer a temporary file to remove (it was renamed into
/// place, or removed).
pub fn forget(path: &Path) {
    if let Ok(mut t) = TEMPS.lock() {
        t.retain(|p| p != path);
    }
}

/// Ends a command a signal interrupted before its output `path` was
/// complete (its temporary file already removed): says so, exit 130.
pub fn exit_interrupted(path: &Path) -> ! {
    eprintln!(
        "udamon: interrupted; {} was not written (a previous one is where it was)",
        path.display()
    );
    std::process::exit(130);
}
