//! The crate's worker threads: how many to use, how they are named and started, and
//! how helpers that share the caller's work are run and joined. Used by the parallel
//! scan, the scanner's read-ahead, the fetch pool and the lease watcher.
//!
//! Starting a thread can fail (resource limits); every user is written so that the
//! work still gets done without it (the caller, or the other threads, do its share).

use std::thread::{Builder, JoinHandle};

/// Threads worth using for CPU-bound work: the available parallelism, capped at `max`
/// (at least 1).
pub(crate) fn threads_up_to(max: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(max)
        .max(1)
}

/// Starts a thread named `name` running `work`; `Err` when the OS cannot start one.
pub(crate) fn spawn<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    Builder::new().name(name.into()).spawn(work)
}

/// Runs each of `helpers` on its own thread (named `{name}-1`, `{name}-2`, ...) while
/// `main` runs on the calling thread, then joins them and returns `main`'s result; a
/// helper's panic is raised again here. A helper whose thread cannot be started is
/// dropped without running: the work must be shared out so that the others (and
/// `main`) do its share.
pub(crate) fn with_helpers<R, F: FnOnce() + Send>(
    name: &str,
    helpers: impl IntoIterator<Item = F>,
    main: impl FnOnce() -> R,
) -> R {
    std::thread::scope(|s| {
        let running: Vec<_> = helpers
            .into_iter()
            .enumerate()
            .filter_map(|(i, helper)| {
                Builder::new()
                    .name(format!("{name}-{}", i + 1))
                    .spawn_scoped(s, helper)
                    .ok()
            })
            .collect();
        let result = main();
        for helper in running {
            if let Err(panic) = helper.join() {
                std::panic::resume_unwind(panic);
            }
        }
        result
    })
}

/// The text of a panic payload (a `&str` or `String` message, as `panic!` makes).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn helpers_run_beside_main_and_are_joined() {
        let done = AtomicUsize::new(0);
        let helpers = (0..3).map(|_| {
            || {
                done.fetch_add(1, Ordering::SeqCst);
            }
        });
        let got = with_helpers("lirs-test", helpers, || 7);
        assert_eq!(got, 7);
        assert_eq!(done.load(Ordering::SeqCst), 3);
        assert!((1..=4).contains(&threads_up_to(4)));
        assert_eq!(spawn("lirs-test", || 5).unwrap().join().unwrap(), 5);
    }
}
