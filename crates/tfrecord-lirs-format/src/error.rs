//! One error type for the crate. Every message names the file and, where it applies,
//! the instance id and the byte offset, so a user can find the damage.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::framing::FrameError;
pub use crate::remedy::Remedy;
use crate::table_path::{data_of_table, default_table_path};

// The constructors below marked `#[doc(hidden)]` are public for the engine crate
// (tfrecord-lirs), which makes its errors with them; users make errors only through the
// documented ones.

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

    #[doc(hidden)]
    pub fn io(path: &Path, source: std::io::Error) -> Error {
        let kind = match source.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::UnexpectedEof => ErrorKind::DataLoss,
            std::io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
            std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::NotConnected => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        };
        Error {
            kind,
            at: Some(Location::new(path, None, None)),
            help: None,
            detail: Detail::Io(source),
        }
    }

    /// The error for reading the table at `table` (of data file `data`, if known)
    /// failing with `source`: a missing table says how to make one.
    #[doc(hidden)]
    pub fn table_io(table: &Path, data: Option<&Path>, source: std::io::Error) -> Error {
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

    #[doc(hidden)]
    pub fn frame(path: &Path, instance: Option<u64>, offset: u64, frame: FrameError) -> Error {
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
    #[doc(hidden)]
    pub fn table(
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
    #[doc(hidden)]
    pub fn damaged_table(
        path: &Path,
        instance: Option<u64>,
        offset: Option<u64>,
        reason: impl Into<String>,
    ) -> Error {
        Error::layout(path, instance, offset, reason)
    }

    /// This error as one of kind `kind`, its message unchanged: for the one place that
    /// tells a table error's cause from the files (the engine's `advice` module).
    #[doc(hidden)]
    pub fn with_kind(mut self, kind: ErrorKind) -> Error {
        self.kind = kind;
        self
    }

    /// A data file whose layout breaks a rule ([`ErrorKind::DataLoss`]), at `offset`
    /// (`None` where the byte offset is unknown: inside a decompressed stream, whose
    /// offsets are not file offsets).
    #[doc(hidden)]
    pub fn layout(
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
    #[doc(hidden)]
    pub fn changed(
        path: &Path,
        instance: Option<u64>,
        offset: Option<u64>,
        reason: String,
    ) -> Error {
        Error::layout(path, instance, offset, reason)
    }

    /// The error about line `line` of the text index `index`: `source`, of the same kind.
    #[doc(hidden)]
    pub fn text_index(index: &Path, line: u64, source: Error) -> Error {
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
    #[doc(hidden)]
    pub fn renumber_frame(mut self, renumber: impl FnOnce(u64) -> Option<u64>) -> Error {
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

impl Error {
    /// The error for state that cannot be what it claims to be (a damaged or forged
    /// checkpoint): [`ErrorKind::DataLoss`]; `message` says what is wrong.
    pub fn data_loss(message: impl Into<String>) -> Error {
        Error::message(ErrorKind::DataLoss, message.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_and_messages_name_file_instance_and_byte() {
        let data = Path::new("d.tfrecord");
        let frame = Error::frame(
            data,
            Some(3),
            120,
            FrameError::Truncated {
                needed: 9,
                available: 4,
            },
        );
        assert_eq!(frame.kind(), ErrorKind::DataLoss);
        assert_eq!(
            (frame.file(), frame.instance(), frame.offset()),
            (Some(data), Some(3), Some(120))
        );
        assert_eq!(
            frame.to_string(),
            "d.tfrecord: instance 3 at byte 120: truncated record: needs 9 bytes, only 4 available"
        );
        let renumbered = frame.renumber_frame(|offset| Some(offset / 10));
        assert_eq!(renumbered.instance(), Some(12));

        let line = Error::text_index(
            Path::new("d.idx"),
            7,
            Error::table(data, Some(2), Some(40), "bad"),
        );
        assert_eq!(line.kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            (line.file(), line.instance(), line.offset()),
            (Some(Path::new("d.idx")), Some(2), Some(40))
        );
        assert_eq!(
            line.to_string(),
            "d.idx: line 7: d.tfrecord: instance 2 at byte 40: bad"
        );

        // A compressed file is the caller's mistake, not damage: the message names its
        // magic bytes and how to read it.
        let gz = Error::compressed(data, "GZIP");
        assert_eq!(
            (gz.kind(), gz.offset()),
            (ErrorKind::InvalidArgument, Some(0))
        );
        let text = gz.to_string();
        assert!(
            text.starts_with("d.tfrecord at byte 0: file looks GZIP-compressed (it starts with the GZIP magic bytes 1f 8b)"),
            "{text}"
        );
        // The remedy is a value each front end words; the message names none of them.
        assert_eq!(
            gz.remedy(),
            Some(&Remedy::Pad {
                data: data.to_path_buf(),
                compression: "GZIP"
            })
        );
        assert!(
            !text.contains("tfrecord-lirs") && !text.contains("Python"),
            "{text}"
        );
        let zlib = Error::compressed(data, "ZLIB").to_string();
        assert!(
            zlib.contains("ZLIB-compressed (it starts with a ZLIB header"),
            "{zlib}"
        );
        assert_eq!(
            gz.worded(&|r| format!("<{}>", matches!(r, Remedy::Pad { .. }))),
            format!("{}: <true>", text.split(": write").next().unwrap())
        );
        let damaged = Error::damaged_table(Path::new("d.offsets"), None, Some(8), "bad");
        assert_eq!(damaged.kind(), ErrorKind::DataLoss);
        let moved = Error::table(data, None, None, "bad").with_kind(ErrorKind::DataLoss);
        assert_eq!(
            (moved.kind(), moved.to_string().as_str()),
            (ErrorKind::DataLoss, "d.tfrecord: bad")
        );

        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let table = Error::table_io(Path::new("d.tfrecord.offsets"), None, missing);
        assert_eq!(table.kind(), ErrorKind::NotFound);
        assert_eq!(
            table.remedy(),
            Some(&Remedy::BuildTable {
                data: PathBuf::from("d.tfrecord"),
                table: PathBuf::from("d.tfrecord.offsets")
            })
        );
        assert!(
            table
                .to_string()
                .starts_with("d.tfrecord.offsets: no offset table ("),
            "{table}"
        );
        assert!(std::error::Error::source(&table).is_some());

        let eof = Error::io(
            data,
            std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
        );
        assert_eq!((eof.kind(), eof.instance()), (ErrorKind::DataLoss, None));
        let refused = Error::io(
            data,
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        assert_eq!(refused.kind(), ErrorKind::PermissionDenied);
        for transient in [
            std::io::ErrorKind::TimedOut,
            std::io::ErrorKind::ConnectionRefused,
            std::io::ErrorKind::ConnectionAborted,
        ] {
            let e = Error::io(data, std::io::Error::from(transient));
            assert_eq!((e.kind(), e.file()), (ErrorKind::Unavailable, Some(data)));
        }
        let arg = Error::invalid_argument("page size 3 is not a power of two");
        assert_eq!((arg.kind(), arg.file()), (ErrorKind::InvalidArgument, None));
        assert_eq!(arg.to_string(), "page size 3 is not a power of two");
        assert_eq!(Error::internal("bug").kind(), ErrorKind::Internal);
    }
}
