"""Writing and indexing LIRS files, and random access, via the Rust core."""

import collections
import os
import sys

import tensorflow as tf

from tfrecord_lirs import _lirs, _native

PadSummary = collections.namedtuple(
    "PadSummary", ["instances", "pages", "filler_bytes", "data_bytes", "page_reads",
                   "unpadded_page_reads", "fit_note"], defaults=(0, 0, ""))
PadSummary.__doc__ = """What a padded write produced: `instances`, `pages`, `filler_bytes`,
`data_bytes`; `page_reads` / `unpadded_page_reads`: the pages the instances' records
touch in total, as placed and had they been written back to back unpadded (divide by
`instances` for the expected page reads per instance read at random); `fit_note`: what
fit="auto" chose and why ("" otherwise)."""


def _summary(fields, note=""):
    """A PadSummary from the extension's summary fields (in PadSummary's order)."""
    return PadSummary(*fields, note)


def _file_list(files_or_pattern):
    """A list of paths from a list (or tuple) of paths, or from one path or
    `tf.io.gfile.glob` pattern (None for a single path that is no pattern)."""
    if isinstance(files_or_pattern, (list, tuple)):
        return [os.fspath(f) if isinstance(f, os.PathLike) else f for f in files_or_pattern]
    path = os.fspath(files_or_pattern)
    text = os.fsdecode(path)
    if any(c in text for c in "*?[") and not tf.io.gfile.exists(text):
        return sorted(tf.io.gfile.glob(text))
    return None


class _Progress:
    """Prints the bytes done of a run over many files on stderr (a terminal only)."""

    def __init__(self, what, enabled):
        self._what = what
        self._enabled = enabled if enabled is not None else sys.stderr.isatty()

    def report(self, done, total):
        if self._enabled and total:
            sys.stderr.write(f"\r{self._what}: {100 * done // total}% of {total} bytes")
            sys.stderr.flush()

    def close(self):
        if self._enabled:
            sys.stderr.write("\n")


def _run_many(fn, args, what, progress):
    """Runs the extension's `fn` over many files (`args`: its arguments before the
    progress callback); it raises (after every file was done) the error of the first
    failure with the core's summary naming each one."""
    bar = _Progress(what, progress)
    try:
        return _native.native(fn, *args, bar.report)
    finally:
        bar.close()


def default_table_path(path):
    """`<path>.offsets`, the offset table used when none is given (a str, also
    for a bytes or PathLike `path`)."""
    return _native.default_table_path(path)




def _pad_spec(page_size, fit, compression=None, trust_table=False, overwrite=False):
    """The extension's pad arguments after the paths; ValueError for a bad page size
    or fit."""
    _native.check_page_size(page_size)
    _native.check_fit(fit)
    return (page_size, fit, compression or "", bool(trust_table), bool(overwrite))


def build_offset_table(files_or_pattern, table=None, *, jobs=0, progress=None):
    """Scans TFRecord files and writes their offset tables (default
    `<file>.offsets`).

    `files_or_pattern`: one path (returns its table path), or a list of paths or a
    `tf.io.gfile.glob` pattern (such as
    `~/tensorflow_datasets/mnist/3.0.1/mnist-train.tfrecord-*`, expanded; returns the
    list of table paths). Many files are indexed `jobs` at a time (0: automatic),
    every file even when some fail; then a failure raises the tf.errors class of the
    first one with a summary naming each failed file. `progress`: print the bytes done
    on stderr (None: when stderr is a terminal). `table` names the table of a single
    file only.
    """
    files = _file_list(files_or_pattern)
    if files is None:
        path = files_or_pattern
        table = default_table_path(path) if table is None else os.fsdecode(table)
        _native.native(_lirs.build_offset_table, _native.path_str(path), table)
        return table
    if table is not None:
        raise ValueError("table names the table of one file; several files get "
                         "<file>.offsets each")
    _run_many(_lirs.build_offset_tables, ([_native.path_str(f) for f in files], jobs),
              "index", progress)
    return [default_table_path(f) for f in files]


def pad(src, dst, page_size=4096, fit="next", compression=None, trust_table=False, *,
        overwrite=False, jobs=0, progress=None):
    """Rewrites TFRecord `src` as page-aligned `dst` (+ `dst.offsets`).
    Returns a PadSummary (with the expected page reads, padded and unpadded).

    `src` may also be a list of paths or a `tf.io.gfile.glob` pattern: then `dst` is
    an existing directory, each input is written into it under its file name (a
    compressed input's .gz/.zlib dropped), `jobs` at a time (0: automatic), and a list
    of PadSummary (in input order) is returned; every input is done even when some
    fail, then a failure raises with a summary naming each. `progress`: print the bytes
    done on stderr (None: when stderr is a terminal).

    `fit`: "next" (keeps the input order), "best" or "best:<window>" (may reorder),
    or "auto": best fit if the padding pays for these records (it saves a larger share
    of page reads than the share of bytes it adds), else no padding (a plain copy with
    its table); `PadSummary.fit_note` says what it chose and why.

    `overwrite`: replace an existing `dst` (by default an existing output is an
    error, InvalidArgumentError).

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
    spec = _pad_spec(page_size, fit, compression, trust_table, overwrite)
    files = _file_list(src)
    if files is not None:
        outs = _run_many(_lirs.pad_files,
                         ([_native.path_str(f) for f in files], _native.path_str(dst), *spec,
                          jobs), "pad", progress)
        return [_summary(fields) for fields in outs]
    fields, note = _native.native(_lirs.pad_file, _native.path_str(src),
                                  _native.path_str(dst), *spec)
    return _summary(fields, note)


class PaddedWriter:
    """Writes page-aligned TFRecord `path` and its offset table `path.offsets`.

    `write(payload)` returns the instance id of the record (for fit='best'
    the id is known only after `close()`: then `write` returns the input index
    and `instance_ids` maps input index -> instance id). Files appear
    atomically on `close()`; leaving a `with` block by an exception discards
    them.
    """

    def __init__(self, path, page_size=4096, fit="next"):
        _pad_spec(page_size, fit)
        self._path = os.fspath(path)
        self._handle = None
        self._summary = None
        self._instance_ids = None
        self._handle = _native.native(_lirs.PaddedWriter, _native.path_str(path), page_size,
                                      fit)

    @property
    def path(self):
        return self._path

    def write(self, record):
        if self._handle is None:
            raise ValueError("write() on a closed PaddedWriter")
        if isinstance(record, str):
            record = record.encode("utf-8")
        return _native.native(self._handle.write, bytes(record))

    def close(self):
        """Finishes the file and table; returns a PadSummary (idempotent)."""
        if self._summary is not None:
            return self._summary
        if self._handle is None:
            raise ValueError("PaddedWriter was discarded")
        try:
            fields, self._instance_ids = _native.native(self._handle.finish)
        finally:
            self._free()
        self._summary = _summary(fields)
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
        if self._handle is not None:
            self._handle.discard()
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
    _native.check_page_size(page_size)
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

