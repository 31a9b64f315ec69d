//! Storage: positioned reads of local files through the backends of [`local`], files
//! named by URLs through a [`remote`] file system (and Apache Arrow's `object_store`
//! in `cloud`). The only module tree of the crate allowed `unsafe` (each block with a
//! `// SAFETY:` comment).
//!
//! A [`Storage`] value is what every operation on a path goes through: it decides once
//! per path whether the path is local (the backends of [`local`]) or a URL (its
//! [`FileSystem`]), and front ends pass it in explicitly (in
//! [`ReaderOptions`](crate::ReaderOptions) and [`PadOptions`](crate::PadOptions)):
//! nothing is registered process-wide. Every module that treats local files and URLs
//! apart asks the `Storage` it was handed ([`Storage::is_local`] and the methods that
//! do the thing); what a URL is stays private to this module tree. Which file systems
//! serve URLs, in which order, is decided for every front end by
//! [`Storage::with_url_file_systems`].

#![allow(unsafe_code)]

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

use local::{AutoFile, Backend, MmapOptIn, PreadFile};
use remote::FileSystem;

pub mod block_cache;
pub(crate) mod block_lock;
pub(crate) mod block_map;
pub mod cached_fs;
#[cfg(feature = "object-store")]
pub mod cloud;
// Test code (the storage contract's cases): never in a release build users get.
#[cfg(feature = "conformance")]
pub mod conformance;
pub(crate) mod file_list;
mod identity;
#[cfg(feature = "object-store")]
pub(crate) mod in_flight;
pub(crate) mod kill_point;
pub mod local;
pub mod partial_claim;
pub mod partial_identity;
pub(crate) mod partial_ledger;
pub mod partial_store;
pub mod ranged;
mod read_at;
pub mod remote;
pub(crate) mod table_files;
pub(crate) mod waiter_threads;

pub use identity::FileStat;
pub use read_at::{MapView, ReadAt};

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
    /// The local tier, if any (`cache_dir`): URLs' bytes through `remote`, and the
    /// offset tables built on open that cannot be kept beside their data.
    cache: Option<Arc<block_cache::BlockCache>>,
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
        let same_cache = self.cache_dir() == other.cache_dir();
        same_cache
            && match (&self.remote, &other.remote) {
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
    /// known; and its path.
    Auto(PreadFile, PathBuf),
}

impl Opened {
    /// What the storage says identifies this version of a URL's object
    /// ([`ReadAt::identity`]), and its size; `None` for a local file.
    pub(crate) fn version(&self) -> Option<(String, u64)> {
        match self {
            Opened::Source(src) => src.identity().map(|tag| (tag, src.size())),
            Opened::Auto(..) => None,
        }
    }

    /// The source, given the file's record count (the table's length), the bytes
    /// of all the files read with it (`None`: this one alone), and whether its reader
    /// walks a page-aware order.
    pub(crate) fn with_records(
        self,
        records: u64,
        files_bytes: Option<u64>,
        page_aware: bool,
    ) -> Box<dyn ReadAt> {
        match self {
            Opened::Source(src) => src,
            Opened::Auto(pread, path) => {
                let files_bytes = files_bytes.unwrap_or(pread.size());
                let file = AutoFile::from_pread_among(pread, records, files_bytes, page_aware);
                say_auto_choice(&path, &file, records, files_bytes, page_aware);
                Box::new(file)
            }
        }
    }
}

/// The default backend's debug line ([`local::DEBUG_ENV`]): what it chose for `path`
/// and why.
fn say_auto_choice(path: &Path, file: &AutoFile, records: u64, files_bytes: u64, page_aware: bool) {
    let on = std::env::var_os(local::DEBUG_ENV).is_some_and(|v| !v.is_empty() && v != "0");
    if !on {
        return;
    }
    let memory = local::memory_limit();
    let (_, why) = local::choose_auto_read(local::AutoInputs {
        file_bytes: file.size(),
        records,
        files_bytes,
        memory: memory.bytes(),
        page_aware,
    });
    let how = match (file.choice(), file.is_mapped(), file.bypasses_page_cache()) {
        (local::AutoRead::Mapped, false, _) => "pread (no lease for a map)",
        (local::AutoRead::Cold, _, false) => "cold (pread, read-ahead off: no O_DIRECT here)",
        (choice, ..) => choice.name(),
    };
    eprintln!(
        "tfrecord-lirs: backend auto for {}: {how}: {why}; memory: {}",
        path.display(),
        memory.describe()
    );
}

