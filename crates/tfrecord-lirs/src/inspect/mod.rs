//! Inspection: what `verify` and `info` report, text indexes of other readers
//! imported and exported, and one command over many files.

pub(crate) mod interop;
pub mod many;
pub(crate) mod verify;
