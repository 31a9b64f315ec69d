// TensorFlow's file systems for the Rust core: see lirs_tf_file.h.
#include "lirs_tf_file.h"

#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"

namespace tfrecord_lirs {
namespace tf {
namespace {

std::string ToString(rust::Str s) { return std::string(s.data(), s.size()); }

// The status as the code returned to Rust, its message copied into `message`.
int32_t Report(const absl::Status& status, rust::String& message) {
  if (!status.ok()) {
    message = rust::String(std::string(status.message()));
  }
  return static_cast<int32_t>(status.code());
}

// Runs `body` (returning a status); an exception (e.g. std::bad_alloc) becomes an
// INTERNAL code instead of crossing into Rust.
template <typename F>
int32_t Guarded(rust::String& message, F&& body) {
  try {
    return Report(body(), message);
  } catch (const std::exception& e) {
    return Report(absl::InternalError(e.what()), message);
  } catch (...) {
    return Report(absl::InternalError("unknown C++ exception"), message);
  }
}

}  // namespace

struct TfReadFile::Impl {
  std::unique_ptr<tensorflow::RandomAccessFile> file;
  uint64_t size = 0;
};

struct TfWriteFile::Impl {
  std::unique_ptr<tensorflow::WritableFile> file;
  bool closed = false;
};

TfReadFile::TfReadFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TfReadFile::~TfReadFile() = default;

uint64_t TfReadFile::size() const { return impl_->size; }

int32_t TfReadFile::read_at(uint64_t offset, rust::Slice<uint8_t> buf,
                            size_t& got, rust::String& message) const {
  got = 0;
  if (buf.empty() || offset >= impl_->size) return 0;
  return Guarded(message, [&]() -> absl::Status {
    char* scratch = reinterpret_cast<char*>(buf.data());
    absl::string_view result;
    absl::Status status = impl_->file->Read(offset, buf.size(), &result, scratch);
    // OUT_OF_RANGE: fewer bytes than asked, the file ended (result holds them).
    if (!status.ok() && !absl::IsOutOfRange(status)) return status;
    // Some file systems return a view of their own memory instead of the scratch.
    if (!result.empty() && result.data() != scratch) {
      std::memmove(scratch, result.data(), result.size());
    }
    got = result.size();
    return absl::OkStatus();
  });
}

TfWriteFile::TfWriteFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TfWriteFile::~TfWriteFile() = default;  // an unclosed file is abandoned

int32_t TfWriteFile::append(rust::Slice<const uint8_t> data,
                            rust::String& message) {
  return Guarded(message, [&]() -> absl::Status {
    if (impl_->closed) return absl::FailedPreconditionError("file already closed");
    return impl_->file->Append(absl::string_view(
        reinterpret_cast<const char*>(data.data()), data.size()));
  });
}

int32_t TfWriteFile::close(rust::String& message) {
  return Guarded(message, [&]() -> absl::Status {
    if (impl_->closed) return absl::OkStatus();
    impl_->closed = true;
    absl::Status status = impl_->file->Flush();
    if (status.ok()) status = impl_->file->Sync();
    absl::Status closed = impl_->file->Close();
    return status.ok() ? closed : status;
  });
}

std::unique_ptr<TfReadFile> tf_open_read(rust::Str url, int32_t& code,
                                         rust::String& message) {
  std::unique_ptr<TfReadFile> out;
  code = Guarded(message, [&]() -> absl::Status {
    const std::string name = ToString(url);
    tensorflow::Env* env = tensorflow::Env::Default();
    auto impl = std::make_unique<TfReadFile::Impl>();
    // The size first: a missing object is NOT_FOUND here on every file system.
    absl::Status status = env->GetFileSize(name, &impl->size);
    if (status.ok()) status = env->NewRandomAccessFile(name, &impl->file);
    if (status.ok()) out = std::make_unique<TfReadFile>(std::move(impl));
    return status;
  });
  return out;
}

std::unique_ptr<TfWriteFile> tf_create(rust::Str url, int32_t& code,
                                       rust::String& message) {
  std::unique_ptr<TfWriteFile> out;
  code = Guarded(message, [&]() -> absl::Status {
    auto impl = std::make_unique<TfWriteFile::Impl>();
    absl::Status status =
        tensorflow::Env::Default()->NewWritableFile(ToString(url), &impl->file);
    if (status.ok()) out = std::make_unique<TfWriteFile>(std::move(impl));
    return status;
  });
  return out;
}

int32_t tf_rename(rust::Str from, rust::Str to, rust::String& message) {
  return Guarded(message, [&]() {
    return tensorflow::Env::Default()->RenameFile(ToString(from), ToString(to));
  });
}

int32_t tf_delete(rust::Str url, rust::String& message) {
  return Guarded(message, [&]() -> absl::Status {
    absl::Status status = tensorflow::Env::Default()->DeleteFile(ToString(url));
    return absl::IsNotFound(status) ? absl::OkStatus() : status;
  });
}

int32_t tf_has_atomic_move(rust::Str url, bool& atomic, rust::String& message) {
  atomic = false;
  return Guarded(message, [&]() -> absl::Status {
    const std::string name = ToString(url);
    tensorflow::FileSystem* fs = nullptr;
    absl::Status status = tensorflow::Env::Default()->GetFileSystemForFile(name, &fs);
    if (!status.ok()) return status;
    return fs->HasAtomicMove(name, &atomic);
  });
}

}  // namespace tf
}  // namespace tfrecord_lirs
