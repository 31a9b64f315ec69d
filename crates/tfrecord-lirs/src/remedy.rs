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
    /// `data` starts with filler records (or holds only fillers), which no offset
    /// table can index: write a padded copy, which drops the fillers and lays the
    /// instances out from byte 0.
    Repad {
        /// The data file.
        data: PathBuf,
    },
    /// No page size can be inferred from `data`'s fillers: write a padded copy, or give
    /// the page size.
    RepadOrPageSize {
        /// The data file.
        data: PathBuf,
    },
    /// The table at `table` is empty but `data` is not: build the table, or, if the
    /// file holds only fillers, write a padded copy.
    IndexOrRepad {
        /// The data file.
        data: PathBuf,
        /// Its offset table's path.
        table: PathBuf,
    },
    /// Writing would replace `output`, which exists: choose another output path, or
    /// ask for it to be replaced.
    Overwrite {
        /// The output that exists.
        output: PathBuf,
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
                data: data.clone(),
                compression: "GZIP",
            },
            Remedy::Repad { data: data.clone() },
            Remedy::RepadOrPageSize { data: data.clone() },
            Remedy::IndexOrRepad {
                data: data.clone(),
                table,
            },
            Remedy::Overwrite {
                output: PathBuf::from("p.tfrecord"),
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
            // The Rust API's words name the command and the function alike.
            Remedy::Repad { .. } => f.write_str(
                "rewrite it with `tfrecord-lirs pad` or `pad_file` (which drops the fillers and lays the instances out from byte 0)",
            ),
            Remedy::RepadOrPageSize { .. } => {
                f.write_str("rewrite the file with pad (a padded copy), or give its page size")
            }
            Remedy::IndexOrRepad { table, .. } => write!(
                f,
                "build the table {} (index the file), or rewrite a file that holds only fillers with pad",
                table.display()
            ),
            Remedy::Overwrite { .. } => {
                f.write_str("choose another output path, or ask pad to overwrite it")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The errors whose advice named a front end's command now carry a remedy instead,
    /// and their messages name no front end.
    #[test]
    fn errors_carry_their_remedy_not_a_command() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d.tfrecord");

        // A file that starts with a filler cannot be indexed: pad it.
        let e = crate::scan::check_first_instance(&data, Some(24), 100).unwrap_err();
        assert_eq!(e.remedy(), Some(&Remedy::Repad { data: data.clone() }));

        // An empty table for a file that is not empty: index it, or pad a file of fillers.
        let mut bytes = Vec::new();
        tfrecord_lirs_format::framing::encode_record(b"x", &mut bytes);
        std::fs::write(&data, &bytes).unwrap();
        let table = default_table_path(&data);
        std::fs::write(&table, b"").unwrap();
        let e = crate::read::reader::Reader::open_one(&data, None, &Default::default())
            .err()
            .unwrap();
        assert_eq!(
            e.remedy(),
            Some(&Remedy::IndexOrRepad {
                data: data.clone(),
                table
            }),
            "{e}"
        );

        // pad will not replace an existing output unless asked to.
        let out = dir.path().join("p.tfrecord");
        std::fs::write(&out, b"").unwrap();
        let e = crate::write::pad::check_pad_output(&data, &out, false).unwrap_err();
        assert_eq!(e.remedy(), Some(&Remedy::Overwrite { output: out }));

        for e in [
            e,
            crate::scan::check_first_instance(&data, None, 100).unwrap_err(),
        ] {
            let text = e.worded(&|_| String::new());
            assert!(
                !text.contains("--") && !text.contains("(Python)") && !text.contains("`"),
                "{text}"
            );
        }
    }
}
