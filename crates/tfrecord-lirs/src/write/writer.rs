//! Writing TFRecord files: the plain record writer (spec: `TFRecordWriter.write(instance
//! or padding)`) and the [`PaddedWriter`], which places instances so that no small
//! instance straddles a page, with next-fit or best-fit placement.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use tfrecord_lirs_format::error::{Error, Result};
use tfrecord_lirs_format::fit::Fit;
use tfrecord_lirs_format::framing::{self, PageSize, FILLER_MAGIC};
use tfrecord_lirs_format::table::OffsetTableBuilder;
use tfrecord_lirs_format::table_path::default_table_path;

use crate::compress::Compression;
use crate::read::reader::{Reader, ReaderOptions};
use crate::storage::remote::FileSystem;
use crate::storage::table_files::{
    check_table_path, same_file, sync_parent_dir, temp_file_beside, write_table, write_table_in,
    write_table_with,
};
use crate::storage::{Place, Storage};

/// One thing to write (spec: "instance or padding").
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    /// An instance payload.
    Instance(&'a [u8]),
    /// `n` bytes of filler records (0, or at least 24).
    Padding(u64),
}

/// Writes framed records; for the same payloads its output is byte-identical to
/// TensorFlow's `tf.io.TFRecordWriter` (uncompressed).
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// let mut w = tfrecord_lirs::TFRecordWriter::new(Vec::new(), "memory");
/// w.write_instance(b"hello")?;
/// w.write_padding(24)?;
/// assert_eq!(w.position(), 5 + 16 + 24);
/// # Ok(()) }
/// ```
pub struct TFRecordWriter<W: Write> {
    inner: W,
    name: PathBuf,
    position: u64,
    scratch: Vec<u8>,
    /// For [`create`](TFRecordWriter::create): the temporary file being written, to be
    /// renamed over `name` when finished (deleted if the writer is dropped).
    temp: Option<tempfile::TempPath>,
}

impl TFRecordWriter<BufWriter<File>> {
    /// Starts writing the file `path`. The records go to a temporary file beside it,
    /// renamed over `path` by [`finish`](TFRecordWriter::finish) or
    /// [`finish_synced`](TFRecordWriter::finish_synced): until then a file already at
    /// `path` is left as it was, and a writer dropped unfinished (or a crash) never
    /// leaves a partial file under `path`.
    pub fn create(path: &Path) -> Result<Self> {
        let (file, temp) = temp_file_beside(path)?.into_parts();
        let mut writer = TFRecordWriter::new(BufWriter::with_capacity(1 << 20, file), path);
        writer.temp = Some(temp);
        Ok(writer)
    }

    /// Flushes the file and renames it into place; with `sync`, fsyncs the file before
    /// the rename and its directory after it, so the file survives a power failure once
    /// this returns.
    pub fn finish_synced(self, sync: bool) -> Result<()> {
        let name = self.name.clone();
        self.finish_to(&name, sync)
    }

    /// [`finish_synced`](TFRecordWriter::finish_synced), renaming the file to `name`.
    fn finish_to(mut self, name: &Path, sync: bool) -> Result<()> {
        let name = name.to_path_buf();
        let file = self
            .inner
            .into_inner()
            .map_err(|e| Error::io(&name, e.into_error()))?;
        if sync {
            file.sync_all().map_err(|e| Error::io(&name, e))?;
        }
        if let Some(temp) = self.temp.take() {
            temp.persist(&name).map_err(|e| Error::io(&name, e.error))?;
            if sync {
                sync_parent_dir(&name)?;
            }
        }
        Ok(())
    }
}

impl<W: Write> TFRecordWriter<W> {
    /// Wraps `inner`; `name` labels errors.
    pub fn new(inner: W, name: impl AsRef<Path>) -> Self {
        TFRecordWriter {
            inner,
            name: name.as_ref().to_path_buf(),
            position: 0,
            scratch: Vec::new(),
            temp: None,
        }
    }

    /// Bytes written so far: the offset of the next record.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Writes an instance or padding (spec §6).
    pub fn write(&mut self, record: Record<'_>) -> Result<()> {
        match record {
            Record::Instance(payload) => self.write_instance(payload).map(|_| ()),
            Record::Padding(n) => self.write_padding(n),
        }
    }

