//! The constructors the engine makes its errors with (not for users): an I/O error
//! on a file and its kind, a missing table, damaged framing or layout, a table that does
//! not fit its data file, a line of a text index.

use std::path::Path;

use tfrecord_lirs_format::framing::FrameError;
use tfrecord_lirs_format::table_path::data_of_table;

use super::{io_kind, Detail, Error, ErrorKind, Help, Location, Remedy};

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error {
            kind: io_kind(&source),
            at: Some(Location::new(path, None, None)),
            help: None,
            detail: Detail::Io(source),
        }
    }

    /// The error for reading the table at `table` (of data file `data`, if known)
    /// failing with `source`: a missing table says how to make one.
    pub(crate) fn table_io(table: &Path, data: Option<&Path>, source: std::io::Error) -> Error {
        if source.kind() != std::io::ErrorKind::NotFound {
            return Error::io(table, source);
        }
        let data = data.map_or_else(|| data_of_table(table), Path::to_path_buf);
        Error {
            kind: ErrorKind::NotFound,
            at: Some(Location::new(table, None, None)),
            help: Some(Box::new(Help {
                finding: None,
                remedy: Some(Remedy::BuildTable {
                    data: data.clone(),
                    table: table.to_path_buf(),
                }),
            })),
            detail: Detail::MissingTable { data, source },
        }
    }

    pub(crate) fn frame(
        path: &Path,
        instance: Option<u64>,
        offset: u64,
        frame: FrameError,
    ) -> Error {
        Error {
            kind: ErrorKind::DataLoss,
            at: Some(Location::new(path, instance, Some(offset))),
            help: None,
            detail: Detail::Frame(frame),
        }
    }

    /// A table that does not fit its data file, nothing yet showing why
    /// ([`ErrorKind::InvalidArgument`]; the engine's `advice` module gives it the kind
    /// of its cause once it has looked at the files).
    pub(crate) fn table(
        path: &Path,
        instance: Option<u64>,
        offset: Option<u64>,
        reason: impl Into<String>,
    ) -> Error {
        let kind = ErrorKind::InvalidArgument;
        Error {
            kind,
            ..Error::layout(path, instance, offset, reason)
        }
    }

    /// A table whose own bytes are damaged (a partial entry, entries that do not
    /// increase) or that changed while it was read ([`ErrorKind::DataLoss`]).
    pub(crate) fn damaged_table(
        path: &Path,
        instance: Option<u64>,
        offset: Option<u64>,
        reason: impl Into<String>,
    ) -> Error {
        Error::layout(path, instance, offset, reason)
    }

    /// This error as one of kind `kind`, its message unchanged: for the one place that
    /// tells a table error's cause from the files (the engine's `advice` module).
    pub(crate) fn with_kind(mut self, kind: ErrorKind) -> Error {
        self.kind = kind;
        self
    }

    /// A data file whose layout breaks a rule ([`ErrorKind::DataLoss`]), at `offset`
    /// (`None` where the byte offset is unknown: inside a decompressed stream, whose
    /// offsets are not file offsets).
    pub(crate) fn layout(
        path: &Path,
        instance: Option<u64>,
        offset: impl Into<Option<u64>>,
        reason: impl Into<String>,
    ) -> Error {
        Error {
            kind: ErrorKind::DataLoss,
            at: Some(Location::new(path, instance, offset.into())),
            help: None,
            detail: Detail::Reason(reason.into()),
        }
    }

    /// The error that data file `path` changed while it was open (`reason` says how and
    /// what failed because of it) ([`ErrorKind::DataLoss`]).
    pub(crate) fn changed(
        path: &Path,
        instance: Option<u64>,
        offset: Option<u64>,
        reason: String,
    ) -> Error {
        Error::layout(path, instance, offset, reason)
    }

    /// The error about line `line` of the text index `index`: `source`, of the same kind.
    pub(crate) fn text_index(index: &Path, line: u64, source: Error) -> Error {
        Error {
            kind: source.kind(),
            at: Some(Location::new(index, None, None)),
            help: None,
            detail: Detail::TextIndex {
                line,
                source: Box::new(source),
            },
        }
    }

    /// For a framing error, its instance id replaced by `renumber(offset)` (a scanner
    /// numbers instances by counting records; a trusted table numbers them by entry).
    pub(crate) fn renumber_frame(mut self, renumber: impl FnOnce(u64) -> Option<u64>) -> Error {
        if let (Detail::Frame(_), Some(at)) = (&self.detail, self.at.as_mut()) {
            at.instance = at.offset.and_then(renumber);
        }
        self
    }
}

/// A copy (an I/O error is copied as its kind and text): the error of a failed slot
/// stays in its window, which is shared, and each consumer that meets it gets its own.
impl Clone for Error {
    fn clone(&self) -> Error {
        let copy_io = |e: &std::io::Error| std::io::Error::new(e.kind(), e.to_string());
        let detail = match &self.detail {
            Detail::Io(source) => Detail::Io(copy_io(source)),
            Detail::Frame(frame) => Detail::Frame(frame.clone()),
            Detail::Compressed(format) => Detail::Compressed(format),
            Detail::Reason(message) => Detail::Reason(message.clone()),
            Detail::Message(message) => Detail::Message(message.clone()),
            Detail::MissingTable { data, source } => Detail::MissingTable {
                data: data.clone(),
                source: copy_io(source),
            },
            Detail::TextIndex { line, source } => Detail::TextIndex {
                line: *line,
                source: source.clone(),
            },
        };
        Error {
            kind: self.kind,
            at: self.at.clone(),
            detail,
            help: self.help.clone(),
        }
    }
}
