// Capture-time summary statistics of a tensor's real values.
#pragma once

#include <cstdint>

#include "qnn_debug/base/scalar.h"  // load_le, half_to_float, bfloat16_to_float
#include "qnn_debug/etdump/store.h"

namespace qd {

// `data` holds record.element_count() values of record.dtype (nbytes already validated).
TensorStats compute_stats(const TensorRecord& record, const uint8_t* data);

}  // namespace qd