    /// Writes one instance record and returns its offset. Refuses a payload that starts
    /// with the filler magic, since readers would take it for padding.
    pub fn write_instance(&mut self, payload: &[u8]) -> Result<u64> {
        if framing::is_filler(payload) {
            return Err(Error::invalid_argument(format!(
                "{}: refusing to write an instance whose payload starts with the filler magic {:?} (readers would skip it as padding)",
                self.name.display(),
                String::from_utf8_lossy(FILLER_MAGIC)
            )));
        }
        let offset = self.position;
        let header = framing::encode_header(payload.len() as u64);
        let footer = framing::encode_footer(payload);
        for part in [&header[..], payload, &footer[..]] {
            self.inner
                .write_all(part)
                .map_err(|e| Error::io(&self.name, e))?;
        }
        self.position += framing::framed_len(payload.len() as u64);
        Ok(offset)
    }

    /// Writes `n` bytes of padding as one filler record (`n` = 0 writes nothing).
    pub fn write_padding(&mut self, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        if !framing::filler_fits(n) {
            return Err(Error::invalid_argument(format!(
                "{}: padding of {n} bytes is impossible: a filler record takes at least {} bytes",
                self.name.display(),
                framing::MIN_FILLER_LEN
            )));
        }
        self.scratch.clear();
        framing::encode_filler(n, &mut self.scratch);
        self.inner
            .write_all(&self.scratch)
            .map_err(|e| Error::io(&self.name, e))?;
        self.position += n;
        Ok(())
    }

    /// Flushes buffered bytes.
    pub fn flush(&mut self) -> Result<()> {
        self.inner.flush().map_err(|e| Error::io(&self.name, e))
    }

    /// Flushes and returns the inner writer; a writer from
    /// [`create`](TFRecordWriter::create) also renames its file into place (without
    /// fsync: see [`finish_synced`](TFRecordWriter::finish_synced)).
    pub fn finish(mut self) -> Result<W> {
        self.flush()?;
        if let Some(temp) = self.temp.take() {
            temp.persist(&self.name)
                .map_err(|e| Error::io(&self.name, e.error))?;
        }
        Ok(self.inner)
    }
}

/// Options of the [`PaddedWriter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PadOptions {
    /// Page size in bytes (power of two, 512 B to 16 MiB). Default 4096.
    pub page_size: u64,
    /// Placement policy. Default next-fit.
    pub fit: Fit,
    /// fsync the data and the table before they are renamed into place, and their
    /// directory after each rename, so both are durable once `finish` returns.
    /// Default off.
    pub sync: bool,
    /// Where the output (and the input of `pad`) is: local files, and URLs when it
    /// has a file system. Default [`Storage::local`].
    pub storage: Storage,
}

impl Default for PadOptions {
    fn default() -> Self {
        PadOptions {
            page_size: framing::DEFAULT_PAGE_SIZE,
            fit: Fit::Next,
            sync: false,
            storage: Storage::local(),
        }
    }
}

/// What a padded write produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PadSummary {
    /// Instances written.
    pub instances: u64,
    /// Pages the data file spans (file size / page size, rounded up).
    pub pages: u64,
    /// Bytes of filler records.
    pub filler_bytes: u64,
    /// Size of the data file.
    pub data_bytes: u64,
    /// Pages the instances' records touch, summed over the instances: what reading
    /// every instance once at random costs in page reads, as placed.
    pub page_reads: u64,
    /// [`page_reads`](PadSummary::page_reads) had the same records been written back
    /// to back in input order, without padding (an unpadded file of them).
    pub unpadded_page_reads: u64,
    /// Best-fit (which may reorder): for each input, in the order given to `write`, the
    /// instance id it received. `None` for next-fit, where input `i` is instance `i`.
    /// [`instance_of`](PadSummary::instance_of) answers for both.
    pub instance_of_input: Option<Vec<u64>>,
}

impl PadSummary {
    /// The instance id input `input` (counted in the order given to `write`) received,
    /// or `None` past the last input.
    ///
    /// ```
    /// # fn main() -> tfrecord_lirs::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use tfrecord_lirs::{Fit, PadOptions, PaddedWriter};
    /// let options = PadOptions { fit: Fit::BEST, ..Default::default() };
    /// let mut writer = PaddedWriter::create(&dir.path().join("d.tfrecord"), &options)?;
    /// for len in [3000, 3000, 900] {
    ///     writer.write(&vec![1u8; len])?;
    /// }
    /// let summary = writer.finish()?;
    /// assert_eq!(summary.instance_of(2), Some(1)); // moved up to fill the first page
    /// assert_eq!(summary.instance_of(3), None);
    /// # Ok(()) }
    /// ```
    pub fn instance_of(&self, input: u64) -> Option<u64> {
        match &self.instance_of_input {
            None => (input < self.instances).then_some(input),
            Some(ids) => usize::try_from(input)
                .ok()
                .and_then(|i| ids.get(i).copied()),
        }
    }

