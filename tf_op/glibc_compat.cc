// Linked into the op library only when it is linked for an older glibc (the wheel:
// `make wheel`, ZIG_GLIBC=2.28; see tf_op/Makefile). Two symbols that the system's
// GCC 12 headers make the C++ objects reference, and that an older system lacks:
//
// * std::__throw_bad_array_new_length (GLIBCXX_3.4.29, GCC 11): thrown by
//   std::allocator<T>::allocate when n * sizeof(T) overflows. Defined here, hidden,
//   with the same effect, so the library needs only the libstdc++ of TensorFlow's own
//   baseline (GLIBCXX_3.4.22 for TF 2.21).
// * __libc_single_threaded (GLIBC_2.32): libstdc++'s shared_ptr and string use it to
//   skip atomic operations while the process has one thread. Defined here, hidden,
//   as 0 ("maybe multi-threaded"): the objects always take the atomic path, which is
//   correct in every process (TensorFlow's are multi-threaded anyway).
#include <new>

namespace std {
[[noreturn]] __attribute__((visibility("hidden"))) void __throw_bad_array_new_length() {
  throw std::bad_array_new_length();
}
}  // namespace std

extern "C" {
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
}
