// Error mapping between the Rust bridge (crates/tfrecord-lirs-ffi) and
// absl::Status.
//
// Every fallible bridge function throws rust::Error whose what() is
// "<KIND>: <message>"; KIND is DATA_LOSS, INVALID_ARGUMENT, NOT_FOUND or
// INTERNAL. Nothing here ever produces OutOfRange: for a dataset iterator that
// code means "end of sequence" and would silently truncate the data.
#ifndef TFRECORD_LIRS_TF_OP_LIRS_STATUS_H_
#define TFRECORD_LIRS_TF_OP_LIRS_STATUS_H_

#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "rust/cxx.h"
#include "tfrecord-lirs-ffi/src/lib.rs.h"

namespace tfrecord_lirs {

// Stable numeric codes, shared with python/tfrecord_lirs/_native.py (ctypes).
enum LirsCode : int {
  kLirsOk = 0,
  kLirsDataLoss = 1,
  kLirsInvalidArgument = 2,
  kLirsNotFound = 3,
  kLirsInternal = 4,
};

// The I/O backends the Rust reader knows (attr `backend` of both kernels).
inline absl::Status CheckBackend(const std::string& backend) {
  if (backend == "auto" || backend == "pread" || backend == "mmap" ||
      backend == "direct") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "`backend` must be \"auto\", \"pread\", \"mmap\" or \"direct\", got \"",
      backend,
      "\""));
}

inline absl::StatusCode ToStatusCode(LirsCode code) {
  switch (code) {
    case kLirsOk:
      return absl::StatusCode::kOk;
    case kLirsDataLoss:
      return absl::StatusCode::kDataLoss;
    case kLirsInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case kLirsNotFound:
      return absl::StatusCode::kNotFound;
    default:
      return absl::StatusCode::kInternal;
  }
}

// Splits "<KIND>: <message>" into a code and the bare message.
inline LirsCode ParseRustError(absl::string_view what, std::string* message) {
  struct Prefix {
    absl::string_view text;
    LirsCode code;
  };
  static constexpr Prefix kPrefixes[] = {
      {"DATA_LOSS: ", kLirsDataLoss},
      {"INVALID_ARGUMENT: ", kLirsInvalidArgument},
      {"NOT_FOUND: ", kLirsNotFound},
      {"INTERNAL: ", kLirsInternal},
  };
  for (const Prefix& p : kPrefixes) {
    if (what.size() >= p.text.size() &&
        what.substr(0, p.text.size()) == p.text) {
      *message = std::string(what.substr(p.text.size()));
      return p.code;
    }
  }
  *message = std::string(what);
  return kLirsInternal;
}

inline absl::Status StatusFromRustError(const rust::Error& e,
                                        absl::string_view context) {
  std::string message;
  LirsCode code = ParseRustError(e.what(), &message);
  return absl::Status(ToStatusCode(code), absl::StrCat(context, message));
}

}  // namespace tfrecord_lirs

// Runs `stmt` (calls into Rust); converts a thrown error into a returned
// absl::Status, prefixed by `context`.
#define LIRS_RETURN_IF_RUST_ERROR(context, stmt)                             \
  do {                                                                       \
    try {                                                                    \
      stmt;                                                                  \
    } catch (const rust::Error& lirs_e__) {                                  \
      return ::tfrecord_lirs::StatusFromRustError(lirs_e__, (context));      \
    } catch (const std::exception& lirs_e__) {                               \
      return absl::InternalError(absl::StrCat((context), lirs_e__.what()));  \
    }                                                                        \
  } while (0)

#endif  // TFRECORD_LIRS_TF_OP_LIRS_STATUS_H_
