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

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use object_store::path::Path as StorePath;
use object_store::{ObjectStore, PutPayload};
use url::Url;

use crate::storage::cloud_client::build_store;
use crate::storage::cloud_errors::{store_error, MAX_RETRIES};
use crate::storage::ranged::{merge_ranges, RangedRead, RangesDone, ReadScope};
use crate::storage::remote::{Durability, FileSystem, RemoteWrite};
use crate::storage::ReadAt;

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

/// What an [`ObjectStoreFileSystem`] and its readers and writers share.
struct Client {
    /// The current process's runtime and clients, started by its first request: a
    /// program that makes this file system and never opens a URL starts no thread.
    process: Mutex<Option<Arc<ProcessClient>>>,
    retry: object_store::RetryConfig,
    /// Responses of the storage refusing for load (429, 503: S3's `SlowDown`), retried
    /// or not: what an adaptive limit of requests in flight backs off on.
    throttled: Arc<AtomicU64>,
}

/// The runtime and per-bucket clients of one process.
struct ProcessClient {
    pid: u32,
    runtime: tokio::runtime::Runtime,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
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

impl Client {
    /// This process's runtime and clients: started on the first request, and again
    /// in a child forked after that.
    fn process(&self) -> io::Result<Arc<ProcessClient>> {
        let pid = std::process::id();
        let mut current = self.process.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(process) = current.as_ref().filter(|p| p.pid == pid) {
            return Ok(Arc::clone(process));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("lirs-object-store")
            .enable_all()
            .build()
            .map_err(|e| io::Error::other(format!("cannot start the object-store runtime: {e}")))?;
        let process = Arc::new(ProcessClient {
            pid,
            runtime,
            stores: Mutex::new(HashMap::new()),
        });
        if let Some(parents) = current.replace(Arc::clone(&process)) {
            // The parent's runtime and clients: their threads are not in this process,
            // and dropping them would wait for those threads.
            std::mem::forget(parents);
        }
        Ok(process)
    }
}

/// An object: the file system's client, and where the object is.
#[derive(Clone)]
struct Located {
    client: Arc<Client>,
    /// `scheme://bucket[:port]`, the key of the bucket's client.
    bucket: String,
    path: StorePath,
    scheme: String,
}

impl Located {
    /// This process's runtime and the object's bucket client in it.
    fn here(&self) -> io::Result<(Arc<ProcessClient>, Arc<dyn ObjectStore>)> {
        let process = self.client.process()?;
        let mut stores = process.stores.lock().unwrap_or_else(|p| p.into_inner());
        let store = match stores.get(&self.bucket) {
            Some(store) => Arc::clone(store),
            None => {
                let store = build_store(
                    &self.scheme,
                    &self.bucket,
                    &self.client.retry,
                    &self.client.throttled,
                )
                .map_err(|e| self.error(e))?;
                stores.insert(self.bucket.clone(), Arc::clone(&store));
                store
            }
        };
        drop(stores);
        Ok((process, store))
    }

    fn error(&self, e: object_store::Error) -> io::Error {
        store_error(&self.scheme, e)
    }
}

fn port_suffix(url: &Url) -> String {
    url.port().map(|p| format!(":{p}")).unwrap_or_default()
}

/// The client's retry settings: [`MAX_RETRIES`], the client's defaults otherwise.
fn retry_config() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: MAX_RETRIES,
        ..Default::default()
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

impl FileSystem for ObjectStoreFileSystem {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        let object = self.locate(url)?;
        let (process, store) = object.here()?;
        let meta = process
            .runtime
            .block_on(store.head(&object.path))
            .map_err(|e| object.error(e))?;
        Ok(Box::new(ObjectReader {
            object,
            size: meta.size,
            identity: identity(&meta),
        }))
    }

    fn read_all(&self, url: &str) -> io::Result<Vec<u8>> {
        let object = self.locate(url)?;
        let (process, store) = object.here()?;
        let bytes = process.runtime.block_on(async {
            let got = store.get(&object.path).await?;
            got.bytes().await
        });
        Ok(bytes.map_err(|e| object.error(e))?.to_vec())
    }

    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        Ok(Box::new(ObjectWriter {
            object: self.locate(url)?,
            data: Vec::new(),
            closed: false,
        }))
    }

    fn rename(&self, from: &str, _to: &str) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{from}: object storage has no rename"),
        ))
    }

    fn delete(&self, url: &str) -> io::Result<()> {
        let object = self.locate(url)?;
        let (process, store) = object.here()?;
        match process.runtime.block_on(store.delete(&object.path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(object.error(e)),
        }
    }

    fn durability(&self, _url: &str) -> Durability {
        Durability::WholeObject
    }

    /// Lists the objects under the pattern's literal directory and keeps those whose
    /// URL it matches (`*` and `?` never match `/`, as `tf.io.gfile.glob`).
    fn glob(&self, pattern: &str) -> io::Result<Vec<String>> {
        use futures::TryStreamExt;
        let matcher = glob::Pattern::new(pattern)
            .map_err(|e| invalid(format!("{pattern}: not a pattern ({e})")))?;
        let dir = tfrecord_lirs_format::file_list::literal_dir(pattern);
        let object = self.locate(dir)?;
        let (process, store) = object.here()?;
        let (prefix, scheme) = (object.path.clone(), &object.scheme);
        let parsed = Url::parse(dir).map_err(|e| invalid(format!("{dir}: not a URL ({e})")))?;
        let base = format!(
            "{}://{}{}",
            scheme,
            parsed.host_str().unwrap_or_default(),
            port_suffix(&parsed)
        );
        let prefix = (!prefix.as_ref().is_empty()).then_some(prefix);
        let metas: Vec<object_store::ObjectMeta> = process
            .runtime
            .block_on(store.list(prefix.as_ref()).try_collect())
            .map_err(|e| object.error(e))?;
        let options = glob::MatchOptions {
            require_literal_separator: true,
            ..glob::MatchOptions::new()
        };
        Ok(metas
            .into_iter()
            .map(|m| format!("{base}/{}", m.location))
            .filter(|url| matcher.matches_with(url, options))
            .collect())
    }
}

