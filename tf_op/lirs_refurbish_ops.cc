// The refurbish ops of `tfrecord_lirs.refurbish` (docs/FORMAT.md §7.2), which
// make its tf.data graph of TensorFlow ops only (no Python per sample): an
// epoch's uses, a use's lookup and the keep of what the graph's `partial`
// computed. Glue only: the step (schedule, store, seeds, reads) is Rust's
// RefurbishStep (crates/tfrecord-lirs-ffi/src/refurbish.rs), opened from the
// attrs and the file inputs and shared by every kernel with the same attrs.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lirs_status.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/dataset_stateful_op_allowlist.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/variant.h"
#include "tensorflow/core/framework/variant_encode_decode.h"
#include "tensorflow/core/framework/variant_tensor_data.h"
#include "tensorflow/core/platform/mutex.h"
#include "tensorflow/core/platform/unbounded_work_queue.h"

namespace tensorflow {
namespace {

namespace lirs = ::tfrecord_lirs;
namespace ffi = lirs::ffi;
using lirs::CallRust;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

// The attrs of every refurbish op (no defaults: Python passes the values the
// Rust core resolved). The reader's are LIRSRead's; `seed` is the u64 seed's
// int64 bits; `store_dir` '' = in this process's memory; `store_bytes` -1 = the
// core's bound; `store_key` names one pipeline's store.
#define LIRS_REFURBISH_ATTRS                                              \
  Attr("page_size: int")                                                  \
      .Attr("backend: string")                                            \
      .Attr("trust_table: bool")                                          \
      .Attr("index_missing: bool")                                        \
      .Attr("cache_dir: string")                                          \
      .Attr("cache_bytes: int")                                           \
      .Attr("seed: int")                                                  \
      .Attr("reuse_factor: int")                                          \
      .Attr("batch_size: int")                                            \
      .Attr("num_shards: int")                                            \
      .Attr("shard_index: int")                                           \
      .Attr("order_version: int")                                         \
      .Attr("store_dir: string")                                          \
      .Attr("store_dataset: string")                                      \
      .Attr("store_partial: string")                                      \
      .Attr("store_bytes: int")                                           \
      .Attr("store_key: string")

absl::Status ScalarInputs(InferenceContext* c, int from) {
  ShapeHandle unused;
  TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(0), 1, &unused));
  TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(1), 1, &unused));
  for (int i = from; i < c->num_inputs(); ++i) {
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
  }
  return absl::OkStatus();
}

// The uses of `epoch`, in delivery order.
REGISTER_OP("LIRSRefurbishUses")
    .Input("filenames: string")
    .Input("offset_tables: string")
    .Input("epoch: int64")
    .Output("ids: int64")
    .Output("refresh: bool")
    .Output("generation: int64")
    .LIRS_REFURBISH_ATTRS
    .SetIsStateful()  // Reads files: never constant-folded.
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(ScalarInputs(c, 2));
      for (int i = 0; i < 3; ++i) c->set_output(i, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

// One use's first half: `found` if the store holds the partial output of
// (id, generation), then `payload` is its bytes; else `payload` is the record
// to compute it from. The seeds are the stateless ops' int64[2].
REGISTER_OP("LIRSRefurbishLookup")
    .Input("filenames: string")
    .Input("offset_tables: string")
    .Input("id: int64")
    .Input("generation: int64")
    .Input("epoch: int64")
    .Output("found: bool")
    .Output("payload: string")
    .Output("partial_seed: int64")
    .Output("final_seed: int64")
    .Output("pending: variant")
    .LIRS_REFURBISH_ATTRS
    .SetIsStateful()  // Reads the store and files.
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(ScalarInputs(c, 2));
      c->set_output(0, c->Scalar());
      c->set_output(1, c->Scalar());
      c->set_output(2, c->Vector(2));
      c->set_output(3, c->Vector(2));
      c->set_output(4, c->Scalar());
      return absl::OkStatus();
    });

