//! Stop requests: SIGINT (Ctrl-C), SIGTERM and SIGHUP end a run the same way
//! on every path. The handler only sets a flag; each run loop checks it
//! between snapshots, stops, flushes its record and prints its summary.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static STOP: AtomicBool = AtomicBool::new(false);

/// What must not outlive a forced exit (our kdamond), undone by the
/// second signal before it exits.
static ON_FORCE: Mutex<Option<Box<dyn Fn() + Send>>> = Mutex::new(None);

/// Catches SIGINT, SIGTERM and SIGHUP from now on (once per process). The
/// first asks the run to stop; a second, while it cleans up, forces the
/// exit (status 130) after running the [`on_force`] hook.
pub fn install() {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // ctrlc runs this on its own thread, not in signal context.
        let _ = ctrlc::set_handler(|| {
            if STOP.swap(true, Ordering::SeqCst) {
                if let Ok(hook) = ON_FORCE.lock() {
                    if let Some(f) = hook.as_ref() {
                        f();
                    }
                }
                eprintln!("udamon: second signal: exiting now");
                std::process::exit(130);
            }
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
