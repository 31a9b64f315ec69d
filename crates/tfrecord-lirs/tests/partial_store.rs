//! The store of partially augmented samples: a memo that never serves a wrong entry
//! (torn, corrupt, foreign or stale ones are misses), shared by the processes that open
//! one directory, bounded store-wide and reported; and the refurbish step over it
//! (`Refurbisher`): one computation per refresh, generations kept for a second job.

use std::fs;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tfrecord_lirs::{
    ErrorKind, Partial, PartialStore, RefurbishParams, RefurbishSchedule, Refurbisher,
    StoreIdentity,
};

fn identity(dataset: &str) -> StoreIdentity {
    StoreIdentity {
        dataset: dataset.to_string(),
        partial: "crop-flip v1".to_string(),
        seed: 7,
    }
}

const BIG: u64 = 1 << 30;

#[test]
fn memory_and_disk_stores_round_trip_and_count() {
    let dir = tempfile::tempdir().unwrap();
    let disk = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    let memory = PartialStore::memory(&identity("a"), BIG);
    for store in [&disk, &memory] {
        assert_eq!(store.get(3, 0), None);
        assert!(store.put(3, 0, b"partial-3-0", None, false).unwrap());
        assert_eq!(store.get(3, 0).as_deref(), Some(&b"partial-3-0"[..]));
        assert_eq!(store.get(3, 1), None); // another generation
        assert!(store.put(3, 2, b"p", Some(0), true).unwrap());
        assert_eq!(store.get(3, 0), None); // its generation is over: removed
        let stats = store.stats();
        assert_eq!(
            (stats.hits, stats.misses, stats.refreshes, stats.recomputes),
            (1, 3, 1, 1)
        );
        assert_eq!(stats.bytes, 40 + 1 + 4);
    }
    // A second process (here: a second store on the same directory) sees the entries.
    let again = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    assert_eq!(again.get(3, 2).as_deref(), Some(&b"p"[..]));
    assert_eq!(again.stats().bytes, 45);
}

#[test]
fn a_torn_or_corrupt_entry_is_a_miss_and_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    store
        .put(1, 0, b"some partial output", None, false)
        .unwrap();
    let path = store.entry_path(1, 0).unwrap();
    let whole = fs::read(&path).unwrap();
    // Torn: every strict prefix of the entry.
    for cut in [0, 7, 39, 40, whole.len() / 2, whole.len() - 1] {
        fs::write(&path, &whole[..cut]).unwrap();
        assert_eq!(store.get(1, 0), None, "cut at {cut}");
        assert!(!path.exists());
    }
    // Corrupt: any byte flipped.
    for at in [0, 9, 20, 45, whole.len() - 1] {
        let mut bad = whole.clone();
        bad[at] ^= 0x40;
        fs::write(&path, &bad).unwrap();
        assert_eq!(store.get(1, 0), None, "flip at {at}");
    }
    // Another key's entry under this name (a stale or moved file).
    store.put(2, 0, b"two", None, false).unwrap();
    fs::rename(store.entry_path(2, 0).unwrap(), &path).unwrap();
    assert_eq!(store.get(1, 0), None);
    assert_eq!(store.stats().corrupt, 12);
    // A killed writer's temporary file is no entry.
    fs::write(
        store.dir().unwrap().join(".tmp-999-0-1.0"),
        &whole[..whole.len() - 2],
    )
    .unwrap();
    assert_eq!(store.get(1, 0), None);
    store.put(1, 0, b"some partial output", None, true).unwrap();
    assert_eq!(fs::read(&path).unwrap(), whole);
}

#[test]
fn another_datasets_store_is_never_mixed_up() {
    let dir = tempfile::tempdir().unwrap();
    let a = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    a.put(5, 0, b"of a", None, false).unwrap();
    for other in [
        identity("b"),
        StoreIdentity {
            partial: "crop-flip v2".into(),
            ..identity("a")
        },
        StoreIdentity {
            seed: 8,
            ..identity("a")
        },
    ] {
        let b = PartialStore::open_dir(dir.path(), &other, BIG).unwrap();
        assert_ne!(a.dir(), b.dir());
        assert_eq!(b.get(5, 0), None);
        // Even an entry file copied across namespaces does not verify.
        fs::copy(a.entry_path(5, 0).unwrap(), b.entry_path(5, 0).unwrap()).unwrap();
        assert_eq!(b.get(5, 0), None);
        let memory = PartialStore::memory(&other, BIG);
        assert_eq!(memory.get(5, 0), None);
    }
    // An empty path (it would open a store in the working directory).
    let err = PartialStore::open_dir("".as_ref(), &identity("a"), BIG).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("empty path"), "{err}");
    // A namespace directory given as the root, or a namespace of another identity.
    let err = PartialStore::open_dir(a.dir().unwrap(), &identity("a"), BIG).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    fs::write(a.dir().unwrap().join("IDENTITY"), "something else").unwrap();
    let err = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("another dataset"), "{err}");
}

