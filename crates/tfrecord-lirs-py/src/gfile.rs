//! TensorFlow's file systems, reached from the extension through Python's
//! `tf.io.gfile`, as the core's [`FileSystem`]: what `pad`, `build_offset_table` and
//! `PaddedWriter` write and scan URLs through, so that they reach every scheme the
//! TensorFlow op library does (`ram://`, TensorFlow's `gs://`, `hdfs://`, …) with the
//! same clients, credentials and settings that `LIRSDataset` then reads them with.
//!
//! Which file system serves a URL is the core's rule
//! ([`Storage::with_url_file_systems`]), which [`write_storage`] asks with the same
//! preference as the op library's (`tf_fs::storage` in crates/tfrecord-lirs-ffi) —
//! TensorFlow's file systems first when `tensorflow` can be imported, then
//! `object_store` for the object-storage schemes TensorFlow does not implement
//! (`s3://` in stock TensorFlow 2.21). Without TensorFlow, object storage only, and any
//! other scheme is an error saying that TensorFlow provides it.
//!
//! Every call takes the GIL for its duration only; the callers run with it released
//! (`py.detach`), so worker threads of the core (`jobs` of `pad`) can call in.

use std::io;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyBytes};
use tfrecord_lirs::remote::{tensorflow_status_error, Durability, FileSystem, RemoteWrite};
use tfrecord_lirs::ReadAt;
use tfrecord_lirs::Storage;

/// Runs `f` with the GIL and `tf.io.gfile`; a Python exception becomes the
/// [`io::Error`] of the kind the core maps (see [`FileSystem`]).
fn with_gfile<T>(f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>) -> io::Result<T> {
    Python::try_attach(|py| {
        let gfile = tensorflow_gfile(py)?;
        f(py, gfile.bind(py)).map_err(|e| io_error(py, e))
    })
    .unwrap_or_else(|| Err(io::Error::other("the Python interpreter is not running")))
}

/// `tensorflow.io.gfile`, imported once; `Unsupported` (naming why) when TensorFlow
/// cannot be imported, so the layered storage goes on to object storage.
fn tensorflow_gfile(py: Python<'_>) -> io::Result<&'static Py<PyAny>> {
    // A PyOnceLock, not a std OnceLock: the import lets go of the GIL now and then, and
    // another thread waiting on a std lock with the GIL held would deadlock with it.
    static GFILE: PyOnceLock<Result<Py<PyAny>, String>> = PyOnceLock::new();
    let gfile = GFILE.get_or_init(py, || {
        py.import("tensorflow")
            .and_then(|tf| tf.getattr("io")?.getattr("gfile"))
            .map(Bound::unbind)
            .map_err(|e| e.to_string())
    });
    gfile.as_ref().map_err(|why| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "not object storage, and TensorFlow's file systems (which provide it) are \
                 unavailable: tensorflow cannot be imported ({why}); install TensorFlow 2.21 \
                 for this scheme"
            ),
        )
    })
}

/// A Python exception as an [`io::Error`]: a `tf.errors.OpError` by its status code,
/// the core's rule ([`tensorflow_status_error`]); anything else `Other`, with its
/// message.
fn io_error(py: Python<'_>, e: PyErr) -> io::Error {
    let value = e.value(py);
    let code = value
        .getattr("error_code")
        .and_then(|c| c.extract::<i64>())
        .ok();
    let message = value
        .getattr("message")
        .and_then(|m| m.extract::<String>())
        .unwrap_or_else(|_| e.to_string());
    match code {
        Some(code) => tensorflow_status_error(code, message),
        None => io::Error::other(message),
    }
}

/// TensorFlow's file systems through `tf.io.gfile`.
#[derive(Debug, Default)]
pub(crate) struct GfileFileSystem;

