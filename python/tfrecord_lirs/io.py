"""Writing and indexing LIRS files, and random access, via the Rust core."""

import collections
import ctypes
import os

import tensorflow as tf

from tfrecord_lirs import _native

PadSummary = collections.namedtuple(
    "PadSummary", ["instances", "pages", "filler_bytes", "data_bytes"])

_MIN_PAGE = 512
_MAX_PAGE = 16 << 20


def default_table_path(path):
    """`<path>.offsets`, the offset table used when none is given (a str, also
    for a bytes or PathLike `path`)."""
    return _native.default_table_path(path)


def _check_page_size(page_size):
    if isinstance(page_size, bool) or not isinstance(page_size, int):
        raise ValueError(f"page_size must be an int, got {page_size!r}")
    if page_size < _MIN_PAGE or page_size > _MAX_PAGE or page_size & (page_size - 1):
        raise ValueError(
            f"page_size must be a power of two between {_MIN_PAGE} and {_MAX_PAGE} bytes, "
            f"got {page_size}")
    return page_size


def _pad_spec(page_size, fit, compression=None, trust_table=False):
    """The C ABI's PadSpec; ValueError for a bad page size or fit."""
    _check_page_size(page_size)
    _native.check_fit(fit)
    return _native.PadSpec(page_size=page_size, fit=fit.encode("utf-8"),
                           compression=(compression or "").encode("utf-8"),
                           trust_table=bool(trust_table))


def build_offset_table(path, table=None):
    """Scans the TFRecord file `path` and writes its offset table (default
    `<path>.offsets`). Returns the table path."""
    table = default_table_path(path) if table is None else os.fsdecode(table)
    count = ctypes.c_uint64()
    _native.call(_native.api.build_offset_table, _native.path_bytes(path),
                 _native.path_bytes(table), ctypes.byref(count))
    return table


def pad(src, dst, page_size=4096, fit="next", compression=None, trust_table=False):
    """Rewrites TFRecord `src` as page-aligned `dst` (+ `dst.offsets`).
    Returns a PadSummary.

    `compression`: how `src` is compressed: None (detected from its first
    bytes), "none", "gzip" or "zlib" (any case, so TFRecordOptions'
    "GZIP"/"ZLIB"/"" work too). GZIP and ZLIB input, as tf.io.TFRecordWriter
    writes with TFRecordOptions(compression_type=...), is decompressed as it
    is read: one step from a compressed TFRecord to a LIRS-ready file.

    `trust_table`: take the instances from `src`'s offset table
    (`src.offsets`), trusted as for LIRSDataset(trust_table=True): converts a
    file padded by another tool (e.g. the LIRS reference implementation),
    whose padding records a scan would take for instances.
    """
    if compression is not None and not isinstance(compression, str):
        raise TypeError(f"compression must be a str or None, got {compression!r}")
    spec = _pad_spec(page_size, fit, compression, trust_table)
    out = _native.PadSummary()
    _native.call(_native.api.pad_file, _native.path_bytes(src), _native.path_bytes(dst),
                 ctypes.byref(spec), ctypes.byref(out))
    return PadSummary(out.instances, out.pages, out.filler_bytes, out.data_bytes)