#[test]
fn a_full_store_does_not_store_and_the_next_use_recomputes() {
    let dir = tempfile::tempdir().unwrap();
    let disk = PartialStore::open_dir(dir.path(), &identity("a"), 100).unwrap();
    let memory = PartialStore::memory(&identity("a"), 100);
    for store in [&disk, &memory] {
        assert!(store.put(0, 0, &[1; 50], None, false).unwrap()); // 94 bytes
        assert!(!store.put(1, 0, &[2; 50], None, false).unwrap());
        assert_eq!(store.get(1, 0), None);
        assert_eq!(store.stats().unstored, 1);
        // Retiring makes room.
        store.retire(0, 0);
        assert_eq!(store.stats().bytes, 0);
        assert!(store.put(1, 0, &[2; 50], None, true).unwrap());
    }
}

#[test]
fn a_removed_directory_is_made_again_and_a_write_error_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    store.put(1, 0, b"x", None, false).unwrap();
    // Removed mid-run: a miss, then stored again (and the namespace is whole again).
    fs::remove_dir_all(store.dir().unwrap()).unwrap();
    assert_eq!(store.get(1, 0), None);
    assert!(store.put(1, 0, b"x", None, true).unwrap());
    assert_eq!(store.get(1, 0).as_deref(), Some(&b"x"[..]));
    PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    // A file where the directory should be: an error naming it.
    fs::remove_dir_all(store.dir().unwrap()).unwrap();
    fs::write(store.dir().unwrap(), b"not a directory").unwrap();
    let err = store.put(2, 0, b"x", None, false).unwrap_err();
    assert!(
        err.to_string()
            .contains(&*store.dir().unwrap().to_string_lossy()),
        "{err}"
    );
    // Gets stay misses.
    assert_eq!(store.get(1, 0), None);
}

/// Every entry file's bytes in a namespace directory.
fn bytes_on_disk(store: &PartialStore) -> u64 {
    fs::read_dir(store.dir().unwrap())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().contains('.'))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn the_bound_is_the_stores_not_each_processs() {
    let dir = tempfile::tempdir().unwrap();
    // Room for 10 entries of 94 bytes; two processes (two opens) write 8 each, both
    // opened before either wrote.
    let a = PartialStore::open_dir(dir.path(), &identity("a"), 10 * 94).unwrap();
    let b = PartialStore::open_dir(dir.path(), &identity("a"), 10 * 94).unwrap();
    let stored_a = (0..8).filter(|&i| a.put(i, 0, &[1; 50], None, false).unwrap());
    assert_eq!(stored_a.count(), 8);
    let stored_b = (8..16).filter(|&i| b.put(i, 0, &[2; 50], None, false).unwrap());
    assert_eq!(stored_b.count(), 2);
    assert_eq!(bytes_on_disk(&a), 10 * 94);
    assert_eq!((a.stats().bytes, b.stats().bytes), (940, 940));
    assert_eq!(b.stats().unstored, 6);
}

#[test]
fn over_the_bound_the_oldest_generations_make_room() {
    let dir = tempfile::tempdir().unwrap();
    let disk = PartialStore::open_dir(dir.path(), &identity("a"), 16 * 94).unwrap();
    let memory = PartialStore::memory(&identity("a"), 16 * 94);
    for store in [&disk, &memory] {
        for generation in 0..4 {
            for id in 0..8 {
                let payload = [generation as u8 * 10 + id as u8; 50];
                assert!(store.put(id, generation, &payload, None, false).unwrap());
            }
        }
        // The oldest generations made room, oldest first (every evicted entry is of
        // a generation no newer than every kept one); the newest is whole.
        let (mut kept, mut evicted) = (Vec::new(), Vec::new());
        for generation in 0..4 {
            for id in 0..8 {
                match store.get(id, generation) {
                    Some(p) => {
                        assert_eq!(p, vec![generation as u8 * 10 + id as u8; 50]);
                        kept.push(generation);
                    }
                    None => evicted.push(generation),
                }
            }
        }
        assert!(evicted.iter().max() <= kept.iter().min());
        assert_eq!(kept.iter().filter(|&&g| g == 3).count(), 8);
        assert!(kept.len() <= 16 && kept.len() >= 14, "{kept:?}");
        assert_eq!(store.stats().evicted, evicted.len() as u64);
        assert_eq!(store.stats().bytes, kept.len() as u64 * 94);
        // A generation never evicts a newer one: an old entry that does not fit is
        // not stored.
        for id in 9..12 {
            store.put(id, 1, &[0; 50], None, true).unwrap();
        }
        assert!(!store.put(12, 1, &[0; 50], None, true).unwrap());
        assert_eq!(store.get(3, 3), Some(vec![33; 50]));
    }
    assert!(bytes_on_disk(&disk) <= 16 * 94);
}

