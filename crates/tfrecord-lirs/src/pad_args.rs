//! The `pad` request from the names the front ends take (the CLI's `pad` flags,
//! Python's `pad()` arguments), decided once over the option rules ([`options`](crate::options)), the
//! writer and the many-files runner (so it is the top layer): which placement a fit name means, which
//! compression, and where each input's copy goes.
//!
//! ```
//! use tfrecord_lirs::pad_args::{outputs, PadArgs};
//! let request = PadArgs { fit: "best:8", ..PadArgs::default() }.request(Default::default())?;
//! assert!(!request.auto);
//! let dir = std::env::temp_dir();
//! // One input given alone: into OUT, unless OUT is an existing directory.
//! let local = &request.options.storage;
//! assert_eq!(outputs(local, &["a".into()], "b".as_ref(), false)?, [std::path::PathBuf::from("b")]);
//! assert_eq!(outputs(local, &["a".into()], &dir, false)?, [dir.join("a")]);
//! # Ok::<(), tfrecord_lirs::Error>(())
//! ```

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::storage::Storage;
use crate::write::pad::PadRequest;
use crate::write::writer::PadOptions;

use crate::options::{compression, defaults, pad_fit, page_size, PadFit};

/// What `pad` is asked for, by name: each field as the front ends take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PadArgs<'a> {
    /// Page size in bytes ([`page_size`]'s rule).
    pub page_size: u64,
    /// The placement: `"next"`, `"best"`, `"best:<window>"` or `"auto"`
    /// ([`pad_fit`]).
    pub fit: &'a str,
    /// How the input is compressed: `"auto"` (or empty), `"none"`, `"gzip"`, `"zlib"`
    /// ([`compression`]).
    pub compression: &'a str,
    /// Take the instances from the input's trusted table.
    pub trust_table: bool,
    /// Replace an existing output.
    pub overwrite: bool,
    /// fsync the outputs and their directory before returning.
    pub sync: bool,
}

impl Default for PadArgs<'_> {
    /// The defaults ([`defaults`]); not overwriting, not syncing.
    fn default() -> Self {
        PadArgs {
            page_size: defaults::PAGE_SIZE,
            fit: defaults::FIT,
            compression: defaults::COMPRESSION,
            trust_table: defaults::TRUST_TABLE,
            overwrite: false,
            sync: false,
        }
    }
}

impl PadArgs<'_> {
    /// The core's request, its files read and written through `storage`.
    pub fn request(&self, storage: Storage) -> Result<PadRequest> {
        let page_size = page_size(self.page_size)?.get();
        let (fit, auto) = match pad_fit(self.fit)? {
            PadFit::Fixed(fit) => (fit, false),
            PadFit::Auto => (tfrecord_lirs_format::fit::Fit::Next, true),
        };
        Ok(PadRequest {
            options: PadOptions {
                page_size,
                fit,
                sync: self.sync,
                storage,
            },
            auto,
            compression: compression(self.compression)?,
            trust_table: self.trust_table,
            overwrite: self.overwrite,
        })
    }
}

/// The fit name of the CLI's `--fit` value (`"next"`, `"best"`, `"auto"`) and its
/// `--window`: the CLI's name of best fit's lookahead, `"best:<window>"`.
pub fn fit_name(fit: &str, window: Option<usize>) -> String {
    match (fit, window) {
        ("best", Some(window)) => format!("best:{window}"),
        (fit, _) => fit.to_string(),
    }
}

/// Where `pad` of `inputs` to `output` writes each input's copy: one input given alone
/// (`listed` false) goes into the file `output`, unless `output` is an existing
/// directory or ends with `/`; several inputs, or inputs given as a list, go into the directory
/// `output`, each under its file name ([`crate::many::pad_outputs_in`] through
/// `storage`, the request's: a URL `output` is a prefix).
pub fn outputs(
    storage: &Storage,
    inputs: &[PathBuf],
    output: &Path,
    listed: bool,
) -> Result<Vec<PathBuf>> {
    let names_dir = output.as_os_str().as_encoded_bytes().ends_with(b"/");
    if !listed && inputs.len() == 1 && !output.is_dir() && !names_dir {
        return Ok(vec![output.to_path_buf()]);
    }
    crate::inspect::many::pad_outputs_in(storage, inputs, output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Fit;
    use crate::Compression;

    #[test]
    fn names_become_one_request() {
        let request = PadArgs::default().request(Storage::default()).unwrap();
        assert_eq!(request.options.page_size, 4096);
        assert_eq!(request.options.fit, Fit::Next);
        assert!(!request.auto && !request.trust_table && !request.overwrite);
        assert_eq!(request.compression, Compression::Auto);
        let auto = PadArgs {
            fit: "auto",
            compression: "GZIP",
            sync: true,
            ..PadArgs::default()
        }
        .request(Storage::default())
        .unwrap();
        assert!(auto.auto && auto.options.sync);
        assert_eq!(auto.compression, Compression::Gzip);
        assert_eq!(fit_name("best", Some(8)), "best:8");
        assert_eq!(fit_name("next", None), "next");
        let best = PadArgs {
            fit: &fit_name("best", Some(8)),
            ..PadArgs::default()
        }
        .request(Storage::default())
        .unwrap();
        assert_eq!(best.options.fit, Fit::Best { lookahead: 8 });
        for bad in [
            PadArgs {
                page_size: 100,
                ..PadArgs::default()
            },
            PadArgs {
                fit: "worst",
                ..PadArgs::default()
            },
            PadArgs {
                compression: "lz4",
                ..PadArgs::default()
            },
        ] {
            assert_eq!(
                bad.request(Storage::default()).unwrap_err().kind(),
                crate::ErrorKind::InvalidArgument
            );
        }
    }

    #[test]
    fn one_input_alone_or_a_list_into_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let a = vec![PathBuf::from("x/a.tfrecord.gz")];
        let file = dir.path().join("out");
        assert_eq!(
            outputs(&Storage::local(), &a, &file, false).unwrap(),
            std::slice::from_ref(&file)
        );
        assert_eq!(
            outputs(&Storage::local(), &a, dir.path(), false).unwrap(),
            [dir.path().join("a.tfrecord")]
        );
        assert_eq!(
            outputs(&Storage::local(), &a, dir.path(), true).unwrap(),
            [dir.path().join("a.tfrecord")]
        );
        // A list into a directory not made yet: made; "dir/" for one input too.
        assert_eq!(
            outputs(&Storage::local(), &a, &file, true).unwrap(),
            [file.join("a.tfrecord")]
        );
        assert!(file.is_dir());
        let slash = PathBuf::from(format!("{}/", dir.path().join("one").display()));
        assert_eq!(
            outputs(&Storage::local(), &a, &slash, false).unwrap(),
            [dir.path().join("one").join("a.tfrecord")]
        );
        // A file where the directory should be is refused.
        let taken = dir.path().join("taken");
        std::fs::write(&taken, b"x").unwrap();
        assert!(outputs(&Storage::local(), &a, &taken, true)
            .unwrap_err()
            .to_string()
            .contains("is not a directory"));
    }
}
