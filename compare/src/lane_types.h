// GCC/Clang vector-extension types of the comparator's hand-written kernels, named by element
// and lane count (F float, D double, I int32, W uint32, S int64, U uint64). A kernel written over
// them computes the same IEEE operations lane by lane at every width, so its SSE2, NEON and AVX2
// instantiations give the same bits (kernel_dispatch.h). The 32-byte types are for functions
// built with AVX2 (or passed by reference: by value, GCC warns of their ABI without AVX).
#pragma once

#include <cstdint>

namespace qd::compare::lanes {

using F2 = float __attribute__((vector_size(8)));
using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));
using W4 = uint32_t __attribute__((vector_size(16)));
using D2 = double __attribute__((vector_size(16)));
using S2 = int64_t __attribute__((vector_size(16)));
using U2 = uint64_t __attribute__((vector_size(16)));
using F8 = float __attribute__((vector_size(32)));
using I8 = int32_t __attribute__((vector_size(32)));
using W8 = uint32_t __attribute__((vector_size(32)));
using D4 = double __attribute__((vector_size(32)));
using S4 = int64_t __attribute__((vector_size(32)));
using U4 = uint64_t __attribute__((vector_size(32)));

}  // namespace qd::compare::lanes
