#include "kernel_dispatch.h"

#include <atomic>
#include <cassert>

namespace qd::compare::kernels {
namespace {

Isa best_supported() { return supported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kBaseline; }

// Detected on first use; an atomic only so that the test hook is not a data race.
std::atomic<Isa>& choice() {
  static std::atomic<Isa> isa{best_supported()};
  return isa;
}

}  // namespace

bool supported(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return true;
    case Isa::kAvx2:
#if defined(__x86_64__)
      // libgcc's check includes the OS enabling the AVX register state (XGETBV). Every AVX2 CPU
      // has FMA too; the decoder's AVX2 kernels use it.
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
      return false;
#endif
  }
  return false;
}

Isa active() { return choice().load(std::memory_order_relaxed); }

ScopedIsaForTesting::ScopedIsaForTesting(Isa isa) {
  assert(supported(isa) && "the CPU cannot run this instruction set");
  previous_ = choice().exchange(isa, std::memory_order_relaxed);
}

ScopedIsaForTesting::~ScopedIsaForTesting() {
  choice().store(previous_, std::memory_order_relaxed);
}

}  // namespace qd::compare::kernels
