// Run-time choice of instruction set for the comparator's hot loops. Shipped builds target
// generic x86-64 (SSE2); where the CPU has AVX2, the kernels that have an AVX2 version use it.
// Every version computes bit-identical results (docs/metrics.md, "Determinism"), so the choice is
// about speed only, and reports do not depend on the machine.
#pragma once

namespace qd::compare::kernels {

enum class Isa {
  kBaseline,  // the build's own target (SSE2 on x86-64, NEON on arm64)
  kAvx2,      // x86-64 with AVX2 and FMA (and the OS saving its registers)
};

// True when this CPU can run kernels built for `isa`.
bool supported(Isa isa);

// The instruction set the kernels use: the best supported one, unless a test chose another.
Isa active();

// Test hook: makes every kernel use `isa` (which must be supported), in every thread, while it
// lives. Lets the tests run each version of a kernel on the same input; production code never
// uses it, and it must not outlive or overlap comparisons running in other threads.
class ScopedIsaForTesting {
 public:
  explicit ScopedIsaForTesting(Isa isa);
  ~ScopedIsaForTesting();
  ScopedIsaForTesting(const ScopedIsaForTesting&) = delete;
  ScopedIsaForTesting& operator=(const ScopedIsaForTesting&) = delete;

 private:
  Isa previous_;
};

}  // namespace qd::compare::kernels
