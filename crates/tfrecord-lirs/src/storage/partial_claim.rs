//! Claims on the entries of a disk partial store (`docs/FORMAT.md` §7.1): the jobs that
//! share a store while they run compute each `(id, generation)` once. Before computing
//! a missing entry a process claims it: an exclusive `flock` of the file
//! `.claim-<id>.<generation>` in the namespace directory, held while it computes and
//! stores the entry, then the file is removed and the lock released. The others find
//! the lock held and wait for it, then read the entry.
//!
//! A `flock` is released by the kernel when its process dies (SIGKILL included), so a
//! killed member never blocks the rest: a waiter finds the lock free and the claim file
//! still in place (a finished holder removes it before unlocking) and takes the claim
//! over. A claim file is locked before it appears at its path (made under a temporary
//! name, locked, then hard-linked into place, which fails if a claim is there), so one
//! found unlocked is a dead holder's. A lock is only the current claim if its file is
//! still the one at the path (same device and inode): one taken on a file the holder
//! has removed meanwhile means "the holder finished", and the waiter looks the entry up
//! again.
//!
//! A waiter blocks in `flock` on the claim file, so the kernel wakes it the moment the
//! holder releases the lock (finished or dead): no polling, whose pauses would add
//! up to one pause per wait to entries that take about a millisecond to compute. The
//! wait is bounded ([`CLAIM_WAIT`]; the blocking `flock` runs on a thread of its own,
//! which drops the lock at once if it comes after the waiter gave up): a holder alive
//! but stuck (stopped, in a debugger) delays the others by at most that much per
//! entry, then they compute it themselves (the same output: its seed is the entry's).
//! Claims are an economy, never a condition: a claim file that cannot be made (a
//! read-only or removed directory) means computing without one.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::waiter_threads::WaiterThreads;

/// The prefix of claim files (`.claim-<id>.<generation>`).
pub(crate) const CLAIM_PREFIX: &str = ".claim-";

/// The longest a process waits for another's claim on one entry before computing the
/// entry itself. Partial augmentations take milliseconds; a minute is a holder that is
/// stopped or stuck, not one that is slow.
pub const CLAIM_WAIT: Duration = Duration::from_secs(60);

/// A claim held: the locked claim file, removed then unlocked when dropped (after the
/// entry was stored, or on failure: then a waiter claims the entry and computes it).
#[derive(Debug)]
pub struct Claim {
    file: Option<File>,
    path: PathBuf,
}

impl Claim {
    /// Releases the lock and leaves the claim file in place, as a killed process does
    /// (tests of taking over).
    #[cfg(test)]
    pub(crate) fn abandon(mut self) {
        self.file.take();
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            // Removed before the lock is released: a waiter that then gets the lock
            // sees the file gone, i.e. the holder finished.
            let _ = fs::remove_file(&self.path);
            drop(file);
        }
    }
}

/// What claiming an entry came to.
#[derive(Debug)]
pub(crate) enum Claimed {
    /// The claim is this process's: no one held it.
    Mine(Claim),
    /// The claim is this process's, taken over from a holder that died (or left its
    /// claim file behind).
    TakenOver(Claim),
    /// Another process held the claim and finished (the entry is stored, unless it did
    /// not fit or the holder failed): look it up again.
    Released,
    /// Another process held the claim for [`CLAIM_WAIT`]: compute without one.
    GaveUp,
}

/// The claim file of `(id, generation)` in the namespace directory `dir`.
pub(crate) fn claim_path(dir: &Path, id: u64, generation: u64) -> PathBuf {
    dir.join(format!("{CLAIM_PREFIX}{id}.{generation}"))
}

