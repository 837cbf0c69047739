//! Stop requests: SIGINT (Ctrl-C), SIGTERM and SIGHUP end a run the same way
//! on every path. The handler only sets a flag; each run loop checks it
//! between snapshots, stops, flushes its record and prints its summary.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Catches SIGINT, SIGTERM and SIGHUP from now on (once per process).
pub fn install() {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst));
    });
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}
