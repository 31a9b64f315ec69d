//! Compressed TFRecord input (GZIP, ZLIB), decompressed as it streams.
//!
//! TensorFlow's `TFRecordOptions(compression_type="GZIP")` writes the records through a
//! gzip stream, `"ZLIB"` through a zlib stream (RFC 1950, header `0x78 ..`). Neither
//! can be read at random, so readers and `index` refuse them; but `pad` only reads its
//! input front to back, so it decompresses on the fly (with `flate2`) and writes a
//! plain padded file and its table in one step.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flate2::bufread::{MultiGzDecoder, ZlibDecoder};

use crate::error::{Error, Result};
use tfrecord_lirs_format::framing;

use crate::storage::Storage;

/// How a TFRecord file is compressed.
///
/// Parsed from `"auto"` (or `""`), `"none"`, `"gzip"`, `"zlib"`, in any case (so
/// TensorFlow's `compression_type` names `"GZIP"`, `"ZLIB"` and `""` work too; `""`
/// means "detect").
///
/// ```
/// use tfrecord_lirs::Compression;
/// assert_eq!("GZIP".parse::<Compression>().unwrap(), Compression::Gzip);
/// assert_eq!("".parse::<Compression>().unwrap(), Compression::Auto);
/// assert!("bzip2".parse::<Compression>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Detected from the file's first bytes: a GZIP magic (`1f 8b`) or a ZLIB header
    /// that is not also a valid TFRecord header (see [`framing::compressed_head`]).
    #[default]
    Auto,
    /// A plain TFRecord file.
    None,
    /// A gzip stream (one or more members), as TensorFlow's `"GZIP"` writes.
    Gzip,
    /// A zlib stream (one or more, back to back), as TensorFlow's `"ZLIB"` writes.
    Zlib,
}

impl Compression {
    /// The name used in messages: `"none"`, `"GZIP"`, `"ZLIB"` (or `"auto"`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::Auto => "auto",
            Compression::None => "none",
            Compression::Gzip => "GZIP",
            Compression::Zlib => "ZLIB",
        }
    }

    /// `self`, with [`Auto`](Compression::Auto) resolved from the first bytes of the
    /// file at `path`.
    pub fn resolve(self, path: &Path) -> Result<Compression> {
        self.resolve_in(&Storage::local(), path)
    }

    /// [`resolve`](Compression::resolve) through `storage`.
    pub(crate) fn resolve_in(self, storage: &Storage, path: &Path) -> Result<Compression> {
        if self != Compression::Auto {
            return Ok(self);
        }
        let mut head = Vec::with_capacity(framing::HEADER_LEN);
        storage
            .open_stream(path)?
            .0
            .take(framing::HEADER_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(path, e))?;
        Ok(match framing::compressed_head(&head) {
            Some("GZIP") => Compression::Gzip,
            Some(_) => Compression::Zlib,
            None => Compression::None,
        })
    }
}

impl FromStr for Compression {
    type Err = Error;

    fn from_str(s: &str) -> Result<Compression> {
        match s.to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Compression::Auto),
            "none" => Ok(Compression::None),
            "gzip" => Ok(Compression::Gzip),
            "zlib" => Ok(Compression::Zlib),
            _ => Err(Error::invalid_argument(format!(
                "unknown compression {s:?}: use \"auto\", \"none\", \"gzip\" or \"zlib\""
            ))),
        }
    }
}

/// Counts the bytes read through it (the compressed bytes consumed, for progress).
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Zlib streams back to back (TensorFlow writes one; concatenated files hold more).
/// Bytes after a stream that do not start another are a corrupt stream, not ignored.
struct MultiZlib<R: BufRead> {
    decoder: Option<ZlibDecoder<R>>,
}

impl<R: BufRead> Read for MultiZlib<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(decoder) = self.decoder.as_mut() else {
                return Ok(0);
            };
            // A truncated stream is an `UnexpectedEof` error ("incomplete deflate
            // stream"), never a silent end.
            let n = decoder.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let mut rest = self.decoder.take().expect("checked above").into_inner();
            if !rest.fill_buf()?.is_empty() {
                self.decoder = Some(ZlibDecoder::new(rest));
            }
        }
    }
}

/// The decompressed bytes of the file at `path` (`compression` resolved, not
/// [`Auto`](Compression::Auto)), and a counter of the file's bytes read so far.
pub(crate) fn open_decompressed(
    storage: &Storage,
    path: &Path,
    compression: Compression,
) -> Result<(Box<dyn Read + Send>, Arc<AtomicU64>)> {
    let count = Arc::new(AtomicU64::new(0));
    let (file, _) = storage.open_stream(path)?;
    let raw = BufReader::with_capacity(
        1 << 16,
        Counting {
            inner: file,
            count: Arc::clone(&count),
        },
    );
    let stream: Box<dyn Read + Send> = match compression {
        Compression::Gzip => Box::new(MultiGzDecoder::new(raw)),
        Compression::Zlib => Box::new(MultiZlib {
            decoder: Some(ZlibDecoder::new(raw)),
        }),
        Compression::None | Compression::Auto => Box::new(raw),
    };
    Ok((stream, count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn records(n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            framing::encode_record(format!("record {i}").repeat(i % 7 + 1).as_bytes(), &mut out);
        }
        out
    }

    fn decompress_all(path: &Path, c: Compression) -> std::io::Result<Vec<u8>> {
        let (mut r, _) = open_decompressed(&Storage::local(), path, c).unwrap();
        let mut out = Vec::new();
        r.read_to_end(&mut out).map(|_| out)
    }

    #[test]
    fn gzip_and_zlib_streams_decompress_and_are_detected() {
        let dir = tempfile::tempdir().unwrap();
        let plain = records(50);
        let gz = dir.path().join("g");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&plain).unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        let zl = dir.path().join("z");
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&plain).unwrap();
        let zbytes = e.finish().unwrap();
        // Two zlib streams back to back read as their concatenation.
        std::fs::write(&zl, [zbytes.clone(), zbytes.clone()].concat()).unwrap();
        let raw = dir.path().join("r");
        std::fs::write(&raw, &plain).unwrap();
        assert_eq!(Compression::Auto.resolve(&gz).unwrap(), Compression::Gzip);
        assert_eq!(Compression::Auto.resolve(&zl).unwrap(), Compression::Zlib);
        assert_eq!(Compression::Auto.resolve(&raw).unwrap(), Compression::None);
        assert_eq!(decompress_all(&gz, Compression::Gzip).unwrap(), plain);
        assert_eq!(
            decompress_all(&zl, Compression::Zlib).unwrap(),
            [plain.clone(), plain.clone()].concat()
        );
        // Truncated streams are errors, never a silent short read.
        for (path, c) in [(&gz, Compression::Gzip), (&zl, Compression::Zlib)] {
            let bytes = std::fs::read(path).unwrap();
            let cut = dir.path().join("cut");
            std::fs::write(&cut, &bytes[..zbytes.len() / 2]).unwrap();
            assert!(decompress_all(&cut, c).is_err(), "{c:?}");
        }
        // Garbage after a zlib stream is not ignored.
        std::fs::write(&zl, [zbytes.as_slice(), b"garbage"].concat()).unwrap();
        assert!(decompress_all(&zl, Compression::Zlib).is_err());
    }
}
