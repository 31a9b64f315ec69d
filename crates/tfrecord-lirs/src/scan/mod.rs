//! Sequential, CRC-checked scanning of a whole TFRecord file: the paper's *location
//! generator* for sparse data, and the engine of `index`, `verify`, `info` and `pad`.
//!
//! Copying the file out of the page cache and checking CRCs cost about the same, so
//! both scans use two cores:
//!
//! * [`scan_offsets`] (`index`) splits the file into chunks that worker threads read
//!   and check in parallel, each chunk while it is still in its worker's cache. Only
//!   the walk from record to record is ordered: a worker waits until the chunk before
//!   its own has been walked (a few microseconds of work) to learn where its first
//!   record starts. Chunks are put back in file order at the end, so the first bad
//!   record in the file is the one reported, as in a one-thread scan.
//! * [`RecordScanner`] (`verify`, `info`, `pad`) hands records out one by one, in
//!   order, so it is a two-stage pipeline instead: a read-ahead thread copies the file
//!   into a small ring of recycled buffers while the calling thread parses and checks.

use std::path::Path;

use crate::error::{Error, Remedy, Result};
use tfrecord_lirs_format::framing::{self, FrameError, FOOTER_LEN, HEADER_LEN};

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
        framing::is_filler(self.payload)
    }
}

// ---------------------------------------------------------------------------------
// The record checks, shared by both scans so that they fail alike.

/// A bad record, found before the instance id it would have is known (the parallel
/// scan learns it only when the chunks are put back in order).
#[derive(Debug)]
pub(super) enum Bad {
    /// Damaged framing at `offset`; `instance`: whether the error names the instance
    /// id (a damaged filler is not an instance).
    Frame {
        offset: u64,
        frame: FrameError,
        instance: bool,
    },
    /// The file starts like a GZIP or ZLIB stream.
    Compressed(&'static str),
    /// A read failed.
    Io(std::io::Error),
}

impl Bad {
    /// The error, given the number of instances before the bad record.
    pub(super) fn into_error(self, path: &Path, instances: u64) -> Error {
        match self {
            Bad::Frame {
                offset,
                frame,
                instance,
            } => Error::frame(path, instance.then_some(instances), offset, frame),
            Bad::Compressed(format) => Error::compressed(path, format),
            Bad::Io(e) => Error::io(path, e),
        }
    }
}

/// A record at `offset` cut short: it needs `needed` bytes, the file has `available`.
pub(super) fn truncated(offset: u64, needed: u64, available: u64, instance: bool) -> Bad {
    Bad::Frame {
        offset,
        frame: FrameError::Truncated { needed, available },
        instance,
    }
}

/// Checks the header of the record at `offset` and returns the record's framed size.
/// `head` is what has been read from `offset` on (to recognise a compressed file at
/// offset 0), `available` how many bytes that is, `file_size` the size at open.
pub(super) fn check_header(
    offset: u64,
    header: &[u8; HEADER_LEN],
    head: &[u8],
    available: u64,
    file_size: u64,
) -> std::result::Result<u64, Bad> {
    let len = framing::decode_header(header).map_err(|frame| {
        // A bad header at offset 0 may be a compressed file: say so instead of
        // "CRC mismatch".
        match framing::compressed_head(head).filter(|_| offset == 0) {
            Some(format) => Bad::Compressed(format),
            None => Bad::Frame {
                offset,
                frame,
                instance: true,
            },
        }
    })?;
    let framed = framing::framed_len(len);
    // Never trust the length for allocation: bound it by what the file holds (or
    // what has been read, should the file have grown).
    let left_in_file = file_size.saturating_sub(offset).max(available);
    if framed > left_in_file {
        return Err(truncated(offset, framed, left_in_file, true));
    }
    Ok(framed)
}

/// Checks the payload CRC of `record`, a whole record at `offset` whose header has
/// been checked, and returns its payload.
pub(super) fn check_record(offset: u64, record: &[u8]) -> std::result::Result<&[u8], Bad> {
    let (payload, footer) = match record.split_last_chunk::<FOOTER_LEN>() {
        Some((body, footer)) if body.len() >= HEADER_LEN => (&body[HEADER_LEN..], footer),
        _ => {
            return Err(truncated(
                offset,
                framing::FRAMING_LEN,
                record.len() as u64,
                true,
            ))
        }
    };
    framing::check_payload(payload, footer).map_err(|frame| Bad::Frame {
        offset,
        frame,
        instance: !framing::is_filler(payload),
    })?;
    Ok(payload)
}

/// The rule every offset table's file keeps (its spans tile the file from byte 0): a
/// non-empty file starts with an instance. `first` is the first instance's offset
/// (`None`: the file holds none), `file_size` the file's size.
pub(crate) fn check_first_instance(data: &Path, first: Option<u64>, file_size: u64) -> Result<()> {
    if file_size == 0 || first == Some(0) {
        return Ok(());
    }
    let what = if first.is_none() {
        "the file holds only filler records, no instance"
    } else {
        "a filler record precedes the first instance"
    };
    Err(Error::layout(
        data,
        None,
        0,
        format!(
            "{what}: an offset table needs instance 0 at byte 0 (its spans tile the file from byte 0), so this file cannot be indexed as it is"
        ),
    )
    .with_remedy(Remedy::Repad {
        data: data.to_path_buf(),
    }))
}

mod parallel;
mod sequential;

pub use parallel::scan_offsets;
pub(crate) use parallel::scan_offsets_to;
pub use sequential::RecordScanner;

#[cfg(test)]
mod tests {
    use super::parallel::{scan_offsets_with, SCAN_CHUNK};
    use super::sequential::{READ_AHEAD, READ_CHUNK};
    use super::*;
    use crate::storage::Storage;

