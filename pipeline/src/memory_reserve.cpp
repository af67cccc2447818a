#include "qnn_debug/pipeline/memory_reserve.h"

#include <sys/mman.h>

#include <atomic>
#include <mutex>
#include <new>

namespace qd::pipeline {
namespace {

// Mapped readable and writable but never touched: it costs address space and commit charge (the
// limits a failed allocation hits), not resident memory.
std::atomic<void*> g_reserve{nullptr};
size_t g_reserve_bytes = 0;
std::mutex g_mutex;  // guards the count, the handler and the mapping's creation
int g_users = 0;
std::new_handler g_previous = nullptr;

void release_reserve() {
  void* reserve = g_reserve.exchange(nullptr);
  if (reserve != nullptr) munmap(reserve, g_reserve_bytes);
}

// Called by operator new when an allocation fails, on whichever thread it failed.
void give_back_and_fail() {
  release_reserve();
  throw std::bad_alloc();
}

}  // namespace

MemoryReserve::MemoryReserve(size_t bytes) {
  const std::lock_guard lock(g_mutex);
  if (g_users++ > 0) return;
  void* reserve = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_reserve_bytes = bytes;
  g_reserve = reserve == MAP_FAILED ? nullptr : reserve;
  g_previous = std::set_new_handler(give_back_and_fail);
}

MemoryReserve::~MemoryReserve() {
  const std::lock_guard lock(g_mutex);
  if (--g_users > 0) return;
  std::set_new_handler(g_previous);
  release_reserve();
}

}  // namespace qd::pipeline