#[test]
fn killed_writers_temporary_files_are_swept_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let store = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    let ns = store.dir().unwrap().to_path_buf();
    let old = ns.join(".tmp-4000000-0-1.0");
    let fresh = ns.join(".tmp-4000001-0-2.0");
    for path in [&old, &fresh] {
        fs::write(path, b"half an entry").unwrap();
    }
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    // Swept once per 10 minutes store-wide: not by an open right after the first.
    PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    assert!(old.exists());
    // The ledger's second word: when the last sweep began (Unix seconds).
    let ledger = ns.join("LEDGER");
    let mut words = fs::read(&ledger).unwrap();
    let then = hour_ago
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    words[8..16].copy_from_slice(&then.to_le_bytes());
    fs::write(&ledger, &words).unwrap();
    PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    assert!(!old.exists());
    assert!(fresh.exists()); // a live writer's, maybe
}

fn schedule(n: u64, r: u64) -> RefurbishSchedule {
    let params = RefurbishParams {
        seed: 7,
        reuse_factor: r,
        batch_size: 8,
        ..RefurbishParams::default()
    };
    RefurbishSchedule::new(n, &params).unwrap()
}

/// A deterministic partial function of the record and its seed.
fn partial_of(id: u64, seed: u64) -> Vec<u8> {
    let mut out = id.to_le_bytes().to_vec();
    out.extend_from_slice(&seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
    out
}

/// Runs `epochs` of `job`: the partial outputs used, and how many it computed.
fn run_epochs(job: &Refurbisher, epochs: std::ops::Range<u64>) -> (Vec<Vec<u8>>, u64) {
    let mut computed = 0;
    let mut outputs = Vec::new();
    for epoch in epochs {
        let mut walk = job.schedule().epoch(epoch).unwrap();
        let mut uses = Vec::new();
        walk.next_uses(usize::MAX, &mut uses);
        for u in uses {
            let step = job.partial(u.id, u.refresh, u.generation, epoch, |seed| {
                computed += 1;
                let p = partial_of(u.id, seed);
                Ok::<_, tfrecord_lirs::Error>((p.clone(), p))
            });
            outputs.push(match step.unwrap() {
                Partial::Stored(bytes) | Partial::Computed(bytes) => bytes,
            });
        }
    }
    (outputs, computed)
}

#[test]
fn the_step_computes_once_per_refresh_in_either_store() {
    let (n, r, epochs) = (50, 3, 7);
    let dir = tempfile::tempdir().unwrap();
    let disk = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
    let expected: u64 = (0..epochs).map(|e| schedule(n, r).refreshes(e)).sum();
    let mut reference = None;
    for store in [disk, PartialStore::memory(&identity("a"), BIG)] {
        let job = Refurbisher::new(schedule(n, r), Arc::new(store));
        let (outputs, computed) = run_epochs(&job, 0..epochs);
        assert_eq!(computed, expected);
        let stats = job.store().stats();
        assert_eq!((stats.refreshes, stats.recomputes), (expected, 0));
        assert_eq!(stats.hits, n * epochs - expected);
        // The same outputs whatever the store (each is its seed's).
        assert_eq!(reference.get_or_insert(outputs.clone()), &outputs);
        if job.store().is_private() {
            // Memory holds one generation per id at most: the replaced ones are
            // retired, and outputs with no use to come were never stored.
            assert!(stats.bytes <= n * (40 + 16 + 4));
        }
    }
    // Reuse factor 1 in memory: no output is used twice, so none is kept.
    let job = Refurbisher::new(
        schedule(n, 1),
        Arc::new(PartialStore::memory(&identity("a"), BIG)),
    );
    assert_eq!(run_epochs(&job, 0..3).1, 3 * n);
    assert_eq!(job.store().stats().bytes, 0);
}

#[test]
fn a_second_job_on_the_first_ones_store_computes_under_five_percent() {
    let (n, r, epochs) = (60, 3, 8);
    for lag in [1, epochs] {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let store = PartialStore::open_dir(dir.path(), &identity("a"), BIG).unwrap();
            Refurbisher::new(schedule(n, r), Arc::new(store))
        };
        let (first, second) = (open(), open());
        // The second job starts once the first finished epoch 0 and stays `lag`
        // epochs behind it (`epochs`: it starts after the first one's end).
        let (mut first_outputs, mut first_computed) = (Vec::new(), 0);
        let (mut second_outputs, mut second_computed) = (Vec::new(), 0);
        for step in 0..epochs + lag {
            if step < epochs {
                let (o, c) = run_epochs(&first, step..step + 1);
                first_outputs.extend(o);
                first_computed += c;
            }
            if step >= lag {
                let (o, c) = run_epochs(&second, step - lag..step - lag + 1);
                second_outputs.extend(o);
                second_computed += c;
            }
        }
        assert_eq!(second_outputs, first_outputs);
        assert!(first_computed >= n * (1 + (epochs - 1) / r));
        assert!(second_computed * 20 < first_computed, "lag {lag}");
        assert_eq!(second_computed, 0, "lag {lag}");
    }
}

