//! A child `fork`ed after the object-store runtime started (as DataLoader and Grain
//! workers are) reads through a runtime of its own: the parent's threads do not exist
//! in the child, and a reader opened in the parent, used in the child, would otherwise
//! wait on them forever. The child reads the whole epoch and exits with a status that
//! says whether every payload was right; an alarm ends it if it hangs, so a regression
//! fails this test instead of hanging it. Alone in its test binary: a fork copies only
//! the forking thread, and no other test's threads are then half-copied.
#![cfg(feature = "object-store")]

mod common;
mod http_server;

use std::sync::Arc;

use common::payload;
use http_server::Server;
use tfrecord_lirs::cloud::ObjectStoreFileSystem;
use tfrecord_lirs::{FetchOptions, Fetcher, OrderParams, Reader};

/// The child's exit statuses.
const RIGHT: i32 = 0;
const WRONG: i32 = 3;
const PANICKED: i32 = 4;

/// Reads an epoch of `reader` in fetch windows (ranged reads on the runtime) and a
/// few records by positioned reads; whether every payload is record `id`'s.
fn epoch_is_right(reader: &Arc<Reader>, n: usize, size: usize) -> bool {
    let order = reader
        .epoch_order(&OrderParams {
            seed: 3,
            ..Default::default()
        })
        .unwrap();
    let fetch = FetchOptions {
        threads: 64,
        window: 32,
        depth: 2,
    };
    let mut fetcher = Fetcher::new(Arc::clone(reader), order, fetch).unwrap();
    let mut seen = 0;
    while let Some(w) = fetcher.next_window() {
        let p = w.result.unwrap();
        for (k, &id) in w.ids.iter().enumerate() {
            if p.get(k).unwrap().unwrap() != &payload(id as usize, size)[..] {
                return false;
            }
            seen += 1;
        }
    }
    let one = reader.read(n as u64 - 1).unwrap();
    seen == n && one == payload(n - 1, size)
}

#[test]
fn a_forked_child_reads_through_its_own_runtime() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (n, size) = (400, 900);
    let all: Vec<Vec<u8>> = (0..n).map(|i| payload(i, size)).collect();
    server.put_padded(dir.path(), "d.tfrecord", &all);
    // Opened and read in the parent: the runtime and the bucket's client are started.
    let reader = server.open_reader("d.tfrecord", ObjectStoreFileSystem::new());
    assert!(epoch_is_right(&reader, n, size));

    // SAFETY: the child runs only this test's code on the one thread a fork copies,
    // and leaves by `_exit` (no destructor or harness code of the parent runs there).
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        // SAFETY: alarm and _exit are async-signal-safe; the alarm's default action
        // ends a child that hangs, which the parent sees as a signal.
        unsafe { libc::alarm(120) };
        let status = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            epoch_is_right(&reader, n, size)
        })) {
            Ok(true) => RIGHT,
            Ok(false) => WRONG,
            Err(_) => PANICKED,
        };
        // SAFETY: see above.
        unsafe { libc::_exit(status) };
    }
    let mut status = 0;
    // SAFETY: waits for the child this test forked.
    let waited = unsafe { libc::waitpid(child, &mut status, 0) };
    assert_eq!(waited, child);
    assert!(
        !libc::WIFSIGNALED(status),
        "the child was ended by signal {} (SIGALRM {}: it hung)",
        libc::WTERMSIG(status),
        libc::SIGALRM
    );
    assert_eq!(libc::WEXITSTATUS(status), RIGHT, "the child's reads failed");
    // The parent's runtime is untouched by the child's.
    assert!(epoch_is_right(&reader, n, size));
}
