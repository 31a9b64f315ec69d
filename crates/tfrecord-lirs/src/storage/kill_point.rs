//! Test-only kill points of the writers (feature `fault-injection`): a crash test runs a
//! writer (the CLI's `pad`, `index`) with `TFRECORD_LIRS_KILL_AT=<point>` or
//! `<point>:<n>`, and the process kills itself with `SIGKILL` the `n`th time (default
//! the first) it reaches that point, so every kill lands at a known step of the write.
//! Without the feature a kill point is nothing.

/// Kills this process with `SIGKILL` if `TFRECORD_LIRS_KILL_AT` names this point (and
/// this is the time it names).
#[cfg(feature = "fault-injection")]
pub(crate) fn kill_point(point: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static AT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static REACHED: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        let spec = std::env::var("TFRECORD_LIRS_KILL_AT").ok()?;
        Some(match spec.split_once(':') {
            Some((name, n)) => (name.to_string(), n.parse().ok()?),
            None => (spec, 1),
        })
    });
    if let Some((name, n)) = at {
        if name == point && REACHED.fetch_add(1, Ordering::Relaxed) + 1 == *n {
            // SAFETY: a plain syscall; the process ends here, as a crash would end it.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn kill_point(_point: &str) {}
