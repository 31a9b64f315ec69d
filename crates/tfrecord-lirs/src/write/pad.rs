//! `pad`: any TFRecord file (padded or not, plain or compressed) rewritten as a padded
//! file with its table, by a [`PaddedWriter`], the fit chosen or measured (`auto`), the
//! output checked before anything is written.

use std::path::Path;

use crate::error::{Error, Remedy, Result};
use tfrecord_lirs_format::fit::Fit;
use tfrecord_lirs_format::table_path::default_table_path;

use crate::compress::Compression;
use crate::read::reader::{Reader, ReaderOptions};
use crate::storage::table_files::same_file;
use crate::storage::Storage;
use crate::write::writer::{PadOptions, PadSummary, PaddedWriter};

/// Rewrites any TFRecord file `src` (padded or not; its fillers are dropped; plain, or
/// GZIP/ZLIB compressed, detected from its first bytes) as a padded file `dst` plus
/// `dst.offsets`. `progress` gets the bytes of `src` read so far.
pub fn pad_file_with_progress(
    src: &Path,
    dst: &Path,
    options: &PadOptions,
    progress: impl FnMut(u64),
) -> Result<PadSummary> {
    pad_file_with(src, dst, options, Compression::Auto, progress)
}

/// [`pad_file_with_progress`] for a `src` compressed as `compression` (or detected,
/// with [`Compression::Auto`]). A compressed input is decompressed as it is read
/// (nothing is written but `dst` and its table); errors in it name the offset in the
/// decompressed stream.
///
/// ```
/// # use std::io::Write;
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let gz = dir.path().join("train.tfrecord.gz");
/// # let mut plain = Vec::new();
/// # for i in 0..100u8 { tfrecord_lirs::format::encode_record(&[i; 300], &mut plain); }
/// # let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
/// # e.write_all(&plain).unwrap();
/// # std::fs::write(&gz, e.finish().unwrap()).unwrap();
/// use tfrecord_lirs::{pad_file_with, Compression, PadOptions, Reader};
/// let out = dir.path().join("train.padded");
/// let summary = pad_file_with(&gz, &out, &PadOptions::default(), Compression::Auto, |_| {})?;
/// assert_eq!(summary.instances, 100);
/// assert_eq!(Reader::open_one(&out, None, &Default::default())?.read(7)?, [7u8; 300]);
/// # Ok(()) }
/// ```
pub fn pad_file_with(
    src: &Path,
    dst: &Path,
    options: &PadOptions,
    compression: Compression,
    mut progress: impl FnMut(u64),
) -> Result<PadSummary> {
    check_pad_paths(&options.storage, src, dst)?;
    let mut scanner =
        crate::scan::RecordScanner::open_compressed_in(&options.storage, src, compression)?;
    let mut writer = PaddedWriter::create(dst, options)?;
    let mut last = 0;
    while let Some(record) = scanner.next_record()? {
        if !record.is_filler() {
            writer.write(record.payload)?;
        }
        if record.offset - last >= crate::scan::PROGRESS_EVERY {
            last = record.offset;
            progress(scanner.bytes_read());
        }
    }
    progress(scanner.bytes_read());
    writer.finish()
}

/// What `pad --fit auto` chose, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoFit {
    /// The placement written: [`Fit::BEST`] when padding pays, else [`Fit::Unpadded`].
    pub chosen: Fit,
    /// What best-fit padding gave (the written file's summary when it was chosen).
    pub best: PadSummary,
    /// One line saying what was chosen and the figures it was chosen by.
    pub reason: String,
}

/// [`pad_file_with`] choosing the placement by the file's record sizes: best fit
/// (default lookahead) when the padding pays ([`PadSummary::padding_pays`]), else no
/// padding (a plain copy with its table). The best-fit copy is written and measured
/// first; a file where it does not pay is written again unpadded. Returns the written
/// file's summary and the choice.
pub fn pad_file_auto(
    src: &Path,
    dst: &Path,
    options: &PadOptions,
    compression: Compression,
    mut progress: impl FnMut(u64),
) -> Result<(PadSummary, AutoFit)> {
    let best_options = PadOptions {
        fit: Fit::BEST,
        ..options.clone()
    };
    let best = pad_file_with(src, dst, &best_options, compression, &mut progress)?;
    let saved = 100.0
        * (1.0
            - best.page_reads_per_instance()
                / best
                    .unpadded_page_reads_per_instance()
                    .max(f64::MIN_POSITIVE));
    let figures = format!(
        "best fit saves {saved:.1}% of page reads per instance ({:.3} -> {:.3}) for {:.2}% more bytes",
        best.unpadded_page_reads_per_instance(),
        best.page_reads_per_instance(),
        best.overhead_percent()
    );
    if best.padding_pays() {
        let reason = format!("fit auto: chose best ({figures})");
        return Ok((
            best.clone(),
            AutoFit {
                chosen: Fit::BEST,
                best,
                reason,
            },
        ));
    }
    let plain_options = PadOptions {
        fit: Fit::Unpadded,
        ..options.clone()
    };
    let plain = pad_file_with(src, dst, &plain_options, compression, progress)?;
    let reason = format!("fit auto: chose no padding ({figures}, which does not pay)");
    Ok((
        plain,
        AutoFit {
            chosen: Fit::Unpadded,
            best,
            reason,
        },
    ))
}

