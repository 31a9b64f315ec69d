//! Sequential, CRC-checked scanning of a whole TFRecord file: the paper's *location
//! generator* for sparse data, and the engine of `index`, `verify`, `info` and `pad`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{self, FrameError, PageSize, HEADER_LEN, MAX_PAGE_SIZE, MIN_PAGE_SIZE};

const READ_CHUNK: usize = 4 << 20;
/// Bytes between progress reports of whole-file scans.
pub(crate) const PROGRESS_EVERY: u64 = 64 << 20;

/// One record found by a [`RecordScanner`].
#[derive(Debug)]
pub struct ScannedRecord<'a> {
    /// Byte offset of the record's length field.
    pub offset: u64,
    /// The payload (CRC-checked).
    pub payload: &'a [u8],
    /// Framed size: payload + 16.
    pub framed_len: u64,
}

impl ScannedRecord<'_> {
    /// Whether this record is a filler.
    pub fn is_filler(&self) -> bool {
        format::is_filler(self.payload)
    }
}

/// Reads a TFRecord file front to back, checking both CRCs of every record.
///
/// ```no_run
/// # fn main() -> tfrecord_lirs::Result<()> {
/// let mut scanner = tfrecord_lirs::RecordScanner::open("train.tfrecord".as_ref())?;
/// while let Some(record) = scanner.next_record()? {
///     println!("{} bytes at {}", record.payload.len(), record.offset);
/// }
/// # Ok(()) }
/// ```
pub struct RecordScanner {
    src: File,
    path: PathBuf,
    file_size: u64,
    buf: Vec<u8>,
    /// Valid bytes are `buf[start..end]`; `buf[start]` is at file offset `buf_offset + start`.
    start: usize,
    end: usize,
    buf_offset: u64,
    eof: bool,
    /// Instances (non-filler records) returned so far: the id of the next one.
    instances: u64,
}

impl RecordScanner {
    /// Opens `path` for scanning.
    pub fn open(path: &Path) -> Result<RecordScanner> {
        let src = File::open(path).map_err(|e| Error::io(path, e))?;
        let file_size = src.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(RecordScanner {
            src,
            path: path.to_path_buf(),
            file_size,
            buf: vec![0; READ_CHUNK.min(file_size as usize).max(64)],
            start: 0,
            end: 0,
            buf_offset: 0,
            eof: false,
            instances: 0,
        })
    }

    /// The file being scanned.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file size at open.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// File offset of the next unread record.
    pub fn position(&self) -> u64 {
        self.buf_offset + self.start as u64
    }

    /// Makes at least `want` bytes available at `buf[start..]`, unless the file ends first.
    fn fill(&mut self, want: usize) -> Result<()> {
        if self.end - self.start >= want {
            return Ok(());
        }
        // Slide the partial record to the front, grow the buffer if one record needs it.
        self.buf.copy_within(self.start..self.end, 0);
        self.buf_offset += self.start as u64;
        self.end -= self.start;
        self.start = 0;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        while self.end < want && !self.eof {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        Ok(())
    }

    /// The next record, or `None` at a clean end of file.
    pub fn next_record(&mut self) -> Result<Option<ScannedRecord<'_>>> {
        self.fill(HEADER_LEN)?;
        let offset = self.position();
        let available = (self.end - self.start) as u64;
        if available == 0 {
            return Ok(None);
        }
        let header: &[u8; HEADER_LEN] = match self.buf[self.start..self.end].get(..HEADER_LEN) {
            Some(h) => h.try_into().expect("12 bytes"),
            None => {
                return Err(Error::frame(
                    &self.path,
                    Some(self.instances),
                    offset,
                    FrameError::Truncated {
                        needed: HEADER_LEN as u64,
                        available,
                    },
                ))
            }
        };
        let payload_len = match format::decode_header(header) {
            Ok(len) => len,
            Err(e) => return Err(self.diagnose(offset, e)),
        };
        // Never trust the length for allocation: bound it by what the file holds.
        let framed = format::framed_len(payload_len);
        let left_in_file = self.file_size.saturating_sub(offset).max(available);
        if framed > left_in_file {
            return Err(Error::frame(
                &self.path,
                Some(self.instances),
                offset,
                FrameError::Truncated {
                    needed: framed,
                    available: left_in_file,
                },
            ));
        }
        self.fill(framed as usize)?;
        let have = (self.end - self.start) as u64;
        let bytes = &self.buf[self.start..self.end];
        let frame = format::decode_record(bytes, true).map_err(|e| {
            let e = match e {
                FrameError::Truncated { needed, .. } => FrameError::Truncated {
                    needed,
                    available: have,
                },
                other => other,
            };
            // A damaged filler is not an instance; anything else is the next instance.
            let filler = format::is_filler(&bytes[HEADER_LEN..(framed as usize).min(bytes.len())]);
            Error::frame(&self.path, (!filler).then_some(self.instances), offset, e)
        })?;
        self.start += framed as usize;
        if !format::is_filler(frame.payload) {
            self.instances += 1;
        }
        Ok(Some(ScannedRecord {
            offset,
            payload: &self.buf
                [self.start - framed as usize + HEADER_LEN..self.start - format::FOOTER_LEN],
            framed_len: frame.framed_len,
        }))
    }

