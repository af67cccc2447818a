#include "etdump_import.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "encoding_audit.h"
#include "etrecord.h"
#include "executorch_etdump_reader.h"
#include "import_steps.h"
#include "qnn_debug/base/input_file.h"
#include "qnn_debug/etdump/store.h"
#include "qnn_debug/importers/encodings.h"
#include "qnn_debug/importers/store_sink.h"
#include "qnn_debug/naming/naming.h"
#include "tensor_layout.h"

namespace qd::importers {
namespace {

constexpr uint64_t kMaxEtdumpBytes = uint64_t{2} << 30;  // FlatBuffers address 2 GiB

// ---- what the dump's files give -------------------------------------------------------------

struct Inputs {
  std::vector<uint8_t> etdump;
  std::shared_ptr<const InputFile> debug_buffer;  // null when none was given
  EncodingTable encodings;
  std::optional<EtrecordHandles> etrecord;
  naming::NameParser parser;
};

Result<Inputs> open_inputs(const EtdumpImportOptions& o) {
  QD_ASSIGN_OR_RETURN(auto etdump_file, InputFile::open(o.etdump_path, "an ETDump"));
  QD_ASSIGN_OR_RETURN(std::vector<uint8_t> etdump,
                      etdump_file->read_all(kMaxEtdumpBytes, "the ETDump"));
  std::shared_ptr<const InputFile> buffer;
  if (!o.debug_buffer_path.empty()) {
    QD_ASSIGN_OR_RETURN(buffer, InputFile::open(o.debug_buffer_path, "a debug buffer"));
  }
  QD_ASSIGN_OR_RETURN(EncodingTable encodings, load_encodings_files(o.encodings_paths));
  std::optional<EtrecordHandles> etrecord;
  if (!o.etrecord_path.empty()) {
    QD_ASSIGN_OR_RETURN(etrecord, EtrecordHandles::load(o.etrecord_path, o.etrecord_method));
  }
  QD_ASSIGN_OR_RETURN(naming::NameParser parser,
                      naming::NameParser::create(o.naming, "", o.handle_map_path));
  return Inputs{std::move(etdump), std::move(buffer), std::move(encodings), std::move(etrecord),
                std::move(parser)};
}

bool from_delegate(const EtdumpDebugEvent& e) {
  return e.delegate_debug_id_str.has_value() || e.delegate_debug_id_int != -1;
}

// A value the runtime logged after its last instruction: a program output (Method::log_outputs).
bool program_output(const EtdumpDebugEvent& e) {
  return e.instruction_id < 0 && !e.name && !from_delegate(e) && e.value && e.value->output;
}

// The name a debug event's tensors are stored under: the delegate's own tensor name (QNN:
// "aten_relu_default@0"), else the runtime's op name, else the instruction, else what the value
// is outside any instruction.
std::string tensor_name(const EtdumpDebugEvent& e) {
  if (e.delegate_debug_id_str) return std::string(*e.delegate_debug_id_str);
  if (e.delegate_debug_id_int != -1)
    return "delegate_id_" + std::to_string(e.delegate_debug_id_int);
  if (e.name) return std::string(*e.name);
  if (e.instruction_id >= 0) return "instruction_" + std::to_string(e.instruction_id);
  return program_output(e) ? "program_output" : "outside_instructions";
}

// Debug handles the ETRecord gives an event, exact names only; nullptr when it gives none.
const std::vector<int64_t>* etrecord_handles(const Inputs& in, const EtdumpDebugEvent& e) {
  if (!in.etrecord) return nullptr;
  if (e.delegate_debug_id_str)
    return in.etrecord->delegate(e.instruction_id, *e.delegate_debug_id_str);
  if (e.delegate_debug_id_int != -1) {
    return in.etrecord->delegate(e.instruction_id, std::to_string(e.delegate_debug_id_int));
  }
  return e.instruction_id < 0 ? nullptr : in.etrecord->instruction(e.instruction_id);
}

// ---- the first pass: ops by name, for joining profile events ---------------------------------

// Every op the debug events name, with its debug handles, so a profile event such as
// "aten_relu_default_3:OpId_60 (cycles)" finds the handles of tensor "aten_relu_default_3@0"
// wherever in the dump either appears.
class OpIndex : public EtdumpVisitor {
 public:
  explicit OpIndex(const Inputs& inputs) : in_(inputs) {}

