#include "schema.h"

#include <cstddef>

namespace qd::schema {
namespace {

// Builds a compound type field by field; the ids it creates live for the whole process.
class Compound {
 public:
  explicit Compound(size_t size) : id_(H5Tcreate(H5T_COMPOUND, size)) {}

  Compound& add(const char* name, size_t offset, hid_t type) {
    H5Tinsert(id_, name, offset, type);
    return *this;
  }
  Compound& add_array(const char* name, size_t offset, hid_t element, hsize_t length) {
    const hid_t array = H5Tarray_create2(element, 1, &length);
    H5Tinsert(id_, name, offset, array);
    H5Tclose(array);
    return *this;
  }
  // A MetaRef appears as two flat fields, `<name>_offset` and `<name>_nbytes`, so h5py users
  // index the pool with row["name_offset"] directly.
  Compound& add_ref(const char* name, size_t offset) {
    const std::string base(name);
    add((base + "_offset").c_str(), offset + offsetof(MetaRef, offset), H5T_NATIVE_UINT64);
    return add((base + "_nbytes").c_str(), offset + offsetof(MetaRef, nbytes), H5T_NATIVE_UINT64);
  }
  hid_t id() const { return id_; }

 private:
  hid_t id_;
};

hid_t build_tensor_row_type() {
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
      .add("quant_bitwidth", offsetof(TensorRow, quant_bitwidth), H5T_NATIVE_UINT8);
  return c.id();
}

hid_t build_run_row_type() {
  Compound c(sizeof(RunRow));
  c.add("unix_ns", offsetof(RunRow, unix_ns), H5T_NATIVE_INT64)
      .add_ref("name", offsetof(RunRow, name))
      .add("tensor_count", offsetof(RunRow, tensor_count), H5T_NATIVE_UINT64)
      .add("dropped_count", offsetof(RunRow, dropped_count), H5T_NATIVE_UINT64)
      .add("run", offsetof(RunRow, run), H5T_NATIVE_UINT32)
      .add("event", offsetof(RunRow, event), H5T_NATIVE_UINT8);
  return c.id();
}

hid_t build_profile_row_type() {
  Compound c(sizeof(ProfileRow));
  c.add("start", offsetof(ProfileRow, start), H5T_NATIVE_INT64)
      .add("end", offsetof(ProfileRow, end), H5T_NATIVE_INT64)
      .add_ref("name", offsetof(ProfileRow, name))
      .add_ref("handles", offsetof(ProfileRow, handles))
      .add_ref("unit", offsetof(ProfileRow, unit))
      .add("run", offsetof(ProfileRow, run), H5T_NATIVE_UINT32);
  return c.id();
}

hid_t build_memory_row_type() {
  Compound c(sizeof(MemoryRow));
  c.add("unix_ns", offsetof(MemoryRow, unix_ns), H5T_NATIVE_INT64)
      .add("bytes", offsetof(MemoryRow, bytes), H5T_NATIVE_UINT64)
      .add_ref("label", offsetof(MemoryRow, label))
      .add("run", offsetof(MemoryRow, run), H5T_NATIVE_UINT32);
  return c.id();
}

hid_t build_graph_row_type() {
  Compound c(sizeof(GraphRow));
  c.add_ref("name", offsetof(GraphRow, name))
      .add_ref("op_type", offsetof(GraphRow, op_type))
      .add_ref("inputs", offsetof(GraphRow, inputs))
      .add_ref("outputs", offsetof(GraphRow, outputs))
      .add_ref("handles", offsetof(GraphRow, handles));
  return c.id();
}

}  // namespace

// Each type is built once per process (a function-local static: thread-safe construction).
template <hid_t (*kBuild)()>
hid_t built_once() {
  static const hid_t type = kBuild();
  return type;
}

hid_t tensor_row_type() { return built_once<build_tensor_row_type>(); }
hid_t run_row_type() { return built_once<build_run_row_type>(); }
hid_t profile_row_type() { return built_once<build_profile_row_type>(); }
hid_t memory_row_type() { return built_once<build_memory_row_type>(); }
hid_t graph_row_type() { return built_once<build_graph_row_type>(); }

}  // namespace qd::schema