    /// A bad header at offset 0 may be a compressed file: say so instead of "CRC mismatch".
    fn diagnose(&self, offset: u64, e: FrameError) -> Error {
        if offset == 0 {
            if let Some(format) = format::compression_magic(&self.buf[self.start..self.end]) {
                return Error::Compressed {
                    at: crate::error::Location::new(&self.path, None, Some(0)),
                    format,
                };
            }
        }
        Error::frame(&self.path, Some(self.instances), offset, e)
    }
}

/// Offsets of every instance (non-filler record) of `data`, CRC-checked.
/// `progress` is called with the bytes scanned so far, now and then.
pub fn scan_offsets(data: &Path, mut progress: impl FnMut(u64)) -> Result<Vec<u64>> {
    let mut scanner = RecordScanner::open(data)?;
    let mut offsets = Vec::new();
    let mut last_report = 0u64;
    while let Some(record) = scanner.next_record()? {
        if !record.is_filler() {
            offsets.push(record.offset);
        }
        if record.offset - last_report >= PROGRESS_EVERY {
            last_report = record.offset;
            progress(last_report);
        }
    }
    progress(scanner.file_size());
    Ok(offsets)
}

/// What a full scan of a data file (and optionally its table) found.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    /// Instances (non-filler records).
    pub instances: u64,
    /// Filler records.
    pub fillers: u64,
    /// File size in bytes.
    pub file_size: u64,
    /// Bytes taken by filler records.
    pub filler_bytes: u64,
    /// Smallest instance payload, in bytes (0 when there are none).
    pub min_payload: u64,
    /// Largest instance payload, in bytes.
    pub max_payload: u64,
    /// Sum of instance payload sizes.
    pub total_payload: u64,
    /// Page sizes for which the padded-file invariants (b) and (c) hold, when the file
    /// has at least one filler (a file without fillers is reported as not padded).
    pub padded_page_sizes: Vec<u64>,
}

impl Inspection {
    /// The page size the file is padded for: the smallest one the invariants hold for
    /// (any page larger than a small file trivially holds it whole, so larger ones say
    /// nothing).
    pub fn padded_for(&self) -> Option<u64> {
        self.padded_page_sizes.first().copied()
    }

    /// Mean instance payload size.
    pub fn mean_payload(&self) -> f64 {
        if self.instances == 0 {
            0.0
        } else {
            self.total_payload as f64 / self.instances as f64
        }
    }
}

/// Every candidate page size, smallest first.
fn candidate_page_sizes() -> impl Iterator<Item = PageSize> {
    (MIN_PAGE_SIZE.trailing_zeros()..=MAX_PAGE_SIZE.trailing_zeros())
        .filter_map(|shift| PageSize::new(1 << shift))
}

/// Whether instance `(offset, framed, span)` keeps invariants (b)/(c) for `page`.
pub(crate) fn instance_is_placed(page: PageSize, offset: u64, framed: u64, span: u64) -> bool {
    if page.is_small(framed) {
        page.pages_touched(offset, span) == 1
    } else {
        offset % page.get() == 0
    }
}

/// Scans `data`, checking every record's CRCs and, if `table` is given, that the table
/// matches the file: each entry is an instance's record start, each span holds one
/// instance followed only by fillers, and the spans tile the file. With `page`, the
/// padded-file invariants for that page size are checked too.
pub fn inspect(
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
) -> Result<Inspection> {
    inspect_with_progress(data, table, page, |_| {})
}

