"""`make demo`, second part: data refurbishing keeps the accuracy of standard training,
and is faster when augmentation is the bottleneck.

1. Takes scikit-learn's digits (1 797 8x8 images, shipped with the package), upscales
   them to 32x32, writes a small class-balanced training set (400 images) as PNG
   tf.train.Examples with tfrecord_lirs.PaddedWriter (page-padded, with its offset
   table) and the rest as a held-out validation set.
2. Trains the same small Keras CNN (same init seed, batch size and epochs) with four
   input pipelines, for each of 3 seeds:
   - standard: every epoch, the partial augmentation (decode, random translation,
     random rotation/scale/shear) and the final one (random brightness, contrast and
     noise) on every image (LIRSDataset, fresh stateless seeds per use);
   - refurbish: tfrecord_lirs.refurbish with reuse_factor=3: the partial output is
     reused for 3 epochs, the final augmentation stays random every epoch;
   - echo: data echoing, the fully augmented image reused for 3 epochs (the same
     refurbish schedule with the whole augmentation as its partial part);
   - none: no augmentation (decode only).
3. Prints a table (validation accuracy: mean and min-max over the seeds; partial
   augmentations computed; seconds) and what it shows; writes demo_out/refurbish.json
   and demo_out/refurbish.png (validation accuracy per epoch).
   Exits non-zero only if an invariant breaks: the partial augmentations a pipeline
   computed differ from what its schedule says (refurbish, echo: the schedule's
   refreshes, plus at most one recompute per epoch, see counts_agree; standard: one per
   image and epoch). An accuracy miss is reported, not an error. The seconds of the
   training runs are indicative: a 32x32 augmentation is cheap next to the model.
4. Speed where refurbishing's premise holds (augmentation CPU is the bottleneck): 256
   JPEG photos of 512x384, the input pipeline alone (no model) for 6 epochs, standard
   (decode + random-resized crop to 224x224 + colour jitter + Gaussian blur, then flip +
   normalize, on every use) against refurbish r=3 (the same functions as partial and final); prints
   images/s, the speedup and the partial augmentations each computed (counted in the
   graph by a TensorFlow variable, no Python op), and checks the counts as in 3.

    .venv/bin/python demo/refurbish_demo.py [--out demo_out] [--epochs 40] [--seeds 3]

DEMO_SCALE (env, default 1) multiplies the epochs (at least 3, one reuse cycle);
e.g. DEMO_SCALE=0.1 for a quick development run.
"""

import argparse
import json
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PIPELINES = ("standard", "refurbish", "echo", "none")
REUSE = 3
SIZE = 32          # the digits' 8x8 upscaled to SIZE x SIZE
N_TRAIN = 400      # few images, so that augmentation matters
EPOCHS = 40
BATCH = 40         # divides N_TRAIN: an epoch is N_TRAIN / BATCH whole steps
TARGET_POINTS = 1.0


def log(msg):
    print(f"[refurbish demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------- data

def written_before(meta_path, want):
    """The metadata at `meta_path` if an earlier run wrote the data `want` describes
    (its keys with the same values), else None: the data is written again."""
    if not os.path.exists(meta_path):
        return None
    with open(meta_path, encoding="utf-8") as f:
        have = json.load(f)
    return have if {k: have.get(k) for k in want} == want else None


def write_data(out, n_train, seed=7):
    """out/train.tfrecord (+ .offsets, padded) and out/val.tfrecord (plain): PNG
    Examples of the digits upscaled to SIZE x SIZE, a class-balanced training set of
    n_train and the rest for validation."""
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    import tfrecord_lirs

    meta_path = os.path.join(out, "meta.json")
    want = {"n_train": n_train, "size": SIZE, "seed": seed, "version": 1}
    have = written_before(meta_path, want)
    if have is not None:
        return have
    os.makedirs(out, exist_ok=True)
    if os.path.exists(meta_path):
        os.remove(meta_path)
    digits = load_digits()
    images = digits.images.astype(np.float32) / 16.0          # (1797, 8, 8), 0..1
    labels = digits.target.astype(np.int64)
    classes = np.unique(labels)
    rng = np.random.default_rng(seed)
    per_class = n_train // len(classes)
    train_idx = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:per_class]
                                for c in classes])
    train_idx = rng.permutation(train_idx)
    val_idx = rng.permutation(np.setdiff1d(np.arange(len(labels)), train_idx))
    big = tf.image.resize(images[..., None], [SIZE, SIZE], method="bilinear")
    pngs = [tf.io.encode_png(tf.cast(tf.round(tf.clip_by_value(im, 0, 1) * 255), tf.uint8)
                             ).numpy() for im in big]

    def example(i):
        return tf.train.Example(features=tf.train.Features(feature={
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[pngs[i]])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[labels[i]])),
        })).SerializeToString()

    train = os.path.join(out, "train.tfrecord")
    with tfrecord_lirs.PaddedWriter(train) as w:
        for k, i in enumerate(train_idx):
            assert w.write(example(i)) == k
        summary = w.close()
    with tf.io.TFRecordWriter(os.path.join(out, "val.tfrecord")) as w:
        for i in val_idx:
            w.write(example(i))
    meta = dict(want)
    meta.update({"n_val": int(len(val_idx)), "classes": int(len(classes)),
                 "train_bytes": os.path.getsize(train), "pages": summary.pages,
                 "png_bytes_mean": round(float(np.mean([len(pngs[i]) for i in train_idx])), 1)})
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    return meta


