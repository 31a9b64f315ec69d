//! One data-loading worker's batches of a shard's walk: batches `i` with
//! `i % workers == worker` (batches of `batch` positions), as an order of their own.
//! The workers of a process together deliver exactly the shard's batches, so the
//! number of batches an epoch has does not depend on how many workers there are.
//!
//! Windows never cross a batch bound of the shard's walk (the next batch is another
//! worker's): page-aware, a unit astride two batches is read by each worker that
//! holds a part of it.

use crate::error::{Error, Result};

use crate::read::fetch::OrderSource;

/// Positions of worker `worker` of `workers` when a walk of `len` positions is cut
/// into batches of `batch` dealt out in turn.
pub fn worker_batches_len(len: u64, batch: u64, workers: u64, worker: u64) -> u64 {
    let batch = batch.max(1);
    let batches = len.div_ceil(batch);
    if workers == 0 || worker >= batches {
        return 0;
    }
    let mine = (batches - 1 - worker) / workers + 1;
    let last = (mine - 1) * workers + worker;
    let last_len = if last == batches - 1 {
        len - last * batch
    } else {
        batch
    };
    (mine - 1) * batch + last_len
}

/// The walk of one worker's batches of `inner` (positions counted in the worker's
/// walk).
pub(crate) struct BatchSplit {
    inner: Box<dyn OrderSource>,
    batch: u64,
    workers: u64,
    worker: u64,
    len: u64,
    position: u64,
    scratch: Vec<u64>,
}

impl BatchSplit {
    pub(crate) fn new(
        inner: Box<dyn OrderSource>,
        batch: u64,
        workers: u64,
        worker: u64,
    ) -> Result<BatchSplit> {
        if workers == 0 || worker >= workers {
            return Err(Error::invalid_argument(format!(
                "worker_index must be in [0, worker_count), got worker_index={worker} \
                 worker_count={workers}"
            )));
        }
        let batch = batch.max(1);
        let len = worker_batches_len(inner.len(), batch, workers, worker);
        let mut split = BatchSplit {
            inner,
            batch,
            workers,
            worker,
            len,
            position: 0,
            scratch: Vec::new(),
        };
        split.seek(0)?;
        Ok(split)
    }

    /// The inner position of this walk's `position` (< len).
    fn inner_position(&self, position: u64) -> u64 {
        let (j, r) = (position / self.batch, position % self.batch);
        (j * self.workers + self.worker) * self.batch + r
    }

    /// Moves the inner order to `target`: back, or in an order of version 2 (ids
    /// computed from positions), by seeking; forward in version 1 by taking ids
    /// (seeking a page-aware one walks its units from the start).
    fn move_inner(&mut self, target: u64) -> Result<()> {
        let at = self.inner.position();
        if target < at || self.inner.version() == 2 {
            return self.inner.seek(target);
        }
        let mut left = target - at;
        while left > 0 {
            self.scratch.clear();
            let want = usize::try_from(left.min(1 << 16)).unwrap_or(1 << 16);
            let got = self.inner.next_batch(want, &mut self.scratch) as u64;
            if got == 0 {
                return Err(Error::internal(format!(
                    "a worker's batches: the shard's walk ended at position {} before {target}",
                    self.inner.position()
                )));
            }
            left -= got.min(left);
        }
        Ok(())
    }

    fn take(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
        let mut taken = 0usize;
        while taken < max && self.position < self.len {
            let in_batch = self.batch - self.position % self.batch;
            let want = (max - taken) as u64;
            let want = want.min(in_batch).min(self.len - self.position);
            if self.move_inner(self.inner_position(self.position)).is_err() {
                break;
            }
            let got = self
                .inner
                .next_batch(usize::try_from(want).unwrap_or(usize::MAX), out);
            if got == 0 {
                break;
            }
            taken += got;
            self.position += got as u64;
        }
        taken
    }
}

impl OrderSource for BatchSplit {
    fn version(&self) -> u32 {
        self.inner.version()
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn position(&self) -> u64 {
        self.position
    }
    fn seek(&mut self, position: u64) -> Result<()> {
        if position > self.len {
            return Err(Error::data_loss(format!(
                "position {position} is past the end of this worker's batches ({} positions)",
                self.len
            )));
        }
        if position < self.len {
            let target = self.inner_position(position);
            if target < self.inner.position() {
                self.inner.seek(target)?;
            }
        }
        self.position = position;
        Ok(())
    }
    fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
        self.take(min, out)
    }
    fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
        self.take(max, out)
    }
    // `next_positions`: the default (none): the ids are taken batch by batch.
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfrecord_lirs_format::order::{EpochOrder, OrderParams, OrderVersion};

    #[test]
    fn workers_take_whole_batches_in_turn_and_together_the_walk() {
        for version in [OrderVersion::V1, OrderVersion::V2] {
            for (len, batch) in [(0u64, 4u64), (1, 4), (10, 3), (1000, 7), (1001, 1000)] {
                let params = OrderParams {
                    seed: 3,
                    ..OrderParams::default()
                };
                let whole: Vec<u64> = EpochOrder::of_len(len, &params, version).unwrap().collect();
                let batches: Vec<&[u64]> = whole.chunks(batch as usize).collect();
                for workers in 1..=4u64 {
                    for worker in 0..workers {
                        let inner = Box::new(EpochOrder::of_len(len, &params, version).unwrap());
                        let mut split = BatchSplit::new(inner, batch, workers, worker).unwrap();
                        let mut got = Vec::new();
                        while split.next_window(5, &mut got) > 0 {}
                        let want: Vec<u64> = batches
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| *i as u64 % workers == worker)
                            .flat_map(|(_, b)| b.iter().copied())
                            .collect();
                        assert_eq!(got, want, "{version:?} {len} {batch} {workers}/{worker}");
                        assert_eq!(split.len(), want.len() as u64);
                        assert_eq!(worker_batches_len(len, batch, workers, worker), split.len());
                        // A seek back and forth lands on the same ids.
                        if split.len() > 2 {
                            split.seek(1).unwrap();
                            let mut again = Vec::new();
                            split.next_batch(usize::MAX, &mut again);
                            assert_eq!(again, want[1..]);
                        }
                    }
                }
            }
        }
        assert!(BatchSplit::new(
            Box::new(EpochOrder::of_len(3, &OrderParams::default(), OrderVersion::V1).unwrap()),
            2,
            2,
            2
        )
        .is_err());
    }
}
