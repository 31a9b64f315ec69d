//! Writing: the page-aligned writers, `pad`, the offset-table builds and the spec's
//! table builder.

pub(crate) mod table_builder;
pub(crate) mod writer;
