//! # tfrecord-lirs-format
//!
//! The pure layer of [tfrecord-lirs](https://docs.rs/tfrecord-lirs): everything about
//! the bytes and the orders that needs no file.
//!
//! * [`framing`] — the TFRecord record layout, exactly as TensorFlow's
//!   `tf.io.TFRecordWriter` writes it (`docs/FORMAT.md` §1), filler records and the
//!   page-placement rule.
//! * [`fit`] — how a writer places instances into pages.
//! * [`file_list`] — which names of a list or a pattern's matches are data files.
//! * [`table`] — the offset table as bytes (encoding, parsing, the builder of the spec);
//!   [`table_path`] — where a table lies beside its data file.
//! * [`layout`] — the instances of a set of files, one global id space; it reads a
//!   file's entries through the [`Offsets`](layout::Offsets) trait, which the storage
//!   layer implements.
//! * [`order`], [`order_v2`]: the version-stable epoch orders; [`refurbish`] — the
//!   refurbish schedule (which id is refreshed or reused at each position of an epoch).
//! * [`text_index`] — the text indexes of NVIDIA DALI and the `tfrecord` Python package.
//! * [`example`] — `tf.train.Example`.
//! * [`dataset_identity`] — what a saved state says about its dataset, and the rule
//!   it is checked by.
//! * [`error`] — the crate's own errors: which rule a value, bytes or a state breaks
//!   (the engine turns them into its `Error`, naming the file and what to do).
//!
//! No `std::fs`, no reads or writes of files, no `unsafe`: the engine crate
//! (`tfrecord-lirs`) builds its storage, reading and writing on this one.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod dataset_identity;
pub mod error;
pub mod example;
pub mod file_list;
pub mod fit;
pub mod framing;
pub mod layout;
pub mod order;
pub mod order_v2;
pub mod refurbish;
pub mod seed_pair;
pub mod shard_remainder;
pub mod table;
pub mod table_path;
pub mod text_index;
