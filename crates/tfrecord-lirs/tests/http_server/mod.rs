//! An HTTP object server on 127.0.0.1 for the object-storage tests (hyper on one
//! thread): objects in memory, `HEAD` and ranged `GET` as object_store's `http://`
//! client speaks them. Each test starts its own, so what it counts (GETs by object and
//! range, requests cancelled) is that test's alone. No test waits on a clock: a test
//! that needs requests in flight closes the [`Server::hold`] gate, which holds every
//! GET until the test opens it, and waits until as many as it needs are held.
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use tfrecord_lirs::cloud::ObjectStoreFileSystem;
use tfrecord_lirs::{Fit, Reader, ReaderOptions, Storage};

/// How long a test waits for a state the server must reach: a bound on a hang, never
/// what a test measures.
pub const DEADLINE: Duration = Duration::from_secs(120);

#[derive(Default)]
struct State {
    objects: HashMap<String, Arc<Vec<u8>>>,
    /// Every GET answered or held: (object, range).
    gets: Vec<(String, Range<u64>)>,
    /// GETs held now, and whether the gate holds them.
    held: usize,
    closed: bool,
    /// While closed: GETs covering one of these bytes still pass.
    passing: Vec<u64>,
    /// GETs whose handler was dropped before answering (the client went away).
    cancelled: usize,
    /// GETs still to answer 503 (a server error the client retries); `None`: all.
    failing: Option<usize>,
    fail_all: bool,
    /// Whether answers carry an ETag (a local tier caches only tagged objects).
    etags: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    opened: tokio::sync::watch::Sender<bool>,
}