impl Storage {
    /// Local files only: a URL is an [`InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// error saying so (the default).
    pub fn local() -> Storage {
        Storage {
            remote: None,
            cache: None,
        }
    }

    /// Local files, and URLs through `fs`.
    pub fn with_file_system(fs: Arc<dyn FileSystem>) -> Storage {
        Storage {
            remote: Some(fs),
            cache: None,
        }
    }

    /// The storage of a front end: local files, and URLs through `preferred` (the
    /// front end's own file systems, such as TensorFlow's, asked in this order), then
    /// through object storage ([`cloud`]) for every scheme none of them implements
    /// (they answer `Unsupported`, see [`remote::Layered`]). With no `preferred`,
    /// URLs go to object storage only (the CLI, and the Python readers). Every value
    /// shares the process's one object-store client ([`cloud::shared`]).
    ///
    /// ```
    /// use std::path::Path;
    /// use tfrecord_lirs::Storage;
    /// let storage = Storage::with_url_file_systems(Vec::new());
    /// assert!(storage.reads_urls());
    /// assert!(!storage.is_local(Path::new("s3://bucket/x.tfrecord")));
    /// // One client: two such storages are the same.
    /// assert_eq!(storage, Storage::with_url_file_systems(Vec::new()));
    /// ```
    #[cfg(feature = "object-store")]
    pub fn with_url_file_systems(preferred: Vec<Arc<dyn FileSystem>>) -> Storage {
        let last: Arc<dyn FileSystem> = cloud::shared();
        let fs = preferred.into_iter().rev().fold(last, |rest, fs| {
            Arc::new(remote::Layered {
                first: fs,
                second: rest,
            })
        });
        Storage::with_file_system(fs)
    }

    /// This storage with its URLs' bytes kept in `cache` (a local tier, see
    /// [`cached_fs`]); `None` leaves it as it is. Local paths are not cached, but an
    /// offset table built on open that cannot be written beside its data file is kept
    /// in the cache's directory (docs/FORMAT.md §2).
    pub fn with_cache(self, cache: Option<Arc<block_cache::BlockCache>>) -> Storage {
        match (self.remote, cache) {
            (Some(fs), Some(cache)) => Storage {
                remote: Some(Arc::new(cached_fs::CachedFileSystem::new(
                    fs,
                    Arc::clone(&cache),
                ))),
                cache: Some(cache),
            },
            (remote, Some(cache)) => Storage {
                remote,
                cache: Some(cache),
            },
            (remote, None) => Storage {
                remote,
                cache: self.cache,
            },
        }
    }

