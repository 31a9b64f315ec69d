"""Data refurbishing as a `tf.data.Dataset` (docs/FORMAT.md §7): `tfrecord_lirs.refurbish`.

    ds = tfrecord_lirs.refurbish(files, partial=crop_flip, final=rand_augment, seed=42,
                                 reuse_factor=3, batch_size=256, store="/dev/shm/p")
    ds = ds.batch(256).prefetch(tf.data.AUTOTUNE)

`partial(record, seed)` and `final(sample, seed)` are TensorFlow functions of a scalar
`tf.string` record (resp. the partial output, a tensor or a structure of tensors) and a
stateless seed (`int64[2]`, for `tf.image.stateless_random_*`). The schedule, the seeds
(and their `int64[2]` form, docs/FORMAT.md §7), the store and the step are the Rust
core's, run by the op library's kernels (`LIRSRefurbishUses`, `LIRSRefurbishLookup`,
`LIRSRefurbishKeep`) around the graph's `partial`: the graph holds TensorFlow ops only,
so the map runs in parallel with no Python per sample. A refresh reads the record and
stores the partial output (`tf.io.serialize_tensor`); a reuse reads the store and not
the TFRecord file.

Jobs that run at the same time on one store directory (tf.data, PyTorch, Grain; same
data, partial function name and seed) compute each partial output once in all: the
lookup kernel claims a miss, and a job that finds another's claim waits for its entry
(docs/FORMAT.md §7.1). A PyTorch or Grain job shares tf.data's entries when it stores
the same bytes: give it `serializer=serializer(spec)`. `augment(files, fn, share=dir)`
(also `tfrecord_lirs.augment`) is the plain case (one augmentation per sample per
epoch, shared by a sweep's jobs).
"""

import os
import uuid

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.eager import context

from tfrecord_lirs import _checks, _op_library
from tfrecord_lirs.refurbishing import RefurbishSchedule, open_store
from tfrecord_lirs.sources import DataSource


def _serialize(sample):
    parts = [tf.io.serialize_tensor(t) for t in tf.nest.flatten(sample)]
    return tf.io.serialize_tensor(tf.stack(parts))


def _deserialize(payload, spec):
    flat = tf.nest.flatten(spec)
    parts = tf.io.parse_tensor(payload, tf.string)
    out = []
    for i, s in enumerate(flat):
        t = tf.io.parse_tensor(parts[i], s.dtype)
        t.set_shape(s.shape)
        out.append(t)
    return tf.nest.pack_sequence_as(spec, out)


# A call's config with Grappler off, as eager mode and the map's own function (which
# tf.data leaves unoptimized) run: Grappler's arithmetic rewrites (`x * a / b` folded
# to `x * (a / b)`) change float results in the last bits, and a partial output must
# not depend on which path computed it.
_UNOPTIMIZED = config_pb2.ConfigProto(graph_options=config_pb2.GraphOptions(
    rewrite_options=rewriter_config_pb2.RewriterConfig(disable_meta_optimizer=True)))


def _call_apart(fn):
    """`fn()` as a call of a function of its own, neither inlined into the caller nor
    optimized by Grappler. In a `tf.cond` branch not taken, an inlined `partial` costs
    every one of its ops a dead-tensor pass (~110 us of a hit's ~455 us CPU in row
    14's tf.data bench: 4 RandAugment layers); a call is one op."""
    call = tf.function(fn, experimental_attributes={"_noinline": True})
    eager = context.context()
    saved = eager.function_call_options
    eager.function_call_options = context.FunctionCallOptions(
        executor_type=saved.executor_type, config_proto=_UNOPTIMIZED)
    try:
        return call()
    finally:
        eager.function_call_options = saved