/// What identifies this version of an object: its ETag, version (generation) and
/// last-modified time as the store reports them; `None` when it reports none of them
/// (a last-modified of 0 is a client's stand-in for none).
fn identity(meta: &object_store::ObjectMeta) -> Option<String> {
    let modified = meta.last_modified.timestamp_nanos_opt().unwrap_or_default();
    if meta.e_tag.is_none() && meta.version.is_none() && modified == 0 {
        return None;
    }
    Some(format!(
        "etag={:?} version={:?} modified={modified}",
        meta.e_tag, meta.version
    ))
}

/// One object, read by ranged GETs (through the runtime and client of the process
/// that reads, which may be a child forked after the open).
struct ObjectReader {
    object: Located,
    size: u64,
    identity: Option<String>,
}

impl ReadAt for ObjectReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let end = self.size.min(offset.saturating_add(buf.len() as u64));
        let range: Range<u64> = offset..end;
        let (process, store) = self.object.here()?;
        let bytes = process
            .runtime
            .block_on(store.get_range(&self.object.path, range))
            .map_err(|e| self.object.error(e))?;
        // A store that answers with more than was asked is not trusted with the rest.
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        Ok(n)
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn ranged(&self) -> Option<&dyn RangedRead> {
        Some(self)
    }

    fn identity(&self) -> Option<String> {
        self.identity.clone()
    }
}

impl RangedRead for ObjectReader {
    fn read_ranges(&self, ranges: &[Range<u64>], scope: &ReadScope, done: RangesDone) {
        if let Some(r) = ranges.iter().find(|r| r.end > self.size || r.start > r.end) {
            return done(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "bytes {}..{} of an object of {} bytes",
                    r.start, r.end, self.size
                ),
            )));
        }
        let (process, store) = match self.object.here() {
            Ok(here) => here,
            Err(e) => return done(Err(e)),
        };
        let (gets, at) = merge_ranges(ranges, MERGE_GAP, MAX_MERGED_GET);
        let lens: Vec<usize> = ranges.iter().map(|r| (r.end - r.start) as usize).collect();
        let path = self.object.path.clone();
        let scheme = self.object.scheme.clone();
        let gate = Arc::clone(&scope.gate);
        let throttled = Arc::clone(&self.object.client.throttled);
        gate.starting(throttled.load(Ordering::Relaxed));
        let (in_flight, unanswered) = scope.counters();
        // Counted from now until answered (or dropped with the task).
        let asked: Vec<Counted> = gets.iter().map(|_| Counted::new(&unanswered)).collect();
        let task = process.runtime.spawn(async move {
            let requests =
                gets.into_iter().zip(asked).map(|(range, asked)| {
                    let (store, path, gate, in_flight) = (&store, &path, &gate, &in_flight);
                    let throttled = &throttled;
                    async move {
                        let _asked = asked;
                        // Closed only if the scope is gone, and with it whoever waits.
                        let permit = gate.permits.acquire().await.map_err(|e| {
                            object_store::Error::Generic {
                                store: "tfrecord-lirs",
                                source: Box::new(e),
                            }
                        })?;
                        let counted = Counted::new(in_flight);
                        let got = store.get_range(path, range).await;
                        drop(counted);
                        gate.answered(permit, throttled.load(Ordering::Relaxed));
                        got
                    }
                });
            match futures::future::try_join_all(requests).await {
                Ok(bytes) => {
                    let slices: Option<Vec<&[u8]>> = at
                        .iter()
                        .zip(&lens)
                        .map(|(&(get, from), &len)| bytes.get(get)?.get(from..from + len))
                        .collect();
                    match slices {
                        Some(slices) => done(Ok(&slices)),
                        None => done(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the storage answered a ranged GET with fewer bytes than asked",
                        ))),
                    }
                }
                Err(e) => done(Err(store_error(&scheme, e))),
            }
        });
        scope.track(task.abort_handle());
    }
}

/// One request, counted while it lives (a cancelled one too).
struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Counted {
    fn new(counter: &Arc<std::sync::atomic::AtomicUsize>) -> Counted {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Counted(Arc::clone(counter))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// An object being written: kept in memory and uploaded whole on close (object
/// stores make an object visible when its upload completes).
struct ObjectWriter {
    object: Located,
    data: Vec<u8>,
    closed: bool,
}

impl RemoteWrite for ObjectWriter {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.data.extend_from_slice(data);
        Ok(())
    }

    fn close(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let (process, store) = self.object.here()?;
        let payload = PutPayload::from(std::mem::take(&mut self.data));
        process
            .runtime
            .block_on(store.put(&self.object.path, payload))
            .map_err(|e| self.object.error(e))?;
        self.closed = true;
        Ok(())
    }
}