// One use's second half: counts the output `partial` computed at `epoch` and
// stores `payload` unless no use will come (Rust's rule); whether it stored it.
REGISTER_OP("LIRSRefurbishKeep")
    .Input("filenames: string")
    .Input("offset_tables: string")
    .Input("id: int64")
    .Input("generation: int64")
    .Input("epoch: int64")
    .Input("refresh: bool")
    .Input("payload: string")
    .Input("pending: variant")
    .Output("stored: bool")
    .LIRS_REFURBISH_ATTRS
    .SetIsStateful()  // Writes the store.
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(ScalarInputs(c, 2));
      c->set_output(0, c->Scalar());
      return absl::OkStatus();
    });

// The Rust step of a kernel's attrs and file inputs, opened at the first call
// (or when those inputs change).
// A use between its lookup (which said compute) and its keep, as a tensor: the keep
// takes it, and if the graph's partial fails first, the tensor is freed with the
// failed call and the core releases the claim the lookup took.
struct RefurbishPending {
  std::shared_ptr<rust::Box<ffi::RefurbishPending>> use;
  std::string TypeName() const { return "tfrecord_lirs.RefurbishPending"; }
  // A claim of this process: never serialized.
  void Encode(VariantTensorData* data) const {}
  bool Decode(const VariantTensorData& data) { return false; }
};

class StepCache {
 public:
  explicit StepCache(OpKernelConstruction* ctx) {
    OP_REQUIRES_OK(ctx, lirs::AttrValues(ctx->def(), &attrs_));
  }

  absl::Status Step(OpKernelContext* ctx, const ffi::RefurbishStep** step) {
    std::vector<std::string> files, tables;
    TF_RETURN_IF_ERROR(
        lirs::StringList(ctx->input(0), lirs::attr::kFileNames, &files));
    TF_RETURN_IF_ERROR(
        lirs::StringList(ctx->input(1), lirs::attr::kOffsetTables, &tables));
    mutex_lock l(mu_);
    if (step_ == nullptr || files != files_ || tables != tables_) {
      std::unique_ptr<rust::Box<ffi::RefurbishStep>> opened;
      TF_RETURN_IF_ERROR(CallRust("", [&](ffi::Status& st) {
        opened = std::make_unique<rust::Box<ffi::RefurbishStep>>(
            ffi::open_refurbish_step(attrs_, lirs::FilePaths(files),
                                     lirs::FilePaths(tables), st));
      }));
      // A step stays alive while a call still uses it (kept, not replaced).
      if (step_ != nullptr) old_steps_.push_back(std::move(step_));
      step_ = std::move(opened);
      files_ = files;
      tables_ = tables;
    }
    *step = &**step_;
    return absl::OkStatus();
  }

  static absl::Status Int(OpKernelContext* ctx, int i, int64_t* out) {
    const Tensor& t = ctx->input(i);
    if (!TensorShapeUtils::IsScalar(t.shape())) {
      return errors::InvalidArgument("input ", i, " must be a scalar, got shape ",
                                     t.shape().DebugString());
    }
    *out = t.scalar<int64_t>()();
    return absl::OkStatus();
  }

 private:
  rust::Vec<ffi::NamedValue> attrs_;
  mutex mu_;
  std::unique_ptr<rust::Box<ffi::RefurbishStep>> step_ TF_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<rust::Box<ffi::RefurbishStep>>> old_steps_
      TF_GUARDED_BY(mu_);
  std::vector<std::string> files_ TF_GUARDED_BY(mu_);
  std::vector<std::string> tables_ TF_GUARDED_BY(mu_);
};

// The synchronous kernels' common part.
class RefurbishKernel : public OpKernel {
 public:
  explicit RefurbishKernel(OpKernelConstruction* ctx)
      : OpKernel(ctx), steps_(ctx) {}

 protected:
  absl::Status Step(OpKernelContext* ctx, const ffi::RefurbishStep** step) {
    return steps_.Step(ctx, step);
  }
  static absl::Status Int(OpKernelContext* ctx, int i, int64_t* out) {
    return StepCache::Int(ctx, i, out);
  }

