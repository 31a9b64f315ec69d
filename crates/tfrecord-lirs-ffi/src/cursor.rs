//! One iteration's cursor as the kernels step it: started from a fresh or restored
//! state ([`LirsReader::fetch`]), its elements and batches (a [`BatchView`] keeps a
//! batch's records where the fetch read them), and its checkpoint values.

use std::sync::Arc;

use tfrecord_lirs as core;

#[cfg(feature = "fault-injection")]
use crate::fault_injection;
use crate::reader::LirsReader;
use crate::status::{guard, guard_poisoning, report, FfiError, FfiResult};
use crate::{checkpoint, elastic, rules};
use crate::{CursorCheckpoint, CursorConfig, IterationSeeds, Status};
use core::options::guard::Poison;

// Cursors move between TF threads (always under the iterator's mutex).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<DatasetCursor>();
};
// A batch is read by any thread holding a tensor that views it, and dropped by
// whichever lets go of it last.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<BatchView>();
};

impl LirsReader {
    /// The core's options of one iteration of `config`.
    fn cursor_options(&self, config: &CursorConfig) -> FfiResult<core::CursorOptions> {
        let walk = &config.walk;
        let (num_shards, shard_index) =
            rules::check_shard(Some(walk.num_shards), Some(walk.shard_index))?;
        let mut options =
            core::CursorOptions::dataset(self.core(), walk.batch_size, walk.num_parallel_reads)?;
        // The iteration's order by its run's seed rule (a restored state may name
        // another; `fetch` takes it).
        let (seed, epoch) = config.order;
        options.order = core::OrderParams {
            seed,
            epoch,
            page_aware: walk.page_aware,
            num_shards,
            shard_index,
        };
        options.drop_remainder = walk.drop_remainder;
        options.shard_remainder = core::options::shard_remainder(&walk.shard_remainder)?;
        options.unordered = config.unordered;
        options.order_version = rules::order_version_of(walk.order_version)?;
        Ok(options)
    }

    /// Starts an iteration at `checkpoint` (public for Rust-side tests).
    pub fn fetch(
        &self,
        config: &CursorConfig,
        checkpoint: &CursorCheckpoint,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        report(
            status,
            guard("fetch", || {
                let mut options = self.cursor_options(config)?;
                let (state, base) = checkpoint::starting_point(
                    checkpoint,
                    options.order_version,
                    &config.epoch_state,
                )?;
                // A saved state names its order's seed and epoch (whichever rule made
                // them); a fresh walk takes the iteration's.
                if let Some(b) = &base {
                    (options.order.seed, options.order.epoch) = (b.seed, b.epoch);
                }
                let inner = match base {
                    Some(base) => core::DatasetCursor::resume(
                        Arc::clone(self.core()),
                        options,
                        &base,
                        &state,
                    )?,
                    None => core::DatasetCursor::new(Arc::clone(self.core()), options, &state)?,
                };
                Ok(Box::new(DatasetCursor {
                    inner,
                    seeds: (config.seed, config.seed2),
                    seed_rule: config.seed_rule,
                    part: None,
                    poison: Poison::new("a handle"),
                }))
            }),
        )
    }

    /// Starts reading part `part` of the epoch of `config` (see
    /// [`core::EpochParts`]) at `state` (`None`: its start); public for Rust-side
    /// tests.
    pub fn fetch_part(
        &self,
        config: &CursorConfig,
        part: i64,
        state: Option<&core::CursorState>,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        report(
            status,
            guard("fetch_part", || {
                let options = self.cursor_options(config)?;
                let parts = rules::epoch_parts(&config.walk, self.core().len());
                let part = u64::try_from(part).map_err(|_| {
                    FfiError::invalid(format!("LIRSDataset split {part} is negative"))
                })?;
                let fresh = core::CursorState::start_of(options.order_version);
                let inner = core::DatasetCursor::part(
                    Arc::clone(self.core()),
                    options,
                    parts,
                    part,
                    state.unwrap_or(&fresh),
                )?;
                Ok(Box::new(DatasetCursor {
                    inner,
                    seeds: (config.seed, config.seed2),
                    seed_rule: config.seed_rule,
                    part: Some(part),
                    poison: Poison::new("a handle"),
                }))
            }),
        )
    }
}

pub struct DatasetCursor {
    pub(crate) inner: core::DatasetCursor,
    /// The iteration's (`seed`, `seed2`) and the run's seed rule, for its checkpoint.
    seeds: (i64, i64),
    seed_rule: core::SeedRule,
    /// The part of the epoch read, when the cursor reads one (splits).
    part: Option<u64>,
    /// Set when a method panicked outside the core's own catch: the cursor may be
    /// half-updated.
    poison: Poison,
}

impl DatasetCursor {
    /// The core's test panics armed as the process-wide panic points say.
    #[cfg(feature = "fault-injection")]
    fn arm_test_panics(&mut self) {
        self.inner.set_test_panics(
            fault_injection::armed("fetch_worker"),
            fault_injection::armed("next_window"),
        );
    }