    fn write_records(path: &Path, payloads: &[&[u8]]) {
        let mut bytes = Vec::new();
        for p in payloads {
            framing::encode_record(p, &mut bytes);
        }
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn scans_offsets_and_skips_fillers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = Vec::new();
        framing::encode_record(b"a", &mut bytes);
        framing::encode_filler(30, &mut bytes);
        framing::encode_record(b"bb", &mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(scan_offsets(&path, |_| {}).unwrap(), vec![0, 17 + 30]);
    }

    #[test]
    fn huge_length_does_not_allocate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = framing::encode_header(1 << 62).to_vec();
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

    /// The framing rules, checked the plain way over the whole file in memory: what
    /// every scan must match, errors included (rendered as strings).
    fn model_scan(path: &Path) -> std::result::Result<Vec<u64>, String> {
        let bytes = std::fs::read(path).unwrap();
        let (mut at, mut instances, mut offsets) = (0usize, 0u64, Vec::new());
        let err = |id: Option<u64>, at: usize, e: FrameError| {
            Err(Error::frame(path, id, at as u64, e).to_string())
        };
        while at < bytes.len() {
            let rest = &bytes[at..];
            let Some(header) = rest.first_chunk::<HEADER_LEN>() else {
                let available = rest.len() as u64;
                return err(
                    Some(instances),
                    at,
                    FrameError::Truncated {
                        needed: 12,
                        available,
                    },
                );
            };
            if let Err(e) = framing::decode_header(header) {
                if let Some(format) = framing::compressed_head(rest).filter(|_| at == 0) {
                    return Err(Error::compressed(path, format).to_string());
                }
                return err(Some(instances), at, e);
            }
            match framing::decode_record(rest, true) {
                Ok(frame) => {
                    if !framing::is_filler(frame.payload) {
                        offsets.push(at as u64);
                        instances += 1;
                    }
                    at += frame.framed_len as usize;
                }
                Err(e @ FrameError::PayloadCrc { .. }) => {
                    let len = rest
                        .len()
                        .min(u64::from_le_bytes(header[..8].try_into().unwrap()) as usize);
                    let filler = framing::is_filler(&rest[HEADER_LEN..][..len]);
                    return err((!filler).then_some(instances), at, e);
                }
                Err(e) => return err(Some(instances), at, e),
            }
        }
        Ok(offsets)
    }

    /// Every way of scanning `path`, each with tiny chunks so records straddle them.
    fn every_scan(path: &Path) -> Vec<(String, std::result::Result<Vec<u64>, String>)> {
        let mut out = Vec::new();
        for chunk in [1, 5, 13, 64, 100, 4096, SCAN_CHUNK] {
            for threads in [1, 2, 3] {
                let got = scan_offsets_with(path, chunk, threads, |_| {});
                let name = format!("scan_offsets chunk {chunk} threads {threads}");
                out.push((name, got.map_err(|e| e.to_string())));
            }
        }
        for (chunk, ring) in [(1, 2), (7, 1), (64, 2), (64, 0), (READ_CHUNK, READ_AHEAD)] {
            let got = (|| {
                let mut scanner = RecordScanner::open_with(&Storage::local(), path, chunk, ring)?;
                let mut offsets = Vec::new();
                while let Some(record) = scanner.next_record()? {
                    // Positions and payloads as they are in the file.
                    let bytes = std::fs::read(path).unwrap();
                    let at = record.offset as usize + HEADER_LEN;
                    assert_eq!(record.payload, &bytes[at..at + record.payload.len()]);
                    if !record.is_filler() {
                        offsets.push(record.offset);
                    }
                }
                Ok::<_, Error>(offsets)
            })();
            let name = format!("RecordScanner chunk {chunk} ring {ring}");
            out.push((name, got.map_err(|e| e.to_string())));
        }
        out
    }

    fn assert_all_match_model(path: &Path) {
        let expected = model_scan(path);
        for (name, got) in every_scan(path) {
            assert_eq!(got, expected, "{name}");
        }
    }

    /// Records of many sizes (empty to several chunks long) and fillers.
    /// `n` records with payloads `payload(i)`, and their offsets.
    fn records(n: usize, payload: impl Fn(usize) -> Vec<u8>) -> (Vec<u8>, Vec<u64>) {
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(n);
        for i in 0..n {
            offsets.push(bytes.len() as u64);
            framing::encode_record(&payload(i), &mut bytes);
        }
        (bytes, offsets)
    }

    fn varied_file(path: &Path) -> Vec<u64> {
        let mut bytes = Vec::new();
        let mut offsets = Vec::new();
        for i in 0..60usize {
            if i % 7 == 3 {
                framing::encode_filler(24 + (i as u64 * 13) % 90, &mut bytes);
            }
            offsets.push(bytes.len() as u64);
            let len = match i % 10 {
                0 => 0,
                9 => 700 + i * 11,
                _ => (i * 37) % 150,
            };
            let payload: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8 | 1).collect();
            framing::encode_record(&payload, &mut bytes);
        }
        std::fs::write(path, &bytes).unwrap();
        offsets
    }