# -------------------------------------------------------------------- augmentation

class Counter:
    """Partial augmentations computed, counted where they run by a TensorFlow variable
    (`assign_add`, a native op: no Python in the map, which runs in parallel threads)."""

    def __init__(self):
        import tensorflow as tf

        self._var = tf.Variable(0, dtype=tf.int64, trainable=False)

    def bump(self, x):
        import tensorflow as tf

        with tf.control_dependencies([self._var.assign_add(1)]):
            return tf.nest.map_structure(tf.identity, x)

    @property
    def value(self):
        return int(self._var.numpy())


def decode(record):
    import tensorflow as tf

    ex = tf.io.parse_single_example(record, {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64)})
    image = tf.image.decode_png(ex["image"], channels=1)
    image = tf.image.convert_image_dtype(image, tf.float32)
    image.set_shape([SIZE, SIZE, 1])
    return image, ex["label"]


def augmentations(counter):
    """(partial, final, full): partial(record, seed) decodes and runs the heavy random
    part (translation by up to 4 pixels, rotation by up to 15 degrees, scale 0.9-1.1,
    shear), final(sample, seed) the light one (brightness, contrast, noise); full is
    both, for data echoing. All stateless: the same seed gives the same output."""
    import math

    import tensorflow as tf

    def partial(record, seed):
        image, label = counter.bump(decode(record))
        s = tf.random.experimental.stateless_split(seed, num=3)
        padded = tf.pad(image, [[4, 4], [4, 4], [0, 0]])
        image = tf.image.stateless_random_crop(padded, [SIZE, SIZE, 1], seed=s[0])
        u = tf.random.stateless_uniform([4], seed=s[1], minval=-1.0, maxval=1.0)
        angle = u[0] * (15.0 * math.pi / 180.0)
        scale = 1.0 + 0.1 * u[1]
        shear = 0.15 * u[2]
        c = (SIZE - 1) / 2.0
        cos, sin = tf.cos(angle) / scale, tf.sin(angle) / scale
        a0, a1 = cos, -sin + shear
        b0, b1 = sin, cos
        transform = tf.stack([a0, a1, c - a0 * c - a1 * c, b0, b1, c - b0 * c - b1 * c,
                              0.0, 0.0])[None]
        image = tf.raw_ops.ImageProjectiveTransformV3(
            images=image[None], transforms=transform, output_shape=[SIZE, SIZE],
            fill_value=0.0, interpolation="BILINEAR", fill_mode="CONSTANT")[0]
        image.set_shape([SIZE, SIZE, 1])
        return image, label

    def final(sample, seed):
        image, label = sample
        s = tf.random.experimental.stateless_split(seed, num=3)
        image = tf.image.stateless_random_brightness(image, 0.15, seed=s[0])
        image = tf.image.stateless_random_contrast(image, 0.7, 1.3, seed=s[1])
        image = image + tf.random.stateless_normal(tf.shape(image), seed=s[2], stddev=0.03)
        return tf.clip_by_value(image, 0.0, 1.0), label

    def full(record, seed):
        s = tf.random.experimental.stateless_split(seed, num=2)
        return final(partial(record, s[0]), s[1])

    return partial, final, full


