//! The walk of a [`DatasetCursor`]: its order, its fetch, the slots it serves, the
//! error policy and the checkpoint state it reports (see the module `cursor`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::error::{Error, Result};

use super::options::{first_window, CursorOptions};
use super::order::{open_order, Slice};
use super::state::CursorState;
use super::view::BatchView;
use crate::pool::panic_message;
use crate::read::elastic::{EpochState, ShardState};
use crate::read::fetch::{DeliveredLedger, Fetcher, OrderSource, Payloads, Resume};
use crate::read::reader::Reader;

/// The window being served.
struct Current {
    payloads: Arc<Payloads>,
    positions: Vec<u64>,
    /// The next slot to serve.
    next: usize,
    /// No slot failed: every slot is served without looking for its error.
    all_read: bool,
}

/// One slot of the walk.
enum Step {
    /// Slot `slot` of the current window, at `position`, was read.
    Record {
        slot: usize,
        position: u64,
    },
    /// The slot at `position` failed (or, for a failed window, its first position).
    Failed {
        error: Error,
        position: u64,
    },
    End,
}

/// Which test panics are armed (feature `fault-injection`).
#[cfg(feature = "fault-injection")]
#[derive(Default, Clone, Copy)]
struct TestPanics {
    fetch_worker: bool,
    next_window: bool,
}

/// Walks one epoch of a dataset: records one by one ([`next_element`]) or in batches
/// ([`next_batch`]), with the error policy, ordered or unordered delivery and the
/// checkpoint state described in the module docs.
///
/// [`next_element`]: DatasetCursor::next_element
/// [`next_batch`]: DatasetCursor::next_batch
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("d");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..100u32 { w.write(&i.to_le_bytes())?; }
/// # w.finish()?;
/// use std::sync::Arc;
/// use tfrecord_lirs::{CursorOptions, CursorState, DatasetCursor, Reader};
/// let reader = Arc::new(Reader::open_one(&path, None, &Default::default())?);
/// let mut options = CursorOptions::dataset(&reader, 32, -1)?;
/// options.order.seed = 7;
/// let mut cursor = DatasetCursor::new(Arc::clone(&reader), options, &CursorState::start())?;
/// let first = cursor.next_batch().unwrap()?;
/// assert_eq!(first.len(), 32);
/// let saved = cursor.state().encode();
/// let rest: usize = std::iter::from_fn(|| cursor.next_batch()).map(|b| b.unwrap().len()).sum();
/// assert_eq!(rest, 68);
/// // A new cursor from the saved bytes delivers the same rest.
/// let state = CursorState::decode(&saved)?;
/// let mut again = DatasetCursor::new(reader, options, &state)?;
/// assert_eq!(again.next_batch().unwrap()?.len(), 32);
/// # Ok(()) }
/// ```
pub struct DatasetCursor {
    reader: Arc<Reader>,
    options: CursorOptions,
    /// The elastic resume point the walk started from, when positions of the epoch
    /// were delivered before it (by another set of shards); `None`: the epoch's start.
    base: Option<Arc<EpochState>>,
    slice: Slice, // What of the shard's epoch is walked.
    len: u64,
    order_version: u32,
    /// `None` after a window failed as a whole: started again at the next call.
    fetcher: Option<Fetcher>,
    /// Positions taken from the fetch (every window handed over, and positions
    /// passed by window-level errors): where a fresh fetcher starts.
    taken: DeliveredLedger,
    /// Positions delivered to the caller: the checkpoint state.
    delivered: DeliveredLedger,
    current: Option<Current>,
    /// The batch being filled (kept across errors), and the positions it has passed
    /// (its records' and its errors').
    batch: BatchView,
    batch_positions: Vec<u64>,
    #[cfg(feature = "fault-injection")]
    test_panics: TestPanics,
}

impl DatasetCursor {
    /// A cursor over `reader`'s epoch of `options.order`, at `state`
    /// ([`CursorState::start`] for a fresh epoch). The fetch starts now, so a failure
    /// to start it is reported here; a state that cannot belong to this epoch is
    /// [`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss).
    pub fn new(
        reader: Arc<Reader>,
        options: CursorOptions,
        state: &CursorState,
    ) -> Result<DatasetCursor> {
        DatasetCursor::open(reader, options, None, Slice::Whole, state)
    }

