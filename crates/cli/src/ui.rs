//! Terminal helpers shared by the commands: progress bars and Ctrl-C.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Runs `f` on its own thread while a bar under `label` shows `position()`
/// out of `total` (no bar when `!show`, e.g. under `--json`).
pub fn with_progress<T: Send>(
    label: &str,
    total: u64,
    show: bool,
    position: impl Fn() -> u64,
    f: impl FnOnce() -> T + Send,
) -> T {
    let bar = if show {
        ProgressBar::new(total)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{msg:>28} [{bar:30}] {pos}/{len} {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(label.to_string());
    let out = std::thread::scope(|s| {
        let h = s.spawn(f);
        while !h.is_finished() {
            bar.set_position(position());
            std::thread::sleep(Duration::from_millis(100));
        }
        h.join()
    });
    bar.finish_and_clear();
    out.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// A flag Ctrl-C sets, so long runs stop cleanly and still report.
pub fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)) {
        tracing::warn!("Ctrl-C handler not installed ({e}); interrupting will not stop cleanly");
    }
    stop
}
