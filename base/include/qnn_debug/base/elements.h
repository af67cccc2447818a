// How the elements of each storage dtype are read from a store's little-endian bytes: the one
// place that maps a DType to its raw representation. The capture-time statistics, the
// comparator's decoding, the fixtures and the exporters all dispatch through visit_dtype, so a
// dtype is read the same way everywhere.
#pragma once

#include <cstdint>
#include <type_traits>

#include "qnn_debug/base/dtype.h"
#include "qnn_debug/base/scalar.h"

namespace qd::elements {

// Each reader's `at(bytes, p)` returns element p counted from `bytes`, as `Value`. For the 4-bit
// types p counts nibbles (two per byte, low nibble first), so an odd p is a high nibble.

// Integers and IEEE binary32/binary64 stored as they are.
template <typename T>
struct Plain {
  using Value = T;
  static constexpr bool kPacked = false;
  static T at(const uint8_t* bytes, uint64_t p) { return load_le<T>(bytes, p); }
};

template <bool kSigned>
struct Nibble {
  using Value = int32_t;
  static constexpr bool kPacked = true;
  static int32_t at(const uint8_t* bytes, uint64_t p) {
    const int32_t byte = bytes[p >> 1];
    const int32_t value = (p & 1) ? (byte >> 4) : (byte & 0xF);
    return kSigned ? (value ^ 8) - 8 : value;
  }
};

struct Half {
  using Value = float;
  static constexpr bool kPacked = false;
  static float at(const uint8_t* bytes, uint64_t p) {
    return half_to_float(load_le<uint16_t>(bytes, p));
  }
};

struct BFloat16 {
  using Value = float;
  static constexpr bool kPacked = false;
  static float at(const uint8_t* bytes, uint64_t p) {
    return bfloat16_to_float(load_le<uint16_t>(bytes, p));
  }
};

// BOOL_8: any non-zero byte is true.
struct Bool8 {
  using Value = uint8_t;
  static constexpr bool kPacked = false;
  static uint8_t at(const uint8_t* bytes, uint64_t p) { return bytes[p] != 0 ? 1 : 0; }
};

template <class R>
inline constexpr bool kIsFloat = std::is_floating_point_v<typename R::Value>;
template <class R>
inline constexpr bool kIsBool = std::is_same_v<R, Bool8>;
// Integer storage: what can be quantized and can saturate.
template <class R>
inline constexpr bool kIsInteger = !kIsFloat<R> && !kIsBool<R>;

// Calls visitor(Reader{}) with the reader of `dtype` and returns what it returns. Fixed-point
// types read like the integers of their width; the quantization is applied by the caller.
template <class Visitor>
decltype(auto) visit_dtype(DType dtype, Visitor&& visitor) {
  switch (dtype) {
    case DType::kInt8:
    case DType::kSFixed8:
      return visitor(Plain<int8_t>{});
    case DType::kUInt8:
    case DType::kUFixed8:
      return visitor(Plain<uint8_t>{});
    case DType::kInt16:
    case DType::kSFixed16:
      return visitor(Plain<int16_t>{});
    case DType::kUInt16:
    case DType::kUFixed16:
      return visitor(Plain<uint16_t>{});
    case DType::kInt32:
    case DType::kSFixed32:
      return visitor(Plain<int32_t>{});
    case DType::kUInt32:
    case DType::kUFixed32:
      return visitor(Plain<uint32_t>{});
    case DType::kInt64:
      return visitor(Plain<int64_t>{});
    case DType::kUInt64:
      return visitor(Plain<uint64_t>{});
    case DType::kSFixed4:
      return visitor(Nibble<true>{});
    case DType::kUFixed4:
      return visitor(Nibble<false>{});
    case DType::kFloat16:
      return visitor(Half{});
    case DType::kBFloat16:
      return visitor(BFloat16{});
    case DType::kFloat64:
      return visitor(Plain<double>{});
    case DType::kBool8:
      return visitor(Bool8{});
    case DType::kFloat32:
      break;
  }
  // FLOAT_32, and any value outside the enum (a record is validated before it is read).
  return visitor(Plain<float>{});
}

}  // namespace qd::elements
