//! URLs through a file system passed in a `Storage` (`tfrecord_lirs::remote`): the same
//! payloads, orders, tables and errors as the local file with the same bytes. The
//! file system here is an in-memory one of this test (scheme `mem://`), one per test,
//! so each test counts and holds its own reads; TensorFlow's own file systems are
//! tested from Python (tests/test_remote_*.py).
//!
//! No test here waits on a clock to make reads overlap or straggle: one that needs
//! reads in flight at once, or a window's read to finish after others, holds those
//! reads at its file system's [`Gate`] until that state is reached.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use common::{kdd_sizes, payload, write_padded};
use tfrecord_lirs::format::Padding;
use tfrecord_lirs::remote::{Durability, FileSystem, RemoteWrite};
use tfrecord_lirs::ReadAt;
use tfrecord_lirs::{
    build_offset_table_in, Backend, ErrorKind, FetchOptions, Fetcher, Fit, OrderParams, PageSize,
    Reader, ReaderOptions, RecordScanner, Storage,
};

type Objects = Arc<Mutex<HashMap<String, Arc<Vec<u8>>>>>;

/// How long a test waits for a state its reads must reach (reads held, a fetch
/// thread ended) before it fails: a bound on a hang, never what a test measures.
const DEADLINE: Duration = Duration::from_secs(120);

/// Objects in memory under `mem://`; other schemes are unknown. Every read is counted
/// by object and passes the gate.
#[derive(Default)]
struct MemFs {
    objects: Objects,
    reads: Arc<Reads>,
}

/// The reads of one test's file system: how many of each object, and the gate.
#[derive(Default)]
struct Reads {
    by_object: Mutex<BTreeMap<String, usize>>,
    gate: Arc<Gate>,
}

/// Holds reads where a test says until it lets them go (open by default).
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

/// Which reads a closed gate holds.
enum Hold {
    /// Every read, until this many are held at once; then all go and the gate opens.
    UntilInFlight(usize),
    /// Reads covering any of `offsets`, until the gate is opened: by the test, or by
    /// the read that covers the last of `open_when_read` (if not empty).
    Covering {
        offsets: Vec<u64>,
        open_when_read: Vec<u64>,
    },
    /// Each thread's reads covering one of `of` (where records start), from its second
    /// such read on, while fewer than `threads` are held; until the test opens it.
    SecondReadOf { threads: usize, of: Vec<u64> },
}

#[derive(Default)]
struct GateState {
    /// `None`: open.
    hold: Option<Hold>,
    /// Reads held now.
    held: usize,
    /// Threads that had a read held, and the reads they began after the gate opened.
    held_threads: HashSet<ThreadId>,
    reads_by_held_threads_after_open: usize,
    /// Reads counted by `SecondReadOf`, per thread.
    per_thread: HashMap<ThreadId, usize>,
    /// A held read waited `DEADLINE` and went on.
    timed_out: bool,
}

fn covers(range: &Range<u64>, offsets: &[u64]) -> bool {
    offsets.iter().any(|o| range.contains(o))
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the gate with `hold`; its counts start again.
    fn close(&self, hold: Hold) {
        let mut state = self.lock();
        let held = state.held;
        *state = GateState {
            hold: Some(hold),
            held,
            ..GateState::default()
        };
    }

    /// Lets every held read go, and every read after them.
    fn open(&self) {
        self.lock().hold = None;
        self.changed.notify_all();
    }

    /// Opens the gate when dropped (also when a test fails while reads are held, so
    /// that dropping its fetch, which joins the fetch threads, does not hang).
    fn opens_on_drop(&self) -> OpenOnDrop<'_> {
        OpenOnDrop(self)
    }

    /// Waits until `done` holds of the gate's state; fails the test (naming `what`)
    /// after `DEADLINE`.
    fn wait_until(&self, what: &str, done: impl Fn(&GateState) -> bool) {
        let deadline = Instant::now() + DEADLINE;
        let mut state = self.lock();
        while !done(&state) {
            let now = Instant::now();
            if now >= deadline {
                let held = state.held;
                drop(state);
                panic!("{what}: not within {DEADLINE:?} ({held} reads held)");
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn held_reads_timed_out(&self) -> bool {
        self.lock().timed_out
    }

    fn reads_by_held_threads_after_open(&self) -> usize {
        self.lock().reads_by_held_threads_after_open
    }

    /// A read of `range` on this thread: waits while the gate holds it.
    fn pass(&self, range: Range<u64>) {
        let me = std::thread::current().id();
        let mut state = self.lock();
        let s = &mut *state;
        let Some(hold) = &mut s.hold else {
            if s.held_threads.contains(&me) {
                s.reads_by_held_threads_after_open += 1;
            }
            return;
        };
        let (holds, opens) = match hold {
            Hold::UntilInFlight(n) => (true, s.held + 1 >= *n),
            Hold::Covering {
                offsets,
                open_when_read,
            } => {
                let waiting = !open_when_read.is_empty();
                open_when_read.retain(|o| !range.contains(o));
                (
                    covers(&range, offsets),
                    waiting && open_when_read.is_empty(),
                )
            }
            Hold::SecondReadOf { threads, of } => {
                if covers(&range, of) {
                    let seen = s.per_thread.entry(me).or_default();
                    *seen += 1;
                    (*seen >= 2 && s.held < *threads, false)
                } else {
                    (false, false)
                }
            }
        };
        if opens {
            s.hold = None;
            self.changed.notify_all();
            return;
        }
        if !holds {
            return;
        }
        s.held += 1;
        s.held_threads.insert(me);
        self.changed.notify_all();
        let deadline = Instant::now() + DEADLINE;
        while state.hold.is_some() {
            let now = Instant::now();
            if now >= deadline {
                state.timed_out = true;
                state.hold = None;
                self.changed.notify_all();
                break;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state.held = state.held.saturating_sub(1);
    }
}

struct OpenOnDrop<'a>(&'a Gate);

impl Drop for OpenOnDrop<'_> {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// An object and the reads of its file system.
struct MemFile {
    bytes: Arc<Vec<u8>>,
    url: String,
    reads: Arc<Reads>,
}

impl ReadAt for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        *self
            .reads
            .by_object
            .lock()
            .unwrap()
            .entry(self.url.clone())
            .or_default() += 1;
        self.reads.gate.pass(offset..offset + buf.len() as u64);
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.bytes.len());
        let n = buf.len().min(self.bytes.len() - start);
        buf[..n].copy_from_slice(&self.bytes[start..start + n]);
        Ok(n)
    }
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
}

