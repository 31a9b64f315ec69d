//! A GZIP or ZLIB compressed TFRecord stream (one or more members), built from
//! instances, fillers and garbage, compressed, then damaged (bytes flipped, cut,
//! trailing bytes) → `pad_file_with` with the compression given, detected, or wrong, a
//! page size from the allowed range and next or best fit.
//!
//! Oracles: nothing panics; every error names the input (or output) file; an `Ok` is
//! exactly right: the input, decompressed independently (flate2 directly), is records
//! that tile it, the padded output passes `inspect` with its table at that page size,
//! and its instances are the input's non-filler records, in order (next fit) or where
//! the writer says (best fit); and an undamaged input whose records tile it, given as
//! what it is (or detected), is padded, not refused.

use std::io::{Read, Write};

use arbitrary::Arbitrary;
use flate2::{Decompress, FlushDecompress, Status};
use tfrecord_lirs::format::{self, PageSize};
use tfrecord_lirs::{
    default_table_path, inspect, pad_file_with, read_table, Compression, Fit, PadOptions, Reader,
    ReaderOptions,
};

use crate::common;

/// A part of the decompressed stream.
#[derive(Arbitrary, Debug)]
pub enum Piece {
    /// An instance of `len % 2048` bytes.
    Instance { len: u16, fill: u8 },
    /// A LIRS filler record (`pad` drops them).
    Filler { len: u16 },
    /// Bytes that are no record (or happen to be one).
    Garbage(Vec<u8>),
}

/// What `pad` is told the input is.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    /// Detected from the first bytes.
    Auto,
    /// What it is.
    Exact,
    /// The other compression.
    Other,
    /// Not compressed.
    Plain,
}

/// One input.
#[derive(Arbitrary, Debug)]
pub struct Input {
    /// The decompressed stream.
    pub pieces: Vec<Piece>,
    /// ZLIB rather than GZIP.
    pub zlib: bool,
    /// Compression level (modulo 10).
    pub level: u8,
    /// The stream is split into `1 + members % 3` members (gzip) or streams (zlib).
    pub members: u8,
    /// `(position, xor)` on the compressed bytes: the byte at `position % len` is xored.
    pub flips: Vec<(u16, u8)>,
    /// The compressed file is cut to this many bytes.
    pub truncate: Option<u16>,
    /// Bytes after the last member.
    pub trailing: Vec<u8>,
    /// What `pad` is told.
    pub declared: Declared,
    /// The page size (see `common::page_size`).
    pub page_shift: u8,
    /// Best fit (window `1 + window % 64`) rather than next fit.
    pub best: bool,
    /// See `best`.
    pub lookahead: u8,
}

fn build(pieces: &[Piece]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut garbage = false;
    for (i, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Instance { len, fill } => {
                let mut payload = vec![*fill | 1; usize::from(*len % 2048)];
                if let Some(b) = payload.first_mut() {
                    *b = 1 + (i % 200) as u8;
                }
                format::encode_record(&payload, &mut out);
            }
            Piece::Filler { len } => {
                format::encode_filler(format::MIN_FILLER_LEN + u64::from(*len % 4096), &mut out)
            }
            Piece::Garbage(bytes) => {
                garbage |= !bytes.is_empty();
                out.extend_from_slice(bytes);
            }
        }
    }
    (out, garbage)
}

fn compress(plain: &[u8], zlib: bool, level: u32, members: usize) -> Vec<u8> {
    let level = flate2::Compression::new(level);
    let mut out = Vec::new();
    let part = plain.len().div_ceil(members).max(1);
    let mut parts: Vec<&[u8]> = plain.chunks(part).collect();
    parts.resize(members.max(parts.len()), &[]);
    for part in parts {
        if zlib {
            let mut e = flate2::write::ZlibEncoder::new(&mut out, level);
            e.write_all(part).unwrap();
            e.finish().unwrap();
        } else {
            let mut e = flate2::write::GzEncoder::new(&mut out, level);
            e.write_all(part).unwrap();
            e.finish().unwrap();
        }
    }
    out
}

/// Zlib streams back to back, inflated with `flate2::Decompress` directly: `None` if
/// any is damaged or cut, or bytes after one do not start another. An empty input is
/// an empty stream.
fn inflate_zlib_streams(mut input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while !input.is_empty() {
        let mut d = Decompress::new(true);
        loop {
            let (had_in, had_out) = (d.total_in(), d.total_out());
            let status = d
                .decompress(&input[had_in as usize..], &mut buf, FlushDecompress::None)
                .ok()?;
            out.extend_from_slice(&buf[..(d.total_out() - had_out) as usize]);
            if status == Status::StreamEnd {
                break;
            }
            if d.total_in() == had_in && d.total_out() == had_out {
                return None; // cut short
            }
        }
        input = &input[d.total_in() as usize..];
    }
    Some(out)
}

