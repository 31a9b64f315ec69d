//! [`WorkerEpochs`]: the epoch each data-loading worker process of a loader walks,
//! shared with the process that made the workers through a small file.
//!
//! A PyTorch `DataLoader` walks an iterable dataset in copies of it in its worker
//! processes: forked or unpickled from the main process's copy, whose own epoch never
//! moves (it never walks), and either made afresh every iteration of the `DataLoader`
//! or kept (`persistent_workers`), each beginning one walk per iteration. The rule:
//! every iteration of the `DataLoader` walks the epoch after the one the iteration
//! before walked (the epoch set last, for the first after a set), so each is a fresh
//! permutation without a call from the user, and `set_epoch` still picks the epoch.
//!
//! The workers of one iteration know it by a key: the `DataLoader`'s base seed (drawn
//! afresh for every iteration and handed to each of its workers) and how many walks
//! the worker's process began (1 in a worker made for the iteration; the iteration's
//! number in a persistent one). A worker beginning a walk takes the epoch of a slot
//! holding its key (another worker of its iteration began first), else the epoch after
//! the furthest slot's (a new iteration). Workers of one iteration decide alike with
//! no lock: they read the same slots of the iteration before, and any of their own
//! holds the same epoch. A worker stopped before it began (an iteration cut short)
//! leaves no gap.
//!
//! The file: a header (`LIRSWEP2`, the epoch set last, a generation counted up by
//! every set; written by the main process only, between iterations) and one slot per
//! worker (the generation, the key and the epoch of its last walk; written by that
//! worker only). The file is removed when the [`WorkerEpochs`] of the process that made
//! it is dropped.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"LIRSWEP2";
const HEADER: u64 = 24;
const SLOT: u64 = 32;

/// The epochs a loader's worker processes walk (see the module docs).
#[derive(Debug)]
pub struct WorkerEpochs {
    file: File,
    path: PathBuf,
    /// The process that made the file (and removes it): copies in forked workers
    /// must not.
    owner: Option<u32>,
    /// Walks this process began (a forked copy starts from the maker's 0).
    walks: u64,
}

/// A worker's slot: its last walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    generation: u64,
    base_seed: u64,
    walk: u64,
    epoch: u64,
}

impl WorkerEpochs {
    /// A new file in `dir` (its name unique to this process and object), its epoch 0.
    pub fn create(dir: &Path) -> Result<WorkerEpochs> {
        let mut random = [0u8; 8];
        unique_bits(&mut random);
        let path = dir.join(format!(
            "tfrecord-lirs-epochs-{}-{:016x}",
            std::process::id(),
            u64::from_le_bytes(random)
        ));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let epochs = WorkerEpochs {
            file,
            path,
            owner: Some(std::process::id()),
            walks: 0,
        };
        epochs.write_header(0, 1)?;
        Ok(epochs)
    }

