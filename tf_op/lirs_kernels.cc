// Non-dataset kernels: LIRSRead (random access), LIRSIsFiller, and the
// test-only panic probe.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lirs_status.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace tensorflow {
namespace {

absl::Status StringList(const Tensor& t, const char* name,
                        std::vector<std::string>* out) {
  if (t.dims() > 1) {
    return errors::InvalidArgument("`", name,
                                   "` must be a scalar or a vector, got shape ",
                                   t.shape().DebugString());
  }
  out->clear();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    out->push_back(std::string(t.flat<tstring>()(i)));
  }
  return absl::OkStatus();
}

class LIRSReadOp : public OpKernel {
 public:
  static constexpr const char* const kFileNames = "filenames";
  static constexpr const char* const kOffsetTables = "offset_tables";
  static constexpr const char* const kIds = "ids";

  explicit LIRSReadOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor* filenames_t;
    OP_REQUIRES_OK(ctx, ctx->input(kFileNames, &filenames_t));
    const Tensor* tables_t;
    OP_REQUIRES_OK(ctx, ctx->input(kOffsetTables, &tables_t));
    const Tensor* ids_t;
    OP_REQUIRES_OK(ctx, ctx->input(kIds, &ids_t));
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(ids_t->shape()),
                errors::InvalidArgument("`ids` must be a vector, got shape ",
                                        ids_t->shape().DebugString()));
    std::vector<std::string> filenames, tables;
    OP_REQUIRES_OK(ctx, StringList(*filenames_t, kFileNames, &filenames));
    OP_REQUIRES_OK(ctx, StringList(*tables_t, kOffsetTables, &tables));
    OP_REQUIRES(ctx, !filenames.empty(),
                errors::InvalidArgument("`filenames` must not be empty"));
    OP_REQUIRES(ctx, tables.empty() || tables.size() == filenames.size(),
                errors::InvalidArgument("got ", tables.size(),
                                        " offset tables for ", filenames.size(),
                                        " files: give one per file, or none"));
    const auto ids_flat = ids_t->flat<int64_t>();
    std::vector<uint64_t> ids(ids_flat.size());
    for (int64_t i = 0; i < ids_flat.size(); ++i) {
      OP_REQUIRES(ctx, ids_flat(i) >= 0,
                  errors::InvalidArgument("instance id must be >= 0, got ",
                                          ids_flat(i), " at index ", i));
      ids[i] = static_cast<uint64_t>(ids_flat(i));
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, ids_t->shape(), &out));
    auto out_flat = out->flat<tstring>();
    OP_REQUIRES_OK(ctx, [&]() -> absl::Status {
      LIRS_RETURN_IF_RUST_ERROR("LIRSRead: ", {
        auto reader = tfrecord_lirs::ffi::open_reader(
            filenames, tables, 4096, /*verify_payload_crc=*/true,
            /*backend=*/"pread");
        rust::Vec<uint8_t> data;
        rust::Vec<uint64_t> ends;
        reader->read_batch(rust::Slice<const uint64_t>(ids.data(), ids.size()),
                           data, ends);
        uint64_t begin = 0;
        for (size_t i = 0; i < ids.size(); ++i) {
          out_flat(i).assign(reinterpret_cast<const char*>(data.data()) + begin,
                             ends[i] - begin);
          begin = ends[i];
        }
      });
      return absl::OkStatus();
    }());
  }
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
    OP_REQUIRES_OK(ctx, [&]() -> absl::Status {
      LIRS_RETURN_IF_RUST_ERROR("LIRSIsFiller: ", {
        for (int64_t i = 0; i < in_flat.size(); ++i) {
          const tstring& r = in_flat(i);
          out_flat(i) = tfrecord_lirs::ffi::is_filler(rust::Slice<const uint8_t>(
              reinterpret_cast<const uint8_t*>(r.data()), r.size()));
        }
      });
      return absl::OkStatus();
    }());
  }
};

class LIRSTestOnlyPanicOp : public OpKernel {
 public:
  explicit LIRSTestOnlyPanicOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& message = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(message.shape()),
                errors::InvalidArgument("`message` must be a scalar"));
    const std::string m(message.scalar<tstring>()());
    OP_REQUIRES_OK(ctx, [&]() -> absl::Status {
      LIRS_RETURN_IF_RUST_ERROR("LIRSTestOnlyPanic: ",
                                tfrecord_lirs::ffi::debug_panic(m));
      return absl::OkStatus();
    }());
  }
};

REGISTER_KERNEL_BUILDER(Name("LIRSRead").Device(DEVICE_CPU), LIRSReadOp);
REGISTER_KERNEL_BUILDER(Name("LIRSIsFiller").Device(DEVICE_CPU),
                        LIRSIsFillerOp);
REGISTER_KERNEL_BUILDER(Name("LIRSTestOnlyPanic").Device(DEVICE_CPU),
                        LIRSTestOnlyPanicOp);

}  // namespace
}  // namespace tensorflow