  Status on_run(uint32_t, const EtdumpRun&) override { return Status::ok(); }
  Status on_run_end(uint32_t) override { return Status::ok(); }
  Status on_profile_event(const EventPosition&, const EtdumpProfileEvent&) override {
    return Status::ok();
  }
  Status on_allocation_event(const EventPosition&, const EtdumpAllocationEvent&) override {
    return Status::ok();
  }
  Status on_debug_event(const EventPosition&, const EtdumpDebugEvent& e) override {
    if (!e.value || e.value->tensors.empty()) return Status::ok();
    needs_buffer_ =
        needs_buffer_ || std::any_of(e.value->tensors.begin(), e.value->tensors.end(),
                                     [](const EtdumpTensor& t) { return t.offset >= 0; });
    delegate_seen_ = delegate_seen_ || from_delegate(e);
    std::string name = tensor_name(e);
    if (seen_.count(name) != 0) return Status::ok();
    const naming::ParsedName parsed = in_.parser.parse(name);
    const std::vector<int64_t>* given = etrecord_handles(in_, e);
    ops_.try_emplace(std::string(parsed.node), given != nullptr ? *given : parsed.handles);
    seen_.insert(std::move(name));
    return Status::ok();
  }

  const std::vector<int64_t>* handles_of(std::string_view op) const {
    const auto it = ops_.find(std::string(op));
    return it == ops_.end() ? nullptr : &it->second;
  }
  bool needs_buffer() const { return needs_buffer_; }
  bool delegate_seen() const { return delegate_seen_; }

 private:
  const Inputs& in_;
  std::unordered_map<std::string, std::vector<int64_t>> ops_;
  std::unordered_set<std::string> seen_;
  bool needs_buffer_ = false;
  bool delegate_seen_ = false;
};

// ---- the second pass: the store -------------------------------------------------------------

// The dtype a dump's tensor is stored in. ExecuTorch's QNN delegate logs the raw storage of its
// fixed-point types under these ScalarTypes (docs/formats.md, "ExecuTorch ETDump").
Result<DType> dump_dtype(int8_t scalar_type, bool delegate) {
  if (delegate) {
    switch (scalar_type) {
      case 0:  // Byte
        return DType::kUFixed8;
      case 1:  // Char
        return DType::kSFixed8;
      case 2:  // Short
        return DType::kSFixed16;
      case 27:  // UInt16
        return DType::kUFixed16;
      default:
        break;
    }
  }
  if (const std::optional<DType> dtype = dtype_from_executorch(scalar_type)) return *dtype;
  return corrupt_input("unknown scalar type " + std::to_string(scalar_type));
}

// The bytes and record of a scalar debug value, stored as a 0-d tensor.
struct ScalarTensor {
  DType dtype = DType::kInt64;
  std::vector<uint8_t> bytes;
};

template <typename T>
ScalarTensor scalar_tensor(DType dtype, T value) {
  ScalarTensor out{dtype, std::vector<uint8_t>(sizeof(T))};
  std::memcpy(out.bytes.data(), &value, sizeof(T));
  return out;
}

std::optional<ScalarTensor> scalar_of(const EtdumpValue& v) {
  switch (v.type) {
    case EtdumpValueType::kInt:
      return scalar_tensor(DType::kInt64, v.int_value);
    case EtdumpValueType::kBool:
      return scalar_tensor(DType::kBool8, uint8_t{v.bool_value});
    case EtdumpValueType::kFloat:
      return scalar_tensor(DType::kFloat32, static_cast<float>(v.number));
    case EtdumpValueType::kDouble:
      return scalar_tensor(DType::kFloat64, v.number);
    default:
      return std::nullopt;
  }
}

// "aten_relu_default_3:OpId_60 (cycles)" -> op "aten_relu_default_3", unit "cycles".
struct ProfileName {
  std::string op;
  std::string unit;
};

ProfileName split_profile_name(std::string_view raw, bool delegate) {
  ProfileName out{std::string(raw), delegate ? "cycles" : "ticks"};
  if (raw.size() > 3 && raw.back() == ')') {
    if (const size_t open = raw.rfind(" ("); open != std::string_view::npos) {
      out.unit = std::string(raw.substr(open + 2, raw.size() - open - 3));
      raw = raw.substr(0, open);
    }
  }
  if (const size_t op_id = raw.rfind(":OpId_"); op_id != std::string_view::npos) {
    const std::string_view digits = raw.substr(op_id + 6);
    if (!digits.empty() &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      raw = raw.substr(0, op_id);
    }
  }
  out.op = std::string(raw);
  return out;
}

Result<int64_t> to_time(uint64_t ticks, const char* which) {
  if (ticks > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return corrupt_input(std::string(which) + " " + std::to_string(ticks) + " exceeds 2^63");
  }
  return static_cast<int64_t>(ticks);
}

class StoreFiller : public EtdumpVisitor {
 public:
  StoreFiller(const Inputs& in, const OpIndex& ops, StoreSink& sink, EtdumpImportSummary& summary)
      : in_(in), ops_(ops), sink_(sink), summary_(summary), audit_(in.encodings) {}

