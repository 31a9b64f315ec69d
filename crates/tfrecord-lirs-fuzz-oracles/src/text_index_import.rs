//! A text index (DALI's or the `tfrecord` package's `offset size` lines) and a data
//! file, either arbitrary bytes or built from instances, fillers and garbage and then
//! damaged; the index either arbitrary bytes or the file's true entries, edited
//! (entries dropped, duplicated, swapped, moved, resized, junk lines) and written with
//! cosmetic variations (CRLF, blank lines, comments) → `offsets_from_text_index`,
//! `build_offset_table_from_text_index`, and for a clean file `export_text_index` and
//! back.
//!
//! Oracles: nothing panics; every error names the index or the data file (a line of
//! the index that does not parse: the index and that line); an `Ok` is exactly right:
//! the file's records, walked independently with `format::decode_record`, tile it, its
//! first record is an instance, the result is the offsets of its instances (also what
//! `scan_offsets` finds), and every index entry is one of its records with its framed
//! size, in file order, none missing but fillers; the true index of a clean file is
//! accepted; an exported index imports back to the same offsets.

use arbitrary::Arbitrary;
use tfrecord_lirs::format;
use tfrecord_lirs::text_index::{parse_text_index, TextIndexFormat};
use tfrecord_lirs::{
    build_offset_table_from_text_index, export_text_index, offsets_from_text_index, read_table,
    scan_offsets,
};

use crate::common;

/// A part of a built data file.
#[derive(Arbitrary, Debug)]
pub enum Piece {
    /// An instance of `len % 1024` bytes.
    Instance { len: u16, fill: u8 },
    /// A LIRS filler record.
    Filler { len: u16 },
    /// Bytes that are no record (or happen to be one).
    Garbage(Vec<u8>),
}

/// The data file.
#[derive(Arbitrary, Debug)]
pub enum Data {
    /// These bytes.
    Raw(Vec<u8>),
    /// Built from pieces, then bytes flipped and the file cut.
    Built {
        /// The pieces, in file order.
        pieces: Vec<Piece>,
        /// `(position, xor)`: the byte at `position % len` is xored.
        flips: Vec<(u16, u8)>,
        /// Cut to this many bytes.
        truncate: Option<u16>,
    },
}

/// An edit of the true index's entries (`at` is taken modulo their count).
#[derive(Arbitrary, Debug)]
pub enum Edit {
    /// Drops an entry.
    Drop(u8),
    /// Lists an entry twice.
    Duplicate(u8),
    /// Swaps an entry with the next.
    Swap(u8),
    /// Moves an entry's offset.
    Move(u8, i16),
    /// Changes an entry's size.
    Resize(u8, i16),
    /// Inserts a line of these bytes before an entry.
    Junk(u8, Vec<u8>),
}

/// The index file.
#[derive(Arbitrary, Debug)]
pub enum Index {
    /// These bytes.
    Raw(Vec<u8>),
    /// The built file's records as an index, edited.
    Derived {
        /// Fillers listed too (DALI's own `tfrecord2idx` lists every record).
        list_fillers: bool,
        /// Edits, applied in order.
        edits: Vec<Edit>,
        /// Lines end in `\r\n`.
        crlf: bool,
        /// A blank line after every this many lines (0: none).
        blank_every: u8,
        /// `# comment` lines and trailing comments (only in `tfrecord-py` indexes).
        comments: bool,
        /// No newline after the last line.
        no_final_newline: bool,
    },
}

/// One input.
#[derive(Arbitrary, Debug)]
pub struct Input {
    /// The data file.
    pub data: Data,
    /// The index.
    pub index: Index,
    /// `tfrecord-py` format rather than DALI's.
    pub tfrecord_py: bool,
}

/// A record as built: offset, framed length, whether it is a filler.
type Built = (u64, u64, bool);