    /// Expected page reads per instance read at random, as placed (1.0 when every
    /// instance lies in one page).
    pub fn page_reads_per_instance(&self) -> f64 {
        per_instance(self.page_reads, self.instances)
    }

    /// [`page_reads_per_instance`](PadSummary::page_reads_per_instance) of the same
    /// records unpadded.
    pub fn unpadded_page_reads_per_instance(&self) -> f64 {
        per_instance(self.unpadded_page_reads, self.instances)
    }

    /// Whether the padding pays for these records: it saves a larger fraction of the
    /// page reads of random access than the fraction of bytes it adds. (Cold random
    /// reads cost page reads; sequential reads, copies and cache cost bytes.)
    pub fn padding_pays(&self) -> bool {
        let saved = 1.0 - per_instance(self.page_reads, self.unpadded_page_reads.max(1));
        self.instances > 0 && saved * 100.0 > self.overhead_percent()
    }

    /// Filler bytes as a percentage of the instance bytes (framed).
    pub fn overhead_percent(&self) -> f64 {
        let instance_bytes = self.data_bytes - self.filler_bytes;
        if instance_bytes == 0 {
            0.0
        } else {
            100.0 * self.filler_bytes as f64 / instance_bytes as f64
        }
    }
}

fn per_instance(total: u64, instances: u64) -> f64 {
    if instances == 0 {
        0.0
    } else {
        total as f64 / instances as f64
    }
}

/// Pending instances of best-fit placement.
#[derive(Default)]
struct PendingSet {
    by_input: BTreeMap<u64, Vec<u8>>,
    /// (framed size, input index reversed): the last entry at or below a size is the
    /// largest that fits, and among equals the oldest.
    by_size: BTreeSet<(u64, Reverse<u64>)>,
}

impl PendingSet {
    fn push(&mut self, input: u64, payload: Vec<u8>) {
        self.by_size
            .insert((framing::framed_len(payload.len() as u64), Reverse(input)));
        self.by_input.insert(input, payload);
    }

    fn take(&mut self, input: u64) -> Vec<u8> {
        let payload = self.by_input.remove(&input).expect("pending input");
        self.by_size
            .remove(&(framing::framed_len(payload.len() as u64), Reverse(input)));
        payload
    }

    /// The input to place next at file position `pos`.
    fn choose(&self, pos: u64, page: PageSize) -> Option<u64> {
        let oldest = *self.by_input.keys().next()?;
        let rest = page.get() - pos % page.get();
        if rest == page.get() {
            return Some(oldest);
        }
        // An exact fit leaves nothing; otherwise the largest that leaves room for a filler.
        let exact = self
            .by_size
            .range((rest, Reverse(u64::MAX))..=(rest, Reverse(0)))
            .next_back()
            .filter(|(framed, _)| page.is_small(*framed));
        let best = exact.or_else(|| {
            let limit = rest.checked_sub(framing::MIN_FILLER_LEN)?;
            self.by_size.range(..=(limit, Reverse(0))).next_back()
        });
        Some(best.map_or(oldest, |(_, Reverse(input))| *input))
    }
}

/// Writes a padded TFRecord file and its offset table.
///
/// Invariants of the result (page size P): (a) every byte belongs to a valid record, so
/// stock TFRecord readers read it whole; (b) every instance of at most P − 24 framed
/// bytes lies inside one page with its whole span; (c) every larger instance starts on
/// a page boundary. Data and table are written to temporary files and renamed into
/// place by [`finish`](PaddedWriter::finish) (the old table is removed first), so a
/// crash never leaves a table that disagrees with its data file (with
/// [`PadOptions::sync`], not even a power failure).
///
/// ```
/// use tfrecord_lirs::{PaddedWriter, PadOptions, Fit};
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("train.tfrecord");
/// let mut writer = PaddedWriter::create(&path, &PadOptions { fit: Fit::BEST, ..Default::default() })?;
/// for i in 0..1000u32 {
///     writer.write(&vec![i as u8; 200 + (i % 300) as usize])?;
/// }
/// let summary = writer.finish()?;
/// assert_eq!(summary.instances, 1000);
/// assert!(summary.overhead_percent() < 5.0);
/// # Ok(()) }
/// ```
pub struct PaddedWriter {
    path: PathBuf,
    /// For a URL: the local directory the data is staged in before it is uploaded
    /// by [`finish`](PaddedWriter::finish) (see [`crate::remote`]).
    staging: Option<(tempfile::TempDir, Arc<dyn FileSystem>)>,
    page: PageSize,
    fit: Fit,
    sync: bool,
    writer: TFRecordWriter<BufWriter<File>>,
    table: OffsetTableBuilder,
    pending: PendingSet,
    inputs: u64,
    filler_bytes: u64,
    instance_of_input: Vec<u64>,
    /// See [`PadSummary::page_reads`].
    page_reads: u64,
    /// See [`PadSummary::unpadded_page_reads`]; `unpadded_end` is where the next
    /// input would start in that unpadded file.
    unpadded_page_reads: u64,
    unpadded_end: u64,
}

