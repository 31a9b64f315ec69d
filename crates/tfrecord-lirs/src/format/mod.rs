//! The TFRecord framing, filler records and the page-placement rule; and the pure
//! layer of the crate built on them: the layout of a set of files, the epoch orders,
//! the offset-table encoding, the text-index formats of other readers and
//! `tf.train.Example`.
//!
//! Pure code: no `unsafe` (forbidden here). Everything that touches files
//! builds on it. The framing itself (`framing.rs`, re-exported here) is the TFRecord
//! record layout, exactly as TensorFlow's `tf.io.TFRecordWriter` writes it
//! (`docs/FORMAT.md` §1).

#![forbid(unsafe_code)]

pub mod example;
mod fit;
mod framing;
pub(crate) mod layout;
pub(crate) mod order;
pub(crate) mod order_v2;
pub(crate) mod table;
pub(crate) mod table_path;
pub mod text_index;

pub use fit::Fit;
pub use framing::*;