fn build(pieces: &[Piece], out: &mut Vec<u8>, records: &mut Vec<Built>) {
    for piece in pieces {
        let at = out.len() as u64;
        match piece {
            Piece::Instance { len, fill } => {
                let mut payload = vec![*fill | 1; usize::from(*len % 1024)];
                if let Some(b) = payload.first_mut() {
                    *b = 1 + (records.len() % 200) as u8;
                }
                format::encode_record(&payload, out);
                records.push((at, out.len() as u64 - at, false));
            }
            Piece::Filler { len } => {
                format::encode_filler(format::MIN_FILLER_LEN + u64::from(*len % 2048), out);
                records.push((at, out.len() as u64 - at, true));
            }
            Piece::Garbage(bytes) => out.extend_from_slice(bytes),
        }
    }
}

/// The index text for `entries` (`None` for a junk line) with `Derived`'s variations.
fn write_index(
    entries: &[Option<(u64, u64)>],
    junk: &[Vec<u8>],
    (crlf, blank_every, comments, no_final_newline): (bool, u8, bool, bool),
) -> Vec<u8> {
    let mut out = Vec::new();
    let end = if crlf { &b"\r\n"[..] } else { &b"\n"[..] };
    if comments {
        out.extend_from_slice(b"# offset size");
        out.extend_from_slice(end);
    }
    let mut junk = junk.iter();
    for (i, entry) in entries.iter().enumerate() {
        match entry {
            Some((offset, size)) => {
                out.extend_from_slice(format!("{offset} {size}").as_bytes());
                if comments && i % 3 == 0 {
                    out.extend_from_slice(b" # a record");
                }
            }
            None => out.extend_from_slice(junk.next().map_or(&[][..], Vec::as_slice)),
        }
        out.extend_from_slice(end);
        if blank_every > 0 && (i + 1) % usize::from(blank_every) == 0 {
            out.extend_from_slice(end);
        }
    }
    if no_final_newline && out.ends_with(end) {
        out.truncate(out.len() - end.len());
    }
    out
}