    /// The directory of the local tier (`cache_dir`), if this storage has one.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_ref().and_then(|c| c.root().parent())
    }

    /// Whether URLs can be opened.
    pub fn reads_urls(&self) -> bool {
        self.remote.is_some()
    }

    /// Whether `path` names a local file (or directory) rather than a URL
    /// (`scheme://…`). A URL is one whether or not this storage reads URLs.
    ///
    /// ```
    /// use std::path::Path;
    /// use tfrecord_lirs::Storage;
    /// let storage = Storage::local();
    /// assert!(!storage.is_local(Path::new("gs://bucket/train.tfrecord")));
    /// assert!(!storage.is_local(Path::new("ram://x")));
    /// assert!(storage.is_local(Path::new("/data/train.tfrecord")));
    /// assert!(storage.is_local(Path::new("c:/x")));
    /// ```
    pub fn is_local(&self, path: &Path) -> bool {
        !remote::is_url(path)
    }

    /// The metadata of local file `path`; `None` for a URL (not looked at: a look
    /// costs a request) or a path that cannot be stat'ed.
    pub(crate) fn local_metadata(&self, path: &Path) -> Option<std::fs::Metadata> {
        if !self.is_local(path) {
            return None;
        }
        std::fs::metadata(path).ok()
    }

    /// The bytes of the local files among `paths` (URLs are not looked at).
    pub(crate) fn local_bytes<'a>(&self, paths: impl Iterator<Item = &'a Path>) -> u64 {
        let sizes = paths.filter_map(|p| self.local_metadata(p).map(|m| m.len()));
        sizes.sum()
    }

    /// Checks that `path` can be reached: a local path, or a URL with a file system.
    pub fn check(&self, path: &Path) -> Result<()> {
        self.place(path).map(|_| ())
    }

    /// Where `path` is; the error for a URL without a file system.
    pub(crate) fn place<'a>(&'a self, path: &'a Path) -> Result<Place<'a>> {
        if self.is_local(path) {
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
                Backend::Auto => Opened::Auto(PreadFile::open(path)?, path.to_path_buf()),
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
            .with_records(records, None, false))
    }

    /// `path` for positioned reads without a map: `pread(2)` for a local file, the
    /// file system's reads for a URL.
    pub(crate) fn open_unmapped(&self, path: &Path) -> Result<Box<dyn ReadAt>> {
        let backend = if self.is_local(path) {
            Backend::Pread
        } else {
            Backend::Auto
        };
        self.open(path, backend, 1, None)
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

#[cfg(all(test, feature = "object-store"))]
mod tests {
    use std::io;

    use super::*;
    use crate::storage::remote::{Durability, RemoteWrite};

    /// A file system that serves the schemes `serves`, each object's bytes its name;
    /// `Unsupported` (naming it) for every other scheme.
    struct Named {
        name: &'static str,
        serves: &'static [&'static str],
    }

    impl Named {
        fn check(&self, url: &str) -> io::Result<()> {
            let scheme = remote::scheme(Path::new(url)).unwrap_or_default();
            if self.serves.contains(&scheme) {
                Ok(())
            } else {
                Err(io::Error::new(io::ErrorKind::Unsupported, self.name))
            }
        }
    }

    impl FileSystem for Named {
        fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
            self.check(url)?;
            Err(io::Error::other("not read here"))
        }
        fn read_all(&self, url: &str) -> io::Result<Vec<u8>> {
            self.check(url).map(|()| self.name.as_bytes().to_vec())
        }
        fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
            self.check(url)?;
            Err(io::Error::other("not written here"))
        }
        fn rename(&self, from: &str, _: &str) -> io::Result<()> {
            self.check(from)
        }
        fn delete(&self, url: &str) -> io::Result<()> {
            self.check(url)
        }
        fn durability(&self, _: &str) -> Durability {
            Durability::Rename
        }
    }

    fn read(storage: &Storage, url: &str) -> std::result::Result<Vec<u8>, String> {
        storage.read_all(Path::new(url)).map_err(|e| match e {
            remote::ReadAllError::Io(e) => e.to_string(),
            remote::ReadAllError::Other(e) => e.to_string(),
        })
    }

    #[test]
    fn the_front_ends_file_systems_are_asked_in_order_then_object_storage() {
        let storage = Storage::with_url_file_systems(vec![
            Arc::new(Named {
                name: "first",
                serves: &["a"],
            }),
            Arc::new(Named {
                name: "second",
                serves: &["a", "b"],
            }),
        ]);
        assert_eq!(read(&storage, "a://x").unwrap(), b"first");
        assert_eq!(read(&storage, "b://x").unwrap(), b"second");
        // A scheme no one serves: the first one's words.
        let err = read(&storage, "zz://x").unwrap_err();
        assert!(err.contains("first"), "{err}");
        // Object storage comes last: its own words for its scheme (a URL without a
        // bucket, refused before any request).
        let err = read(&storage, "s3://").unwrap_err();
        assert!(err.contains("no bucket"), "{err}");
        // Local paths never reach a file system.
        assert!(storage.is_local(Path::new("a/x")));
    }
}
