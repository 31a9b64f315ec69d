//! `s3s-fs` behind a delay per object GET, served by hyper on 127.0.0.1.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::SimpleAuth;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::latency::KeyedLatency;

/// Requests served so far (`GET /_bench/stats`).
#[derive(Default)]
struct Counts {
    gets: AtomicU64,
    heads: AtomicU64,
    bytes: AtomicU64,
}

/// `s3s-fs`, each object GET delayed as `latency` says, and answered from memory once
/// the object has been read (as a store's cache would): `s3s-fs` opens and reads the
/// file and two JSON files for every GET, 170 us of CPU per 4 KiB GET measured here,
/// which would make the server the limit.
struct Delayed {
    inner: s3s_fs::FileSystem,
    root: PathBuf,
    latency: KeyedLatency,
    counts: Arc<Counts>,
    cache: Mutex<HashMap<(String, String), Arc<Cached>>>,
}

/// An object as read once, with what a GET answers about it.
struct Cached {
    bytes: bytes::Bytes,
    e_tag: Option<ETag>,
    last_modified: Option<Timestamp>,
}

impl Delayed {
    fn cached(&self, bucket: &str, key: &str) -> Option<Arc<Cached>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(&(bucket.to_string(), key.to_string())).cloned()
    }

    fn forget(&self, bucket: &str, key: &str) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.remove(&(bucket.to_string(), key.to_string()));
    }

    /// A GET answered from `object`.
    fn answer(object: &Cached, range: Option<Range>) -> S3Result<S3Response<GetObjectOutput>> {
        let size = object.bytes.len() as u64;
        let (body, content_range) = match range {
            None => (object.bytes.clone(), None),
            Some(range) => {
                let r = range.check(size)?;
                (
                    object.bytes.slice(r.start as usize..r.end as usize),
                    Some(format!("bytes {}-{}/{size}", r.start, r.end - 1)),
                )
            }
        };
        let output = GetObjectOutput {
            content_length: Some(body.len() as i64),
            body: Some(StreamingBlob::from(s3s::Body::from(body))),
            content_range,
            e_tag: object.e_tag.clone(),
            last_modified: object.last_modified.clone(),
            ..Default::default()
        };
        Ok(S3Response::new(output))
    }
}

#[async_trait::async_trait]
impl S3 for Delayed {
    // The other operations the benchmarks use, passed to `s3s-fs` as they are.
    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.inner.create_bucket(req).await
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.inner.head_bucket(req).await
    }

    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        self.inner.list_buckets(req).await
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        self.inner.delete_bucket(req).await
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        self.forget(&req.input.bucket, &req.input.key);
        self.inner.put_object(req).await
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        self.forget(&req.input.bucket, &req.input.key);
        self.inner.delete_object(req).await
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        self.inner.delete_objects(req).await
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        self.inner.list_objects(req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.inner.list_objects_v2(req).await
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.counts.heads.fetch_add(1, Ordering::Relaxed);
        self.inner.head_object(req).await
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let object = format!("{}/{}", req.input.bucket, req.input.key);
        let range = req
            .headers
            .get(http::header::RANGE)
            .and_then(|v| v.to_str().ok());
        let delay = self.latency.delay(&object, range);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let got = match self.cached(&bucket, &key) {
            Some(cached) => Self::answer(&cached, req.input.range)?,
            None => {
                let got = self.inner.get_object(req).await?;
                if let Ok(bytes) = tokio::fs::read(self.root.join(&bucket).join(&key)).await {
                    let cached = Cached {
                        bytes: bytes.into(),
                        e_tag: got.output.e_tag.clone(),
                        last_modified: got.output.last_modified.clone(),
                    };
                    let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                    cache.insert((bucket, key), Arc::new(cached));
                }
                got
            }
        };
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        let len = got.output.content_length.unwrap_or(0);
        self.counts
            .bytes
            .fetch_add(u64::try_from(len).unwrap_or(0), Ordering::Relaxed);
        Ok(got)
    }
}

/// Serves until SIGINT or SIGTERM; prints `listening http://127.0.0.1:PORT` first.
/// Every request is allowed, anonymous ones too (s3s denies those once an auth provider
/// is set).
struct Open;

#[async_trait::async_trait]
impl S3Access for Open {
    async fn check(&self, _cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        Ok(())
    }
}

/// The one key signed requests are checked against (`AWS_ACCESS_KEY_ID`).
pub const ACCESS_KEY: &str = "bench";
/// Its secret (`AWS_SECRET_ACCESS_KEY`).
pub const SECRET_KEY: &str = "bench-secret";

pub async fn serve(
    root: PathBuf,
    port: u16,
    latency: KeyedLatency,
) -> Result<(), Box<dyn std::error::Error>> {
    let counts = Arc::new(Counts::default());
    let s3 = Delayed {
        inner: s3s_fs::FileSystem::new(&root).map_err(|e| format!("{e:?}"))?,
        root: root.clone(),
        cache: Mutex::new(HashMap::new()),
        latency,
        counts: Arc::clone(&counts),
    };
    // Unsigned requests are served as they are (the benchmarks' object_store clients
    // skip signing: client CPU no contender is measured on); signed ones are checked
    // against one fixed key, for clients that always sign (boto3: MosaicML Streaming).
    let mut builder = S3ServiceBuilder::new(s3);
    builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
    builder.set_access(Open);
    let service = builder.build();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening http://{}", listener.local_addr()?);
    use std::io::Write;
    std::io::stdout().flush()?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let http = ConnBuilder::new(TokioExecutor::new());
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(_) => continue,
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        };
        let _ = socket.set_nodelay(true);
        let service = service.clone();
        let counts = Arc::clone(&counts);
        let with_stats =
            hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let service = service.clone();
                let counts = Arc::clone(&counts);
                async move {
                    if req.uri().path() == "/_bench/stats" {
                        let body = format!(
                            "{{\"gets\": {}, \"heads\": {}, \"bytes\": {}}}",
                            counts.gets.load(Ordering::Relaxed),
                            counts.heads.load(Ordering::Relaxed),
                            counts.bytes.load(Ordering::Relaxed),
                        );
                        return Ok(http::Response::new(s3s::Body::from(body)));
                    }
                    service.call(req.map(s3s::Body::from)).await
                }
            });
        let conn = http
            .serve_connection(TokioIo::new(socket), with_stats)
            .into_owned();
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
    Ok(())
}