class PaddedWriter:
    """Writes page-aligned TFRecord `path` and its offset table `path.offsets`.

    `write(payload)` returns the instance id of the record (for fit='best'
    the id is known only after `close()`: then `write` returns the input index
    and `instance_ids` maps input index -> instance id). Files appear
    atomically on `close()`; leaving a `with` block by an exception discards
    them.
    """

    def __init__(self, path, page_size=4096, fit="next"):
        spec = _pad_spec(page_size, fit)
        self._path = os.fspath(path)
        self._handle = ctypes.c_void_p()
        self._summary = None
        self._instance_ids = None
        _native.call(_native.api.writer_create, _native.path_bytes(path), ctypes.byref(spec),
                     ctypes.byref(self._handle))

    @property
    def path(self):
        return self._path

    def write(self, record):
        if self._handle is None or not self._handle.value:
            raise ValueError("write() on a closed PaddedWriter")
        if isinstance(record, str):
            record = record.encode("utf-8")
        record = bytes(record)
        index = ctypes.c_uint64()
        _native.call(_native.api.writer_write, self._handle, record, len(record),
                     ctypes.byref(index))
        return index.value

    def close(self):
        """Finishes the file and table; returns a PadSummary (idempotent)."""
        if self._summary is not None:
            return self._summary
        if self._handle is None or not self._handle.value:
            raise ValueError("PaddedWriter was discarded")
        out = _native.PadSummary()
        try:
            _native.call(_native.api.writer_finish, self._handle, ctypes.byref(out))
            n = out.inputs_mapped
            ids = (ctypes.c_uint64 * max(n, 1))()
            _native.api.writer_instance_of_input(self._handle, ids, n)
            self._instance_ids = list(ids[:n])
        finally:
            self._free()
        self._summary = PadSummary(out.instances, out.pages, out.filler_bytes, out.data_bytes)
        return self._summary

    @property
    def instance_ids(self):
        """After close(): instance id of each written record, in write order."""
        if self._summary is None:
            raise ValueError("instance_ids is known only after close()")
        if not self._instance_ids:
            return list(range(self._summary.instances))
        return list(self._instance_ids)

    def _free(self):
        if self._handle is not None and self._handle.value:
            _native.api.writer_free(self._handle)
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self._free()
        return False

    def __del__(self):
        try:
            self._free()
        except Exception:  # pylint: disable=broad-except
            pass


def _string_vector(value, what):
    if isinstance(value, (str, bytes, os.PathLike)):
        value = [value]
    if isinstance(value, (list, tuple)):
        value = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        return tf.constant(value, dtype=tf.string, shape=[len(value)], name=what)
    t = tf.convert_to_tensor(value, dtype=tf.string, name=what)
    if t.shape.rank == 0:
        t = tf.reshape(t, [1])
    return t


def read(filenames, ids, offset_tables=None, *, page_size=4096, backend="auto",
         trust_table=False):
    """Payloads of instances `ids` (global ids across `filenames` in order) as
    a 1-D tf.string tensor.

    `page_size` (keyword only) is the page size the files were padded with,
    `backend` ("auto", "pread", "mmap" or "direct") how they are read, and
    `trust_table` whether the tables are authoritative (files padded by other
    tools), as for LIRSDataset. Opened files are cached by the kernel (a few at a time, keyed
    by path, size and mtime, so a rebuilt table is picked up), so calling this
    once per batch does not re-read the offset tables. Usable in Dataset.map,
    and such pipelines can be checkpointed.
    """
    _check_page_size(page_size)
    _native.check_backend(backend)
    files = _string_vector(filenames, "filenames")
    tables = (tf.constant([], dtype=tf.string) if offset_tables is None
              else _string_vector(offset_tables, "offset_tables"))
    ids = tf.reshape(tf.cast(ids, tf.int64), [-1])
    return _native.ops.lirs_read(filenames=files, offset_tables=tables, ids=ids,
                                 page_size=page_size, backend=backend,
                                 trust_table=bool(trust_table))


def is_filler(record):
    """tf.bool (same shape as `record`): is the payload a LIRS filler record?"""
    return _native.ops.lirs_is_filler(tf.convert_to_tensor(record, dtype=tf.string))


def stock_dataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
    """A plain TFRecordDataset of `filenames` with LIRS filler records removed:
    the instances of padded files, in file order, without offset tables.

    `compression_type`, `buffer_size` and `num_parallel_reads` are passed to
    tf.data.TFRecordDataset as they are (with `num_parallel_reads`, files are
    interleaved, as TFRecordDataset does).
    """
    return tf.data.TFRecordDataset(
        filenames, compression_type=compression_type, buffer_size=buffer_size,
        num_parallel_reads=num_parallel_reads).filter(
            lambda record: tf.logical_not(is_filler(record)))

