#include "executorch_etdump_reader.h"

#include <cstring>

#include "flatbuffer.h"

namespace qd::importers {
namespace {

using fb::Table;

// Outside any instruction (Method::init, Method::execute, the program outputs logged after the
// last instruction), ExecuTorch's ETDumpGen writes its unset chain, -1, and its unset debug handle,
// 0, as the instruction id: that 0 is not instruction 0. A debug event's chain_index is a ulong,
// so there the -1 reads as 2^64 - 1.
constexpr int32_t kUnsetChain = -1;
constexpr uint64_t kUnsetDebugChain = static_cast<uint64_t>(int64_t{kUnsetChain});

// Field ids: the declaration order of each table in the ETDump schema (docs/formats.md).
namespace etdump_field {
constexpr uint16_t kEtdumpVersion = 0, kEtdumpRunData = 1;
constexpr uint16_t kRunName = 0, kRunBundledInput = 1, kRunAllocators = 2, kRunEvents = 3;
constexpr uint16_t kAllocatorName = 0;
constexpr uint16_t kEventProfile = 0, kEventAllocation = 1, kEventDebug = 2;
constexpr uint16_t kProfileName = 0, kProfileChain = 1, kProfileInstruction = 2,
                   kProfileDelegateInt = 3, kProfileDelegateStr = 4, kProfileStart = 6,
                   kProfileEnd = 7;
constexpr uint16_t kAllocationAllocator = 0, kAllocationSize = 1;
constexpr uint16_t kDebugChain = 0, kDebugInstruction = 1, kDebugEntry = 2, kDebugDelegateInt = 3,
                   kDebugDelegateStr = 4, kDebugName = 5;
constexpr uint16_t kValueType = 0, kValueTensor = 1, kValueTensorList = 2, kValueInt = 3,
                   kValueFloat = 4, kValueDouble = 5, kValueBool = 6, kValueOutput = 7;
constexpr uint16_t kTensorScalarType = 0, kTensorSizes = 1, kTensorStrides = 2, kTensorOffset = 3;
constexpr uint16_t kScalarValue = 0;  // Int.int_val, Bool.bool_val, Float.float_val, ...
constexpr uint16_t kTensorListTensors = 0;
}  // namespace etdump_field

constexpr char kIdentifier[] = "ED00";
constexpr uint32_t kMaxEtdumpRank =
    64;  // beyond any real tensor; keeps a hostile dims vector cheap

Status at_path(const Status& status, const std::string& path) {
  return error(status.code(), path + ": " + status.message());
}

// A visitor's verdict on what `path` holds, with the path in front when it is an error.
Status from_visitor(Status status, const std::string& path) {
  return status.is_ok() ? status : at_path(status, path);
}

// Runs `expr` (a Result) and binds its value, or returns its error with `path` in front.
#define QD_READ(lhs, expr, path)                                     \
  auto QD_CONCAT_(qd_read_, __LINE__) = (expr);                      \
  if (!QD_CONCAT_(qd_read_, __LINE__).is_ok()) {                     \
    return at_path(QD_CONCAT_(qd_read_, __LINE__).status(), (path)); \
  }                                                                  \
  lhs = std::move(QD_CONCAT_(qd_read_, __LINE__)).value()

Result<std::vector<int64_t>> read_longs(const Table& table, uint16_t id, const std::string& path) {
  QD_READ(const Table::Vector v, table.vector(id, 8), path);
  if (v.count > kMaxEtdumpRank) {
    return error(ErrorCode::kCorrupt, path + ": " + std::to_string(v.count) +
                                          " entries, more than a tensor's rank can be");
  }
  std::vector<int64_t> values(v.count);
  for (uint32_t i = 0; i < v.count; ++i) values[i] = table.scalar_at<int64_t>(v, i);
  return values;
}

Result<EtdumpTensor> read_tensor(const Table& t, const std::string& path) {
  EtdumpTensor tensor;
  QD_READ(tensor.scalar_type, t.scalar<int8_t>(etdump_field::kTensorScalarType, 0), path);
  QD_ASSIGN_OR_RETURN(tensor.sizes, read_longs(t, etdump_field::kTensorSizes, path + ".sizes"));
  QD_ASSIGN_OR_RETURN(tensor.strides,
                      read_longs(t, etdump_field::kTensorStrides, path + ".strides"));
  QD_READ(tensor.offset, t.scalar<int64_t>(etdump_field::kTensorOffset, 0), path + ".offset");
  return tensor;
}

Result<std::vector<EtdumpTensor>> read_tensor_list(const Table& list, const std::string& path) {
  const std::string vector_path = path + ".tensors";
  QD_READ(const Table::Vector v, list.vector(etdump_field::kTensorListTensors, 4), vector_path);
  std::vector<EtdumpTensor> tensors;
  tensors.reserve(v.count);
  for (uint32_t i = 0; i < v.count; ++i) {
    const std::string item = vector_path + "[" + std::to_string(i) + "]";
    QD_READ(const Table t, list.table_at(v, i), item);
    QD_ASSIGN_OR_RETURN(EtdumpTensor tensor, read_tensor(t, item));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

// A scalar wrapped in its own one-field table (Int, Bool, Float, Double).
template <typename T>
Result<T> read_boxed(const Table& value, uint16_t id, const std::string& path) {
  QD_READ(const std::optional<Table> box, value.table(id), path);
  if (!box) return error(ErrorCode::kCorrupt, path + ": missing");
  QD_READ(const T scalar, box->scalar<T>(etdump_field::kScalarValue, T{}), path);
  return scalar;
}

Status read_value_payload(const Table& v, const std::string& path, EtdumpValue& value) {
  switch (value.type) {
    case EtdumpValueType::kNull:
    case EtdumpValueType::kString:  // the schema has no field for its text: nothing to read
      return Status::ok();
    case EtdumpValueType::kInt: {
      QD_ASSIGN_OR_RETURN(value.int_value,
                          read_boxed<int64_t>(v, etdump_field::kValueInt, path + ".int_value"));
      return Status::ok();
    }
    case EtdumpValueType::kBool: {
      QD_ASSIGN_OR_RETURN(const uint8_t b,
                          read_boxed<uint8_t>(v, etdump_field::kValueBool, path + ".bool_value"));
      value.bool_value = b != 0;
      return Status::ok();
    }
    case EtdumpValueType::kFloat: {
      QD_ASSIGN_OR_RETURN(const float f,
                          read_boxed<float>(v, etdump_field::kValueFloat, path + ".float_value"));
      value.number = f;
      return Status::ok();
    }
    case EtdumpValueType::kDouble: {
      QD_ASSIGN_OR_RETURN(
          value.number, read_boxed<double>(v, etdump_field::kValueDouble, path + ".double_value"));
      return Status::ok();
    }
    case EtdumpValueType::kTensor: {
      QD_READ(const std::optional<Table> t, v.table(etdump_field::kValueTensor), path + ".tensor");
      if (!t) return error(ErrorCode::kCorrupt, path + ".tensor: missing for a tensor value");
      QD_ASSIGN_OR_RETURN(EtdumpTensor tensor, read_tensor(*t, path + ".tensor"));
      value.tensors.push_back(std::move(tensor));
      return Status::ok();
    }
    case EtdumpValueType::kTensorList: {
      QD_READ(const std::optional<Table> list, v.table(etdump_field::kValueTensorList),
              path + ".tensor_list");
      if (!list) return error(ErrorCode::kCorrupt, path + ".tensor_list: missing for a list");
      QD_ASSIGN_OR_RETURN(value.tensors, read_tensor_list(*list, path + ".tensor_list"));
      return Status::ok();
    }
  }
  return error(ErrorCode::kCorrupt,
               path + ".val: unknown value type " + std::to_string(static_cast<int>(value.type)));
}

Result<EtdumpValue> read_value(const Table& v, const std::string& path) {
  EtdumpValue value;
  QD_READ(const int8_t type, v.scalar<int8_t>(etdump_field::kValueType, 0), path + ".val");
  value.type = static_cast<EtdumpValueType>(type);
  QD_RETURN_IF_ERROR(read_value_payload(v, path, value));
  QD_READ(const std::optional<Table> output, v.table(etdump_field::kValueOutput), path + ".output");
  if (output) {
    QD_READ(const uint8_t flag, output->scalar<uint8_t>(etdump_field::kScalarValue, 0),
            path + ".output");
    value.output = flag != 0;
  }
  return value;
}

Result<EtdumpDebugEvent> read_debug_event(const Table& d, const std::string& path) {
  EtdumpDebugEvent event;
  QD_READ(event.chain_index, d.scalar<uint64_t>(etdump_field::kDebugChain, 0),
          path + ".chain_index");
  QD_READ(event.instruction_id, d.scalar<int32_t>(etdump_field::kDebugInstruction, -1),
          path + ".instruction_id");
  if (event.chain_index == kUnsetDebugChain) event.instruction_id = -1;
  QD_READ(event.delegate_debug_id_int, d.scalar<int32_t>(etdump_field::kDebugDelegateInt, -1),
          path + ".delegate_debug_id_int");
  QD_READ(event.delegate_debug_id_str, d.string(etdump_field::kDebugDelegateStr),
          path + ".delegate_debug_id_str");
  QD_READ(event.name, d.string(etdump_field::kDebugName), path + ".name");
  QD_READ(const std::optional<Table> entry, d.table(etdump_field::kDebugEntry),
          path + ".debug_entry");
  if (entry) {
    QD_ASSIGN_OR_RETURN(EtdumpValue value, read_value(*entry, path + ".debug_entry"));
    event.value = std::move(value);
  }
  return event;
}

Result<EtdumpProfileEvent> read_profile_event(const Table& p, const std::string& path) {
  EtdumpProfileEvent event;
  QD_READ(event.name, p.string(etdump_field::kProfileName), path + ".name");
  QD_READ(event.chain_index, p.scalar<int32_t>(etdump_field::kProfileChain, 0),
          path + ".chain_index");
  QD_READ(event.instruction_id, p.scalar<int32_t>(etdump_field::kProfileInstruction, -1),
          path + ".instruction_id");
  if (event.chain_index == kUnsetChain) event.instruction_id = -1;
  QD_READ(event.delegate_debug_id_int, p.scalar<int32_t>(etdump_field::kProfileDelegateInt, -1),
          path + ".delegate_debug_id_int");
  QD_READ(event.delegate_debug_id_str, p.string(etdump_field::kProfileDelegateStr),
          path + ".delegate_debug_id_str");
  QD_READ(event.start_time, p.scalar<uint64_t>(etdump_field::kProfileStart, 0),
          path + ".start_time");
  QD_READ(event.end_time, p.scalar<uint64_t>(etdump_field::kProfileEnd, 0), path + ".end_time");
  return event;
}

Result<EtdumpAllocationEvent> read_allocation_event(const Table& a, const std::string& path) {
  EtdumpAllocationEvent event;
  QD_READ(event.allocator_id, a.scalar<int32_t>(etdump_field::kAllocationAllocator, 0),
          path + ".allocator_id");
  QD_READ(event.allocation_size, a.scalar<uint64_t>(etdump_field::kAllocationSize, 0),
          path + ".allocation_size");
  return event;
}

// One Event table: exactly one of its three fields is set.
Status visit_event(const Table& e, const EventPosition& at, EtdumpVisitor& visitor) {
  const std::string path = describe(at);
  const int present = int{e.has(etdump_field::kEventProfile)} +
                      int{e.has(etdump_field::kEventAllocation)} +
                      int{e.has(etdump_field::kEventDebug)};
  if (present != 1) {
    return error(ErrorCode::kCorrupt, path +
                                          ": an event must hold exactly one of profile, "
                                          "allocation and debug events, this one holds " +
                                          std::to_string(present));
  }
  if (e.has(etdump_field::kEventDebug)) {
    QD_READ(const std::optional<Table> d, e.table(etdump_field::kEventDebug),
            path + ".debug_event");
    QD_ASSIGN_OR_RETURN(const EtdumpDebugEvent event, read_debug_event(*d, path + ".debug_event"));
    return from_visitor(visitor.on_debug_event(at, event), path);
  }
  if (e.has(etdump_field::kEventProfile)) {
    QD_READ(const std::optional<Table> p, e.table(etdump_field::kEventProfile),
            path + ".profile_event");
    QD_ASSIGN_OR_RETURN(const EtdumpProfileEvent event,
                        read_profile_event(*p, path + ".profile_event"));
    return from_visitor(visitor.on_profile_event(at, event), path);
  }
  QD_READ(const std::optional<Table> a, e.table(etdump_field::kEventAllocation),
          path + ".allocation_event");
  QD_ASSIGN_OR_RETURN(const EtdumpAllocationEvent event,
                      read_allocation_event(*a, path + ".allocation_event"));
  return from_visitor(visitor.on_allocation_event(at, event), path);
}

Result<EtdumpRun> read_run_info(const Table& r, const std::string& path) {
  EtdumpRun run;
  QD_READ(const std::optional<std::string_view> name, r.string(etdump_field::kRunName),
          path + ".name");
  run.name = name.value_or("");
  QD_READ(run.bundled_input_index, r.scalar<int32_t>(etdump_field::kRunBundledInput, -1),
          path + ".bundled_input_index");
  QD_READ(const Table::Vector allocators, r.vector(etdump_field::kRunAllocators, 4),
          path + ".allocators");
  for (uint32_t i = 0; i < allocators.count; ++i) {
    const std::string item = path + ".allocators[" + std::to_string(i) + "]";
    QD_READ(const Table allocator, r.table_at(allocators, i), item);
    QD_READ(const std::optional<std::string_view> allocator_name,
            allocator.string(etdump_field::kAllocatorName), item + ".name");
    run.allocators.push_back(allocator_name.value_or(""));
  }
  return run;
}

Status visit_run(const Table& r, uint32_t index, EtdumpVisitor& visitor) {
  const std::string path = "run_data[" + std::to_string(index) + "]";
  QD_ASSIGN_OR_RETURN(EtdumpRun run, read_run_info(r, path));
  QD_READ(const Table::Vector events, r.vector(etdump_field::kRunEvents, 4), path + ".events");
  run.event_count = events.count;
  QD_RETURN_IF_ERROR(from_visitor(visitor.on_run(index, run), path));
  for (uint32_t e = 0; e < events.count; ++e) {
    const EventPosition at{index, e};
    QD_READ(const Table event, r.table_at(events, e), describe(at));
    QD_RETURN_IF_ERROR(visit_event(event, at, visitor));
  }
  return from_visitor(visitor.on_run_end(index), path);
}

// Where the root offset sits: after the 4-byte size prefix when there is one.
Result<bool> size_prefixed(std::span<const uint8_t> file) {
  const auto identifier_at = [&](size_t at) {
    return file.size() >= at + 4 && std::memcmp(file.data() + at, kIdentifier, 4) == 0;
  };
  if (identifier_at(8)) {
    uint32_t length = 0;
    std::memcpy(&length, file.data(), 4);
    if (length > file.size() - 4) {
      return error(ErrorCode::kCorrupt,
                   "truncated: the size prefix says " + std::to_string(length) +
                       " bytes follow, the file has " + std::to_string(file.size() - 4));
    }
    return true;
  }
  if (identifier_at(4)) return false;
  return error(ErrorCode::kCorrupt, "not an ETDump: no file identifier \"ED00\" at byte 4 or 8 (" +
                                        std::to_string(file.size()) + " bytes)");
}

}  // namespace

std::string describe(const EventPosition& position) {
  return "run_data[" + std::to_string(position.run) + "].events[" + std::to_string(position.event) +
         "]";
}

bool looks_like_etdump(std::span<const uint8_t> head) {
  const auto identifier_at = [&](size_t at) {
    return head.size() >= at + 4 && std::memcmp(head.data() + at, kIdentifier, 4) == 0;
  };
  return identifier_at(8) || identifier_at(4);
}

Result<EtdumpHeader> read_etdump(std::span<const uint8_t> file, EtdumpVisitor& visitor) {
  EtdumpHeader header;
  QD_ASSIGN_OR_RETURN(header.size_prefixed, size_prefixed(file));
  std::span<const uint8_t> body = file;
  if (header.size_prefixed) {
    uint32_t length = 0;
    std::memcpy(&length, file.data(), 4);
    body = file.subspan(4, length);  // offsets count from after the prefix
  }
  QD_ASSIGN_OR_RETURN(const fb::Buffer buffer, fb::Buffer::open(body));
  QD_READ(const Table root, buffer.root(0), "root");
  QD_READ(header.version, root.scalar<uint32_t>(etdump_field::kEtdumpVersion, 0), "version");
  QD_READ(const Table::Vector runs, root.vector(etdump_field::kEtdumpRunData, 4), "run_data");
  header.run_count = runs.count;
  for (uint32_t r = 0; r < runs.count; ++r) {
    QD_READ(const Table run, root.table_at(runs, r), "run_data[" + std::to_string(r) + "]");
    QD_RETURN_IF_ERROR(visit_run(run, r, visitor));
  }
  return header;
}

}  // namespace qd::importers
