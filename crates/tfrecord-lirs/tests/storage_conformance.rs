//! The storage contract ([`tfrecord_lirs::conformance`]) run against every storage the
//! engine reaches without a front end: each local backend (pread, the opt-in map,
//! `O_DIRECT`, the default one copying and mapping under a lease), object_store's
//! `http://` client against this test's own server (tests/http_server), and the
//! block-cache tier (`cache_dir`) in front of it, cold and then warm. TensorFlow's
//! file systems and Python's gfile are run through the same cases by
//! tests/test_storage_conformance.py.

mod common;
#[cfg(feature = "object-store")]
mod http_server;

use std::path::Path;

use tfrecord_lirs::conformance::{self, Open};
use tfrecord_lirs::local::AutoFile;
use tfrecord_lirs::{Backend, MmapOptIn, ReadAt, Storage};

/// The fixtures in a directory of their own.
fn local_fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in conformance::fixtures() {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

fn assert_conforms(what: &str, base: &str, open: &Open<'_>) {
    let failures = conformance::run(base, open);
    assert!(failures.is_empty(), "{what}:\n{}", failures.join("\n"));
}

fn local_backend(backend: Backend) {
    let dir = local_fixtures();
    let storage = Storage::local();
    // SAFETY: the fixtures are not changed while the test reads them.
    let opt_in = Some(unsafe { MmapOptIn::new() });
    let open = |p: &Path| storage.open(p, backend, 1, opt_in);
    assert_conforms(backend.name(), dir.path().to_str().unwrap(), &open);
}

#[test]
fn pread_conforms() {
    local_backend(Backend::Pread);
}

#[test]
fn mmap_conforms() {
    local_backend(Backend::Mmap);
}

#[test]
fn direct_conforms() {
    local_backend(Backend::Direct);
}

#[test]
fn auto_conforms() {
    local_backend(Backend::Auto);
}

/// The default backend, told the file holds many small records, maps it under a lease
/// (prefetching with `MADV_POPULATE_READ`) where it can; as readers open it.
#[test]
fn auto_mapped_under_a_lease_conforms() {
    let dir = local_fixtures();
    let mapped = AutoFile::open(&dir.path().join("long.bin"), 1 << 20).unwrap();
    // Where no lease can be taken the file is read with pread: the cases hold either way.
    eprintln!("long.bin mapped under a lease: {}", mapped.is_mapped());
    drop(mapped);
    let open = |p: &Path| -> tfrecord_lirs::Result<Box<dyn ReadAt>> {
        Ok(Box::new(AutoFile::open(p, 1 << 20)?))
    };
    assert_conforms("auto (leased)", dir.path().to_str().unwrap(), &open);
}

#[cfg(feature = "object-store")]
mod object_storage {
    use std::sync::Arc;

    use super::*;
    use crate::http_server::Server;
    use tfrecord_lirs::block_cache::BlockCache;
    use tfrecord_lirs::cloud::ObjectStoreFileSystem;

    fn served() -> Server {
        let server = Server::start();
        for (name, bytes) in conformance::fixtures() {
            server.put(&format!("c/{name}"), bytes);
        }
        server
    }

    #[test]
    fn object_store_conforms() {
        let server = served();
        let storage = Storage::with_file_system(Arc::new(ObjectStoreFileSystem::new()));
        let open = |p: &Path| storage.open(p, Backend::Auto, 1, None);
        assert_conforms("object_store (http)", &server.url("c"), &open);
    }

    #[test]
    fn block_cache_conforms_cold_and_warm() {
        let server = served();
        // Untagged objects pass the tier by (their size alone cannot tell a rewrite).
        server.send_etags();
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(BlockCache::open_alone(dir.path(), 1 << 40).unwrap());
        let storage = Storage::with_file_system(Arc::new(ObjectStoreFileSystem::new()))
            .with_cache(Some(cache));
        let open = |p: &Path| storage.open(p, Backend::Auto, 1, None);
        assert_conforms("cache_dir (cold)", &server.url("c"), &open);
        // Every block read is kept now: the same cases from local disk.
        server.clear_gets();
        assert_conforms("cache_dir (warm)", &server.url("c"), &open);
        assert_eq!(server.gets(), Vec::new(), "warm reads went to the server");
    }
}
