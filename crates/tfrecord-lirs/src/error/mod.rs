//! One error type for the crate. Every message names the file and, where it applies,
//! the instance id and the byte offset, so a user can find the damage.

use std::fmt;
use std::path::{Path, PathBuf};

use tfrecord_lirs_format::framing::FrameError;
use tfrecord_lirs_format::table_path::default_table_path;

pub use crate::remedy::Remedy;

mod build;
mod classes;
mod from_format;
#[cfg(test)]
mod tests;

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// What kind of failure an [`Error`] is; the TensorFlow op maps these onto status codes.
///
/// The rule (docs/FORMAT.md, "Errors: one kind per cause"): bytes that are not what
/// was written, or a file that changed after its table was written, are
/// [`DataLoss`](ErrorKind::DataLoss); a mistake in what the caller passed (an option, a
/// path that is not an uncompressed TFRecord data file, another file's table) is
/// [`InvalidArgument`](ErrorKind::InvalidArgument). Where an error's cause is told by
/// looking at the files (a table that does not fit its data file), the engine's
/// `advice` module decides it once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The bytes are damaged or changed: CRC mismatch, truncation, not a record, a
    /// damaged offset table, a data file truncated or rewritten after its table was
    /// written or while it was open.
    DataLoss,
    /// A mistake in what the caller passed: bad arguments, a compressed file, a
    /// directory or a table given as data, another file's table, or a table that does
    /// not fit its data file where nothing shows the file changed.
    InvalidArgument,
    /// A file does not exist.
    NotFound,
    /// The file (or object) may not be read or written with these credentials: a local
    /// file's permissions, object storage refusing the request (HTTP 401/403), or a
    /// client that found no credentials to ask with.
    PermissionDenied,
    /// The storage did not serve the request, even after retries: server errors
    /// (HTTP 5xx), timeouts, refused or dropped connections. Trying again later may work.
    Unavailable,
    /// Anything else (I/O failures, bugs).
    Internal,
}

/// The kind of an I/O error from any storage (a local file, object storage, a file
/// system of TensorFlow's or Python's): the one mapping of I/O failures onto kinds.
pub(crate) fn io_kind(source: &std::io::Error) -> ErrorKind {
    match source.kind() {
        std::io::ErrorKind::NotFound => ErrorKind::NotFound,
        std::io::ErrorKind::UnexpectedEof => ErrorKind::DataLoss,
        std::io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        std::io::ErrorKind::TimedOut
        | std::io::ErrorKind::ConnectionRefused
        | std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::ConnectionAborted
        | std::io::ErrorKind::NotConnected => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
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

/// The crate's error: what kind of failure ([`kind`](Error::kind)), where
/// ([`file`](Error::file), [`instance`](Error::instance), [`offset`](Error::offset)),
/// and a message (`Display`) that names all three where they apply, so a user can find
/// the damage. Callers branch on the kind and the accessors, never on the message.
///
/// ```
/// use tfrecord_lirs::{ErrorKind, Reader};
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("data.tfrecord");
/// let mut bytes = Vec::new();
/// tfrecord_lirs::format::encode_record(b"a payload", &mut bytes);
/// bytes[14] ^= 1; // damage the payload
/// std::fs::write(&path, &bytes).unwrap();
/// std::fs::write(dir.path().join("data.tfrecord.offsets"), 0u64.to_le_bytes()).unwrap();
/// let reader = Reader::open_one(&path, None, &Default::default()).unwrap();
/// let err = reader.read(0).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::DataLoss);
/// assert_eq!(err.file(), Some(path.as_path()));
/// assert_eq!((err.instance(), err.offset()), (Some(0), Some(0)));
/// assert!(err.to_string().contains("instance 0 at byte 0"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Error {
    kind: ErrorKind,
    /// Where; `None` for bad arguments and internal errors.
    at: Option<Location>,
    detail: Detail,
    /// The finding and the remedy, when there is either; boxed, so that a `Result`
    /// stays small.
    help: Option<Box<Help>>,
}

/// What the files show about an error's cause, and what the user can do about it.
#[derive(Debug, Clone, Default)]
struct Help {
    /// What the files show about the cause, when that was looked into (see
    /// [`Error::with_finding`]); printed after the message.
    finding: Option<String>,
    /// What the user can do about it, worded by each front end (see [`Remedy`]).
    remedy: Option<Remedy>,
}

/// What went wrong, beyond the kind and the place.
#[derive(Debug)]
enum Detail {
    /// An operating-system I/O error on the file.
    Io(std::io::Error),
    /// Damaged record framing at the location.
    Frame(FrameError),
    /// The file is GZIP or ZLIB compressed ("GZIP" or "ZLIB"), which cannot be randomly
    /// accessed.
    Compressed(&'static str),
    /// A rule the data or table at the location breaks (a table that does not fit its
    /// data file, a filler where an instance should be, ...).
    Reason(String),
    /// A message with no place (a bad argument, an internal error).
    Message(String),
    /// No offset table at the location's path; `data` is the file it would describe.
    MissingTable {
        data: PathBuf,
        source: std::io::Error,
    },
    /// Line `line` of the text index at the location's path: `source` says what.
    TextIndex { line: u64, source: Box<Error> },
}

/// The message with the remedy in the words that name no front end ([`Remedy`]'s own).
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, &|r: &Remedy| r.to_string())
    }
}