/// [`inspect`], calling `progress` with the bytes scanned so far now and then.
pub fn inspect_with_progress(
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
    mut progress: impl FnMut(u64),
) -> Result<Inspection> {
    let mut scanner = RecordScanner::open(data)?;
    let mut last_report = 0u64;
    let file_size = scanner.file_size();
    let mut out = Inspection {
        instances: 0,
        fillers: 0,
        file_size,
        filler_bytes: 0,
        min_payload: u64::MAX,
        max_payload: 0,
        total_payload: 0,
        padded_page_sizes: Vec::new(),
    };
    let candidates: Vec<PageSize> = candidate_page_sizes().collect();
    let mut still_padded = vec![true; candidates.len()];
    // The previous instance, whose span ends where the next instance starts.
    let mut open_instance: Option<(u64, u64, u64)> = None; // (id, offset, framed)
    let close = |inst: Option<(u64, u64, u64)>, end: u64, still: &mut [bool]| -> Result<()> {
        let Some((id, offset, framed)) = inst else {
            return Ok(());
        };
        let span = end - offset;
        for (keep, p) in still.iter_mut().zip(&candidates) {
            *keep &= instance_is_placed(*p, offset, framed, span);
        }
        if let Some(p) = page {
            if !instance_is_placed(p, offset, framed, span) {
                let why = if p.is_small(framed) {
                    format!("padded-file invariant (b) broken for page size {}: instance of {framed} framed bytes with span of {span} bytes crosses a page boundary", p.get())
                } else {
                    format!("padded-file invariant (c) broken for page size {}: instance of {framed} framed bytes does not start on a page boundary", p.get())
                };
                return Err(Error::layout(data, Some(id), offset, why));
            }
        }
        Ok(())
    };
    let mut next_entry = 0usize; // index into the table of the next expected instance
    while let Some(record) = scanner.next_record()? {
        let (offset, framed) = (record.offset, record.framed_len);
        let filler = record.is_filler();
        if offset - last_report >= PROGRESS_EVERY {
            last_report = offset;
            progress(offset);
        }
        if filler {
            out.fillers += 1;
            out.filler_bytes += framed;
        } else {
            let n = record.payload.len() as u64;
            out.min_payload = out.min_payload.min(n);
            out.max_payload = out.max_payload.max(n);
            out.total_payload += n;
        }
        if let Some((table_path, offsets)) = table {
            let expected = offsets.get(next_entry).copied();
            match expected {
                // Entries are visited in order, so one that is not this record's start
                // but lies before its end points into the middle of this record.
                Some(e) if e != offset && e < offset + framed => {
                    return Err(Error::table(
                        table_path,
                        Some(next_entry as u64),
                        Some(e),
                        format!(
                            "offset {e} is not a record start in {} (it lies inside the record at byte {offset}): the table does not match the data file",
                            data.display(),
                        ),
                    ));
                }
                Some(e) if e == offset => {
                    if filler {
                        return Err(Error::table(
                            table_path,
                            Some(next_entry as u64),
                            Some(e),
                            format!(
                                "offset {e} points at a filler record in {}, not an instance",
                                data.display()
                            ),
                        ));
                    }
                    next_entry += 1;
                }
                _ if !filler => {
                    let why = if next_entry == offsets.len() {
                        format!(
                            "unindexed instance: the table {} covers {} instances but the data file goes on with more records; run `tfrecord-lirs index` to rebuild it",
                            table_path.display(),
                            offsets.len()
                        )
                    } else {
                        format!(
                            "instance record not in the table {} (the table's next entry is byte {})",
                            table_path.display(),
                            offsets[next_entry]
                        )
                    };
                    return Err(Error::layout(data, None, offset, why));
                }
                _ if next_entry == 0 => {
                    return Err(Error::layout(
                        data,
                        None,
                        offset,
                        "filler before the first instance: spans must tile the file from byte 0",
                    ));
                }
                _ => {}
            }
        }
        if !filler {
            close(open_instance, offset, &mut still_padded)?;
            open_instance = Some((out.instances, offset, framed));
            out.instances += 1;
        }
    }
    close(open_instance, file_size, &mut still_padded)?;
    progress(file_size);
    if let Some((table_path, offsets)) = table {
        if next_entry < offsets.len() {
            return Err(Error::table(
                table_path,
                Some(next_entry as u64),
                Some(offsets[next_entry]),
                format!(
                    "the table has {} entries but {} holds only {} instances",
                    offsets.len(),
                    data.display(),
                    next_entry
                ),
            ));
        }
    }
    if out.instances == 0 {
        out.min_payload = 0;
    }
    if out.fillers > 0 && out.instances > 0 {
        out.padded_page_sizes = candidates
            .iter()
            .zip(&still_padded)
            .filter(|(_, keep)| **keep)
            .map(|(p, _)| p.get())
            .collect();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_records(path: &Path, payloads: &[&[u8]]) {
        let mut bytes = Vec::new();
        for p in payloads {
            format::encode_record(p, &mut bytes);
        }
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn scans_offsets_and_skips_fillers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = Vec::new();
        format::encode_record(b"a", &mut bytes);
        format::encode_filler(30, &mut bytes);
        format::encode_record(b"bb", &mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(scan_offsets(&path, |_| {}).unwrap(), vec![0, 17 + 30]);
    }

    #[test]
    fn huge_length_does_not_allocate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = format::encode_header(1 << 62).to_vec();
        bytes.extend_from_slice(&[0; 100]);
        std::fs::write(&path, &bytes).unwrap();
        let err = scan_offsets(&path, |_| {}).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
    }

    #[test]
    fn records_larger_than_the_read_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let big = vec![7u8; READ_CHUNK + 1000];
        write_records(&path, &[b"x", &big, b"y"]);
        let mut scanner = RecordScanner::open(&path).unwrap();
        let mut sizes = Vec::new();
        while let Some(r) = scanner.next_record().unwrap() {
            sizes.push(r.payload.len());
        }
        assert_eq!(sizes, vec![1, READ_CHUNK + 1000, 1]);
    }

    #[test]
    fn gzip_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.gz");
        std::fs::write(&path, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4]).unwrap();
        let err = scan_offsets(&path, |_| {}).unwrap_err();
        assert!(err.to_string().contains("GZIP"), "{err}");
    }
}
