//! One error type for the crate. Every message names the file and, where it applies,
//! the instance id and the byte offset, so a user can find the damage.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::format::FrameError;

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// What kind of failure an [`Error`] is; the TensorFlow op maps these onto status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The bytes are damaged: CRC mismatch, truncation, not a record.
    DataLoss,
    /// Bad arguments, or a table that does not fit its data file.
    InvalidArgument,
    /// A file does not exist.
    NotFound,
    /// Anything else (I/O failures, bugs).
    Internal,
}

/// Where in which file something went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file.
    pub path: PathBuf,
    /// The instance id, when an instance is involved.
    pub instance: Option<u64>,
    /// The byte offset in `path`.
    pub offset: Option<u64>,
}

impl Location {
    /// A location in `path` at `offset`, optionally for `instance`.
    pub fn new(path: &Path, instance: Option<u64>, offset: Option<u64>) -> Location {
        Location {
            path: path.to_path_buf(),
            instance,
            offset,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(id) = self.instance {
            write!(f, ": instance {id}")?;
        }
        if let Some(off) = self.offset {
            write!(f, " at byte {off}")?;
        }
        Ok(())
    }
}

/// Errors of the crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O error on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Damaged record framing.
    #[error("{at}: {frame}")]
    Frame {
        /// Where the record starts.
        at: Location,
        /// What is wrong with it.
        frame: FrameError,
    },
    /// The file is GZIP or ZLIB compressed, which cannot be randomly accessed.
    #[error("{at}: file looks {format}-compressed; random access needs an uncompressed TFRecord file (decompress it first, e.g. by re-writing it with tf.io.TFRecordWriter without compression)")]
    Compressed {
        /// The file (offset 0).
        at: Location,
        /// "GZIP" or "ZLIB".
        format: &'static str,
    },
    /// An offset table that is malformed or does not fit its data file.
    #[error("{at}: {reason}")]
    Table {
        /// Where (the table file, or the data file when the mismatch shows there).
        at: Location,
        /// What does not fit.
        reason: String,
    },
    /// A data file whose layout breaks a rule (e.g. a filler where an instance should be).
    #[error("{at}: {reason}")]
    Layout {
        /// Where.
        at: Location,
        /// What rule is broken.
        reason: String,
    },
    /// A text index (DALI, the `tfrecord` package) that does not parse or does not fit
    /// its data file, at line `line`.
    #[error("{index}: line {line}: {source}")]
    TextIndex {
        /// The index file.
        index: String,
        /// 1-based line number in it.
        line: u64,
        /// What is wrong (naming the data file, instance and byte where they apply).
        source: Box<Error>,
    },
    /// A bad argument from the caller.
    #[error("{0}")]
    InvalidArgument(String),
    /// A bug or broken invariant inside the library (e.g. a caught panic); not the
    /// caller's or the data's fault, and not worth retrying piecemeal.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// The kind of failure, for mapping onto other error systems.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                ErrorKind::DataLoss
            }
            Error::Io { .. } | Error::Internal(_) => ErrorKind::Internal,
            Error::Frame { .. } | Error::Compressed { .. } | Error::Layout { .. } => {
                ErrorKind::DataLoss
            }
            Error::Table { .. } | Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::TextIndex { source, .. } => source.kind(),
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn frame(
        path: &Path,
        instance: Option<u64>,
        offset: u64,
        frame: FrameError,
    ) -> Error {
        Error::Frame {
            at: Location::new(path, instance, Some(offset)),
            frame,
        }
    }

    pub(crate) fn table(
        path: &Path,
        instance: Option<u64>,
        offset: Option<u64>,
        reason: impl Into<String>,
    ) -> Error {
        Error::Table {
            at: Location::new(path, instance, offset),
            reason: reason.into(),
        }
    }

    pub(crate) fn layout(
        path: &Path,
        instance: Option<u64>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Error {
        Error::Layout {
            at: Location::new(path, instance, Some(offset)),
            reason: reason.into(),
        }
    }
}
