//! Object storage without TensorFlow: `s3://`, `gs://`, `az://` (and `abfs://`,
//! `adl://`, `azure://`), `http://` and `https://` URLs read and written through Apache
//! Arrow's [`object_store`] client, as a [`crate::remote::FileSystem`].
//!
//! Credentials and endpoints come from the environment the way each store's own tools
//! read them (`AWS_*` for S3, `GOOGLE_*` for GCS, `AZURE_*` for Azure: the builders'
//! `from_env`), so `AWS_ENDPOINT=http://127.0.0.1:9000 AWS_ALLOW_HTTP=true` points S3 at
//! a local server. Each read is one ranged GET; the client retries failed requests with
//! backoff. A positioned read ([`ReadAt::read_at`]) blocks its caller on this file
//! system's own runtime; the reads of a fetch window are requests started on that
//! runtime instead ([`RangedRead`]: hundreds in flight on its two threads, neighbouring
//! ranges of one object merged into one GET across at most [`MERGE_GAP`] bytes), so
//! nothing async leaks into the rest of the crate.
//!
//! A program reaches it through the rule every front end shares,
//! [`Storage::with_url_file_systems`](crate::Storage::with_url_file_systems) (which
//! puts the process's one client, [`shared`], after the program's own file systems):
//!
//! ```no_run
//! use tfrecord_lirs::{Reader, ReaderOptions, Storage};
//! # fn main() -> tfrecord_lirs::Result<()> {
//! let options = ReaderOptions {
//!     storage: Storage::with_url_file_systems(Vec::new()),
//!     ..Default::default()
//! };
//! let reader = Reader::open_one("s3://bucket/train.tfrecord".as_ref(), None, &options)?;
//! # Ok(()) }
//! ```

//!
//! Its parts, one job each: `client` (the per-bucket clients and the connector counting
//! throttled responses), `process` (the runtime and clients of the current process, and
//! an object located by its URL), `errors` (object-store errors as I/O kinds, naming
//! the credentials' variables), `file_system` (the [`FileSystem`] operations), `reader`
//! (positioned and ranged reads), `writer` (uploads).

use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use object_store::path::Path as StorePath;
use url::Url;

use process::{invalid, port_suffix, retry_config, Client, Located};

#[cfg(doc)]
use crate::storage::ranged::RangedRead;
#[cfg(doc)]
use crate::storage::remote::FileSystem;
#[cfg(doc)]
use crate::storage::ReadAt;

mod client;
mod errors;
mod file_system;
mod process;
mod reader;
mod writer;

/// Worker threads of the client's runtime: they drive the sockets and check the
/// records of ranged reads as they arrive (the callers' positioned reads wait on them);
/// two keep thousands of requests in flight.
const RUNTIME_THREADS: usize = 2;

/// Ranges of one object at most this many bytes apart are read by one GET (the bytes
/// between them fetched and dropped). Measured over whole epochs of row 15's data
/// (`merge_gap_table` in benchmarks/objstore_bench.py: 24,000 records of 200-1,200
/// bytes, windows of 256 ids), GETs per record / bytes fetched per byte delivered at
/// gaps 0, 1, 4, 16, 64 KiB: page-aware 0.197/1.00, 0.197/1.00, 0.195/1.01, 0.189/1.10,
/// 0.167/2.27; instance order 0.99/1.00, 0.98/1.01, 0.94/1.13, 0.80/2.88, 0.42/20.7.
/// Up to 4 KiB the bytes barely grow; past it they grow much faster than the GETs
/// fall. (A page-aware window's units are rarely neighbours: 256 ids of 24,000.)
pub const MERGE_GAP: u64 = 4096;

/// The most bytes one merged GET asks for (longer ranges are a GET of their own).
const MAX_MERGED_GET: u64 = 4 << 20;

/// The schemes this file system serves.
pub const SCHEMES: &[&str] = &[
    "s3", "s3a", "gs", "az", "abfs", "abfss", "adl", "azure", "http", "https",
];