 private:
  StepCache steps_;
};

class LIRSRefurbishUsesOp : public RefurbishKernel {
 public:
  using RefurbishKernel::RefurbishKernel;

  void Compute(OpKernelContext* ctx) override {
    const ffi::RefurbishStep* step = nullptr;
    OP_REQUIRES_OK(ctx, Step(ctx, &step));
    int64_t epoch = 0;
    OP_REQUIRES_OK(ctx, Int(ctx, 2, &epoch));
    rust::Vec<int64_t> ids, generation;
    rust::Vec<uint8_t> refresh;
    OP_REQUIRES_OK(ctx, CallRust("LIRSRefurbishUses: ", [&](ffi::Status& st) {
                     step->epoch_uses(epoch, ids, refresh, generation, st);
                   }));
    const int64_t n = static_cast<int64_t>(ids.size());
    Tensor *ids_t, *refresh_t, *generation_t;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &ids_t));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({n}), &refresh_t));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(2, TensorShape({n}), &generation_t));
    auto ids_flat = ids_t->flat<int64_t>();
    auto refresh_flat = refresh_t->flat<bool>();
    auto generation_flat = generation_t->flat<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      ids_flat(i) = ids[i];
      refresh_flat(i) = refresh[i] != 0;
      generation_flat(i) = generation[i];
    }
  }
};

// The threads lookups wait on, kept for the next wait (Env::SchedClosure starts a
// thread per call: in a sweep, jobs wait for each other hundreds of times a
// second). Never destroyed: a wait may still run while the process exits.
UnboundedWorkQueue* WaitingThreads() {
  static UnboundedWorkQueue* queue =
      new UnboundedWorkQueue(Env::Default(), "lirs_refurbish_wait");
  return queue;
}

// Asynchronous: a lookup that finds another process's claim waits for it (up to
// the core's bound) on a thread of its own, never on one of TensorFlow's pools,
// whose threads the holder's computation may need.
class LIRSRefurbishLookupOp : public AsyncOpKernel {
 public:
  explicit LIRSRefurbishLookupOp(OpKernelConstruction* ctx)
      : AsyncOpKernel(ctx), steps_(ctx) {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const ffi::RefurbishStep* step = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, steps_.Step(ctx, &step), done);
    int64_t id = 0, generation = 0, epoch = 0;
    OP_REQUIRES_OK_ASYNC(ctx, StepCache::Int(ctx, 2, &id), done);
    OP_REQUIRES_OK_ASYNC(ctx, StepCache::Int(ctx, 3, &generation), done);
    OP_REQUIRES_OK_ASYNC(ctx, StepCache::Int(ctx, 4, &epoch), done);
    Tensor *found_t, *payload_t, *partial_t, *final_t, *pending_t;
    OP_REQUIRES_OK_ASYNC(
        ctx, ctx->allocate_output(0, TensorShape({}), &found_t), done);
    OP_REQUIRES_OK_ASYNC(
        ctx, ctx->allocate_output(1, TensorShape({}), &payload_t), done);
    OP_REQUIRES_OK_ASYNC(
        ctx, ctx->allocate_output(2, TensorShape({2}), &partial_t), done);
    OP_REQUIRES_OK_ASYNC(
        ctx, ctx->allocate_output(3, TensorShape({2}), &final_t), done);
    OP_REQUIRES_OK_ASYNC(
        ctx, ctx->allocate_output(4, TensorShape({}), &pending_t), done);
    // Returns false (nothing output yet) if the claim is busy and !wait.
    auto lookup = [=](bool wait) {
      rust::Vec<uint8_t> payload;
      ffi::RefurbishFound found = ffi::RefurbishFound::Compute;
      absl::Status s = CallRust("LIRSRefurbishLookup: ", [&](ffi::Status& st) {
        found = step->lookup(
            id, generation, epoch, wait, payload,
            rust::Slice<int64_t>(partial_t->flat<int64_t>().data(), 2),
            rust::Slice<int64_t>(final_t->flat<int64_t>().data(), 2), st);
      });
      if (!s.ok()) {
        ctx->SetStatus(s);
        return true;
      }
      if (found == ffi::RefurbishFound::Busy) return false;
      found_t->scalar<bool>()() = found == ffi::RefurbishFound::Stored;
      RefurbishPending pending;
      if (found == ffi::RefurbishFound::Compute) {
        pending.use = std::make_shared<rust::Box<ffi::RefurbishPending>>(
            step->pending(id, generation));
      }
      pending_t->scalar<Variant>()() = std::move(pending);
      payload_t->scalar<tstring>()().assign(
          reinterpret_cast<const char*>(payload.data()), payload.size());
      return true;
    };
    if (lookup(false)) {
      done();
      return;
    }
    // The step and the outputs live until `done` (the kernel outlives its calls).
    WaitingThreads()->Schedule([ctx, lookup, done = std::move(done)]() {
      if (!lookup(true)) {  // a waiting lookup never answers busy
        ctx->SetStatus(errors::Internal("LIRSRefurbishLookup: busy after waiting"));
      }
      done();
    });
  }

 private:
  StepCache steps_;
};