    /// A new file in memory (`/dev/shm`) where the system has it, else in the
    /// temporary directory.
    pub fn create_here() -> Result<WorkerEpochs> {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            if let Ok(epochs) = WorkerEpochs::create(shm) {
                return Ok(epochs);
            }
        }
        WorkerEpochs::create(&std::env::temp_dir())
    }

    /// The file another process made (a worker process given its path).
    pub fn open(path: &Path) -> Result<WorkerEpochs> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let epochs = WorkerEpochs {
            file,
            path: path.to_path_buf(),
            owner: None,
            walks: 0,
        };
        epochs.header()?;
        Ok(epochs)
    }

    /// Whether this process made the file (the main process, not a worker).
    pub fn is_maker(&self) -> bool {
        self.owner == Some(std::process::id())
    }

    /// Where the file is (what a worker process opens).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The epoch every worker's next walk walks (the main process, between iterations).
    pub fn set_epoch(&self, epoch: u64) -> Result<()> {
        let (_, generation) = self.header()?;
        self.write_header(epoch, generation.wrapping_add(1))
    }

    /// The epoch worker `worker`'s walk beginning now walks, in the iteration of the
    /// `DataLoader` whose base seed is `base_seed` (see the module docs); `restored`:
    /// the epoch of a state restored in this worker, which its walk goes on with.
    pub fn begin(&mut self, worker: u64, base_seed: u64, restored: Option<u64>) -> Result<u64> {
        self.walks = self.walks.saturating_add(1);
        let (set, generation) = self.header()?;
        let slots = self.slots(generation)?;
        let epoch = match restored {
            Some(epoch) => epoch,
            None => match slots
                .iter()
                .find(|s| (s.base_seed, s.walk) == (base_seed, self.walks))
            {
                Some(same_iteration) => same_iteration.epoch,
                None => slots
                    .iter()
                    .map(|s| s.epoch.saturating_add(1))
                    .max()
                    .unwrap_or(set),
            },
        };
        self.write_slot(
            worker,
            Slot {
                generation,
                base_seed,
                walk: self.walks,
                epoch,
            },
        )?;
        Ok(epoch)
    }

    /// The epoch the workers' next iteration walks.
    pub fn furthest(&self) -> Result<u64> {
        let (set, generation) = self.header()?;
        let slots = self.slots(generation)?;
        Ok(slots
            .iter()
            .map(|s| s.epoch.saturating_add(1))
            .max()
            .unwrap_or(set))
    }

    /// Whether any worker began a walk since the epoch was set.
    pub fn walked(&self) -> Result<bool> {
        let (_, generation) = self.header()?;
        Ok(!self.slots(generation)?.is_empty())
    }

    /// The slots written since the epoch was set (generation `generation`).
    fn slots(&self, generation: u64) -> Result<Vec<Slot>> {
        let mut bytes = Vec::new();
        let len = self
            .file
            .metadata()
            .map_err(|e| Error::io(&self.path, e))?
            .len();
        bytes.resize(usize::try_from(len.saturating_sub(HEADER)).unwrap_or(0), 0);
        // Workers extend the file only by whole slots; a short read (one being
        // extended right now) leaves its slot out, as one not yet written.
        let n = self
            .file
            .read_at(&mut bytes, HEADER)
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(bytes[..n]
            .chunks_exact(SLOT as usize)
            .map(|c| Slot {
                generation: word(c, 0),
                base_seed: word(c, 1),
                walk: word(c, 2),
                epoch: word(c, 3),
            })
            .filter(|s| s.generation == generation)
            .collect())
    }

    fn write_slot(&self, worker: u64, slot: Slot) -> Result<()> {
        let mut bytes = [0u8; SLOT as usize];
        for (i, w) in [slot.generation, slot.base_seed, slot.walk, slot.epoch]
            .into_iter()
            .enumerate()
        {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        self.file
            .write_all_at(&bytes, slot_offset(worker)?)
            .map_err(|e| Error::io(&self.path, e))
    }

    fn header(&self) -> Result<(u64, u64)> {
        let mut header = [0u8; HEADER as usize];
        self.file
            .read_exact_at(&mut header, 0)
            .map_err(|e| Error::io(&self.path, e))?;
        if &header[..8] != MAGIC {
            return Err(Error::invalid_argument(format!(
                "{} is not a tfrecord-lirs worker epochs file",
                self.path.display()
            )));
        }
        Ok((word(&header, 1), word(&header, 2)))
    }

    fn write_header(&self, epoch: u64, generation: u64) -> Result<()> {
        let mut header = [0u8; HEADER as usize];
        header[..8].copy_from_slice(MAGIC);
        header[8..16].copy_from_slice(&epoch.to_le_bytes());
        header[16..].copy_from_slice(&generation.to_le_bytes());
        self.file
            .write_all_at(&header, 0)
            .map_err(|e| Error::io(&self.path, e))
    }
}