    /// The checkpoint values (public for Rust-side tests).
    pub fn checkpoint(
        &self,
        seeds: &IterationSeeds,
        status: &mut Status,
    ) -> FfiResult<CursorCheckpoint> {
        report(
            status,
            guard("checkpoint", || {
                let (position, delivered_after) = self.inner.state().to_signed()?;
                let shard_state = elastic::TfShardState {
                    seeds: elastic::TfSeeds::new(seeds, self.seed_rule),
                    shard: self.inner.shard_state(),
                };
                Ok(CursorCheckpoint {
                    position,
                    has_delivered_after: self.inner.options().unordered
                        || !delivered_after.is_empty(),
                    delivered_after,
                    order_version: i64::from(self.inner.state().order_version),
                    shard_state: shard_state.encode(),
                })
            }),
        )
    }

    /// The checkpoint's `shard_state` (public for Rust-side tests).
    pub fn save(&self, num_random_samples: i64, status: &mut Status) -> FfiResult<Vec<u8>> {
        let seeds = IterationSeeds {
            seed: self.seeds.0,
            seed2: self.seeds.1,
            num_random_samples,
        };
        Ok(self.checkpoint(&seeds, status)?.shard_state)
    }

    /// The checkpoint of a cursor that reads a part (`TfPartState`); public for
    /// Rust-side tests.
    pub fn save_part(&self, num_random_samples: i64, status: &mut Status) -> FfiResult<Vec<u8>> {
        report(
            status,
            guard("save_part", || {
                let part = self.part.ok_or_else(|| {
                    FfiError::new(
                        crate::ErrorCode::Internal,
                        "save_part of a cursor that reads no part",
                    )
                })?;
                let seeds = IterationSeeds {
                    seed: self.seeds.0,
                    seed2: self.seeds.1,
                    num_random_samples,
                };
                let state = elastic::TfPartState {
                    seeds: elastic::TfSeeds::new(&seeds, self.seed_rule),
                    part: Some((part, self.inner.state())),
                };
                Ok(state.encode())
            }),
        )
    }

    /// Steps to the next record (public for Rust-side tests).
    pub fn next_element(&mut self, status: &mut Status) -> FfiResult<bool> {
        #[cfg(feature = "fault-injection")]
        self.arm_test_panics();
        // Disjoint borrows: the body does not touch `poison`.
        let DatasetCursor { inner, poison, .. } = self;
        let result = guard_poisoning("next_element", poison, || match inner.next_element() {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(FfiError::from(e)),
        });
        report(status, result)
    }

    /// The record `next_element` stepped to; empty when there is none.
    pub fn element(&self) -> &[u8] {
        self.inner.last_element().unwrap_or_default()
    }

    /// Whether the record `next_element` stepped to pins only its own bytes.
    pub fn element_may_view(&self) -> bool {
        self.inner.last_element_is_alone()
    }

    /// The record `next_element` stepped to, as a view that pins only its bytes;
    /// empty when there is none.
    pub fn element_view(&self) -> Box<BatchView> {
        Box::new(BatchView {
            inner: self.inner.last_element_view().unwrap_or_default(),
        })
    }

    /// The next batch (public for Rust-side tests).
    pub fn next_batch(&mut self, status: &mut Status) -> FfiResult<Box<BatchView>> {
        #[cfg(feature = "fault-injection")]
        self.arm_test_panics();
        let DatasetCursor { inner, poison, .. } = self;
        let result = guard_poisoning("next_batch", poison, || match inner.next_batch() {
            None => Ok(Box::default()),
            Some(Ok(batch)) => Ok(Box::new(BatchView { inner: batch })),
            Some(Err(e)) => Err(FfiError::from(e)),
        });
        report(status, result)
    }
}

/// One batch's records (see `next_batch`). Its methods are called per record, so
/// they are not guarded: panic-free by construction (lookups with `get`).
#[derive(Debug, Default)]
pub struct BatchView {
    inner: core::BatchView,
}

impl BatchView {
    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Record `i`; empty out of range.
    pub fn record(&self, i: usize) -> &[u8] {
        self.inner.get(i).unwrap_or_default()
    }
}

// Not with `fault-injection`: its tests arm process-wide panic points that would hit
// these tests' fetches.
#[cfg(all(test, not(feature = "fault-injection")))]
mod tests {
    use super::*;
    use crate::reader::open_reader;
    use crate::status::ok_status;
    use crate::ErrorCode;

