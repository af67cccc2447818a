#include "schema.h"

#include <cstddef>
#include <string>

#include "qnn_debug/base/checksum.h"

namespace qd::schema {
namespace {

// Builds a compound type field by field, and the layout of what the row checksum covers; the
// ids it creates live for the whole process.
class Compound {
 public:
  explicit Compound(size_t size) : id_(H5Tcreate(H5T_COMPOUND, size)) {}

  Compound& add(const char* name, size_t offset, hid_t type) {
    H5Tinsert(id_, name, offset, type);
    layout_.fields.emplace_back(offset, H5Tget_size(type));
    return *this;
  }
  Compound& add_array(const char* name, size_t offset, hid_t element, hsize_t length) {
    const hid_t array = H5Tarray_create2(element, 1, &length);
    H5Tinsert(id_, name, offset, array);
    layout_.fields.emplace_back(offset, H5Tget_size(array));
    H5Tclose(array);
    return *this;
  }
  // A MetaRef appears as two flat fields, `<name>_offset` and `<name>_nbytes`, so h5py users
  // index the pool with row["name_offset"] directly.
  Compound& add_ref(const char* name, size_t offset) {
    const std::string base(name);
    layout_.refs.push_back(offset);
    add((base + "_offset").c_str(), offset + offsetof(MetaRef, offset), H5T_NATIVE_UINT64);
    return add((base + "_nbytes").c_str(), offset + offsetof(MetaRef, nbytes), H5T_NATIVE_UINT64);
  }
  // The row's own checksum, the last field and not covered by itself.
  Compound& add_checksum(size_t offset) {
    H5Tinsert(id_, "row_crc32c", offset, H5T_NATIVE_UINT32);
    return *this;
  }
  hid_t id() const { return id_; }
  const RowLayout& layout() const { return layout_; }

