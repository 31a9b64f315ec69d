//! One open reader per file identity, shared by every kernel of the op library.
//!
//! Opening a reader opens every data file and offset table (and holds small tables in
//! memory), more work than a typical `LIRSRead(ids)` call, and tf.data graph rewrites
//! build a LIRSDataset twice (each copy used to open its own reader). So [`open_shared`] hands out
//! the reader already open for the same request: the same data and table paths, page
//! size, backend and checks, and each file unchanged since (device, inode, size and
//! modification time of every data file and table). A rewritten data file or a rebuilt
//! table is a new identity and opens a new reader; an old one stays alive as long as a
//! dataset or a call holds it.
//!
//! A reader in use is found again however many others are open (the map holds it
//! weakly); the last [`CAPACITY`] opened are also held strongly, so a `LIRSRead` call
//! after the previous one ended finds its reader.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use tfrecord_lirs as core;

/// Readers kept open when nothing holds them: enough for the few file sets a process
/// reads by id at once, small because each holds open files, maps and small tables.
pub const CAPACITY: usize = 4;

/// What makes two open requests the same reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderKey {
    /// Each (data, table) pair with the identity of both files.
    files: Vec<(PathBuf, core::FileStat, PathBuf, core::FileStat)>,
    page_size: u64,
    backend: core::Backend,
    verify_payload_crc: bool,
    trust_table: bool,
}

impl ReaderKey {
    /// The key of opening `pairs` with `options`, or `None` when a file has no local
    /// identity (a URL, or a file that cannot be stat()ed: the open itself then reports
    /// it), as the storage answers it; then the reader is opened unshared.
    pub fn of(pairs: &[(PathBuf, PathBuf)], options: &core::ReaderOptions) -> Option<ReaderKey> {
        let files = pairs
            .iter()
            .map(|(data, table)| {
                Some((
                    data.clone(),
                    options.storage.stat(data)?,
                    table.clone(),
                    options.storage.stat(table)?,
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(ReaderKey {
            files,
            page_size: options.page_size,
            backend: options.backend,
            verify_payload_crc: options.verify_payload_crc,
            trust_table: options.trust_table,
        })
    }
}

/// The readers open now: every one still held by someone, the last few held here too.
#[derive(Default)]
pub struct ReaderCache {
    live: Vec<(ReaderKey, Weak<core::Reader>)>,
    recent: VecDeque<Arc<core::Reader>>,
}

impl ReaderCache {
    /// The reader of `key`, opened by `open` unless one is open already.
    pub fn get_or_open(
        &mut self,
        key: ReaderKey,
        open: impl FnOnce() -> core::Result<core::Reader>,
    ) -> core::Result<Arc<core::Reader>> {
        self.live.retain(|(_, reader)| reader.strong_count() > 0);
        let found = self
            .live
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, reader)| reader.upgrade());
        let reader = match found {
            Some(reader) => reader,
            None => {
                let reader = Arc::new(open()?);
                self.live.push((key, Arc::downgrade(&reader)));
                reader
            }
        };
        self.recent.retain(|r| !Arc::ptr_eq(r, &reader));
        self.recent.push_front(Arc::clone(&reader));
        self.recent.truncate(CAPACITY);
        Ok(reader)
    }
}

/// The process's reader of `pairs` with `options`: shared when the same files, unchanged,
/// are already open with the same options; opened (unshared) when a file has no local
/// identity.
pub fn open_shared(
    pairs: &[(PathBuf, PathBuf)],
    options: &core::ReaderOptions,
) -> core::Result<Arc<core::Reader>> {
    static CACHE: Mutex<Option<ReaderCache>> = Mutex::new(None);
    let Some(key) = ReaderKey::of(pairs, options) else {
        return core::Reader::open(pairs, options).map(Arc::new);
    };
    // A panic while opening (caught by the bridge's guard) leaves the map as it was.
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .get_or_insert_with(ReaderCache::default)
        .get_or_open(key, || core::Reader::open(pairs, options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::write_u32_file;

    fn options() -> core::ReaderOptions {
        core::ReaderOptions {
            page_size: 4096,
            ..Default::default()
        }
    }

    #[test]
    fn the_same_unchanged_files_share_one_reader_a_rewrite_opens_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_u32_file(dir.path(), 10, 8);
        let pairs = vec![(path.clone(), core::default_table_path(&path))];
        let a = open_shared(&pairs, &options()).unwrap();
        let b = open_shared(&pairs, &options()).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let crc_off = core::ReaderOptions {
            verify_payload_crc: false,
            ..options()
        };
        assert!(!Arc::ptr_eq(&a, &open_shared(&pairs, &crc_off).unwrap()));
        // Rewritten with other records: a new identity, a new reader of the new file.
        drop((a, b));
        std::fs::remove_file(&path).unwrap();
        let rewritten = write_u32_file(dir.path(), 12, 8);
        assert_eq!(rewritten, path);
        let c = open_shared(&pairs, &options()).unwrap();
        assert_eq!(c.len(), 12);
    }

    #[test]
    fn a_missing_file_is_the_open_error_not_a_cached_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.tfrecord");
        let pairs = vec![(path.clone(), core::default_table_path(&path))];
        let Err(e) = open_shared(&pairs, &options()) else {
            panic!("opened a missing file");
        };
        assert_eq!(e.kind(), core::ErrorKind::NotFound);
    }

    #[test]
    fn readers_in_use_stay_shared_beyond_the_capacity_and_idle_ones_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = ReaderCache::default();
        let mut held = Vec::new();
        let mut keys = Vec::new();
        for i in 0..CAPACITY + 2 {
            let sub = dir.path().join(i.to_string());
            std::fs::create_dir(&sub).unwrap();
            let path = write_u32_file(&sub, 3 + i as u32, 8);
            let pairs = vec![(path.clone(), core::default_table_path(&path))];
            let key = ReaderKey::of(&pairs, &options()).unwrap();
            let reader = cache
                .get_or_open(key.clone(), || core::Reader::open(&pairs, &options()))
                .unwrap();
            keys.push((key, pairs));
            held.push(reader);
        }
        assert_eq!(cache.recent.len(), CAPACITY);
        // The first is past the capacity but still held: found, not reopened.
        let (key, _) = &keys[0];
        let again = cache
            .get_or_open(key.clone(), || panic!("reopened a reader in use"))
            .unwrap();
        assert!(Arc::ptr_eq(&again, &held[0]));
        // Idle and past the capacity: closed, so the next request opens it again.
        drop((again, held));
        let (key, pairs) = &keys[1];
        let mut opened = false;
        cache
            .get_or_open(key.clone(), || {
                opened = true;
                core::Reader::open(pairs, &options())
            })
            .unwrap();
        assert!(opened);
    }
}