    /// Elastic resume: a cursor over shard `options.order.shard_index` of
    /// `options.order.num_shards` of the epoch at `base` (what every shard of an
    /// earlier run delivered: [`EpochState::combine`]), at `state` (a position of
    /// this shard's walk: [`CursorState::start`] for the first cursor of the new run,
    /// its own checkpoint after that). The new shards together deliver every position
    /// `base` does not hold, once (docs/FORMAT.md §6); a fresh `base` is an ordinary
    /// epoch. `base` must be of this dataset's order version, seed, epoch,
    /// page-awareness and instances ([`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss)
    /// naming what differs).
    ///
    /// ```
    /// # fn main() -> tfrecord_lirs::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("d");
    /// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
    /// # for i in 0..100u32 { w.write(&i.to_le_bytes())?; }
    /// # w.finish()?;
    /// use std::sync::Arc;
    /// use tfrecord_lirs::{CursorOptions, CursorState, DatasetCursor, EpochState, Reader};
    /// let reader = Arc::new(Reader::open_one(&path, None, &Default::default())?);
    /// let options = |k, n| -> tfrecord_lirs::Result<CursorOptions> {
    ///     let mut o = CursorOptions::dataset(&reader, 10, -1)?;
    ///     (o.order.seed, o.order.shard_index, o.order.num_shards) = (7, k, n);
    ///     Ok(o)
    /// };
    /// // Two workers each take one batch, and checkpoint.
    /// let mut states = Vec::new();
    /// for k in 0..2 {
    ///     let mut c = DatasetCursor::new(Arc::clone(&reader), options(k, 2)?, &CursorState::start())?;
    ///     c.next_batch().unwrap()?;
    ///     states.push(c.shard_state());
    /// }
    /// let epoch = EpochState::combine(&states)?;
    /// // Three workers deliver the other 80.
    /// let mut rest = 0;
    /// for j in 0..3 {
    ///     let mut c = DatasetCursor::resume(Arc::clone(&reader), options(j, 3)?, &epoch, &CursorState::start())?;
    ///     while let Some(b) = c.next_batch() { rest += b?.len(); }
    /// }
    /// assert_eq!(rest, 80);
    /// # Ok(()) }
    /// ```
    pub fn resume(
        reader: Arc<Reader>,
        options: CursorOptions,
        base: &EpochState,
        state: &CursorState,
    ) -> Result<DatasetCursor> {
        base.check_fits(&reader, &options.order, options.order_version)?;
        let base = (!base.is_fresh()).then(|| Arc::new(base.clone()));
        DatasetCursor::open(reader, options, base, Slice::Whole, state)
    }

    pub(super) fn open(
        reader: Arc<Reader>,
        options: CursorOptions,
        base: Option<Arc<EpochState>>,
        slice: Slice,
        state: &CursorState,
    ) -> Result<DatasetCursor> {
        let order = open_order(&reader, &options, base.as_deref(), slice)?;
        let (len, order_version) = (order.len(), order.version());
        state.check(len, order_version)?;
        let ledger = DeliveredLedger::new(state.position, state.delivered_after.iter().copied());
        let mut cursor = DatasetCursor {
            reader,
            options,
            base,
            slice,
            len,
            order_version,
            fetcher: None,
            taken: ledger.clone(),
            delivered: ledger,
            current: None,
            batch: BatchView::default(),
            batch_positions: Vec::new(),
            #[cfg(feature = "fault-injection")]
            test_panics: TestPanics::default(),
        };
        cursor.fetcher = Some(cursor.start_fetch(order)?);
        Ok(cursor)
    }

    /// Moves to `state` (a checkpoint): the cursor is rebuilt, and left as it was if
    /// that fails.
    pub fn restore(&mut self, state: &CursorState) -> Result<()> {
        *self = DatasetCursor::open(
            Arc::clone(&self.reader),
            self.options,
            self.base.clone(),
            self.slice,
            state,
        )?;
        Ok(())
    }

