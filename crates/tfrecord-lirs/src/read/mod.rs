//! Reading: the [`Reader`](reader::Reader) (random access through an offset table), the
//! fetch pool, the dataset cursor, elastic resume, the epoch loader of the
//! TensorFlow-free front ends and the spec's `TFRecordLIRS` facade.

pub(crate) mod batch;
pub(crate) mod cursor;
pub(crate) mod elastic;
pub(crate) mod epoch_walks;
pub(crate) mod fetch;
pub(crate) mod loader;
pub(crate) mod missing_table;
pub(crate) mod reader;
pub(crate) mod refurbish;
pub(crate) mod refurbish_sampler;
pub(crate) mod sampler;
pub(crate) mod stats;
pub(crate) mod table_check;
pub(crate) mod tfrecord_lirs;
pub(crate) mod walk_identity;
pub(crate) mod worker_epochs;