/// Object storage reached through [`object_store`]: one client per bucket (or HTTP
/// origin), built on first use from the URL and the environment's credentials.
///
/// Fork-safe: the runtime and the clients belong to the process that started them. A
/// child `fork`ed after that (DataLoader or Grain workers) has none of their threads, so
/// it starts its own runtime and clients on its first request; the parent's stay
/// untouched (leaked in the child: dropping them would wait for threads that do not
/// exist there). A reader opened before the fork reads through the child's.
pub struct ObjectStoreFileSystem {
    client: Arc<Client>,
}

/// The process's object-store client, which every
/// [`Storage::with_url_file_systems`](crate::Storage::with_url_file_systems) shares:
/// process-wide because it holds what is costly to make and worth keeping (a runtime
/// and threads, one client and connection pool per bucket), and one value so that the
/// storages of a front end compare equal.
pub fn shared() -> Arc<ObjectStoreFileSystem> {
    static CLIENT: OnceLock<Arc<ObjectStoreFileSystem>> = OnceLock::new();
    Arc::clone(CLIENT.get_or_init(|| Arc::new(ObjectStoreFileSystem::new())))
}

impl Default for ObjectStoreFileSystem {
    fn default() -> Self {
        ObjectStoreFileSystem::new()
    }
}

impl std::fmt::Debug for ObjectStoreFileSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStoreFileSystem")
            .finish_non_exhaustive()
    }
}

impl ObjectStoreFileSystem {
    /// A file system with its own small runtime for the client's I/O (started when
    /// the first URL is opened).
    pub fn new() -> ObjectStoreFileSystem {
        ObjectStoreFileSystem {
            client: Arc::new(Client {
                process: Mutex::new(None),
                retry: retry_config(),
                throttled: Arc::new(AtomicU64::new(0)),
            }),
        }
    }

    /// This file system, retrying a failed request up to `max_retries` times with
    /// backoff from `first_backoff` (doubling), within `timeout` in all (the default:
    /// 10 from 100 ms, within 3 minutes).
    pub fn with_retries(
        self,
        max_retries: usize,
        first_backoff: std::time::Duration,
        timeout: std::time::Duration,
    ) -> ObjectStoreFileSystem {
        let retry = object_store::RetryConfig {
            max_retries,
            retry_timeout: timeout,
            backoff: object_store::BackoffConfig {
                init_backoff: first_backoff,
                ..Default::default()
            },
        };
        ObjectStoreFileSystem {
            client: Arc::new(Client {
                process: Mutex::new(None),
                retry,
                throttled: Arc::new(AtomicU64::new(0)),
            }),
        }
    }

    /// Whether `scheme` is one this file system serves.
    pub fn serves(scheme: &str) -> bool {
        SCHEMES.contains(&scheme.to_ascii_lowercase().as_str())
    }

    /// Where `url`'s object is: its bucket's client, its path and the URL's scheme.
    fn locate(&self, url: &str) -> io::Result<Located> {
        let parsed = Url::parse(url).map_err(|e| invalid(format!("{url}: not a URL ({e})")))?;
        let scheme = parsed.scheme().to_ascii_lowercase();
        if !Self::serves(&scheme) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("scheme {scheme}:// is not object storage"),
            ));
        }
        let bucket = parsed
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| invalid(format!("{url}: no bucket (or host) in the URL")))?;
        let bucket = format!("{scheme}://{bucket}{}", port_suffix(&parsed));
        let path = StorePath::from_url_path(parsed.path())
            .map_err(|e| invalid(format!("{url}: bad object path ({e})")))?;
        let located = Located {
            client: Arc::clone(&self.client),
            bucket,
            path,
            scheme,
        };
        // The bucket's client is built now, so that a bad URL or configuration is an
        // error of the open.
        located.here()?;
        Ok(located)
    }
}