    /// The former name of [`shard_state`](DatasetCursor::shard_state).
    #[deprecated(since = "0.2.0", note = "renamed `shard_state`")]
    pub fn progress(&self) -> ShardState {
        self.shard_state()
    }

    /// What was delivered, for elastic resume ([`EpochState::combine`] of every
    /// shard's): the resume point the walk started from, the shard and
    /// [`state`](DatasetCursor::state).
    pub fn shard_state(&self) -> ShardState {
        let base = match &self.base {
            Some(base) => (**base).clone(),
            None => EpochState::fresh_of(
                &self.reader,
                &self.options.order,
                self.options.order_version,
            ),
        };
        ShardState {
            base,
            num_shards: self.options.order.num_shards,
            shard_index: self.options.order.shard_index,
            state: self.state(),
            remainder: self.options.shard_remainder,
        }
    }

    /// What was delivered (see the module docs): the checkpoint state.
    pub fn state(&self) -> CursorState {
        let Resume { position, after } = self.delivered.resume();
        CursorState {
            order_version: self.order_version,
            position,
            delivered_after: after,
        }
    }

    /// The options the cursor walks with.
    pub fn options(&self) -> &CursorOptions {
        &self.options
    }

    /// Instances in this shard's epoch.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the epoch is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The next record's payload; `Err` for an instance that could not be read (or a
    /// window that failed as a whole), which passes its position; `None` at the end of
    /// the epoch. For `batch_size == 0`.
    pub fn next_element(&mut self) -> Option<Result<&[u8]>> {
        let slot = match self.next_record_slot()? {
            Ok(slot) => slot,
            Err(e) => return Some(Err(e)),
        };
        let current = self.current.as_ref()?;
        match current.payloads.get(slot) {
            Some(Ok(payload)) => Some(Ok(payload)),
            _ => Some(Err(vanished(slot, current.payloads.len()))),
        }
    }

    /// The record [`next_element`](DatasetCursor::next_element) just handed out;
    /// `None` after an error or at the end of the epoch.
    pub fn last_element(&self) -> Option<&[u8]> {
        let current = self.current.as_ref()?;
        current.payloads.get(current.next.checked_sub(1)?)?.ok()
    }

    /// Whether the record [`next_element`](DatasetCursor::next_element) just handed
    /// out is alone in its fetch window (as large records are): then a view of it
    /// ([`last_element_view`](DatasetCursor::last_element_view)) pins nothing else.
    pub fn last_element_is_alone(&self) -> bool {
        self.current.as_ref().is_some_and(|c| {
            c.payloads.len() == 1 && c.next == 1 && matches!(c.payloads.get(0), Some(Ok(_)))
        })
    }

    /// That record as a one-record [`BatchView`] of its fetch window (no copy) when it
    /// is [alone](DatasetCursor::last_element_is_alone) there; `None` otherwise: copy
    /// the record instead.
    pub fn last_element_view(&self) -> Option<BatchView> {
        let current = self
            .current
            .as_ref()
            .filter(|_| self.last_element_is_alone())?;
        let mut view = BatchView::with_capacity(1);
        view.push(&current.payloads, 0);
        Some(view)
    }

    /// One step of an unbatched walk: the slot of the next record in the current
    /// window, or the error of an instance that could not be read; either way its
    /// position is delivered. `None` at the end of the epoch.
    fn next_record_slot(&mut self) -> Option<Result<usize>> {
        match self.step() {
            Step::End => None,
            Step::Failed { error, position } => {
                self.delivered.deliver(position);
                Some(Err(error))
            }
            Step::Record { slot, position } => {
                self.delivered.deliver(position);
                Some(Ok(slot))
            }
        }
    }

