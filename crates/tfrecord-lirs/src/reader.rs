//! Random access through offset tables (spec §1 `TFRecordLIRS.read(instance id)`) and
//! the spec's stateful `shuffle_order` / `next` API.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result, TRUST_TABLE_HINT};
use crate::format::{self, FrameError, Padding, PageSize, HEADER_LEN};
use crate::io::{self, Backend, ReadAt};
use crate::order::{self, EpochOrder, OrderSpec};
use crate::table::{default_table_path, read_table_for};

/// Options of a [`Reader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Page size for page-aware units and I/O statistics (default 4096).
    pub page_size: u64,
    /// Check each payload's CRC on read (default true; the length CRC is always checked).
    pub verify_payload_crc: bool,
    /// The I/O backend (default [`Backend::Auto`]).
    pub backend: Backend,
    /// Trust the offset table (default false): instance `i` is the record at
    /// `offset[i]`, and the bytes between its end and the next entry (or the end of the
    /// file), and before `offset[0]`, are opaque padding written by another tool, e.g.
    /// the LIRS reference implementation's `'0'` records. Padding must still be valid
    /// TFRecord framing (length CRCs, records inside the span); its payload CRCs are
    /// checked by `verify`, not on reads. The default is strict: only LIRS filler
    /// records may follow an instance and the first one starts at byte 0, which catches
    /// tables missing entries.
    pub trust_table: bool,
}

impl ReaderOptions {
    /// What may follow an instance's record in its span.
    pub fn padding(&self) -> Padding {
        if self.trust_table {
            Padding::Opaque
        } else {
            Padding::Fillers
        }
    }
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            page_size: format::DEFAULT_PAGE_SIZE,
            verify_payload_crc: true,
            backend: Backend::Auto,
            trust_table: false,
        }
    }
}

/// Where every instance of every file is: offsets, file sizes, global id ranges.
#[derive(Debug)]
pub struct Layout {
    files: Vec<FileLayout>,
    page: PageSize,
    len: u64,
}

#[derive(Debug)]
struct FileLayout {
    offsets: Vec<u64>,
    size: u64,
    first_id: u64,
}

impl FileLayout {
    fn span(&self, i: usize) -> (u64, u64) {
        let end = self.offsets.get(i + 1).copied().unwrap_or(self.size);
        (self.offsets[i], end)
    }

    fn span_len(&self, i: usize) -> u64 {
        let (s, e) = self.span(i);
        e - s
    }

    fn starts_unit(&self, i: usize, page: PageSize) -> bool {
        i == 0
            || page.page_of(self.offsets[i]) != page.page_of(self.offsets[i - 1])
            || self.span_len(i - 1) > page.get()
            || self.span_len(i) > page.get()
    }
}

impl Layout {
    /// Instances across all files.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are no instances.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The page size units are computed for.
    pub fn page_size(&self) -> PageSize {
        self.page
    }

    /// (file index, index within the file) of global `id`, which must be `< len`.
    fn locate(&self, id: u64) -> (usize, usize) {
        let f = self.files.partition_point(|file| file.first_id <= id) - 1;
        (f, (id - self.files[f].first_id) as usize)
    }

    /// Calls `visit(first_id, len)` for every page-aware unit, in file order.
    pub(crate) fn for_each_unit(&self, mut visit: impl FnMut(u64, u64)) {
        for file in &self.files {
            let mut start = 0usize;
            for i in 1..=file.offsets.len() {
                if i == file.offsets.len() || file.starts_unit(i, self.page) {
                    visit(file.first_id + start as u64, (i - start) as u64);
                    start = i;
                }
            }
        }
    }

    /// Length of the unit that starts at `start`.
    pub(crate) fn unit_len(&self, start: u64) -> u64 {
        let (f, i) = self.locate(start);
        let file = &self.files[f];
        let mut end = i + 1;
        while end < file.offsets.len() && !file.starts_unit(end, self.page) {
            end += 1;
        }
        (end - i) as u64
    }
}

/// [`Reader::read_span_into`] reads spans up to this long whole, in one positioned read;
/// of a longer span it reads only the record (a large instance, or a damaged table).
const MAX_WHOLE_SPAN_READ: u64 = 1 << 20;

/// The mapped batch path prefetches the records this many positions ahead of the one
/// it decodes, and their offset-table entries [`PREFETCH_TABLE_AHEAD`] ahead: the order
/// is known, so the cache misses of later records overlap the work on this one.
const PREFETCH_RECORDS_AHEAD: usize = 16;
/// See [`PREFETCH_RECORDS_AHEAD`].
const PREFETCH_TABLE_AHEAD: usize = 48;
/// Of each record ahead, at most this many bytes are prefetched (a cache line each).
const PREFETCH_RECORD_BYTES: u64 = 1024;

/// Joined spans bigger than this are read separately by [`Reader::read_batch`].
pub const MAX_COALESCED_READ: u64 = 1 << 20;