struct MemWrite {
    objects: Objects,
    url: String,
    data: Vec<u8>,
}

impl RemoteWrite for MemWrite {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.data.extend_from_slice(data);
        Ok(())
    }
    fn close(&mut self) -> io::Result<()> {
        let data = std::mem::take(&mut self.data);
        self.objects
            .lock()
            .unwrap()
            .insert(self.url.clone(), Arc::new(data));
        Ok(())
    }
}

impl MemFs {
    fn known(url: &str) -> io::Result<()> {
        if url.starts_with("mem://") {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("File system scheme not implemented (file: '{url}')"),
            ))
        }
    }
}

impl FileSystem for MemFs {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        MemFs::known(url)?;
        let bytes = self.objects.lock().unwrap().get(url).cloned();
        match bytes {
            Some(bytes) => Ok(Box::new(MemFile {
                bytes,
                url: url.to_string(),
                reads: Arc::clone(&self.reads),
            })),
            None => Err(io::Error::new(io::ErrorKind::NotFound, "no such object")),
        }
    }
    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        MemFs::known(url)?;
        Ok(Box::new(MemWrite {
            objects: Arc::clone(&self.objects),
            url: url.to_string(),
            data: Vec::new(),
        }))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        assert!(
            !to.starts_with("mem://whole/"),
            "rename on a store without one"
        );
        let mut objects = self.objects.lock().unwrap();
        let v = objects
            .remove(from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, from.to_string()))?;
        objects.insert(to.to_string(), v);
        Ok(())
    }
    fn delete(&self, url: &str) -> io::Result<()> {
        self.objects.lock().unwrap().remove(url);
        Ok(())
    }
    /// Objects under `mem://whole/` behave as an object store (no rename).
    fn durability(&self, url: &str) -> Durability {
        if url.starts_with("mem://whole/") {
            Durability::WholeObject
        } else {
            Durability::Rename
        }
    }
}

/// One test's file system: its objects, its reads, and the storage that reaches it
/// (local files, and `mem://` URLs through it).
struct Mem {
    objects: Objects,
    reads: Arc<Reads>,
    storage: Storage,
}

impl Mem {
    fn new() -> Mem {
        let fs = MemFs::default();
        Mem {
            objects: Arc::clone(&fs.objects),
            reads: Arc::clone(&fs.reads),
            storage: Storage::with_file_system(Arc::new(fs)),
        }
    }

    fn storage(&self) -> Storage {
        self.storage.clone()
    }

    /// Reader options that reach this file system.
    fn options(&self) -> ReaderOptions {
        ReaderOptions {
            storage: self.storage(),
            ..Default::default()
        }
    }

    fn gate(&self) -> &Gate {
        &self.reads.gate
    }

    /// Reads of `url` so far (held ones included).
    fn reads_of(&self, url: &str) -> usize {
        self.reads
            .by_object
            .lock()
            .unwrap()
            .get(url)
            .copied()
            .unwrap_or(0)
    }

    fn put(&self, url: &str, bytes: Vec<u8>) {
        self.objects
            .lock()
            .unwrap()
            .insert(url.to_string(), Arc::new(bytes));
    }

    fn get(&self, url: &str) -> Option<Vec<u8>> {
        self.objects.lock().unwrap().get(url).map(|b| b.to_vec())
    }

