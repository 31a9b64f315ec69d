//! URLs through a file system passed in a `Storage` (`tfrecord_lirs::remote`): the same
//! payloads, orders, tables and errors as the local file with the same bytes. The
//! file system here is an in-memory one of this test (scheme `mem://`); TensorFlow's
//! own file systems are tested from Python (tests/test_remote_*.py).

mod common;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{kdd_sizes, payload, write_padded};
use tfrecord_lirs::format::Padding;
use tfrecord_lirs::io::ReadAt;
use tfrecord_lirs::remote::{Durability, FileSystem, RemoteWrite};
use tfrecord_lirs::{
    build_offset_table_in, Backend, ErrorKind, FetchOptions, Fetcher, Fit, OrderParams, PageSize,
    Reader, ReaderOptions, RecordScanner, Storage,
};

type Objects = Arc<Mutex<HashMap<String, Arc<Vec<u8>>>>>;

/// Objects in memory under `mem://`; other schemes are unknown. Reads of objects
/// under `mem://slow/` take `SLOW_READ` each (a high-latency store), and the most
/// reads seen in flight at once is counted.
#[derive(Default)]
struct MemFs {
    objects: Objects,
}

const SLOW_READ: std::time::Duration = std::time::Duration::from_millis(20);
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static MOST_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Slow reads by object.
static READS: Mutex<std::collections::BTreeMap<String, usize>> =
    Mutex::new(std::collections::BTreeMap::new());

fn reads_of(url: &str) -> usize {
    READS.lock().unwrap().get(url).copied().unwrap_or(0)
}
static STRAGGLERS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// Held by each test that sets `STRAGGLERS`, so they do not slow each other's reads.
static SKEW: Mutex<()> = Mutex::new(());

/// An object; `.1`: reads take `SLOW_READ`; `.2`: reads at the offsets in
/// `STRAGGLERS` take `SKEWED_READ`, others 1 ms.
struct MemFile(Arc<Vec<u8>>, bool, bool, String);

const SKEWED_READ: std::time::Duration = std::time::Duration::from_millis(300);

impl ReadAt for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if self.2 {
            let straggler = STRAGGLERS.lock().unwrap().contains(&offset);
            std::thread::sleep(if straggler {
                SKEWED_READ
            } else {
                std::time::Duration::from_millis(1)
            });
        }
        if self.1 {
            let now = IN_FLIGHT.fetch_add(1, Ordering::SeqCst) + 1;
            MOST_IN_FLIGHT.fetch_max(now, Ordering::SeqCst);
            *READS.lock().unwrap().entry(self.3.clone()).or_default() += 1;
            std::thread::sleep(SLOW_READ);
            IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        }
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let n = buf.len().min(self.0.len() - start);
        buf[..n].copy_from_slice(&self.0[start..start + n]);
        Ok(n)
    }
    fn size(&self) -> u64 {
        self.0.len() as u64
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
            Some(b) => {
                let skewed = url.starts_with("mem://skewed/");
                Ok(Box::new(MemFile(
                    b,
                    url.starts_with("mem://slow/"),
                    skewed,
                    url.to_string(),
                )))
            }
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

/// The one file system of this test binary, and the storage that reaches it.
fn mem_storage() -> &'static (Objects, Storage) {
    static FS: std::sync::OnceLock<(Objects, Storage)> = std::sync::OnceLock::new();
    FS.get_or_init(|| {
        let fs = MemFs::default();
        let objects = Arc::clone(&fs.objects);
        (objects, Storage::with_file_system(Arc::new(fs)))
    })
}

/// The objects of the test's file system.
fn mem() -> Objects {
    mem_storage().0.clone()
}

/// Local files, and `mem://` URLs through the test's file system.
fn storage() -> Storage {
    mem_storage().1.clone()
}

/// Reader options that reach the test's file system.
fn url_options() -> ReaderOptions {
    ReaderOptions {
        storage: storage(),
        ..Default::default()
    }
}

