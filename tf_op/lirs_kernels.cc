// Non-dataset kernels: LIRSRead (random access), LIRSIsFiller, and the elastic
// resume pair LIRSIteratorShardState and LIRSCombineShardStates.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "lirs_status.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/dataset_stateful_op_allowlist.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/kernels/data/iterator_ops.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/mutex.h"

namespace tensorflow {
namespace {

using ::tfrecord_lirs::CallRust;
using ::tfrecord_lirs::StringList;
namespace attr = ::tfrecord_lirs::attr;
namespace ffi = ::tfrecord_lirs::ffi;

class LIRSReadOp : public OpKernel {
 public:
  static constexpr const char* const kIds = "ids";

  // The attrs go to Rust as they are; it reads and checks them per call.
  explicit LIRSReadOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ::tfrecord_lirs::AttrValues(ctx->def(), &attrs_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor* filenames_t;
    OP_REQUIRES_OK(ctx, ctx->input(attr::kFileNames, &filenames_t));
    const Tensor* tables_t;
    OP_REQUIRES_OK(ctx, ctx->input(attr::kOffsetTables, &tables_t));
    const Tensor* ids_t;
    OP_REQUIRES_OK(ctx, ctx->input(kIds, &ids_t));
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(ids_t->shape()),
                errors::InvalidArgument("`ids` must be a vector, got shape ",
                                        ids_t->shape().DebugString()));
    std::vector<std::string> filenames, tables;
    OP_REQUIRES_OK(ctx, StringList(*filenames_t, attr::kFileNames, &filenames));
    OP_REQUIRES_OK(ctx, StringList(*tables_t, attr::kOffsetTables, &tables));
    const auto ids = ids_t->flat<int64_t>();
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, ids_t->shape(), &out));
    auto out_flat = out->flat<tstring>();
    OP_REQUIRES_OK(ctx, [&]() -> absl::Status {
      // Rust shares the reader of unchanged files between calls and kernels.
      const auto files = ::tfrecord_lirs::FilePaths(filenames);
      const auto table_paths = ::tfrecord_lirs::FilePaths(tables);
      rust::Vec<uint8_t> data;
      rust::Vec<uint64_t> ends;
      TF_RETURN_IF_ERROR(CallRust("LIRSRead: ", [&](ffi::Status& st) {
        ffi::open_reader_for_op(attrs_, files, table_paths, st)
            ->read_batch(rust::Slice<const int64_t>(ids.data(), ids.size()),
                         data, ends, st);
      }));
      uint64_t begin = 0;
      for (int64_t i = 0; i < ids.size(); ++i) {
        out_flat(i).assign(reinterpret_cast<const char*>(data.data()) + begin,
                           ends[i] - begin);
        begin = ends[i];
      }
      return absl::OkStatus();
    }());
  }

 private:
  rust::Vec<ffi::NamedValue> attrs_;
};

class LIRSIsFillerOp : public OpKernel {
 public:
  explicit LIRSIsFillerOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& records = ctx->input(0);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, records.shape(), &out));
    auto in_flat = records.flat<tstring>();
    auto out_flat = out->flat<bool>();
    OP_REQUIRES_OK(ctx, CallRust("LIRSIsFiller: ", [&](ffi::Status& st) {
                     for (int64_t i = 0; i < in_flat.size(); ++i) {
                       const tstring& r = in_flat(i);
                       out_flat(i) = ffi::is_filler(
                           rust::Slice<const uint8_t>(
                               reinterpret_cast<const uint8_t*>(r.data()),
                               r.size()),
                           st);
                     }
                   }));
  }
};