    /// The next batch; `Err` for an instance that could not be read (the batch keeps
    /// what it holds and the next call completes it); `None` at the end of the epoch.
    /// For `batch_size > 0`.
    pub fn next_batch(&mut self) -> Option<Result<BatchView>> {
        let size = self.options.batch_size.max(1);
        loop {
            while self.batch.len() < size {
                // Unordered: a batch is one window, whichever completed; never two.
                if self.options.unordered && !self.batch.is_empty() && self.window_served() {
                    break;
                }
                // The hot path: a run of slots of a window none of whose slots failed,
                // taken at once.
                if let Some(c) = self
                    .current
                    .as_mut()
                    .filter(|c| c.all_read && c.next < c.positions.len())
                {
                    let (start, end) = (
                        c.next,
                        (c.next + size - self.batch.len()).min(c.positions.len()),
                    );
                    self.batch.push_run(&c.payloads, start..end);
                    self.batch_positions
                        .extend_from_slice(&c.positions[start..end]);
                    c.next = end;
                    continue;
                }
                match self.step() {
                    Step::Record { slot, position } => {
                        let Some(current) = &self.current else { break };
                        self.batch.push(&current.payloads, slot);
                        self.batch_positions.push(position);
                    }
                    Step::Failed { error, position } => {
                        if self.batch.is_empty() {
                            // Nothing to keep: the error alone passes its position.
                            self.delivered.deliver(position);
                        } else {
                            self.batch_positions.push(position);
                        }
                        return Some(Err(error));
                    }
                    Step::End => break,
                }
            }
            let short = self.batch.len() < size;
            if self.options.unordered
                && self.options.drop_remainder
                && short
                && !self.batch.is_empty()
            {
                // A window shorter than a batch may come before others: dropped, and
                // the epoch goes on.
                self.take_batch();
                continue;
            }
            let batch = self.take_batch();
            if batch.is_empty() || (self.options.drop_remainder && short) {
                return None;
            }
            return Some(Ok(batch));
        }
    }

    /// Fault injection (feature `fault-injection`, tests only): while `fetch_worker`,
    /// every read of a fetch thread panics; while `next_window`, taking the next
    /// window panics (as the entry point `next_window`).
    #[cfg(feature = "fault-injection")]
    pub fn set_test_panics(&mut self, fetch_worker: bool, next_window: bool) {
        self.test_panics = TestPanics {
            fetch_worker,
            next_window,
        };
    }

    /// The batch being filled, handed over; its positions count as delivered.
    fn take_batch(&mut self) -> BatchView {
        self.delivered.deliver_all(&self.batch_positions);
        self.batch_positions.clear();
        std::mem::replace(
            &mut self.batch,
            BatchView::with_capacity(self.options.batch_size),
        )
    }

    /// Whether every slot of the current window is served.
    fn window_served(&self) -> bool {
        self.current
            .as_ref()
            .is_none_or(|c| c.next >= c.positions.len())
    }

    /// The next slot of the walk.
    fn step(&mut self) -> Step {
        if self.window_served() {
            if let Some(stop) = self.refill() {
                return stop;
            }
        }
        let Some(current) = &mut self.current else {
            return Step::End;
        };
        let slot = current.next;
        current.next += 1;
        let Some(&position) = current.positions.get(slot) else {
            return Step::End;
        };
        if current.all_read {
            return Step::Record { slot, position };
        }
        match current.payloads.get(slot) {
            Some(Ok(_)) => Step::Record { slot, position },
            Some(Err(e)) => Step::Failed {
                error: e.clone(),
                position,
            },
            None => Step::Failed {
                error: Error::internal(format!(
                    "slot {slot} of a window of {}",
                    current.payloads.len()
                )),
                position,
            },
        }
    }