impl PaddedWriter {
    /// Starts writing `path` (and `<path>.offsets` on finish).
    pub fn create(path: &Path, options: &PadOptions) -> Result<PaddedWriter> {
        let page = crate::options::page_size(options.page_size)?;
        if let Fit::Best { lookahead } = options.fit {
            crate::options::best_fit_lookahead(lookahead as u64)?;
        }
        // A URL is written locally first, then uploaded whole: the placement needs
        // the written bytes' positions only, and object stores take whole objects.
        let staging = match options.storage.place(path)? {
            Place::Remote(fs, _) => Some((
                tempfile::tempdir().map_err(|e| Error::io(path, e))?,
                Arc::clone(fs),
            )),
            Place::Local(_) => None,
        };
        let local = staging
            .as_ref()
            .map_or_else(|| path.to_path_buf(), |(d, _)| d.path().join("data"));
        let mut writer = TFRecordWriter::create(&local)?;
        writer.name = path.to_path_buf();
        Ok(PaddedWriter {
            path: path.to_path_buf(),
            staging,
            page,
            fit: options.fit,
            sync: options.sync,
            writer,
            table: OffsetTableBuilder::new((options.fit != Fit::Unpadded).then_some(page)),
            pending: PendingSet::default(),
            inputs: 0,
            filler_bytes: 0,
            instance_of_input: Vec::new(),
            page_reads: 0,
            unpadded_page_reads: 0,
            unpadded_end: 0,
        })
    }

    /// Adds an instance; returns its input index (for next-fit also its instance id; for
    /// best-fit see [`PadSummary::instance_of_input`]).
    pub fn write(&mut self, payload: &[u8]) -> Result<u64> {
        if framing::is_filler(payload) {
            return Err(Error::invalid_argument(format!(
                "{}: input {} starts with the filler magic \\x00LIRSPAD and cannot be an instance",
                self.path.display(),
                self.inputs
            )));
        }
        let input = self.inputs;
        self.inputs += 1;
        let framed = framing::framed_len(payload.len() as u64);
        self.unpadded_page_reads += self.page.pages_touched(self.unpadded_end, framed);
        self.unpadded_end += framed;
        match self.fit {
            Fit::Next | Fit::Unpadded => self.place(payload)?,
            Fit::Best { lookahead } => {
                self.instance_of_input.push(u64::MAX);
                self.pending.push(input, payload.to_vec());
                while self.pending.by_input.len() >= lookahead {
                    self.place_one_pending()?;
                }
            }
        }
        Ok(input)
    }

    fn place_one_pending(&mut self) -> Result<()> {
        if let Some(input) = self.pending.choose(self.table.end(), self.page) {
            let payload = self.pending.take(input);
            self.instance_of_input[input as usize] = self.table.offsets().len() as u64;
            self.place(&payload)?;
        }
        Ok(())
    }

    fn place(&mut self, payload: &[u8]) -> Result<()> {
        let pad = self.table.padding_before(payload.len() as u64);
        self.writer.write_padding(pad)?;
        self.filler_bytes += pad;
        let offset = self.table.calc_offset(payload.len() as u64);
        debug_assert_eq!(offset, self.writer.position());
        self.writer.write_instance(payload)?;
        self.page_reads += self
            .page
            .pages_touched(offset, framing::framed_len(payload.len() as u64));
        Ok(())
    }

    /// Instances placed so far.
    pub fn instances_written(&self) -> u64 {
        self.table.offsets().len() as u64
    }

