//! Writing: the page-aligned writers (`writer.rs`), `pad` (`pad.rs`), the offset-table
//! builds of existing files (`index.rs`) and the spec's table builder
//! (`table_builder.rs`).

pub(crate) mod index;
pub(crate) mod pad;
pub(crate) mod table_builder;
pub(crate) mod writer;
