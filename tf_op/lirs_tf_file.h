// TensorFlow's file systems (tensorflow::Env: gs://, ram://, s3://, hdfs://, local
// paths, every scheme registered in the process) for the Rust core, through the
// cxx bridge crates/tfrecord-lirs-ffi/src/tf_fs.rs.
//
// This header needs no TensorFlow header (the TensorFlow objects live behind a
// pimpl in lirs_tf_file.cc), so the bridge's generated C++ compiles in cargo
// builds that have no TensorFlow; only the op library links the definitions.
//
// Nothing here throws. Each call returns an absl::StatusCode as an int32 (0: OK)
// and, on failure, TensorFlow's message in `message`; the Rust side decides what
// the codes mean for the core (tf_fs.rs).
#ifndef TFRECORD_LIRS_TF_OP_LIRS_TF_FILE_H_
#define TFRECORD_LIRS_TF_OP_LIRS_TF_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "rust/cxx.h"

namespace tfrecord_lirs {
namespace tf __attribute__((visibility("hidden"))) {

// A file open for positioned reads (tensorflow::RandomAccessFile, whose Read is
// safe to call from several threads at once).
class TfReadFile {
 public:
  struct Impl;
  explicit TfReadFile(std::unique_ptr<Impl> impl);
  ~TfReadFile();
  // Reads up to buf.size() bytes at `offset` into `buf`; `got` is how many (fewer
  // only at the end of the file; 0 at or past it).
  int32_t read_at(uint64_t offset, rust::Slice<uint8_t> buf, size_t& got,
                  rust::String& message) const;
  // The file size seen when it was opened.
  uint64_t size() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// A file being written (tensorflow::WritableFile).
class TfWriteFile {
 public:
  struct Impl;
  explicit TfWriteFile(std::unique_ptr<Impl> impl);
  ~TfWriteFile();
  int32_t append(rust::Slice<const uint8_t> data, rust::String& message);
  // Flushes, syncs and closes: the object is complete once this returns 0.
  int32_t close(rust::String& message);

 private:
  std::unique_ptr<Impl> impl_;
};

// Opens `url` for positioned reads (null, with `code` and `message`, on failure).
std::unique_ptr<TfReadFile> tf_open_read(rust::Str url, int32_t& code,
                                         rust::String& message);
// Creates `url` for writing (over an existing file, ram:// appends: the core
// creates fresh names).
std::unique_ptr<TfWriteFile> tf_create(rust::Str url, int32_t& code,
                                       rust::String& message);
// Renames `from` over `to`.
int32_t tf_rename(rust::Str from, rust::Str to, rust::String& message);
// Deletes `url`; a missing file is OK.
int32_t tf_delete(rust::Str url, rust::String& message);
// Whether `url`'s file system renames atomically (false for object stores).
int32_t tf_has_atomic_move(rust::Str url, bool& atomic, rust::String& message);

}  // namespace tf
}  // namespace tfrecord_lirs

#endif  // TFRECORD_LIRS_TF_OP_LIRS_TF_FILE_H_