  void add_warnings(std::vector<std::string>& warnings) const { audit_.add_warnings(warnings); }

  Status on_run(uint32_t, const EtdumpRun& run) override {
    allocators_.assign(run.allocators.begin(), run.allocators.end());
    program_outputs_in_run_ = 0;
    ++summary_.runs;
    return sink_.begin_run(std::string(run.name));
  }
  Status on_run_end(uint32_t) override { return sink_.end_run(); }

  Status on_allocation_event(const EventPosition&, const EtdumpAllocationEvent& e) override {
    const bool named =
        e.allocator_id >= 0 && static_cast<size_t>(e.allocator_id) < allocators_.size();
    const std::string label = named ? std::string(allocators_[static_cast<size_t>(e.allocator_id)])
                                    : "allocator " + std::to_string(e.allocator_id);
    ++summary_.memory_checkpoints;
    return sink_.memory_checkpoint(label, e.allocation_size);
  }

  Status on_profile_event(const EventPosition&, const EtdumpProfileEvent& e) override {
    const bool delegate = e.delegate_debug_id_str.has_value() || e.delegate_debug_id_int != -1;
    const std::string_view raw =
        e.delegate_debug_id_str ? *e.delegate_debug_id_str : e.name.value_or(std::string_view());
    const ProfileName name = split_profile_name(raw, delegate);
    const std::vector<int64_t>* handles = nullptr;
    if (delegate) {
      handles = ops_.handles_of(name.op);
    } else if (in_.etrecord && e.instruction_id >= 0) {
      handles = in_.etrecord->instruction(e.instruction_id);
    }
    QD_ASSIGN_OR_RETURN(const int64_t start, to_time(e.start_time, "start_time"));
    QD_ASSIGN_OR_RETURN(const int64_t end, to_time(e.end_time, "end_time"));
    ++summary_.profile_events;
    static const std::vector<int64_t> kNone;
    return sink_.profile_event(name.op, handles != nullptr ? *handles : kNone, start, end,
                               name.unit, e.instruction_id);
  }

  Status on_debug_event(const EventPosition&, const EtdumpDebugEvent& e) override {
    if (!e.value) {
      ++summary_.skipped_values;
      return Status::ok();
    }
    const std::string name = tensor_name(e);
    if (const std::optional<ScalarTensor> scalar = scalar_of(*e.value)) {
      return capture_scalar(name, e, *scalar);
    }
    if (e.value->tensors.empty()) {
      ++summary_.skipped_values;  // Null, String, or an empty list: nothing to compare
      return Status::ok();
    }
    const bool list = e.value->type == EtdumpValueType::kTensorList;
    for (size_t k = 0; k < e.value->tensors.size(); ++k) {
      const int32_t output = list ? static_cast<int32_t>(k) : -1;
      const Status captured = capture_tensor(name, output, e, e.value->tensors[k]);
      if (!captured.is_ok()) {
        return error(captured.code(), (list ? "tensor_list[" + std::to_string(k) + "] " : "") +
                                          "tensor " + quote_name(name) + ": " + captured.message());
      }
    }
    return Status::ok();
  }

 private:
  Result<TensorRecord> record_of(const std::string& name, const EtdumpDebugEvent& e,
                                 const EtdumpTensor& t) const {
    TensorRecord record;
    record.name = name;
    QD_ASSIGN_OR_RETURN(record.dtype, dump_dtype(t.scalar_type, from_delegate(e)));
    QD_RETURN_IF_ERROR(element_count(t.sizes).status());  // negative or overflowing sizes
    QD_ASSIGN_OR_RETURN(StoredLayout layout, layout_from_strides(t.sizes, t.strides));
    record.dims = std::move(layout.dims);
    record.axis_order = std::move(layout.axis_order);
    if (const TensorEncoding* encoding = in_.encodings.find(name)) {
      QD_ASSIGN_OR_RETURN(record.dtype, reconcile_dtype(record.dtype, *encoding));
      QD_RETURN_IF_ERROR(apply_encoding(*encoding, record));
    }
    return record;
  }