def serializer(spec):
    """`(dumps, loads)` of the bytes tf.data's `refurbish` stores, for the partial
    outputs of `spec` (a `tf.TensorSpec` or a structure of them): give it as
    `serializer=` to a PyTorch or Grain job (`tfrecord_lirs.torch.RefurbishDataset`,
    `AugmentDataset`, `tfrecord_lirs.grain`) that shares a store with tf.data jobs;
    `loads` gives numpy arrays."""
    def dumps(sample):
        return _serialize(tf.nest.map_structure(tf.convert_to_tensor, sample)).numpy()

    def loads(payload):
        return tf.nest.map_structure(lambda t: t.numpy(), _deserialize(payload, spec))

    return dumps, loads


def augment(files, augment, *, seed=None, share=None, batch_size=None, num_shards=None,
            shard_index=None, order_version=None, epochs=None, start_epoch=None,
            dataset_id=None, augment_name=None, store_bytes=None, offset_tables=None,
            num_parallel_calls=None):
    """A `tf.data.Dataset` of `augment(record, seed)` over `files` epoch after epoch,
    the seed derived from (seed, id, epoch) by the core, so a sample does not depend on
    who computed it. With `share` (a directory), the jobs that run at the same time
    with the same data, seed and augment (a hyper-parameter sweep; tf.data, or PyTorch's
    `AugmentDataset(share=)` with `serializer=serializer(spec)`) compute each
    augmented sample once in all, and every job sees the same samples. It is
    `refurbish` with `reuse_factor=1` and no final augmentation; `augment_name` (None:
    the function's module and qualified name) keys the store."""
    return refurbish(files, augment, None, seed=seed, reuse_factor=1,
                     batch_size=batch_size, store=share, num_shards=num_shards,
                     shard_index=shard_index, order_version=order_version, epochs=epochs,
                     start_epoch=start_epoch, dataset_id=dataset_id,
                     partial_name=augment_name, store_bytes=store_bytes,
                     offset_tables=offset_tables, num_parallel_calls=num_parallel_calls)