/// Payloads of a batch, left in place in the buffer they were read into (no copy out of
/// the framing): read them with [`payload`](Batch::payload) or [`payloads`](Batch::payloads).
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// The instance ids, in batch order.
    pub ids: Vec<u64>,
    /// The bytes read, payloads in place among their framing (and filler); only
    /// `buf[..used]` is this batch's, the rest is kept to be reused without zeroing.
    buf: Vec<u8>,
    used: usize,
    /// Payload `i` is `buf[starts[i]..ends[i]]`.
    starts: Vec<usize>,
    ends: Vec<usize>,
}

impl Batch {
    /// Number of payloads.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Payload `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.buf.get(*self.starts.get(i)?..*self.ends.get(i)?)
    }

    /// Payload `i`.
    ///
    /// # Panics
    /// If `i >= self.len()`; see [`get`](Batch::get).
    pub fn payload(&self, i: usize) -> &[u8] {
        &self.buf[self.starts[i]..self.ends[i]]
    }

    /// The payloads, in batch order.
    pub fn payloads(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.starts
            .iter()
            .zip(&self.ends)
            .map(|(&s, &e)| &self.buf[s..e])
    }

    /// Total bytes of the payloads.
    pub fn payload_bytes(&self) -> usize {
        self.starts.iter().zip(&self.ends).map(|(s, e)| e - s).sum()
    }

    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.ids.clear();
        self.used = 0;
        self.starts.clear();
        self.ends.clear();
    }

    /// Appends payload `bytes` of instance `id`.
    pub fn push(&mut self, id: u64, bytes: &[u8]) {
        self.align_for(bytes.as_ptr() as u64, bytes.len());
        let at = self.used;
        self.tail(bytes.len()).copy_from_slice(bytes);
        self.used += bytes.len();
        self.ids.push(id);
        self.starts.push(at);
        self.ends.push(at + bytes.len());
    }

    /// Makes room for `len` bytes copied from `source` (a file offset, or an address),
    /// skipping up to [`io::COPY_ALIGN`]` - 1` bytes so that they land at the same place
    /// within a cache line as their source: misaligned copies are several times slower.
    fn align_for(&mut self, source: u64, len: usize) {
        let room = self.used + io::COPY_ALIGN + len;
        if self.buf.len() < room {
            self.buf.resize(room, 0);
        }
        self.used += io::copy_pad(self.buf.as_ptr() as usize + self.used, source);
    }

    /// `len` writable bytes at `used` (zero-filled only where the buffer grows).
    fn tail(&mut self, len: usize) -> &mut [u8] {
        let end = self.used + len;
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        &mut self.buf[self.used..end]
    }
}

/// A thread's not yet published [`IoStats`] counts.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    reads: u64,
    bytes: u64,
    pages: u64,
}

/// Counters of what a reader read (for benchmarks and page tests). With the mmap
/// backend there are no read calls: a "read" is one record decoded from the map, and
/// its bytes and pages are those of the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoStats {
    /// Positioned reads issued.
    pub reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Pages touched, summed over reads (a read spanning 2 pages counts 2).
    pub page_reads: u64,
    /// Distinct pages touched since the last reset.
    pub distinct_pages: u64,
    /// Pages the data files span.
    pub data_pages: u64,
}

struct OpenFile {
    data_path: PathBuf,
    table_path: PathBuf,
    src: Box<dyn ReadAt>,
    /// One bit per page: touched since the last reset.
    touched: Vec<AtomicU64>,
}

/// A set of TFRecord files with offset tables, one global id space, read at random.
/// `Send + Sync`: share it between threads with an `Arc`.
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("d.tfrecord");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..10u8 { w.write(&[i; 30])?; }
/// # w.finish()?;
/// let reader = tfrecord_lirs::Reader::open_one(&path, None, &Default::default())?;
/// assert_eq!(reader.len(), 10);
/// assert_eq!(reader.read(3)?, vec![3u8; 30]);
/// # Ok(()) }
/// ```
pub struct Reader {
    layout: Arc<Layout>,
    files: Vec<OpenFile>,
    verify_payload_crc: bool,
    /// What may follow an instance's record in its span ([`ReaderOptions::trust_table`]).
    padding: Padding,
    reads: AtomicU64,
    bytes_read: AtomicU64,
    page_reads: AtomicU64,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Reader>();
};

impl Reader {
    /// Opens one data file with its table (`<data>.offsets` when `table` is `None`).
    pub fn open_one(data: &Path, table: Option<&Path>, options: &ReaderOptions) -> Result<Reader> {
        let table = table.map_or_else(|| default_table_path(data), Path::to_path_buf);
        Reader::open(&[(data.to_path_buf(), table)], options)
    }

