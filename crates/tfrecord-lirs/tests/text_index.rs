//! Text indexes of DALI and the `tfrecord` package: tables built from them equal the
//! scanned table; exports list instances only; every wrong index is refused naming its
//! line.

mod common;

use std::path::Path;

use common::{kdd_sizes, payload, write_padded, write_plain};
use tfrecord_lirs::format::{self, HEADER_LEN};
use tfrecord_lirs::text_index::{encode_text_index, parse_text_index, TextIndexFormat};
use tfrecord_lirs::{
    build_offset_table_from_text_index, default_table_path, export_text_index,
    offsets_from_text_index, read_table, ErrorKind, Fit,
};

const FORMATS: [TextIndexFormat; 2] = [TextIndexFormat::Dali, TextIndexFormat::TfrecordPy];

/// The index both tools' `tfrecord2idx` write, by their rule (independent of the
/// crate's scanner): walk the file by the length fields, one `offset size` line per
/// record, fillers included.
fn tfrecord2idx(data: &Path) -> String {
    let bytes = std::fs::read(data).unwrap();
    let mut at = 0usize;
    let mut lines = Vec::new();
    while at < bytes.len() {
        let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        let size = HEADER_LEN + len + 4;
        lines.push((at as u64, size as u64));
        at += size;
    }
    encode_text_index(lines)
}

fn payloads(n: usize) -> Vec<Vec<u8>> {
    kdd_sizes(n, 7)
        .into_iter()
        .enumerate()
        .map(|(i, len)| payload(i, len))
        .collect()
}

/// DALI's reading of an index: `size` bytes at each `offset`, the record inside.
fn read_like_dali(data: &Path, index: &str) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(data).unwrap();
    parse_text_index(TextIndexFormat::Dali, index.as_bytes())
        .unwrap()
        .iter()
        .map(|e| {
            let blob = &bytes[e.offset as usize..(e.offset + e.size) as usize];
            let frame = format::decode_record(blob, true).unwrap();
            assert_eq!(frame.framed_len, e.size);
            frame.payload.to_vec()
        })
        .collect()
}

#[test]
fn tables_from_tool_indexes_equal_scanned_tables() {
    let dir = tempfile::tempdir().unwrap();
    let payloads = payloads(500);
    let plain = write_plain(dir.path(), "plain.tfrecord", &payloads);
    let (padded, _) = write_padded(dir.path(), "padded.tfrecord", &payloads, 4096, Fit::Next);
    for data in [&plain, &padded] {
        let scanned = read_table(&default_table_path(data)).unwrap();
        // The tool's index lists fillers too (a padded file's); they stay out of the table.
        let index = dir.path().join("tool.idx");
        std::fs::write(&index, tfrecord2idx(data)).unwrap();
        for format in FORMATS {
            assert_eq!(
                offsets_from_text_index(data, &index, format).unwrap(),
                scanned
            );
            let table = dir.path().join("from.offsets");
            let n = build_offset_table_from_text_index(data, &index, format, &table, true).unwrap();
            assert_eq!(n, payloads.len() as u64);
            assert_eq!(
                std::fs::read(&table).unwrap(),
                std::fs::read(default_table_path(data)).unwrap()
            );
        }
    }
    // An empty file has an empty index and an empty table.
    let empty = dir.path().join("empty.tfrecord");
    std::fs::write(&empty, b"").unwrap();
    let index = dir.path().join("empty.idx");
    std::fs::write(&index, b"").unwrap();
    assert!(
        offsets_from_text_index(&empty, &index, TextIndexFormat::Dali)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn exports_list_instances_only_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let payloads = payloads(300);
    let plain = write_plain(dir.path(), "plain.tfrecord", &payloads);
    let (padded, summary) = write_padded(
        dir.path(),
        "padded.tfrecord",
        &payloads,
        4096,
        Fit::Best { lookahead: 64 },
    );
    assert!(summary.filler_bytes > 0);
    // Unpadded: byte for byte what the tools write.
    let out = dir.path().join("plain.idx");
    assert_eq!(export_text_index(&plain, &out, false).unwrap(), 300);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), tfrecord2idx(&plain));
    // Padded: one line per instance, in id order; DALI's way of reading it gives the
    // instances and never a filler.
    let out = dir.path().join("padded.idx");
    assert_eq!(export_text_index(&padded, &out, true).unwrap(), 300);
    let text = std::fs::read_to_string(&out).unwrap();
    let entries = parse_text_index(TextIndexFormat::Dali, text.as_bytes()).unwrap();
    let table = read_table(&default_table_path(&padded)).unwrap();
    assert_eq!(entries.iter().map(|e| e.offset).collect::<Vec<_>>(), table);
    let read = read_like_dali(&padded, &text);
    assert!(read.iter().all(|p| !format::is_filler(p)));
    let mut expected = payloads.clone();
    expected.sort();
    let mut got = read.clone();
    got.sort();
    assert_eq!(got, expected);
    // And the export reads back into the same table.
    for format in FORMATS {
        assert_eq!(
            offsets_from_text_index(&padded, &out, format).unwrap(),
            table
        );
    }
    // Never over the data file.
    let err = export_text_index(&plain, &plain, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(std::fs::read(&plain).unwrap().len() as u64, {
        let t = read_table(&default_table_path(&plain)).unwrap();
        let last = *t.last().unwrap();
        last + format::framed_len(payloads[299].len() as u64)
    });
}

