//! Parallel, pipelined fetching of an epoch order (after RINAS): the ids of the next
//! few windows of the order are read concurrently by a pool of I/O threads while the
//! consumer works on the current window.
//!
//! Each window (at least `window` ids, extended to the end of a page-aware unit) is cut
//! into runs of consecutive ids, the runs are spread over the pool, and each run is one
//! coalesced read ([`Reader::read_batch`]). Windows are delivered in order, and payloads
//! within a window in the order's order, so the sequence is the same as reading the
//! order one id at a time.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::order::EpochOrder;
use crate::reader::{Batch, Reader};

/// Settings of a [`Fetcher`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchOptions {
    /// I/O threads (at least 1).
    pub threads: usize,
    /// Ids per window, at least (a page-aware window is extended to a unit boundary).
    pub window: usize,
    /// Windows in flight ahead of the consumer (at least 1).
    pub depth: usize,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            threads: 4,
            window: 256,
            depth: 4,
        }
    }
}

struct Job {
    window: u64,
    part: usize,
    ids: Vec<u64>,
}

struct Done {
    window: u64,
    part: usize,
    result: Result<Batch>,
}

/// A window being fetched: its ids in order, and the parts that came back.
struct Pending {
    ids: Vec<u64>,
    parts: Vec<Option<Batch>>,
    missing: usize,
    error: Option<Error>,
}

/// Reads an [`EpochOrder`] window by window with a pool of threads.
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("d");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..500u32 { w.write(&i.to_le_bytes())?; }
/// # w.finish()?;
/// use std::sync::Arc;
/// use tfrecord_lirs::{FetchOptions, Fetcher, OrderSpec, Reader};
/// let reader = Arc::new(Reader::open_one(&path, None, &Default::default())?);
/// let order = reader.epoch_order(&OrderSpec { seed: 1, page_aware: true, ..Default::default() })?;
/// let mut fetcher = Fetcher::new(Arc::clone(&reader), order, FetchOptions::default())?;
/// let mut n = 0;
/// while let Some(batch) = fetcher.next_batch() {
///     n += batch?.len();
/// }
/// assert_eq!(n, 500);
/// # Ok(()) }
/// ```
pub struct Fetcher {
    order: EpochOrder,
    options: FetchOptions,
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    pending: BTreeMap<u64, Pending>,
    next_window: u64,
    next_deliver: u64,
    delivered: u64,
}

impl Fetcher {
    /// Starts the pool; fetching begins with the first `next_batch`.
    pub fn new(reader: Arc<Reader>, order: EpochOrder, options: FetchOptions) -> Result<Fetcher> {
        if options.threads == 0 || options.window == 0 || options.depth == 0 {
            return Err(Error::InvalidArgument(format!(
                "fetch options need threads, window and depth of at least 1, got {options:?}"
            )));
        }
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let workers = (0..options.threads)
            .map(|_| {
                let jobs = Arc::clone(&job_rx);
                let done = done_tx.clone();
                let reader = Arc::clone(&reader);
                std::thread::spawn(move || loop {
                    // The lock is held only while taking a job, never while reading.
                    let job = match jobs.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    let mut batch = Batch::default();
                    let result = reader.read_batch(&job.ids, &mut batch).map(|()| batch);
                    let sent = done.send(Done {
                        window: job.window,
                        part: job.part,
                        result,
                    });
                    if sent.is_err() {
                        return;
                    }
                })
            })
            .collect();
        let delivered = order.position();
        Ok(Fetcher {
            order,
            options,
            jobs: Some(job_tx),
            done: done_rx,
            workers,
            pending: BTreeMap::new(),
            next_window: 0,
            next_deliver: 0,
            delivered,
        })
    }

    /// Ids handed out so far in this epoch (failed windows included).
    pub fn position(&self) -> u64 {
        self.delivered
    }

    /// Ids in this shard's epoch.
    pub fn len(&self) -> u64 {
        self.order.len()
    }

    /// Whether the epoch is empty.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Queues windows until `depth` are in flight or the order is exhausted.
    fn submit(&mut self) {
        let Some(jobs) = &self.jobs else { return };
        while self.pending.len() < self.options.depth {
            let mut ids = Vec::with_capacity(self.options.window);
            if self.order.next_window(self.options.window, &mut ids) == 0 {
                return;
            }
            let parts = split_runs(&ids, self.options.threads);
            let window = self.next_window;
            self.next_window += 1;
            let count = parts.len();
            for (part, part_ids) in parts.into_iter().enumerate() {
                // A closed channel means the workers are gone; the wait below reports it.
                let _ = jobs.send(Job {
                    window,
                    part,
                    ids: part_ids,
                });
            }
            self.pending.insert(
                window,
                Pending {
                    ids,
                    parts: (0..count).map(|_| None).collect(),
                    missing: count,
                    error: None,
                },
            );
        }
    }