def refurbish(files, partial, final, *, seed=None, reuse_factor=None, batch_size=None,
              store=None, num_shards=None, shard_index=None, order_version=None,
              epochs=None, start_epoch=None, dataset_id=None, partial_name=None,
              store_bytes=None, offset_tables=None, num_parallel_calls=None):
    """A `tf.data.Dataset` of `final(partial(record, seed), seed)` over the refurbish
    schedule of `files` (their offset tables are needed), epoch after epoch from
    `start_epoch` (`epochs`: how many; None: without end). The partial output is stored
    on a refresh and reused for `reuse_factor` epochs: `store` is a directory (shared by
    processes and jobs with the same files, partial function and seed) or None (this
    process's memory); jobs that run at the same time on one directory compute each
    partial output once in all (the module docs). `final` None: the partial output as
    it is. Arguments left None take the core's defaults; `num_parallel_calls` is the
    map's, which keeps the schedule's order (None: the core's 16, more than the cores,
    as a refresh costs several reuses and holds back the uses after it, and a use
    another job is computing holds its call until it is stored). With more than one
    call in flight, a reuse early in an epoch can start before the refresh of the same
    sample late in the epoch before has stored its output: it then computes the same
    output again (counted as a recompute), so the partial function runs once per
    refresh exactly only with `num_parallel_calls=1`.

    The graph holds TensorFlow ops only (no `tf.numpy_function`): give `partial` and
    `final` as TensorFlow ops too, and the map's calls run in parallel without the GIL.
    The partial output is stored as `tf.io.serialize_tensor` of its parts (exact for
    every dtype and structure); its cardinality is unknown, as `flat_map`'s."""
    source = DataSource(files, offset_tables)
    schedule = RefurbishSchedule(source, seed=seed, reuse_factor=reuse_factor,
                                 batch_size=batch_size, num_shards=num_shards,
                                 shard_index=shard_index, order_version=order_version)
    options = schedule.options
    partial_store = open_store(store, source, partial, options["seed"],
                               dataset_id, partial_name, store_bytes)
    partial_store.stats()  # a wrong store is an error here
    store_dir, store_dataset, store_partial, _, bound = partial_store._args
    cache_dir, cache_bytes = _op_library.cache_attrs(None, None)
    # The values the core resolved, as the ops' attrs; `store_key` makes every kernel
    # of this pipeline share one step (one store, also in memory).
    attrs = dict(
        page_size=_op_library.or_default(None, "page_size"),
        backend=_op_library.or_default(None, "backend"),
        trust_table=bool(_op_library.or_default(None, "trust_table")),
        index_missing=bool(_op_library.or_default(None, "index_missing")),
        cache_dir=cache_dir, cache_bytes=cache_bytes,
        seed=options["seed"] - (1 << 64) if options["seed"] >= 1 << 63 else options["seed"],
        reuse_factor=int(options["reuse_factor"]), batch_size=options["batch_size"],
        num_shards=options["num_shards"], shard_index=options["shard_index"],
        order_version=options["order_version"],
        store_dir=b"" if store_dir is None else os.fsencode(store_dir),
        store_dataset=store_dataset, store_partial=store_partial,
        store_bytes=-1 if bound is None else int(bound), store_key=uuid.uuid4().hex)
    tables = source._args[1]
    files_t = tf.constant(source.paths, tf.string)
    tables_t = tf.constant([t or "" for t in tables or []], tf.string)
    ops = _op_library.ops

    def uses_of(epoch):
        ids, refresh, generation = ops.lirs_refurbish_uses(files_t, tables_t, epoch, **attrs)
        return tf.data.Dataset.from_tensor_slices(
            (ids, refresh, generation, tf.fill(tf.shape(ids), epoch)))

    record_spec = tf.TensorSpec([], tf.string)
    seed_spec = tf.TensorSpec([2], tf.int64)
    out_spec = tf.nest.map_structure(
        lambda t: tf.TensorSpec(t.shape, t.dtype),
        tf.function(partial).get_concrete_function(record_spec, seed_spec).structured_outputs)

    def use(id, refresh, generation, epoch):
        # `payload`: the stored partial output if found, else the record.
        # `pending`: a miss's claim until the keep; freed with a failed `partial`,
        # it releases the claim then (another job waiting for it computes it).
        found, payload, pseed, fseed, pending = ops.lirs_refurbish_lookup(
            files_t, tables_t, id, generation, epoch, **attrs)

        def compute():
            sample = partial(payload, pseed)
            done = ops.lirs_refurbish_keep(files_t, tables_t, id, generation, epoch, refresh,
                                           _serialize(sample), pending, **attrs)
            with tf.control_dependencies([done]):
                return tf.nest.map_structure(tf.identity, sample)

        sample = tf.cond(found, lambda: _deserialize(payload, out_spec),
                         lambda: _call_apart(compute))
        sample = tf.nest.map_structure(lambda t, s: tf.ensure_shape(t, s.shape), sample,
                                       out_spec)
        return sample if final is None else final(sample, fseed)

    count = -1 if epochs is None else int(epochs)
    start_epoch = _checks.or_default(start_epoch, "start_epoch")
    epochs_ds = tf.data.Dataset.range(start_epoch, tf.int64.max if count < 0
                                      else start_epoch + count)
    parallel = _checks.or_default(num_parallel_calls, "refurbish_num_parallel_calls")
    ds = epochs_ds.flat_map(uses_of).map(use, num_parallel_calls=parallel,
                                         deterministic=True)
    # The store and the file reads are the map's only external state, and the store is
    # a memo (the outputs do not depend on it): an iterator checkpoint keeps positions
    # only, so it is taken with the store left out.
    pipeline = tf.data.Options()
    pipeline.experimental_external_state_policy = (
        tf.data.experimental.ExternalStatePolicy.IGNORE)
    return ds.with_options(pipeline)


__all__ = ["augment", "refurbish", "serializer"]
