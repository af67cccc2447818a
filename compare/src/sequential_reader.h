// One side of a pair read front to back in bounded chunks and held to the store's CRC as it goes,
// for the slices of a pair (measure.cpp) and a classifier's scores (classification.cpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "qnn_debug/base/checksum.h"
#include "qnn_debug/base/status.h"
#include "qnn_debug/base/text.h"
#include "qnn_debug/compare/decode.h"
#include "qnn_debug/etdump/store_reader.h"

namespace qd::compare {

// Decoded elements of one side: a float32 side as stored, every other one as Split (exact to
// about 2^-47).
struct Values {
  const float* floats = nullptr;
  const Split* splits = nullptr;
  bool zeros = false;  // every value is +0 (SequentialReader::piece)
};

// Calls f with the pointer that `values` holds.
template <class F>
void with_values(const Values& values, F&& f) {
  if (values.floats != nullptr) {
    f(values.floats);
  } else {
    f(values.splits);
  }
}

// The bytes of a stretch of a tensor and their CRC-32C: stretches checked apart (slices, on other
// threads) are appended in order and held to the CRC of the whole.
struct BytesChecked {
  uint32_t crc = 0;
  uint64_t bytes = 0;
  // Some chunk was read where it was predicted to be (StoreReader::stream_tensor_range): a CRC
  // mismatch then calls for StoreReader::relocate and a second reading, not a verdict of damage.
  bool predicted = false;

  void append(const BytesChecked& next) {
    crc = crc32c_combine(crc, next.crc, next.bytes);
    bytes += next.bytes;
    predicted = predicted || next.predicted;
  }
};

inline Status verify_checksum(const StoreReader& store, const TensorEntry& tensor,
                              const BytesChecked& checked) {
  if (checked.bytes == tensor.data_nbytes && checked.crc == tensor.data_crc32c) return Status::ok();
  return error(ErrorCode::kCorrupt, store.path() + ": tensor " + quote_name(tensor.name) +
                                        " (seq " + std::to_string(tensor.seq) +
                                        "): checksum mismatch, data is damaged");
}

// One side of a pair, elements [begin, end) read front to back in bounded chunks and checked
// against the CRC as it goes: the comparison never trusts bytes the store cannot vouch for. The
// bytes of a stretch are those of its elements; a 4-bit stretch starts on an even element, and the
// byte shared with the next stretch is that one's.
class SequentialReader {
 public:
  SequentialReader(const StoreReader& store, const TensorEntry& tensor, uint64_t begin,
                   uint64_t end)
      : store_(store),
        tensor_(tensor),
        packed_(info(tensor.dtype).bits == 4),
        native_float_(tensor.dtype == DType::kFloat32 &&
                      std::endian::native == std::endian::little),
        zero_code_(std::endian::native == std::endian::little ? split_zero_code(tensor)
                                                              : std::nullopt),
        check_end_(end == tensor.element_count() ? tensor.data_nbytes : byte_of(end)),
        checked_to_(byte_of(begin)) {}
  SequentialReader(const StoreReader& store, const TensorEntry& tensor)
      : SequentialReader(store, tensor, 0, tensor.element_count()) {}

  // Reads the bytes of elements [first, first + count) and checks them into the CRC; chunks must
  // come in order, `first` even for 4-bit.
  Status fetch(uint64_t first, uint64_t count) {
    const uint64_t begin = byte_of(first), end = byte_of(first + count) + (packed_ ? 1 : 0);
    const uint64_t stop = std::min<uint64_t>(end, tensor_.data_nbytes);
    storage_.resize((stop - begin + sizeof(float) - 1) / sizeof(float));
    const std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(storage_.data()), stop - begin);
    // Every byte is held to the CRC: chunks may be read where they are predicted to be
    // (StoreReader::stream_tensor_range; on a mismatch, the caller relocates and reads again).
    QD_RETURN_IF_ERROR(store_.stream_tensor_range(tensor_, begin, bytes, checked_.predicted));
    const uint64_t fresh_from = std::max(begin, checked_to_);  // a shared nibble byte once only
    const uint64_t fresh_to = std::min(stop, check_end_);
    if (fresh_to > fresh_from) {
      checked_.crc =
          crc32c_extend(checked_.crc, bytes.data() + (fresh_from - begin), fresh_to - fresh_from);
      checked_.bytes += fresh_to - fresh_from;
      checked_to_ = fresh_to;
    }
    fetched_begin_ = begin;
    return Status::ok();
  }

