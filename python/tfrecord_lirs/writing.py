"""Writing and indexing LIRS files (`pad`, `PaddedWriter`, `build_offset_table`), via
the Rust core in the extension: no TensorFlow needed. Errors are the
`tfrecord_lirs.errors` classes, also the matching tf.errors class once TensorFlow is
loaded."""

import collections
import os
import sys

from tfrecord_lirs import _checks, _lirs
from tfrecord_lirs.sources import data_files

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
    """A list of data files from a list (or tuple) of paths and patterns, or from one
    `tf.io.gfile.glob` pattern (None for a single path that is no pattern): the core's
    rule (`tfrecord_lirs.sources.data_files`)."""
    if isinstance(files_or_pattern, (list, tuple)):
        return data_files(files_or_pattern, "files")
    text = _checks.path_str(files_or_pattern)
    if not _lirs.is_pattern(text):
        return None
    files = data_files(text, "files_or_pattern")
    return None if files == [text] else files


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
        return _checks.call_core(fn, *args, bar.report)
    finally:
        bar.close()


def default_table_path(path):
    """`<path>.offsets`, the offset table used when none is given (a str, also
    for a bytes or PathLike `path`)."""
    return _checks.default_table_path(path)




def _pad_spec(page_size, fit, compression=None, trust_table=None, overwrite=False):
    """The extension's pad arguments after the paths (None: the core's default);
    ValueError for a bad page size or fit."""
    if page_size is not None:
        _checks.check_page_size(page_size)
    if fit is not None:
        _checks.check_fit(fit)
    return (page_size, fit, compression,
            None if trust_table is None else bool(trust_table), bool(overwrite))


def build_offset_table(files_or_pattern, table=None, *, jobs=None, progress=None):
    """Scans TFRecord files and writes their offset tables (default
    `<file>.offsets`).

    `files_or_pattern`: one path (returns its table path), or a list of paths or a
    `tf.io.gfile.glob` pattern (such as
    `~/tensorflow_datasets/mnist/3.0.1/mnist-train.tfrecord-*`, expanded; returns the
    list of table paths). Many files are indexed `jobs` at a time (None or 0: automatic),
    every file even when some fail; then a failure raises the tf.errors class of the
    first one with a summary naming each failed file. `progress`: print the bytes done
    on stderr (None: when stderr is a terminal). `table` names the table of a single
    file only.
    """
    files = _file_list(files_or_pattern)
    if files is None:
        path = files_or_pattern
        table = default_table_path(path) if table is None else os.fsdecode(table)
        _checks.call_core(_lirs.build_offset_table, _checks.path_str(path), table)
        return table
    if table is not None:
        raise ValueError("table names the table of one file; several files get "
                         "<file>.offsets each")
    _run_many(_lirs.build_offset_tables, ([_checks.path_str(f) for f in files], jobs),
              "index", progress)
    return [default_table_path(f) for f in files]


def pad(src, dst, page_size=None, fit=None, compression=None, trust_table=None, *,
        overwrite=False, jobs=None, progress=None):
    """Rewrites TFRecord `src` as page-aligned `dst` (+ `dst.offsets`).
    Returns a PadSummary (with the expected page reads, padded and unpadded). When
    `dst` is an existing directory, the copy is written into it under `src`'s file
    name (as the CLI's `pad`).

    `page_size`: None is 4 KiB; `fit`: None is "next"; `trust_table`: None is False
    (the Rust core's defaults).

    `src` may also be a list of paths or a `tf.io.gfile.glob` pattern: then `dst` is
    an existing directory, each input is written into it under its file name (a
    compressed input's .gz/.zlib dropped), `jobs` at a time (None or 0: automatic), and a list
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
    _checks.check_argument("compression", compression)
    spec = _pad_spec(page_size, fit, compression, trust_table, overwrite)
    files = _file_list(src)
    if files is not None:
        outs = _run_many(_lirs.pad_files,
                         ([_checks.path_str(f) for f in files], _checks.path_str(dst), *spec,
                          jobs), "pad", progress)
        return [_summary(fields, note) for fields, note in outs]
    fields, note = _checks.call_core(_lirs.pad_file, _checks.path_str(src),
                                  _checks.path_str(dst), *spec)
    return _summary(fields, note)


class PaddedWriter:
    """Writes page-aligned TFRecord `path` and its offset table `path.offsets`.

    `write(payload)` returns the instance id of the record (for fit='best'
    the id is known only after `close()`: then `write` returns the input index
    and `instance_ids` maps input index -> instance id). Files appear
    atomically on `close()`; leaving a `with` block by an exception discards
    them. `page_size` (None: 4 KiB) and `fit` (None: "next") as for `pad`.
    """

    def __init__(self, path, page_size=None, fit=None):
        _pad_spec(page_size, fit)
        self._path = os.fspath(path)
        self._handle = None
        self._summary = None
        self._instance_ids = None
        self._handle = _checks.call_core(_lirs.PaddedWriter, _checks.path_str(path), page_size,
                                      fit)

    @property
    def path(self):
        return self._path

    def write(self, record):
        if self._handle is None:
            raise ValueError("write() on a closed PaddedWriter")
        if isinstance(record, str):
            record = record.encode("utf-8")
        return _checks.call_core(self._handle.write, bytes(record))

    def close(self):
        """Finishes the file and table; returns a PadSummary (idempotent)."""
        if self._summary is not None:
            return self._summary
        if self._handle is None:
            raise ValueError("PaddedWriter was discarded")
        try:
            fields, self._instance_ids = _checks.call_core(self._handle.finish)
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
