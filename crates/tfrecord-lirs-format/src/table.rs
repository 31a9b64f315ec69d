//! The offset table file (spec eq. 3): exactly N little-endian `u64` record starts.
//!
//! Value `i` is the byte offset of instance `i`'s record (its length field). Offsets
//! strictly increase; instance `i`'s span is `[offset[i], offset[i+1])` with
//! `offset[N]` = the data file's size (spec eq. 1).
//!
//! The bytes only: reading and writing table files is the engine's storage layer.

use std::fmt;

use byteorder::{ByteOrder, LittleEndian};

use crate::framing::{self, PageSize};

/// Why table bytes are not a table: the table's own bytes are damaged (the engine
/// names the table's file and gives this its kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableError {
    /// The table is `byte_len` bytes, not a whole number of 8-byte entries.
    PartialEntry {
        /// The table's length in bytes.
        byte_len: u64,
    },
    /// Entry `entry` (at byte `next` of the data file) is not past the entry before it
    /// (at byte `at`); ids are the table's own.
    NotIncreasing {
        /// The entry that is not past the one before it.
        entry: u64,
        /// The entry before it.
        at: u64,
        /// The entry itself.
        next: u64,
    },
}

impl TableError {
    /// The table's own instance id the error is about, if one.
    pub fn instance(&self) -> Option<u64> {
        match self {
            TableError::PartialEntry { .. } => None,
            TableError::NotIncreasing { entry, .. } => Some(*entry),
        }
    }

    /// The byte offset the error names: where the partial entry starts in the table,
    /// or the data file offset the entry that is not increasing gives.
    pub fn offset(&self) -> u64 {
        match self {
            TableError::PartialEntry { byte_len } => byte_len - byte_len % 8,
            TableError::NotIncreasing { next, .. } => *next,
        }
    }
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::PartialEntry { byte_len } => write!(
                f,
                "table is {byte_len} bytes, not a multiple of 8 (a partial last entry?)"
            ),
            TableError::NotIncreasing { entry, at, next } => write!(
                f,
                "offsets must strictly increase, but instance {} is at byte {at} and instance {entry} at byte {next}",
                entry - 1
            ),
        }
    }
}

impl std::error::Error for TableError {}

/// Parses table bytes: a multiple of 8 bytes, strictly increasing offsets.
pub fn parse_table(bytes: &[u8]) -> Result<Vec<u64>, TableError> {
    check_whole_entries(bytes.len() as u64)?;
    let mut offsets = vec![0u64; bytes.len() / 8];
    LittleEndian::read_u64_into(bytes, &mut offsets);
    check_increasing(&offsets)?;
    Ok(offsets)
}

/// The error for a table of `byte_len` bytes that is not a whole number of entries.
pub fn check_whole_entries(byte_len: u64) -> Result<(), TableError> {
    if !byte_len.is_multiple_of(8) {
        return Err(TableError::PartialEntry { byte_len });
    }
    Ok(())
}

/// The error for the first entry of `offsets` not past the one before it.
pub fn check_increasing(offsets: &[u64]) -> Result<(), TableError> {
    match offsets.windows(2).position(|pair| pair[1] <= pair[0]) {
        Some(i) => Err(not_increasing(i as u64, offsets[i], offsets[i + 1])),
        None => Ok(()),
    }
}

/// The error for entry `i + 1` (at byte `next`) not past entry `i` (at byte `at`); ids
/// are the table's own.
pub fn not_increasing(i: u64, at: u64, next: u64) -> TableError {
    TableError::NotIncreasing {
        entry: i + 1,
        at,
        next,
    }
}

/// Serializes offsets as the table format.
pub fn encode_table(offsets: &[u64]) -> Vec<u8> {
    let mut bytes = vec![0u8; offsets.len() * 8];
    LittleEndian::write_u64_into(offsets, &mut bytes);
    bytes
}

/// Builds an offset table while a file is written (spec §3 and §4): the offsets, in
/// memory (the engine's `OffsetTableBuilder` wraps this one and writes the table file).
///
/// Without padding, `calc_offset` follows spec eq. 2 (this offset = previous offset +
/// previous length). With a page size, the padding rule decides where each instance
/// goes and [`padding_before`](OffsetTableBuilder::padding_before) says how many filler
/// bytes the writer must put first.
///
/// ```
/// use tfrecord_lirs_format::framing::PageSize;
/// use tfrecord_lirs_format::table::OffsetTableBuilder;
/// let mut table = OffsetTableBuilder::new(Some(PageSize::default()));
/// assert_eq!(table.calc_offset(4000), 0);
/// // 4016 framed bytes so far: a 100-byte instance does not fit the rest of the page,
/// // so filler comes first and the instance starts the next page.
/// assert_eq!(table.padding_before(100), 4096 - 4016);
/// assert_eq!(table.calc_offset(100), 4096);
/// assert_eq!(table.offsets(), &[0, 4096]);
/// ```
#[derive(Debug, Clone)]
pub struct OffsetTableBuilder {
    offsets: Vec<u64>,
    /// End of the last instance written (where the next padding or instance goes).
    end: u64,
    padding: Option<PageSize>,
}

impl OffsetTableBuilder {
    /// A builder for a file written from byte 0, padded for `padding` if given.
    pub fn new(padding: Option<PageSize>) -> OffsetTableBuilder {
        OffsetTableBuilder {
            offsets: Vec::new(),
            end: 0,
            padding,
        }
    }

    /// Filler bytes the writer must write before the next instance of `payload_len`
    /// bytes: 0 without padding, else 0 or at least 24 (one filler record).
    pub fn padding_before(&self, payload_len: u64) -> u64 {
        match self.padding {
            Some(page) => framing::padding_before(self.end, framing::framed_len(payload_len), page),
            None => 0,
        }
    }

    /// Records the next instance (spec: `calc_offset(instance)`) and returns its offset.
    pub fn calc_offset(&mut self, payload_len: u64) -> u64 {
        let offset = self.end + self.padding_before(payload_len);
        self.offsets.push(offset);
        self.end = offset + framing::framed_len(payload_len);
        offset
    }

    /// The offsets so far.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// Where the next byte goes (the data file's size so far, padding excluded).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Consumes the builder, returning the offsets.
    pub fn into_offsets(self) -> Vec<u64> {
        self.offsets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_tables_are_named() {
        let mut bytes = encode_table(&[0, 10, 20]);
        bytes.pop();
        let err = parse_table(&bytes).unwrap_err();
        assert_eq!((err.instance(), err.offset()), (None, 16));
        assert!(err.to_string().contains("multiple of 8"), "{err}");
        let err = parse_table(&encode_table(&[0, 20, 10])).unwrap_err();
        assert_eq!((err.instance(), err.offset()), (Some(2), 10));
        assert!(
            err.to_string()
                .contains("instance 1 is at byte 20 and instance 2 at byte 10"),
            "{err}"
        );
        let err = parse_table(&encode_table(&[0, 20, 20])).unwrap_err();
        assert!(err.to_string().contains("strictly increase"), "{err}");
    }

    #[test]
    fn builder_follows_equation_2_without_padding() {
        let mut b = OffsetTableBuilder::new(None);
        assert_eq!(b.calc_offset(10), 0);
        assert_eq!(b.calc_offset(0), 26);
        assert_eq!(b.padding_before(5000), 0);
        assert_eq!(b.calc_offset(5), 42);
        assert_eq!(b.end(), 63);
    }
}
