// TEST ONLY: fault injection for the tests (tests/fault_injection.py), linked
// only into the test build of the op library (`make -C tf_op test-lib`, over a
// staticlib built with the cargo feature `fault-injection`), never into
// python/tfrecord_lirs/_lirs_ops.so.
//
// * op LIRSTestOnlyPanic: panics inside Rust; must surface as an Internal error;
// * op LIRSTestOnlyStorageConformance: runs the core's storage contract cases over
//   the fixtures under `base` through the storage the op library reads with
//   (TensorFlow's file systems, lirs_tf_file.cc); returns one line per failed case;
// * C function lirs_test_set_panic_point: makes every call of the bridged Rust
//   entry point `point` panic (inside its catch_unwind guard) until called
//   again with "". Returns an ErrorCode value (0 = ok), the message in `err`.
#include <algorithm>
#include <cstring>
#include <string>

#include "lirs_status.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tfrecord-lirs-ffi/src/fault_injection.rs.h"

namespace tensorflow {

REGISTER_OP("LIRSTestOnlyPanic")
    .Input("message: string")
    .SetIsStateful()
    .SetShapeFn(shape_inference::NoOutputs);

namespace {

class LIRSTestOnlyPanicOp : public OpKernel {
 public:
  explicit LIRSTestOnlyPanicOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& message = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(message.shape()),
                errors::InvalidArgument("`message` must be a scalar"));
    const std::string m(message.scalar<tstring>()());
    OP_REQUIRES_OK(ctx, ::tfrecord_lirs::CallRust(
                            "LIRSTestOnlyPanic: ",
                            [&](::tfrecord_lirs::ffi::Status& st) {
                              ::tfrecord_lirs::ffi::debug_panic(m, st);
                            }));
  }
};

REGISTER_KERNEL_BUILDER(Name("LIRSTestOnlyPanic").Device(DEVICE_CPU),
                        LIRSTestOnlyPanicOp);

REGISTER_OP("LIRSTestOnlyStorageConformance")
    .Input("base: string")
    .Output("failures: string")
    .SetIsStateful()
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      c->set_output(0, c->Vector(shape_inference::InferenceContext::kUnknownDim));
      return absl::OkStatus();
    });

class LIRSTestOnlyStorageConformanceOp : public OpKernel {
 public:
  explicit LIRSTestOnlyStorageConformanceOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& base = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(base.shape()),
                errors::InvalidArgument("`base` must be a scalar"));
    const std::string b(base.scalar<tstring>()());
    rust::Vec<rust::String> failures;
    OP_REQUIRES_OK(ctx, ::tfrecord_lirs::CallRust(
                            "LIRSTestOnlyStorageConformance: ",
                            [&](::tfrecord_lirs::ffi::Status& st) {
                              failures = ::tfrecord_lirs::ffi::storage_conformance(b, st);
                            }));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({static_cast<int64_t>(failures.size())}), &out));
    auto flat = out->flat<tstring>();
    for (size_t i = 0; i < failures.size(); ++i) {
      flat(i) = std::string(failures[i]);
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("LIRSTestOnlyStorageConformance").Device(DEVICE_CPU),
                        LIRSTestOnlyStorageConformanceOp);

}  // namespace
}  // namespace tensorflow

extern "C" __attribute__((visibility("default"))) int lirs_test_set_panic_point(
    const char* point, char* err, size_t err_len) {
  const absl::Status s = ::tfrecord_lirs::CallRust("", [&](::tfrecord_lirs::ffi::Status& st) {
    ::tfrecord_lirs::ffi::set_test_panic_point(point == nullptr ? "" : point, st);
  });
  if (!s.ok() && err != nullptr && err_len > 0) {
    const size_t n = std::min(err_len - 1, s.message().size());
    std::memcpy(err, s.message().data(), n);
    err[n] = '\0';
  }
  return s.ok() ? 0 : static_cast<int>(::tfrecord_lirs::ffi::ErrorCode::Internal);
}