    /// No `.lirs-tmp-*` object is left behind by a write.
    fn assert_no_temporary_objects(&self) {
        let objects = self.objects.lock().unwrap();
        let left: Vec<&String> = objects
            .keys()
            .filter(|k| k.contains(".lirs-tmp-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    /// A padded local file of `n` instances and the same bytes (data and table) at `url`.
    fn local_and_remote(&self, dir: &Path, name: &str, url: &str, n: usize) -> PathBuf {
        let all: Vec<Vec<u8>> = kdd_sizes(n, 5)
            .iter()
            .enumerate()
            .map(|(i, &s)| payload(i, s))
            .collect();
        let (path, _) = write_padded(dir, name, &all, 4096, Fit::Next);
        self.put(url, std::fs::read(&path).unwrap());
        let table = tfrecord_lirs::default_table_path(&path);
        self.put(&format!("{url}.offsets"), std::fs::read(table).unwrap());
        path
    }
}

/// Where the records of `ids` start in `local` (the same bytes as the object).
fn offsets_of(local: &Reader, ids: &[u64]) -> Vec<u64> {
    ids.iter()
        .map(|&id| local.location(id).unwrap().1)
        .collect()
}

fn epoch(reader: &Arc<Reader>, params: &OrderParams, threads: usize) -> Vec<Vec<u8>> {
    let order = reader.epoch_order(params).unwrap();
    let options = FetchOptions {
        threads,
        window: 64,
        depth: 4,
    };
    let mut fetcher = Fetcher::new(Arc::clone(reader), order, options).unwrap();
    let mut out = Vec::new();
    while let Some(w) = fetcher.next_window() {
        let p = w.result.unwrap();
        out.extend((0..p.len()).map(|i| p.get(i).unwrap().unwrap().to_vec()));
    }
    out
}

#[test]
fn a_url_reads_like_the_local_file() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let local = mem.local_and_remote(dir.path(), "a", "mem://b/a.tfrecord", 900);
    let opts = mem.options();
    let l = Arc::new(Reader::open_one(&local, None, &opts).unwrap());
    let r = Arc::new(Reader::open_one(Path::new("mem://b/a.tfrecord"), None, &opts).unwrap());
    assert_eq!(l.len(), r.len());
    for id in [0, 1, 450, 899] {
        assert_eq!(l.read(id).unwrap(), r.read(id).unwrap());
    }
    for page_aware in [false, true] {
        for (num_shards, shard_index) in [(1, 0), (3, 2)] {
            let params = OrderParams {
                seed: 9,
                epoch: 1,
                page_aware,
                num_shards,
                shard_index,
            };
            assert_eq!(epoch(&l, &params, 0), epoch(&r, &params, 3), "{params:?}");
        }
    }
    assert_eq!(
        r.location(5).unwrap().0,
        Path::new("mem://b/a.tfrecord"),
        "the URL is kept as given"
    );
}

#[test]
fn tables_are_built_scanned_and_written_through_the_file_system() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let local = mem.local_and_remote(dir.path(), "t", "mem://b/t.tfrecord", 700);
    let url = Path::new("mem://b/t.tfrecord");
    let out = Path::new("mem://b/built.offsets");
    assert_eq!(
        build_offset_table_in(&mem.storage(), url, out, false, |_| {}).unwrap(),
        700
    );
    let want = std::fs::read(tfrecord_lirs::default_table_path(&local)).unwrap();
    assert_eq!(mem.get("mem://b/built.offsets").unwrap(), want);
    // No temporary object is left behind.
    mem.assert_no_temporary_objects();
    // An explicit remote table, and a local table for a remote file.
    let opts = mem.options();
    let r = Reader::open_one(url, Some(out), &opts).unwrap();
    assert_eq!(r.len(), 700);
    let local_table = tfrecord_lirs::default_table_path(&local);
    assert_eq!(
        Reader::open_one(url, Some(&local_table), &opts)
            .unwrap()
            .len(),
        700
    );
    // The streaming scanner reads URLs too.
    let mut scanner = RecordScanner::open_in(&mem.storage(), url).unwrap();
    let mut instances = 0;
    while let Some(record) = scanner.next_record().unwrap() {
        instances += u64::from(!record.is_filler());
    }
    assert_eq!(instances, 700);
}

#[test]
fn errors_name_the_url() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let local = mem.local_and_remote(dir.path(), "e", "mem://b/e.tfrecord", 300);
    let opts = mem.options();

    let missing = Reader::open_one(Path::new("mem://b/none"), None, &opts)
        .err()
        .unwrap();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    assert!(
        missing.to_string().starts_with("mem://b/none: "),
        "{missing}"
    );

    mem.put("mem://b/notable", std::fs::read(&local).unwrap());
    let refuse = ReaderOptions {
        index_missing: false,
        ..opts.clone()
    };
    let no_table = Reader::open_one(Path::new("mem://b/notable"), None, &refuse)
        .err()
        .unwrap();
    assert_eq!(no_table.kind(), ErrorKind::NotFound);
    assert!(
        no_table.to_string().contains("mem://b/notable.offsets"),
        "{no_table}"
    );
    // By default its table is built on open, in memory (no cache_dir): nothing is
    // written to the store, so the next open without index_missing still finds none.
    let built = Reader::open_one(Path::new("mem://b/notable"), None, &opts).unwrap();
    assert_eq!(built.len(), 300);
    let again = Reader::open_one(Path::new("mem://b/notable"), None, &refuse);
    assert_eq!(again.err().unwrap().kind(), ErrorKind::NotFound);

    let unknown = Reader::open_one(Path::new("zz://b/x"), None, &opts)
        .err()
        .unwrap();
    assert_eq!(unknown.kind(), ErrorKind::InvalidArgument);
    assert!(unknown.to_string().contains("not implemented"), "{unknown}");