impl Drop for WorkerEpochs {
    fn drop(&mut self) {
        if self.is_maker() {
            // Nothing to report from a drop; a file left behind holds 24 bytes a worker.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn word(bytes: &[u8], index: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[index * 8..index * 8 + 8]);
    u64::from_le_bytes(w)
}

fn slot_offset(worker: u64) -> Result<u64> {
    worker
        .checked_mul(SLOT)
        .and_then(|o| o.checked_add(HEADER))
        .ok_or_else(|| Error::invalid_argument(format!("worker index {worker} is too large")))
}

/// Bytes unique enough to name a file: the clock, the stack's address and a
/// process-wide counter through SipHash (a name clash only fails `create_new`).
fn unique_bits(out: &mut [u8; 8]) {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    *out = h.finish().to_le_bytes();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    /// A worker process's copy of the maker's file (forked: the maker's walk count).
    fn worker_of(main: &WorkerEpochs) -> WorkerEpochs {
        WorkerEpochs::open(main.path()).unwrap()
    }

    #[test]
    fn each_iteration_of_fresh_workers_walks_the_next_epoch() {
        let d = dir();
        let main = WorkerEpochs::create(d.path()).unwrap();
        for (iteration, seed) in [(0u64, 11u64), (1, 7), (2, 90), (3, 5)] {
            // Workers made for the iteration, beginning in any order.
            for w in [2u64, 0, 1] {
                assert_eq!(worker_of(&main).begin(w, seed, None).unwrap(), iteration);
            }
        }
        assert_eq!(main.furthest().unwrap(), 4);
        assert!(main.walked().unwrap());
    }

    #[test]
    fn a_worker_that_never_began_leaves_no_gap() {
        let d = dir();
        let main = WorkerEpochs::create(d.path()).unwrap();
        // Iteration 0 cut short: worker 1 was stopped before it began.
        assert_eq!(worker_of(&main).begin(0, 40, None).unwrap(), 0);
        // Iteration 1: both walk epoch 1, whoever begins first.
        assert_eq!(worker_of(&main).begin(1, 41, None).unwrap(), 1);
        assert_eq!(worker_of(&main).begin(0, 41, None).unwrap(), 1);
    }

    #[test]
    fn persistent_workers_count_their_walks() {
        let d = dir();
        let main = WorkerEpochs::create(d.path()).unwrap();
        let mut workers = [worker_of(&main), worker_of(&main)];
        for iteration in 0..3 {
            for (w, worker) in workers.iter_mut().enumerate().rev() {
                assert_eq!(worker.begin(w as u64, 99, None).unwrap(), iteration);
            }
        }
    }

    #[test]
    fn set_epoch_is_honoured_and_a_restored_epoch_goes_on() {
        let d = dir();
        let main = WorkerEpochs::create(d.path()).unwrap();
        assert_eq!(worker_of(&main).begin(0, 1, None).unwrap(), 0);
        main.set_epoch(7).unwrap();
        assert!(!main.walked().unwrap());
        assert_eq!(main.furthest().unwrap(), 7);
        assert_eq!(worker_of(&main).begin(0, 2, None).unwrap(), 7);
        assert_eq!(worker_of(&main).begin(1, 2, None).unwrap(), 7);
        assert_eq!(worker_of(&main).begin(0, 3, None).unwrap(), 8);
        // A new run restored at epoch 3 in its workers: then 4.
        let fresh = WorkerEpochs::create(d.path()).unwrap();
        assert_eq!(worker_of(&fresh).begin(0, 5, Some(3)).unwrap(), 3);
        assert_eq!(worker_of(&fresh).begin(1, 5, Some(3)).unwrap(), 3);
        assert_eq!(worker_of(&fresh).begin(1, 6, None).unwrap(), 4);
    }

    #[test]
    fn the_maker_removes_the_file_and_a_copy_does_not() {
        let d = dir();
        let main = WorkerEpochs::create(d.path()).unwrap();
        let path = main.path().to_path_buf();
        drop(WorkerEpochs::open(&path).unwrap());
        assert!(path.exists());
        drop(main);
        assert!(!path.exists());
        let e = WorkerEpochs::open(&path).unwrap_err();
        assert!(e.to_string().contains("tfrecord-lirs-epochs"), "{e}");
    }

    #[test]
    fn a_file_of_something_else_is_refused() {
        let d = dir();
        let path = d.path().join("other");
        std::fs::write(&path, [7u8; 40]).unwrap();
        let e = WorkerEpochs::open(&path).unwrap_err();
        assert!(
            e.to_string()
                .contains("not a tfrecord-lirs worker epochs file"),
            "{e}"
        );
    }
}