# ------------------------------------------------------------------------ pipelines

def pipeline(name, train, n, seed, epochs, counter):
    """The training stream of `name`: epochs x n samples, batched."""
    import tensorflow as tf

    import tfrecord_lirs

    partial, final, full = augmentations(counter)
    if name in ("standard", "none"):
        ds = tfrecord_lirs.LIRSDataset([train], seed=seed).repeat(epochs)
        if name == "standard":
            # A fresh seed pair per use: (run seed, position in the stream).
            uses = tf.data.Dataset.counter()
            ds = tf.data.Dataset.zip(ds, uses).map(
                lambda rec, k: full(rec, tf.stack([tf.constant(seed, tf.int64), k])),
                num_parallel_calls=tf.data.AUTOTUNE)
        else:
            ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    elif name == "refurbish":
        ds = tfrecord_lirs.refurbish([train], partial, final, seed=seed, reuse_factor=REUSE,
                                     batch_size=BATCH, epochs=epochs)
    elif name == "echo":
        ds = tfrecord_lirs.refurbish([train], full, lambda sample, _seed: sample, seed=seed,
                                     reuse_factor=REUSE, batch_size=BATCH, epochs=epochs)
    else:
        raise ValueError(name)
    return ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)


def expected_partials(name, n, seed, epochs):
    """What the pipeline's schedule says it computes."""
    import tfrecord_lirs

    if name == "standard":
        return n * epochs
    if name == "none":
        return 0
    schedule = tfrecord_lirs.RefurbishSchedule(n, seed=seed, reuse_factor=REUSE,
                                               batch_size=BATCH)
    return sum(schedule.refreshes(e) for e in range(epochs))


def counts_agree(run, epochs):
    """The partial augmentations computed against the schedule's. Standard and none:
    exactly. Refurbish and echo: the refreshes, plus at most one per epoch: the map
    runs in parallel, and a reuse at the start of an epoch can start before the refresh
    of the same sample at the end of the epoch before has stored its output; it then
    recomputes it (the same output: the seed is the generation's)."""
    calls, expected = run["partial_calls"], run["expected_partial_calls"]
    if run["name"] in ("refurbish", "echo"):
        return expected <= calls <= expected + epochs
    return calls == expected


def model_for(seed, steps):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(seed)   # the same initial weights for every pipeline
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        layers.Input((SIZE, SIZE, 1)),
        layers.Conv2D(16, 3, strides=2, padding="same", activation="relu"),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dropout(0.3),
        layers.Dense(10),
    ])
    # A cosine decay to 0 over the run: the last epoch's accuracy is then a settled one,
    # not one step's noise.
    rate = tf.keras.optimizers.schedules.CosineDecay(3e-3, decay_steps=steps)
    model.compile(optimizer=tf.keras.optimizers.Adam(rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def train_one(name, data_dir, meta, seed, epochs):
    import tensorflow as tf

    n = meta["n_train"]
    counter = Counter()
    val = (tf.data.TFRecordDataset(os.path.join(data_dir, "val.tfrecord"))
           .map(decode).batch(256).cache())
    model = model_for(seed, epochs * (n // BATCH))
    t0 = time.perf_counter()
    ds = pipeline(name, os.path.join(data_dir, "train.tfrecord"), n, seed, epochs, counter)
    with warnings.catch_warnings():
        # The stream holds exactly epochs x steps batches (so that the augmentations
        # counted are the ones trained on); Keras warns when it finds the end after the
        # last step.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        hist = model.fit(ds, epochs=epochs, steps_per_epoch=n // BATCH, validation_data=val,
                         shuffle=False, verbose=0)
    seconds = time.perf_counter() - t0
    tf.keras.backend.clear_session()
    h = hist.history
    return {"name": name, "seed": seed, "val_accuracy": h["val_accuracy"][-1],
            "val_loss": h["val_loss"][-1], "train_accuracy": h["accuracy"][-1],
            "history": {"val_accuracy": h["val_accuracy"], "accuracy": h["accuracy"]},
            "partial_calls": counter.value,
            "expected_partial_calls": expected_partials(name, n, seed, epochs),
            "seconds": seconds}


# ------------------------------------------------------------- speed (CPU-bound)

SPEED_N = 256        # photo-sized images
SPEED_SRC = (384, 512)  # their height and width (JPEG, RGB; ImageNet-like)
SPEED_OUT = 224      # the crop's side, as ImageNet training's
SPEED_EPOCHS = 6     # two reuse cycles of r = 3
SPEED_BATCH = 32


def write_photos(out, n, seed=11):
    """out/photos.tfrecord (+ .offsets, padded): n JPEG Examples of SPEED_SRC RGB
    images with a photo's structure (smooth colour fields, edges, grain), so that
    decoding and cropping cost what they cost on real photos."""
    import numpy as np
    import tensorflow as tf

    import tfrecord_lirs

    meta_path = os.path.join(out, "photos.json")
    want = {"n": n, "side": list(SPEED_SRC), "seed": seed, "version": 1}
    have = written_before(meta_path, want)
    if have is not None:
        return have
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    path = os.path.join(out, "photos.tfrecord")
    with tfrecord_lirs.PaddedWriter(path) as w:
        for i in range(n):
            coarse = tf.image.resize(rng.random((1, 6, 6, 3), np.float32),
                                     SPEED_SRC, method="bicubic")[0]
            fine = rng.normal(0.0, 0.06, (*SPEED_SRC, 3)).astype(np.float32)
            image = tf.cast(tf.clip_by_value(coarse + fine, 0.0, 1.0) * 255, tf.uint8)
            jpeg = tf.io.encode_jpeg(image, quality=90).numpy()
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
            })).SerializeToString())
        w.close()
    meta = dict(want, bytes=os.path.getsize(path))
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    return meta


