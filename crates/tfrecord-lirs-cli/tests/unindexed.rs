//! Records appended after a file was indexed: `verify` must fail (exit 1) with the
//! "unindexed instance" message until `index` is run again.

use std::io::Write;
use std::path::Path;

use tfrecord_lirs::{default_table_path, format, PadOptions, PaddedWriter};

mod common;

use common::run as cli;

fn append_records(path: &Path, payloads: &[&[u8]]) -> u64 {
    let offset = std::fs::metadata(path).unwrap().len();
    let mut bytes = Vec::new();
    for p in payloads {
        format::encode_record(p, &mut bytes);
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(&bytes).unwrap();
    offset
}

fn check(data: &Path) {
    let d = data.to_str().unwrap();
    let ok = cli(&["verify", d]);
    assert!(ok.status.success(), "{ok:?}");

    let first_new = append_records(data, &[b"late one", b"late two", b""]);
    let bad = cli(&["verify", d]);
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("unindexed instance"), "{err}");
    // The CLI's own advice: its command and flag, no Python call.
    assert!(err.contains(&format!("`tfrecord-lirs index {d}`")), "{err}");
    assert!(
        !err.contains("tfrecord_lirs.") && !err.contains("=True"),
        "{err}"
    );
    assert!(err.contains(d), "names the data file: {err}");
    assert!(
        err.contains(&format!("byte {first_new}")),
        "names the first unindexed record's offset {first_new}: {err}"
    );

    let index = cli(&["index", d]);
    assert!(index.status.success(), "{index:?}");
    let ok = cli(&["verify", d]);
    assert!(ok.status.success(), "{ok:?}");
    let get = cli(&[
        "get",
        d,
        &(std::fs::read(default_table_path(data)).unwrap().len() / 8 - 2).to_string(),
    ]);
    assert_eq!(get.stdout, b"late two");
}

#[test]
fn appended_records_fail_verify_until_reindexed() {
    let dir = tempfile::tempdir().unwrap();

    // A plain file, indexed.
    let plain = dir.path().join("plain.tfrecord");
    let mut bytes = Vec::new();
    for i in 0..50u8 {
        format::encode_record(&[i + 1; 70], &mut bytes);
    }
    std::fs::write(&plain, bytes).unwrap();
    let index = cli(&["index", plain.to_str().unwrap()]);
    assert!(index.status.success(), "{index:?}");
    check(&plain);

    // A padded file with its writer-made table.
    let padded = dir.path().join("padded.tfrecord");
    let mut w = PaddedWriter::create(
        &padded,
        &PadOptions {
            page_size: 512,
            ..PadOptions::default()
        },
    )
    .unwrap();
    for i in 0..50u8 {
        w.write(&vec![i + 1; 40 + usize::from(i) * 5]).unwrap();
    }
    w.finish().unwrap();
    check(&padded);
}
