#!/usr/bin/env python3
"""Write the saved states in testdata/old_checkpoints/states_v<N>/ with the library on
PYTHONPATH, one directory per state version, so that every version keeps restoring
(tests/test_old_checkpoints.py with TensorFlow, tests/without_tf/test_old_states.py
without):

* states_v1/: written by the library of commit 62ca4bb (epoch state encoding 1 and
  worker state encoding 1: no dataset identity, no remainder rule):

      git worktree add /tmp/old 62ca4bb && make -C /tmp/old build py-ext tf-op
      PYTHONPATH=/tmp/old/python .venv/bin/python \\
          testdata/old_checkpoints/make_state_checkpoints.py 1

* states_v2/: written by today's library (epoch state encoding 2, naming each file
  of the dataset by base name, instances and bytes; worker state encoding 2, with
  the shards' remainder rule):

      PYTHONPATH=python .venv/bin/python testdata/old_checkpoints/make_state_checkpoints.py 2

Each reads testdata/mixed.tfrecord (its offset table built afresh into a temporary
directory) and writes:

* `sampler_shard_<k>.bin`: `Sampler(seed=3, num_shards=2, shard_index=k,
  order_version=2)` at epoch 1, `shard_state(consumed)` for consumed 10 and 25;
  `epoch_state.bin`: their `Sampler.combine_shard_states`; and in `cases.json`
  (key "sampler") the orders of the three shards of a `Sampler(num_shards=3)` resumed
  from it.
* `tf/ckpt*`: a `LIRSDataset(seed=7, batch_size=8, num_shards=2, shard_index=1)`
  iterator saved with `tf.train.Checkpoint` after 5 batches (its checkpoint's
  `shard_state` holds the worker state), and in `cases.json` (key "tf") the record
  indices of every batch after it.
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
SAMPLER = dict(seed=3, order_version=2)
SAMPLER_EPOCH = 1
CONSUMED = [10, 25]
TF_KWARGS = dict(seed=7, batch_size=8, num_shards=2, shard_index=1)
TF_BATCHES = 5


def main(version):
    out = HERE / f"states_v{version}"
    shutil.rmtree(out, ignore_errors=True)
    (out / "tf").mkdir(parents=True)
    index_of = {r.numpy(): i for i, r in enumerate(tf.data.TFRecordDataset(str(DATA)))}
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "mixed.tfrecord.offsets"
        tfrecord_lirs.build_offset_table(str(DATA), str(table))
        source = tfrecord_lirs.DataSource([str(DATA)], offset_tables=[str(table)])
        states = []
        for k, consumed in enumerate(CONSUMED):
            s = tfrecord_lirs.Sampler(source, num_shards=2, shard_index=k, **SAMPLER)
            s.set_epoch(SAMPLER_EPOCH)
            states.append(s.shard_state(consumed))
            (out / f"sampler_shard_{k}.bin").write_bytes(states[-1])
        epoch_state = tfrecord_lirs.Sampler.combine_shard_states(states)
        (out / "epoch_state.bin").write_bytes(epoch_state)
        resumed = []
        for j in range(3):
            s = tfrecord_lirs.Sampler(source, num_shards=3, shard_index=j, **SAMPLER)
            s.resume(epoch_state)
            resumed.append([int(i) for i in s.order()])

        ds = tfrecord_lirs.LIRSDataset(str(DATA), offset_tables=str(table), **TF_KWARGS)
        it = iter(ds)
        for _ in range(TF_BATCHES):
            next(it)
        prefix = tf.train.Checkpoint(iterator=it).write(str(out / "tf" / "ckpt"))
        rest = [[index_of[v] for v in batch.numpy()] for batch in it]
    cases = {
        "sampler": dict(kwargs=SAMPLER, epoch=SAMPLER_EPOCH, consumed=CONSUMED,
                        resumed=resumed),
        "tf": dict(kwargs=TF_KWARGS, batches=TF_BATCHES,
                   prefix=os.path.relpath(prefix, out), rest=rest),
    }
    (out / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    print("wrote", out, file=sys.stderr)


if __name__ == "__main__":
    main(int(sys.argv[1]))