/// An error shown with a front end's words for its remedy ([`Error::worded`]).
struct Worded<'a> {
    error: &'a Error,
    words: &'a dyn Fn(&Remedy) -> String,
}

impl fmt::Display for Worded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt_with(f, self.words)
    }
}

impl Error {
    /// The message, its remedy (and any nested error's) worded by `words`: how a front
    /// end says what to do in its own terms (its commands, calls or arguments).
    pub fn worded(&self, words: &dyn Fn(&Remedy) -> String) -> String {
        Worded { error: self, words }.to_string()
    }

    fn fmt_with(
        &self,
        f: &mut fmt::Formatter<'_>,
        words: &dyn Fn(&Remedy) -> String,
    ) -> fmt::Result {
        self.fmt_detail(f, words)?;
        if let Some(finding) = self.finding() {
            write!(f, "; {finding}")?;
        }
        match self.remedy() {
            Some(remedy) => write!(f, ": {}", words(remedy)),
            None => Ok(()),
        }
    }

    fn fmt_detail(
        &self,
        f: &mut fmt::Formatter<'_>,
        words: &dyn Fn(&Remedy) -> String,
    ) -> fmt::Result {
        let at = self.at.as_ref();
        match (&self.detail, at) {
            (Detail::Message(message), None) => f.write_str(message),
            (Detail::Message(message), Some(at)) | (Detail::Reason(message), Some(at)) => {
                write!(f, "{at}: {message}")
            }
            (Detail::Reason(message), None) => f.write_str(message),
            (Detail::Io(source), Some(at)) => write!(f, "{at}: {source}"),
            (Detail::Io(source), None) => write!(f, "{source}"),
            (Detail::Frame(frame), Some(at)) => write!(f, "{at}: {frame}"),
            (Detail::Frame(frame), None) => write!(f, "{frame}"),
            (Detail::Compressed(format), at) => {
                if let Some(at) = at {
                    write!(f, "{at}: ")?;
                }
                let magic = match *format {
                    "GZIP" => "the GZIP magic bytes 1f 8b",
                    _ => "a ZLIB header (e.g. 78 9c)",
                };
                write!(
                    f,
                    "file looks {format}-compressed (it starts with {magic}); random access needs an uncompressed TFRecord file"
                )
            }
            (Detail::MissingTable { data, source }, at) => {
                let table = at.map_or_else(|| default_table_path(data), |a| a.path.clone());
                write!(f, "{}: no offset table ({source})", table.display())
            }
            (Detail::TextIndex { line, source }, at) => {
                if let Some(at) = at {
                    write!(f, "{}: ", at.path.display())?;
                }
                write!(f, "line {line}: ")?;
                source.fmt_with(f, words)
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.detail {
            Detail::Io(source) | Detail::MissingTable { source, .. } => Some(source),
            Detail::TextIndex { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

impl Error {
    /// The kind of failure, for mapping onto other error systems.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether this is the error of an offset table that does not exist (a `NotFound`
    /// whose message says how to make one).
    pub fn is_missing_table(&self) -> bool {
        matches!(self.detail, Detail::MissingTable { .. })
    }

    /// The file the error is about: the data file, or the offset table or text index
    /// (for an error about a text index line, the index). `None` for bad arguments and
    /// internal errors.
    pub fn file(&self) -> Option<&Path> {
        self.at.as_ref().map(|at| at.path.as_path())
    }

    /// The instance id involved, if any (for a text index line, the instance of the
    /// data file record it names).
    pub fn instance(&self) -> Option<u64> {
        match &self.detail {
            Detail::TextIndex { source, .. } => source.instance(),
            _ => self.at.as_ref().and_then(|at| at.instance),
        }
    }

    /// The byte offset in [`file`](Error::file) where the damage is, if known (for a
    /// text index line, the offset in the data file it names).
    pub fn offset(&self) -> Option<u64> {
        match &self.detail {
            Detail::TextIndex { source, .. } => source.offset(),
            _ => self.at.as_ref().and_then(|at| at.offset),
        }
    }

    /// The error for a bad argument from the caller ([`ErrorKind::InvalidArgument`]);
    /// `message` says what is allowed.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::message(ErrorKind::InvalidArgument, message.into())
    }

    /// The error for a bug or broken invariant inside the library
    /// ([`ErrorKind::Internal`], e.g. a caught panic): not the caller's or the data's
    /// fault, and not worth retrying piecemeal.
    pub fn internal(message: impl Into<String>) -> Error {
        Error::message(ErrorKind::Internal, message.into())
    }

    /// The error for `path`, whose first bytes are a `format` ("GZIP" or "ZLIB")
    /// stream: it says how to get a file that can be read at random
    /// ([`ErrorKind::InvalidArgument`]: a compressed file given where random access
    /// needs an uncompressed one is the caller's mistake, not damage; at byte 0).
    pub fn compressed(path: &Path, format: &'static str) -> Error {
        Error {
            kind: ErrorKind::InvalidArgument,
            at: Some(Location::new(path, None, Some(0))),
            help: Some(Box::new(Help {
                finding: None,
                remedy: Some(Remedy::Pad {
                    data: path.to_path_buf(),
                    compression: format,
                }),
            })),
            detail: Detail::Compressed(format),
        }
    }

    /// The error for `path` given as a TFRecord data file when it is something else
    /// (a directory, an offset table): `what` says what it is and what to give
    /// instead ([`ErrorKind::InvalidArgument`]).
    pub fn not_a_data_file(path: &Path, what: impl Into<String>) -> Error {
        Error {
            kind: ErrorKind::InvalidArgument,
            at: Some(Location::new(path, None, None)),
            help: None,
            detail: Detail::Reason(what.into()),
        }
    }

    /// The error for a pattern no data file matches, or an empty list (`pattern` names
    /// it): [`ErrorKind::NotFound`], as `tf.data.Dataset.list_files` says, not an empty
    /// dataset.
    pub fn no_match(pattern: &Path) -> Error {
        let what = if pattern.as_os_str().is_empty() {
            "no files given: the list is empty".to_string()
        } else {
            "no data file matches this pattern (offset tables `*.offsets` and temporary \
             files `.lirs-tmp-*` are never taken for data)"
                .to_string()
        };
        Error {
            kind: ErrorKind::NotFound,
            at: (!pattern.as_os_str().is_empty()).then(|| Location::new(pattern, None, None)),
            help: None,
            detail: Detail::Reason(what),
        }
    }

    /// This error with `finding` (what the files show about its cause) printed after
    /// its message; a second call replaces the first.
    pub fn with_finding(mut self, finding: impl Into<String>) -> Error {
        self.help.get_or_insert_default().finding = Some(finding.into());
        self
    }

    /// The finding [`with_finding`](Error::with_finding) added, if any.
    pub fn finding(&self) -> Option<&str> {
        self.help.as_ref().and_then(|h| h.finding.as_deref())
    }

    /// This error with `remedy` (what the user can do about it); a second call
    /// replaces the first.
    pub fn with_remedy(mut self, remedy: Remedy) -> Error {
        self.help.get_or_insert_default().remedy = Some(remedy);
        self
    }

    /// What the user can do about this error, if there is a remedy (each front end
    /// words it in its own terms).
    pub fn remedy(&self) -> Option<&Remedy> {
        self.help.as_ref().and_then(|h| h.remedy.as_ref())
    }

    fn message(kind: ErrorKind, message: String) -> Error {
        Error {
            kind,
            at: None,
            help: None,
            detail: Detail::Message(message),
        }
    }
}

impl Error {
    /// The error for state that cannot be what it claims to be (a damaged or forged
    /// checkpoint): [`ErrorKind::DataLoss`]; `message` says what is wrong.
    pub fn data_loss(message: impl Into<String>) -> Error {
        Error::message(ErrorKind::DataLoss, message.into())
    }
}