    for backend in [Backend::Pread, Backend::Mmap, Backend::Direct] {
        let o = ReaderOptions {
            backend,
            ..opts.clone()
        };
        let e = Reader::open_one(Path::new("mem://b/e.tfrecord"), None, &o)
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("mem://b/e.tfrecord"), "{e}");
    }

    // A damaged payload: DataLoss naming the URL, the instance and the byte.
    let reader = Reader::open_one(&local, None, &opts).unwrap();
    let (_, at) = reader.location(17).unwrap();
    let mut bytes = std::fs::read(&local).unwrap();
    bytes[at as usize + 12 + 3] ^= 0xff;
    mem.put("mem://b/bad", bytes);
    let table = tfrecord_lirs::default_table_path(&local);
    mem.put("mem://b/bad.offsets", std::fs::read(table).unwrap());
    let bad = Reader::open_one(Path::new("mem://b/bad"), None, &opts).unwrap();
    let e = bad.read(17).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::DataLoss);
    let text = e.to_string();
    assert!(
        text.contains("mem://b/bad") && text.contains("instance 17"),
        "{text}"
    );
    assert!(text.contains(&format!("byte {at}")), "{text}");
    let scan = build_offset_table_in(
        &mem.storage(),
        Path::new("mem://b/bad"),
        Path::new("mem://b/x.offsets"),
        false,
        |_| {},
    );
    assert_eq!(scan.unwrap_err().kind(), ErrorKind::DataLoss);
}

#[test]
fn remote_files_keep_many_reads_in_flight() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let url = "mem://b/s.tfrecord";
    mem.local_and_remote(dir.path(), "s", url, 600);
    let opts = mem.options();
    let r = Arc::new(Reader::open_one(Path::new(url), None, &opts).unwrap());
    assert!(r.is_remote());
    assert_eq!(
        FetchOptions::auto_threads(&r),
        tfrecord_lirs::REMOTE_AUTO_THREADS
    );
    let params = OrderParams {
        seed: 3,
        ..Default::default()
    };
    let order = r.epoch_order(&params).unwrap();
    // As the op sets it up: 64-id windows, 4 ahead, 64 threads.
    let options = FetchOptions {
        threads: 64,
        window: 64,
        depth: 4,
    };
    // Instance order: one request per instance (no two are adjacent in general), each
    // a part of its own, and 4 windows of them queued: every thread takes a part, so
    // all 64 wait on a read at once. The gate holds each read until 64 are held; were
    // fewer ever in flight at once, they would wait out the deadline.
    mem.gate().close(Hold::UntilInFlight(64));
    let mut fetcher = Fetcher::new(Arc::clone(&r), order, options).unwrap();
    let _open = mem.gate().opens_on_drop();
    let mut n = 0;
    while let Some(w) = fetcher.next_window() {
        n += w.result.unwrap().len();
    }
    assert_eq!(n, 600);
    assert!(
        !mem.gate().held_reads_timed_out(),
        "64 threads never had 64 reads in flight at once"
    );
    let reads = mem.reads_of(url);
    assert!(reads >= 300, "{reads} reads");
}

#[test]
fn a_batch_reads_neighbours_with_one_request_and_the_rest_at_once() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let url = "mem://b/c.tfrecord";
    let local = mem.local_and_remote(dir.path(), "c", url, 600);
    let opts = mem.options();
    let l = Reader::open_one(&local, None, &opts).unwrap();
    let r = Reader::open_one(Path::new(url), None, &opts).unwrap();
    let check = |ids: &[u64]| -> usize {
        let before = mem.reads_of(url);
        let mut got = tfrecord_lirs::Batch::default();
        r.read_batch_concurrent(ids, &mut got).unwrap();
        let mut want = tfrecord_lirs::Batch::default();
        l.read_batch(ids, &mut want).unwrap();
        assert_eq!(got.len(), ids.len());
        assert!(
            got.payloads().eq(want.payloads()),
            "payloads differ for {ids:?}"
        );
        mem.reads_of(url) - before
    };
    // 64 neighbours, asked for backwards and one twice: a single run, so one ranged
    // read (cut into 32 parts of 2 ids, it would take 32).
    let mut ids: Vec<u64> = (100..164).rev().collect();
    ids.push(120);
    assert_eq!(check(&ids), 1);
    // Two runs far apart and scattered ids: one read per run and per scattered id.
    let mut ids: Vec<u64> = (300..310).chain(500..520).collect();
    ids.extend([7, 60, 250, 599]);
    ids.reverse();
    assert_eq!(check(&ids), 2 + 4);
}

/// Every window an unordered fetcher hands out, with its ids.
fn unordered_windows(fetcher: &mut Fetcher, most: usize) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    while out.len() < most {
        let Some(w) = fetcher.next_window() else {
            break;
        };
        let p = w.result.unwrap();
        assert_eq!(p.len(), w.ids.len());
        out.push(w.ids);
    }
    out
}

