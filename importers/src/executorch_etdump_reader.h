// The reader of ExecuTorch's own ETDump files (`.etdp`), the input of `capture etdump`; not
// the qnn-debug store (etdump/), which is only modelled on them. A FlatBuffer, usually
// size-prefixed, with file identifier "ED00". docs/formats.md ("ExecuTorch ETDump") lists the
// tables and field ids this reads. The reader walks it run by run and event by event and hands each
// event to a visitor, so a dump with a million events is never held as objects in memory.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"

namespace qd::importers {

// ETDump's Value.val.
enum class EtdumpValueType : int8_t {
  kNull = 0,
  kInt = 1,
  kBool = 2,
  kFloat = 3,
  kDouble = 4,
  kTensor = 5,
  kTensorList = 6,
  kString = 7,
};

struct EtdumpTensor {
  int8_t scalar_type = 0;  // ExecuTorch ScalarType code
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // empty when the writer gave none
  int64_t offset = -1;           // into the debug buffer; -1: no data (an empty tensor)
};

struct EtdumpValue {
  EtdumpValueType type = EtdumpValueType::kNull;
  std::vector<EtdumpTensor> tensors;  // one for kTensor, the list for kTensorList
  int64_t int_value = 0;
  double number = 0;  // kFloat (widened) and kDouble
  bool bool_value = false;
  bool output = false;  // the value is a program output
};

// instruction_id is -1 also for an event outside any instruction (whatever the file holds there).
struct EtdumpDebugEvent {
  uint64_t chain_index = 0;
  int32_t instruction_id = -1;
  int32_t delegate_debug_id_int = -1;
  std::optional<std::string_view> delegate_debug_id_str;
  std::optional<std::string_view> name;
  std::optional<EtdumpValue> value;  // debug_entry
};

struct EtdumpProfileEvent {
  std::optional<std::string_view> name;
  int32_t chain_index = 0;
  int32_t instruction_id = -1;  // as in EtdumpDebugEvent
  int32_t delegate_debug_id_int = -1;
  std::optional<std::string_view> delegate_debug_id_str;
  uint64_t start_time = 0;
  uint64_t end_time = 0;
};

struct EtdumpAllocationEvent {
  int32_t allocator_id = 0;
  uint64_t allocation_size = 0;
};

struct EtdumpRun {
  std::string_view name;
  int32_t bundled_input_index = -1;
  std::vector<std::string_view> allocators;
  uint32_t event_count = 0;
};

struct EtdumpHeader {
  uint32_t version = 0;
  bool size_prefixed = true;
  uint32_t run_count = 0;
};

// Where an event sits: "run_data[1].events[17]" in messages.
struct EventPosition {
  uint32_t run = 0;
  uint32_t event = 0;
};
std::string describe(const EventPosition& position);

// Receives the file's content in order. An error returned by a callback stops the walk and is
// returned by read_etdump, prefixed with the event's position.
class EtdumpVisitor {
 public:
  virtual ~EtdumpVisitor() = default;
  virtual Status on_run(uint32_t run, const EtdumpRun& info) = 0;
  virtual Status on_debug_event(const EventPosition& at, const EtdumpDebugEvent& event) = 0;
  virtual Status on_profile_event(const EventPosition& at, const EtdumpProfileEvent& event) = 0;
  virtual Status on_allocation_event(const EventPosition& at,
                                     const EtdumpAllocationEvent& event) = 0;
  virtual Status on_run_end(uint32_t run) = 0;
};

// True when `head` (the file's first bytes) carries the ETDump identifier, size-prefixed or not.
bool looks_like_etdump(std::span<const uint8_t> head);

// Walks `file`. Errors (kCorrupt): not an ETDump, truncated, any table, vector or string outside
// the buffer, an unknown value type; the message gives the path of what could not be read
// ("run_data[1].events[17].debug_event.debug_entry.tensor.sizes: ...") without the file name,
// which the caller adds.
Result<EtdumpHeader> read_etdump(std::span<const uint8_t> file, EtdumpVisitor& visitor);

}  // namespace qd::importers