    /// Takes the next window from the fetch (starting a fresh fetch after a
    /// window-level error); `Some` when there is none: the end, or the error.
    fn refill(&mut self) -> Option<Step> {
        self.current = None;
        if self.fetcher.is_none() {
            let position = self.taken.position();
            if position >= self.len {
                return Some(Step::End);
            }
            let started = open_order(
                &self.reader,
                &self.options,
                self.base.as_deref(),
                self.slice,
            )
            .and_then(|order| self.start_fetch(order));
            match started {
                Ok(fetcher) => self.fetcher = Some(fetcher),
                Err(error) => return Some(self.pass_window(error, position)),
            }
        }
        let fetcher = self.fetcher.as_mut()?;
        #[cfg(feature = "fault-injection")]
        let panics = {
            fetcher.set_test_panic(self.test_panics.fetch_worker);
            self.test_panics
        };
        let fetched = catch_unwind(AssertUnwindSafe(|| {
            #[cfg(feature = "fault-injection")]
            if panics.next_window {
                panic!("test panic injected into entry point `next_window`");
            }
            fetcher.next_window()
        }));
        let window = match fetched {
            Ok(Some(window)) => window,
            Ok(None) => return Some(Step::End),
            Err(payload) => {
                // The fetcher may be half-updated: never used again.
                let position = self.taken.position();
                let error = Error::internal(format!(
                    "panic in tfrecord-lirs (Rust) taking the fetch window at position \
                     {position}: {}",
                    panic_message(payload.as_ref())
                ));
                return Some(self.pass_window(error, position));
            }
        };
        match window.result {
            Ok(payloads) => {
                self.taken.deliver_all(&window.positions);
                let all_read = payloads.failures().len() == 0;
                self.current = Some(Current {
                    all_read,
                    payloads: Arc::new(payloads),
                    positions: window.positions,
                    next: 0,
                });
                None
            }
            Err(error) => {
                let position = window
                    .positions
                    .first()
                    .copied()
                    .unwrap_or_else(|| self.taken.position());
                Some(self.pass_window(error, position))
            }
        }
    }

    /// A window-level error: it passes `position`, and the fetch starts afresh after
    /// what was taken (the rest of the failed window, and windows in flight, are
    /// fetched again).
    fn pass_window(&mut self, error: Error, position: u64) -> Step {
        self.fetcher = None;
        self.taken.deliver(position);
        Step::Failed { error, position }
    }

    /// A fetcher over `order`, from the first position not taken, leaving out those
    /// taken past it.
    fn start_fetch(&self, mut order: Box<dyn OrderSource>) -> Result<Fetcher> {
        let Resume { position, after } = self.taken.resume();
        order.seek(position)?;
        let exact = self.options.exact_windows();
        let mut options = self.options.fetch;
        if exact {
            options.window = self.options.batch_size;
        }
        // A batch of views holds every window it spans (one more when it straddles
        // them); the consumer holds one batch while the next is formed.
        let held = if self.options.batch_size > 0 {
            2 * (self.options.batch_size.div_ceil(options.window) + 1)
        } else {
            1
        };
        let mut fetcher = Fetcher::new(Arc::clone(&self.reader), order, options)?
            .skip(after)
            .consumer_holds(held);
        if self.options.unordered {
            fetcher = fetcher.unordered();
        }
        if exact {
            fetcher = fetcher.exact_windows();
        } else {
            fetcher = fetcher.ramp_up(first_window(self.options.batch_size));
        }
        Ok(fetcher)
    }
}

