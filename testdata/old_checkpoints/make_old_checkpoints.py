#!/usr/bin/env python3
"""Write the iterator checkpoints in testdata/old_checkpoints/ with an OLD op library.

These checkpoints prove that checkpoints written before the dataset cursor moved to
Rust (the op's own keys `seed`, `seed2`, `position`, `order_version`,
`delivered_after`) still restore (tests/test_old_checkpoints.py). They were written by
the op library built from commit 3e4fb1c, the last one whose kernel kept that state
in C++:

    git worktree add /tmp/old 3e4fb1c && make -C /tmp/old/tf_op PYTHON=$PWD/.venv/bin/python
    PYTHONPATH=/tmp/old/python .venv/bin/python \\
        testdata/old_checkpoints/make_old_checkpoints.py

Each case reads testdata/mixed.tfrecord (its offset table is built afresh, into a
temporary directory: a table is a function of the file), takes `consumed` elements,
saves the iterator with `tf.train.Checkpoint` under `<case>/ckpt`, and records in
cases.json what the old library delivered after that point: the record indices
(positions in mixed.tfrecord) of every remaining element, in order.
"""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "mixed.tfrecord"

# name -> (LIRSDataset keyword arguments, epochs (repeat), elements consumed before
# the save, deterministic delivery)
CASES = {
    "elements": (dict(seed=21), 2, 131, True),
    "batches": (dict(seed=5, batch_size=16), 2, 25, True),
    "page_aware_shard": (dict(seed=3, page_aware=True, num_shards=2, shard_index=1,
                              reshuffle_each_iteration=False), 3, 170, True),
    "unordered_batches": (dict(seed=9, batch_size=32, num_parallel_reads=2), 1, 4, False),
}


def dataset(table, kwargs, epochs, deterministic):
    ds = tfrecord_lirs.LIRSDataset(str(DATA), offset_tables=str(table), **kwargs)
    ds = ds.repeat(epochs)
    options = tf.data.Options()
    options.deterministic = deterministic
    return ds.with_options(options)


def indices(element, index_of):
    """The record indices of one element (a record or a batch of them)."""
    values = element.numpy()
    return [index_of[v] for v in (values if element.shape.rank else [values])]


def main():
    index_of = {r.numpy(): i for i, r in enumerate(tf.data.TFRecordDataset(str(DATA)))}
    assert len(index_of) == 304, "mixed.tfrecord's payloads must be distinct"
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "mixed.tfrecord.offsets"
        tfrecord_lirs.build_offset_table(str(DATA), str(table))
        cases = {}
        for name, (kwargs, epochs, consumed, deterministic) in CASES.items():
            it = iter(dataset(table, kwargs, epochs, deterministic))
            for _ in range(consumed):
                next(it)
            out = HERE / name
            shutil.rmtree(out, ignore_errors=True)
            prefix = tf.train.Checkpoint(iterator=it).write(str(out / "ckpt"))
            rest = [indices(e, index_of) for e in it]
            cases[name] = dict(kwargs=kwargs, epochs=epochs, consumed=consumed,
                               deterministic=deterministic,
                               prefix=os.path.relpath(prefix, HERE), rest=rest)
    (HERE / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    print("wrote", ", ".join(cases), file=sys.stderr)


if __name__ == "__main__":
    main()