 private:
  hid_t id_;
  RowLayout layout_;
};

Compound build_tensor_row() {
  Compound c(sizeof(TensorRow));
  c.add("seq", offsetof(TensorRow, seq), H5T_NATIVE_UINT64)
      .add("capture_unix_ns", offsetof(TensorRow, capture_unix_ns), H5T_NATIVE_INT64)
      .add("data_offset", offsetof(TensorRow, data_offset), H5T_NATIVE_UINT64)
      .add("data_nbytes", offsetof(TensorRow, data_nbytes), H5T_NATIVE_UINT64)
      .add_array("dims", offsetof(TensorRow, dims), H5T_NATIVE_UINT64, 8)
      .add_ref("name", offsetof(TensorRow, name))
      .add_ref("handles", offsetof(TensorRow, handles))
      .add_ref("quant", offsetof(TensorRow, quant))
      .add("stat_min", offsetof(TensorRow, stat_min), H5T_NATIVE_DOUBLE)
      .add("stat_max", offsetof(TensorRow, stat_max), H5T_NATIVE_DOUBLE)
      .add("stat_mean", offsetof(TensorRow, stat_mean), H5T_NATIVE_DOUBLE)
      .add("stat_nan_count", offsetof(TensorRow, stat_nan_count), H5T_NATIVE_UINT64)
      .add("stat_inf_count", offsetof(TensorRow, stat_inf_count), H5T_NATIVE_UINT64)
      .add("run", offsetof(TensorRow, run), H5T_NATIVE_UINT32)
      .add("dtype", offsetof(TensorRow, dtype), H5T_NATIVE_UINT32)
      .add("data_crc32c", offsetof(TensorRow, data_crc32c), H5T_NATIVE_UINT32)
      .add("output_index", offsetof(TensorRow, output_index), H5T_NATIVE_INT32)
      .add("quant_axis", offsetof(TensorRow, quant_axis), H5T_NATIVE_INT32)
      .add("quant_count", offsetof(TensorRow, quant_count), H5T_NATIVE_UINT32)
      .add_array("axis_order", offsetof(TensorRow, axis_order), H5T_NATIVE_INT8, 8)
      .add("rank", offsetof(TensorRow, rank), H5T_NATIVE_UINT8)
      .add("role", offsetof(TensorRow, role), H5T_NATIVE_UINT8)
      .add("name_matched", offsetof(TensorRow, name_matched), H5T_NATIVE_UINT8)
      .add("quant_convention", offsetof(TensorRow, quant_convention), H5T_NATIVE_UINT8)
      .add("quant_bitwidth", offsetof(TensorRow, quant_bitwidth), H5T_NATIVE_UINT8)
      .add_checksum(offsetof(TensorRow, row_crc32c));
  return c;
}

Compound build_run_row() {
  Compound c(sizeof(RunRow));
  c.add("unix_ns", offsetof(RunRow, unix_ns), H5T_NATIVE_INT64)
      .add_ref("name", offsetof(RunRow, name))
      .add("tensor_count", offsetof(RunRow, tensor_count), H5T_NATIVE_UINT64)
      .add("dropped_count", offsetof(RunRow, dropped_count), H5T_NATIVE_UINT64)
      .add("run", offsetof(RunRow, run), H5T_NATIVE_UINT32)
      .add("event", offsetof(RunRow, event), H5T_NATIVE_UINT8)
      .add_checksum(offsetof(RunRow, row_crc32c));
  return c;
}

Compound build_profile_row() {
  Compound c(sizeof(ProfileRow));
  c.add("start", offsetof(ProfileRow, start), H5T_NATIVE_INT64)
      .add("end", offsetof(ProfileRow, end), H5T_NATIVE_INT64)
      .add_ref("name", offsetof(ProfileRow, name))
      .add_ref("handles", offsetof(ProfileRow, handles))
      .add_ref("unit", offsetof(ProfileRow, unit))
      .add("run", offsetof(ProfileRow, run), H5T_NATIVE_UINT32)
      .add_checksum(offsetof(ProfileRow, row_crc32c));
  return c;
}

Compound build_memory_row() {
  Compound c(sizeof(MemoryRow));
  c.add("unix_ns", offsetof(MemoryRow, unix_ns), H5T_NATIVE_INT64)
      .add("bytes", offsetof(MemoryRow, bytes), H5T_NATIVE_UINT64)
      .add_ref("label", offsetof(MemoryRow, label))
      .add("run", offsetof(MemoryRow, run), H5T_NATIVE_UINT32)
      .add_checksum(offsetof(MemoryRow, row_crc32c));
  return c;
}

Compound build_graph_row() {
  Compound c(sizeof(GraphRow));
  c.add_ref("name", offsetof(GraphRow, name))
      .add_ref("op_type", offsetof(GraphRow, op_type))
      .add_ref("inputs", offsetof(GraphRow, inputs))
      .add_ref("outputs", offsetof(GraphRow, outputs))
      .add_ref("handles", offsetof(GraphRow, handles))
      .add_checksum(offsetof(GraphRow, row_crc32c));
  return c;
}

Compound build_shape_guess_row() {
  Compound c(sizeof(ShapeGuessRow));
  c.add_ref("name", offsetof(ShapeGuessRow, name))
      .add_checksum(offsetof(ShapeGuessRow, row_crc32c));
  return c;
}

Compound build_profile_instruction_row() {
  Compound c(sizeof(ProfileInstructionRow));
  c.add("event", offsetof(ProfileInstructionRow, event), H5T_NATIVE_UINT64)
      .add("instruction_id", offsetof(ProfileInstructionRow, instruction_id), H5T_NATIVE_INT64)
      .add_checksum(offsetof(ProfileInstructionRow, row_crc32c));
  return c;
}

// Each type is built once per process (function-local statics: thread-safe).
template <Compound (*kBuild)()>
const Compound& built() {
  static const Compound compound = kBuild();
  return compound;
}

}  // namespace

hid_t tensor_row_type() { return built<build_tensor_row>().id(); }
hid_t run_row_type() { return built<build_run_row>().id(); }
hid_t profile_row_type() { return built<build_profile_row>().id(); }
hid_t memory_row_type() { return built<build_memory_row>().id(); }
hid_t graph_row_type() { return built<build_graph_row>().id(); }
hid_t shape_guess_row_type() { return built<build_shape_guess_row>().id(); }
hid_t profile_instruction_row_type() { return built<build_profile_instruction_row>().id(); }

template <>
const RowLayout& row_layout<TensorRow>() {
  return built<build_tensor_row>().layout();
}
template <>
const RowLayout& row_layout<RunRow>() {
  return built<build_run_row>().layout();
}
template <>
const RowLayout& row_layout<ProfileRow>() {
  return built<build_profile_row>().layout();
}
template <>
const RowLayout& row_layout<MemoryRow>() {
  return built<build_memory_row>().layout();
}
template <>
const RowLayout& row_layout<GraphRow>() {
  return built<build_graph_row>().layout();
}

template <>
const RowLayout& row_layout<ShapeGuessRow>() {
  return built<build_shape_guess_row>().layout();
}
template <>
const RowLayout& row_layout<ProfileInstructionRow>() {
  return built<build_profile_instruction_row>().layout();
}

uint32_t row_checksum(const RowLayout& layout, const void* row, uint32_t meta_crc) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  uint32_t crc = meta_crc;
  for (const auto& [offset, size] : layout.fields) crc = crc32c_extend(crc, bytes + offset, size);
  return crc;
}

}  // namespace qd::schema