    #[test]
    fn records_straddling_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let expected = varied_file(&path);
        assert_eq!(model_scan(&path), Ok(expected.clone()));
        for (name, got) in every_scan(&path) {
            assert_eq!(got, Ok(expected.clone()), "{name}");
        }
    }

    #[test]
    fn early_payload_crc_error_wins_over_a_later_framing_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let offsets = varied_file(&path);
        let mut bytes = std::fs::read(&path).unwrap();
        // A payload byte of instance 5, then the length of instance 40, then cut the
        // last record short: three errors, and the first in the file must be the one.
        bytes[offsets[5] as usize + HEADER_LEN] ^= 0x40;
        bytes[offsets[40] as usize + 3] ^= 0x01;
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, &bytes).unwrap();
        let expected = model_scan(&path).unwrap_err();
        assert!(expected.contains("payload CRC"), "{expected}");
        assert!(expected.contains("instance 5"), "{expected}");
        assert!(
            expected.contains(&format!("byte {}", offsets[5])),
            "{expected}"
        );
        assert_all_match_model(&path);
        // With only the later errors, the length CRC is the first.
        bytes[offsets[5] as usize + HEADER_LEN] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let expected = model_scan(&path).unwrap_err();
        assert!(expected.contains("length CRC"), "{expected}");
        assert!(
            expected.contains(&format!("byte {}", offsets[40])),
            "{expected}"
        );
        assert_all_match_model(&path);
    }

    #[test]
    fn every_truncation_and_many_flips_fail_like_a_plain_scan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = Vec::new();
        for (i, len) in [3usize, 0, 40, 200, 17].into_iter().enumerate() {
            if i == 2 {
                framing::encode_filler(40, &mut bytes);
            }
            framing::encode_record(&vec![i as u8 + 1; len], &mut bytes);
        }
        for cut in 0..bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert_all_match_model(&path);
        }
        for at in (0..bytes.len()).step_by(3) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            std::fs::write(&path, &flipped).unwrap();
            assert_all_match_model(&path);
        }
    }

    /// The scan checks chunks in place in a lease-guarded map: a truncation while it
    /// runs must revoke the map first (the truncating thread is not held up for the
    /// kernel's lease-break-time) and end in a table of the data as it was, or a clean
    /// error; never a crash (SIGBUS) or a hang.
    #[test]
    fn truncation_during_a_mapped_scan_is_clean() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let (bytes, full) = records(40_000, |i| vec![(i % 200) as u8 + 1; 50 + i % 300]);
        for delay_us in [0u64, 200, 1000, 3000, 10_000] {
            std::fs::write(&path, &bytes).unwrap();
            let cut = path.clone();
            let truncator = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_micros(delay_us));
                let f = std::fs::OpenOptions::new().write(true).open(&cut).unwrap();
                f.set_len(bytes_len_half(&cut)).unwrap();
                mapped_here(&cut)
            });
            let got = scan_offsets_with(&path, 16 << 10, 2, |_| {});
            // The truncation went through only once no map of the file was left (the
            // watcher revoked it), not when the kernel broke the lease.
            let still_mapped = truncator.join().unwrap();
            assert!(!still_mapped, "truncated while the file was mapped");
            match got {
                Ok(offsets) => assert!(full.starts_with(&offsets), "{delay_us}"),
                Err(e) => {
                    assert_eq!(e.kind(), crate::ErrorKind::DataLoss, "{e}");
                    assert!(e.to_string().contains("truncated"), "{e}");
                }
            }
        }

        fn bytes_len_half(path: &Path) -> u64 {
            std::fs::metadata(path).unwrap().len() / 2 + 5
        }

        /// Whether this process maps (a part of) the file `path` (`/proc/self/maps`).
        fn mapped_here(path: &Path) -> bool {
            let path = std::fs::canonicalize(path).unwrap();
            let path = path.to_str().unwrap();
            std::fs::read_to_string("/proc/self/maps")
                .unwrap()
                .lines()
                .any(|l| l.ends_with(path))
        }
    }

    #[test]
    fn huge_length_at_a_chunk_boundary_does_not_allocate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = Vec::new();
        framing::encode_record(&[1; 50], &mut bytes);
        bytes.extend_from_slice(&framing::encode_header(1 << 62));
        bytes.extend_from_slice(&[0; 100]);
        std::fs::write(&path, &bytes).unwrap();
        let expected = model_scan(&path).unwrap_err();
        assert!(expected.contains("truncated"), "{expected}");
        assert_all_match_model(&path);
    }

    #[test]
    fn compressed_files_are_named_with_tiny_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.z");
        std::fs::write(&path, [0x78, 0x9c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]).unwrap();
        assert!(model_scan(&path).unwrap_err().contains("ZLIB"));
        assert_all_match_model(&path);
    }

    #[test]
    fn dropping_a_scanner_part_way_stops_its_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        varied_file(&path);
        for _ in 0..20 {
            // A reader far ahead, blocked on a full ring: dropping must still return.
            let mut scanner = RecordScanner::open_with(&Storage::local(), &path, 16, 2).unwrap();
            scanner.next_record().unwrap().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn progress_is_reported_in_order_and_ends_at_the_file_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let payload = vec![5u8; 1 << 20];
        let mut bytes = Vec::new();
        for _ in 0..140 {
            framing::encode_record(&payload, &mut bytes);
        }
        std::fs::write(&path, &bytes).unwrap();
        let mut seen = Vec::new();
        let offsets = scan_offsets_with(&path, 1 << 20, 2, |done| seen.push(done)).unwrap();
        assert_eq!(offsets.len(), 140);
        // Reported as chunks are merged in file order (one by one, however the threads
        // hand them back): at each PROGRESS_EVERY crossed, then the file size. Exact,
        // whatever the timing (it once counted per batch of chunks merged).
        assert_eq!(
            seen,
            [PROGRESS_EVERY, 2 * PROGRESS_EVERY, bytes.len() as u64],
            "{seen:?}"
        );
    }

    #[test]
    fn a_streamed_table_is_the_written_one_and_a_failed_scan_keeps_the_old() {
        // `index` writes the offsets to the table file while the scan goes on: the
        // file is the one `write_table` writes from `scan_offsets`, and a scan that
        // fails after many chunks were written leaves the previous table as it was.
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d");
        let (mut bytes, starts) = records(8000, |i| vec![(i % 251) as u8; 200 + i % 200]);
        assert!(bytes.len() > 8 * SCAN_CHUNK);
        std::fs::write(&data, &bytes).unwrap();
        let table = dir.path().join("d.offsets");
        assert_eq!(crate::build_offset_table(&data, &table).unwrap(), 8000);
        let expected = dir.path().join("expected");
        crate::write_table(&expected, &scan_offsets(&data, |_| {}).unwrap(), false).unwrap();
        let written = std::fs::read(&table).unwrap();
        assert_eq!(written, std::fs::read(&expected).unwrap());
        std::fs::remove_file(&expected).unwrap();

        let bad = 7000;
        bytes[starts[bad] as usize + HEADER_LEN + 5] ^= 1;
        std::fs::write(&data, &bytes).unwrap();
        let err = crate::build_offset_table(&data, &table).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::DataLoss, "{err}");
        assert_eq!(err.instance(), Some(bad as u64), "{err}");
        assert_eq!(err.offset(), Some(starts[bad]), "{err}");
        assert_eq!(std::fs::read(&table).unwrap(), written);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
