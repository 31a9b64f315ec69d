//! Writing: the page-aligned writers, `pad` and the offset-table builds.

pub(crate) mod writer;