/// Everything a `pad` of one input is asked to do (the CLI's and Python's `pad`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PadRequest {
    /// Page size, placement and durability; with `auto`, `options.fit` is ignored.
    pub options: PadOptions,
    /// Choose the placement by the records ([`pad_file_auto`]).
    pub auto: bool,
    /// How the input is compressed.
    pub compression: Compression,
    /// Take the instances from the input's trusted table ([`pad_file_from_table`]);
    /// the input cannot be compressed then.
    pub trust_table: bool,
    /// Replace an existing output ([`check_pad_output`]).
    pub overwrite: bool,
}

/// Pads `src` into `dst` as `request` says; returns what was written and, for an
/// automatic placement, what it chose and why ([`AutoFit::reason`]).
pub fn pad(
    src: &Path,
    dst: &Path,
    request: &PadRequest,
    progress: impl FnMut(u64),
) -> Result<(PadSummary, Option<String>)> {
    check_pad_output_in(&request.options.storage, src, dst, request.overwrite)?;
    if request.trust_table {
        if !matches!(request.compression, Compression::Auto | Compression::None) {
            return Err(Error::invalid_argument(
                "trust_table reads the input at random: it cannot be compressed",
            ));
        }
        if request.auto {
            return Err(Error::invalid_argument(
                "fit auto and trust_table together are not supported: give the fit (next or best)",
            ));
        }
        return Ok((
            pad_file_from_table(src, dst, &request.options, progress)?,
            None,
        ));
    }
    if request.auto {
        let (summary, auto) =
            pad_file_auto(src, dst, &request.options, request.compression, progress)?;
        return Ok((summary, Some(auto.reason)));
    }
    let summary = pad_file_with(src, dst, &request.options, request.compression, progress)?;
    Ok((summary, None))
}

/// Rewrites the instances of `src` as its offset table (`src.offsets`) lists them,
/// with the table trusted ([`ReaderOptions::trust_table`](crate::ReaderOptions)), as a
/// padded file `dst` plus `dst.offsets`: converts a file padded by another tool (e.g.
/// the LIRS reference implementation, whose pads a scan would take for instances) into
/// ours. Instance `i` of `src` is instance `i` of `dst` for next-fit. `progress` gets
/// the byte offset in `src` reached so far.
pub fn pad_file_from_table(
    src: &Path,
    dst: &Path,
    options: &PadOptions,
    mut progress: impl FnMut(u64),
) -> Result<PadSummary> {
    check_pad_paths(&options.storage, src, dst)?;
    let trusted = ReaderOptions {
        trust_table: true,
        storage: options.storage.clone(),
        ..Default::default()
    };
    let reader = Reader::open_one(src, None, &trusted)?;
    let mut writer = PaddedWriter::create(dst, options)?;
    let mut span = Vec::new();
    let mut last = 0;
    for id in 0..reader.len() {
        let payload = reader.read_span_into(id, &mut span)?;
        writer.write(&span[payload])?;
        let (_, offset) = reader.location(id)?;
        if offset - last >= crate::scan::PROGRESS_EVERY {
            last = offset;
            progress(offset);
        }
    }
    progress(std::fs::metadata(src).map_or(last, |m| m.len()));
    writer.finish()
}

/// Refuses a `pad` whose output would replace its input: output data or output table
/// is the input file, or the output data is the input's table. Paths are compared as
/// files (`x` and `./x`, links), not as strings.
fn check_pad_paths(storage: &Storage, src: &Path, dst: &Path) -> Result<()> {
    crate::advice::check_pad_input(storage, src)?;
    let dst_table = default_table_path(dst);
    let src_table = default_table_path(src);
    let clash = if same_file(src, dst) {
        Some(("the output", dst, "the input", src))
    } else if same_file(src, &dst_table) {
        Some(("the output's table", dst_table.as_path(), "the input", src))
    } else if same_file(&src_table, dst) {
        Some(("the output", dst, "the input's table", src_table.as_path()))
    } else {
        None
    };
    match clash {
        Some((what, a, other, b)) => Err(Error::invalid_argument(format!(
            "{what} {} is {other} {}: pad must not overwrite its input; choose another output path",
            a.display(),
            b.display()
        ))),
        None => Ok(()),
    }
}

/// Refuses to `pad` `src` into `dst` when `dst` (or its table) exists, unless
/// `overwrite`: padding replaces both, and a path typed by mistake should not cost a
/// file. (An output that is the input itself is refused even so, by the same rule as
/// [`pad_file_with`].)
pub fn check_pad_output(src: &Path, dst: &Path, overwrite: bool) -> Result<()> {
    check_pad_output_in(&Storage::local(), src, dst, overwrite)
}

/// [`check_pad_output`] through `storage`.
fn check_pad_output_in(storage: &Storage, src: &Path, dst: &Path, overwrite: bool) -> Result<()> {
    check_pad_paths(storage, src, dst)?;
    if overwrite {
        return Ok(());
    }
    let table = default_table_path(dst);
    for existing in [dst, table.as_path()] {
        if let Some(what) = storage.what_exists(existing) {
            return Err(Error::invalid_argument(format!(
                "{} exists ({what}): pad would replace it",
                existing.display()
            ))
            .with_remedy(Remedy::Overwrite {
                output: existing.to_path_buf(),
            }));
        }
    }
    Ok(())
}

/// [`pad_file_with_progress`] without progress reports.
pub fn pad_file(src: &Path, dst: &Path, options: &PadOptions) -> Result<PadSummary> {
    pad_file_with_progress(src, dst, options, |_| {})
}
