//! Files named by URLs (`gs://bucket/x.tfrecord`, `ram://x`, `s3://…`), reached
//! through a file system the embedding program passes in a [`Storage`](crate::Storage).
//!
//! The core decides here, and only here, what a URL is: a path that starts with a
//! scheme, `^[A-Za-z][A-Za-z0-9+.-]*://` (see [`scheme`]; the rest of the crate asks
//! [`Storage::is_local`](crate::Storage::is_local)). Local paths keep the backends
//! of [`local`](crate::local) unchanged; a URL is opened through the [`FileSystem`] of the
//! [`Storage`](crate::Storage) it is used with. The TensorFlow op library passes
//! TensorFlow's own file systems (`tensorflow::Env`), so every scheme TensorFlow knows
//! works there, with its credentials and settings. Without a file system
//! ([`Storage::local`](crate::Storage::local): the default, the `tfrecord-lirs` CLI)
//! a URL is an [`InvalidArgument`](crate::ErrorKind::InvalidArgument) error saying
//! so, never a "No such file or directory" for a local path of that name.
//!
//! ```
//! use std::path::Path;
//! use tfrecord_lirs::remote::scheme;
//! assert_eq!(scheme(Path::new("gs://bucket/train.tfrecord")), Some("gs"));
//! assert_eq!(scheme(Path::new("ram://x")), Some("ram"));
//! assert_eq!(scheme(Path::new("/data/train.tfrecord")), None);
//! assert_eq!(scheme(Path::new("c:/x")), None);
//! ```

use std::io;
use std::path::Path;

use crate::error::{Error, Result};

use crate::storage::local::Backend;
use crate::storage::ReadAt;

/// A file system reached by URL: positioned reads, whole small objects, and writes.
///
/// Errors are [`io::Error`]s whose kind the core maps: `NotFound` (a missing object),
/// `Unsupported` (a scheme the file system does not know), `InvalidInput`, and
/// `UnexpectedEof` (a read that ended early); every other kind is an I/O failure.
pub trait FileSystem: Send + Sync {
    /// Opens `url` for positioned reads; the returned source knows the object's size.
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>>;

    /// The whole object at `url` (for small ones, such as offset tables).
    fn read_all(&self, url: &str) -> io::Result<Vec<u8>> {
        let src = self.open_read(url)?;
        let size = usize::try_from(src.size())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "object too large"))?;
        let mut bytes = vec![0u8; size];
        crate::storage::local::read_exact_at(&*src, &mut bytes, 0)?;
        Ok(bytes)
    }

    /// Creates `url` for writing. Over an existing file most file systems start it
    /// empty, but TensorFlow's `ram://` appends to it: the writers therefore create a
    /// fresh name and rename it into place (or, without rename, write a new object).
    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>>;

    /// Renames `from` to `to`, replacing `to`. `Unsupported` where the scheme has no
    /// rename (see [`Durability`]).
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;

    /// Deletes `url` (missing is not an error).
    fn delete(&self, url: &str) -> io::Result<()>;

    /// What a finished write at `url` guarantees.
    fn durability(&self, url: &str) -> Durability;

    /// The URLs of the objects `pattern` matches (the syntax of `tf.io.gfile.glob`),
    /// in any order; the core leaves out derived files and sorts them.
    /// `Unsupported` where the file system cannot list.
    fn glob(&self, pattern: &str) -> io::Result<Vec<String>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{pattern}: this file system cannot list a pattern's matches; give the list of files"),
        ))
    }
}

/// A shared file system is one too (one object-store client serving several
/// [`Storage`](crate::Storage) values, e.g. as one layer of a [`Layered`]).
impl<T: FileSystem + ?Sized> FileSystem for std::sync::Arc<T> {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        (**self).open_read(url)
    }

    fn read_all(&self, url: &str) -> io::Result<Vec<u8>> {
        (**self).read_all(url)
    }

    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        (**self).create(url)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        (**self).rename(from, to)
    }

    fn delete(&self, url: &str) -> io::Result<()> {
        (**self).delete(url)
    }

    fn durability(&self, url: &str) -> Durability {
        (**self).durability(url)
    }

    fn glob(&self, pattern: &str) -> io::Result<Vec<String>> {
        (**self).glob(pattern)
    }
}