impl FileSystem for GfileFileSystem {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        let (size, file) = with_gfile(|_, gfile| {
            // The size first: a missing object is NotFound here on every file system.
            let size: u64 = gfile
                .call_method1("stat", (url,))?
                .getattr("length")?
                .extract()?;
            let file = gfile.getattr("GFile")?.call1((url, "rb"))?;
            Ok((size, file.unbind()))
        })?;
        Ok(Box::new(GfileRead {
            file: Mutex::new(Some(file)),
            size,
        }))
    }

    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        // A GFile opens on its first write: the scheme is checked here, so that one
        // TensorFlow does not implement goes on to object storage.
        if !with_gfile(|_, gfile| implements(gfile, url))? {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "File system scheme '{}' not implemented (file: '{url}')",
                    scheme_of(url)
                ),
            ));
        }
        let file = with_gfile(|_, gfile| Ok(gfile.getattr("GFile")?.call1((url, "wb"))?.unbind()))?;
        Ok(Box::new(GfileWrite { file: Some(file) }))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        with_gfile(|py, gfile| {
            let kwargs = [("overwrite", true)].into_py_dict(py)?;
            gfile.call_method("rename", (from, to), Some(&kwargs))?;
            Ok(())
        })
    }

    fn delete(&self, url: &str) -> io::Result<()> {
        match with_gfile(|_, gfile| gfile.call_method1("remove", (url,)).map(drop)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn durability(&self, url: &str) -> Durability {
        // TensorFlow's own answer (FileSystem::HasAtomicMove): object stores such as
        // gs:// say no, since their "rename" is a copy then a delete. Asked only for a
        // scheme TensorFlow implements: Python's has_atomic_move answers yes for one it
        // does not (s3:// in stock TensorFlow), which object storage then serves
        // without a rename.
        let atomic = with_gfile(|py, gfile| {
            if !implements(gfile, url)? {
                return Ok(false);
            }
            py.import("tensorflow.python.lib.io.file_io")?
                .call_method1("has_atomic_move", (url,))?
                .extract::<bool>()
        });
        match atomic {
            Ok(true) => Durability::Rename,
            _ => Durability::WholeObject,
        }
    }

    /// `tf.io.gfile.glob`'s matches (the core leaves out tables and sorts them); a
    /// scheme TensorFlow does not implement goes on to object storage.
    fn glob(&self, pattern: &str) -> io::Result<Vec<String>> {
        with_gfile(|_, gfile| {
            if !implements(gfile, pattern)? {
                return Ok(None);
            }
            gfile.call_method1("glob", (pattern,))?.extract().map(Some)
        })?
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "File system scheme '{}' not implemented (file: '{pattern}')",
                    scheme_of(pattern)
                ),
            )
        })
    }
}

/// The scheme of `url` ("" for none): the core's rule.
fn scheme_of(url: &str) -> &str {
    Storage::scheme(std::path::Path::new(url)).unwrap_or_default()
}

/// Whether TensorFlow has a file system registered for `url`'s scheme.
fn implements(gfile: &Bound<'_, PyAny>, url: &str) -> PyResult<bool> {
    let registered: Vec<String> = gfile.call_method0("get_registered_schemes")?.extract()?;
    Ok(registered.iter().any(|s| s == scheme_of(url)))
}

/// An object opened for reading through `tf.io.gfile.GFile` (seek, then read, under
/// one lock: a GFile has one position).
struct GfileRead {
    file: Mutex<Option<Py<PyAny>>>,
    size: u64,
}

impl ReadAt for GfileRead {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() || offset >= self.size {
            return Ok(0);
        }
        let file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let file = file
            .as_ref()
            .ok_or_else(|| io::Error::other("file already closed"))?;
        with_gfile(|py, _| {
            let file = file.bind(py);
            file.call_method1("seek", (offset,))?;
            let data = file.call_method1("read", (buf.len(),))?;
            let data = data.cast::<PyBytes>()?.as_bytes();
            let n = data.len().min(buf.len());
            buf[..n].copy_from_slice(&data[..n]);
            Ok(n)
        })
    }

    fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for GfileRead {
    fn drop(&mut self) {
        let file = self
            .file
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        close_quietly(file);
    }
}

/// An object being written through `tf.io.gfile.GFile`.
struct GfileWrite {
    file: Option<Py<PyAny>>,
}

impl RemoteWrite for GfileWrite {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| io::Error::other("file already closed"))?;
        with_gfile(|py, _| {
            file.bind(py)
                .call_method1("write", (PyBytes::new(py, data),))?;
            Ok(())
        })
    }

    fn close(&mut self) -> io::Result<()> {
        match self.file.take() {
            None => Ok(()),
            Some(file) => with_gfile(|py, _| {
                let file = file.bind(py);
                file.call_method0("flush")?;
                file.call_method0("close")?;
                Ok(())
            }),
        }
    }
}

impl Drop for GfileWrite {
    fn drop(&mut self) {
        // An unclosed file is abandoned (closed without reporting): the core deletes
        // what it leaves behind.
        close_quietly(self.file.take());
    }
}

/// Closes a GFile whose owner is going away, ignoring errors (nothing to report them
/// to), and releases it with the GIL held.
fn close_quietly(file: Option<Py<PyAny>>) {
    if let Some(file) = file {
        Python::try_attach(|py| {
            let _ = file.bind(py).call_method0("close");
            drop(file);
        });
    }
}

/// Where Python's writes, pads and scans are: local files; URLs through TensorFlow's
/// file systems when `tensorflow` can be imported, and through `object_store` for the
/// schemes TensorFlow does not implement (or all of object storage without
/// TensorFlow): the core's rule, the op library's order.
pub(crate) fn write_storage() -> Storage {
    Storage::with_url_file_systems(vec![Arc::new(GfileFileSystem)])
}
