//! Storage: positioned reads of local files through the backends of [`local`], files
//! named by URLs through a [`remote`] file system (and Apache Arrow's `object_store`
//! in `cloud`). The only module tree of the crate allowed `unsafe` (each block with a
//! `// SAFETY:` comment).
//!
//! A [`Storage`] value is what every operation on a path goes through: it decides once
//! per path whether the path is local (the backends of [`local`]) or a URL (its
//! [`FileSystem`]), and front ends pass it in explicitly (in
//! [`ReaderOptions`](crate::ReaderOptions) and [`PadOptions`](crate::PadOptions)):
//! nothing is registered process-wide.

#![allow(unsafe_code)]

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use tfrecord_lirs_format::error::{Error, Result};

use local::{AutoFile, Backend, MmapOptIn, PreadFile, ReadAt};
use remote::FileSystem;

#[cfg(feature = "object-store")]
pub mod cloud;
pub mod local;
pub mod remote;
pub(crate) mod table_files;

/// Where paths are read and written: local files, and URLs through a
/// [`FileSystem`] when one is given.
///
/// ```
/// use std::path::Path;
/// use tfrecord_lirs::{ErrorKind, Storage};
/// let local = Storage::local();
/// assert!(!local.reads_urls());
/// let err = local.check(Path::new("gs://bucket/x.tfrecord")).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
/// ```
#[derive(Clone, Default)]
pub struct Storage {
    remote: Option<Arc<dyn FileSystem>>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("reads_urls", &self.reads_urls())
            .finish()
    }
}

/// Two storages are the same when they reach URLs through the same file system (or
/// neither does).
impl PartialEq for Storage {
    fn eq(&self, other: &Storage) -> bool {
        match (&self.remote, &other.remote) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Storage {}

/// Where one path is: the decision a [`Storage`] makes once per path.
pub(crate) enum Place<'a> {
    /// A local file.
    Local(&'a Path),
    /// A URL, through this file system.
    Remote(&'a Arc<dyn FileSystem>, &'a str),
}

/// A data file opened before its record count is known: the default backend decides
/// whether to map it only once its table has been read ([`Opened::with_records`]).
pub(crate) enum Opened {
    /// Ready to read.
    Source(Box<dyn ReadAt>),
    /// A local file for [`Backend::Auto`], read with `pread(2)` until its records are
    /// known.
    Auto(PreadFile),
}

impl Opened {
    /// The source, given the file's record count (the table's length).
    pub(crate) fn with_records(self, records: u64) -> Box<dyn ReadAt> {
        match self {
            Opened::Source(src) => src,
            Opened::Auto(pread) => Box::new(AutoFile::from_pread(pread, records)),
        }
    }
}

impl Storage {
    /// Local files only: a URL is an [`InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// error saying so (the default).
    pub fn local() -> Storage {
        Storage { remote: None }
    }

    /// Local files, and URLs through `fs`.
    pub fn with_file_system(fs: Arc<dyn FileSystem>) -> Storage {
        Storage { remote: Some(fs) }
    }

    /// Whether URLs can be opened.
    pub fn reads_urls(&self) -> bool {
        self.remote.is_some()
    }

    /// Checks that `path` can be reached: a local path, or a URL with a file system.
    pub fn check(&self, path: &Path) -> Result<()> {
        self.place(path).map(|_| ())
    }

    /// Where `path` is; the error for a URL without a file system.
    pub(crate) fn place<'a>(&'a self, path: &'a Path) -> Result<Place<'a>> {
        if !remote::is_url(path) {
            return Ok(Place::Local(path));
        }
        match &self.remote {
            // URLs are valid UTF-8 (see remote::scheme).
            Some(fs) => Ok(Place::Remote(fs, path.to_str().unwrap_or_default())),
            None => Err(Error::invalid_argument(format!(
                "{}: a URL ({}://), but this program reads local files only; read URLs \
                 through the Python package tfrecord_lirs, which uses TensorFlow's file systems",
                path.display(),
                remote::scheme(path).unwrap_or_default()
            ))),
        }
    }

    /// Opens `path` with `backend` (for [`Backend::Auto`], the map is decided by
    /// [`Opened::with_records`]); a URL takes the default backend only.
    /// [`Backend::Mmap`] needs `mmap_opt_in` (see [`MmapOptIn`]).
    pub(crate) fn open_deferred(
        &self,
        path: &Path,
        backend: Backend,
        mmap_opt_in: Option<MmapOptIn>,
    ) -> Result<Opened> {
        match self.place(path)? {
            Place::Remote(fs, url) => {
                remote::check_backend(path, backend)?;
                fs.open_read(url)
                    .map(Opened::Source)
                    .map_err(|e| remote::error(path, e))
            }
            Place::Local(path) => Ok(match backend {
                Backend::Auto => Opened::Auto(PreadFile::open(path)?),
                other => Opened::Source(local::open_with_records(path, other, 1, mmap_opt_in)?),
            }),
        }
    }

    /// Opens `path` with `backend`; `records` (the table's length) lets
    /// [`Backend::Auto`] decide whether mapping pays.
    pub fn open(
        &self,
        path: &Path,
        backend: Backend,
        records: u64,
        mmap_opt_in: Option<MmapOptIn>,
    ) -> Result<Box<dyn ReadAt>> {
        Ok(self
            .open_deferred(path, backend, mmap_opt_in)?
            .with_records(records))
    }

    /// `path` as a stream read front to back, and its size.
    pub(crate) fn open_stream(&self, path: &Path) -> Result<(Box<dyn Read + Send>, u64)> {
        match self.place(path)? {
            Place::Remote(..) => {
                let src = self.open(path, Backend::Auto, 1, None)?;
                let size = src.size();
                Ok((Box::new(remote::ReadAtStream::new(src)), size))
            }
            Place::Local(path) => {
                let file = File::open(path).map_err(|e| Error::io(path, e))?;
                let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
                Ok((Box::new(file), size))
            }
        }
    }

    /// The whole of `path`. Errors keep their [`std::io::Error`] so callers can name a
    /// missing file.
    pub(crate) fn read_all(
        &self,
        path: &Path,
    ) -> std::result::Result<Vec<u8>, remote::ReadAllError> {
        match self.place(path).map_err(remote::ReadAllError::Other)? {
            Place::Local(path) => std::fs::read(path).map_err(remote::ReadAllError::Io),
            Place::Remote(fs, url) => remote::read_all(&**fs, path, url),
        }
    }

    /// What is at `path`, if anything: "a file", "a directory" or "an object".
    pub(crate) fn what_exists(&self, path: &Path) -> Option<&'static str> {
        match self.place(path).ok()? {
            // An object that opens exists.
            Place::Remote(fs, url) => fs.open_read(url).ok().map(|_| "an object"),
            Place::Local(path) => std::fs::symlink_metadata(path).ok().map(|meta| {
                if meta.is_dir() {
                    "a directory"
                } else {
                    "a file"
                }
            }),
        }
    }
}
