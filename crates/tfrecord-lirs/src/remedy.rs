//! What a user can do about an error, as a value: each front end (the CLI, Python, the
//! TensorFlow op) words it in its own terms, in one place of its own; `Display` is the
//! wording that names no front end, for the Rust API.

use std::fmt;
use std::path::{Path, PathBuf};

use tfrecord_lirs_format::table_path::default_table_path;

/// The way out of an [`Error`](crate::error::Error), when there is one a user can take.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Remedy {
    /// `data` has no offset table at `table`: build it (index the data file), or write
    /// a padded copy with its table.
    BuildTable {
        /// The data file.
        data: PathBuf,
        /// Its offset table's path.
        table: PathBuf,
    },
    /// The table at `table` no longer describes `data` (rewritten or replaced since):
    /// rebuild it.
    RebuildTable {
        /// The data file.
        data: PathBuf,
        /// Its offset table's path.
        table: PathBuf,
    },
    /// `data` was cut short after its table at `table` was written: restore the file,
    /// or if it is complete as it is, rebuild the table.
    RestoreOrRebuildTable {
        /// The data file.
        data: PathBuf,
        /// Its offset table's path.
        table: PathBuf,
    },
    /// The table given for `data` is another file's: pass `data`'s own table, or build
    /// it at `data`'s own table path `own` (never over the other file's table).
    OwnTable {
        /// The data file.
        data: PathBuf,
        /// Its own table's path.
        own: PathBuf,
    },
    /// `data` changed while it was open: open it again, and if it was rewritten on
    /// purpose, rebuild its table at `table` first.
    Reopen {
        /// The data file.
        data: PathBuf,
        /// Its offset table's path.
        table: PathBuf,
    },
    /// The table does not index bytes that are records: rebuild the table, or, if the
    /// file was padded by another tool and its table is authoritative, trust the table.
    RebuildOrTrustTable {
        /// The data file.
        data: PathBuf,
        /// Its offset table's path.
        table: PathBuf,
    },
    /// Bytes a strict reader refuses are valid records: if the file was padded by
    /// another tool and its table is authoritative, trust the table.
    TrustTable,
    /// `data` is a `compression` ("GZIP" or "ZLIB") stream, which cannot be read at
    /// random: write an uncompressed padded copy with its table (pad decompresses as it
    /// reads), or decompress it first and index that.
    Pad {
        /// The compressed file.
        data: PathBuf,
        /// "GZIP" or "ZLIB".
        compression: &'static str,
    },
}

/// When trusting the table is the way out ([`Remedy::TrustTable`]), in every front
/// end's words.
pub const TRUST_WHEN: &str = "if this file was padded by another tool (e.g. the LIRS reference implementation) and its table is authoritative";

/// The table a command or call that builds `data`'s table at `table` must name: `None`
/// when `table` is `data`'s default table path (the commands' default too).
pub fn named_table<'a>(data: &Path, table: &'a Path) -> Option<&'a Path> {
    (default_table_path(data) != table).then_some(table)
}

impl Remedy {
    /// One of each remedy, for the front ends' tests that every remedy has their words.
    #[doc(hidden)]
    pub fn examples() -> Vec<Remedy> {
        let (data, table) = (PathBuf::from("d.tfrecord"), PathBuf::from("t.offsets"));
        vec![
            Remedy::BuildTable {
                data: data.clone(),
                table: table.clone(),
            },
            Remedy::RebuildTable {
                data: data.clone(),
                table: table.clone(),
            },
            Remedy::RestoreOrRebuildTable {
                data: data.clone(),
                table: table.clone(),
            },
            Remedy::OwnTable {
                data: data.clone(),
                own: PathBuf::from("d.tfrecord.offsets"),
            },
            Remedy::Reopen {
                data: data.clone(),
                table: table.clone(),
            },
            Remedy::RebuildOrTrustTable {
                data: data.clone(),
                table: PathBuf::from("t.offsets"),
            },
            Remedy::TrustTable,
            Remedy::Pad {
                data,
                compression: "GZIP",
            },
        ]
    }
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Remedy::BuildTable { data, .. } => write!(
                f,
                "build the offset table of {} (index it), or write a padded copy with its table",
                data.display()
            ),
            Remedy::RebuildTable { table, .. } => {
                write!(f, "rebuild the table {} (index the file again)", table.display())
            }
            Remedy::RestoreOrRebuildTable { table, .. } => write!(
                f,
                "restore the file, or if it is complete as it is, rebuild the table {}",
                table.display()
            ),
            Remedy::OwnTable { data, own } => write!(
                f,
                "pass {}'s own table ({}), or build it there",
                data.display(),
                own.display()
            ),
            Remedy::Reopen { table, .. } => write!(
                f,
                "open it again (a new reader), and if it was rewritten on purpose, rebuild its table {} first",
                table.display()
            ),
            Remedy::RebuildOrTrustTable { table, .. } => write!(
                f,
                "rebuild the table {}; or, {TRUST_WHEN}, open it trusting its table",
                table.display()
            ),
            Remedy::TrustTable => write!(f, "{TRUST_WHEN}, open it trusting its table"),
            Remedy::Pad { .. } => f.write_str(
                "write an uncompressed padded copy with its table (pad decompresses it as it reads), or decompress it first and index that",
            ),
        }
    }
}
