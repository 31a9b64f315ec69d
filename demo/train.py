"""Trains the demo model with ONE input pipeline; run in its own process so
its peak RSS is its own.  Called by demo/lirs_demo.py:

    python demo/train.py --pipeline lirs --data demo_out/data --out result.json \
        --epochs 6 --batch-size 256 --seed 1

Pipelines (all parse with the same function, batch to --batch-size, prefetch):
  tfip       stock TFRecordDataset of the padded file (fillers filtered out by
             tfrecord_lirs.stock_dataset) + .shuffle(--shuffle-buffer)
  lirs       LIRSDataset, instance-based full-range shuffle
  lirs_page  LIRSDataset, page-aware (a page's instances together)
  in_memory  every serialized record in RAM, .shuffle(N) (a full shuffle)

Every training batch passes a recorder (a tf.py_function on the batch's
instance ids and labels, cheap: once per batch) so the result reports what
the model actually saw: each epoch is checked to cover every instance exactly
once, classes per batch are counted, and LIRS page reads are computed from
the real order.
"""

import argparse
import json
import math
import os
import resource
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
warnings.filterwarnings("ignore", module="keras")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

tf.get_logger().setLevel("ERROR")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data as demo_data  # noqa: E402
import tfrecord_lirs  # noqa: E402

PIPELINES = ("tfip", "lirs", "lirs_page", "in_memory")


class Recorder:
    """Collects (ids, labels) of every training batch, per Keras epoch."""

    def __init__(self):
        self.epoch = -1           # batches outside fit's epochs are ignored
        self.batches = {}

    def record(self, ids, labels):
        if self.epoch >= 0:
            self.batches.setdefault(self.epoch, []).append((ids.numpy(), labels.numpy()))
        return labels

    def wrap(self, ds):
        def tap(x, y, ids):
            y2 = tf.py_function(self.record, [ids, y], Tout=tf.int64)
            y2.set_shape(y.shape)
            return x, y2
        return ds.map(tap)


class EpochMarker(keras.callbacks.Callback):
    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def on_epoch_begin(self, epoch, logs=None):
        self.recorder.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self.recorder.epoch = -1


def build_dataset(name, train, args, n_train):
    parse = demo_data.parse_fn()
    b = args.batch_size
    if name == "tfip":
        ds = (tfrecord_lirs.stock_dataset([train])
              .shuffle(args.shuffle_buffer, seed=args.seed, reshuffle_each_iteration=True)
              .batch(b))
    elif name in ("lirs", "lirs_page"):
        ds = tfrecord_lirs.LIRSDataset([train], page_aware=(name == "lirs_page"),
                                       seed=args.seed, page_size=args.page_size,
                                       batch_size=b)
    elif name == "in_memory":
        chunks = [c.numpy() for c in tfrecord_lirs.stock_dataset([train]).batch(8192)]
        records = np.concatenate(chunks)
        assert len(records) == n_train
        ds = (tf.data.Dataset.from_tensor_slices(records)
              .shuffle(len(records), seed=args.seed, reshuffle_each_iteration=True)
              .batch(b))
    else:
        raise ValueError(name)
    return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def make_model(vocab, num_classes, seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input(shape=(vocab,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(num_classes),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def page_reads(recorder, epochs, offsets, page_size):
    """Per epoch: the number of distinct (batch, page) pairs, the pages each
    batch touches (every instance here is a small record inside one page)."""
    pages = offsets // page_size
    out = []
    for e in range(epochs):
        total = 0
        for ids, _ in recorder.batches.get(e, []):
            total += len(np.unique(pages[ids]))
        out.append(int(total))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", choices=PIPELINES, required=True)
    ap.add_argument("--data", required=True, help="directory with train.tfrecord, val.tfrecord, meta.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1, help="data-order seed (all pipelines)")
    ap.add_argument("--model-seed", type=int, default=0)
    ap.add_argument("--shuffle-buffer", type=int, default=10_000)
    ap.add_argument("--page-size", type=int, default=4096)
    args = ap.parse_args()

    with open(os.path.join(args.data, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    train = os.path.join(args.data, "train.tfrecord")
    val = os.path.join(args.data, "val.tfrecord")
    n_train = meta["n_train"]

    model = make_model(meta["vocab"], meta["num_classes"], args.model_seed)
    parse = demo_data.parse_fn(meta["vocab"])
    val_ds = (tf.data.TFRecordDataset(val).batch(1024)
              .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
              .map(lambda x, y, _id: (x, y)).prefetch(2))

    recorder = Recorder()
    t0 = time.perf_counter()
    train_ds = recorder.wrap(build_dataset(args.pipeline, train, args, n_train))
    train_ds = train_ds.prefetch(tf.data.AUTOTUNE)
    hist = model.fit(train_ds, validation_data=val_ds, epochs=args.epochs,
                     callbacks=[EpochMarker(recorder)],
                     verbose=1 if sys.stdout.isatty() else 2)
    seconds = time.perf_counter() - t0
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    # What the model saw: every epoch is a permutation of all instances.
    classes_per_batch, epochs_differ = [], []
    prev = None
    for e in range(args.epochs):
        batches = recorder.batches.get(e, [])
        ids = np.concatenate([i for i, _ in batches])
        if not np.array_equal(np.sort(ids), np.arange(n_train)):
            raise SystemExit(f"{args.pipeline}: epoch {e} is not a permutation of the "
                             f"{n_train} instances ({len(ids)} ids seen)")
        classes_per_batch.extend(len(np.unique(lab)) for _, lab in batches)
        if prev is not None:
            epochs_differ.append(not np.array_equal(prev, ids))
        prev = ids

    offsets = np.fromfile(train + ".offsets", dtype="<u8").astype(np.int64)
    file_pages = math.ceil(os.path.getsize(train) / args.page_size)
    if args.pipeline in ("lirs", "lirs_page"):
        per_epoch = page_reads(recorder, args.epochs, offsets, args.page_size)
    elif args.pipeline == "tfip":
        per_epoch = [file_pages] * args.epochs          # sequential: each page once
    else:
        per_epoch = [file_pages] + [0] * (args.epochs - 1)  # loaded once, then RAM

    result = {
        "name": args.pipeline,
        "val_accuracy": float(hist.history["val_accuracy"][-1]),
        "val_loss": float(hist.history["val_loss"][-1]),
        "seconds": round(seconds, 2),
        "pages_read": int(sum(per_epoch)),
        "pages_read_per_epoch": per_epoch,
        "file_pages": file_pages,
        "peak_rss_mb": round(peak_rss_mb, 1),
        "mean_classes_per_batch": round(float(np.mean(classes_per_batch)), 2),
        "epoch_orders_differ": epochs_differ,
        "history": {k: [float(v) for v in vals] for k, vals in hist.history.items()},
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
