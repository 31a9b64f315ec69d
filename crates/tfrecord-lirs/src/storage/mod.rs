//! Storage: positioned reads of local files through the backends of [`local`], files
//! named by URLs through a [`remote`] file system (and Apache Arrow's `object_store`
//! in `cloud`). The only module tree of the crate allowed `unsafe` (each block with a
//! `// SAFETY:` comment).

#![allow(unsafe_code)]

#[cfg(feature = "object-store")]
pub mod cloud;
pub mod local;
pub mod remote;
