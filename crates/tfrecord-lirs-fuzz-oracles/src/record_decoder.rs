//! Arbitrary bytes through the pure decoder and through the file scanner.
//!
//! Oracles: nothing panics; a decoded frame lies inside the input; every record the
//! scanner returns is a CRC-valid record at the offset it claims, records follow each
//! other without gaps, a clean end is the end of the file, and every error names the file.

use crate::common;
use tfrecord_lirs::format::{self, HEADER_LEN};
use tfrecord_lirs::{inspect, scan_offsets, RecordScanner};

/// The oracles above, for one input.
pub fn check(data: &[u8]) {
    // The pure decoder.
    if let Some(header) = data.get(..HEADER_LEN) {
        let header: &[u8; HEADER_LEN] = header.try_into().unwrap();
        if let Ok(len) = format::decode_header(header) {
            assert_eq!(format::encode_header(len), *header);
        }
    }
    for check in [true, false] {
        if let Ok(frame) = format::decode_record(data, check) {
            let n = frame.payload.len();
            assert_eq!(frame.framed_len, n as u64 + format::FRAMING_LEN);
            assert!(frame.framed_len as usize <= data.len());
            assert_eq!(frame.payload, &data[HEADER_LEN..HEADER_LEN + n]);
        }
    }
    let _ = format::compressed_head(data);

    // The scanner over a file holding the same bytes.
    let path = common::scratch_file("scan.tfrecord");
    std::fs::write(&path, data).unwrap();
    let mut scanner = RecordScanner::open(&path).unwrap();
    let mut expected_offset = 0u64;
    let mut instances = Vec::new();
    loop {
        match scanner.next_record() {
            Ok(Some(record)) => {
                assert_eq!(record.offset, expected_offset);
                let real =
                    common::record_at(data, record.offset).expect("scanner returned a bad record");
                assert_eq!(real, record.payload);
                assert_eq!(record.framed_len, record.payload.len() as u64 + 16);
                if !record.is_filler() {
                    instances.push(record.offset);
                }
                expected_offset += record.framed_len;
            }
            Ok(None) => {
                assert_eq!(
                    expected_offset,
                    data.len() as u64,
                    "clean end before the end of the file"
                );
                break;
            }
            Err(e) => {
                common::assert_names(&e, &path);
                assert!(
                    e.to_string().contains(&format!("byte {expected_offset}"))
                        || e.to_string().contains("compressed"),
                    "{e}"
                );
                break;
            }
        }
    }
    match scan_offsets(&path, |_| {}) {
        Ok(offsets) => assert_eq!(offsets, instances),
        Err(e) => common::assert_names(&e, &path),
    }
    if let Err(e) = inspect(&path, None, None) {
        common::assert_names(&e, &path);
    }
}