#[test]
fn unordered_delivery_hands_out_complete_windows_first_and_resumes_exactly() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let url = "mem://b/k.tfrecord";
    let local = mem.local_and_remote(dir.path(), "k", url, 800);
    let opts = mem.options();
    let r = Arc::new(Reader::open_one(Path::new(url), None, &opts).unwrap());
    let params = OrderParams {
        seed: 5,
        ..Default::default()
    };
    let options = FetchOptions {
        threads: 16,
        window: 50,
        depth: 4,
    };
    // In order: exact windows of 50 positions each.
    let ordered = {
        let order = r.epoch_order(&params).unwrap();
        let mut f = Fetcher::new(Arc::clone(&r), order, options)
            .unwrap()
            .exact_windows();
        unordered_windows(&mut f, usize::MAX)
    };
    assert_eq!(ordered.len(), 16);
    assert!(ordered.iter().all(|w| w.len() == 50));
    // A straggler: the read of one instance of the first window is held until a window
    // has been handed out, so that window cannot be the first (one thread waits on
    // it; the other 15 read the windows after it).
    let first = &ordered[0];
    let l = Reader::open_one(&local, None, &opts).unwrap();
    let straggler = offsets_of(&l, &first[..1]);
    let hold = || Hold::Covering {
        offsets: straggler.clone(),
        open_when_read: Vec::new(),
    };
    mem.gate().close(hold());
    let order = r.epoch_order(&params).unwrap();
    let mut f = Fetcher::new(Arc::clone(&r), order, options)
        .unwrap()
        .exact_windows()
        .unordered();
    let open = mem.gate().opens_on_drop();
    let mut got = unordered_windows(&mut f, 1);
    mem.gate().open();
    got.extend(unordered_windows(&mut f, usize::MAX));
    drop(open);
    // The same windows (the same batches), each whole, and so the same multiset...
    let mut a = got.clone();
    let mut b = ordered.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    // ...but the straggler's window is not the first handed out.
    assert_ne!(&got[0], first, "the held window was handed out first");

    // Resume points: what was delivered plus what a resumed fetcher delivers is the
    // epoch, each position once (the first window taken is never the held one, so
    // the positions delivered have a gap).
    let all: Vec<u64> = ordered.iter().flatten().copied().collect();
    for (windows, unserved) in [(0, 0), (1, 0), (3, 7), (5, 50), (16, 0)] {
        mem.gate().close(hold());
        let order = r.epoch_order(&params).unwrap();
        let mut f = Fetcher::new(Arc::clone(&r), order, options)
            .unwrap()
            .exact_windows()
            .unordered();
        let open = mem.gate().opens_on_drop();
        let mut seen: Vec<u64> = Vec::new();
        let mut taken = unordered_windows(&mut f, windows.min(1));
        mem.gate().open();
        taken.extend(unordered_windows(&mut f, windows - taken.len()));
        assert_eq!(taken.len(), windows);
        assert!(taken.first() != Some(first));
        for (k, w) in taken.iter().enumerate() {
            let keep = if k + 1 == taken.len() {
                w.len() - unserved.min(w.len())
            } else {
                w.len()
            };
            seen.extend(&w[..keep]);
        }
        let resume = f.resume(if taken.is_empty() { 0 } else { unserved });
        drop(open);
        drop(f);
        let mut order = r.epoch_order(&params).unwrap();
        order.seek(resume.position).unwrap();
        let mut g = Fetcher::new(Arc::clone(&r), order, options)
            .unwrap()
            .exact_windows()
            .unordered()
            .skip(resume.after.iter().copied());
        for w in unordered_windows(&mut g, usize::MAX) {
            seen.extend(w);
        }
        seen.sort_unstable();
        let mut want = all.clone();
        want.sort_unstable();
        assert_eq!(
            seen, want,
            "after {windows} windows, {unserved} unserved: {resume:?}"
        );
    }
}

#[test]
fn unordered_delivery_hands_out_the_short_last_window_last() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    // Windows of 20: three whole ones and the order's last, of 10, all in flight at once.
    let url = "mem://b/t.tfrecord";
    let local = mem.local_and_remote(dir.path(), "t", url, 70);
    let opts = mem.options();
    let r = Arc::new(Reader::open_one(Path::new(url), None, &opts).unwrap());
    let params = OrderParams {
        seed: 9,
        ..Default::default()
    };
    let options = FetchOptions {
        threads: 16,
        window: 20,
        depth: 4,
    };
    let order = r.epoch_order(&params).unwrap();
    let mut ordered = Fetcher::new(Arc::clone(&r), order, options)
        .unwrap()
        .exact_windows();
    let windows = unordered_windows(&mut ordered, usize::MAX);
    let sizes: Vec<usize> = windows.iter().map(Vec::len).collect();
    assert_eq!(sizes, [20, 20, 20, 10]);
    // Every whole window waits on a held read until the short one's reads have all
    // been made: the short one is the first complete. Handed out last all the same
    // (that is the rule, whatever completes first).
    let l = Reader::open_one(&local, None, &opts).unwrap();
    let whole: Vec<u64> = windows[..3].iter().map(|w| w[0]).collect();
    mem.gate().close(Hold::Covering {
        offsets: offsets_of(&l, &whole),
        open_when_read: offsets_of(&l, &windows[3]),
    });
    let order = r.epoch_order(&params).unwrap();
    let mut f = Fetcher::new(Arc::clone(&r), order, options)
        .unwrap()
        .exact_windows()
        .unordered();
    let _open = mem.gate().opens_on_drop();
    let got = unordered_windows(&mut f, usize::MAX);
    assert!(!mem.gate().held_reads_timed_out());
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[3], windows[3],
        "the short window was not handed out last"
    );
}

