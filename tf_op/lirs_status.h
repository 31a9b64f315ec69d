// The C++ side of the cxx bridge's conventions (crates/tfrecord-lirs-ffi/src/lib.rs):
// calling into Rust with an error turned into absl::Status, and the values the
// kernels hand to Rust (attrs, inputs and checkpoint values by name, unread).
//
// Errors: every fallible bridge function takes the caller's ffi::Status last; when it
// fails, Rust fills that Status (an ErrorCode and a message) and cxx throws
// rust::Error as the signal. CallRust catches it and maps the code with one switch
// (ToStatusCode). Nothing here ever produces OutOfRange: for a dataset iterator that
// code means "end of sequence" and would silently truncate the data.
#ifndef TFRECORD_LIRS_TF_OP_LIRS_STATUS_H_
#define TFRECORD_LIRS_TF_OP_LIRS_STATUS_H_

#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "rust/cxx.h"
#include "tensorflow/core/framework/attr_value.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/errors.h"
#include "tfrecord-lirs-ffi/src/lib.rs.h"

namespace tfrecord_lirs {

inline absl::StatusCode ToStatusCode(ffi::ErrorCode code) {
  switch (code) {
    case ffi::ErrorCode::Ok:
      return absl::StatusCode::kOk;
    case ffi::ErrorCode::DataLoss:
      return absl::StatusCode::kDataLoss;
    case ffi::ErrorCode::InvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case ffi::ErrorCode::NotFound:
      return absl::StatusCode::kNotFound;
    case ffi::ErrorCode::Internal:
      return absl::StatusCode::kInternal;
    case ffi::ErrorCode::PermissionDenied:
      return absl::StatusCode::kPermissionDenied;
    case ffi::ErrorCode::Unavailable:
      return absl::StatusCode::kUnavailable;
  }
  return absl::StatusCode::kInternal;
}

// The absl::Status of a failed bridge call, from the ffi::Status Rust filled in
// (reset to Ok, so the caller can reuse it); the message is prefixed by `context`.
inline absl::Status TakeError(ffi::Status& status, absl::string_view context) {
  if (status.code == ffi::ErrorCode::Ok) {  // cannot happen: Rust fills it on Err
    return absl::InternalError(
        absl::StrCat(context, "tfrecord-lirs failed without an error status"));
  }
  absl::Status s(ToStatusCode(status.code),
                 absl::StrCat(context, std::string(status.message)));
  status.code = ffi::ErrorCode::Ok;
  status.message = rust::String();
  return s;
}

// Runs `f(status)`, a call into Rust that passes `status` as the bridge function's
// last argument; its error becomes an absl::Status whose message is prefixed by
// `context`.
template <typename F>
absl::Status CallRust(absl::string_view context, F&& f) {
  ffi::Status status{ffi::ErrorCode::Ok, rust::String()};
  try {
    f(status);
    return absl::OkStatus();
  } catch (const rust::Error&) {
    return TakeError(status, context);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc in the glue
    return absl::InternalError(absl::StrCat(context, e.what()));
  }
}

// The strings of a scalar or vector string tensor (input `name`).
inline absl::Status StringList(const tensorflow::Tensor& t, const char* name,
                               std::vector<std::string>* out) {
  if (t.dims() > 1) {
    return tensorflow::errors::InvalidArgument(
        "`", name, "` must be a scalar or a vector, got shape ",
        t.shape().DebugString());
  }
  out->clear();
  out->reserve(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    out->push_back(std::string(t.flat<tensorflow::tstring>()(i)));
  }
  return absl::OkStatus();
}

// The bytes of a TensorFlow string, for Rust.
inline rust::Vec<uint8_t> Bytes(absl::string_view s) {
  rust::Vec<uint8_t> out;
  out.reserve(s.size());
  for (const char c : s) out.push_back(static_cast<uint8_t>(c));
  return out;
}

inline rust::Vec<ffi::FilePath> FilePaths(const std::vector<std::string>& paths) {
  rust::Vec<ffi::FilePath> out;
  out.reserve(paths.size());
  for (const std::string& p : paths) {
    out.push_back(ffi::FilePath{Bytes(p)});
  }
  return out;
}

// A value for Rust, which interprets it by `name` (ffi::NamedValue): an int or
// bool attr or tensor as ints, a string attr or scalar string tensor as bytes.
inline absl::Status AddNamedValue(absl::string_view name,
                                  const tensorflow::AttrValue& v,
                                  rust::Vec<ffi::NamedValue>* out) {
  ffi::NamedValue n{rust::String(name.data(), name.size()), {}, {}};
  switch (v.value_case()) {
    case tensorflow::AttrValue::kI: n.ints.push_back(v.i()); break;
    case tensorflow::AttrValue::kB: n.ints.push_back(v.b() ? 1 : 0); break;
    case tensorflow::AttrValue::kS: n.bytes = Bytes(v.s()); break;
    default:
      return tensorflow::errors::Internal("attr `", name, "` has no int, bool or string");
  }
  out->push_back(std::move(n));
  return absl::OkStatus();
}

inline absl::Status AddNamedValue(absl::string_view name,
                                  const tensorflow::Tensor& t,
                                  rust::Vec<ffi::NamedValue>* out) {
  ffi::NamedValue n{rust::String(name.data(), name.size()), {}, {}};
  if (t.dtype() == tensorflow::DT_STRING && t.NumElements() == 1) {
    n.bytes = Bytes(t.flat<tensorflow::tstring>()(0));
  } else if (t.dtype() == tensorflow::DT_INT64) {
    const auto xs = t.flat<int64_t>();
    for (int64_t i = 0; i < xs.size(); ++i) n.ints.push_back(xs(i));
  } else if (t.dtype() == tensorflow::DT_BOOL) {
    const auto xs = t.flat<bool>();
    for (int64_t i = 0; i < xs.size(); ++i) n.ints.push_back(xs(i) ? 1 : 0);
  } else {
    return tensorflow::errors::InvalidArgument(
        "`", name, "` is a ", tensorflow::DataTypeString(t.dtype()), " tensor of ",
        t.NumElements(), " elements");
  }
  out->push_back(std::move(n));
  return absl::OkStatus();
}

// The op's attrs, but TensorFlow's own (`metadata` and those named `_...`).
inline bool IsOpAttr(absl::string_view name) {
  return name != "metadata" && !absl::StartsWith(name, "_");
}

inline absl::Status AttrValues(const tensorflow::NodeDef& def,
                               rust::Vec<ffi::NamedValue>* out) {
  for (const auto& [name, value] : def.attr()) {
    if (IsOpAttr(name)) TF_RETURN_IF_ERROR(AddNamedValue(name, value, out));
  }
  return absl::OkStatus();
}

// The string-list inputs both reading kernels (LIRSDataset, LIRSRead) take, as
// registered in lirs_ops.cc.
namespace attr {
inline constexpr char kFileNames[] = "filenames";
inline constexpr char kOffsetTables[] = "offset_tables";
}  // namespace attr

}  // namespace tfrecord_lirs

#endif  // TFRECORD_LIRS_TF_OP_LIRS_STATUS_H_