    /// The next window: its ids, and its payloads or the first read error among them
    /// (so a caller can retry the ids one by one). `None` at the end of the epoch.
    pub fn next_window(&mut self) -> Option<Window> {
        self.submit();
        let head = self.next_deliver;
        loop {
            match self.pending.get(&head) {
                None => return None,
                Some(p) if p.missing == 0 => break,
                Some(_) => {}
            }
            let Ok(done) = self.done.recv() else {
                let ids = self
                    .pending
                    .remove(&head)
                    .map(|p| p.ids)
                    .unwrap_or_default();
                return Some(Window {
                    ids,
                    result: Err(Error::InvalidArgument(
                        "fetch threads stopped unexpectedly".into(),
                    )),
                });
            };
            if let Some(p) = self.pending.get_mut(&done.window) {
                p.missing -= 1;
                match done.result {
                    Ok(batch) => p.parts[done.part] = Some(batch),
                    Err(e) => {
                        p.error.get_or_insert(e);
                    }
                }
            }
        }
        let window = self.pending.remove(&head).expect("present");
        self.next_deliver += 1;
        self.delivered += window.ids.len() as u64;
        let result = match window.error {
            Some(e) => Err(e),
            None => Ok(assemble(
                &window.ids,
                window.parts.into_iter().flatten().collect(),
            )),
        };
        self.submit();
        Some(Window {
            ids: window.ids,
            result,
        })
    }

    /// The next window's payloads, in order; `None` at the end of the epoch.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        self.next_window().map(|w| w.result)
    }
}

/// One window of an epoch order, as fetched.
#[derive(Debug)]
pub struct Window {
    /// The ids of the window, in order.
    pub ids: Vec<u64>,
    /// Their payloads, or the first error reading them.
    pub result: Result<Batch>,
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.jobs = None; // workers see the closed channel and exit
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Cuts a window into at most `parts` id lists, each a set of whole runs of consecutive
/// ids (sorted), balanced by count.
fn split_runs(ids: &[u64], parts: usize) -> Vec<Vec<u64>> {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    let target = sorted.len().div_ceil(parts.max(1));
    let mut out: Vec<Vec<u64>> = Vec::new();
    let mut current = Vec::new();
    for (k, &id) in sorted.iter().enumerate() {
        let run_continues = k > 0 && (id == sorted[k - 1] || id == sorted[k - 1] + 1);
        if !run_continues && current.len() >= target {
            out.push(std::mem::take(&mut current));
        }
        current.push(id);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Puts the parts' payloads back in window order.
fn assemble(ids: &[u64], parts: Vec<Batch>) -> Batch {
    // Each id (possibly repeated) → where its payload is.
    let mut where_is: std::collections::HashMap<u64, (usize, usize)> =
        std::collections::HashMap::with_capacity(ids.len());
    for (p, part) in parts.iter().enumerate() {
        for (j, &id) in part.ids.iter().enumerate() {
            where_is.insert(id, (p, j));
        }
    }
    let mut out = Batch::default();
    out.data
        .reserve(parts.iter().map(|p| p.data.len()).sum::<usize>());
    for &id in ids {
        let (p, j) = where_is[&id];
        out.data.extend_from_slice(parts[p].payload(j));
        out.ends.push(out.data.len());
        out.ids.push(id);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_runs_whole() {
        let parts = split_runs(&[9, 3, 4, 5, 1, 10, 11, 20], 3);
        let all: Vec<u64> = parts.iter().flatten().copied().collect();
        assert_eq!(all, vec![1, 3, 4, 5, 9, 10, 11, 20]);
        for p in &parts {
            assert!(!p.is_empty());
        }
        // 3,4,5 stay together; so do 9,10,11.
        assert!(parts.iter().any(|p| p.windows(3).any(|w| w == [3, 4, 5])));
        assert!(parts.iter().any(|p| p.windows(3).any(|w| w == [9, 10, 11])));
        assert!(split_runs(&[], 4).is_empty());
    }
}
