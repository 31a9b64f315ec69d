//! The spec's reader API (`TFRecordLIRS`, spec §1, §2, §5): random access plus an
//! epoch-by-epoch shuffled walk, on top of [`Reader`] and [`EpochOrder`](crate::EpochOrder). The walk reads
//! through a [`Fetcher`], so it gets what the dataset op gets: the order's next windows
//! read ahead, runs of consecutive ids (page-aware units) read with one request each.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use tfrecord_lirs_format::order::{OrderParams, OrderVersion};

use crate::read::fetch::{FetchOptions, Fetcher, Payloads, Window};
use crate::read::reader::{Reader, ReaderOptions};

/// The spec's reader (§1, §2, §5): random access plus an epoch-by-epoch shuffled walk.
///
/// ```
/// use tfrecord_lirs::TFRecordLIRS;
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("train.tfrecord");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..64u8 { w.write(&[i; 100])?; }
/// # w.finish()?;
/// let mut train_dataset = TFRecordLIRS::open(&path, None)?.with_seed(1234);
/// for _epoch in 0..2 {
///     train_dataset.shuffle_order(true)?; // page-aware
///     let mut batch = Vec::new();
///     for instance in train_dataset.by_ref().take(32) {
///         batch.push(instance?);
///     }
///     assert_eq!(batch.len(), 32);
/// }
/// # Ok(()) }
/// ```
pub struct TFRecordLIRS {
    reader: Arc<Reader>,
    seed: u64,
    next_epoch: u64,
    num_shards: u64,
    shard_index: u64,
    order_version: OrderVersion,
    /// The epoch being walked, once `shuffle_order` was called; `None` after a
    /// window-level failure ended it.
    fetcher: Option<Fetcher>,
    /// The window being handed out (its ids and payloads), and the next slot of it.
    window: Option<(Vec<u64>, Payloads, usize)>,
    epoch_started: bool,
    /// `next()` before `shuffle_order` errs once, then ends (never an endless error stream).
    misuse_reported: bool,
}

impl TFRecordLIRS {
    /// Opens a data file and its table (`<data>.offsets` when `None`).
    pub fn open(data: &Path, table: Option<&Path>) -> Result<TFRecordLIRS> {
        Ok(TFRecordLIRS::from_reader(Arc::new(Reader::open_one(
            data,
            table,
            &ReaderOptions::default(),
        )?)))
    }

    /// Wraps a shared reader (seed 0, one shard).
    pub fn from_reader(reader: Arc<Reader>) -> TFRecordLIRS {
        TFRecordLIRS {
            reader,
            seed: 0,
            next_epoch: 0,
            num_shards: 1,
            shard_index: 0,
            order_version: OrderVersion::default(),
            fetcher: None,
            window: None,
            epoch_started: false,
            misuse_reported: false,
        }
    }

    /// Sets the shuffle seed.
    pub fn with_seed(mut self, seed: u64) -> TFRecordLIRS {
        self.seed = seed;
        self
    }

    /// Reads only shard `shard_index` of `num_shards` of every epoch.
    pub fn with_shard(mut self, num_shards: u64, shard_index: u64) -> Result<TFRecordLIRS> {
        crate::options::shard(num_shards, shard_index)?;
        self.num_shards = num_shards;
        self.shard_index = shard_index;
        Ok(self)
    }

    /// Makes the following epochs' orders with `version` (order version 1 by default).
    pub fn with_order_version(mut self, version: OrderVersion) -> TFRecordLIRS {
        self.order_version = version;
        self
    }

    /// The shared reader.
    pub fn reader(&self) -> &Arc<Reader> {
        &self.reader
    }

    /// Instances in the files.
    pub fn len(&self) -> u64 {
        self.reader.len()
    }

    /// Whether there are no instances.
    pub fn is_empty(&self) -> bool {
        self.reader.is_empty()
    }

    /// Spec §1: the payload of instance `id`.
    pub fn read(&self, id: u64) -> Result<Vec<u8>> {
        self.reader.read(id)
    }

    /// Spec §5: shuffles the next epoch's order (page-aware or instance-based); the
    /// following `next()` calls walk it.
    pub fn shuffle_order(&mut self, page_aware: bool) -> Result<()> {
        let params = OrderParams {
            seed: self.seed,
            epoch: self.next_epoch,
            page_aware,
            num_shards: self.num_shards,
            shard_index: self.shard_index,
        };
        let order = self
            .reader
            .epoch_order_with_version(&params, self.order_version)?;
        let options = FetchOptions {
            threads: FetchOptions::auto_threads(&self.reader),
            window: WALK_WINDOW,
            depth: WALK_DEPTH,
        };
        // The previous epoch's fetcher (and its threads) goes first.
        self.window = None;
        self.fetcher = None;
        self.fetcher = Some(Fetcher::new(Arc::clone(&self.reader), order, options)?);
        self.epoch_started = true;
        self.next_epoch += 1;
        Ok(())
    }

    /// Instances in the epoch being walked (this shard's), if `shuffle_order` was called.
    pub fn epoch_len(&self) -> Option<u64> {
        self.fetcher.as_ref().map(Fetcher::len)
    }
}

/// Ids the walk reads ahead per window (a page-aware window grows to a unit boundary).
const WALK_WINDOW: usize = 256;
/// Windows in flight ahead of the walk.
const WALK_DEPTH: usize = 2;

/// Spec §2: `next()` returns the next instance of the shuffled order, `None` at the end
/// of the epoch, and one error (then `None`) if `shuffle_order` was never called.
impl Iterator for TFRecordLIRS {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        if !self.epoch_started {
            if std::mem::replace(&mut self.misuse_reported, true) {
                return None;
            }
            return Some(Err(Error::invalid_argument(
                "TFRecordLIRS::next called before shuffle_order",
            )));
        }
        loop {
            if let Some((ids, payloads, at)) = &mut self.window {
                if *at < ids.len() {
                    let slot = *at;
                    *at += 1;
                    return Some(match payloads.get(slot) {
                        Some(Ok(payload)) => Ok(payload.to_vec()),
                        // Re-read to own the error (the same check fails the same way,
                        // naming the file, instance and byte).
                        _ => self.reader.read(ids[slot]),
                    });
                }
            }
            self.window = None;
            let Window { ids, result, .. } = self.fetcher.as_mut()?.next_window()?;
            match result {
                Ok(payloads) => self.window = Some((ids, payloads, 0)),
                Err(e) => {
                    // A window-level failure (a panic in a fetch thread, the threads
                    // gone) ends the epoch: reported once, never skipped over silently.
                    self.fetcher = None;
                    return Some(Err(e));
                }
            }
        }
    }
}
