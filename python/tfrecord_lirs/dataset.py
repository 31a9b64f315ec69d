"""LIRSDataset: a tf.data source of full-range shuffled TFRecord instances."""

import os

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops
from tensorflow.python.data.util import random_seed
from tensorflow.python.framework import random_seed as graph_seed
from tensorflow.python.ops import gen_dataset_ops

from tfrecord_lirs import _lirs, _op_library
from tfrecord_lirs.io import _string_vector
from tfrecord_lirs.sources import data_files


def _static_int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        # A float is checked by the core (not an integer: the typed error naming it).
        return value
    try:
        return int(tf.get_static_value(value))
    except (TypeError, ValueError):
        return None


def _filenames_vector(filenames):
    """`filenames` as a 1-D tf.string tensor: a path, a list of paths, a tensor, or a
    tf.data.Dataset of scalar tf.string file names, whose elements are gathered into
    one vector by dataset ops (a reduce), so this works inside tf.function and with
    tf.data service as TFRecordDataset's does. LIRS needs the whole list up front: ids
    (and so the orders) run through the files in list order."""
    if isinstance(filenames, tf.data.Dataset):
        spec = filenames.element_spec
        if not (isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string
                and spec.shape.is_compatible_with([])):
            raise TypeError("a tf.data.Dataset of filenames must have scalar tf.string "
                            f"elements, got {spec}")
        return filenames.batch(1 << 30).reduce(
            tf.constant([], dtype=tf.string),
            lambda gathered, batch: tf.concat([gathered, tf.reshape(batch, [-1])], 0))
    return _string_vector(filenames, "filenames")