/// The error for a slot the step said holds a record but the window does not have.
fn vanished(slot: usize, window_len: usize) -> Error {
    Error::internal(format!("slot {slot} of a window of {window_len} vanished"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::cursor::options::*;
    use crate::read::fetch::FetchOptions;

    /// A reader of a padded file of `n` records of `len` bytes each.
    fn reader_of(dir: &std::path::Path, n: usize, len: usize) -> Reader {
        let path = dir.join(format!("{n}x{len}"));
        let mut w = crate::PaddedWriter::create(&path, &Default::default()).unwrap();
        for _ in 0..n {
            w.write(&vec![7u8; len]).unwrap();
        }
        w.finish().unwrap();
        Reader::open_one(&path, None, &Default::default()).unwrap()
    }

    #[test]
    fn dataset_windows_span_about_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let window = |n, len, batch| {
            let reader = reader_of(dir.path(), n, len);
            CursorOptions::dataset(&reader, batch, -1)
                .unwrap()
                .fetch
                .window
        };
        // ~380-byte spans: ~1000 ids; tiny records: capped; 64 KiB records: the floor.
        let mid = window(3000, 362, 0);
        assert!((900..=1100).contains(&mid), "{mid}");
        assert_eq!(window(3000, 4, 0), DATASET_MAX_WINDOW);
        assert_eq!(window(40, 64 << 10, 0), DATASET_MIN_WINDOW);
        // At least one batch, up to DATASET_MAX_WINDOW_BYTES of data.
        assert_eq!(window(3000, 362, 5000), 5000);
        assert_eq!(window(40, 64 << 10, 256), 256);
        // Batches of large records span several windows of about that many bytes.
        let reader = reader_of(dir.path(), 12, 4 << 20);
        let w = CursorOptions::dataset(&reader, 16, -1)
            .unwrap()
            .fetch
            .window;
        let mean = reader.layout().mean_span_bytes();
        assert_eq!(w as u64, DATASET_MAX_WINDOW_BYTES / mean);
        assert!((1..16).contains(&w), "{w}");
    }

    #[test]
    fn large_unbatched_records_are_windows_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 20, 100 << 10);
        // Read with fetch threads (pread: too large to map by default).
        let o = CursorOptions::dataset(&reader, 0, -1).unwrap();
        assert_eq!(
            (o.fetch.window, o.fetch.depth),
            (1, ELEMENT_VIEW_RECORDS_AHEAD)
        );
        // Batched: windows of at least a batch, as for any record size.
        let o = CursorOptions::dataset(&reader, 8, -1).unwrap();
        assert_eq!(o.fetch.window, DATASET_MIN_WINDOW);
        // Each element's view pins only itself, and is its record.
        let reader = Arc::new(reader);
        let mut cursor = DatasetCursor::new(
            Arc::clone(&reader),
            CursorOptions::dataset(&reader, 0, -1).unwrap(),
            &CursorState::start(),
        )
        .unwrap();
        let mut n = 0;
        while let Some(record) = cursor.next_element() {
            assert_eq!(record.unwrap(), &vec![7u8; 100 << 10][..]);
            assert!(cursor.last_element_is_alone());
            let view = cursor.last_element_view().unwrap();
            assert_eq!(view.len(), 1);
            assert!(view.holds_only_its_records());
            assert_eq!(view.get(0).unwrap(), &vec![7u8; 100 << 10][..]);
            n += 1;
        }
        assert_eq!(n, 20);
        assert_eq!(cursor.state().position, 20);
        // At the end of the epoch there is no last element to view.
        assert!(cursor.last_element_view().is_none());
        // Small records share windows: a view of one would pin others, so none is given.
        let small = Arc::new(reader_of(dir.path(), 300, 100));
        let options = CursorOptions::dataset(&small, 0, 1).unwrap();
        let mut cursor = DatasetCursor::new(small, options, &CursorState::start()).unwrap();
        assert!(cursor.last_element_view().is_none());
        cursor.next_element().unwrap().unwrap();
        assert!(!cursor.last_element_is_alone());
        assert!(cursor.last_element_view().is_none());
    }

    #[test]
    fn dataset_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 10, 100);
        let o = CursorOptions::dataset(&reader, 0, 3).unwrap();
        assert_eq!((o.batch_size, o.fetch.threads), (0, 3));
        assert_eq!(o.fetch.depth, DATASET_WINDOWS_AHEAD);
        assert!(!o.unordered && !o.drop_remainder);
        // Automatic threads: at least one (the file is read through pread here).
        let auto = CursorOptions::dataset(&reader, 4, -1).unwrap();
        assert_eq!(
            auto.fetch.threads,
            FetchOptions::auto_threads(&reader).max(1)
        );
        for (batch, reads, want) in [
            (-1, -1, "batch_size must be >= 0, got -1"),
            (
                0,
                0,
                "num_parallel_reads must be >= 1 or -1 (automatic), got 0",
            ),
            (
                0,
                -2,
                "num_parallel_reads must be >= 1 or -1 (automatic), got -2",
            ),
        ] {
            let e = CursorOptions::dataset(&reader, batch, reads).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert_eq!(e.to_string(), want);
        }
    }
}
