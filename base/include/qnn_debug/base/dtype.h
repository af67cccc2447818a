// Storage data types. The store keeps QNN's numeric data-type codes (docs/store-format.md, section
// 6) so a file is readable without this library; ExecuTorch ScalarType codes map onto them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace qd {

enum class DType : uint32_t {
  kInt8 = 8,
  kInt16 = 22,
  kInt32 = 50,
  kInt64 = 100,
  kUInt8 = 264,
  kUInt16 = 278,
  kUInt32 = 306,
  kUInt64 = 356,
  kFloat16 = 534,
  kBFloat16 = 550,
  kFloat32 = 562,
  kFloat64 = 612,
  kSFixed4 = 772,
  kSFixed8 = 776,
  kSFixed16 = 790,
  kSFixed32 = 818,
  kUFixed4 = 1028,
  kUFixed8 = 1032,
  kUFixed16 = 1046,
  kUFixed32 = 1074,
  kBool8 = 1288,
};

enum class DTypeKind : uint8_t { kSignedInt, kUnsignedInt, kFloat, kBool };

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // QNN's spelling without the QNN_DATATYPE_ prefix
  uint8_t bits;           // bits per element: 4 for packed nibbles
  DTypeKind kind;
  bool fixed_point;  // QNN's *FIXED_POINT* types: quantized storage by definition
};

// Every supported dtype, in code order.
const DTypeInfo* all_dtypes(size_t* count);

// Looks a raw code up; nullopt for codes the store does not know.
std::optional<DTypeInfo> dtype_info(uint32_t code);
inline DTypeInfo info(DType dtype) { return *dtype_info(static_cast<uint32_t>(dtype)); }

// Bytes needed for `elements` values: 4-bit types pack two per byte, low nibble first.
uint64_t storage_bytes(DType dtype, uint64_t elements);

// ExecuTorch ScalarType code <-> store dtype. Quantized ScalarTypes (QINT8...) map to their
// storage type; the quantization parameters travel separately.
std::optional<DType> dtype_from_executorch(int32_t scalar_type);
std::optional<int32_t> executorch_from_dtype(DType dtype);

// Smallest and largest raw value representable: what "saturated" means for integer storage.
struct RawRange {
  double min;
  double max;
};
std::optional<RawRange> integer_range(DType dtype);

}  // namespace qd