/// No `.lirs-tmp-*` object is left behind by a write.
fn assert_no_temporary_objects() {
    let objects = mem();
    let objects = objects.lock().unwrap();
    let left: Vec<&String> = objects
        .keys()
        .filter(|k| k.contains(".lirs-tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

fn put(url: &str, bytes: Vec<u8>) {
    mem()
        .lock()
        .unwrap()
        .insert(url.to_string(), Arc::new(bytes));
}

fn get(url: &str) -> Option<Vec<u8>> {
    mem().lock().unwrap().get(url).map(|b| b.to_vec())
}

/// A padded local file of `n` instances and the same bytes (data and table) at `url`.
fn local_and_remote(dir: &Path, name: &str, url: &str, n: usize) -> PathBuf {
    let all: Vec<Vec<u8>> = kdd_sizes(n, 5)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    let (path, _) = write_padded(dir, name, &all, 4096, Fit::Next);
    put(url, std::fs::read(&path).unwrap());
    let table = tfrecord_lirs::default_table_path(&path);
    put(&format!("{url}.offsets"), std::fs::read(table).unwrap());
    path
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
    let dir = tempfile::tempdir().unwrap();
    let local = local_and_remote(dir.path(), "a", "mem://b/a.tfrecord", 900);
    let opts = url_options();
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
    let dir = tempfile::tempdir().unwrap();
    let local = local_and_remote(dir.path(), "t", "mem://b/t.tfrecord", 700);
    let url = Path::new("mem://b/t.tfrecord");
    let out = Path::new("mem://b/built.offsets");
    assert_eq!(
        build_offset_table_in(&storage(), url, out, false, |_| {}).unwrap(),
        700
    );
    let want = std::fs::read(tfrecord_lirs::default_table_path(&local)).unwrap();
    assert_eq!(get("mem://b/built.offsets").unwrap(), want);
    // No temporary object is left behind.
    assert_no_temporary_objects();
    // An explicit remote table, and a local table for a remote file.
    let opts = url_options();
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
    let mut scanner = RecordScanner::open_in(&storage(), url).unwrap();
    let mut instances = 0;
    while let Some(record) = scanner.next_record().unwrap() {
        instances += u64::from(!record.is_filler());
    }
    assert_eq!(instances, 700);
}

#[test]
fn errors_name_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let local = local_and_remote(dir.path(), "e", "mem://b/e.tfrecord", 300);
    let opts = url_options();

    let missing = Reader::open_one(Path::new("mem://b/none"), None, &opts)
        .err()
        .unwrap();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    assert!(
        missing.to_string().starts_with("mem://b/none: "),
        "{missing}"
    );

    put("mem://b/notable", std::fs::read(&local).unwrap());
    let no_table = Reader::open_one(Path::new("mem://b/notable"), None, &opts)
        .err()
        .unwrap();
    assert_eq!(no_table.kind(), ErrorKind::NotFound);
    assert!(
        no_table.to_string().contains("mem://b/notable.offsets"),
        "{no_table}"
    );

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
    put("mem://b/bad", bytes);
    let table = tfrecord_lirs::default_table_path(&local);
    put("mem://b/bad.offsets", std::fs::read(table).unwrap());
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
        &storage(),
        Path::new("mem://b/bad"),
        Path::new("mem://b/x.offsets"),
        false,
        |_| {},
    );
    assert_eq!(scan.unwrap_err().kind(), ErrorKind::DataLoss);
}

#[test]
fn remote_files_keep_many_reads_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    local_and_remote(dir.path(), "s", "mem://slow/s.tfrecord", 600);
    let opts = url_options();
    let r = Arc::new(Reader::open_one(Path::new("mem://slow/s.tfrecord"), None, &opts).unwrap());
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
    let mut fetcher = Fetcher::new(Arc::clone(&r), order, options).unwrap();
    let mut n = 0;
    while let Some(w) = fetcher.next_window() {
        n += w.result.unwrap().len();
    }
    assert_eq!(n, 600);
    // Instance order: one request per instance (no two are adjacent in general),
    // each a part of its own, so the threads all wait on reads at once.
    let reads = reads_of("mem://slow/s.tfrecord");
    assert!(reads >= 300, "{reads} reads");
    let most = MOST_IN_FLIGHT.load(Ordering::SeqCst);
    assert!(most >= 48, "at most {most} reads were in flight at once");
}

