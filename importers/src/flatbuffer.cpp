#include "flatbuffer.h"

#include <limits>

namespace qd::importers::fb {
namespace {

Status corrupt(std::string what) { return error(ErrorCode::kCorrupt, std::move(what)); }

}  // namespace

Result<Buffer> Buffer::open(std::span<const uint8_t> bytes) {
  if (bytes.size() > std::numeric_limits<uint32_t>::max()) {
    return corrupt("larger than a FlatBuffer can be (4 GiB)");
  }
  return Buffer(bytes);
}

Result<Table> Buffer::root(uint32_t root_offset_at) const {
  if (!contains(root_offset_at, 4)) return corrupt("too short for a root offset");
  return table_at(root_offset_at + load<uint32_t>(root_offset_at));
}

// A table starts with a signed offset back (or forward) to its vtable: the vtable holds its own
// size, the table's size, then one 16-bit offset per field (0: absent).
Result<Table> Buffer::table_at(uint32_t pos) const {
  if (!contains(pos, 4)) return corrupt("table at offset " + std::to_string(pos) + " past the end");
  const int64_t vtable = int64_t{pos} - load<int32_t>(pos);
  if (vtable < 0 || !contains(static_cast<uint64_t>(vtable), 4)) {
    return corrupt("vtable of the table at offset " + std::to_string(pos) + " outside the buffer");
  }
  const auto vt = static_cast<uint32_t>(vtable);
  const uint16_t vtable_size = load<uint16_t>(vt);
  const uint16_t table_size = load<uint16_t>(vt + 2);
  if (vtable_size < 4 || vtable_size % 2 != 0 || !contains(vt, vtable_size)) {
    return corrupt("vtable at offset " + std::to_string(vt) + " has a bad size " +
                   std::to_string(vtable_size));
  }
  if (table_size < 4 || !contains(pos, table_size)) {
    return corrupt("table at offset " + std::to_string(pos) + " extends past the end");
  }
  return Table(this, pos, vt, vtable_size, table_size);
}

uint16_t Table::field_offset(uint16_t field) const {
  const uint32_t slot = 4 + 2 * uint32_t{field};
  if (slot + 2 > vtable_size_) return 0;  // fields past the vtable's end are absent
  return buffer_->load<uint16_t>(vtable_ + slot);
}

Result<std::optional<uint32_t>> Table::follow(uint16_t field) const {
  const uint16_t offset = field_offset(field);
  if (offset == 0) return std::optional<uint32_t>();
  if (offset + 4u > table_size_) {
    return corrupt("field " + std::to_string(field) + " lies outside its table");
  }
  const uint32_t at = pos_ + offset;
  const uint64_t target = uint64_t{at} + buffer_->load<uint32_t>(at);
  if (!buffer_->contains(target, 4)) {
    return corrupt("field " + std::to_string(field) + " points outside the buffer");
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(target));
}

Result<std::optional<Table>> Table::table(uint16_t field) const {
  QD_ASSIGN_OR_RETURN(const std::optional<uint32_t> target, follow(field));
  if (!target) return std::optional<Table>();
  QD_ASSIGN_OR_RETURN(Table table, buffer_->table_at(*target));
  return std::optional<Table>(table);
}

Result<std::optional<std::string_view>> Table::string(uint16_t field) const {
  QD_ASSIGN_OR_RETURN(const Vector chars, vector(field, 1));
  if (!has(field)) return std::optional<std::string_view>();
  // The terminating NUL is part of the format; a string without one was cut short.
  if (!buffer_->contains(chars.data, uint64_t{chars.count} + 1) ||
      buffer_->bytes()[chars.data + chars.count] != 0) {
    return corrupt("string of field " + std::to_string(field) + " is not terminated");
  }
  const char* text = reinterpret_cast<const char*>(buffer_->bytes().data() + chars.data);
  return std::optional<std::string_view>(std::string_view(text, chars.count));
}

Result<Table::Vector> Table::vector(uint16_t field, uint32_t element_size) const {
  QD_ASSIGN_OR_RETURN(const std::optional<uint32_t> target, follow(field));
  if (!target) return Vector{};
  const uint32_t count = buffer_->load<uint32_t>(*target);
  if (!buffer_->contains(uint64_t{*target} + 4, uint64_t{count} * element_size)) {
    return corrupt("vector of field " + std::to_string(field) + " (" + std::to_string(count) +
                   " elements) extends past the end");
  }
  return Vector{*target + 4, count};
}

Result<Table> Table::table_at(const Vector& v, uint32_t index) const {
  const uint32_t at = v.data + 4 * index;
  const uint64_t target = uint64_t{at} + buffer_->load<uint32_t>(at);
  if (target > std::numeric_limits<uint32_t>::max()) {
    return corrupt("element " + std::to_string(index) + " points outside the buffer");
  }
  return buffer_->table_at(static_cast<uint32_t>(target));
}

}  // namespace qd::importers::fb