    /// Places what is pending, then renames the data file and its table into place.
    pub fn finish(mut self) -> Result<PadSummary> {
        while !self.pending.by_input.is_empty() {
            self.place_one_pending()?;
        }
        let data_bytes = self.writer.position();
        self.writer.flush()?;
        let table_path = default_table_path(&self.path);
        let summary = self.summary(data_bytes);
        if let Some((staging, fs)) = self.staging.take() {
            // A URL: the same steps through its file system (old table removed, data
            // uploaded whole, then the table).
            let local = staging.path().join("data");
            crate::storage::remote::delete(&*fs, &table_path)?;
            self.writer.finish_to(&local, false)?;
            crate::storage::remote::upload(&*fs, &local, &self.path)?;
            let storage = Storage::with_file_system(fs);
            write_table_in(&storage, &table_path, self.table.offsets(), self.sync)?;
            return Ok(summary);
        }
        // Old table first: between the two renames there is no table rather than a wrong one.
        match std::fs::remove_file(&table_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io(&table_path, e))
            }
            Ok(()) if self.sync => sync_parent_dir(&table_path)?,
            _ => {}
        }
        // Renames the data into place (fsyncing it and the directory with `sync`).
        self.writer.finish_synced(self.sync)?;
        write_table(&table_path, self.table.offsets(), self.sync)?;
        Ok(summary)
    }

    /// What was written (taking the instance ids of the inputs).
    fn summary(&mut self, data_bytes: u64) -> PadSummary {
        PadSummary {
            instances: self.table.offsets().len() as u64,
            pages: data_bytes.div_ceil(self.page.get()),
            filler_bytes: self.filler_bytes,
            data_bytes,
            page_reads: self.page_reads,
            unpadded_page_reads: self.unpadded_page_reads,
            instance_of_input: matches!(self.fit, Fit::Best { .. })
                .then(|| std::mem::take(&mut self.instance_of_input)),
        }
    }
}

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
    check_pad_paths(src, dst)?;
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
/// (default window) when the padding pays ([`PadSummary::padding_pays`]), else no
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
    check_pad_paths(src, dst)?;
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
fn check_pad_paths(src: &Path, dst: &Path) -> Result<()> {
    crate::advice::check_pad_input(src)?;
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
    check_pad_paths(src, dst)?;
    if overwrite {
        return Ok(());
    }
    let table = default_table_path(dst);
    for existing in [dst, table.as_path()] {
        if let Some(what) = storage.what_exists(existing) {
            return Err(Error::invalid_argument(format!(
                "{} exists ({what}): pad would replace it; choose another output path, or pass --force (CLI) / overwrite=True (Python) to replace it",
                existing.display()
            )));
        }
    }
    Ok(())
}

/// [`pad_file_with_progress`] without progress reports.
pub fn pad_file(src: &Path, dst: &Path, options: &PadOptions) -> Result<PadSummary> {
    pad_file_with_progress(src, dst, options, |_| {})
}

/// Scans `data` (CRC-checked, fillers skipped) and writes its offset table to `table`
/// atomically; returns the instance count. The paper's location generator.
///
/// Fails (writing nothing) if `table` is `data` itself, or if `data` starts with a
/// filler record (see [`scan_offsets`](crate::scan_offsets)).
pub fn build_offset_table(data: &Path, table: &Path) -> Result<u64> {
    build_offset_table_with(data, table, false, |_| {})
}

/// [`build_offset_table`]; with `sync` the table and its directory are fsynced before
/// this returns (see [`write_table`]), and `progress` gets the bytes scanned so far.
pub fn build_offset_table_with(
    data: &Path,
    table: &Path,
    sync: bool,
    progress: impl FnMut(u64),
) -> Result<u64> {
    build_offset_table_in(&Storage::local(), data, table, sync, progress)
}

/// [`build_offset_table_with`] through `storage` (`data` and `table` may be URLs when
/// it has a file system).
pub fn build_offset_table_in(
    storage: &Storage,
    data: &Path,
    table: &Path,
    sync: bool,
    progress: impl FnMut(u64),
) -> Result<u64> {
    check_table_path(data, table)?;
    if let Some(misuse) = crate::advice::misuse(data) {
        return Err(crate::advice::misuse_error(data, misuse));
    }
    // The offsets go to the table file as the scan puts them in order (no table held
    // in memory, no write of it all after the scan); the file is renamed over `table`
    // only once the scan has succeeded.
    write_table_with(storage, table, sync, |add| {
        crate::scan::scan_offsets_to(storage, data, progress, add)
    })
}
