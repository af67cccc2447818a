// A FlatBuffer reader that checks every access against the buffer, written from the format's
// documented rules (docs/formats.md, "FlatBuffer rules"): a damaged or hostile file gives an
// error saying what could not be read, never an out-of-bounds read. Only what the importers
// need: tables, scalars, strings, byte vectors, and vectors of scalars and of tables.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "qnn_debug/base/status.h"

namespace qd::importers::fb {

// Why a read failed, in a few words ("vtable outside the buffer"); the caller adds the path.
using Problem = std::string;

class Buffer;

class Table {
 public:
  // A field's presence and value. Absent fields give `fallback` (the schema's default).
  template <typename T>
  Result<T> scalar(uint16_t field, T fallback) const;
  Result<std::optional<Table>> table(uint16_t field) const;
  Result<std::optional<std::string_view>> string(uint16_t field) const;
  bool has(uint16_t field) const { return field_offset(field) != 0; }

  // A vector field: its element count and where its elements start; absent: count 0.
  struct Vector {
    uint32_t data = 0;  // buffer offset of element 0
    uint32_t count = 0;
  };
  Result<Vector> vector(uint16_t field, uint32_t element_size) const;
  // Element `index` of a vector of tables / scalars (the vector was checked by vector()).
  Result<Table> table_at(const Vector& v, uint32_t index) const;
  template <typename T>
  T scalar_at(const Vector& v, uint32_t index) const;

 private:
  friend class Buffer;
  Table(const Buffer* buffer, uint32_t pos, uint32_t vtable, uint16_t vtable_size,
        uint16_t table_size)
      : buffer_(buffer),
        pos_(pos),
        vtable_(vtable),
        vtable_size_(vtable_size),
        table_size_(table_size) {}
  uint16_t field_offset(uint16_t field) const;
  // Where an offset field points, after checking the field and the target lie in the buffer.
  Result<std::optional<uint32_t>> follow(uint16_t field) const;

  const Buffer* buffer_;
  uint32_t pos_;
  uint32_t vtable_;
  uint16_t vtable_size_;
  uint16_t table_size_;
};

class Buffer {
 public:
  // `bytes` must stay alive as long as the buffer and its tables. FlatBuffers address 32 bits.
  static Result<Buffer> open(std::span<const uint8_t> bytes);
  // The root table, whose offset is at `root_offset_at` (0, or 4 after a size prefix).
  Result<Table> root(uint32_t root_offset_at) const;
  Result<Table> table_at(uint32_t pos) const;

  bool contains(uint64_t offset, uint64_t length) const {
    return offset <= bytes_.size() && length <= bytes_.size() - offset;
  }
  template <typename T>
  T load(uint32_t offset) const {  // precondition: contains(offset, sizeof(T))
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }
  std::span<const uint8_t> bytes() const { return bytes_; }

 private:
  explicit Buffer(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  std::span<const uint8_t> bytes_;
};

template <typename T>
Result<T> Table::scalar(uint16_t field, T fallback) const {
  const uint16_t offset = field_offset(field);
  if (offset == 0) return fallback;
  if (offset + sizeof(T) > table_size_ || !buffer_->contains(uint64_t{pos_} + offset, sizeof(T))) {
    return error(ErrorCode::kCorrupt, "field " + std::to_string(field) + " lies outside its table");
  }
  return buffer_->load<T>(pos_ + offset);
}

template <typename T>
T Table::scalar_at(const Vector& v, uint32_t index) const {
  return buffer_->load<T>(v.data + index * static_cast<uint32_t>(sizeof(T)));
}

}  // namespace qd::importers::fb