  // The tensor's bytes, read from the debug buffer into a buffer reused across tensors.
  Result<std::span<const uint8_t>> data_of(const EtdumpTensor& t, uint64_t nbytes) {
    if (nbytes == 0) return std::span<const uint8_t>();
    if (t.offset < 0)
      return corrupt_input("no data (offset " + std::to_string(t.offset) + ") for " +
                           std::to_string(nbytes) + " bytes");
    if (!in_.debug_buffer)
      return corrupt_input("its data is in a debug buffer: pass --debug-buffer");
    const auto offset = static_cast<uint64_t>(t.offset);
    const uint64_t size = in_.debug_buffer->size();
    if (offset > size || nbytes > size - offset) {
      return corrupt_input("bytes " + std::to_string(offset) + " to " +
                           std::to_string(offset + nbytes) + " lie outside debug buffer " +
                           quote_name(in_.debug_buffer->path()) + " (" + std::to_string(size) +
                           " bytes)");
    }
    if (scratch_.size() < nbytes) scratch_.resize(nbytes);
    const std::span<uint8_t> out(scratch_.data(), nbytes);
    QD_RETURN_IF_ERROR(in_.debug_buffer->read_at(offset, out, "tensor data"));
    return std::span<const uint8_t>(out);
  }

  Status capture_tensor(const std::string& name, int32_t output, const EtdumpDebugEvent& e,
                        const EtdumpTensor& t) {
    QD_ASSIGN_OR_RETURN(TensorRecord record, record_of(name, e, t));
    const uint64_t nbytes = storage_bytes(record.dtype, record.element_count());
    QD_ASSIGN_OR_RETURN(const std::span<const uint8_t> data, data_of(t, nbytes));
    record.output_index = output;
    summary_.with_encoding += record.quant.is_quantized() ? 1 : 0;
    summary_.missing_encoding += info(record.dtype).fixed_point && !record.quant.is_quantized();
    summary_.tensor_bytes += nbytes;
    return capture(record, data, e);
  }

  Status capture_scalar(const std::string& name, const EtdumpDebugEvent& e,
                        const ScalarTensor& scalar) {
    TensorRecord record;
    record.name = name;
    record.dtype = scalar.dtype;
    return capture(record, scalar.bytes, e);
  }

  Status capture(TensorRecord& record, std::span<const uint8_t> data, const EtdumpDebugEvent& e) {
    const bool graph_output = program_output(e);
    if (graph_output) {  // one event per output: output k of the run is the k-th
      record.output_index = program_outputs_in_run_++;
      record.role = TensorRole::kGraphOutput;
    }
    const std::vector<int64_t>* handles = etrecord_handles(in_, e);
    if (handles != nullptr) {
      record.handles = *handles;
      ++summary_.handles_from_etrecord;
    }
    ++summary_.tensors;
    audit_.captured(record, in_.encodings.find(record.name));
    return sink_.capture(record, data, handles != nullptr, graph_output);
  }