/// A fetch dropped with windows queued passes over them unread: the threads that were
/// reading when it was dropped begin no read after it.
#[test]
fn dropping_a_fetcher_does_not_read_what_is_queued() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let url = "mem://b/q.tfrecord";
    mem.local_and_remote(dir.path(), "q", url, 600);
    // 4 threads, 4 windows of 4 parts in flight (3 queued behind the one being read):
    // reading them would be up to 3 x 64 reads more.
    let after = reads_after_a_drop_mid_part(&mem, url, 4, 4, true);
    assert_eq!(after, 0, "reads begun after the fetcher was dropped");
}

/// A fetch dropped while its threads are in the middle of a window gives up the parts
/// they are reading before their next request: the drop waits for the requests in
/// flight (one per thread), not for the rest of each part (in instance order, one
/// request per instance: up to 32 with two threads).
#[test]
fn dropping_a_fetcher_stops_each_thread_within_one_read() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    for threads in [2, 4] {
        let url = format!("mem://b/mid{threads}.tfrecord");
        mem.local_and_remote(dir.path(), &format!("mid{threads}"), &url, 600);
        let after = reads_after_a_drop_mid_part(&mem, &url, threads, 1, true);
        assert_eq!(after, 0, "{threads} threads: reads begun after the drop");
    }
}

/// The same while the threads read their parts id by id after a failed batch read
/// (every record damaged: each batch read fails at its first request).
#[test]
fn dropping_a_fetcher_stops_a_one_by_one_part_within_one_read() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    for threads in [2, 4] {
        let url = format!("mem://b/bad{threads}.tfrecord");
        let local = mem.local_and_remote(dir.path(), &format!("bad{threads}"), &url, 600);
        let table = tfrecord_lirs::read_table(&tfrecord_lirs::default_table_path(&local)).unwrap();
        let mut bytes = mem.get(&url).unwrap();
        for &start in &table {
            bytes[start as usize + 12] ^= 1; // the first payload byte: its CRC fails
        }
        mem.put(&url, bytes);
        let after = reads_after_a_drop_mid_part(&mem, &url, threads, 1, false);
        assert_eq!(after, 0, "{threads} threads: reads begun after the drop");
    }
}

/// Fetches `url` (600 instances, windows of 64, `depth` ahead) with `threads` (at least
/// 2) threads, drops the fetch while all of them but one are in the middle of a part
/// of its second window, and returns how many reads those threads begin after the drop.
///
/// Why none, and why that is not timing: each of them waits in a read (its second of
/// the part, held at the gate) when the drop begins, and is let go only after a thread
/// not held (one reading, or one with no part left) has ended. A fetch thread ends
/// only once the drop has set the fetch's stop flag (and closed its queue), so the
/// held threads see the flag when their read returns; a fetch thread checks it before
/// each request and before each queued part. The "one request per thread" a drop may
/// still wait for is the one each had in flight, here the held one.
fn reads_after_a_drop_mid_part(
    mem: &Mem,
    url: &str,
    threads: usize,
    depth: usize,
    intact: bool,
) -> usize {
    let opts = mem.options();
    let r = Arc::new(Reader::open_one(Path::new(url), None, &opts).unwrap());
    let params = OrderParams::default();
    // The first window, as the fetch cuts it: its reads are let through, those of the
    // records after it counted.
    let mut first_ids = Vec::new();
    r.epoch_order(&params)
        .unwrap()
        .next_window(64, &mut first_ids);
    let later: Vec<u64> = (0..r.len()).filter(|id| !first_ids.contains(id)).collect();
    let order = r.epoch_order(&params).unwrap();
    let held = threads - 1;
    mem.gate().close(Hold::SecondReadOf {
        threads: held,
        of: offsets_of(&r, &later),
    });
    let options = FetchOptions {
        threads,
        window: 64,
        depth,
    };
    let mut fetcher = Fetcher::new(Arc::clone(&r), order, options).unwrap();
    let open = mem.gate().opens_on_drop();
    let first = fetcher.next_window().unwrap();
    assert_eq!(first.ids, first_ids);
    let payloads = first.result.unwrap();
    assert_eq!(payloads.len(), 64);
    assert_eq!(payloads.failures().len(), if intact { 0 } else { 64 });
    drop(payloads);
    mem.gate().wait_until(
        &format!("{held} fetch threads held in the middle of their parts"),
        |s| s.held == held,
    );
    // Each fetch thread holds a reference to the reader until it ends (nothing else
    // of the fetch does), and ends only once the drop has set the stop flag.
    let running = Arc::strong_count(&r);
    let dropping = std::thread::spawn(move || drop(fetcher));
    let deadline = Instant::now() + DEADLINE;
    while Arc::strong_count(&r) >= running {
        assert!(
            Instant::now() < deadline,
            "the fetch thread not held did not end within {DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // What the thread did before it ended (the drop's stop flag set) is seen from here on.
    std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    mem.gate().open();
    dropping.join().unwrap();
    drop(open);
    mem.gate().reads_by_held_threads_after_open()
}

#[test]
fn padded_writer_and_pad_write_urls_like_local_files() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = kdd_sizes(700, 9)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    let options = tfrecord_lirs::PadOptions {
        page_size: 4096,
        fit: Fit::Best { lookahead: 16 },
        storage: mem.storage(),
        ..Default::default()
    };
    let write = |path: &Path| {
        let mut w = tfrecord_lirs::PaddedWriter::create(path, &options).unwrap();
        for p in &payloads {
            w.write(p).unwrap();
        }
        w.finish().unwrap()
    };
    let local = dir.path().join("w.tfrecord");
    let want = write(&local);
    let want_data = std::fs::read(&local).unwrap();
    let want_table = std::fs::read(tfrecord_lirs::default_table_path(&local)).unwrap();
    for url in ["mem://b/w.tfrecord", "mem://whole/w.tfrecord"] {
        // A stale table is replaced, never left beside new data.
        mem.put(&format!("{url}.offsets"), vec![1, 2, 3]);
        let got = write(Path::new(url));
        assert_eq!(got.instance_of_input, want.instance_of_input);
        assert_eq!(mem.get(url).unwrap(), want_data, "{url}");
        assert_eq!(
            mem.get(&format!("{url}.offsets")).unwrap(),
            want_table,
            "{url}"
        );
    }
    mem.assert_no_temporary_objects();

    // pad: a URL source (plain or GZIP) to a URL destination, as locally.
    let plain = common::write_plain(dir.path(), "src", &payloads);
    let bytes = std::fs::read(&plain).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &bytes).unwrap();
    mem.put("mem://b/src.tfrecord", bytes);
    mem.put("mem://b/src.tfrecord.gz", gz.finish().unwrap());
    let local_out = dir.path().join("padded");
    tfrecord_lirs::pad_file(&plain, &local_out, &options).unwrap();
    let want_data = std::fs::read(&local_out).unwrap();
    for src in ["mem://b/src.tfrecord", "mem://b/src.tfrecord.gz"] {
        let dst = Path::new("mem://whole/padded");
        tfrecord_lirs::pad_file(Path::new(src), dst, &options).unwrap();
        assert_eq!(mem.get("mem://whole/padded").unwrap(), want_data, "{src}");
    }
    let e = tfrecord_lirs::pad_file(Path::new("mem://b/none"), Path::new("mem://b/o"), &options)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("mem://b/none"), "{e}");
}

