"""Synthetic label-sorted classification data for the LIRS demo.

Each instance is a tf.train.Example with
  label  int64         the class, 0..num_classes-1
  id     int64         the instance's position in the generated order (= its
                       LIRS instance id in the next-fit padded training file)
  idx    int64 list    sorted, distinct sparse feature indices in [0, vocab)
  val    float list    one value per index

Classes differ in how many features they have (so records vary in size, and
by class) and in which features they prefer: every class has a "signature" of
feature indices drawn from a pool shared by all classes (so signatures
overlap), and each feature slot is drawn from the signature with probability
`signal`, else uniformly from the vocabulary. Signature values are larger on
average than noise values. A small MLP learns it well, but not in one step.

Sampling is vectorized with numpy; only the proto assembly is a Python loop.
"""

import numpy as np
from tensorflow.core.example import example_pb2

VOCAB = 1000
NUM_CLASSES = 10
SIGNATURE = 60        # signature features per class
POOL = 200            # signatures are drawn from this shared pool of features
SIGNAL = 0.15         # probability that a feature slot comes from the signature


class Spec:
    """The class-conditional distributions (fixed by `seed`)."""

    def __init__(self, seed=0, vocab=VOCAB, num_classes=NUM_CLASSES):
        rng = np.random.default_rng(seed)
        self.vocab = vocab
        self.num_classes = num_classes
        pool = rng.choice(vocab, POOL, replace=False)
        self.signature = np.stack([rng.choice(pool, SIGNATURE, replace=False)
                                   for _ in range(num_classes)])
        # Mean feature count per class: 8 .. 44 (records ~60 .. ~400 bytes).
        self.mean_count = np.linspace(8, 44, num_classes)
        self.signal_value = rng.uniform(0.4, 1.2, size=(num_classes, SIGNATURE))

    def sample(self, labels, rng):
        """Sparse features for `labels`: (counts, indices, values) with the
        features of instance i at [offsets[i], offsets[i+1]), sorted and distinct."""
        n = len(labels)
        counts = 3 + rng.poisson(self.mean_count[labels])
        rec = np.repeat(np.arange(n), counts)
        total = len(rec)
        from_sig = rng.random(total) < SIGNAL
        slot = rng.integers(0, SIGNATURE, total)
        sig_idx = self.signature[labels[rec], slot]
        idx = np.where(from_sig, sig_idx, rng.integers(0, self.vocab, total))
        val = np.where(from_sig,
                       self.signal_value[labels[rec], slot] + rng.normal(0, 0.3, total),
                       rng.random(total)).astype(np.float32)
        # Sort by (instance, index) and drop repeated indices within an instance.
        key = rec.astype(np.int64) * self.vocab + idx
        order = np.argsort(key, kind="stable")
        key, idx, val, rec = key[order], idx[order], val[order], rec[order]
        keep = np.ones(total, dtype=bool)
        keep[1:] = key[1:] != key[:-1]
        idx, val, rec = idx[keep], val[keep], rec[keep]
        counts = np.bincount(rec, minlength=n)
        return counts, idx.astype(np.int64), val


def serialize(labels, ids, counts, idx, val):
    """Yields the serialized Example of each instance."""
    ends = np.cumsum(counts)
    starts = ends - counts
    idx_l = idx.tolist()
    val_l = val.tolist()
    for i in range(len(labels)):
        s, e = int(starts[i]), int(ends[i])
        ex = example_pb2.Example()
        f = ex.features.feature
        f["label"].int64_list.value.append(int(labels[i]))
        f["id"].int64_list.value.append(int(ids[i]))
        f["idx"].int64_list.value.extend(idx_l[s:e])
        f["val"].float_list.value.extend(val_l[s:e])
        yield ex.SerializeToString()


def generate(n, sorted_by_label, seed, spec, chunk=50_000):
    """Yields (label, serialized Example) for `n` instances, in chunks so memory
    stays small: class by class if `sorted_by_label`, else shuffled classes."""
    rng = np.random.default_rng(seed)
    c = spec.num_classes
    if sorted_by_label:
        labels = np.repeat(np.arange(c), -(-n // c))[:n]
    else:
        labels = rng.integers(0, c, n)
    for start in range(0, n, chunk):
        lab = labels[start:start + chunk]
        counts, idx, val = spec.sample(lab, rng)
        ids = np.arange(start, start + len(lab))
        yield from zip(lab.tolist(), serialize(lab, ids, counts, idx, val))


def parse_fn(vocab=VOCAB):
    """Batched parser: serialized Examples -> (dense features [B, vocab], label, id)."""
    import tensorflow as tf

    spec = {
        "label": tf.io.FixedLenFeature([], tf.int64),
        "id": tf.io.FixedLenFeature([], tf.int64),
        "sp": tf.io.SparseFeature(index_key="idx", value_key="val", dtype=tf.float32,
                                  size=vocab, already_sorted=True),
    }

    def parse(serialized):
        ex = tf.io.parse_example(serialized, spec)
        return tf.sparse.to_dense(ex["sp"]), ex["label"], ex["id"]

    return parse
