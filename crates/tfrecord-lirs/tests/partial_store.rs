//! The store of partially augmented samples: a memo that never serves a wrong entry
//! (torn, corrupt, foreign or stale ones are misses), shared by the processes that open
//! one directory, bounded and reported.

use std::fs;

use tfrecord_lirs::{ErrorKind, PartialStore, StoreIdentity};

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