  const Inputs& in_;
  const OpIndex& ops_;
  StoreSink& sink_;
  EtdumpImportSummary& summary_;
  EncodingAudit audit_;
  std::vector<std::string_view> allocators_;
  int32_t program_outputs_in_run_ = 0;
  std::vector<uint8_t> scratch_;
};

// ---- the whole import ------------------------------------------------------------------------

Status walk(const Inputs& in, const EtdumpImportOptions& o, EtdumpVisitor& visitor) {
  const Result<EtdumpHeader> header = read_etdump(in.etdump, visitor);
  if (header.is_ok()) return Status::ok();
  return error(header.status().code(),
               "etdump " + quote_name(o.etdump_path) + ": " + header.status().message());
}

}  // namespace

Result<EtdumpImportSummary> import_etdump(const EtdumpImportOptions& o) {
  QD_ASSIGN_OR_RETURN(const Inputs in, open_inputs(o));
  OpIndex ops(in);
  QD_RETURN_IF_ERROR(walk(in, o, ops));
  if (ops.needs_buffer() && !in.debug_buffer) {
    return error(ErrorCode::kInvalidArgument,
                 "etdump " + quote_name(o.etdump_path) +
                     ": its debug events hold tensor data, which lives in the debug buffer "
                     "written beside it (debug_output.bin): pass --debug-buffer");
  }
  QD_ASSIGN_OR_RETURN(StoreSink sink,
                      StoreSink::open(sink_options_of(
                          o, "etdump", ops.delegate_seen() ? "ExecuTorch delegate" : "ExecuTorch",
                          std::filesystem::path(o.etdump_path).filename().string())));
  EtdumpImportSummary summary;
  for (const GraphNode& node : in.encodings.graph) QD_RETURN_IF_ERROR(sink.graph_node(node));
  summary.graph_nodes = in.encodings.graph.size();
  StoreFiller filler(in, ops, sink, summary);
  QD_RETURN_IF_ERROR(walk(in, o, filler));
  filler.add_warnings(summary.warnings);
  QD_RETURN_IF_ERROR(sink.commit());
  return summary;
}

// ---- the etdump format (input_format.h) -----------------------------------------------------

const InputFormat& etdump_format();

namespace {

std::string said_of(const EtdumpImportSummary& s, const std::string& output) {
  std::string said = fmt::format(
      "wrote {}: {} runs, {} tensors ({} bytes), {} profile events, {} memory "
      "checkpoints",
      output, s.runs, s.tensors, s.tensor_bytes, s.profile_events, s.memory_checkpoints);
  if (s.graph_nodes > 0) said += fmt::format(", {} graph nodes", s.graph_nodes);
  said += "\n";
  if (s.tensors > 0) {
    said += fmt::format("  handles from the ETRecord: {} of {} tensors; encodings: {} tensors\n",
                        s.handles_from_etrecord, s.tensors, s.with_encoding);
  }
  if (s.missing_encoding > 0) {
    said += fmt::format(
        "  warning: {} fixed-point tensors have no encoding and were kept raw (the diff fails "
        "them): pass the model's encodings with --encodings\n",
        s.missing_encoding);
  }
  if (s.skipped_values > 0) {
    said += fmt::format("  {} debug events held no tensor or number and were skipped\n",
                        s.skipped_values);
  }
  return said;
}

// A program, a store or another dump given as an ETDump is named, with the command that reads it.
Result<ImportOutcome> import_etdump_format(const InputSpec& spec, const std::string& output) {
  QD_RETURN_IF_ERROR(refuse_other_format(etdump_format(), spec.path));
  EtdumpImportOptions o;
  o.etdump_path = spec.path;
  o.debug_buffer_path = spec.value("debug_buffer");
  o.etrecord_path = spec.value("etrecord");
  o.etrecord_method = spec.value("etrecord_method");
  read_shared_options(spec, output, o);
  QD_ASSIGN_OR_RETURN(EtdumpImportSummary s, import_etdump(o));
  return ImportOutcome{said_of(s, output), std::move(s.warnings), s.tensor_bytes};
}

}  // namespace

const InputFormat& etdump_format() {
  static const InputFormat kEtdump = [] {
    InputFormat f;
    f.name = "etdump";
    f.noun = "an ETDump";
    f.detected_as = "an ExecuTorch ETDump";
    // The flatbuffer identifier "ED00" at byte 4, or at 8 behind a size prefix.
    f.detect = [](const InputHead& head) {
      return head.bytes.size() >= 8 &&
             (head.bytes.compare(4, 4, "ED00") == 0 ||
              (head.bytes.size() >= 12 && head.bytes.compare(8, 4, "ED00") == 0));
    };
    f.capture_help =
        "An ExecuTorch ETDump (qnn_executor_runner --dump_intermediate_outputs, or "
        "any ExecuTorch runtime with an ETDumpGen): every run, tensor and profile "
        "event";
    f.input_name = "etdump";
    f.input_help = "The ETDump file (.etdp)";
    f.capture_example = " --debug-buffer debug_output.bin";
    f.options = with_naming_options(
        {{.key = "debug_buffer",
          .flag = "debug-buffer",
          .help = "The debug buffer written beside it (debug_output.bin); needed when the dump "
                  "holds tensors",
          .side_help = "ETDump: its debug buffer",
          .both_help = "",
          .many = false,
          .path = true,
          .default_value = ""},
         encodings_option("Scale and offset per tensor: the converter's *_net.json, "
                          "qnn-context-binary-utility JSON or a plain map (repeatable)"),
         {.key = "etrecord",
          .flag = "etrecord",
          .help = "The ETRecord (etrecord.bin): debug handles by exact tensor name",
          .side_help = "ETDump: the ETRecord",
          .both_help = "",
          .many = false,
          .path = true,
          .default_value = ""},
         {.key = "etrecord_method",
          .flag = "method",
          .help = "The ETRecord method (default: its only one)",
          .side_help = "ETDump: the ETRecord method (default: its only one)",
          .both_help = "",
          .many = false,
          .path = false,
          .default_value = ""}},
        EtdumpImportOptions{}.naming);
    f.import = import_etdump_format;
    return f;
  }();
  return kEtdump;
}

}  // namespace qd::importers
