// Out of memory, reported instead of aborting. Once an allocation fails, the unwinding that
// carries std::bad_alloc to the caller's catch runs destructors, and some of them allocate
// (nlohmann::json's destructor keeps a stack of the children it frees): with no memory left that
// second failure escapes a noexcept destructor and std::terminate ends the process (exit 134).
// While a MemoryReserve lives, some address space is set aside; the first failed allocation
// gives it back and throws std::bad_alloc, so the unwinding has room to finish.
#pragma once

#include <cstddef>

namespace qd::pipeline {

class MemoryReserve {
 public:
  // Instances may nest and overlap across threads: one reserve and one std::new_handler serve
  // them all, installed by the first and removed (the previous handler restored) by the last.
  explicit MemoryReserve(size_t bytes = size_t{32} << 20);
  ~MemoryReserve();
  MemoryReserve(const MemoryReserve&) = delete;
  MemoryReserve& operator=(const MemoryReserve&) = delete;
};

}  // namespace qd::pipeline