/// Each wrong index fails with `<index>: line <n>: ...` mentioning `says`.
#[test]
fn wrong_indexes_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let payloads = payloads(20);
    let data = write_plain(dir.path(), "d.tfrecord", &payloads);
    let good = tfrecord2idx(&data);
    let lines: Vec<&str> = good.lines().collect();
    let (off3, size3) = {
        let mut f = lines[3].split(' ');
        let o: u64 = f.next().unwrap().parse().unwrap();
        (o, f.next().unwrap().parse::<u64>().unwrap())
    };
    let with_line = |n: usize, replacement: Option<String>| -> String {
        let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        match replacement {
            Some(r) => v[n] = r,
            None => {
                v.remove(n);
            }
        }
        v.join("\n") + "\n"
    };
    let swapped = {
        let mut v: Vec<&str> = lines.clone();
        v.swap(3, 4);
        v.join("\n") + "\n"
    };
    let repeated = {
        let mut v: Vec<&str> = lines.clone();
        v.insert(5, lines[3]);
        v.join("\n") + "\n"
    };
    let cases: Vec<(&str, String, u64, &str)> = vec![
        (
            "wrong size",
            with_line(3, Some(format!("{off3} {}", size3 + 1))),
            4,
            "gives size",
        ),
        // The instance at off3 is then unlisted, which is found first.
        (
            "inside a record",
            with_line(3, Some(format!("{} {size3}", off3 + 1))),
            4,
            "does not list this instance",
        ),
        // A filler-free file: an entry past a record start, after a listed record.
        (
            "past a start",
            with_line(4, Some(format!("{} 30", off3 + 1))),
            5,
            "no record of the file starts there",
        ),
        (
            "missing instance",
            with_line(3, None),
            4,
            "does not list this instance",
        ),
        (
            "missing last",
            with_line(19, None),
            20,
            "the index ends before it",
        ),
        // Instance 3 is then unlisted at line 4, which is found first.
        ("swapped", swapped, 4, "does not list this instance"),
        ("out of order", repeated, 6, "out of file order"),
        (
            "past the end",
            good.clone() + "999999 30\n",
            21,
            "the file ends",
        ),
        (
            "not a number",
            with_line(5, Some("12 abc".into())),
            6,
            "not a non-negative decimal",
        ),
        (
            "one field",
            with_line(5, Some("12".into())),
            6,
            "found 1 fields",
        ),
    ];
    for (what, text, line, says) in cases {
        let index = dir.path().join("bad.idx");
        std::fs::write(&index, &text).unwrap();
        let err = offsets_from_text_index(&data, &index, TextIndexFormat::Dali).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{}: line {line}: ", index.display())),
            "{what}: {msg}"
        );
        assert!(msg.contains(says), "{what}: {msg}");
        // No table is written for a wrong index.
        let table = dir.path().join("never.offsets");
        assert!(build_offset_table_from_text_index(
            &data,
            &index,
            TextIndexFormat::Dali,
            &table,
            false
        )
        .is_err());
        assert!(!table.exists(), "{what}");
    }

    // Damage at a listed record: the data file, instance and byte, with the line.
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[(off3 + 20) as usize] ^= 0xff;
    let damaged = dir.path().join("damaged.tfrecord");
    std::fs::write(&damaged, &bytes).unwrap();
    let index = dir.path().join("good.idx");
    std::fs::write(&index, &good).unwrap();
    let err = offsets_from_text_index(&damaged, &index, TextIndexFormat::Dali).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss);
    let msg = err.to_string();
    assert!(
        msg.contains("line 4: ")
            && msg.contains(&format!("damaged.tfrecord: instance 3 at byte {off3}"))
            && msg.contains("payload CRC mismatch"),
        "{msg}"
    );
}

#[test]
fn a_file_starting_with_a_filler_has_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("f.tfrecord");
    let mut bytes = Vec::new();
    format::encode_filler(100, &mut bytes);
    format::encode_record(b"instance", &mut bytes);
    std::fs::write(&data, &bytes).unwrap();
    let index = dir.path().join("f.idx");
    std::fs::write(&index, tfrecord2idx(&data)).unwrap();
    let err = offsets_from_text_index(&data, &index, TextIndexFormat::Dali).unwrap_err();
    assert!(
        err.to_string().contains("precedes the first instance"),
        "{err}"
    );
}
