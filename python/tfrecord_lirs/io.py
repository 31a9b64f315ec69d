"""Random access as TensorFlow ops (`read`, `is_filler`) and the stock reader
(`stock_dataset`); writing and indexing are re-exported from tfrecord_lirs.writing."""

import os

import tensorflow as tf

from tfrecord_lirs import _op_library

# Writing and indexing need no TensorFlow: they live in tfrecord_lirs.writing.
from tfrecord_lirs.writing import (  # noqa: F401
    PadSummary,
    PaddedWriter,
    build_offset_table,
    default_table_path,
    pad,
)


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


def read(filenames, ids, offset_tables=None, *, page_size=None, backend=None,
         trust_table=None, cache_dir=None, cache_bytes=None, index_missing=None):
    """Payloads of instances `ids` (global ids across `filenames` in order) as
    a 1-D tf.string tensor.

    `page_size` (keyword only) is the page size the files were padded with,
    `backend` ("auto", "pread", "mmap" or "direct") how they are read, and
    `trust_table` whether the tables are authoritative (files padded by other
    tools), as for LIRSDataset (None: the Rust core's defaults, as there). Opened
    files are cached by the kernel (a few at a time, keyed by path, size and mtime,
    so a rebuilt table is picked up), so calling this once per batch does not
    re-read the offset tables. Files on object storage have no such identity, so
    each call opens them again (a few requests per file: the object, its table's
    ends); over object storage prefer LIRSDataset or DataSource, which open once.
    Usable in Dataset.map, and such pipelines can be checkpointed.

    `cache_dir` and `cache_bytes`: the local tier of object-storage reads, as for
    LIRSDataset (None: `TFRECORD_LIRS_CACHE_DIR`, else no cache; 32 GiB).
    `index_missing`: a missing offset table is built on open, as for LIRSDataset
    (None: True; False: `tf.errors.NotFoundError`). A table that can be kept neither
    beside its file nor in a `cache_dir` lives in memory only, with the reader: each
    call that opens the file again scans it again.
    """
    page_size = _op_library.or_default(page_size, "page_size")
    backend = _op_library.or_default(backend, "backend")
    trust_table = _op_library.or_default(trust_table, "trust_table")
    index_missing = _op_library.or_default(index_missing, "index_missing")
    _op_library.check_page_size(page_size)
    _op_library.check_backend(backend)
    files = _string_vector(filenames, "filenames")
    tables = (tf.constant([], dtype=tf.string) if offset_tables is None
              else _string_vector(offset_tables, "offset_tables"))
    cache_dir, cache_bytes = _op_library.cache_attrs(cache_dir, cache_bytes)
    ids = tf.reshape(tf.cast(ids, tf.int64), [-1])
    return _op_library.ops.lirs_read(filenames=files, offset_tables=tables, ids=ids,
                                     page_size=page_size, backend=backend,
                                     trust_table=bool(trust_table),
                                     index_missing=bool(index_missing), cache_dir=cache_dir,
                                     cache_bytes=cache_bytes)


def is_filler(record):
    """tf.bool (same shape as `record`): is the payload a LIRS filler record?"""
    return _op_library.ops.lirs_is_filler(tf.convert_to_tensor(record, dtype=tf.string))


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