/// What a write through a [`FileSystem`] guarantees, per scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Written to a temporary name and renamed over the target: readers see the old
    /// object or the new one, never a part (local files, HDFS, `ram://`).
    Rename,
    /// No rename (object stores such as `gs://` and `s3://`, where TensorFlow's
    /// "rename" is a copy then a delete): the object is uploaded whole and appears
    /// when its upload is finished (the store's own atomicity), so it is written
    /// straight to its name; a failed upload leaves the old object (or none).
    WholeObject,
}

/// An object being written: appended to, then closed (which makes it visible and,
/// where the scheme can, durable).
pub trait RemoteWrite: Send {
    /// Appends `data`.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Flushes and closes the object; an error means it may not have been written.
    fn close(&mut self) -> io::Result<()>;
}

/// Two file systems as one: `first` for every URL it implements, `second` for the
/// schemes `first` answers `Unsupported` (e.g. TensorFlow's file systems first, and
/// object storage for `s3://`, which TensorFlow 2.21 does not implement).
pub struct Layered<A, B> {
    /// Asked first.
    pub first: A,
    /// Asked where `first` does not implement the scheme.
    pub second: B,
}

impl<A: FileSystem, B: FileSystem> Layered<A, B> {
    fn either<T>(&self, op: impl Fn(&dyn FileSystem) -> io::Result<T>) -> io::Result<T> {
        match op(&self.first) {
            Err(e) if e.kind() == io::ErrorKind::Unsupported => match op(&self.second) {
                // Neither knows the scheme: the first one's words.
                Err(again) if again.kind() == io::ErrorKind::Unsupported => Err(e),
                other => other,
            },
            other => other,
        }
    }
}

impl<A: FileSystem, B: FileSystem> FileSystem for Layered<A, B> {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        self.either(|fs| fs.open_read(url))
    }

    fn read_all(&self, url: &str) -> io::Result<Vec<u8>> {
        self.either(|fs| fs.read_all(url))
    }

    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        self.either(|fs| fs.create(url))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.either(|fs| fs.rename(from, to))
    }

    fn delete(&self, url: &str) -> io::Result<()> {
        self.either(|fs| fs.delete(url))
    }

    fn durability(&self, url: &str) -> Durability {
        // Without a rename of its own the first gives WholeObject, which is also what
        // object storage guarantees.
        self.first.durability(url)
    }

    fn glob(&self, pattern: &str) -> io::Result<Vec<String>> {
        self.either(|fs| fs.glob(pattern))
    }
}

/// The scheme of `path` (`"gs"` for `gs://b/x`), if it is a URL.
pub fn scheme(path: &Path) -> Option<&str> {
    let s = path.to_str()?;
    let (scheme, _) = s.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')))
    .then_some(scheme)
}

/// Whether `path` is a URL (`scheme://…`) rather than a local path: the storage
/// layer's own test (everything else asks [`Storage::is_local`](crate::Storage::is_local)).
pub(crate) fn is_url(path: &Path) -> bool {
    scheme(path).is_some()
}