class LIRSDataset(dataset_ops.DatasetSource):
    """Every instance of `filenames` once per iteration, in a fresh random order:
    a drop-in for `tf.data.TFRecordDataset` over files with offset tables (full-range
    shuffling, no shuffle buffer).

    Example (a TFDS-style image Example; tables made once with
    `tfrecord-lirs index FILE...` or `tfrecord_lirs.build_offset_table(pattern)`):

        import tensorflow as tf
        from tfrecord_lirs import LIRSDataset

        features = {"image": tf.io.FixedLenFeature([], tf.string),
                    "label": tf.io.FixedLenFeature([], tf.int64)}

        def parse(record):
            example = tf.io.parse_single_example(record, features)
            return tf.io.decode_png(example["image"]), example["label"]

        files = "data/mnist-train.tfrecord-*"  # a pattern: its matches sorted
        ds = LIRSDataset(files, seed=42).map(parse).batch(128)
        model.fit(ds, epochs=3, shuffle=False)  # already shuffled, every epoch anew

    Arguments after `filenames` are keyword-only. Those of TFRecordDataset:
      filenames: a path, a list of paths, a tf.string scalar/vector, or a
        tf.data.Dataset of scalar tf.string file names (e.g.
        `tf.data.Dataset.list_files(pattern, shuffle=False)`), gathered into one
        list inside the graph. An empty list gives an empty dataset. Instance ids
        run through the files in list order, so the list's order is part of the
        order's inputs (docs/FORMAT.md §5.3): the same seed over the same files in
        another order walks other records. A pattern's matches are sorted by the
        core; `tf.io.gfile.glob` returns them in the file system's order, so pass
        `sorted(tf.io.gfile.glob(...))` (or `list_files(..., shuffle=False)`), as
        for a checkpoint to restore the same instances.
      compression_type: None or "" (files must be uncompressed: random access). A
        GZIP or ZLIB file is refused with how to make a readable copy
        (`tfrecord-lirs pad`, or `tfrecord_lirs.pad`, decompresses as it reads).
      buffer_size: accepted for compatibility (None or >= 0); LIRS reads each
        record with its own positioned read (or from a memory map), so there is no
        stream buffer: the read-ahead is `num_parallel_reads`.
      num_parallel_reads: fetch threads reading the order ahead of the consumer
        (the elements are the same for every value). Not TFRecordDataset's count of
        files read at once: the order is read in windows (about 384 KiB of data, at
        least one batch, at most 32 MiB) a few windows ahead, each cut into parts
        that the threads read one positioned read per record; the data read ahead
        does not grow with it, and threads beyond the cores only pay where reads
        wait on a device or the network. None or tf.data.AUTOTUNE chooses
        automatically (one over memory-mapped local files, two with positioned
        reads of cached files, eight for files read cold, beyond the memory this
        process may use, 32 for URLs).
      name: optional name of the tf.data operation.
    LIRS's own:
      offset_tables: one offset table per file; None -> `<file>.offsets`.
      page_aware: shuffle pages, then instances within a page (each page's
        instances are read back to back).
      seed: an int in [0, 2**64) (the core checks it as Sampler's). Without a
        global seed, iteration e (the e-th iterator made over this dataset, one per
        epoch of `repeat` or `model.fit`) walks epoch k = `start_epoch + e` of this
        seed: the order of `Sampler(files, seed=seed).order(k)`, of `Loader(files,
        seed=seed)`'s epoch k and of `tfrecord-lirs order --seed seed --epoch k` for
        the same files in the same order and the same page_aware, page_size, shards
        and order_version (docs/FORMAT.md §5.9, seed rule 1). With a global seed
        (`tf.random.set_seed(g)`), the pair (g, seed) seeds a generator as for
        Dataset.shuffle, each iteration's order the fold of the pair it draws:
        repeatable for the same (g, seed), but not the Sampler's. None: as
        Dataset.shuffle, a random order each run, unless a global seed is set. A
        seed known only when the graph runs (a non-constant tensor) also seeds the
        generator.
      reshuffle_each_iteration: a new order for each iteration (epoch); None
        means True, as for Dataset.shuffle. False: every iteration walks the order
        of epoch `start_epoch` (with a seed and no global seed).
      start_epoch: the epoch the first iteration walks (default 0; an int >= 0,
        checked by the core): `LIRSDataset(files, seed=s, start_epoch=k)` walks
        epochs k, k+1, ..., so a run restarted at an epoch boundary without an
        iterator checkpoint does not walk epoch 0 again. Not with epoch_state.
      num_shards, shard_index: read only shard `shard_index` of `num_shards`
        (disjoint, together complete; e.g. from a tf.distribute.InputContext).
        Under tf.data service's `distributed_epoch` or `ShardingPolicy.DYNAMIC`
        leave them at 1/0: the dispatcher hands out the parts of the epoch
        (splits), which needs a fixed `seed` (docs/CLUSTER.md). Both
        `tf.data.experimental.SHARD_HINT`: under tf.data service's
        `ShardingPolicy.HINT` (or tf.distribute's `AutoShardPolicy.HINT`) worker
        k of W reads shard k of W; the cardinality is then unknown, iterations
        reshuffle as without the hint, and iterating without that rewrite
        raises FailedPreconditionError.
      page_size: the page size the files were padded with; defines the pages of
        `page_aware` shuffling. Default (None) 4 KiB.
      batch_size: if set, elements are 1-D tf.string tensors of `batch_size`
        payloads formed inside the kernel (no per-element tf.data overhead); the
        last batch may be smaller unless `drop_remainder`. The strings of a batch
        view the buffer its payloads were read into (no copy per record); keeping
        any of them, or a string copied from one, keeps that buffer alive.
      drop_remainder: drop a last batch smaller than batch_size.
      backend: how records are read: "auto" (default: pread, plus a memory map of
        files of small records while the kernel grants a read lease on them; a
        writer or truncation revokes the map first, so it is as safe as pread when
        a file changes underneath), "pread", "mmap" (hot, page-cached data; the
        files must not be truncated while read, or the process gets SIGBUS), or
        "direct" (O_DIRECT: bypasses the page cache, for padded files on SSDs that
        are larger than memory). Same elements either way.
      trust_table: the offset tables are authoritative: instance i is the record
        at offset i, and records between entries (and before the first) are
        padding written by another tool, such as the LIRS reference
        implementation's '0'-filled records. The padding must still be valid
        TFRecord framing. Default False: strict, only LIRS filler records may
        follow an instance, which catches tables missing entries.
      index_missing: a file without its offset table gets one at open, built by
        the scan `tfrecord-lirs index` makes (every record's CRCs checked), once
        per file however many processes open it at once, kept beside the file
        (`<file>.offsets`); where that directory is read-only, and for object
        storage, in `cache_dir` (else in the process's memory only). Default
        (None) True; False: a missing table raises `tf.errors.NotFoundError`, as
        in earlier releases (the op attr `index_missing`, default true, so graphs
        saved before it load).
      deterministic: False: the windows of the order being read are delivered as
        their reads complete (RINAS; for high-latency storage such as gs://), not
        in order: each epoch is still every instance once, and batches formed in
        the kernel (batch_size) hold the same instances, in another order. None
        (default): as `tf.data.Options().deterministic` says (True when unset),
        like `Dataset.interleave`. A checkpoint of an unordered iterator restores
        exactly the instances it had not delivered (in the order their reads
        complete).
      order_version: the order algorithm (docs/FORMAT.md §5): 1 (default; the
        orders of every earlier release) or 2 (§5.8: computed position by
        position, nothing held per instance, an epoch starts in O(1): for 10^8
        instances and more). A checkpoint restores only into a dataset of the
        version it was taken with (older checkpoints are version 1).
      shard_remainder: what the shards do with the remainder (docs/FORMAT.md §5.5):
        "keep" (default: lengths differ by at most one), "drop" or "pad" (every shard
        the same count, as DistributedSampler's drop_last and padding; not with
        epoch_state).
      epoch_state: elastic resume (docs/FORMAT.md §6): bytes from
        `LIRSDataset.combine_shard_states`, the state of an epoch that K workers
        checkpointed. This dataset's first iteration walks shard `shard_index` of
        `num_shards` (any number, more or fewer than K) of the instances that state
        had not delivered: across the new workers each exactly once. The
        iterations after it are those of a fresh `num_shards`-shard run (the same
        seeds). A checkpoint of the resumed iteration restores as usual.
      cache_dir: a local directory that keeps the bytes read from object storage
        (`s3://`, `gs://`, ... read by the core), as for `DataSource`: shared by
        every process naming it, each block fetched once, a file read whole once
        read from local disk without any request. None: the environment variable
        `TFRECORD_LIRS_CACHE_DIR`, else no cache (the argument wins over it).
      cache_bytes: the most bytes `cache_dir` holds (None: 32 GiB); the least
        recently used blocks are evicted past it.
    Elements are scalar tf.string payloads (or batches of them); filler
    records never appear.

    Elastic resume, from K workers to K' (each a LIRSDataset with the same
    files, seed, order_version and page_aware; in synchronous training every
    worker saves at the same step):

        # on each old worker k, at the checkpoint:
        state_k = LIRSDataset.shard_state(iterator)      # bytes: save them
        # later, anywhere, with the K states:
        epoch_state = LIRSDataset.combine_shard_states([state_0, ..., state_K-1])
        # on each new worker j of K':
        ds = LIRSDataset(files, seed=42, num_shards=K2, shard_index=j,
                         epoch_state=epoch_state)
    """

    def __init__(self, filenames, *, compression_type=None, buffer_size=None,
                 num_parallel_reads=None, name=None, offset_tables=None, page_aware=None,
                 seed=None, reshuffle_each_iteration=None, num_shards=None, shard_index=None,
                 page_size=None, batch_size=None, drop_remainder=None,
                 backend=_op_library.DEFAULTS["backend"], trust_table=None, deterministic=None,
                 order_version=None, epoch_state=None, shard_remainder=None,
                 cache_dir=None, cache_bytes=None, start_epoch=None, index_missing=None):
        """See the class docstring."""
        # SHARD_HINT for both: the worker's shard under HINT sharding (the core's rule).
        shard_hint = _op_library.check_shard(_static_int(num_shards), _static_int(shard_index))
        # An argument left None takes the Rust core's default (the op needs values).
        page_aware = _op_library.or_default(page_aware, "page_aware")
        num_shards = _op_library.or_default(num_shards, "num_shards")
        shard_index = _op_library.or_default(shard_index, "shard_index")
        page_size = _op_library.or_default(page_size, "page_size")
        drop_remainder = _op_library.or_default(drop_remainder, "drop_remainder")
        # `backend` has the core's default in the signature: None is refused, as
        # TFRecordDataset-style callers must name a backend.
        trust_table = _op_library.or_default(trust_table, "trust_table")
        index_missing = _op_library.or_default(index_missing, "index_missing")
        order_version = _op_library.or_default(order_version, "order_version")
        shard_remainder = _op_library.or_default(shard_remainder, "shard_remainder")
        _op_library.check_compression_type(compression_type)
        _op_library.check_buffer_size(buffer_size)
        _op_library.check_page_size(page_size)
        # The types: the core's rules (the values are the op's, also the core's).
        if num_parallel_reads is None:  # the core's default, -1: tf.data.AUTOTUNE
            num_parallel_reads = _op_library.or_default(num_parallel_reads, "num_parallel_reads")
        start_epoch = _op_library.or_default(start_epoch, "start_epoch")
        for arg, value in (("batch_size", batch_size), ("num_parallel_reads", num_parallel_reads),
                           ("epoch_state", epoch_state), ("start_epoch", start_epoch),
                           ("deterministic", deterministic)):
            _op_library.check_argument(arg, value)
        _op_library.check_backend(backend)
        list_cache = (cache_dir, cache_bytes)  # a pattern's listing is remembered there
        cache_dir, cache_bytes = _op_library.cache_attrs(cache_dir, cache_bytes)
        self._batch_size = batch_size
        self._drop_remainder = bool(drop_remainder)
        if _is_path(filenames) or (isinstance(filenames, (list, tuple)) and filenames
                                   and all(_is_path(f) for f in filenames)):
            # Paths and patterns: the core's file list (patterns expanded, tables never
            # taken for data, a pattern of nothing an error naming it). An empty list
            # stays the empty dataset TFRecordDataset([]) is.
            filenames = data_files(filenames, "filenames", *list_cache)
        if isinstance(offset_tables, (str, bytes, os.PathLike)):
            offset_tables = [offset_tables]
        _op_library.check_dataset_arguments(batch_size, num_parallel_reads, _count(filenames),
                                        None if offset_tables is None else _count(offset_tables))

        self._filenames = _filenames_vector(filenames)
        self._offset_tables = (tf.constant([], dtype=tf.string, name="offset_tables")
                               if offset_tables is None
                               else _string_vector(offset_tables, "offset_tables"))
        self._page_aware = tf.convert_to_tensor(page_aware, dtype=tf.bool, name="page_aware")
        self._seed, self._seed2 = _seed_inputs(seed)
        # None: True, as Dataset.shuffle does.
        reshuffle_each_iteration = _op_library.or_default(reshuffle_each_iteration,
                                                      "reshuffle_each_iteration")
        self._reshuffle_each_iteration = bool(reshuffle_each_iteration)
        self._name = name
        op_inputs = dict(
            filenames=self._filenames,
            offset_tables=self._offset_tables,
            page_aware=self._page_aware,
            seed=self._seed,
            seed2=self._seed2,
            reshuffle_each_iteration=self._reshuffle_each_iteration,
            page_size=page_size,
            batch_size=_op_library.or_default(batch_size, "dataset_batch_size"),
            drop_remainder=self._drop_remainder,
            num_parallel_reads=num_parallel_reads,
            backend=backend,
            trust_table=bool(trust_table),
            index_missing=bool(index_missing),
            order_version=int(order_version),
            shard_remainder=shard_remainder,
            epoch_state=epoch_state or b"",
            cache_dir=cache_dir,
            cache_bytes=cache_bytes,
            seed_rule=_op_library.DEFAULTS["seed_rule"],
            start_epoch=start_epoch,
            deterministic=(_op_library.or_default(deterministic, "dataset_deterministic")
                           if deterministic is None else str(deterministic).lower()),
            metadata=self._metadata.SerializeToString())
        if shard_hint:
            variant_tensor = self._hint_variant(op_inputs)
        else:
            self._num_shards = tf.convert_to_tensor(num_shards, dtype=tf.int64,
                                                    name="num_shards")
            self._shard_index = tf.convert_to_tensor(shard_index, dtype=tf.int64,
                                                     name="shard_index")
            variant_tensor = _op_library.ops.lirs_dataset(
                num_shards=self._num_shards, shard_index=self._shard_index,
                seed_generator=gen_dataset_ops.dummy_seed_generator(), **op_inputs)
        super().__init__(variant_tensor)

    def _hint_variant(self, op_inputs):
        """The dataset of the worker's shard under HINT sharding. tf.data rewrites
        SHARD_HINT only in Dataset.shard(), never in a reader's inputs: shard k of W
        of range(2**62) starts [k, k + W], which the op reads as its shard pair
        (one top-level dataset: its seed generator reshuffles every iteration).
        Without the rewrite, iterating fails with TensorFlow's message naming
        SHARD_HINT and the policies that fill it in."""
        hint = tf.data.experimental.SHARD_HINT
        firsts = tf.data.Dataset.range(2**62).shard(hint, hint).take(2)
        return _op_library.ops.lirs_shard_hint_dataset(
            input_dataset=firsts._variant_tensor,  # pylint: disable=protected-access
            seed_generator=gen_dataset_ops.dummy_seed_generator(), **op_inputs)

    @staticmethod
    def shard_state(iterator):
        """This worker's state for elastic resume (bytes), from a live or restored
        iterator (`iter(dataset)`, eager) whose pipeline holds one LIRSDataset:
        what its current iteration delivered, its shard and seeds. Give every
        worker's to `combine_shard_states`."""
        resource = getattr(iterator, "_iterator_resource", None)
        if resource is None:
            raise TypeError("shard_state needs an eager tf.data iterator "
                            f"(iter(dataset)), got {type(iterator).__name__}")
        return _op_library.ops.lirs_iterator_shard_state(resource).numpy()

    @staticmethod
    def combine_shard_states(shard_states):
        """The epoch state (bytes) after every worker's `shard_state`, all taken
        in the same iteration of one run; give it as `epoch_state` to the new
        workers' datasets."""
        states = [bytes(s) for s in shard_states]
        return _op_library.ops.lirs_combine_shard_states(
            tf.constant(states, dtype=tf.string, shape=[len(states)])).numpy()

    @property
    def element_spec(self):
        if self._batch_size is None:
            return tf.TensorSpec([], tf.string)
        return tf.TensorSpec([self._batch_size if self._drop_remainder else None], tf.string)


