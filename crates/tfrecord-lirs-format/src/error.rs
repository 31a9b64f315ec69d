//! The format crate's own error: which rule a value, some bytes or a saved state
//! breaks, and what was wrong. No file I/O and no advice: the engine (`tfrecord-lirs`)
//! turns each into its `Error`, giving it a kind, the file and what a user can do.
//! (Damaged framing is a [`FrameError`](crate::framing::FrameError), a damaged offset
//! table a [`TableError`](crate::table::TableError): the engine adds the file they are in.)

use std::fmt;
use std::path::PathBuf;

/// Result with the format crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// What was wrong; `Display` says it (the engine's message is this text, with the file
/// and instance where it knows them).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A value the caller passed breaks a rule (an option, a feature spec, a value that
    /// does not fit its type); the message says what is allowed.
    InvalidArgument(String),
    /// Bytes or a saved state that cannot be what they claim (a record that is not an
    /// Example, a damaged or forged checkpoint).
    DataLoss(String),
    /// A broken invariant inside the library (not the caller's or the data's fault).
    Internal(String),
    /// Reading the entries of the offset table `table` through
    /// [`Offsets`](crate::layout::Offsets) failed with `source` (the storage's error).
    Offsets {
        /// The table (as the layout names it).
        table: PathBuf,
        /// Why the read failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// A value the caller passed breaks a rule; `message` says what is allowed.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::InvalidArgument(message.into())
    }

    /// Bytes or a state that cannot be what they claim; `message` says what is wrong.
    pub fn data_loss(message: impl Into<String>) -> Error {
        Error::DataLoss(message.into())
    }

    /// A broken invariant inside the library.
    pub fn internal(message: impl Into<String>) -> Error {
        Error::Internal(message.into())
    }
}

#[cfg(test)]
impl Error {
    /// Which error this is, for tests across the crate.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Error::InvalidArgument(_) => "InvalidArgument",
            Error::DataLoss(_) => "DataLoss",
            Error::Internal(_) => "Internal",
            Error::Offsets { .. } => "Offsets",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(message)
            | Error::DataLoss(message)
            | Error::Internal(message) => f.write_str(message),
            Error::Offsets { source, .. } => write!(f, "{source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Offsets { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_the_text_and_a_failed_read_keeps_its_source() {
        assert_eq!(Error::invalid_argument("bad").to_string(), "bad");
        assert!(matches!(Error::data_loss("x"), Error::DataLoss(m) if m == "x"));
        let read = Error::Offsets {
            table: PathBuf::from("t.offsets"),
            source: "no entry 3".into(),
        };
        assert_eq!(read.to_string(), "no entry 3");
        assert!(std::error::Error::source(&read).is_some());
    }
}