/// The oracles above, for one input.
pub fn check(input: &Input) {
    let format = if input.tfrecord_py {
        TextIndexFormat::TfrecordPy
    } else {
        TextIndexFormat::Dali
    };
    let mut data = Vec::new();
    let mut records = Vec::new();
    let mut damaged = false;
    match &input.data {
        Data::Raw(bytes) => data.extend_from_slice(bytes),
        Data::Built {
            pieces,
            flips,
            truncate,
        } => {
            build(pieces, &mut data, &mut records);
            damaged |= pieces
                .iter()
                .any(|p| matches!(p, Piece::Garbage(g) if !g.is_empty()));
            for &(at, xor) in flips {
                if !data.is_empty() && xor != 0 {
                    let i = usize::from(at) % data.len();
                    data[i] ^= xor;
                    damaged = true;
                }
            }
            if let Some(t) = truncate {
                damaged |= usize::from(*t) < data.len();
                data.truncate(usize::from(*t));
            }
        }
    }
    let (index, pristine) = match &input.index {
        Index::Raw(bytes) => (bytes.clone(), false),
        Index::Derived {
            list_fillers,
            edits,
            crlf,
            blank_every,
            comments,
            no_final_newline,
        } => {
            let mut entries: Vec<Option<(u64, u64)>> = records
                .iter()
                .filter(|r| *list_fillers || !r.2)
                .map(|&(o, n, _)| Some((o, n)))
                .collect();
            let mut junk = Vec::new();
            for edit in edits {
                let n = entries.len();
                if n == 0 {
                    break;
                }
                match edit {
                    Edit::Drop(i) => {
                        entries.remove(usize::from(*i) % n);
                    }
                    Edit::Duplicate(i) => {
                        let i = usize::from(*i) % n;
                        entries.insert(i, entries[i]);
                    }
                    Edit::Swap(i) => entries.swap(usize::from(*i) % n, (usize::from(*i) + 1) % n),
                    Edit::Move(i, d) => {
                        if let Some((o, _)) = &mut entries[usize::from(*i) % n] {
                            *o = o.wrapping_add_signed(i64::from(*d));
                        }
                    }
                    Edit::Resize(i, d) => {
                        if let Some((_, s)) = &mut entries[usize::from(*i) % n] {
                            *s = s.wrapping_add_signed(i64::from(*d));
                        }
                    }
                    Edit::Junk(i, bytes) => {
                        entries.insert(usize::from(*i) % n, None);
                        junk.push(bytes.clone());
                    }
                }
            }
            let comments = *comments && format == TextIndexFormat::TfrecordPy;
            let text = write_index(
                &entries,
                &junk,
                (*crlf, *blank_every, comments, *no_final_newline),
            );
            (text, edits.is_empty())
        }
    };

    let data_path = common::scratch_file("t.tfrecord");
    let index_path = common::scratch_file("t.tfrecord.idx");
    let table_path = common::scratch_file("t.tfrecord.offsets");
    std::fs::write(&data_path, &data).unwrap();
    std::fs::write(&index_path, &index).unwrap();
    let _ = std::fs::remove_file(&table_path);

    // The file as the oracle sees it: records tiling it, its first one an instance.
    let walked = common::walk_records(&data);
    let clean = walked
        .as_ref()
        .is_some_and(|w| w.first().is_none_or(|r| !format::is_filler(r.2)));
    let instances: Option<Vec<u64>> = walked.as_ref().filter(|_| clean).map(|w| {
        w.iter()
            .filter(|r| !format::is_filler(r.2))
            .map(|r| r.0)
            .collect()
    });

    let imported = offsets_from_text_index(&data_path, &index_path, format);
    match &imported {
        Ok(offsets) => {
            let expected = instances
                .as_ref()
                .expect("an index was accepted for a file whose records do not tile it from an instance at byte 0");
            assert_eq!(
                offsets, expected,
                "offsets differ from the file's instances"
            );
            assert_eq!(
                &scan_offsets(&data_path, |_| {}).expect("scan refuses what the import accepts"),
                expected
            );
            let entries =
                parse_text_index(format, &index).expect("accepted an index that does not parse");
            let walked = walked.as_ref().unwrap();
            let mut k = 0;
            for e in &entries {
                while k < walked.len() && walked[k].0 < e.offset {
                    assert!(
                        format::is_filler(walked[k].2),
                        "instance at byte {} not listed",
                        walked[k].0
                    );
                    k += 1;
                }
                let r = walked
                    .get(k)
                    .unwrap_or_else(|| panic!("entry {e:?} past the last record"));
                assert_eq!(
                    (r.0, r.1),
                    (e.offset, e.size),
                    "entry {e:?} is not a record"
                );
                k += 1;
            }
            assert!(
                walked[k..].iter().all(|r| format::is_filler(r.2)),
                "trailing instances not listed"
            );
        }
        Err(e) => {
            common::assert_names_one_of(e, &[&index_path, &data_path]);
            if let Err(parse) = parse_text_index(format, &index) {
                let msg = e.to_string();
                assert!(
                    msg.contains("t.tfrecord.idx") && msg.contains(&format!("line {}", parse.line)),
                    "{msg}"
                );
            }
            assert!(
                !(pristine && !damaged && instances.is_some()),
                "the true index of a clean file was refused: {e}"
            );
        }
    }

    // The table writer agrees with the import.
    match build_offset_table_from_text_index(&data_path, &index_path, format, &table_path, false) {
        Ok(n) => {
            let offsets = imported
                .as_ref()
                .expect("the table was built from a refused index");
            assert_eq!(n, offsets.len() as u64);
            assert_eq!(&read_table(&table_path).unwrap(), offsets);
        }
        Err(e) => {
            assert!(
                imported.is_err(),
                "import Ok but the table was not built: {e}"
            );
            assert!(!table_path.exists(), "a refused index left a table");
        }
    }

    // An index exported from a clean file imports back to its instances.
    if let Some(expected) = &instances {
        export_text_index(&data_path, &index_path, false).expect("export of a clean file");
        for format in [TextIndexFormat::Dali, TextIndexFormat::TfrecordPy] {
            let back = offsets_from_text_index(&data_path, &index_path, format)
                .unwrap_or_else(|e| panic!("an exported index does not import ({format}): {e}"));
            assert_eq!(&back, expected);
        }
    } else if let Err(e) = export_text_index(&data_path, &index_path, false) {
        common::assert_names(&e, &data_path);
    }
}