/// What the file's bytes decompress to, read as `kind`: `None` if they do not.
fn decompressed(bytes: &[u8], kind: Compression) -> Option<Vec<u8>> {
    match kind {
        Compression::None | Compression::Auto => Some(bytes.to_vec()),
        Compression::Zlib => inflate_zlib_streams(bytes),
        Compression::Gzip => {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(bytes)
                .read_to_end(&mut out)
                .ok()
                .map(|_| out)
        }
    }
}

/// The oracles above, for one input.
pub fn check(input: &Input) {
    let (plain, garbage) = build(&input.pieces);
    let mut bytes = compress(
        &plain,
        input.zlib,
        u32::from(input.level % 10),
        1 + usize::from(input.members % 3),
    );
    let mut damaged = garbage || !input.trailing.is_empty();
    for &(at, xor) in &input.flips {
        if !bytes.is_empty() && xor != 0 {
            let i = usize::from(at) % bytes.len();
            bytes[i] ^= xor;
            damaged = true;
        }
    }
    if let Some(t) = input.truncate {
        damaged |= usize::from(t) < bytes.len();
        bytes.truncate(usize::from(t));
    }
    bytes.extend_from_slice(&input.trailing);
    let actual = if input.zlib {
        Compression::Zlib
    } else {
        Compression::Gzip
    };
    let declared = match input.declared {
        Declared::Auto => Compression::Auto,
        Declared::Exact => actual,
        Declared::Other if input.zlib => Compression::Gzip,
        Declared::Other => Compression::Zlib,
        Declared::Plain => Compression::None,
    };

    let src = common::scratch_file(if input.zlib {
        "c.tfrecord.zz"
    } else {
        "c.tfrecord.gz"
    });
    let dst = common::scratch_file("c-padded.tfrecord");
    std::fs::write(&src, &bytes).unwrap();
    let page = common::page_size(input.page_shift);
    let fit = if input.best {
        Fit::Best {
            lookahead: 1 + usize::from(input.lookahead % 64),
        }
    } else {
        Fit::Next
    };
    let options = PadOptions {
        page_size: page,
        fit,
        sync: false,
        ..Default::default()
    };

    // The oracle's own reading: the compression `pad` will apply, then the records.
    let kind = match declared {
        Compression::Auto => {
            match format::compressed_head(&bytes[..bytes.len().min(format::HEADER_LEN)]) {
                Some("GZIP") => Compression::Gzip,
                Some(_) => Compression::Zlib,
                None => Compression::None,
            }
        }
        other => other,
    };
    let stream = decompressed(&bytes, kind);
    let expected: Option<Vec<&[u8]>> = stream.as_deref().and_then(common::walk_records).map(|w| {
        w.into_iter()
            .map(|r| r.2)
            .filter(|p| !format::is_filler(p))
            .collect()
    });

    match pad_file_with(&src, &dst, &options, declared, |_| {}) {
        Ok(summary) => {
            let expected = expected.unwrap_or_else(|| {
                panic!("pad accepted a {kind:?} input that does not decompress into whole records")
            });
            assert_eq!(summary.instances, expected.len() as u64);
            let table_path = default_table_path(&dst);
            let table = read_table(&table_path).unwrap();
            let found = inspect(
                &dst,
                Some((&table_path, &table)),
                Some(PageSize::new(page).unwrap()),
            )
            .unwrap_or_else(|e| panic!("the padded output fails inspect: {e}"));
            assert_eq!(found.instances, expected.len() as u64);
            let reader = Reader::open_one(
                &dst,
                None,
                &ReaderOptions {
                    page_size: page,
                    ..ReaderOptions::default()
                },
            )
            .unwrap();
            for (i, payload) in expected.iter().enumerate() {
                let id = summary.instance_of(i as u64).unwrap();
                assert_eq!(
                    &reader.read(id).unwrap(),
                    payload,
                    "input record {i} as instance {id}"
                );
            }
        }
        Err(e) => {
            common::assert_names_one_of(&e, &[&src, &dst]);
            let truthful = matches!(input.declared, Declared::Auto | Declared::Exact);
            assert!(
                !(truthful && !damaged && expected.is_some()),
                "an undamaged {actual:?} input of whole records was refused: {e}"
            );
        }
    }
}