/// Whether `file` is still the file at `path`.
fn is_current(path: &Path, file: &File) -> io::Result<bool> {
    let held = file.metadata()?;
    Ok(match fs::metadata(path) {
        Ok(now) => (now.dev(), now.ino()) == (held.dev(), held.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    })
}

/// A new claim file at `path`, locked before it appears there: made as `temp`, locked,
/// then hard-linked to `path` (which fails if a claim is there). `None`: one is.
fn place(path: &Path, temp: &Path) -> io::Result<Option<File>> {
    let file = OpenOptions::new().write(true).create_new(true).open(temp)?;
    let placed = file
        .try_lock()
        .map_err(io::Error::from)
        .and_then(|()| fs::hard_link(temp, path));
    let _ = fs::remove_file(temp);
    match placed {
        Ok(()) => Ok(Some(file)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(e),
    }
}

/// Claims the entry whose claim file is `path` (`temp`: a name of this process's for
/// a new claim file, beside it), waiting (at most `wait`) for another process's claim.
/// `waited` is called once if it had to wait.
pub(crate) fn claim(
    path: &Path,
    temp: &Path,
    wait: Duration,
    waited: impl FnOnce(),
) -> io::Result<Claimed> {
    let held = |file| Claim {
        file: Some(file),
        path: path.to_path_buf(),
    };
    if let Some(file) = place(path, temp)? {
        return Ok(Claimed::Mine(held(file)));
    }
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        // Removed since: its holder finished (or a sweep took a dead one's).
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Claimed::Released),
        Err(e) => return Err(e),
    };
    // A claim file is locked from the moment it appears until its holder removes it
    // (finished) or dies: found unlocked and still in place, its holder is dead.
    let start = Instant::now();
    match file.try_lock() {
        Ok(()) if is_current(path, &file)? => return Ok(Claimed::TakenOver(held(file))),
        Ok(()) => return Ok(Claimed::Released),
        Err(TryLockError::WouldBlock) if !is_current(path, &file)? => {
            // Removed, the lock not yet released: finished.
            return Ok(Claimed::Released);
        }
        Err(TryLockError::WouldBlock) => {}
        Err(TryLockError::Error(e)) => return Err(e),
    }
    waited();
    let left = wait.saturating_sub(start.elapsed());
    if left.is_zero() {
        return Ok(Claimed::GaveUp);
    }
    Ok(match lock_within(file, left)? {
        // Released: by a holder that finished (and removed the file first) or died.
        Some(file) if is_current(path, &file)? => Claimed::TakenOver(held(file)),
        Some(_) => Claimed::Released,
        None => Claimed::GaveUp,
    })
}

/// Blocks until `file`'s lock is this process's, for at most `wait`: the file, locked,
/// or `None` if the wait ran out. The blocking `flock` runs on a thread of its own (it
/// has no timeout; one of [`WaiterThreads`], kept for the next wait); a lock it gets
/// after the wait ran out is released at once, as the thread's send fails and drops
/// the file.
fn lock_within(file: File, wait: Duration) -> io::Result<Option<File>> {
    static WAITERS: WaiterThreads = WaiterThreads::new("lirs-claim-wait");
    let (tx, rx) = mpsc::channel();
    WAITERS.run(move || {
        let locked = file.lock().map(|()| file);
        let _ = tx.send(locked);
    })?;
    match rx.recv_timeout(wait) {
        Ok(locked) => locked.map(Some),
        Err(_) => Ok(None),
    }
}

