//! TensorFlow's file systems as the core's [`remote::FileSystem`]: every URL scheme
//! TensorFlow knows in the process (`gs://`, `ram://`, `hdfs://` with its libraries, …)
//! is read and written through `tensorflow::Env` (C++, `tf_op/lirs_tf_file.{h,cc}`);
//! object-storage schemes TensorFlow does not implement (`s3://` in stock TensorFlow
//! 2.21) go through the core's object_store client.
//!
//! Only with the cargo feature `tensorflow`, which the op library's build
//! (`tf_op/Makefile`) turns on: the C++ definitions exist only in the op library,
//! so the crate's own `cargo test` builds (without the feature) never reference them
//! and link without TensorFlow. [`storage`] is the [`Storage`] every bridge entry point
//! passes to the core (see `storage` in `reader.rs`); nothing is registered process-wide.

use std::io;
use std::sync::Arc;

use cxx::UniquePtr;
use tfrecord_lirs::remote::{self, Durability, FileSystem, RemoteWrite};
use tfrecord_lirs::ReadAt;
use tfrecord_lirs::Storage;

#[cxx::bridge(namespace = "tfrecord_lirs::tf")]
mod bridge {
    unsafe extern "C++" {
        include!("lirs_tf_file.h");

        /// `tensorflow::RandomAccessFile` with its size.
        type TfReadFile;
        /// `tensorflow::WritableFile`.
        type TfWriteFile;

        fn read_at(
            self: &TfReadFile,
            offset: u64,
            buf: &mut [u8],
            got: &mut usize,
            message: &mut String,
        ) -> i32;
        fn size(self: &TfReadFile) -> u64;
        fn append(self: Pin<&mut TfWriteFile>, data: &[u8], message: &mut String) -> i32;
        fn close(self: Pin<&mut TfWriteFile>, message: &mut String) -> i32;

        fn tf_open_read(url: &str, code: &mut i32, message: &mut String) -> UniquePtr<TfReadFile>;
        fn tf_create(url: &str, code: &mut i32, message: &mut String) -> UniquePtr<TfWriteFile>;
        fn tf_rename(from: &str, to: &str, message: &mut String) -> i32;
        fn tf_delete(url: &str, message: &mut String) -> i32;
        fn tf_has_atomic_move(url: &str, atomic: &mut bool, message: &mut String) -> i32;
    }
}

// SAFETY: a TfReadFile owns a tensorflow::RandomAccessFile, whose `Read` (the only
// method called through `&self` besides the immutable size) is documented safe for
// concurrent use from several threads; it holds no thread-affine state.
unsafe impl Send for bridge::TfReadFile {}
// SAFETY: see `Send` above: every `&self` method is thread-safe.
unsafe impl Sync for bridge::TfReadFile {}
// SAFETY: a TfWriteFile owns a tensorflow::WritableFile, used by one thread at a time
// (every method takes `Pin<&mut>`); it may move between threads.
unsafe impl Send for bridge::TfWriteFile {}

/// absl::StatusCode OK.
const OK: i32 = 0;

/// A TensorFlow status code and message as an [`io::Error`] of the kind the core
/// maps: the core's rule ([`remote::tensorflow_status_error`]).
fn status(code: i32, message: String) -> io::Result<()> {
    if code == OK {
        return Ok(());
    }
    Err(remote::tensorflow_status_error(i64::from(code), message))
}

/// The file a TensorFlow open call returns, its status (and a null file) as errors.
fn opened<T: cxx::memory::UniquePtrTarget>(
    open: impl FnOnce(&mut i32, &mut String) -> UniquePtr<T>,
) -> io::Result<UniquePtr<T>> {
    let (mut code, mut message) = (OK, String::new());
    let file = open(&mut code, &mut message);
    status(code, message)?;
    if file.is_null() {
        return Err(io::Error::other("TensorFlow returned no file"));
    }
    Ok(file)
}

struct TfRead(UniquePtr<bridge::TfReadFile>);

impl ReadAt for TfRead {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let (mut got, mut message) = (0usize, String::new());
        let code = self.0.read_at(offset, buf, &mut got, &mut message);
        status(code, message)?;
        Ok(got.min(buf.len()))
    }

    fn size(&self) -> u64 {
        self.0.size()
    }
}

struct TfWrite(UniquePtr<bridge::TfWriteFile>);

impl RemoteWrite for TfWrite {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let mut message = String::new();
        let code = self.0.pin_mut().append(data, &mut message);
        status(code, message)
    }

    fn close(&mut self) -> io::Result<()> {
        let mut message = String::new();
        let code = self.0.pin_mut().close(&mut message);
        status(code, message)
    }
}

/// TensorFlow's `Env::Default()` file systems.
struct TensorFlowFileSystem;

impl FileSystem for TensorFlowFileSystem {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        let file = opened(|code, message| bridge::tf_open_read(url, code, message))?;
        Ok(Box::new(TfRead(file)))
    }

    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        let file = opened(|code, message| bridge::tf_create(url, code, message))?;
        Ok(Box::new(TfWrite(file)))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut message = String::new();
        let code = bridge::tf_rename(from, to, &mut message);
        status(code, message)
    }

    fn delete(&self, url: &str) -> io::Result<()> {
        let mut message = String::new();
        let code = bridge::tf_delete(url, &mut message);
        status(code, message)
    }

    fn durability(&self, url: &str) -> Durability {
        let (mut atomic, mut message) = (false, String::new());
        let code = bridge::tf_has_atomic_move(url, &mut atomic, &mut message);
        if code == OK && atomic {
            Durability::Rename
        } else {
            Durability::WholeObject
        }
    }
}

/// Local files, and URLs through TensorFlow's file systems, with object storage
/// ([`tfrecord_lirs::cloud`]) for the schemes TensorFlow does not implement (`s3://`
/// in TensorFlow 2.21 without tensorflow-io): the core's rule
/// ([`Storage::with_url_file_systems`]) with TensorFlow's file systems preferred.
pub fn storage() -> Storage {
    Storage::with_url_file_systems(vec![Arc::new(TensorFlowFileSystem)])
}
