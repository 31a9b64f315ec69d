//! The spec's `OffsetTableBuilder`: the format's builder (the offsets, in memory) with
//! the writing of the table file.

use std::path::Path;

use crate::error::Result;
use tfrecord_lirs_format::framing::PageSize;
use tfrecord_lirs_format::table;

use crate::storage::table_files::write_table;

/// Builds an offset table while a file is written (spec §3 and §4).
///
/// Without padding, `calc_offset` follows spec eq. 2 (this offset = previous offset +
/// previous length). With a page size, the padding rule decides where each instance
/// goes and [`padding_before`](OffsetTableBuilder::padding_before) says how many filler
/// bytes the writer must put first.
///
/// The spec's example, in Rust:
///
/// ```
/// use tfrecord_lirs::{OffsetTableBuilder, TFRecordWriter, PageSize};
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let data_path = dir.path().join("train.tfrecord");
/// # let instances: Vec<Vec<u8>> = (0..100).map(|i| vec![i as u8; 300 + i]).collect();
/// let whether_to_use_padding = true;
/// let mut offset_table = OffsetTableBuilder::new(whether_to_use_padding.then(PageSize::default));
/// let mut writer = TFRecordWriter::create(&data_path)?;
/// for instance in &instances {
///     // ... preprocess the instance ...
///     if whether_to_use_padding {
///         // write the padding to the TFRecord file
///         writer.write_padding(offset_table.padding_before(instance.len() as u64))?;
///     }
///     // calculate the offset of this instance, then write it
///     let offset = offset_table.calc_offset(instance.len() as u64);
///     assert_eq!(offset, writer.position());
///     writer.write_instance(instance)?;
/// }
/// writer.finish()?;
/// offset_table.write(&tfrecord_lirs::default_table_path(&data_path))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OffsetTableBuilder(table::OffsetTableBuilder);

impl OffsetTableBuilder {
    /// A builder for a file written from byte 0, padded for `padding` if given.
    pub fn new(padding: Option<PageSize>) -> OffsetTableBuilder {
        OffsetTableBuilder(table::OffsetTableBuilder::new(padding))
    }

    /// Filler bytes the writer must write before the next instance of `payload_len`
    /// bytes: 0 without padding, else 0 or at least 24 (one filler record).
    pub fn padding_before(&self, payload_len: u64) -> u64 {
        self.0.padding_before(payload_len)
    }

    /// Records the next instance (spec: `calc_offset(instance)`) and returns its offset.
    pub fn calc_offset(&mut self, payload_len: u64) -> u64 {
        self.0.calc_offset(payload_len)
    }

    /// The offsets so far.
    pub fn offsets(&self) -> &[u64] {
        self.0.offsets()
    }

    /// Where the next byte goes (the data file's size so far, padding excluded).
    pub fn end(&self) -> u64 {
        self.0.end()
    }

    /// Writes the table file atomically (spec: `write(offset_table_filename)`).
    pub fn write(&self, path: &Path) -> Result<()> {
        self.write_synced(path, false)
    }

    /// [`write`](OffsetTableBuilder::write); with `sync`, the table and its directory
    /// are fsynced before this returns (see [`write_table`]).
    pub fn write_synced(&self, path: &Path, sync: bool) -> Result<()> {
        write_table(path, self.0.offsets(), sync)
    }

    /// Consumes the builder, returning the offsets.
    pub fn into_offsets(self) -> Vec<u64> {
        self.0.into_offsets()
    }
}