/// Removes the claim file `path` if no process holds its lock (a dead holder's, left
/// behind; a claim file is locked from the moment it appears).
pub(crate) fn sweep_claim(path: &Path) {
    if let Ok(file) = OpenOptions::new().write(true).open(path) {
        if file.try_lock().is_ok() && is_current(path, &file).unwrap_or(false) {
            let _ = fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn temp(path: &Path) -> PathBuf {
        path.with_extension("tmp")
    }

    fn mine(claimed: Claimed) -> Claim {
        match claimed {
            Claimed::Mine(claim) => claim,
            other => panic!("not a new claim: {other:?}"),
        }
    }

    /// Claims `path` on another thread; returns when that thread is waiting for the
    /// claim (its `waited` ran), with the thread's outcome to come.
    fn waiter(path: &Path) -> std::thread::JoinHandle<Claimed> {
        let (tx, rx) = mpsc::channel();
        let path = path.to_path_buf();
        let handle = std::thread::spawn(move || {
            claim(&path, &temp(&path), CLAIM_WAIT, || tx.send(()).unwrap()).unwrap()
        });
        rx.recv().expect("the waiter found the claim held");
        handle
    }

    #[test]
    fn a_waiter_sees_the_holder_finish() {
        let dir = tempfile::tempdir().unwrap();
        let path = claim_path(dir.path(), 7, 2);
        let held =
            mine(claim(&path, &temp(&path), CLAIM_WAIT, || panic!("no one held it")).unwrap());
        let waiting = waiter(&path);
        drop(held);
        assert!(matches!(waiting.join().unwrap(), Claimed::Released));
        assert!(!path.exists());
        // Free again: the next claim is a new one.
        drop(mine(
            claim(&path, &temp(&path), CLAIM_WAIT, || panic!()).unwrap(),
        ));
    }

    #[test]
    fn a_dead_holders_claim_is_taken_over_by_its_waiter() {
        let dir = tempfile::tempdir().unwrap();
        let path = claim_path(dir.path(), 7, 2);
        let held = mine(claim(&path, &temp(&path), CLAIM_WAIT, || panic!()).unwrap());
        let waiting = waiter(&path);
        // As the kernel does for a killed process: the lock goes, the file stays.
        held.abandon();
        let taken = match waiting.join().unwrap() {
            Claimed::TakenOver(claim) => claim,
            other => panic!("not taken over: {other:?}"),
        };
        // Held by the new holder: another waits for it.
        let third = waiter(&path);
        drop(taken);
        assert!(matches!(third.join().unwrap(), Claimed::Released));
    }

    #[test]
    fn a_claim_file_left_behind_is_taken_over_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = claim_path(dir.path(), 1, 0);
        mine(claim(&path, &temp(&path), CLAIM_WAIT, || panic!()).unwrap()).abandon();
        assert!(path.exists());
        let claimed = claim(&path, &temp(&path), CLAIM_WAIT, || panic!("it is free")).unwrap();
        assert!(matches!(claimed, Claimed::TakenOver(_)));
    }

    #[test]
    fn the_wait_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = claim_path(dir.path(), 1, 0);
        let _held = mine(claim(&path, &temp(&path), CLAIM_WAIT, || panic!()).unwrap());
        let mut waited = false;
        let claimed = claim(&path, &temp(&path), Duration::ZERO, || waited = true).unwrap();
        assert!(matches!(claimed, Claimed::GaveUp));
        assert!(waited);
    }

    fn opened(path: &Path) -> File {
        OpenOptions::new().write(true).open(path).unwrap()
    }

    #[test]
    fn a_blocked_wait_gets_the_lock_its_holder_releases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let holder = File::create(&path).unwrap();
        holder.lock().unwrap();
        let waiting = {
            let file = opened(&path);
            std::thread::spawn(move || lock_within(file, CLAIM_WAIT).unwrap())
        };
        drop(holder);
        let got = waiting.join().unwrap().expect("woken with the lock");
        // Held by the waiter now.
        assert!(matches!(
            opened(&path).try_lock(),
            Err(TryLockError::WouldBlock)
        ));
        drop(got);
        assert!(opened(&path).try_lock().is_ok());
    }

    #[test]
    fn a_lock_that_comes_after_the_wait_ran_out_is_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let holder = File::create(&path).unwrap();
        holder.lock().unwrap();
        assert!(lock_within(opened(&path), Duration::from_millis(1))
            .unwrap()
            .is_none());
        // The abandoned wait gets the lock now and must not keep it: another waiter
        // gets it in turn.
        drop(holder);
        assert!(lock_within(opened(&path), CLAIM_WAIT).unwrap().is_some());
    }

    #[test]
    fn a_sweep_removes_only_claims_no_one_holds() {
        let dir = tempfile::tempdir().unwrap();
        let (left, held) = (claim_path(dir.path(), 1, 0), claim_path(dir.path(), 2, 0));
        mine(claim(&left, &temp(&left), CLAIM_WAIT, || panic!()).unwrap()).abandon();
        let _held = mine(claim(&held, &temp(&held), CLAIM_WAIT, || panic!()).unwrap());
        sweep_claim(&left);
        sweep_claim(&held);
        assert!(!left.exists());
        assert!(held.exists());
    }
}