class LIRSRefurbishKeepOp : public RefurbishKernel {
 public:
  using RefurbishKernel::RefurbishKernel;

  void Compute(OpKernelContext* ctx) override {
    const ffi::RefurbishStep* step = nullptr;
    OP_REQUIRES_OK(ctx, Step(ctx, &step));
    int64_t id = 0, generation = 0, epoch = 0;
    OP_REQUIRES_OK(ctx, Int(ctx, 2, &id));
    OP_REQUIRES_OK(ctx, Int(ctx, 3, &generation));
    OP_REQUIRES_OK(ctx, Int(ctx, 4, &epoch));
    const Tensor& refresh = ctx->input(5);
    const Tensor& payload = ctx->input(6);
    OP_REQUIRES(ctx,
                TensorShapeUtils::IsScalar(refresh.shape()) &&
                    TensorShapeUtils::IsScalar(payload.shape()),
                errors::InvalidArgument(
                    "LIRSRefurbishKeep: refresh and payload must be scalars"));
    const Tensor& pending_t = ctx->input(7);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(pending_t.shape()),
                errors::InvalidArgument("LIRSRefurbishKeep: pending must be a scalar"));
    const RefurbishPending* pending =
        pending_t.scalar<Variant>()().get<RefurbishPending>();
    const tstring& bytes = payload.scalar<tstring>()();
    bool stored = false;
    OP_REQUIRES_OK(ctx, CallRust("LIRSRefurbishKeep: ", [&](ffi::Status& st) {
                     stored = step->keep(
                         id, generation, epoch, refresh.scalar<bool>()(),
                         rust::Slice<const uint8_t>(
                             reinterpret_cast<const uint8_t*>(bytes.data()),
                             bytes.size()),
                         st);
                   }));
    if (pending != nullptr && pending->use != nullptr) (*pending->use)->kept();
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<bool>()() = stored;
  }
};

REGISTER_KERNEL_BUILDER(Name("LIRSRefurbishUses").Device(DEVICE_CPU),
                        LIRSRefurbishUsesOp);
REGISTER_KERNEL_BUILDER(Name("LIRSRefurbishLookup").Device(DEVICE_CPU),
                        LIRSRefurbishLookupOp);
REGISTER_KERNEL_BUILDER(Name("LIRSRefurbishKeep").Device(DEVICE_CPU),
                        LIRSRefurbishKeepOp);
// The store is a memo (outputs do not depend on it) and the files are read only:
// the ops keep no iterator state, so pipelines that map them can be checkpointed.
ALLOW_STATEFUL_OP_FOR_DATASET_FUNCTIONS("LIRSRefurbishUses");
ALLOW_STATEFUL_OP_FOR_DATASET_FUNCTIONS("LIRSRefurbishLookup");
ALLOW_STATEFUL_OP_FOR_DATASET_FUNCTIONS("LIRSRefurbishKeep");

}  // namespace
}  // namespace tensorflow
