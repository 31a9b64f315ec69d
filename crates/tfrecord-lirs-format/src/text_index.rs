//! Text index files of other TFRecord readers: NVIDIA DALI's `tfrecord2idx` and the
//! `tfrecord` Python package's `tfrecord2idx` (pure: no I/O).
//!
//! Both tools write one line per record, in file order:
//!
//! ```text
//! <offset> <size>\n
//! ```
//!
//! `offset` is the byte offset of the record's length field and `size` the whole
//! framed record (`8 + 4 + payload + 4` bytes), both in decimal, separated by one
//! space. DALI reads an index back as whitespace-separated pairs (`fin >> pos >> size`)
//! and reads `size` bytes at `offset` for each sample; the `tfrecord` package reads it
//! with `numpy.loadtxt` (whitespace-separated columns, `#` comments) and uses only
//! the offsets. The two formats are the same bytes; they differ here only in what
//! parsing accepts (`#` comments in `tfrecord-py` indexes, as `numpy.loadtxt` does).
//!
//! `tfrecord_lirs::build_offset_table_from_text_index` checks an index against its data
//! file and `tfrecord_lirs::export_text_index` writes one (see `docs/FORMAT.md`).
//!
//! ```
//! use tfrecord_lirs::text_index::{encode_text_index, parse_text_index, TextIndexFormat};
//! let text = encode_text_index([(0, 30), (30, 116)]);
//! assert_eq!(text, "0 30\n30 116\n");
//! let entries = parse_text_index(TextIndexFormat::Dali, text.as_bytes()).unwrap();
//! assert_eq!((entries[1].line, entries[1].offset, entries[1].size), (2, 30, 116));
//! ```

use std::path::{Path, PathBuf};

/// Which tool's index format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextIndexFormat {
    /// NVIDIA DALI (`tools/tfrecord2idx`; read by `fn.readers.tfrecord(index_path=...)`).
    Dali,
    /// The `tfrecord` PyPI package (`tfrecord.tools.tfrecord2idx`; `*.tfindex`).
    TfrecordPy,
}

impl TextIndexFormat {
    /// The name used on the command line: `dali` or `tfrecord-py`.
    pub fn name(self) -> &'static str {
        match self {
            TextIndexFormat::Dali => "dali",
            TextIndexFormat::TfrecordPy => "tfrecord-py",
        }
    }

    /// Where an exported index goes when no path is given: `<data>.idx` for DALI (the
    /// name its examples use), and for the `tfrecord` package `<data without its
    /// extension>.tfindex`, the name its `tfrecord2idx DIR` gives.
    ///
    /// ```
    /// use std::path::Path;
    /// use tfrecord_lirs::text_index::TextIndexFormat;
    /// let data = Path::new("/d/train.tfrecord");
    /// assert_eq!(TextIndexFormat::Dali.default_path(data), Path::new("/d/train.tfrecord.idx"));
    /// assert_eq!(TextIndexFormat::TfrecordPy.default_path(data), Path::new("/d/train.tfindex"));
    /// ```
    pub fn default_path(self, data: &Path) -> PathBuf {
        match self {
            TextIndexFormat::Dali => {
                let mut s = data.as_os_str().to_owned();
                s.push(".idx");
                PathBuf::from(s)
            }
            TextIndexFormat::TfrecordPy => data.with_extension("tfindex"),
        }
    }
}

/// The text index format `path`'s name says it is in (the extensions the tools write:
/// `.idx` for DALI, `.tfindex` for the `tfrecord` package), if any.
pub fn format_by_name(path: &Path) -> Option<TextIndexFormat> {
    match path.extension()?.to_str()? {
        "idx" => Some(TextIndexFormat::Dali),
        "tfindex" => Some(TextIndexFormat::TfrecordPy),
        _ => None,
    }
}

impl std::fmt::Display for TextIndexFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry of a text index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextIndexEntry {
    /// 1-based line number in the index file.
    pub line: u64,
    /// Byte offset of the record in the data file.
    pub offset: u64,
    /// The record's framed size in bytes.
    pub size: u64,
}

/// A line of a text index that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextIndexError {
    /// 1-based line number.
    pub line: u64,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for TextIndexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// A non-negative decimal integer, digits only (no sign: `+5` and `-5` are refused).
fn parse_number(field: &str, what: &str) -> Result<u64, String> {
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{what} {field:?} is not a non-negative decimal integer"
        ));
    }
    field
        .parse()
        .map_err(|_| format!("{what} {field} does not fit in 64 bits"))
}