#[test]
fn tables_inspections_and_instance_records_of_urls_equal_the_local_files() {
    let mem = Mem::new();
    let dir = tempfile::tempdir().unwrap();
    let local = mem.local_and_remote(dir.path(), "i", "mem://b/i.tfrecord", 500);
    let url = Path::new("mem://b/i.tfrecord");
    let local_table = tfrecord_lirs::default_table_path(&local);
    let url_table = Path::new("mem://b/i.tfrecord.offsets");
    let table = tfrecord_lirs::read_table_for_in(&mem.storage(), url, url_table).unwrap();
    assert_eq!(table, tfrecord_lirs::read_table(&local_table).unwrap());
    assert_eq!(table.len(), 500);
    let page = Some(PageSize::new(4096).unwrap());
    let want = tfrecord_lirs::inspect_with(
        &local,
        Some((&local_table, &table)),
        page,
        Padding::Fillers,
        |_| {},
    )
    .unwrap();
    let mut reported = 0;
    let got = tfrecord_lirs::inspect_in(
        &mem.storage(),
        url,
        Some((url_table, &table)),
        page,
        Padding::Fillers,
        |done| reported = done,
    )
    .unwrap();
    assert_eq!(
        (got.instances, got.fillers, got.file_size, got.filler_bytes),
        (
            want.instances,
            want.fillers,
            want.file_size,
            want.filler_bytes
        )
    );
    assert_eq!(got.check_padded(url).unwrap(), Some(4096));
    assert!(reported > 0 && reported <= got.file_size, "{reported}");
    assert_eq!(
        tfrecord_lirs::instance_records_in(&mem.storage(), url).unwrap(),
        tfrecord_lirs::instance_records(&local).unwrap()
    );

    // Missing objects and tables: NotFound naming the URL (and how to make a table).
    let e = tfrecord_lirs::read_table_for_in(&mem.storage(), url, Path::new("mem://b/no.offsets"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("mem://b/no.offsets"), "{e}");
    let none = Path::new("mem://b/none.tfrecord");
    let e = tfrecord_lirs::instance_records_in(&mem.storage(), none).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("mem://b/none.tfrecord"), "{e}");
    // A damaged record: DataLoss naming the URL and the byte, as for the local file.
    let mut bytes = std::fs::read(&local).unwrap();
    let (_, at) = Reader::open_one(&local, None, &mem.options())
        .unwrap()
        .location(40)
        .unwrap();
    bytes[at as usize + 12 + 2] ^= 0xff;
    mem.put("mem://b/damaged.tfrecord", bytes);
    let damaged = Path::new("mem://b/damaged.tfrecord");
    let e = tfrecord_lirs::inspect_in(
        &mem.storage(),
        damaged,
        Some((url_table, &table)),
        None,
        Padding::Fillers,
        |_| {},
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DataLoss);
    assert!(
        e.to_string().contains("mem://b/damaged.tfrecord") && e.to_string().contains("byte"),
        "{e}"
    );
    // Without a file system for URLs, a URL is refused as such.
    let e = tfrecord_lirs::instance_records_in(&Storage::local(), url).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

/// A file system of one object, `two://b/x`, for the layering test.
struct SecondFs;

impl FileSystem for SecondFs {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        match url {
            "two://b/x" => Ok(Box::new(MemFile {
                bytes: Arc::new(b"second".to_vec()),
                url: url.to_string(),
                reads: Arc::default(),
            })),
            _ if url.starts_with("two://") => {
                Err(io::Error::new(io::ErrorKind::NotFound, "no such object"))
            }
            _ => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the second does not know it",
            )),
        }
    }
    fn create(&self, _url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        Err(io::Error::new(io::ErrorKind::PermissionDenied, "read-only"))
    }
    fn rename(&self, _from: &str, _to: &str) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "no rename"))
    }
    fn delete(&self, _url: &str) -> io::Result<()> {
        Ok(())
    }
    fn durability(&self, _url: &str) -> Durability {
        Durability::WholeObject
    }
}