    /// Opens `(data, table)` pairs; ids run through the files in list order.
    ///
    /// Validates each table: a multiple of 8 bytes, strictly increasing offsets from 0 and
    /// below the file size, and a valid record header at the first and the last offset.
    /// With [`ReaderOptions::trust_table`] the first offset may be past 0, the bytes
    /// before it being padding records.
    pub fn open(files: &[(PathBuf, PathBuf)], options: &ReaderOptions) -> Result<Reader> {
        let page = PageSize::checked(options.page_size)?;
        let mut layouts = Vec::with_capacity(files.len());
        let mut open = Vec::with_capacity(files.len());
        let mut first_id = 0u64;
        for (data, table_path) in files {
            // The data file is opened first, so that a missing one is reported as such.
            crate::remote::check_backend(data, options.backend)?;
            let mut src = io::open(data, options.backend.without_map())?;
            let offsets = read_table_for(data, table_path)?;
            if options.backend != options.backend.without_map() && !crate::remote::is_url(data) {
                src = io::open_with_records(data, options.backend, offsets.len() as u64)?;
            }
            let size = src.size();
            let layout = FileLayout {
                offsets,
                size,
                first_id,
            };
            check_table(data, table_path, &layout, &*src, options.padding())?;
            first_id += layout.offsets.len() as u64;
            let pages = size.div_ceil(page.get());
            open.push(OpenFile {
                data_path: data.clone(),
                table_path: table_path.clone(),
                src,
                touched: (0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            });
            layouts.push(layout);
        }
        Ok(Reader {
            layout: Arc::new(Layout {
                files: layouts,
                page,
                len: first_id,
            }),
            files: open,
            verify_payload_crc: options.verify_payload_crc,
            padding: options.padding(),
            reads: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            page_reads: AtomicU64::new(0),
        })
    }

    /// Instances across all files.
    pub fn len(&self) -> u64 {
        self.layout.len
    }

    /// Whether any file is a URL read through a registered file system
    /// ([`crate::remote`]): high-latency storage, where many reads in flight pay.
    pub fn is_remote(&self) -> bool {
        self.files
            .iter()
            .any(|f| crate::remote::is_url(&f.data_path))
    }

    /// Whether batches are read from memory maps now (the mmap backend, or the
    /// default backend while its leases hold).
    pub fn is_mapped(&self) -> bool {
        self.files.iter().all(|f| f.src.map_view().is_some())
    }

    /// Whether there are no instances.
    pub fn is_empty(&self) -> bool {
        self.layout.len == 0
    }

    /// The layout (offsets and units).
    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    /// The data file holding global `id`, and the id's byte offset in it.
    pub fn location(&self, id: u64) -> Result<(&Path, u64)> {
        self.check_id(id)?;
        let (f, i) = self.layout.locate(id);
        Ok((&self.files[f].data_path, self.layout.files[f].offsets[i]))
    }

    fn check_id(&self, id: u64) -> Result<()> {
        if id >= self.layout.len {
            return Err(Error::InvalidArgument(format!(
                "instance id {id} out of range: the dataset has {} instances{}",
                self.layout.len,
                match self.files.as_slice() {
                    [one] => format!(" ({})", one.data_path.display()),
                    _ => String::new(),
                }
            )));
        }
        Ok(())
    }

    /// The payload of instance `id` (spec §1: span from eq. 1, one positioned read).
    pub fn read(&self, id: u64) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        let payload = self.read_span_into(id, &mut buf)?;
        buf.truncate(payload.end);
        buf.drain(..payload.start);
        Ok(buf)
    }

    /// Reads instance `id`'s whole span (of a span over 1 MiB, only its record) into `buf`
    /// (replacing its contents) and returns the range of the payload inside it. Avoids a
    /// copy on hot paths.
    pub fn read_span_into(&self, id: u64, buf: &mut Vec<u8>) -> Result<std::ops::Range<usize>> {
        self.check_id(id)?;
        let (f, i) = self.layout.locate(id);
        let (start, end) = self.layout.files[f].span(i);
        buf.clear();
        let mut tally = Tally::default();
        let read = self.read_span_range(f, id, start, end, buf, &mut tally);
        self.add(tally);
        let at = read?;
        let payload = self.decode_span(f, id, start, end, &buf[at..])?;
        Ok(at + payload.start..at + payload.end)
    }

    /// The reads of [`read_span_into`](Reader::read_span_into), into the empty `buf`;
    /// returns where in `buf` the span starts (a few bytes in, so that the copy out of the
    /// page cache is aligned like its source: see [`io::COPY_ALIGN`]).
    fn read_span_range(
        &self,
        f: usize,
        id: u64,
        start: u64,
        end: u64,
        buf: &mut Vec<u8>,
        tally: &mut Tally,
    ) -> Result<usize> {
        let first_read = (end - start).min(MAX_WHOLE_SPAN_READ);
        buf.reserve(io::COPY_ALIGN + usize::try_from(first_read).unwrap_or(0));
        let at = io::copy_pad(buf.as_ptr() as usize, start);
        buf.resize(at, 0);
        if end - start <= MAX_WHOLE_SPAN_READ {
            self.append_range(f, id, start, end, buf, tally)?;
        } else {
            // A long span is bounded only by the table, and a damaged table can make it
            // as long as the file: read the record's first part, then only as much as its
            // header says (at most the span), never the whole span.
            let first = start + MAX_WHOLE_SPAN_READ;
            self.append_range(f, id, start, first, buf, tally)?;
            let header: &[u8; HEADER_LEN] = buf[at..at + HEADER_LEN].try_into().expect("12 bytes");
            // A bad header is reported by decode_span.
            if let Ok(len) = format::decode_header(header) {
                let record_end = start.saturating_add(format::framed_len(len));
                let stop = record_end.min(end);
                if stop > first {
                    self.append_range(f, id, first, stop, buf, tally)?;
                }
                // The rest of the span was not read: check it is filler with a few
                // small reads (decode_span only checks a tail it holds).
                if record_end < end {
                    let file = &self.files[f];
                    let found = walk_tail(&*file.src, record_end, end, self.padding, |pos, len| {
                        self.note(tally, f, pos, len)
                    })
                    .map_err(|e| Error::io(&file.data_path, e))?;
                    if let Some((pos, e)) = found {
                        return Err(tail_error(
                            (&file.data_path, &file.table_path),
                            id,
                            (start, end),
                            pos,
                            e,
                        ));
                    }
                }
            }
        }
        Ok(at)
    }

