//! The TFRecord framing, filler records and the page-placement rule, as they were here
//! before the pure layer became its own crate: re-exported from
//! [`tfrecord_lirs_format`] for users (the crate's own code names that crate's modules).
//!
//! The framing itself is the TFRecord record layout, exactly as TensorFlow's
//! `tf.io.TFRecordWriter` writes it (`docs/FORMAT.md` §1).

pub use tfrecord_lirs_format::fit::Fit;
pub use tfrecord_lirs_format::framing::*;
pub use tfrecord_lirs_format::{example, file_list, shard_remainder, text_index};
