//! Writing TFRecord files: the plain record writer (spec: `TFRecordWriter.write(instance
//! or padding)`) and the [`PaddedWriter`], which places instances so that no small
//! instance straddles a page, with next-fit or best-fit placement.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::error::{Error, Result};
use tfrecord_lirs_format::fit::Fit;
use tfrecord_lirs_format::framing::{self, PageSize, FILLER_MAGIC};
use tfrecord_lirs_format::table::OffsetTableBuilder;
use tfrecord_lirs_format::table_path::default_table_path;

use crate::storage::kill_point::kill_point;
use crate::storage::remote::FileSystem;
use crate::storage::table_files::{sync_parent_dir, temp_file_beside, write_table, write_table_in};
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
            kill_point("data-written");
            temp.persist(&name).map_err(|e| Error::io(&name, e.error))?;
            kill_point("data-renamed");
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
        kill_point("data-instance");
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
        kill_point("old-table-removed");
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
