// Op registrations of the tfrecord-lirs TensorFlow library.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

// The attrs' defaults are the Rust core's (crates/tfrecord-lirs/src/options/
// defaults.rs), which C++ cannot name: tests/without_tf/test_contract.py checks
// each one here against it, and tests/test_contract.py the registered op's.

// The attrs of LIRSDataset and LIRSShardHintDataset, one list so the two cannot
// drift (a macro: REGISTER_OP's builder is one chained expression):
// - page_size: the page size the files were padded to;
// - batch_size: 0 scalar elements; B > 0 1-D batches of B payloads formed in
//   the kernel;
// - num_parallel_reads: I/O threads fetching the order ahead of the consumer;
//   -1 = automatic;
// - backend: "auto" (default: pread, plus a lease-guarded memory map for files
//   of small records), "pread", "mmap" (hot, immutable files) or "direct"
//   (O_DIRECT, bypasses the page cache);
// - trust_table: records between table entries are another tool's padding (see
//   ReaderOptions::trust_table in the Rust core);
// - index_missing: a file without its offset table gets one built on open (the
//   scan of `tfrecord-lirs index`); false: a missing table is NotFound;
// - deterministic: "true" in order; "false" windows handed out as their reads
//   complete (RINAS); "default" as tf.data.Options().deterministic says (True if
//   unset);
// - order_version: the order algorithm (docs/FORMAT.md §5): 1 or 2 (Rust checks
//   it);
// - shard_remainder: what shards do with the remainder (docs/FORMAT.md §5.5):
//   "keep", "drop" (every shard floor(N/K)) or "pad" (ceil(N/K), the order
//   repeated); Rust checks it;
// - epoch_state: elastic resume, an epoch state (LIRSCombineShardStates) the
//   first iteration starts from, as this shard of num_shards; '' = none;
// - cache_dir, cache_bytes: the local tier of URL reads (docs/FORMAT.md §8): a
//   directory, '' = not given (then TFRECORD_LIRS_CACHE_DIR, else none); its
//   bound in bytes, -1 = not given (32 GiB). Rust applies the rule and checks
//   both;
// - seed_rule: which seed and epoch an iteration orders with (docs/FORMAT.md
//   §5.9): 0, the rule of graphs saved before it existed (each iteration's pair
//   folded); 1 (what Python passes): an op seed without a global seed orders as
//   the TensorFlow-free front ends do. Rust checks it;
// - start_epoch: the epoch the first iteration walks (Rust checks it: >= 0).
#define LIRS_DATASET_ATTRS                        \
  Attr("reshuffle_each_iteration: bool = true")   \
      .Attr("page_size: int = 4096")              \
      .Attr("batch_size: int = 0")                \
      .Attr("drop_remainder: bool = false")       \
      .Attr("num_parallel_reads: int = -1")       \
      .Attr("backend: string = 'auto'")           \
      .Attr("trust_table: bool = false")          \
      .Attr("index_missing: bool = true")         \
      .Attr("deterministic: string = 'default'")  \
      .Attr("order_version: int = 1")             \
      .Attr("shard_remainder: string = 'keep'")   \
      .Attr("epoch_state: string = ''")           \
      .Attr("cache_dir: string = ''")             \
      .Attr("cache_bytes: int = -1")              \
      .Attr("seed_rule: int = 0")                 \
      .Attr("start_epoch: int = 0")               \
      .Attr("metadata: string = ''")