/// The variable that tells this test binary it runs inside the mount namespace of
/// [`a_full_disk_degrades_to_computing_without_storing`], on a tiny tmpfs.
const FULL_DISK_DIR: &str = "TFRECORD_LIRS_TEST_FULL_DISK_DIR";

#[test]
fn a_full_disk_degrades_to_computing_without_storing() {
    if let Ok(dir) = std::env::var(FULL_DISK_DIR) {
        return on_a_full_disk(std::path::Path::new(&dir));
    }
    let root = fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        eprintln!("skipped: a tmpfs of its own needs root (a mount namespace)");
        return;
    }
    // A real ENOSPC: this test again, in a mount namespace of its own with a 256 KiB
    // tmpfs (nothing outside it sees the mount).
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg("mount -t tmpfs -o size=256k tmpfs \"$0\" && exec \"$1\" --exact \"$2\" --nocapture --test-threads 1")
        .arg(dir.path())
        .arg(exe)
        .arg("a_full_disk_degrades_to_computing_without_storing")
        .env(FULL_DISK_DIR, dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
}

fn on_a_full_disk(dir: &std::path::Path) {
    let (n, r) = (40, 2);
    let store = PartialStore::open_dir(dir, &identity("a"), BIG).unwrap();
    let job = Refurbisher::new(schedule(n, r), Arc::new(store));
    // 16 KiB partial outputs: 40 of them need 640 KiB, the disk holds about 15.
    let big = |id: u64, seed: u64| {
        let mut p = partial_of(id, seed);
        p.resize(16 << 10, id as u8);
        p
    };
    let mut outputs = Vec::new();
    for epoch in 0..3 {
        let mut uses = Vec::new();
        job.schedule()
            .epoch(epoch)
            .unwrap()
            .next_uses(usize::MAX, &mut uses);
        for u in uses {
            let step = job.partial(u.id, u.refresh, u.generation, epoch, |seed| {
                let p = big(u.id, seed);
                Ok::<_, tfrecord_lirs::Error>((p.clone(), p))
            });
            let bytes = match step.unwrap() {
                Partial::Stored(b) | Partial::Computed(b) => b,
            };
            // Never a wrong output: always the one of its seed.
            assert_eq!(bytes, big(u.id, job.partial_seed(u.id, u.generation)));
            outputs.push(bytes);
        }
    }
    let stats = job.store().stats();
    assert!(stats.unstored > 0, "{stats:?}");
    assert!(stats.hits > 0 && stats.recomputes > 0, "{stats:?}");
    // No temporary file left behind, and what is stored verifies.
    let names: Vec<String> = fs::read_dir(job.store().dir().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with(".tmp-")), "{names:?}");
    assert!(stats.bytes <= 256 << 10);
}

#[test]
fn the_store_dataset_id_changes_with_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.tfrecord");
    fs::write(&file, b"12345").unwrap();
    let path = file.to_string_lossy().into_owned();
    let url = "s3://bucket/d.tfrecord".to_string();
    let before = tfrecord_lirs::store_dataset_id(&[path.clone(), url.clone()], 10);
    assert!(before.contains(&format!("({path:?}, 5)")), "{before}");
    assert!(before.contains(&format!("{url:?}")), "{before}");
    assert_ne!(
        before,
        tfrecord_lirs::store_dataset_id(&[path.clone(), url.clone()], 11)
    );
    // The same file rewritten to another size is another dataset.
    fs::write(&file, b"123456").unwrap();
    assert_ne!(
        before,
        tfrecord_lirs::store_dataset_id(&[path.clone(), url], 10)
    );
    // A relative path names the same file as its absolute path.
    let cwd = std::env::current_dir().unwrap();
    let relative = file.strip_prefix("/").unwrap();
    let up = cwd.components().count() - 1;
    let relative = format!("{}{}", "../".repeat(up), relative.display());
    assert_eq!(
        tfrecord_lirs::store_dataset_id(&[relative], 1),
        tfrecord_lirs::store_dataset_id(&[path], 1)
    );
}