  // Elements [first, first + count) of the last fetch (`first` even for 4-bit): a float32 side's
  // stored floats themselves, any other side decoded into `scratch` (count values), or, when every
  // raw value is the code of an exact zero, zeros as decoding would have written them.
  Values piece(uint64_t first, uint64_t count, Split* scratch) {
    const uint64_t offset = byte_of(first) - fetched_begin_;
    if (native_float_) return {storage_.data() + offset / sizeof(float), nullptr};
    if (zero_code_ && count <= kZeroPiece && all_zero_code(offset, count))
      return {nullptr, kZeros, true};
    decode_fetched(first, count, scratch);
    return {nullptr, scratch};
  }

  // The stored floats of elements [first, first + count) of the last fetch, for a float32 side;
  // nullptr for any other.
  const float* floats(uint64_t first) const {
    if (!native_float_) return nullptr;
    return storage_.data() + (byte_of(first) - fetched_begin_) / sizeof(float);
  }

  // Decodes elements [first, first + count) into `out`.
  template <class Out>
  Status read(uint64_t first, uint64_t count, Out* out) {
    QD_RETURN_IF_ERROR(fetch(first, count));
    decode_fetched(first, count, out);
    return Status::ok();
  }

  // For a reader of the whole tensor: every byte read and matching the stored CRC.
  Status verify() const { return verify_checksum(store_, tensor_, checked_); }

  const BytesChecked& checked() const { return checked_; }
  const DecodeCounts& saturated() const { return saturated_; }

  // The longest piece that piece() can give as zeros without decoding.
  static constexpr uint64_t kZeroPiece = 8192;

 private:
  static inline const Split kZeros[kZeroPiece] = {};

  // True when the `count` raw values at byte `offset` of the fetch are all zero_code_.
  bool all_zero_code(uint64_t offset, uint64_t count) const {
    const uint8_t* at = reinterpret_cast<const uint8_t*>(storage_.data()) + offset;
    if (info(tensor_.dtype).bits == 8) return raw_all_equal<uint8_t>(at, count);
    return raw_all_equal<uint16_t>(at, count);
  }

  template <class Raw>
  bool raw_all_equal(const uint8_t* at, uint64_t count) const {
    const auto code = static_cast<Raw>(*zero_code_);
    Raw differs = 0;
#pragma omp simd reduction(| : differs)
    for (uint64_t i = 0; i < count; ++i) {
      Raw v;
      std::memcpy(&v, at + i * sizeof(Raw), sizeof(Raw));
      differs |= static_cast<Raw>(v ^ code);
    }
    return differs == 0;
  }

  template <class Out>
  void decode_fetched(uint64_t first, uint64_t count, Out* out) {
    const uint8_t* fetched = reinterpret_cast<const uint8_t*>(storage_.data());
    saturated_ += decode(tensor_, fetched + (byte_of(first) - fetched_begin_), first, count, out);
  }

  uint64_t byte_of(uint64_t element) const {
    return packed_ ? element / 2 : element * (info(tensor_.dtype).bits / 8);
  }

  const StoreReader& store_;
  const TensorEntry& tensor_;
  const bool packed_;
  const bool native_float_;
  const std::optional<uint16_t> zero_code_;
  const uint64_t check_end_;  // the first byte that is not this stretch's
  // The fetched bytes, held as floats so that a float32 side is read in place.
  std::vector<float> storage_;
  uint64_t fetched_begin_ = 0;  // the byte storage_ starts at
  uint64_t checked_to_;         // the bytes before this one are in checked_
  BytesChecked checked_;
  DecodeCounts saturated_;
};

}  // namespace qd::compare
