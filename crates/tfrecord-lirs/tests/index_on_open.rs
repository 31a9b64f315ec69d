//! A data file opened without its offset table (`ReaderOptions::index_missing`, the
//! default): the table is built on open with the bytes `index` writes, kept beside the
//! file, else in the `cache_dir`, else in memory; threads and processes that open the
//! file at once build it once between them; a file `index` refuses is refused with
//! `index`'s error; `index_missing: false` keeps the missing-table error.
//!
//! The races and the read-only directory run in child processes (this test binary
//! again, one test selected by `--exact`): the count of tables built is per process.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};

use common::{kdd_sizes, payload};
use tfrecord_lirs::block_cache::BlockCache;
use tfrecord_lirs::{
    build_offset_table, default_table_path, tables_built_on_open, ErrorKind, Reader, ReaderOptions,
    Storage,
};

/// The child's job (see [`child`]), and the file or directory it works on.
const CHILD_JOB: &str = "LIRS_INDEX_ON_OPEN_JOB";
const CHILD_PATH: &str = "LIRS_INDEX_ON_OPEN_PATH";

/// `n` records of varied sizes at `dir/name`, without a table; their payloads.
fn write_untabled(dir: &Path, name: &str, n: usize) -> (PathBuf, Vec<Vec<u8>>) {
    let payloads: Vec<Vec<u8>> = kdd_sizes(n, 7)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    let path = dir.join(name);
    let mut bytes = Vec::new();
    for p in &payloads {
        tfrecord_lirs::format::encode_record(p, &mut bytes);
    }
    std::fs::write(&path, bytes).unwrap();
    (path, payloads)
}

/// The table bytes `index` writes for `data` (built in a directory of its own).
fn index_bytes(data: &Path) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("index.offsets");
    build_offset_table(data, &table).unwrap();
    std::fs::read(table).unwrap()
}

fn read_all(reader: &Reader) -> Vec<Vec<u8>> {
    (0..reader.len())
        .map(|id| reader.read(id).unwrap())
        .collect()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn cache(dir: &Path) -> Storage {
    Storage::local().with_cache(Some(BlockCache::open(dir, 1 << 30).unwrap()))
}

#[test]
fn a_missing_table_is_built_on_open_with_the_bytes_of_index() {
    let dir = tempfile::tempdir().unwrap();
    let (data, payloads) = write_untabled(dir.path(), "d.tfrecord", 3000);
    let reader = Reader::open_one(&data, None, &ReaderOptions::default()).unwrap();
    assert_eq!(read_all(&reader), payloads);
    let table = default_table_path(&data);
    assert_eq!(std::fs::read(&table).unwrap(), index_bytes(&data));
    // Written atomically: nothing else is left beside the data.
    assert_eq!(names(dir.path()), ["d.tfrecord", "d.tfrecord.offsets"]);
    // An explicit table path that does not exist is built there.
    let elsewhere = dir.path().join("t.idx");
    let reader = Reader::open_one(&data, Some(&elsewhere), &ReaderOptions::default()).unwrap();
    assert_eq!(reader.len(), 3000);
    assert_eq!(std::fs::read(&elsewhere).unwrap(), index_bytes(&data));
}

#[test]
fn index_missing_false_keeps_the_missing_table_error() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = write_untabled(dir.path(), "d.tfrecord", 10);
    let options = ReaderOptions {
        index_missing: false,
        ..ReaderOptions::default()
    };
    let err = Reader::open_one(&data, None, &options).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(err.is_missing_table(), "{err}");
    assert!(
        matches!(err.remedy(), Some(tfrecord_lirs::Remedy::BuildTable { .. })),
        "{err}"
    );
    assert_eq!(names(dir.path()), ["d.tfrecord"]);
}

#[test]
fn a_file_index_refuses_is_refused_on_open_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = write_untabled(dir.path(), "d.tfrecord", 50);
    let whole = std::fs::read(&data).unwrap();
    // Truncated inside its last record; then a payload byte flipped (its CRC fails).
    let truncated = whole[..whole.len() - 3].to_vec();
    let mut flipped = whole.clone();
    flipped[200] ^= 0x40;
    for bad in [truncated, flipped] {
        std::fs::write(&data, &bad).unwrap();
        let by_index = build_offset_table(&data, &dir.path().join("x.offsets"))
            .err()
            .unwrap();
        let on_open = Reader::open_one(&data, None, &ReaderOptions::default())
            .err()
            .unwrap();
        assert_eq!(on_open.kind(), ErrorKind::DataLoss, "{on_open}");
        assert_eq!(on_open.kind(), by_index.kind());
        assert_eq!(on_open.to_string(), by_index.to_string());
        assert_eq!(on_open.offset(), by_index.offset());
        // Neither left a table (nor a temporary file).
        assert_eq!(names(dir.path()), ["d.tfrecord"]);
    }
}

