// From what a dump says about one tensor to the store's record: sizes counted without overflow,
// an ExecuTorch dim order turned into stored dims and an axis order, the dump's storage dtype
// reconciled with an encoding, the encoding's scale, offset and layout applied. Shared by the
// importers. Errors are messages without the tensor's name; callers put it in front.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/etdump/store.h"
#include "qnn_debug/importers/encodings.h"

namespace qd::importers {

// kCorrupt: what the importers say of a dump that breaks its own format.
inline Status corrupt_input(const std::string& what) { return error(ErrorCode::kCorrupt, what); }

// Product of `sizes`; kCorrupt for a negative size, a rank above kMaxRank or a product above
// 2^60 elements.
Result<uint64_t> element_count(std::span<const int64_t> sizes);

// The stored layout of a dense tensor whose elements lie at `strides` (in elements) for logical
// `sizes`: strides that are the row-major strides of some axis permutation (channels-last, for
// one) give the dims in memory order and the axis order back to `sizes`. Empty strides mean
// row-major. Size-1 axes may have any stride. kCorrupt when the strides describe no dense layout.
struct StoredLayout {
  std::vector<uint64_t> dims;
  std::vector<uint8_t> axis_order;  // empty: row-major
};
Result<StoredLayout> layout_from_strides(std::span<const int64_t> sizes,
                                         std::span<const int64_t> strides);

// The dtype once an encoding is known: the encoding's own dtype when it states one of the same
// storage width and kind (UINT_8 vs UFIXED_POINT_8), else `stored`. kCorrupt when the two
// disagree (the encoding describes another tensor).
Result<DType> reconcile_dtype(DType stored, const TensorEncoding& encoding);

// Puts the encoding's quantization and axis order on `record` (dims and dtype already set).
// kCorrupt when the encoding's dims differ from the record's, when it quantizes a float or bool
// tensor, or when an offset does not fit 32 bits (QNN offsets are int32).
Status apply_encoding(const TensorEncoding& encoding, TensorRecord& record);

}  // namespace qd::importers
