//! A batch read with many reads in flight (remote storage): on object storage, every
//! run a request in flight (`ranged.rs`); through other file systems, the sorted ids
//! cut between runs into parts, each part read by a thread through the copied
//! strategy.

use crate::error::{Error, Result};

use crate::read::batch::Batch;
use crate::storage::ranged::ReadScope;

use super::ranged::RangedPlan;
use super::{choose, Reader, Request, Strategy};

impl Reader {
    /// [`read_batch`](Reader::read_batch) with many reads in flight where they pay, as
    /// the one read-strategy selector decides (every front end's batch call: the
    /// TensorFlow op's and Python's `read_many`). On object storage every run is a
    /// request in flight, no thread each; on other
    /// remote storage (a URL) the distinct ids, sorted, are cut into up to
    /// [`REMOTE_AUTO_THREADS`](crate::REMOTE_AUTO_THREADS) parts read at once (RINAS: a
    /// request waits on the network, not on a core), cut only between runs of
    /// consecutive ids, so neighbours stay together and are fetched by one ranged read
    /// (as `read_batch` merges them); an id asked for twice is read once. Local files
    /// are read by the calling thread. The result, and the error (the lowest failing
    /// id's, as `read_batch` reports it), are those of `read_batch`; a panic in a read
    /// is an [`Internal`](crate::ErrorKind::Internal) error.
    pub fn read_batch_concurrent(&self, ids: &[u64], out: &mut Batch) -> Result<()> {
        let strategy = match choose(self, Request::Batch(ids.len())) {
            Strategy::Ranged(in_flight) => match self.plan_ranged(ids) {
                Some(plan) => return self.read_batch_requests(ids, plan, out, in_flight),
                None => choose(self, Request::BatchWithoutRequests(ids.len())),
            },
            other => other,
        };
        let parts = match strategy {
            Strategy::Threads(parts) => parts,
            _ => return self.read_batch(ids, out),
        };
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let cuts = run_cuts(&sorted, parts);
        // One part, on whichever thread: a panic is this part's Internal error.
        let read_part = |part: &[u64]| -> Result<Batch> {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut batch = Batch::default();
                self.read_batch(part, &mut batch).map(|()| batch)
            }))
            .unwrap_or_else(|_| Err(Error::internal("a concurrent read panicked")))
        };
        let results: Vec<Result<Batch>> = std::thread::scope(|s| {
            let running: Vec<_> = cuts
                .windows(2)
                .map(|w| {
                    let part = &sorted[w[0]..w[1]];
                    std::thread::Builder::new()
                        .name("lirs-read".into())
                        .spawn_scoped(s, move || read_part(part))
                        .map_err(|_| part)
                })
                .collect();
            running
                .into_iter()
                .map(|started| match started {
                    // read_part catches the part's panics: join fails only if that did.
                    Ok(handle) => handle
                        .join()
                        .unwrap_or_else(|_| Err(Error::internal("a concurrent read panicked"))),
                    // No thread to be had: this part is read here.
                    Err(part) => read_part(part),
                })
                .collect()
        });
        let parts = results.into_iter().collect::<Result<Vec<Batch>>>()?;
        out.clear();
        for &id in ids {
            // Every id is in `sorted`, hence in the part its position falls into.
            let at = sorted.partition_point(|&s| s < id);
            let part = cuts.partition_point(|&c| c <= at) - 1;
            out.push(id, parts[part].payload(at - cuts[part]));
        }
        Ok(())
    }

    /// Object storage: every run a request in flight, no thread each; what the ranged
    /// read leaves (an error to name) is read as `read_batch` does.
    fn read_batch_requests(
        &self,
        ids: &[u64],
        plan: RangedPlan,
        out: &mut Batch,
        in_flight: usize,
    ) -> Result<()> {
        let scope = ReadScope::new(in_flight);
        let (sent, arrived) = std::sync::mpsc::channel();
        let batch = std::mem::take(out);
        self.read_batch_ranged(
            ids.to_vec(),
            plan,
            batch,
            &scope,
            Box::new(move |assembled| {
                let _ = sent.send(assembled);
            }),
        );
        if let Some(batch) = arrived.recv().ok().and_then(|a| a.decode(self)) {
            *out = batch;
            return Ok(());
        }
        self.read_batch(ids, out)
    }
}

/// Where to cut `sorted` (distinct ids, ascending) into about `parts` parts of equal
/// size: the start of each part and then `sorted.len()`. A cut never falls inside a
/// run of consecutive ids, so a run is read by one part (and one ranged read).
pub(super) fn run_cuts(sorted: &[u64], parts: usize) -> Vec<usize> {
    let chunk = sorted.len().div_ceil(parts.max(1)).max(1);
    let mut cuts = vec![0];
    let mut at = 0;
    while at < sorted.len() {
        let mut end = (at + chunk).min(sorted.len());
        while end < sorted.len() && sorted[end] == sorted[end - 1] + 1 {
            end += 1;
        }
        cuts.push(end);
        at = end;
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::run_cuts;

    #[test]
    fn cuts_fall_between_runs_only() {
        // Runs 0..=5, 9, 20..=22, 30: four parts of ~3 would cut the first run.
        let sorted = [0, 1, 2, 3, 4, 5, 9, 20, 21, 22, 30];
        let cuts = run_cuts(&sorted, 4);
        assert_eq!(cuts, [0, 6, 10, 11]);
        for w in cuts.windows(2).skip(1) {
            assert_ne!(
                sorted[w[0]],
                sorted[w[0] - 1] + 1,
                "cut inside a run: {cuts:?}"
            );
        }
        // Scattered ids: parts of equal size.
        let scattered: Vec<u64> = (0..10).map(|i| i * 2).collect();
        assert_eq!(run_cuts(&scattered, 5), [0, 2, 4, 6, 8, 10]);
        assert_eq!(run_cuts(&[7], 32), [0, 1]);
    }
}