#[test]
fn a_batch_reads_neighbours_with_one_request_and_the_rest_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = "mem://slow/c.tfrecord";
    let local = local_and_remote(dir.path(), "c", url, 600);
    let opts = url_options();
    let l = Reader::open_one(&local, None, &opts).unwrap();
    let r = Reader::open_one(Path::new(url), None, &opts).unwrap();
    let check = |ids: &[u64]| -> usize {
        let before = reads_of(url);
        let mut got = tfrecord_lirs::Batch::default();
        r.read_batch_concurrent(ids, &mut got).unwrap();
        let mut want = tfrecord_lirs::Batch::default();
        l.read_batch(ids, &mut want).unwrap();
        assert_eq!(got.len(), ids.len());
        assert!(
            got.payloads().eq(want.payloads()),
            "payloads differ for {ids:?}"
        );
        reads_of(url) - before
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
    let _skew = SKEW.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let local = local_and_remote(dir.path(), "k", "mem://skewed/k.tfrecord", 800);
    let opts = url_options();
    let r = Arc::new(Reader::open_one(Path::new("mem://skewed/k.tfrecord"), None, &opts).unwrap());
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
    // A straggler: every instance of the first window is slow to read.
    let first = &ordered[0];
    let l = Reader::open_one(&local, None, &opts).unwrap();
    let stragglers: Vec<u64> = first.iter().map(|&id| l.location(id).unwrap().1).collect();
    *STRAGGLERS.lock().unwrap() = stragglers.clone();
    let order = r.epoch_order(&params).unwrap();
    let mut f = Fetcher::new(Arc::clone(&r), order, options)
        .unwrap()
        .exact_windows()
        .unordered();
    let got = unordered_windows(&mut f, usize::MAX);
    // The same windows (the same batches), each whole, and so the same multiset...
    let mut a = got.clone();
    let mut b = ordered.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    // ...but the straggler's window is not the first handed out.
    assert_ne!(&got[0], first, "the slow window held up the others");
    STRAGGLERS.lock().unwrap().clear();

    // Resume points: what was delivered plus what a resumed fetcher delivers is the
    // epoch, each position once.
    let all: Vec<u64> = ordered.iter().flatten().copied().collect();
    for (windows, unserved) in [(0, 0), (1, 0), (3, 7), (5, 50), (16, 0)] {
        *STRAGGLERS.lock().unwrap() = stragglers.clone();
        let order = r.epoch_order(&params).unwrap();
        let mut f = Fetcher::new(Arc::clone(&r), order, options)
            .unwrap()
            .exact_windows()
            .unordered();
        let mut seen: Vec<u64> = Vec::new();
        let taken = unordered_windows(&mut f, windows);
        for (k, w) in taken.iter().enumerate() {
            let keep = if k + 1 == taken.len() {
                w.len() - unserved.min(w.len())
            } else {
                w.len()
            };
            seen.extend(&w[..keep]);
        }
        let resume = f.resume(if taken.is_empty() { 0 } else { unserved });
        drop(f);
        STRAGGLERS.lock().unwrap().clear();
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
    let _skew = SKEW.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Windows of 20: three whole ones and the order's last, of 10, all in flight at once.
    let local = local_and_remote(dir.path(), "t", "mem://skewed/t.tfrecord", 70);
    let opts = url_options();
    let r = Arc::new(Reader::open_one(Path::new("mem://skewed/t.tfrecord"), None, &opts).unwrap());
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
    // Every whole window is slow to read: the short one completes first.
    let l = Reader::open_one(&local, None, &opts).unwrap();
    *STRAGGLERS.lock().unwrap() = windows[..3]
        .iter()
        .flatten()
        .map(|&id| l.location(id).unwrap().1)
        .collect();
    let order = r.epoch_order(&params).unwrap();
    let mut f = Fetcher::new(Arc::clone(&r), order, options)
        .unwrap()
        .exact_windows()
        .unordered();
    let got = unordered_windows(&mut f, usize::MAX);
    STRAGGLERS.lock().unwrap().clear();
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[3], windows[3],
        "the short window was not handed out last"
    );
}

#[test]
fn dropping_a_fetcher_does_not_read_what_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    local_and_remote(dir.path(), "q", "mem://slow/q.tfrecord", 600);
    let opts = url_options();
    let r = Arc::new(Reader::open_one(Path::new("mem://slow/q.tfrecord"), None, &opts).unwrap());
    let order = r.epoch_order(&OrderParams::default()).unwrap();
    let options = FetchOptions {
        threads: 4,
        window: 64,
        depth: 4,
    };
    let mut fetcher = Fetcher::new(Arc::clone(&r), order, options).unwrap();
    assert_eq!(fetcher.next_window().unwrap().result.unwrap().len(), 64);
    // Counted from the moment of the drop, not from the first window: how far the
    // workers got into the next window before it depends on how long this thread
    // was descheduled (a loaded CI machine once saw 6 reads more than one window).
    let at_drop = reads_of("mem://slow/q.tfrecord");
    drop(fetcher); // joins the workers
    let after_drop = reads_of("mem://slow/q.tfrecord") - at_drop;
    // Only the parts in progress finish (4 threads, parts of 16 reads, one more part
    // begun while the drop was starting at worst); reading the queued windows would
    // be up to 4 x 64 reads more.
    assert!(
        after_drop <= 4 * 16 + 16,
        "{after_drop} reads after the fetcher was dropped"
    );
}