    #[test]
    fn cursors_carry_each_error_and_checkpoint_in_tf_keys() {
        use crate::test_support::{
            cursor_config, cursor_with, no_seeds, reader_config, start, write_u32_file,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = write_u32_file(dir.path(), 300, 4);
        // Damage instance 7's payload (a CRC mismatch).
        let reader = core::Reader::open_one(&path, None, &Default::default()).unwrap();
        let (_, off) = reader.location(7).unwrap();
        drop(reader);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[off as usize + 12] ^= 1;
        std::fs::write(&path, bytes).unwrap();

        // Mapped (automatic: one fetch thread) and with a pool of 2 threads; single
        // records and batches of 16.
        for (backend, parallel_reads) in [("mmap", -1), ("pread", 2)] {
            let mut st = ok_status();
            let reader = open_reader(&reader_config(&path, backend), &mut st).unwrap();
            for batch_size in [0, 16] {
                let config = cursor_config(batch_size, parallel_reads);
                let mut cursor = reader.fetch(&config, &start(), &mut st).unwrap();
                let (mut seen, mut failed, mut batches) = (Vec::new(), 0, 0);
                loop {
                    let mut st = ok_status();
                    let result = if batch_size == 0 {
                        match cursor.next_element(&mut st) {
                            Ok(false) => break,
                            Ok(true) => Ok(vec![cursor.element().to_vec()]),
                            Err(e) => Err(e),
                        }
                    } else {
                        match cursor.next_batch(&mut st) {
                            Ok(b) if b.is_empty() => break,
                            Ok(b) => {
                                batches += 1;
                                assert!(b.record(b.len()).is_empty());
                                Ok((0..b.len()).map(|i| b.record(i).to_vec()).collect())
                            }
                            Err(e) => Err(e),
                        }
                    };
                    match result {
                        Ok(records) => seen.extend(records),
                        Err(e) => {
                            assert_eq!(st.code, ErrorCode::DataLoss);
                            assert!(e.message.contains("instance 7"), "{e}");
                            failed += 1;
                        }
                    }
                }
                let mut ids: Vec<u32> = seen
                    .iter()
                    .map(|p| u32::from_le_bytes(p[..4].try_into().unwrap()))
                    .collect();
                ids.sort_unstable();
                assert_eq!(ids, (0..300).filter(|&i| i != 7).collect::<Vec<_>>());
                assert_eq!(failed, 1, "{backend}");
                if batch_size > 0 {
                    // 299 records: the error costs only its own instance.
                    assert_eq!(batches, 19);
                }
                // At the end: everything delivered, in order.
                let ckpt = cursor.checkpoint(&no_seeds(), &mut st).unwrap();
                assert_eq!((ckpt.position, ckpt.has_delivered_after), (300, false));
            }
        }
        let mut st = ok_status();
        let reader = open_reader(&reader_config(&path, "auto"), &mut st).unwrap();
        // Shards are checked in Rust, with the one wording.
        let mut st = ok_status();
        assert!(reader.shard_len(2, 2, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
        assert!(st
            .message
            .contains("shard_index must be in [0, num_shards)"));
        // Checkpoints: unordered cursors always write `delivered_after`; damaged
        // values are DataLoss.
        let mut config = cursor_config(0, 2);
        config.unordered = true;
        let mut cursor = reader.fetch(&config, &start(), &mut st).unwrap();
        assert!(cursor.next_element(&mut st).unwrap());
        let ckpt = cursor.checkpoint(&no_seeds(), &mut st).unwrap();
        assert!(ckpt.has_delivered_after);
        assert_eq!(
            ckpt.position + ckpt.delivered_after.len() as i64,
            1,
            "{ckpt:?}"
        );
        for (position, after, want) in [
            (-1, vec![], "negative position -1"),
            (
                5,
                vec![3],
                "delivered position 3 before the restore position 5",
            ),
            (301, vec![], "position 301 is past the end of this epoch"),
        ] {
            let bad = CursorCheckpoint {
                position,
                has_delivered_after: true,
                delivered_after: after,
                order_version: 1,
                shard_state: Vec::new(),
            };
            let mut st = ok_status();
            assert!(reader.fetch(&config, &bad, &mut st).is_err());
            assert_eq!(st.code, ErrorCode::DataLoss);
            assert!(st.message.contains(want), "{}", st.message);
        }
        // A checkpoint of one order version does not restore into the other.
        let v2 = cursor_with(&config, |w| w.order_version = 2);
        let mut st = ok_status();
        let v2_state = reader
            .fetch(&v2, &start(), &mut st)
            .unwrap()
            .checkpoint(&no_seeds(), &mut st);
        assert_eq!(v2_state.unwrap().order_version, 2);
        let v1_checkpoint = CursorCheckpoint {
            order_version: 1,
            ..start()
        };
        assert!(reader.fetch(&v2, &v1_checkpoint, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::DataLoss);
        assert!(st.message.contains("order version 1"), "{}", st.message);
        let mut st = ok_status();
        let bad_version = cursor_with(&config, |w| w.order_version = 3);
        assert!(reader.fetch(&bad_version, &start(), &mut st).is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
        // Bad dataset arguments are the core's.
        let mut st = ok_status();
        assert!(reader.check_dataset(-3, -1, 1, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
        let mut st = ok_status();
        assert!(reader.check_dataset(0, -1, 0, &mut st).is_err());
        assert!(
            st.message.contains("order version must be 1 or 2"),
            "{}",
            st.message
        );
        assert_eq!(st.code, ErrorCode::InvalidArgument);
    }
}