/// Runs test `name` of this binary in a child with `job` on `path`; its stdout.
fn run_child(name: &str, job: &str, path: &Path, read_only: bool) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut command = if read_only {
        // `path` read-only for the child alone: a read-only bind mount in a mount
        // namespace of its own (root ignores file modes).
        let mut c = Command::new("unshare");
        c.args(["-m", "sh", "-c"])
            .arg(
                "mount --bind -o ro \"$0\" \"$0\" && exec \"$1\" --exact \"$2\" --nocapture --test-threads 1",
            )
            .arg(path)
            .arg(&exe)
            .arg(name);
        c
    } else {
        let mut c = Command::new(&exe);
        c.args(["--exact", name, "--nocapture", "--test-threads", "1"]);
        c
    };
    let out = command
        .env(CHILD_JOB, job)
        .env(CHILD_PATH, path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{job}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The count a child printed (`built=N`, after the test harness's own words).
fn built(stdout: &str) -> u64 {
    let at = stdout
        .find("built=")
        .unwrap_or_else(|| panic!("no count in {stdout}"));
    let digits: String = stdout[at + 6..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// The children's side: does nothing unless started by [`run_child`].
#[test]
fn child() {
    let (Ok(job), Some(path)) = (std::env::var(CHILD_JOB), std::env::var_os(CHILD_PATH)) else {
        return;
    };
    let path = PathBuf::from(path);
    match job.as_str() {
        // Opens `path` once; with "threads", from 8 threads at once.
        "open" => {
            let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
            assert!(!reader.is_empty());
        }
        "threads" => {
            let start = Arc::new(Barrier::new(8));
            let lens: Vec<u64> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        let (start, path) = (Arc::clone(&start), &path);
                        s.spawn(move || {
                            start.wait();
                            Reader::open_one(path, None, &ReaderOptions::default())
                                .unwrap()
                                .len()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(lens.iter().all(|&n| n == lens[0] && n > 0), "{lens:?}");
        }
        // `path` is a read-only directory holding d.tfrecord and the directory
        // `cache`, writable (a bind mount of its own would be read-only too: it is
        // given as a sibling, `path`/../cache).
        "read_only" => read_only_child(&path),
        other => panic!("unknown job {other}"),
    }
    println!("built={}", tables_built_on_open());
}

fn read_only_child(dir: &Path) {
    let data = dir.join("d.tfrecord");
    let cache_dir = dir.parent().unwrap().join("cache");
    assert!(
        std::fs::write(dir.join("probe"), b"").is_err(),
        "the directory is writable"
    );
    // With a cache_dir: the table is kept there, and found there by the next open.
    let options = ReaderOptions {
        storage: cache(&cache_dir),
        ..ReaderOptions::default()
    };
    let reader = Reader::open_one(&data, None, &options).unwrap();
    let n = reader.len();
    let tables = cache_dir.join("tfrecord-lirs-tables-1");
    let kept: Vec<PathBuf> = std::fs::read_dir(&tables)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "offsets"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read(&kept[0]).unwrap(), index_bytes(&data));
    assert_eq!(tables_built_on_open(), 1);
    assert_eq!(Reader::open_one(&data, None, &options).unwrap().len(), n);
    assert_eq!(tables_built_on_open(), 1, "the kept table was built again");
    // Without one: in memory, for this process only, each open.
    let reader = Reader::open_one(&data, None, &ReaderOptions::default()).unwrap();
    assert_eq!(read_all(&reader).len() as u64, n);
    assert_eq!(tables_built_on_open(), 2);
    assert_eq!(names(dir), ["d.tfrecord"]);
    println!("read_only=ok");
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn a_read_only_directory_keeps_the_table_in_cache_dir_else_in_memory() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(root.path().join("cache")).unwrap();
    let (data, payloads) = write_untabled(&dir, "d.tfrecord", 2000);
    let out = if is_root() {
        run_child("child", "read_only", &dir, true)
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let out = run_child("child", "read_only", &dir, false);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        out
    };
    assert!(out.contains("read_only=ok"), "{out}");
    assert_eq!(names(&dir), ["d.tfrecord"]);
    // The data unchanged and still untabled, readable here (writable) as usual.
    let reader = Reader::open_one(&data, None, &ReaderOptions::default()).unwrap();
    assert_eq!(read_all(&reader), payloads);
}

#[test]
fn a_rewritten_file_never_meets_the_table_kept_for_its_old_version() {
    // The cache_dir's tables are named by the file's version: a read-only directory
    // is not needed to see it (a table beside the data is looked for first, and it
    // is missing here because it is given in a directory that does not exist).
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = write_untabled(dir.path(), "d.tfrecord", 300);
    let nowhere = dir.path().join("no-such-dir").join("d.offsets");
    let options = ReaderOptions {
        storage: cache(&dir.path().join("cache")),
        ..ReaderOptions::default()
    };
    assert_eq!(
        Reader::open_one(&data, Some(&nowhere), &options)
            .unwrap()
            .len(),
        300
    );
    let (_, payloads) = write_untabled(dir.path(), "d.tfrecord", 120);
    let reader = Reader::open_one(&data, Some(&nowhere), &options).unwrap();
    assert_eq!(read_all(&reader), payloads);
    let tables = dir.path().join("cache").join("tfrecord-lirs-tables-1");
    let kept = names(&tables)
        .into_iter()
        .filter(|n| n.ends_with(".offsets"))
        .count();
    assert_eq!(kept, 2);
}

#[test]
fn racing_threads_build_the_table_once() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = write_untabled(dir.path(), "d.tfrecord", 100_000);
    let out = run_child("child", "threads", &data, false);
    assert_eq!(built(&out), 1, "{out}");
    assert_eq!(
        std::fs::read(default_table_path(&data)).unwrap(),
        index_bytes(&data)
    );
    assert_eq!(names(dir.path()), ["d.tfrecord", "d.tfrecord.offsets"]);
}

#[test]
fn racing_processes_build_the_table_once() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = write_untabled(dir.path(), "d.tfrecord", 100_000);
    let total: u64 = std::thread::scope(|s| {
        let children: Vec<_> = (0..4)
            .map(|_| s.spawn(|| built(&run_child("child", "open", &data, false))))
            .collect();
        children.into_iter().map(|c| c.join().unwrap()).sum()
    });
    assert_eq!(total, 1);
    assert_eq!(
        std::fs::read(default_table_path(&data)).unwrap(),
        index_bytes(&data)
    );
    assert_eq!(names(dir.path()), ["d.tfrecord", "d.tfrecord.offsets"]);
}
