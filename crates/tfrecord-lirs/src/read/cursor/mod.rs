//! The dataset cursor: everything about walking one epoch for a front end (the
//! TensorFlow op, and TensorFlow-free loaders), so no front end keeps a state machine
//! of its own.
//!
//! A [`DatasetCursor`](walk::DatasetCursor) owns the order of one (seed, epoch, shard), its fetch windows
//! and read-ahead (a [`Fetcher`](crate::read::fetch::Fetcher)), batching, the error policy, ordered or unordered
//! delivery, and a checkpoint state that is a small value ([`CursorState`](state::CursorState): positions,
//! never buffers).
//!
//! # Error policy
//!
//! As TensorFlow's `TFRecordDataset`: every error passes one position of the order. A
//! failed instance passes its own position; a window that fails as a whole (an
//! internal error: a panic while fetching, fetch threads gone) passes its first
//! position, and the cursor drops its fetcher and starts a fresh one at the next call
//! (the rest of that window is fetched again). A caller that skips errors therefore
//! goes on, every epoch ends, and checkpoints agree with what was delivered.
//!
//! # Batches
//!
//! A batch holds `batch_size` records (the last one may be shorter, or is dropped with
//! `drop_remainder`). An error in the middle of a batch keeps the records already in
//! it: the next call completes the batch from there, so an error costs only its own
//! instance. With unordered delivery each batch is exactly one fetch window (windows
//! of `batch_size` ids, delivered as they complete), never two. The order's last
//! window, the short one, is delivered after every other, so only the epoch's last
//! batch is short (or, with errors, a batch they shortened); under `drop_remainder`
//! a window shorter than a batch is dropped and the epoch goes on.
//!
//! # Checkpoints
//!
//! [`DatasetCursor::state`](walk::DatasetCursor::state) is what was delivered: the records of every batch or
//! element handed out, and the positions errors passed outside an unfinished batch. A
//! batch left unfinished by an error is not part of it (its records are re-read after
//! a restore, from its first one). In order, that is a position; unordered, a
//! position and the positions past it already delivered.

//!
//! The files: `options.rs` (how a cursor walks, and a dataset's fetch defaults),
//! `order.rs` (the order a cursor walks),
//! `parts.rs` (an epoch cut into parts for a coordinator to hand out; `part_walk.rs`
//! walks one, and a worker's batches: `batch_split.rs`),
//! `state.rs` (the checkpoint state and its encoding), `view.rs` (batches as views of
//! the fetch windows), `walk.rs` (the cursor itself).

pub(crate) mod batch_split;
pub(crate) mod options;
pub(crate) mod order;
pub(crate) mod part_walk;
pub(crate) mod parts;
pub(crate) mod state;
pub(crate) mod view;
pub(crate) mod walk;
