//! The error's accessors and messages, the kinds of I/O errors, and the conversion of
//! the format crate's errors.

use std::path::{Path, PathBuf};

use tfrecord_lirs_format::framing::FrameError;

use super::*;
#[test]
fn accessors_and_messages_name_file_instance_and_byte() {
    let data = Path::new("d.tfrecord");
    let frame = Error::frame(
        data,
        Some(3),
        120,
        FrameError::Truncated {
            needed: 9,
            available: 4,
        },
    );
    assert_eq!(frame.kind(), ErrorKind::DataLoss);
    assert_eq!(
        (frame.file(), frame.instance(), frame.offset()),
        (Some(data), Some(3), Some(120))
    );
    assert_eq!(
        frame.to_string(),
        "d.tfrecord: instance 3 at byte 120: truncated record: needs 9 bytes, only 4 available"
    );
    let renumbered = frame.renumber_frame(|offset| Some(offset / 10));
    assert_eq!(renumbered.instance(), Some(12));

    let line = Error::text_index(
        Path::new("d.idx"),
        7,
        Error::table(data, Some(2), Some(40), "bad"),
    );
    assert_eq!(line.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        (line.file(), line.instance(), line.offset()),
        (Some(Path::new("d.idx")), Some(2), Some(40))
    );
    assert_eq!(
        line.to_string(),
        "d.idx: line 7: d.tfrecord: instance 2 at byte 40: bad"
    );

    // A compressed file is the caller's mistake, not damage: the message names its
    // magic bytes and how to read it.
    let gz = Error::compressed(data, "GZIP");
    assert_eq!(
        (gz.kind(), gz.offset()),
        (ErrorKind::InvalidArgument, Some(0))
    );
    let text = gz.to_string();
    assert!(
        text.starts_with("d.tfrecord at byte 0: file looks GZIP-compressed (it starts with the GZIP magic bytes 1f 8b)"),
        "{text}"
    );
    // The remedy is a value each front end words; the message names none of them.
    assert_eq!(
        gz.remedy(),
        Some(&Remedy::Pad {
            data: data.to_path_buf(),
            compression: "GZIP"
        })
    );
    assert!(
        !text.contains("tfrecord-lirs") && !text.contains("Python"),
        "{text}"
    );
    let zlib = Error::compressed(data, "ZLIB").to_string();
    assert!(
        zlib.contains("ZLIB-compressed (it starts with a ZLIB header"),
        "{zlib}"
    );
    assert_eq!(
        gz.worded(&|r| format!("<{}>", matches!(r, Remedy::Pad { .. }))),
        format!("{}: <true>", text.split(": write").next().unwrap())
    );
    let damaged = Error::damaged_table(Path::new("d.offsets"), None, Some(8), "bad");
    assert_eq!(damaged.kind(), ErrorKind::DataLoss);
    let moved = Error::table(data, None, None, "bad").with_kind(ErrorKind::DataLoss);
    assert_eq!(
        (moved.kind(), moved.to_string().as_str()),
        (ErrorKind::DataLoss, "d.tfrecord: bad")
    );

    let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
    let table = Error::table_io(Path::new("d.tfrecord.offsets"), None, missing);
    assert_eq!(table.kind(), ErrorKind::NotFound);
    assert_eq!(
        table.remedy(),
        Some(&Remedy::BuildTable {
            data: PathBuf::from("d.tfrecord"),
            table: PathBuf::from("d.tfrecord.offsets")
        })
    );
    assert!(
        table
            .to_string()
            .starts_with("d.tfrecord.offsets: no offset table ("),
        "{table}"
    );
    assert!(std::error::Error::source(&table).is_some());

    let eof = Error::io(
        data,
        std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
    );
    assert_eq!((eof.kind(), eof.instance()), (ErrorKind::DataLoss, None));
    let refused = Error::io(
        data,
        std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    );
    assert_eq!(refused.kind(), ErrorKind::PermissionDenied);
    for transient in [
        std::io::ErrorKind::TimedOut,
        std::io::ErrorKind::ConnectionRefused,
        std::io::ErrorKind::ConnectionAborted,
    ] {
        let e = Error::io(data, std::io::Error::from(transient));
        assert_eq!((e.kind(), e.file()), (ErrorKind::Unavailable, Some(data)));
    }
    let arg = Error::invalid_argument("page size 3 is not a power of two");
    assert_eq!((arg.kind(), arg.file()), (ErrorKind::InvalidArgument, None));
    assert_eq!(arg.to_string(), "page size 3 is not a power of two");
    assert_eq!(Error::internal("bug").kind(), ErrorKind::Internal);
}

#[test]
fn format_errors_get_their_kind_and_the_table_they_are_about() {
    use tfrecord_lirs_format::error::Error as FormatError;
    use tfrecord_lirs_format::table::{parse_table, TableError};

    for (e, kind) in [
        (
            FormatError::invalid_argument("bad"),
            ErrorKind::InvalidArgument,
        ),
        (FormatError::data_loss("bad"), ErrorKind::DataLoss),
        (FormatError::internal("bad"), ErrorKind::Internal),
    ] {
        let e = Error::from(e);
        assert_eq!(
            (e.kind(), e.file(), e.to_string().as_str()),
            (kind, None, "bad")
        );
    }
    // A failed read of a table's entries: an I/O error keeps its kind, and names the table.
    let table = PathBuf::from("t.offsets");
    let read = |source: Box<dyn std::error::Error + Send + Sync>| {
        Error::from(FormatError::Offsets {
            table: table.clone(),
            source,
        })
    };
    let gone = read(Box::new(std::io::Error::from(std::io::ErrorKind::NotFound)));
    assert_eq!(
        (gone.kind(), gone.file()),
        (ErrorKind::NotFound, Some(table.as_path()))
    );
    let other = read("no entry 3".into());
    assert_eq!(other.kind(), ErrorKind::Internal);
    assert_eq!(other.to_string(), "t.offsets: no entry 3");

    // A table's damaged bytes: the same message as ever, naming the table.
    let mut bytes = tfrecord_lirs_format::table::encode_table(&[0, 10]);
    bytes.push(0);
    let e = Error::damaged_table_bytes(&table, parse_table(&bytes).unwrap_err());
    assert_eq!((e.kind(), e.offset()), (ErrorKind::DataLoss, Some(16)));
    assert_eq!(
        e.to_string(),
        "t.offsets at byte 16: table is 17 bytes, not a multiple of 8 (a partial last entry?)"
    );
    let e = Error::damaged_table_bytes(
        &table,
        TableError::NotIncreasing {
            entry: 2,
            at: 20,
            next: 10,
        },
    );
    assert_eq!(
        e.to_string(),
        "t.offsets: instance 2 at byte 10: offsets must strictly increase, but instance 1 is at byte 20 and instance 2 at byte 10"
    );
}