// A full-range shuffled (or sequential-per-seed) dataset of the instances of
// one or more TFRecord files with offset tables. Elements are scalar strings,
// or 1-D string batches when `batch_size` > 0.
// `seed`, `seed2`, `seed_generator` and `reshuffle_each_iteration` follow the
// protocol of ShuffleDatasetV3.
REGISTER_OP("LIRSDataset")
    .Input("filenames: string")
    .Input("offset_tables: string")
    .Input("page_aware: bool")
    .Input("seed: int64")
    .Input("seed2: int64")
    .Input("seed_generator: resource")
    .Input("num_shards: int64")
    .Input("shard_index: int64")
    .Output("handle: variant")
    .LIRS_DATASET_ATTRS
    .SetIsStateful()  // Owns/shares a seed generator; reads files.
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle unused;
      // filenames / offset_tables: scalar or vector.
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(0), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(1), 1, &unused));
      for (int i = 2; i < 8; ++i) {
        TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
      }
      return shape_inference::ScalarShape(c);
    });

// LIRSDataset of the worker's shard under tf.data's HINT sharding: the shard
// pair is read from `input_dataset`'s first two elements a, b (num_shards b - a,
// shard_index a), range(2**62).shard(SHARD_HINT, SHARD_HINT).take(2), which
// the HINT rewrite fills in. The other inputs and the attrs are LIRSDataset's.
REGISTER_OP("LIRSShardHintDataset")
    .Input("input_dataset: variant")
    .Input("filenames: string")
    .Input("offset_tables: string")
    .Input("page_aware: bool")
    .Input("seed: int64")
    .Input("seed2: int64")
    .Input("seed_generator: resource")
    .Output("handle: variant")
    .LIRS_DATASET_ATTRS
    .SetIsStateful()  // Owns/shares a seed generator; reads files.
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(1), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(2), 1, &unused));
      for (int i = 3; i < 7; ++i) {
        TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
      }
      return shape_inference::ScalarShape(c);
    });

// Random access: payloads of instances `ids` (global ids across `filenames`,
// in list order). `offset_tables` empty means "<file>.offsets" for each file.
REGISTER_OP("LIRSRead")
    .Input("filenames: string")
    .Input("offset_tables: string")
    .Input("ids: int64")
    .Output("payloads: string")
    .Attr("page_size: int = 4096")  // Page size the files were padded to.
    // I/O backend: "auto" (default), "pread", "mmap" or "direct" (O_DIRECT).
    .Attr("backend: string = 'auto'")
    .Attr("trust_table: bool = false")  // As for LIRSDataset.
    .Attr("index_missing: bool = true")  // As for LIRSDataset.
    // The local tier of URL reads, as for LIRSDataset ('' and -1: not given).
    .Attr("cache_dir: string = ''")
    .Attr("cache_bytes: int = -1")
    // Reads files: never constant-fold. Allowlisted for dataset functions
    // (lirs_kernels.cc), so map(read) pipelines can be checkpointed.
    .SetIsStateful()
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(0), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(1), 1, &unused));
      shape_inference::ShapeHandle ids;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &ids));
      c->set_output(0, ids);
      return absl::OkStatus();
    });

// Elastic resume: the LIRSDataset state (bytes) of the iterator
// `iterator_resource`, whose pipeline holds exactly one LIRSDataset.
REGISTER_OP("LIRSIteratorShardState")
    .Input("iterator_resource: resource")
    .Output("shard_state: string")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape);

// Elastic resume: the epoch state after the shard states of every worker of
// one run (one iteration).
REGISTER_OP("LIRSCombineShardStates")
    .Input("shard_states: string")
    .Output("epoch_state: string")
    .SetShapeFn(shape_inference::ScalarShape);

// Elementwise: is this record payload a LIRS filler record?
REGISTER_OP("LIRSIsFiller")
    .Input("records: string")
    .Output("is_filler: bool")
    .SetShapeFn(shape_inference::UnchangedShape);

// What every LIRS reader of this process read since it started (reads, bytes):
// never reset, so a span is the difference of two runs. Stateful: never
// constant-folded or cached.
REGISTER_OP("LIRSProcessIoTotals")
    .Output("reads: int64")
    .Output("bytes_read: int64")
    .SetIsStateful()
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      c->set_output(0, c->Scalar());
      c->set_output(1, c->Scalar());
      return absl::OkStatus();
    });

}  // namespace tensorflow
