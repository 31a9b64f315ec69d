//! One error type for the crate. Every message names the file and, where it applies,
//! the instance id and the byte offset, so a user can find the damage.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::format::FrameError;

/// The way out of the strict checks for files padded by other tools, named by the
/// errors a strict reader gives where the bytes it refuses are valid records.
pub(crate) const TRUST_TABLE_HINT: &str = "if this file was padded by another tool (e.g. the LIRS reference implementation) and its table is authoritative, read it with --trust-table (CLI) / trust_table=True (Python)";

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
    #[error("{at}: file looks {format}-compressed; random access needs an uncompressed TFRecord file: `tfrecord-lirs pad {path} OUT` (Python: tfrecord_lirs.pad) decompresses it as it reads and writes a padded copy OUT with its table in one step, or decompress it first (GZIP: `gunzip -c {path} > OUT`; ZLIB: `zlib-flate -uncompress < {path} > OUT`) and index that", path = .at.path.display())]
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
    /// An offset table that does not exist. The message says how to make one.
    #[error("{}", missing_table_message(.table, .data, .source))]
    MissingTable {
        /// The table path that was looked for.
        table: PathBuf,
        /// The data file it would describe (the table path without `.offsets` when
        /// the data file is not known).
        data: PathBuf,
        /// The OS error (kind `NotFound`).
        #[source]
        source: std::io::Error,
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
            Error::MissingTable { .. } => ErrorKind::NotFound,
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

    /// The error for reading the table at `table` (of data file `data`, if known)
    /// failing with `source`: a missing table says how to make one.
    pub(crate) fn table_io(table: &Path, data: Option<&Path>, source: std::io::Error) -> Error {
        if source.kind() != std::io::ErrorKind::NotFound {
            return Error::io(table, source);
        }
        let data = data.map_or_else(|| data_of_table(table), Path::to_path_buf);
        Error::MissingTable {
            table: table.to_path_buf(),
            data,
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

/// The data file a table at `table` describes by the naming convention: the path
/// without its `.offsets` suffix (or `FILE` when it has none).
fn data_of_table(table: &Path) -> PathBuf {
    let name = table.as_os_str().to_string_lossy();
    match name.strip_suffix(".offsets") {
        Some(data) if !data.is_empty() => PathBuf::from(data),
        _ => PathBuf::from("FILE"),
    }
}

/// The message of [`Error::MissingTable`]: how to make the table, on the CLI and in
/// Python (naming the table path when it is not the default one), or a padded copy.
fn missing_table_message(table: &Path, data: &Path, source: &std::io::Error) -> String {
    let d = data.display();
    let (cli_out, py_out) = if crate::table::default_table_path(data) == table {
        (String::new(), String::new())
    } else {
        let t = table.display().to_string();
        (format!(" --out {t}"), format!(", {t:?}"))
    };
    format!(
        "{}: no offset table ({source}): make one with `tfrecord-lirs index {d}{cli_out}` (Python: tfrecord_lirs.build_offset_table({:?}{py_out})), or write a padded copy with its table with `tfrecord-lirs pad {d} OUT`",
        table.display(),
        d.to_string()
    )
}