def _seed_inputs(seed):
    """The op's (seed, seed2) inputs for the argument `seed`: TensorFlow's pair
    (`get_seed`, as Dataset.shuffle takes it), but for a seed known now without a
    global seed, whose pair (DEFAULT_GRAPH_SEED, seed) carries the whole seed (not
    truncated to 31 bits as get_seed does), its u64 as the i64 of the same bits.
    The core's seed rule turns the pair into orders (docs/FORMAT.md §5.9)."""
    static = seed
    if isinstance(seed, (tf.Tensor, tf.Variable)):
        static = tf.get_static_value(seed)
    if static is None:
        return random_seed.get_seed(seed)
    if hasattr(static, "item"):  # a NumPy scalar (a constant tensor's value)
        static = static.item()
    bits = _op_library.check(_lirs.op_seed_input, static)
    first, _ = graph_seed.get_seed(0)  # the global seed, or DEFAULT_GRAPH_SEED without one
    if first != graph_seed.DEFAULT_GRAPH_SEED:
        return random_seed.get_seed(int(static))
    return (tf.constant(first, dtype=tf.int64, name="seed"),
            tf.constant(bits, dtype=tf.int64, name="seed2"))


def _is_path(value):
    return isinstance(value, (str, bytes, os.PathLike))


def _count(paths):
    """How many paths a list or tuple holds; None for a tensor (not known here)."""
    return len(paths) if isinstance(paths, (list, tuple)) else None


def process_io_totals():
    """What every LIRS reader of this process read since it started:
    ``{"reads": int, "bytes_read": int}``, from the op library's readers
    (LIRSDataset, read) wherever they run in this process, e.g. inside tf.data
    service workers. Never reset: measure a span by the difference of two calls."""
    reads, bytes_read = _op_library.ops.lirs_process_io_totals()
    return {"reads": int(reads), "bytes_read": int(bytes_read)}
