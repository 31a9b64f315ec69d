//! The runtime and per-bucket clients of the current process (started on its first
//! request, and again in a child forked after that), and an object located by its URL
//! with the client that reaches it.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use object_store::path::Path as StorePath;
use object_store::ObjectStore;
use url::Url;

use super::client::build_store;
use super::errors::{store_error, MAX_RETRIES};
use super::RUNTIME_THREADS;

/// What an [`ObjectStoreFileSystem`] and its readers and writers share.
pub(super) struct Client {
    /// The current process's runtime and clients, started by its first request: a
    /// program that makes this file system and never opens a URL starts no thread.
    pub(super) process: Mutex<Option<Arc<ProcessClient>>>,
    pub(super) retry: object_store::RetryConfig,
    /// Responses of the storage refusing for load (429, 503: S3's `SlowDown`), retried
    /// or not: what an adaptive limit of requests in flight backs off on.
    pub(super) throttled: Arc<AtomicU64>,
}

/// The runtime and per-bucket clients of one process.
pub(super) struct ProcessClient {
    pub(super) pid: u32,
    pub(super) runtime: tokio::runtime::Runtime,
    pub(super) stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl Client {
    /// This process's runtime and clients: started on the first request, and again
    /// in a child forked after that.
    pub(super) fn process(&self) -> io::Result<Arc<ProcessClient>> {
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
pub(super) struct Located {
    pub(super) client: Arc<Client>,
    /// `scheme://bucket[:port]`, the key of the bucket's client.
    pub(super) bucket: String,
    pub(super) path: StorePath,
    pub(super) scheme: String,
}

impl Located {
    /// This process's runtime and the object's bucket client in it.
    pub(super) fn here(&self) -> io::Result<(Arc<ProcessClient>, Arc<dyn ObjectStore>)> {
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

    pub(super) fn error(&self, e: object_store::Error) -> io::Error {
        store_error(&self.scheme, e)
    }
}

pub(super) fn port_suffix(url: &Url) -> String {
    url.port().map(|p| format!(":{p}")).unwrap_or_default()
}

/// The client's retry settings: [`MAX_RETRIES`], the client's defaults otherwise.
pub(super) fn retry_config() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: MAX_RETRIES,
        ..Default::default()
    }
}

pub(super) fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
