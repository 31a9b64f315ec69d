//! The fetch threads: a pool that reads parts of windows, each read under
//! `catch_unwind`, so a panic becomes that part's `Internal` error instead of a dead
//! thread (and a consumer waiting forever for its reply).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};

use super::parts::{read_part, PartRead};
use super::payloads::Spares;
use super::schedule::DeferredIds;
use crate::read::reader::Reader;

/// One part of a window for a fetch thread to read.
pub(super) struct Job {
    pub window: u64,
    pub part: usize,
    /// The ids to read (empty with `deferred`).
    pub ids: Vec<u64>,
    /// The ids to read, still to compute (unless the consumer has).
    pub deferred: Option<DeferredIds>,
}

/// A part as read (or the panic that stopped its read).
pub(super) struct Done {
    pub window: u64,
    pub part: usize,
    /// `Err` only for a panic while reading the part (a window-level failure).
    pub result: Result<PartRead>,
}

/// The fetch threads and their two channels; dropping it stops and joins them. Jobs go
/// out in groups, read one after the other by one thread, whose results come back
/// together: one wake-up of each side per group.
pub(super) struct Threads {
    jobs: Option<mpsc::Sender<Vec<Job>>>,
    done: mpsc::Receiver<Vec<Done>>,
    /// Set on drop: the workers pass over the jobs still queued instead of reading
    /// them, and give up the part they are reading before its next read, so only the
    /// reads in progress (one request per thread) are waited for, not up to `depth`
    /// windows of them, nor the rest of a part (seconds on remote storage).
    stopping: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The process that started the threads: a child forked from it (a PyTorch
    /// DataLoader worker forked while a walk was in progress here) has a copy of this
    /// value but not the threads, so it must not join them.
    pid: u32,
}

impl Threads {
    /// Starts `threads` fetch threads reading from `reader` into buffers from
    /// `spares`; while `test_panic` is set (feature `fault-injection`), every job
    /// panics.
    pub fn start(
        threads: usize,
        reader: &Arc<Reader>,
        spares: &Spares,
        #[cfg(feature = "fault-injection")] test_panic: &Arc<AtomicBool>,
    ) -> Result<Threads> {
        let (job_tx, job_rx) = mpsc::channel::<Vec<Job>>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let stopping = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel::<Vec<Done>>();
        let threads = (0..threads)
            .map(|_| {
                let jobs = Arc::clone(&job_rx);
                let stopping = Arc::clone(&stopping);
                let done = done_tx.clone();
                let reader = Arc::clone(reader);
                let spares = spares.clone();
                #[cfg(feature = "fault-injection")]
                let test_panic = Arc::clone(test_panic);
                crate::pool::spawn("lirs-fetch", move || loop {
                    // The lock is held only while taking a job, never while reading.
                    let group = match jobs.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(group) = group else { return };
                    if stopping.load(Ordering::Relaxed) {
                        continue; // the fetcher is gone: drain the queue unread
                    }
                    let mut read = Vec::with_capacity(group.len());
                    for job in group {
                        // The buffer a panic may have left half-written is dropped,
                        // not reused.
                        let result = catch_unwind(AssertUnwindSafe(|| {
                            #[cfg(feature = "fault-injection")]
                            if test_panic.load(Ordering::Relaxed) {
                                panic!("test panic injected into a fetch thread");
                            }
                            let ids = match &job.deferred {
                                Some(deferred) => deferred.ids(),
                                None => &job.ids,
                            };
                            let mut batch = spares.take();
                            // Abandoned: the batch, half-read, is dropped.
                            let failed = read_part(&reader, ids, &mut batch, &stopping).ok()?;
                            Some(PartRead { batch, failed })
                        }));
                        let result = match result {
                            Ok(Some(part)) => Ok(part),
                            // The fetcher is being dropped: nobody waits for this group.
                            Ok(None) => break,
                            Err(payload) => Err(part_panic(&job, payload.as_ref())),
                        };
                        read.push(Done {
                            window: job.window,
                            part: job.part,
                            result,
                        });
                    }
                    if stopping.load(Ordering::Relaxed) {
                        // The fetcher is being dropped (a part may be abandoned, missing):
                        // the group is not handed out.
                        continue;
                    }
                    if done.send(read).is_err() {
                        return;
                    }
                })
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| Error::invalid_argument(format!("cannot start fetch threads: {e}")))?;
        Ok(Threads {
            pid: std::process::id(),
            jobs: Some(job_tx),
            done: done_rx,
            stopping,
            threads,
        })
    }

    /// Queues `group` for one thread, which reads its jobs in order (a closed channel
    /// means the workers are gone; `recv` reports it).
    pub fn send(&self, group: Vec<Job>) {
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(group);
        }
    }

    /// The parts of the next group read; `None` once every thread is gone (cannot
    /// happen while they catch panics).
    pub fn recv(&self) -> Option<Vec<Done>> {
        self.done.recv().ok()
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.jobs = None; // workers see the closed channel and exit
        if self.pid != std::process::id() {
            // Forked: the threads exist only in the parent; their handles are moot here.
            std::mem::forget(std::mem::take(&mut self.threads));
            return;
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The window-level error for a panic while reading `job`.
pub(super) fn part_panic(job: &Job, payload: &(dyn std::any::Any + Send)) -> Error {
    let message = crate::pool::panic_message(payload);
    Error::internal(match &job.deferred {
        Some(deferred) => format!(
            "panic in a tfrecord-lirs fetch thread computing and reading the ids of {} \
             positions from position {}: {message}",
            deferred.len(),
            deferred.first().unwrap_or_default(),
        ),
        None => format!(
            "panic in a tfrecord-lirs fetch thread reading {} instances from instance \
             {}: {message}",
            job.ids.len(),
            job.ids.first().copied().unwrap_or_default(),
        ),
    })
}
