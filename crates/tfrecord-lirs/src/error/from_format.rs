//! The format crate's errors as the engine's: each gets its kind here, and the file it
//! is about where the format crate did not know one.

use std::path::Path;

use tfrecord_lirs_format::error::Error as FormatError;
use tfrecord_lirs_format::table::TableError;

use super::Error;

/// A rule broken by a value or a state (no file: the format crate reads none), or a
/// read of a table's entries that failed (the table the layout names).
impl From<FormatError> for Error {
    fn from(e: FormatError) -> Error {
        match e {
            FormatError::InvalidArgument(message) => Error::invalid_argument(message),
            FormatError::DataLoss(message) => Error::data_loss(message),
            FormatError::Offsets { table, source } => {
                let source = match source.downcast::<std::io::Error>() {
                    Ok(io) => *io,
                    Err(other) => std::io::Error::other(other),
                };
                Error::io(&table, source)
            }
            // `Internal` and any kind of error the format crate adds later.
            other => Error::internal(other.to_string()),
        }
    }
}

impl Error {
    /// The error for the bytes of the offset table at `table` not being a table
    /// ([`ErrorKind::DataLoss`](super::ErrorKind::DataLoss): its own bytes are damaged).
    pub(crate) fn damaged_table_bytes(table: &Path, e: TableError) -> Error {
        Error::damaged_table(table, e.instance(), Some(e.offset()), e.to_string())
    }
}