/// A fetch dropped while its threads are in the middle of a window gives up the parts
/// they are reading before their next request: the drop waits for the requests in
/// flight (one per thread), not for the rest of each part (in instance order, one
/// request per instance: up to 64 with one thread).
#[test]
fn dropping_a_fetcher_stops_each_thread_within_one_read() {
    let dir = tempfile::tempdir().unwrap();
    for threads in [1, 4] {
        let url = format!("mem://slow/mid{threads}.tfrecord");
        local_and_remote(dir.path(), &format!("mid{threads}"), &url, 600);
        assert_reads_after_drop_at_most_one_per_thread(&url, threads, true);
    }
}

/// The same while the threads read their parts id by id after a failed batch read
/// (every record damaged: each batch read fails at its first request).
#[test]
fn dropping_a_fetcher_stops_a_one_by_one_part_within_one_read() {
    let dir = tempfile::tempdir().unwrap();
    for threads in [1, 4] {
        let url = format!("mem://slow/bad{threads}.tfrecord");
        let local = local_and_remote(dir.path(), &format!("bad{threads}"), &url, 600);
        let table = tfrecord_lirs::read_table(&tfrecord_lirs::default_table_path(&local)).unwrap();
        let mut bytes = get(&url).unwrap();
        for &start in &table {
            bytes[start as usize + 12] ^= 1; // the first payload byte: its CRC fails
        }
        put(&url, bytes);
        assert_reads_after_drop_at_most_one_per_thread(&url, threads, false);
    }
}

/// Drops a fetch of `url` (600 instances) with `threads` threads a few requests into
/// its second window, and checks how many requests follow the drop.
fn assert_reads_after_drop_at_most_one_per_thread(url: &str, threads: usize, intact: bool) {
    let opts = url_options();
    let r = Arc::new(Reader::open_one(Path::new(url), None, &opts).unwrap());
    let order = r.epoch_order(&OrderParams::default()).unwrap();
    // One window ahead: once the first is handed out, the threads read the second.
    let options = FetchOptions {
        threads,
        window: 64,
        depth: 1,
    };
    let mut fetcher = Fetcher::new(Arc::clone(&r), order, options).unwrap();
    let first = fetcher.next_window().unwrap().result.unwrap();
    assert_eq!(first.len(), 64);
    assert_eq!(first.failures().len(), if intact { 0 } else { 64 });
    drop(first);
    // Into the second window by a few requests (a bound on the wait, not on time:
    // the threads are reading it by now).
    let started = reads_of(url);
    let mut waited = 0;
    while reads_of(url) < started + 2 {
        assert!(
            waited < 30_000,
            "the fetch threads never read the next window"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
        waited += 1;
    }
    let at_drop = reads_of(url);
    drop(fetcher);
    let after_drop = reads_of(url) - at_drop;
    // One request per thread may begin between the count and the drop's stop (two
    // more if this thread is descheduled in between); reading on to the end of the
    // parts would be about 60.
    assert!(
        after_drop <= threads + 2,
        "{url}, {threads} threads: {after_drop} reads after the fetcher was dropped"
    );
}

#[test]
fn padded_writer_and_pad_write_urls_like_local_files() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = kdd_sizes(700, 9)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    let options = tfrecord_lirs::PadOptions {
        page_size: 4096,
        fit: Fit::Best { lookahead: 16 },
        storage: storage(),
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
        put(&format!("{url}.offsets"), vec![1, 2, 3]);
        let got = write(Path::new(url));
        assert_eq!(got.instance_of_input, want.instance_of_input);
        assert_eq!(get(url).unwrap(), want_data, "{url}");
        assert_eq!(get(&format!("{url}.offsets")).unwrap(), want_table, "{url}");
    }
    assert_no_temporary_objects();

    // pad: a URL source (plain or GZIP) to a URL destination, as locally.
    let plain = common::write_plain(dir.path(), "src", &payloads);
    let bytes = std::fs::read(&plain).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &bytes).unwrap();
    put("mem://b/src.tfrecord", bytes);
    put("mem://b/src.tfrecord.gz", gz.finish().unwrap());
    let local_out = dir.path().join("padded");
    tfrecord_lirs::pad_file(&plain, &local_out, &options).unwrap();
    let want_data = std::fs::read(&local_out).unwrap();
    for src in ["mem://b/src.tfrecord", "mem://b/src.tfrecord.gz"] {
        let dst = Path::new("mem://whole/padded");
        tfrecord_lirs::pad_file(Path::new(src), dst, &options).unwrap();
        assert_eq!(get("mem://whole/padded").unwrap(), want_data, "{src}");
    }
    let e = tfrecord_lirs::pad_file(Path::new("mem://b/none"), Path::new("mem://b/o"), &options)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("mem://b/none"), "{e}");
}