/// The server; dropping it stops it.
pub struct Server {
    pub port: u16,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start() -> Server {
        let (opened, _) = tokio::sync::watch::channel(true);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            opened,
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let serving = Arc::clone(&shared);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                port_tx.send(listener.local_addr().unwrap().port()).unwrap();
                let mut stopped = stopped;
                loop {
                    let socket = tokio::select! {
                        s = listener.accept() => match s { Ok((s, _)) => s, Err(_) => continue },
                        _ = &mut stopped => break,
                    };
                    let shared = Arc::clone(&serving);
                    let service = hyper::service::service_fn(move |req| {
                        let shared = Arc::clone(&shared);
                        async move { Ok::<_, Infallible>(answer(&shared, req).await) }
                    });
                    tokio::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                            .await;
                    });
                }
            });
        });
        Server {
            port: port_rx.recv().unwrap(),
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT/name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn put(&self, name: &str, bytes: Vec<u8>) {
        self.lock()
            .objects
            .insert(name.to_string(), Arc::new(bytes));
    }

    /// Writes `payloads` padded (4 KiB pages) into `dir/name` and serves the file and
    /// its offset table as `name`; returns the local path.
    pub fn put_padded(&self, dir: &Path, name: &str, payloads: &[Vec<u8>]) -> PathBuf {
        let (path, _) = super::common::write_padded(dir, name, payloads, 4096, Fit::Next);
        self.put(name, std::fs::read(&path).unwrap());
        let table = tfrecord_lirs::default_table_path(&path);
        self.put(&format!("{name}.offsets"), std::fs::read(table).unwrap());
        path
    }

    /// A reader of `name` on this server through `fs` (object_store's `http://` client).
    pub fn open_reader(&self, name: &str, fs: ObjectStoreFileSystem) -> Arc<Reader> {
        let options = ReaderOptions {
            storage: Storage::with_file_system(Arc::new(fs)),
            ..Default::default()
        };
        let url = self.url(name);
        Arc::new(Reader::open_one(Path::new(&url), None, &options).unwrap())
    }

    /// The GETs so far: (object, range).
    pub fn gets(&self) -> Vec<(String, Range<u64>)> {
        self.lock().gets.clone()
    }

    pub fn clear_gets(&self) {
        self.lock().gets.clear();
    }

    /// Holds every GET from now until [`open`](Self::open).
    pub fn hold(&self) {
        self.hold_except(Vec::new());
    }

    /// Holds every GET from now until [`open`](Self::open), but those covering one of
    /// the bytes `passing`.
    pub fn hold_except(&self, passing: Vec<u64>) {
        let mut s = self.lock();
        s.closed = true;
        s.passing = passing;
        self.shared.opened.send_replace(false);
    }

    /// Lets every held GET go.
    pub fn open(&self) {
        self.lock().closed = false;
        self.shared.opened.send_replace(true);
    }

    /// From now on every answer carries the object's ETag.
    pub fn send_etags(&self) {
        self.lock().etags = true;
    }

    /// GETs held now.
    pub fn held(&self) -> usize {
        self.lock().held
    }

    /// GETs given up by their client before the server answered.
    pub fn cancelled(&self) -> usize {
        self.lock().cancelled
    }

    /// Answers the next `n` GETs 503 (`None`: every GET from now on).
    pub fn fail(&self, n: Option<usize>) {
        let mut s = self.lock();
        s.failing = n;
        s.fail_all = n.is_none();
    }

    /// Waits until `done` holds of (held, cancelled); panics naming `what` after
    /// [`DEADLINE`].
    pub fn wait_until(&self, what: &str, done: impl Fn(usize, usize) -> bool) {
        let until = Instant::now() + DEADLINE;
        let mut s = self.lock();
        while !done(s.held, s.cancelled) {
            let now = Instant::now();
            assert!(
                now < until,
                "waited {DEADLINE:?} for {what}: {} held, {} cancelled",
                s.held,
                s.cancelled
            );
            s = self
                .shared
                .changed
                .wait_timeout(s, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.open();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Counts a held GET as cancelled if its handler is dropped before it answers.
struct Pending<'a> {
    shared: &'a Shared,
    held: bool,
    answered: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.held {
            s.held -= 1;
        }
        if !self.answered {
            s.cancelled += 1;
        }
        drop(s);
        self.shared.changed.notify_all();
    }
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = code;
    r
}

async fn answer(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let name = req.uri().path().trim_start_matches('/').to_string();
    let (object, etags) = {
        let s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.objects.get(&name).cloned(), s.etags)
    };
    let Some(object) = object else {
        return status(StatusCode::NOT_FOUND);
    };
    let size = object.len() as u64;
    let etag = etags.then(|| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        object.hash(&mut h);
        format!("\"{:016x}\"", h.finish()).parse().unwrap()
    });
    if req.method() == hyper::Method::HEAD {
        let mut r = Response::new(Full::new(Bytes::new()));
        r.headers_mut().insert("content-length", size.into());
        if let Some(etag) = etag {
            r.headers_mut().insert("etag", etag);
        }
        return r;
    }
    let range = req
        .headers()
        .get("range")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.split_once('-'))
        .and_then(|(a, b)| Some(a.parse::<u64>().ok()?..b.parse::<u64>().ok()? + 1))
        .unwrap_or(0..size);
    let mut pending = Pending {
        shared,
        held: false,
        answered: false,
    };
    let fail = {
        let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        s.gets.push((name, range.clone()));
        let fail = s.fail_all || s.failing.is_some_and(|n| n > 0);
        if let Some(n) = s.failing.as_mut() {
            *n = n.saturating_sub(1);
        }
        if s.closed && !s.passing.iter().any(|o| range.contains(o)) {
            s.held += 1;
            pending.held = true;
        }
        fail
    };
    shared.changed.notify_all();
    if pending.held {
        let mut opened = shared.opened.subscribe();
        let _ = opened.wait_for(|&open| open).await;
        let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        s.held -= 1;
        pending.held = false;
    }
    pending.answered = true;
    if fail {
        return status(StatusCode::SERVICE_UNAVAILABLE);
    }
    if range.start >= size || range.end > size {
        return status(StatusCode::RANGE_NOT_SATISFIABLE);
    }
    let body = Bytes::copy_from_slice(&object[range.start as usize..range.end as usize]);
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = StatusCode::PARTIAL_CONTENT;
    r.headers_mut().insert(
        "content-range",
        format!("bytes {}-{}/{size}", range.start, range.end - 1)
            .parse()
            .unwrap(),
    );
    if let Some(etag) = etag {
        r.headers_mut().insert("etag", etag);
    }
    r
}