/// Parses an index file's bytes into its entries, in line order. Blank lines are
/// skipped (both tools' readers skip whitespace); every other line must be exactly
/// `offset size` (two non-negative decimal integers separated by spaces or tabs; a
/// trailing `\r` is allowed). In [`TextIndexFormat::TfrecordPy`] indexes `#` starts a
/// comment, as in `numpy.loadtxt`. The entries are not checked against each other or
/// a data file here.
pub fn parse_text_index(
    format: TextIndexFormat,
    bytes: &[u8],
) -> Result<Vec<TextIndexEntry>, TextIndexError> {
    let mut entries = Vec::new();
    let mut lines = bytes.split(|&b| b == b'\n').peekable();
    let mut number = 0u64;
    while let Some(raw) = lines.next() {
        number += 1;
        if raw.is_empty() && lines.peek().is_none() {
            break; // after the final newline
        }
        let fail = |reason: String| TextIndexError {
            line: number,
            reason,
        };
        let text =
            std::str::from_utf8(raw).map_err(|_| fail("not text (invalid UTF-8)".to_string()))?;
        let text = text.strip_suffix('\r').unwrap_or(text);
        let text = match format {
            TextIndexFormat::TfrecordPy => text.split('#').next().unwrap_or(""),
            TextIndexFormat::Dali => text,
        };
        let fields: Vec<&str> = text.split([' ', '\t']).filter(|f| !f.is_empty()).collect();
        match fields[..] {
            [] => continue,
            [offset, size] => entries.push(TextIndexEntry {
                line: number,
                offset: parse_number(offset, "offset").map_err(fail)?,
                size: parse_number(size, "size").map_err(fail)?,
            }),
            _ => {
                return Err(fail(format!(
                    "expected `offset size` (two decimal integers), found {} fields: {:?}",
                    fields.len(),
                    text.trim()
                )))
            }
        }
    }
    Ok(entries)
}

/// Encodes `(offset, size)` pairs as an index file, one `offset size` line each: the
/// exact bytes both tools' `tfrecord2idx` write for the same records.
pub fn encode_text_index(entries: impl IntoIterator<Item = (u64, u64)>) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (offset, size) in entries {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{offset} {size}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(format: TextIndexFormat, text: &str) -> Result<Vec<(u64, u64, u64)>, TextIndexError> {
        parse_text_index(format, text.as_bytes())
            .map(|e| e.iter().map(|e| (e.line, e.offset, e.size)).collect())
    }

    #[test]
    fn round_trip_and_tolerated_whitespace() {
        let text = encode_text_index([(0, 30), (30, 116), (4096, 4000)]);
        assert_eq!(text, "0 30\n30 116\n4096 4000\n");
        for format in [TextIndexFormat::Dali, TextIndexFormat::TfrecordPy] {
            assert_eq!(
                parse(format, &text).unwrap(),
                [(1, 0, 30), (2, 30, 116), (3, 4096, 4000)]
            );
            // Blank lines, tabs, CRLF and a missing final newline are accepted.
            assert_eq!(
                parse(format, "0\t30\r\n\n  30   116  \n4096 4000").unwrap(),
                [(1, 0, 30), (3, 30, 116), (4, 4096, 4000)]
            );
        }
        assert_eq!(parse(TextIndexFormat::Dali, "").unwrap(), []);
    }

    #[test]
    fn comments_only_in_tfrecord_py_indexes() {
        let text = "# made by hand\n0 30 # first\n";
        assert_eq!(
            parse(TextIndexFormat::TfrecordPy, text).unwrap(),
            [(2, 0, 30)]
        );
        let err = parse(TextIndexFormat::Dali, text).unwrap_err();
        assert_eq!(err.line, 1, "{err}");
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, line, says) in [
            ("0 30\n30\n", 2, "found 1 fields"),
            ("0 30\n30 116 7\n", 2, "found 3 fields"),
            ("0 30\n-30 116\n", 2, "offset \"-30\""),
            ("0 +30\n", 1, "size \"+30\""),
            ("0 3x\n", 1, "size \"3x\""),
            ("0 30\n\n1 99999999999999999999\n", 3, "64 bits"),
            ("0 30\n\u{0}\u{ff}\n", 2, "fields"),
        ] {
            let err = parse(TextIndexFormat::Dali, text).unwrap_err();
            assert_eq!(err.line, line, "{text:?}: {err}");
            assert!(err.to_string().contains(says), "{text:?}: {err}");
        }
        let err = parse_text_index(TextIndexFormat::Dali, b"0 30\n\xff\xfe 1\n").unwrap_err();
        assert_eq!(
            (err.line, err.reason.as_str()),
            (2, "not text (invalid UTF-8)")
        );
    }
}
