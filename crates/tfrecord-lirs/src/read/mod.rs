//! Reading: the [`Reader`](crate::Reader) (random access through an offset table), the
//! record scanner, compressed input, the fetch pool, the dataset cursor, elastic resume, the
//! epoch loader of the TensorFlow-free front ends and the spec's
//! `TFRecordLIRS` facade.

pub mod advice;
pub(crate) mod batch;
pub(crate) mod compress;
pub(crate) mod cursor;
pub(crate) mod elastic;
pub(crate) mod fetch;
pub(crate) mod loader;
pub(crate) mod reader;
pub(crate) mod sampler;
pub(crate) mod scan;
pub(crate) mod stats;
pub(crate) mod table_check;
pub(crate) mod tfrecord_lirs;