#[test]
fn layered_file_systems_ask_the_second_only_for_schemes_the_first_does_not_know() {
    // The layering the Python writers and the op library use: TensorFlow's file
    // systems first, object storage for the schemes TensorFlow does not implement.
    let first = MemFs::default();
    first
        .objects
        .lock()
        .unwrap()
        .insert("mem://layer/a".to_string(), Arc::new(b"first".to_vec()));
    let layered = tfrecord_lirs::remote::Layered {
        first,
        second: Arc::new(SecondFs),
    };
    let read = |url: &str| -> io::Result<Vec<u8>> { layered.read_all(url) };
    assert_eq!(read("mem://layer/a").unwrap(), b"first");
    assert_eq!(read("two://b/x").unwrap(), b"second");
    // A missing object of a scheme the first knows is its answer, not the second's.
    assert_eq!(
        read("mem://layer/none").unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    assert_eq!(
        read("two://b/none").unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    // Neither knows it: the first one's words.
    let e = read("zz://b/x").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    assert!(e.to_string().contains("not implemented"), "{e}");
    // Writes and durability: the first's where it knows the scheme.
    assert_eq!(layered.durability("mem://layer/a"), Durability::Rename);
    assert!(layered.create("mem://layer/new").is_ok());
    assert_eq!(
        layered.create("two://b/y").err().unwrap().to_string(),
        "read-only"
    );
    // Through a Storage, an unknown scheme is an invalid argument naming the URL.
    let storage = Storage::with_file_system(Arc::new(layered));
    let e = tfrecord_lirs::read_table_for_in(
        &storage,
        Path::new("zz://b/x"),
        Path::new("zz://b/x.offsets"),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("zz://b/x.offsets"), "{e}");
}

/// A table too large to be held in memory at open is read in blocks on demand through
/// the file system: opening reads a few entries (not the table), a whole epoch reads
/// each block a bounded number of times, and an entry out of order is an error of the
/// read that uses it, naming the URL of the table, the instance and the byte.
#[test]
fn a_large_remote_table_is_read_in_blocks_on_demand() {
    let mem = Mem::new();
    use tfrecord_lirs::local::{TABLE_BLOCK_ENTRIES, TABLE_IN_MEMORY_MAX_BYTES};
    let n = (TABLE_IN_MEMORY_MAX_BYTES / 8 * 3) as usize;
    let mut data = Vec::new();
    let mut table = Vec::with_capacity(n);
    let payloads: Vec<Vec<u8>> = (0..n).map(|i| payload(i, 1 + i % 5)).collect();
    for p in &payloads {
        table.push(data.len() as u64);
        tfrecord_lirs::format::encode_record(p, &mut data);
    }
    let url = "mem://b/big.tfrecord";
    let table_url = format!("{url}.offsets");
    mem.put(url, data);
    mem.put(&table_url, tfrecord_lirs::encode_table(&table));
    let opts = mem.options();
    let reader = Reader::open_one(Path::new(url), None, &opts).unwrap();
    // Open: the first and last entries (two blocks), not the whole table.
    let blocks = n.div_ceil(TABLE_BLOCK_ENTRIES as usize);
    assert!(
        mem.reads_of(&table_url) <= 2,
        "{} reads",
        mem.reads_of(&table_url)
    );
    assert_eq!(reader.len(), n as u64);
    let ids: Vec<u64> = (0..n as u64).step_by(97).collect();
    let mut batch = tfrecord_lirs::Batch::default();
    reader.read_batch(&ids, &mut batch).unwrap();
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(batch.payload(k), &payloads[id as usize][..]);
    }
    // In id order, each block is read once more at most.
    assert!(
        mem.reads_of(&table_url) <= 2 + blocks,
        "{} reads of {blocks} blocks",
        mem.reads_of(&table_url)
    );

    let mut swapped = table.clone();
    let k = n / 2;
    swapped.swap(k, k + 1);
    mem.put(&table_url, tfrecord_lirs::encode_table(&swapped));
    let reader = Reader::open_one(Path::new(url), None, &opts).unwrap();
    assert_eq!(reader.read(3).unwrap(), payloads[3]);
    // Entries out of order: a damaged table.
    let err = reader.read(k as u64).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&table_url)
            && text.contains("strictly increase")
            && text.contains(&format!("instance {}", k + 1))
            && text.contains(&format!("byte {}", table[k])),
        "{text}"
    );
}