    /// Reads the payloads of `ids` into `out` (replacing its contents), in the order of
    /// `ids`. Runs of consecutive ids in one file are fetched with one read of their
    /// joined spans (at most [`MAX_COALESCED_READ`] bytes), so a page-aware unit of a
    /// padded file costs one page read.
    pub fn read_batch(&self, ids: &[u64], out: &mut Batch) -> Result<()> {
        out.clear();
        let mut tally = Tally::default();
        let result = match self.map_views() {
            Some(maps) => self.read_batch_mapped(ids, &maps, out, &mut tally),
            None => self.read_batch_copied(ids, out, &mut tally),
        };
        self.add(tally);
        if result.is_err() {
            out.clear(); // no half-filled batch
        }
        result
    }

    /// A view of every file's map, if every file is mapped now (a leased map is
    /// revoked when a writer comes: reads then go through `pread`).
    fn map_views(&self) -> Option<Vec<io::MapView<'_>>> {
        self.files.iter().map(|f| f.src.map_view()).collect()
    }

    /// [`read_batch`](Reader::read_batch) from memory-mapped files: each record is
    /// decoded in place and its payload copied once, into `out`. The order of `ids` is
    /// known, so table entries and records ahead are prefetched.
    fn read_batch_mapped(
        &self,
        ids: &[u64],
        maps: &[io::MapView<'_>],
        out: &mut Batch,
        tally: &mut Tally,
    ) -> Result<()> {
        for &id in ids {
            self.check_id(id)?;
        }
        let single = (self.layout.files.len() == 1).then(|| &self.layout.files[0]);
        let entry = |id: u64| -> (usize, usize) {
            match single {
                Some(_) => (0, id as usize),
                None => self.layout.locate(id),
            }
        };
        // Table entries of the first records, then records ahead, then decode.
        for &id in ids.iter().take(PREFETCH_TABLE_AHEAD) {
            let (f, i) = entry(id);
            io::prefetch(&self.layout.files[f].offsets[i]);
        }
        let prefetch_record = |id: u64| {
            let (f, i) = entry(id);
            let (start, end) = self.layout.files[f].span(i);
            let map: &[u8] = &maps[f];
            let stop = end.min(start + PREFETCH_RECORD_BYTES);
            let mut at = start & !63;
            while at < stop {
                if let Some(byte) = map.get(at as usize) {
                    io::prefetch(byte);
                }
                at += 64;
            }
        };
        for &id in ids.iter().take(PREFETCH_RECORDS_AHEAD) {
            prefetch_record(id);
        }
        for (k, &id) in ids.iter().enumerate() {
            if let Some(&ahead) = ids.get(k + PREFETCH_TABLE_AHEAD) {
                let (f, i) = entry(ahead);
                io::prefetch(&self.layout.files[f].offsets[i]);
            }
            if let Some(&ahead) = ids.get(k + PREFETCH_RECORDS_AHEAD) {
                prefetch_record(ahead);
            }
            let (f, i) = entry(id);
            let (start, end) = self.layout.files[f].span(i);
            let map: &[u8] = &maps[f];
            // The table was checked against the file size at open, so the span is in
            // the map; `get` keeps a broken invariant an error, not a panic.
            let span = map.get(start as usize..end as usize).ok_or_else(|| {
                Error::table(
                    &self.files[f].table_path,
                    Some(id),
                    Some(start),
                    format!("span [{start}, {end}) is outside the mapped file"),
                )
            })?;
            let payload = self.decode_span(f, id, start, end, span)?;
            // Only the record is touched, not the filler after it.
            self.note(tally, f, start, (payload.end + format::FOOTER_LEN) as u64);
            out.push(id, &span[payload]);
        }
        Ok(())
    }

    /// [`read_batch`](Reader::read_batch) through positioned reads, one per run, into
    /// `out`'s buffer; payloads are served where they were read.
    fn read_batch_copied(&self, ids: &[u64], out: &mut Batch, tally: &mut Tally) -> Result<()> {
        let mut by_id: Vec<usize> = (0..ids.len()).collect();
        by_id.sort_unstable_by_key(|&i| ids[i]);
        out.starts.resize(ids.len(), 0);
        out.ends.resize(ids.len(), 0);
        let mut k = 0;
        while k < by_id.len() {
            let first = ids[by_id[k]];
            self.check_id(first)?;
            let (f, i) = self.layout.locate(first);
            let layout = &self.layout.files[f];
            if layout.span_len(i) > MAX_WHOLE_SPAN_READ {
                // A long span is read only as far as its record goes (see read_span_into),
                // on its own; the same id repeated is served from that one read.
                let mut one = Vec::new();
                let (start, end) = layout.span(i);
                let span_at = self.read_span_range(f, first, start, end, &mut one, tally)?;
                let span = &one[span_at..];
                let payload = self.decode_span(f, first, start, end, span)?;
                let payload = &span[payload];
                out.align_for(payload.as_ptr() as u64, payload.len());
                let at = out.used;
                out.tail(payload.len()).copy_from_slice(payload);
                out.used += payload.len();
                while k < by_id.len() && ids[by_id[k]] == first {
                    out.starts[by_id[k]] = at;
                    out.ends[by_id[k]] = at + payload.len();
                    k += 1;
                }
                continue;
            }
            // Extend the run while ids are consecutive, in this file, and within the cap.
            let mut end = k + 1;
            while end < by_id.len() {
                let next = ids[by_id[end]];
                let prev = ids[by_id[end - 1]];
                let local = i + (next - first) as usize;
                if next == prev {
                    end += 1; // the same id twice: read once, served twice
                    continue;
                }
                if next != prev + 1
                    || local >= layout.offsets.len()
                    || layout.span(local).1 - layout.offsets[i] > MAX_COALESCED_READ
                {
                    break;
                }
                end += 1;
            }
            let last_local = i + (ids[by_id[end - 1]] - first) as usize;
            let (start, stop) = (layout.offsets[i], layout.span(last_local).1);
            let len = self.span_len_usize(f, first, start, stop)?;
            out.align_for(start, len);
            let base = out.used;
            self.read_range(f, first, start, out.tail(len), tally)?;
            out.used += len;
            for &pos in &by_id[k..end] {
                let id = ids[pos];
                let local = i + (id - first) as usize;
                let (s, e) = layout.span(local);
                let at = base + (s - start) as usize;
                let span = &out.buf[at..base + (e - start) as usize];
                let payload = self.decode_span(f, id, s, e, span)?;
                out.starts[pos] = at + payload.start;
                out.ends[pos] = at + payload.end;
            }
            k = end;
        }
        out.ids.extend_from_slice(ids);
        Ok(())
    }

    /// `stop - start` as a memory size; `id` names the error.
    fn span_len_usize(&self, f: usize, id: u64, start: u64, stop: u64) -> Result<usize> {
        let len = stop - start;
        usize::try_from(len).map_err(|_| {
            Error::layout(
                &self.files[f].data_path,
                Some(id),
                start,
                format!("span of {len} bytes does not fit in memory"),
            )
        })
    }

    /// Appends the bytes `[start, stop)` of file `f` to `buf`; `id` names errors.
    fn append_range(
        &self,
        f: usize,
        id: u64,
        start: u64,
        stop: u64,
        buf: &mut Vec<u8>,
        tally: &mut Tally,
    ) -> Result<()> {
        let len = self.span_len_usize(f, id, start, stop)?;
        let base = buf.len();
        buf.resize(base + len, 0);
        self.read_range(f, id, start, &mut buf[base..], tally)
    }

    /// Fills `dst` with the bytes of file `f` from `start`; `id` names errors.
    fn read_range(
        &self,
        f: usize,
        id: u64,
        start: u64,
        dst: &mut [u8],
        tally: &mut Tally,
    ) -> Result<()> {
        let file = &self.files[f];
        let len = dst.len() as u64;
        io::read_exact_at(&*file.src, dst, start).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::frame(
                    &file.data_path,
                    Some(id),
                    start,
                    FrameError::Truncated {
                        needed: len,
                        available: file.src.size().saturating_sub(start),
                    },
                )
            } else {
                Error::io(&file.data_path, e)
            }
        })?;
        self.note(tally, f, start, len);
        Ok(())
    }

    /// Checks the record at the front of `span` (instance `id` at byte `start` of file `f`,
    /// its span ending at byte `end`) and returns the payload's range within `span`.
    ///
    /// When `span` holds the whole span, what follows the record must be filler: a
    /// second instance there is one the table does not index, and returning only the
    /// first would silently skip it. (A span read only in part has its tail checked by
    /// [`read_span_range`](Reader::read_span_range).)
    fn decode_span(
        &self,
        f: usize,
        id: u64,
        start: u64,
        end: u64,
        span: &[u8],
    ) -> Result<std::ops::Range<usize>> {
        let file = &self.files[f];
        let span_end = start + span.len() as u64;
        let frame = format::decode_record(span, self.verify_payload_crc).map_err(|e| match e {
            // A record overrunning a span that ends before the end of the file: the
            // table's next offset is wrong, not the data.
            FrameError::Truncated { needed, .. }
                if span_end < self.layout.files[f].size && needed > HEADER_LEN as u64 =>
            {
                Error::table(
                    &file.table_path,
                    Some(id),
                    Some(start),
                    format!(
                        "the record at byte {start} of {} needs {needed} bytes but the table gives its span as {} bytes (the next entry is byte {span_end}): the table does not match the data file",
                        file.data_path.display(),
                        span.len()
                    ),
                )
            }
            e => Error::frame(&file.data_path, Some(id), start, e),
        })?;
        if format::is_filler(frame.payload) {
            return Err(Error::table(
                &file.table_path,
                Some(id),
                Some(start),
                format!(
                    "points at a filler record in {}: the table does not match the data file",
                    file.data_path.display()
                ),
            ));
        }
        if span_end == end {
            // `framed_len <= span.len()`, checked by decode_record.
            let tail = &span[frame.framed_len as usize..];
            if let Err((at, e)) = format::check_padding_tail(tail, self.padding) {
                let at = start + frame.framed_len + at as u64;
                return Err(tail_error(
                    (&file.data_path, &file.table_path),
                    id,
                    (start, end),
                    at,
                    e,
                ));
            }
        }
        Ok(HEADER_LEN..HEADER_LEN + frame.payload.len())
    }

    /// Counts one read of `len` bytes at `start` of file `f`: pages in the shared
    /// bitmap, totals in `tally` (added to the shared counters once per call of a
    /// public read method, so threads do not contend on them per record).
    fn note(&self, tally: &mut Tally, f: usize, start: u64, len: u64) {
        let page = self.layout.page;
        tally.reads += 1;
        tally.bytes += len;
        tally.pages += page.pages_touched(start, len);
        if len > 0 {
            let touched = &self.files[f].touched;
            for p in page.page_of(start)..=page.page_of(start + len - 1) {
                touched[(p / 64) as usize].fetch_or(1 << (p % 64), Ordering::Relaxed);
            }
        }
    }

    fn add(&self, tally: Tally) {
        if tally.reads > 0 {
            self.reads.fetch_add(tally.reads, Ordering::Relaxed);
            self.bytes_read.fetch_add(tally.bytes, Ordering::Relaxed);
            self.page_reads.fetch_add(tally.pages, Ordering::Relaxed);
        }
    }

    /// What was read since the last [`reset_io_stats`](Reader::reset_io_stats).
    pub fn io_stats(&self) -> IoStats {
        let page = self.layout.page.get();
        IoStats {
            reads: self.reads.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            page_reads: self.page_reads.load(Ordering::Relaxed),
            distinct_pages: self
                .files
                .iter()
                .flat_map(|f| &f.touched)
                .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
                .sum(),
            data_pages: self
                .layout
                .files
                .iter()
                .map(|f| f.size.div_ceil(page))
                .sum(),
        }
    }

    /// Zeroes the I/O counters (e.g. at the start of an epoch).
    pub fn reset_io_stats(&self) {
        self.reads.store(0, Ordering::Relaxed);
        self.bytes_read.store(0, Ordering::Relaxed);
        self.page_reads.store(0, Ordering::Relaxed);
        for w in self.files.iter().flat_map(|f| &f.touched) {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// The order of one epoch for one shard.
    pub fn epoch_order(&self, spec: &OrderSpec) -> Result<EpochOrder> {
        EpochOrder::new(Arc::clone(&self.layout), spec)
    }

    /// Instances of shard `shard_index` of `num_shards` in every epoch, for both kinds
    /// of order (a shard is a slice of positions of the epoch's order).
    pub fn shard_len(&self, num_shards: u64, shard_index: u64) -> Result<u64> {
        order::shard_len(&self.layout, num_shards, shard_index)
    }
}

/// Most records [`walk_tail`] looks at: a tail of more fillers than this was not written
/// by a LIRS writer (which puts at most a few in a span), and is not checked further.
const MAX_TAIL_PROBES: usize = 4096;

/// Checks with small positioned reads that the bytes `[from, end)` of `src` are
/// padding records of kind `padding`; `on_read(at, len)` is told of each read. Returns
/// the offset and reason of the first record that is not, if any.
fn walk_tail(
    src: &dyn ReadAt,
    from: u64,
    end: u64,
    padding: Padding,
    mut on_read: impl FnMut(u64, u64),
) -> std::io::Result<Option<(u64, format::TailError)>> {
    let mut probe = [0u8; format::FILLER_PROBE_LEN];
    let mut at = from;
    for _ in 0..MAX_TAIL_PROBES {
        if at >= end {
            break;
        }
        let available = end - at;
        let len = (available as usize).min(probe.len());
        io::read_exact_at(src, &mut probe[..len], at)?;
        on_read(at, len as u64);
        match padding.framed_len(&probe[..len], available) {
            Ok(framed) => at += framed,
            Err(e) => return Ok(Some((at, e))),
        }
    }
    Ok(None)
}

/// The error for bytes at `at` inside instance `id`'s span that are not filler.
fn tail_error(
    (data, table): (&Path, &Path),
    id: u64,
    (start, end): (u64, u64),
    at: u64,
    e: format::TailError,
) -> Error {
    match e {
        format::TailError::Frame(frame @ FrameError::LengthCrc { .. }) => {
            Error::frame(data, Some(id), at, frame)
        }
        format::TailError::Frame(frame) => Error::table(
            table,
            Some(id),
            Some(at),
            format!(
                "the bytes at {at} in instance {id}'s span [{start}, {end}) of {} are not a record that ends inside the span ({frame}): the table does not match the data file",
                data.display()
            ),
        ),
        format::TailError::NotFiller { framed_len } => Error::table(
            table,
            Some(id),
            Some(at),
            format!(
                "byte {at} of {} starts a record of {framed_len} bytes that is not a filler, inside instance {id}'s span [{start}, {end}): the table does not index it (an entry missing, records appended after indexing, or another file's table); rebuild it with `tfrecord-lirs index`; or, {TRUST_TABLE_HINT}",
                data.display()
            ),
        ),
    }
}

/// Validates a table against its data file without reading the whole file.
fn check_table(
    data: &Path,
    table: &Path,
    layout: &FileLayout,
    src: &dyn ReadAt,
    padding: Padding,
) -> Result<()> {
    // A compressed file is named as such before its table is judged against it.
    let mut head = [0u8; HEADER_LEN];
    let head_len = (layout.size as usize).min(HEADER_LEN);
    if io::read_exact_at(src, &mut head[..head_len], 0).is_ok() {
        if let Some(kind) = format::compressed_head(&head[..head_len]) {
            return Err(Error::Compressed {
                at: crate::error::Location::new(data, None, Some(0)),
                format: kind,
            });
        }
    }
    let n = layout.offsets.len();
    if n == 0 {
        if layout.size > 0 {
            return Err(Error::table(
                table,
                None,
                None,
                format!(
                    "the table is empty but {} holds {} bytes (its record at byte 0 is not indexed): build the table with `tfrecord-lirs index`, or rewrite a file that holds only fillers with `tfrecord-lirs pad`",
                    data.display(),
                    layout.size
                ),
            ));
        }
        return Ok(());
    }
    // Spans tile the file from byte 0. A table whose first entry is elsewhere (entries
    // missing at the front, another file's table) would silently shift every id; a
    // trusted table may start later, after padding.
    if layout.offsets[0] != 0 && padding == Padding::Fillers {
        return Err(Error::table(
            table,
            Some(layout.first_id),
            Some(layout.offsets[0]),
            format!(
                "instance 0 of {} must start at byte 0, but the table puts it at byte {}: the table does not match the data file (entries missing at the front?){}",
                data.display(),
                layout.offsets[0],
                if starts_with_records(src, layout.offsets[0].min(layout.size)) {
                    format!("; or, {TRUST_TABLE_HINT}")
                } else {
                    String::new()
                }
            ),
        ));
    }
    if let Some(i) = layout.offsets.iter().position(|&o| o >= layout.size) {
        return Err(Error::table(
            table,
            Some(i as u64),
            Some(layout.offsets[i]),
            format!(
                "offset {} lies at or past the end of {} ({} bytes): the table does not match the data file",
                layout.offsets[i],
                data.display(),
                layout.size
            ),
        ));
    }
    for i in [0, n - 1] {
        let (start, end) = layout.span(i);
        let mut header = [0u8; HEADER_LEN];
        let checked = io::read_exact_at(src, &mut header, start)
            .map_err(|_| FrameError::Truncated {
                needed: HEADER_LEN as u64,
                available: end - start,
            })
            .and_then(|_| format::decode_header(&header))
            .and_then(|len| {
                let framed = format::framed_len(len);
                if framed > end - start {
                    Err(FrameError::Truncated {
                        needed: framed,
                        available: end - start,
                    })
                } else {
                    Ok(framed)
                }
            });
        let framed = match checked {
            Ok(framed) => framed,
            Err(e) => {
                if start == 0 {
                    if let Some(kind) = format::compression_magic(&header) {
                        return Err(Error::Compressed {
                            at: crate::error::Location::new(data, None, Some(0)),
                            format: kind,
                        });
                    }
                }
                return Err(Error::table(
                    table,
                    Some(layout.first_id + i as u64),
                    Some(start),
                    format!(
                        "does not match {}: no valid record of that instance's span starts at byte {start} ({e})",
                        data.display()
                    ),
                ));
            }
        };
        // The last span runs to the end of the file: records appended after indexing, or
        // entries missing at the end, would otherwise never be read or reported.
        if i == n - 1 {
            let id = layout.first_id + i as u64;
            let found = walk_tail(src, start + framed, end, padding, |_, _| {})
                .map_err(|e| Error::io(data, e))?;
            if let Some((at, e)) = found {
                return Err(tail_error((data, table), id, (start, end), at, e));
            }
        }
    }
    // A trusted table's first instance may follow padding: it must be records too.
    if layout.offsets[0] > 0 {
        let found = walk_tail(src, 0, layout.offsets[0], padding, |_, _| {})
            .map_err(|e| Error::io(data, e))?;
        if let Some((at, e)) = found {
            return Err(Error::table(
                table,
                Some(layout.first_id),
                Some(at),
                format!(
                    "the bytes at {at} of {}, before instance 0 at byte {}, are not padding records ({}): the table does not match the data file",
                    data.display(),
                    layout.offsets[0],
                    match e {
                        format::TailError::Frame(frame) => frame.to_string(),
                        format::TailError::NotFiller { framed_len } =>
                            format!("a record of {framed_len} bytes that is not a filler"),
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// Whether the bytes `[0, end)` of `src` are whole records (any payload): the padding
/// another tool may put before a first instance.
fn starts_with_records(src: &dyn ReadAt, end: u64) -> bool {
    matches!(walk_tail(src, 0, end, Padding::Opaque, |_, _| {}), Ok(None))
}

/// The spec's reader (§1, §2, §5): random access plus an epoch-by-epoch shuffled walk.
///
/// ```
/// use tfrecord_lirs::TFRecordLIRS;
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("train.tfrecord");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..64u8 { w.write(&[i; 100])?; }
/// # w.finish()?;
/// let mut train_dataset = TFRecordLIRS::open(&path, None)?.with_seed(1234);
/// for _epoch in 0..2 {
///     train_dataset.shuffle_order(true)?; // page-aware
///     let mut batch = Vec::new();
///     for instance in train_dataset.by_ref().take(32) {
///         batch.push(instance?);
///     }
///     assert_eq!(batch.len(), 32);
/// }
/// # Ok(()) }
/// ```
pub struct TFRecordLIRS {
    reader: Arc<Reader>,
    seed: u64,
    next_epoch: u64,
    num_shards: u64,
    shard_index: u64,
    order: Option<EpochOrder>,
    /// `next()` before `shuffle_order` errs once, then ends (never an endless error stream).
    misuse_reported: bool,
}

impl TFRecordLIRS {
    /// Opens a data file and its table (`<data>.offsets` when `None`).
    pub fn open(data: &Path, table: Option<&Path>) -> Result<TFRecordLIRS> {
        Ok(TFRecordLIRS::from_reader(Arc::new(Reader::open_one(
            data,
            table,
            &ReaderOptions::default(),
        )?)))
    }

    /// Wraps a shared reader (seed 0, one shard).
    pub fn from_reader(reader: Arc<Reader>) -> TFRecordLIRS {
        TFRecordLIRS {
            reader,
            seed: 0,
            next_epoch: 0,
            num_shards: 1,
            shard_index: 0,
            order: None,
            misuse_reported: false,
        }
    }

    /// Sets the shuffle seed.
    pub fn with_seed(mut self, seed: u64) -> TFRecordLIRS {
        self.seed = seed;
        self
    }

    /// Reads only shard `shard_index` of `num_shards` of every epoch.
    pub fn with_shard(mut self, num_shards: u64, shard_index: u64) -> Result<TFRecordLIRS> {
        OrderSpec::check_shards(num_shards, shard_index)?;
        self.num_shards = num_shards;
        self.shard_index = shard_index;
        Ok(self)
    }

    /// The shared reader.
    pub fn reader(&self) -> &Arc<Reader> {
        &self.reader
    }

    /// Instances in the files.
    pub fn len(&self) -> u64 {
        self.reader.len()
    }

    /// Whether there are no instances.
    pub fn is_empty(&self) -> bool {
        self.reader.is_empty()
    }

    /// Spec §1: the payload of instance `id`.
    pub fn read(&self, id: u64) -> Result<Vec<u8>> {
        self.reader.read(id)
    }

    /// Spec §5: shuffles the next epoch's order (page-aware or instance-based); the
    /// following `next()` calls walk it.
    pub fn shuffle_order(&mut self, page_aware: bool) -> Result<()> {
        let spec = OrderSpec {
            seed: self.seed,
            epoch: self.next_epoch,
            page_aware,
            num_shards: self.num_shards,
            shard_index: self.shard_index,
        };
        self.order = Some(self.reader.epoch_order(&spec)?);
        self.next_epoch += 1;
        Ok(())
    }

    /// The order being walked, if `shuffle_order` was called.
    pub fn order(&self) -> Option<&EpochOrder> {
        self.order.as_ref()
    }
}

/// Spec §2: `next()` returns the next instance of the shuffled order, `None` at the end
/// of the epoch, and one error (then `None`) if `shuffle_order` was never called.
impl Iterator for TFRecordLIRS {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        let Some(order) = self.order.as_mut() else {
            if std::mem::replace(&mut self.misuse_reported, true) {
                return None;
            }
            return Some(Err(Error::InvalidArgument(
                "TFRecordLIRS::next called before shuffle_order".into(),
            )));
        };
        order.next().map(|id| self.reader.read(id))
    }
}