def photo_augmentations(counter):
    """(partial, final) of a CPU-bound augmentation as contrastive training uses
    (SimCLR's): partial decodes the JPEG and runs a random-resized crop to SPEED_OUT^2,
    colour jitter (brightness, contrast, saturation, hue) and a Gaussian blur of random
    width, the output kept as uint8; final flips and normalizes (light, on every use)."""
    import tensorflow as tf

    def partial(record, seed):
        ex = tf.io.parse_single_example(record, {
            "image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)})
        image = tf.io.decode_jpeg(ex["image"], channels=3)
        image, label = counter.bump((image, ex["label"]))
        s = tf.random.experimental.stateless_split(seed, num=6)
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.shape(image), tf.zeros([0, 0, 4], tf.float32), seed=s[0],
            area_range=(0.08, 1.0), aspect_ratio_range=(3 / 4, 4 / 3),
            use_image_if_no_bounding_boxes=True)
        image = tf.image.resize(tf.slice(image, begin, size), [SPEED_OUT, SPEED_OUT]) / 255.0
        image = tf.image.stateless_random_brightness(image, 0.4, seed=s[1])
        image = tf.image.stateless_random_contrast(image, 0.6, 1.4, seed=s[2])
        image = tf.image.stateless_random_saturation(image, 0.6, 1.4, seed=s[3])
        image = tf.image.stateless_random_hue(image, 0.1, seed=s[4])
        # A separable Gaussian blur, kernel a tenth of the side, sigma 0.1-2.0.
        sigma = tf.random.stateless_uniform([], seed=s[5], minval=0.1, maxval=2.0)
        x = tf.range(-(SPEED_OUT // 20), SPEED_OUT // 20 + 1, dtype=tf.float32)
        k = tf.exp(-0.5 * tf.square(x / sigma))
        k = k / tf.reduce_sum(k)
        k = tf.tile(k[:, None, None, None], [1, 1, 3, 1])
        image = tf.nn.depthwise_conv2d(image[None], k, [1, 1, 1, 1], "SAME")
        image = tf.nn.depthwise_conv2d(image, tf.transpose(k, [1, 0, 2, 3]), [1, 1, 1, 1],
                                       "SAME")[0]
        image = tf.cast(tf.round(tf.clip_by_value(image, 0.0, 1.0) * 255), tf.uint8)
        image.set_shape([SPEED_OUT, SPEED_OUT, 3])
        return image, label

    def final(sample, seed):
        image, label = sample
        image = tf.image.stateless_random_flip_left_right(image, seed=seed)
        image = (tf.cast(image, tf.float32) / 255.0 - 0.45) / 0.225
        return image, label

    return partial, final


def speed_one(name, path, seed):
    """Iterates `name`'s input pipeline (standard: partial + final on every use;
    refurbish: the partial output reused for REUSE epochs) over the photos for
    SPEED_EPOCHS epochs; its seconds, samples and partial augmentations."""
    import tensorflow as tf

    import tfrecord_lirs

    counter = Counter()
    partial, final = photo_augmentations(counter)
    t0 = time.perf_counter()
    if name == "standard":
        uses = tf.data.Dataset.counter()
        ds = tf.data.Dataset.zip(
            tfrecord_lirs.LIRSDataset([path], seed=seed).repeat(SPEED_EPOCHS), uses)
        ds = ds.map(lambda rec, k: final(partial(rec, tf.stack([tf.constant(seed, tf.int64), k])),
                                         tf.stack([tf.constant(-seed, tf.int64), k])),
                    num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = tfrecord_lirs.refurbish([path], partial, final, seed=seed, reuse_factor=REUSE,
                                     batch_size=SPEED_BATCH, epochs=SPEED_EPOCHS)
    samples = 0
    for images, _ in ds.batch(SPEED_BATCH).prefetch(tf.data.AUTOTUNE):
        samples += int(images.shape[0])
    seconds = time.perf_counter() - t0
    expected = SPEED_N * SPEED_EPOCHS
    if name == "refurbish":
        schedule = tfrecord_lirs.RefurbishSchedule(SPEED_N, seed=seed, reuse_factor=REUSE,
                                                   batch_size=SPEED_BATCH)
        expected = sum(schedule.refreshes(e) for e in range(SPEED_EPOCHS))
    return {"name": name, "seed": seed, "seconds": seconds, "samples": samples,
            "images_per_second": samples / seconds, "partial_calls": counter.value,
            "expected_partial_calls": expected}


def speed(data_dir, seed=1):
    meta = write_photos(data_dir, SPEED_N)
    path = os.path.join(data_dir, "photos.tfrecord")
    log(f"speed: {SPEED_N} JPEG photos of {SPEED_SRC[1]}x{SPEED_SRC[0]} ({meta['bytes']:,} "
        f"bytes padded), {SPEED_EPOCHS} epochs, crop {SPEED_OUT}x{SPEED_OUT} + colour jitter "
        "+ blur")
    runs = {}
    for name in ("standard", "refurbish"):
        r = speed_one(name, path, seed)
        log(f"speed {name:9s}: {r['seconds']:.1f} s, {r['images_per_second']:.0f} images/s, "
            f"{r['partial_calls']} partial augmentations")
        runs[name] = r
    return {"runs": runs, "speedup": runs["refurbish"]["images_per_second"]
            / runs["standard"]["images_per_second"],
            "config": {"n": SPEED_N, "size": list(SPEED_SRC), "crop": SPEED_OUT,
                       "epochs": SPEED_EPOCHS, "batch_size": SPEED_BATCH,
                       "reuse_factor": REUSE, "seed": seed}}


def speed_table(sp):
    std, ref = sp["runs"]["standard"], sp["runs"]["refurbish"]
    lines = ["| pipeline  | images/s | seconds | partial augs | scheduled |",
             "|-----------|----------|---------|--------------|-----------|"]
    for r in (std, ref):
        lines.append(f"| {r['name']:9s} | {r['images_per_second']:8.0f} | {r['seconds']:7.1f} "
                     f"| {r['partial_calls']:12d} | {r['expected_partial_calls']:9d} |")
    words = (f"Refurbish r={REUSE} delivered {sp['speedup']:.2f}x the images/s of standard "
             f"augmentation ({ref['seconds']:.1f} s against {std['seconds']:.1f} s for "
             f"{std['samples']} samples), computing {ref['partial_calls']} partial "
             f"augmentations against {std['partial_calls']} "
             f"({ref['partial_calls'] / max(1, std['partial_calls']):.2f}x).")
    return "\n".join(lines), words


# --------------------------------------------------------------------------- report

def mean(values):
    return sum(values) / len(values)


def summarize(runs):
    out = {}
    for name in PIPELINES:
        rs = [r for r in runs if r["name"] == name]
        if not rs:
            continue
        acc = [r["val_accuracy"] for r in rs]
        hist = [r["history"]["val_accuracy"] for r in rs]
        out[name] = {
            "val_accuracy_mean": sum(acc) / len(acc), "val_accuracy_min": min(acc),
            "val_accuracy_max": max(acc),
            "train_accuracy_mean": sum(r["train_accuracy"] for r in rs) / len(rs),
            "partial_calls": [r["partial_calls"] for r in rs],
            "scheduled_partial_calls": [r["expected_partial_calls"] for r in rs],
            "seconds_mean": sum(r["seconds"] for r in rs) / len(rs),
            "val_accuracy_per_epoch": [sum(v) / len(v) for v in zip(*hist)],
            "val_accuracy_per_epoch_min": [min(v) for v in zip(*hist)],
            "val_accuracy_per_epoch_max": [max(v) for v in zip(*hist)],
        }
    return out


def table(summary, n, epochs):
    head = ("pipeline", "val acc (mean)", "min-max", "train acc", "partial augs / run",
            "scheduled", "vs standard", "seconds / run")
    std_calls = n * epochs
    rows = []
    for name, s in summary.items():
        calls = s["partial_calls"]
        span = lambda v: str(v[0]) if len(set(v)) == 1 else f"{min(v)}-{max(v)}"  # noqa: E731
        rows.append((name, f"{100 * s['val_accuracy_mean']:.2f} %",
                     f"{100 * s['val_accuracy_min']:.2f}-{100 * s['val_accuracy_max']:.2f}",
                     f"{100 * s['train_accuracy_mean']:.1f} %", span(calls),
                     span(s["scheduled_partial_calls"]), f"{mean(calls) / std_calls:.2f}x",
                     f"{s['seconds_mean']:.1f}"))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                           for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(r) for r in rows])


def verdict(summary, seeds, epochs):
    """What the table shows, in plain words."""
    words = []
    if epochs < EPOCHS:
        words.append(f"A shortened run ({epochs} of {EPOCHS} epochs, DEMO_SCALE): the "
                     "accuracies below have not settled and say little.")
    std, ref = summary.get("standard"), summary.get("refurbish")
    met = False
    if std and ref:
        gap = 100 * (ref["val_accuracy_mean"] - std["val_accuracy_mean"])
        met = gap >= -TARGET_POINTS
        share = mean(ref["partial_calls"]) / mean(std["partial_calls"])
        words.append(
            f"Refurbish r={REUSE} computed {share:.2f}x the partial augmentations of standard "
            f"training and reached {100 * ref['val_accuracy_mean']:.2f} % validation accuracy "
            f"against standard's {100 * std['val_accuracy_mean']:.2f} % ({gap:+.2f} points, "
            f"mean of {seeds} seed(s)): the target (within {TARGET_POINTS:g} point) is "
            + ("met." if met else "MISSED."))
    for name, what in (("echo", "Data echoing (the fully augmented image reused)"),
                       ("none", "Without augmentation the model")):
        if std and name in summary:
            s = summary[name]
            gap = 100 * (s["val_accuracy_mean"] - std["val_accuracy_mean"])
            words.append(f"{what} reached {100 * s['val_accuracy_mean']:.2f} % "
                         f"({gap:+.2f} points against standard; train accuracy "
                         f"{100 * s['train_accuracy_mean']:.1f} %).")
    if seeds < 2 or not std or "none" not in summary:
        return words
    spread = max(100 * (s["val_accuracy_max"] - s["val_accuracy_min"]) for s in summary.values())
    words.append(f"For scale: the seeds of one pipeline differ by up to {spread:.2f} points, "
                 "so smaller gaps between means are not a ranking.")
    gap = 100 * (summary["none"]["val_accuracy_mean"] - std["val_accuracy_mean"])
    if gap < -spread:
        words.append("Augmentation matters on this task: no augmentation lost more than the "
                     "seeds' spread"
                     + (", and refurbishing kept the benefit while computing a third of the "
                        "partial augmentations after the first epoch." if met else "."))
    else:
        words.append("Augmentation made no difference beyond the seeds' spread in this run, "
                     "so the run cannot show what refurbishing keeps of it.")
    return words


COLORS = {"standard": "black", "refurbish": "tab:blue", "echo": "tab:orange",
          "none": "tab:red"}


def plot(summary, path, n, seeds):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, s in summary.items():
        x = list(range(1, len(s["val_accuracy_per_epoch"]) + 1))
        ax.plot(x, s["val_accuracy_per_epoch"], label=name, color=COLORS.get(name))
        ax.fill_between(x, s["val_accuracy_per_epoch_min"], s["val_accuracy_per_epoch_max"],
                        color=COLORS.get(name), alpha=0.15, linewidth=0)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy")
    # From the lowest accuracy after the first quarter of the run: the ends are what differ.
    low = min(min(v[len(v) // 4:]) for v in (s["val_accuracy_per_epoch"]
                                              for s in summary.values()))
    ax.set_ylim(max(0.0, low - 0.05), 1.0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(f"digits, {n} training images: refurbish r={REUSE} vs standard "
                 f"augmentation\n(mean of {seeds} seed(s), band: min-max)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="demo_out")
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--pipelines", default=",".join(PIPELINES))
    args = ap.parse_args()
    scale = float(os.environ.get("DEMO_SCALE", "1"))
    epochs = max(REUSE, round(args.epochs * scale))
    names = [p for p in args.pipelines.split(",") if p]
    unknown = set(names) - set(PIPELINES)
    if unknown:
        ap.error(f"unknown pipelines {sorted(unknown)}; choose from {PIPELINES}")

    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")

    t_start = time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    data_dir = os.path.join(args.out, "refurbish_data")
    meta = write_data(data_dir, N_TRAIN)
    n = meta["n_train"]
    log(f"digits upscaled to {SIZE}x{SIZE}: {n} training images (PNG Examples, "
        f"{meta['train_bytes']:,} bytes padded), {meta['n_val']} validation; "
        f"{epochs} epochs, batch {BATCH}, {args.seeds} seed(s)")
    sp = speed(data_dir)
    sp_text, sp_words = speed_table(sp)
    runs = []
    for seed in range(1, args.seeds + 1):
        for name in names:
            r = train_one(name, data_dir, meta, seed, epochs)
            log(f"seed {seed} {name:9s}: val acc {100 * r['val_accuracy']:.2f} %, "
                f"{r['partial_calls']} partial augmentations, {r['seconds']:.1f} s")
            runs.append(r)

    summary = summarize(runs)
    text = table(summary, n, epochs)
    words = verdict(summary, args.seeds, epochs)
    notes = [
        f"{n} training images, {meta['n_val']} validation, {epochs} epochs of "
        f"{n // BATCH} steps (batch {BATCH}), same initial weights per seed; val acc after "
        "the last epoch, mean and min-max over the seeds.",
        "partial augs / run: partial augmentations (decode + translation + rotation/scale/"
        "shear) computed in one run, counted where they run (min-max over the seeds); echo's "
        "include the final part. scheduled: what the pipeline's schedule says (refurbish, "
        f"echo: RefurbishSchedule's refreshes, all {n} in epoch 0, then n/{REUSE} per epoch).",
        "seconds: model.fit with its per-epoch validation, in one process; indicative only.",
    ]
    print()
    print(text)
    for note in notes:
        print("  " + note)
    print()
    for w in words:
        print(w)
    print()
    print("Speed when augmentation is the bottleneck (the input pipeline alone, no model):")
    print(sp_text)
    print("  partial augs: counted where they run; scheduled: standard n x epochs, refurbish "
          "RefurbishSchedule's refreshes.")
    print(sp_words)
    broken = [f"{r['name']} seed {r['seed']}: {r['partial_calls']} partial augmentations, "
              f"its schedule says {r['expected_partial_calls']}"
              for r in runs if not counts_agree(r, epochs)]
    broken += [f"speed {r['name']}: {r['partial_calls']} partial augmentations, its schedule "
               f"says {r['expected_partial_calls']}"
               for r in sp["runs"].values() if not counts_agree(r, SPEED_EPOCHS)]
    with open(os.path.join(args.out, "refurbish.json"), "w", encoding="utf-8") as f:
        json.dump({"summary": summary, "runs": runs, "table": text, "verdict": words,
                   "speed": dict(sp, table=sp_text, verdict=sp_words),
                   "notes": notes, "invariant_errors": broken,
                   "config": {"n_train": n, "n_val": meta["n_val"], "epochs": epochs,
                              "batch_size": BATCH, "reuse_factor": REUSE,
                              "seeds": args.seeds, "size": SIZE, "data": meta}},
                  f, indent=1)
    plot(summary, os.path.join(args.out, "refurbish.png"), n, args.seeds)
    log(f"wrote {args.out}/refurbish.json, {args.out}/refurbish.png "
        f"({time.perf_counter() - t_start:.0f} s in all)")
    if broken:
        raise SystemExit("error: " + "; ".join(broken))


if __name__ == "__main__":
    main()
