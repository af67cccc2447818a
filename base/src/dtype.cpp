#include "qnn_debug/base/dtype.h"

#include <cmath>
#include <iterator>

namespace qd {
namespace {

using K = DTypeKind;

constexpr DTypeInfo kDTypes[] = {
    {DType::kInt8, "INT_8", 8, K::kSignedInt, false},
    {DType::kInt16, "INT_16", 16, K::kSignedInt, false},
    {DType::kInt32, "INT_32", 32, K::kSignedInt, false},
    {DType::kInt64, "INT_64", 64, K::kSignedInt, false},
    {DType::kUInt8, "UINT_8", 8, K::kUnsignedInt, false},
    {DType::kUInt16, "UINT_16", 16, K::kUnsignedInt, false},
    {DType::kUInt32, "UINT_32", 32, K::kUnsignedInt, false},
    {DType::kUInt64, "UINT_64", 64, K::kUnsignedInt, false},
    {DType::kFloat16, "FLOAT_16", 16, K::kFloat, false},
    {DType::kBFloat16, "BFLOAT_16", 16, K::kFloat, false},
    {DType::kFloat32, "FLOAT_32", 32, K::kFloat, false},
    {DType::kFloat64, "FLOAT_64", 64, K::kFloat, false},
    {DType::kSFixed4, "SFIXED_POINT_4", 4, K::kSignedInt, true},
    {DType::kSFixed8, "SFIXED_POINT_8", 8, K::kSignedInt, true},
    {DType::kSFixed16, "SFIXED_POINT_16", 16, K::kSignedInt, true},
    {DType::kSFixed32, "SFIXED_POINT_32", 32, K::kSignedInt, true},
    {DType::kUFixed4, "UFIXED_POINT_4", 4, K::kUnsignedInt, true},
    {DType::kUFixed8, "UFIXED_POINT_8", 8, K::kUnsignedInt, true},
    {DType::kUFixed16, "UFIXED_POINT_16", 16, K::kUnsignedInt, true},
    {DType::kUFixed32, "UFIXED_POINT_32", 32, K::kUnsignedInt, true},
    {DType::kBool8, "BOOL_8", 8, K::kBool, false},
};

struct ExecuTorchPair {
  int32_t scalar_type;
  DType dtype;
};

// ExecuTorch ScalarType codes (docs/formats.md, section 1). The first entry for a dtype is its canonical reverse map.
constexpr ExecuTorchPair kExecuTorch[] = {
    {0, DType::kUInt8},     {1, DType::kInt8},    {2, DType::kInt16},   {3, DType::kInt32},
    {4, DType::kInt64},     {5, DType::kFloat16}, {6, DType::kFloat32}, {7, DType::kFloat64},
    {11, DType::kBool8},    {12, DType::kInt8},   {13, DType::kUInt8},  {14, DType::kInt32},
    {15, DType::kBFloat16}, {27, DType::kUInt16}, {22, DType::kUInt16}, {28, DType::kUInt32},
    {29, DType::kUInt64},
};

}  // namespace

const DTypeInfo* all_dtypes(size_t* count) {
  *count = std::size(kDTypes);
  return kDTypes;
}

std::optional<DTypeInfo> dtype_info(uint32_t code) {
  for (const DTypeInfo& entry : kDTypes) {
    if (static_cast<uint32_t>(entry.dtype) == code) return entry;
  }
  return std::nullopt;
}

uint64_t storage_bytes(DType dtype, uint64_t elements) {
  const uint8_t bits = info(dtype).bits;
  if (bits == 4) return elements / 2 + elements % 2;
  return elements * (bits / 8);
}

std::optional<DType> dtype_from_executorch(int32_t scalar_type) {
  for (const ExecuTorchPair& pair : kExecuTorch) {
    if (pair.scalar_type == scalar_type) return pair.dtype;
  }
  return std::nullopt;
}

std::optional<int32_t> executorch_from_dtype(DType dtype) {
  // Fixed-point codes are stored integers with quantization attached.
  static constexpr std::pair<DType, DType> kFixedToPlain[] = {
      {DType::kSFixed8, DType::kInt8},    {DType::kSFixed16, DType::kInt16},
      {DType::kSFixed32, DType::kInt32},  {DType::kUFixed8, DType::kUInt8},
      {DType::kUFixed16, DType::kUInt16}, {DType::kUFixed32, DType::kUInt32},
  };
  for (const auto& [fixed, plain] : kFixedToPlain) {
    if (dtype == fixed) dtype = plain;
  }
  for (const ExecuTorchPair& pair : kExecuTorch) {
    if (pair.dtype == dtype) return pair.scalar_type;
  }
  return std::nullopt;
}

std::optional<RawRange> integer_range(DType dtype) {
  const DTypeInfo entry = info(dtype);
  if (entry.kind == DTypeKind::kFloat) return std::nullopt;
  if (entry.kind == DTypeKind::kBool) return RawRange{0, 1};
  const double span = std::ldexp(1.0, entry.bits);
  if (entry.kind == DTypeKind::kUnsignedInt) return RawRange{0, span - 1};
  return RawRange{-span / 2, span / 2 - 1};
}

}  // namespace qd
