// The calling convention of the plain C entry points (lirs_c_api.cc, and the
// test-only lirs_test_ops.cc): a LirsCode (0 = ok) and, on error, a
// NUL-terminated message in `err` (at most `err_len` bytes). No C++ exception
// or Rust panic escapes.
#ifndef TFRECORD_LIRS_TF_OP_LIRS_C_CALL_H_
#define TFRECORD_LIRS_TF_OP_LIRS_C_CALL_H_

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "lirs_status.h"

#define LIRS_EXPORT extern "C" __attribute__((visibility("default")))

namespace tfrecord_lirs {

inline void SetError(char* err, size_t err_len, const std::string& message) {
  if (err == nullptr || err_len == 0) return;
  const size_t n = std::min(err_len - 1, message.size());
  std::memcpy(err, message.data(), n);
  err[n] = '\0';
}

// Runs `f`, turning what it throws into a LirsCode and a message in `err`.
template <typename F>
int Call(char* err, size_t err_len, F&& f) {
  try {
    f();
    return kLirsOk;
  } catch (const rust::Error& e) {
    std::string message;
    LirsCode code = ParseRustError(e.what(), &message);
    SetError(err, err_len, message);
    return code;
  } catch (const std::exception& e) {
    SetError(err, err_len, e.what());
    return kLirsInternal;
  } catch (...) {
    SetError(err, err_len, "unknown C++ exception");
    return kLirsInternal;
  }
}

}  // namespace tfrecord_lirs

#endif  // TFRECORD_LIRS_TF_OP_LIRS_C_CALL_H_
