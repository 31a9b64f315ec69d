// Plain C entry points for python/tfrecord_lirs/_native.py (ctypes): writing
// and indexing files with the Rust core, without a TensorFlow graph.
//
// Every function returns a LirsCode (0 = ok) and, on error, writes a
// NUL-terminated message into `err` (at most `err_len` bytes). No C++
// exception or Rust panic escapes.
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "lirs_c_call.h"
#include "lirs_status.h"

namespace {

using tfrecord_lirs::Call;
using tfrecord_lirs::LirsCode;

rust::Slice<const uint8_t> Bytes(const char* s) {
  return rust::Slice<const uint8_t>(reinterpret_cast<const uint8_t*>(s),
                                    s == nullptr ? 0 : std::strlen(s));
}

void Fill(const tfrecord_lirs::ffi::PadSummary& s, uint64_t* out) {
  if (out == nullptr) return;
  out[0] = s.instances;
  out[1] = s.pages;
  out[2] = s.filler_bytes;
  out[3] = s.data_bytes;
}

struct Writer {
  explicit Writer(rust::Box<tfrecord_lirs::ffi::LirsWriter> w)
      : inner(std::move(w)) {}
  rust::Box<tfrecord_lirs::ffi::LirsWriter> inner;
  std::vector<uint64_t> instance_of_input;
};

}  // namespace

// `table` may be NULL or "" for "<data>.offsets".
LIRS_EXPORT int lirs_build_offset_table(const char* data, const char* table,
                                        uint64_t* instances, char* err,
                                        size_t err_len) {
  return Call(err, err_len, [&] {
    *instances = tfrecord_lirs::ffi::build_offset_table(Bytes(data),
                                                        Bytes(table));
  });
}

// summary: instances, pages, filler_bytes, data_bytes.
// `compression`: NULL or "" = detect; else "none", "gzip" or "zlib" (the
// names are decided in Rust). `trust_table` != 0: instances from src's table.
LIRS_EXPORT int lirs_pad_file(const char* src, const char* dst,
                              uint64_t page_size, uint64_t best_fit_window,
                              const char* compression, int trust_table,
                              uint64_t* summary, char* err, size_t err_len) {
  return Call(err, err_len, [&] {
    Fill(tfrecord_lirs::ffi::pad_file(
             Bytes(src), Bytes(dst), page_size, best_fit_window,
             rust::Str(compression == nullptr ? "" : compression),
             trust_table != 0),
         summary);
  });
}

LIRS_EXPORT int lirs_writer_create(const char* path, uint64_t page_size,
                                   uint64_t best_fit_window, void** out,
                                   char* err, size_t err_len) {
  *out = nullptr;
  return Call(err, err_len, [&] {
    *out = new Writer(
        tfrecord_lirs::ffi::create_writer(Bytes(path), page_size,
                                          best_fit_window));
  });
}

LIRS_EXPORT int lirs_writer_write(void* writer, const uint8_t* data,
                                  size_t len, uint64_t* index, char* err,
                                  size_t err_len) {
  return Call(err, err_len, [&] {
    *index = static_cast<Writer*>(writer)->inner->write(
        rust::Slice<const uint8_t>(data, len));
  });
}

// summary: instances, pages, filler_bytes, data_bytes, len(instance_of_input).
LIRS_EXPORT int lirs_writer_finish(void* writer, uint64_t* summary, char* err,
                                   size_t err_len) {
  return Call(err, err_len, [&] {
    Writer* w = static_cast<Writer*>(writer);
    tfrecord_lirs::ffi::PadSummary s = w->inner->finish();
    Fill(s, summary);
    w->instance_of_input.assign(s.instance_of_input.begin(),
                                s.instance_of_input.end());
    summary[4] = w->instance_of_input.size();
  });
}

// Copies min(n, available) entries of the best-fit input -> instance mapping.
LIRS_EXPORT size_t lirs_writer_instance_of_input(void* writer, uint64_t* out,
                                                 size_t n) {
  const Writer* w = static_cast<Writer*>(writer);
  const size_t m = std::min(n, w->instance_of_input.size());
  if (m > 0) {
    std::memcpy(out, w->instance_of_input.data(), m * sizeof(uint64_t));
  }
  return m;
}

LIRS_EXPORT void lirs_writer_free(void* writer) {
  delete static_cast<Writer*>(writer);
}

// 1 if `record` is a filler record, 0 if not, -1 on internal error.
LIRS_EXPORT int lirs_is_filler(const uint8_t* record, size_t len) {
  try {
    return tfrecord_lirs::ffi::is_filler(
               rust::Slice<const uint8_t>(record, len))
               ? 1
               : 0;
  } catch (...) {
    return -1;
  }
}