// Keeps the `shard_state` values a LIRSDataset iterator writes when its
// pipeline's iterator is saved; everything else is dropped.
class ShardStateCollector : public data::IteratorStateWriter {
 public:
  absl::Status WriteScalar(absl::string_view, const int64_t) override {
    return absl::OkStatus();
  }
  absl::Status WriteScalar(absl::string_view, absl::string_view,
                           const int64_t) override {
    return absl::OkStatus();
  }
  absl::Status WriteScalar(absl::string_view, const tstring&) override {
    return absl::OkStatus();
  }
  absl::Status WriteScalar(absl::string_view name, absl::string_view key,
                           const tstring& val) override {
    // The key and iterator name LIRSDataset's iterator writes it under.
    if (key == "shard_state" && absl::EndsWith(name, "LIRS")) {
      states.emplace_back(val.data(), val.size());
    }
    return absl::OkStatus();
  }
  absl::Status WriteTensor(absl::string_view, const Tensor&) override {
    return absl::OkStatus();
  }
  absl::Status WriteTensor(absl::string_view, absl::string_view,
                           const Tensor&) override {
    return absl::OkStatus();
  }

  std::vector<std::string> states;
};

class LIRSIteratorShardStateOp : public OpKernel {
 public:
  explicit LIRSIteratorShardStateOp(OpKernelConstruction* ctx)
      : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    data::IteratorResource* iterator = nullptr;
    OP_REQUIRES_OK(ctx,
                   LookupResource(ctx, HandleFromInput(ctx, 0), &iterator));
    core::ScopedUnref unref(iterator);
    ShardStateCollector collector;
    OP_REQUIRES_OK(ctx, iterator->Save(ctx, data::ExternalStatePolicy::POLICY_IGNORE,
                                       &collector));
    OP_REQUIRES(ctx, collector.states.size() == 1,
                errors::InvalidArgument(
                    "LIRSDataset.shard_state: the iterator's pipeline holds ",
                    collector.states.size(),
                    " LIRSDataset iterators; it must hold exactly one"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<tstring>()() = collector.states[0];
  }
};

class LIRSCombineShardStatesOp : public OpKernel {
 public:
  explicit LIRSCombineShardStatesOp(OpKernelConstruction* ctx)
      : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const auto in = ctx->input(0).flat<tstring>();
    rust::Vec<ffi::StateBytes> states;
    for (int64_t i = 0; i < in.size(); ++i) {
      states.push_back(ffi::StateBytes{::tfrecord_lirs::Bytes(in(i))});
    }
    rust::Vec<uint8_t> epoch_state;
    OP_REQUIRES_OK(ctx, CallRust("LIRSDataset.combine_shard_states: ",
                                 [&](ffi::Status& st) {
                                   epoch_state =
                                       ffi::combine_shard_states(states, st);
                                 }));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<tstring>()().assign(
        reinterpret_cast<const char*>(epoch_state.data()), epoch_state.size());
  }
};

REGISTER_KERNEL_BUILDER(Name("LIRSIteratorShardState").Device(DEVICE_CPU),
                        LIRSIteratorShardStateOp);
REGISTER_KERNEL_BUILDER(Name("LIRSCombineShardStates").Device(DEVICE_CPU),
                        LIRSCombineShardStatesOp);
class LIRSProcessIoTotalsOp : public OpKernel {
 public:
  explicit LIRSProcessIoTotalsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const ffi::ProcessIoTotals totals = ffi::process_io_totals();
    Tensor* reads = nullptr;
    Tensor* bytes = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &reads));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({}), &bytes));
    reads->scalar<int64_t>()() = static_cast<int64_t>(totals.reads);
    bytes->scalar<int64_t>()() = static_cast<int64_t>(totals.bytes_read);
  }
};

REGISTER_KERNEL_BUILDER(Name("LIRSRead").Device(DEVICE_CPU), LIRSReadOp);
REGISTER_KERNEL_BUILDER(Name("LIRSProcessIoTotals").Device(DEVICE_CPU),
                        LIRSProcessIoTotalsOp);
// LIRSRead is stateful only so it is never constant-folded (it reads files);
// it keeps no iterator state, so pipelines that map it can be checkpointed.
ALLOW_STATEFUL_OP_FOR_DATASET_FUNCTIONS("LIRSRead");
REGISTER_KERNEL_BUILDER(Name("LIRSIsFiller").Device(DEVICE_CPU),
                        LIRSIsFillerOp);

}  // namespace
}  // namespace tensorflow