/// `path` as the string a file system takes (URLs are always valid UTF-8: see
/// [`scheme`]).
fn url_str(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

/// The crate's error for `source` failing on `url`: a scheme the file system does not
/// know, or a bad URL, is an invalid argument; anything else keeps its I/O kind.
pub(crate) fn error(url: &Path, source: io::Error) -> Error {
    match source.kind() {
        io::ErrorKind::Unsupported | io::ErrorKind::InvalidInput => {
            Error::invalid_argument(format!("{}: {source}", url.display()))
        }
        _ => Error::io(url, source),
    }
}

/// A TensorFlow file system's status (an `absl::StatusCode` and its message, from the
/// op library's bridge or from `tf.errors.OpError` through Python's gfile) as the
/// [`io::Error`] of the kind the core maps (see [`FileSystem`]): NOT_FOUND →
/// `NotFound`, UNIMPLEMENTED (a scheme TensorFlow does not know: "File system scheme
/// 'x' not implemented") → `Unsupported`, INVALID_ARGUMENT → `InvalidInput`, anything
/// else (an unknown code included) → `Other`. One rule for both front ends.
pub fn tensorflow_status_error(code: i64, message: String) -> io::Error {
    const INVALID_ARGUMENT: i64 = 3;
    const NOT_FOUND: i64 = 5;
    const UNIMPLEMENTED: i64 = 12;
    let (kind, name) = match code {
        NOT_FOUND => (io::ErrorKind::NotFound, "not found"),
        UNIMPLEMENTED => (io::ErrorKind::Unsupported, "not implemented"),
        INVALID_ARGUMENT => (io::ErrorKind::InvalidInput, "invalid argument"),
        _ => (io::ErrorKind::Other, "failed"),
    };
    // Some file systems (ram://) give no message: say at least what happened.
    let message = if message.is_empty() {
        format!("{name} (TensorFlow file system, status code {code})")
    } else {
        message
    };
    io::Error::new(kind, message)
}

/// Checks that `backend` makes sense for `url`: the local backends (pread, mmap,
/// O_DIRECT) do not, so only the default is accepted.
pub(crate) fn check_backend(url: &Path, backend: Backend) -> Result<()> {
    if backend == Backend::Auto || !is_url(url) {
        return Ok(());
    }
    Err(Error::invalid_argument(format!(
        "{}: backend \"{}\" reads local files only; a URL is read through its file \
         system (leave the backend at its default, \"auto\")",
        url.display(),
        format!("{backend:?}").to_lowercase()
    )))
}

/// The whole object `url` (`path`, for errors) through `fs`. Errors keep their
/// [`io::Error`] so callers can name a missing file.
pub(crate) fn read_all(
    fs: &dyn FileSystem,
    path: &Path,
    url: &str,
) -> std::result::Result<Vec<u8>, ReadAllError> {
    fs.read_all(url).map_err(|e| match e.kind() {
        io::ErrorKind::Unsupported | io::ErrorKind::InvalidInput => {
            ReadAllError::Other(error(path, e))
        }
        _ => ReadAllError::Io(e),
    })
}

/// Why [`read_all`] failed: an I/O error on the file (the caller names it), or an
/// error already complete.
#[derive(Debug)]
pub(crate) enum ReadAllError {
    Io(io::Error),
    Other(Error),
}

/// A [`ReadAt`] read front to back as a stream (for scanning a URL).
pub(crate) struct ReadAtStream {
    src: Box<dyn ReadAt>,
    pos: u64,
}

impl ReadAtStream {
    pub(crate) fn new(src: Box<dyn ReadAt>) -> ReadAtStream {
        ReadAtStream { src, pos: 0 }
    }
}

impl io::Read for ReadAtStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.src.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// A [`RemoteWrite`] as an [`io::Write`]; [`close`](RemoteWriter::close) must be
/// called to finish the object (dropping it unclosed abandons the write).
pub(crate) struct RemoteWriter {
    url: std::path::PathBuf,
    inner: Box<dyn RemoteWrite>,
}

impl RemoteWriter {
    /// Creates `url` (which must be a URL) for writing through `fs`.
    pub(crate) fn create(fs: &dyn FileSystem, url: &Path) -> Result<RemoteWriter> {
        let inner = fs.create(url_str(url)).map_err(|e| error(url, e))?;
        Ok(RemoteWriter {
            url: url.to_path_buf(),
            inner,
        })
    }

    /// Closes the object: written, visible and (where the scheme can) durable.
    pub(crate) fn close(mut self) -> Result<()> {
        self.inner.close().map_err(|e| error(&self.url, e))
    }
}

impl io::Write for RemoteWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.append(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes `bytes` as the whole object `url`, as atomically as its scheme allows
/// (see [`Durability`]): to a temporary name then renamed where there is a rename,
/// else straight to `url`.
pub(crate) fn write_whole(fs: &dyn FileSystem, url: &Path, bytes: &[u8]) -> Result<()> {
    write_with(fs, url, |w| io::Write::write_all(w, bytes))
}

/// Uploads the local file `local` as the whole object `url` (see [`write_whole`]).
pub(crate) fn upload(fs: &dyn FileSystem, local: &Path, url: &Path) -> Result<()> {
    let mut file = std::fs::File::open(local).map_err(|e| Error::io(local, e))?;
    write_with(fs, url, |w| io::copy(&mut file, w).map(|_| ()))
}

/// Deletes the object `url` if it exists.
pub(crate) fn delete(fs: &dyn FileSystem, url: &Path) -> Result<()> {
    fs.delete(url_str(url)).map_err(|e| error(url, e))
}

/// Writes the object `url` with `fill`, as atomically as its scheme allows.
fn write_with(
    fs: &dyn FileSystem,
    url: &Path,
    fill: impl FnOnce(&mut RemoteWriter) -> io::Result<()>,
) -> Result<()> {
    let target = url_str(url);
    let write = |name: &Path| -> Result<()> {
        let mut w = RemoteWriter::create(fs, name)?;
        fill(&mut w).map_err(|e| error(url, e))?;
        w.close()
    };
    match fs.durability(target) {
        Durability::WholeObject => write(url),
        Durability::Rename => {
            let temp = temp_name(target);
            let written = write(Path::new(&temp))
                .and_then(|()| fs.rename(&temp, target).map_err(|e| error(url, e)));
            if written.is_err() {
                let _ = fs.delete(&temp);
            }
            written
        }
    }
}

/// A temporary name beside `url` (same directory, so a rename stays inside it).
pub(crate) fn temp_name(url: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let (dir, name) = url.rsplit_once('/').unwrap_or(("", url));
    format!(
        "{dir}/.lirs-tmp-{}-{}-{name}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensorflow_statuses_map_to_the_kinds_the_core_tells_apart() {
        let e = tensorflow_status_error(5, "gone".into());
        assert_eq!(
            (e.kind(), e.to_string()),
            (io::ErrorKind::NotFound, "gone".into())
        );
        let e = tensorflow_status_error(12, String::new());
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert_eq!(
            e.to_string(),
            "not implemented (TensorFlow file system, status code 12)"
        );
        assert_eq!(
            tensorflow_status_error(3, "x".into()).kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            tensorflow_status_error(7, "x".into()).kind(),
            io::ErrorKind::Other
        );
    }

    #[test]
    fn schemes() {
        for (path, want) in [
            ("gs://b/x", Some("gs")),
            ("ram://x", Some("ram")),
            ("s3+x.y-z://b", Some("s3+x.y-z")),
            ("hdfs://nn:9000/p", Some("hdfs")),
            ("/abs/gs://x", None),
            ("rel/x", None),
            ("1gs://x", None),
            ("://x", None),
            ("g s://x", None),
            ("file.tfrecord", None),
        ] {
            assert_eq!(scheme(Path::new(path)), want, "{path}");
        }
    }

    #[test]
    fn local_backends_are_refused_for_urls() {
        let url = Path::new("gs://b/x");
        assert!(check_backend(url, Backend::Auto).is_ok());
        for b in [Backend::Pread, Backend::Mmap, Backend::Direct] {
            let e = check_backend(url, b).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains("gs://b/x"), "{e}");
            assert!(check_backend(Path::new("/x"), b).is_ok());
        }
    }

    #[test]
    fn temp_names_stay_in_the_directory() {
        let t = temp_name("gs://b/dir/x.offsets");
        assert!(t.starts_with("gs://b/dir/.lirs-tmp-"), "{t}");
        assert!(t.ends_with("-x.offsets"), "{t}");
    }
}