#[test]
fn tables_inspections_and_instance_records_of_urls_equal_the_local_files() {
    let dir = tempfile::tempdir().unwrap();
    let local = local_and_remote(dir.path(), "i", "mem://b/i.tfrecord", 500);
    let url = Path::new("mem://b/i.tfrecord");
    let local_table = tfrecord_lirs::default_table_path(&local);
    let url_table = Path::new("mem://b/i.tfrecord.offsets");
    let table = tfrecord_lirs::read_table_for_in(&storage(), url, url_table).unwrap();
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
        &storage(),
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
        tfrecord_lirs::instance_records_in(&storage(), url).unwrap(),
        tfrecord_lirs::instance_records(&local).unwrap()
    );

    // Missing objects and tables: NotFound naming the URL (and how to make a table).
    let e = tfrecord_lirs::read_table_for_in(&storage(), url, Path::new("mem://b/no.offsets"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("mem://b/no.offsets"), "{e}");
    let none = Path::new("mem://b/none.tfrecord");
    let e = tfrecord_lirs::instance_records_in(&storage(), none).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("mem://b/none.tfrecord"), "{e}");
    // A damaged record: DataLoss naming the URL and the byte, as for the local file.
    let mut bytes = std::fs::read(&local).unwrap();
    let (_, at) = Reader::open_one(&local, None, &url_options())
        .unwrap()
        .location(40)
        .unwrap();
    bytes[at as usize + 12 + 2] ^= 0xff;
    put("mem://b/damaged.tfrecord", bytes);
    let damaged = Path::new("mem://b/damaged.tfrecord");
    let e = tfrecord_lirs::inspect_in(
        &storage(),
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
            "two://b/x" => Ok(Box::new(MemFile(
                Arc::new(b"second".to_vec()),
                false,
                false,
                url.to_string(),
            ))),
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
    let first = MemFs { objects: mem() };
    put("mem://layer/a", b"first".to_vec());
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
    use tfrecord_lirs::io::{TABLE_BLOCK_ENTRIES, TABLE_IN_MEMORY_MAX_BYTES};
    let n = (TABLE_IN_MEMORY_MAX_BYTES / 8 * 3) as usize;
    let mut data = Vec::new();
    let mut table = Vec::with_capacity(n);
    let payloads: Vec<Vec<u8>> = (0..n).map(|i| payload(i, 1 + i % 5)).collect();
    for p in &payloads {
        table.push(data.len() as u64);
        tfrecord_lirs::format::encode_record(p, &mut data);
    }
    let url = "mem://slow/big.tfrecord";
    let table_url = format!("{url}.offsets");
    put(url, data);
    put(&table_url, tfrecord_lirs::encode_table(&table));
    let opts = url_options();
    let reader = Reader::open_one(Path::new(url), None, &opts).unwrap();
    // Open: the first and last entries (two blocks), not the whole table.
    let blocks = n.div_ceil(TABLE_BLOCK_ENTRIES as usize);
    assert!(reads_of(&table_url) <= 2, "{} reads", reads_of(&table_url));
    assert_eq!(reader.len(), n as u64);
    let ids: Vec<u64> = (0..n as u64).step_by(97).collect();
    let mut batch = tfrecord_lirs::Batch::default();
    reader.read_batch(&ids, &mut batch).unwrap();
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(batch.payload(k), &payloads[id as usize][..]);
    }
    // In id order, each block is read once more at most.
    assert!(
        reads_of(&table_url) <= 2 + blocks,
        "{} reads of {blocks} blocks",
        reads_of(&table_url)
    );

    let mut swapped = table.clone();
    let k = n / 2;
    swapped.swap(k, k + 1);
    put(&table_url, tfrecord_lirs::encode_table(&swapped));
    let reader = Reader::open_one(Path::new(url), None, &opts).unwrap();
    assert_eq!(reader.read(3).unwrap(), payloads[3]);
    let err = reader.read(k as u64).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&table_url)
            && text.contains("strictly increase")
            && text.contains(&format!("instance {}", k + 1))
            && text.contains(&format!("byte {}", table[k])),
        "{text}"
    );
}
