#include "npz_import.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "encoding_audit.h"
#include "import_steps.h"
#include "qnn_debug/importers/encodings.h"
#include "qnn_debug/importers/npy.h"
#include "qnn_debug/importers/store_sink.h"
#include "qnn_debug/naming/naming.h"
#include "tensor_layout.h"

namespace qd::importers {
namespace {

namespace fs = std::filesystem;

// ---- which arrays make which run --------------------------------------------------------------

// One array to capture: where it is and the tensor name it gets.
struct ArrayRef {
  size_t index = 0;  // into NpzReader::arrays(); unused for an .npy file
  std::string name;
};

struct PlannedRun {
  std::string name;
  std::vector<ArrayRef> arrays;
};

// "run<k>/<name>" -> {k, name}.
std::optional<std::pair<uint64_t, std::string_view>> split_run_key(std::string_view key) {
  if (!key.starts_with("run")) return std::nullopt;
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos || slash == 3 || slash + 1 == key.size()) return std::nullopt;
  uint64_t k = 0;
  const auto [end, failure] = std::from_chars(key.data() + 3, key.data() + slash, k);
  if (failure != std::errc() || end != key.data() + slash) return std::nullopt;
  return std::make_pair(k, key.substr(slash + 1));
}

// The runs of one npz: one per "run<k>/" prefix when every key has one, else the whole file.
Result<std::vector<PlannedRun>> plan_runs(const NpzReader& npz, const std::string& file_run) {
  const std::vector<NpzArray>& arrays = npz.arrays();
  std::map<uint64_t, std::vector<ArrayRef>> by_run;
  std::optional<std::string_view> plain;  // the first key without a run prefix
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (const auto split = split_run_key(arrays[i].key)) {
      by_run[split->first].push_back({i, std::string(split->second)});
    } else if (!plain) {
      plain = arrays[i].key;
    }
  }
  if (by_run.empty()) {
    PlannedRun run{file_run, {}};
    for (size_t i = 0; i < arrays.size(); ++i) run.arrays.push_back({i, arrays[i].key});
    return std::vector<PlannedRun>{std::move(run)};
  }
  if (plain) {
    return error(ErrorCode::kCorrupt,
                 quote_name(npz.path()) + ": array " + quote_name(*plain) +
                     " has no 'run<k>/' prefix but others have: either every key names its run "
                     "or none does");
  }
  std::vector<PlannedRun> runs;
  for (auto& [k, refs] : by_run) {
    runs.push_back({file_run + "/run" + std::to_string(k), std::move(refs)});
  }
  return runs;
}

bool is_npy_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[6] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == 6 && std::string_view(magic, 6) == "\x93NUMPY";
}

// ---- one array -------------------------------------------------------------------------------

class ArrayCapturer {
 public:
  ArrayCapturer(const EncodingTable& encodings, naming::NameParser parser, StoreSink& sink,
                NpzImportSummary& summary)
      : encodings_(encodings),
        audit_(encodings),
        parser_(std::move(parser)),
        sink_(sink),
        summary_(summary) {}

  void add_warnings(std::vector<std::string>& warnings) const { audit_.add_warnings(warnings); }

  Status capture(const std::string& name, NpyArrayReader& reader, const std::string& where) {
    const NpyHeader& header = reader.header();
    TensorRecord record;
    record.name = name;
    record.dtype = header.dtype;
    record.dims = header.shape;
    if (const TensorEncoding* encoding = encodings_.find(name)) {
      const Status applied = apply(*encoding, record);
      if (!applied.is_ok()) return error(applied.code(), where + ": " + applied.message());
    }
    if (header.fortran_order && record.dims.size() > 1) {
      store_column_major(record);
      summary_.fortran_order += 1;
    }
    QD_ASSIGN_OR_RETURN(const std::span<const uint8_t> data, read_all(reader, where));
    // Keys carry handles only when the framework put them there: whatever the preset finds is
    // what is known, so no key is flagged for lacking them.
    const naming::ParsedName parsed = parser_.parse(record.name);
    record.handles = parsed.handles;
    record.output_index = parsed.output_index;
    summary_.tensors += 1;
    summary_.tensor_bytes += data.size();
    audit_.captured(record, encodings_.find(name));
    const Status captured = sink_.capture(record, data, /*handles_given=*/true);
    if (!captured.is_ok()) return error(captured.code(), where + ": " + captured.message());
    return Status::ok();
  }

 private:
  // An integer array takes the encoding's dtype and quantization; a float or bool one only its
  // layout (its dims must still agree).
  Status apply(const TensorEncoding& encoding, TensorRecord& record) {
    const DTypeKind kind = info(record.dtype).kind;
    if (kind == DTypeKind::kFloat || kind == DTypeKind::kBool) {
      if (!encoding.dims.empty() && encoding.dims != record.dims) {
        return apply_encoding(encoding, record);  // refused: it names both dims
      }
      if (encoding.axis_order.size() == record.dims.size()) {
        record.axis_order = encoding.axis_order;
      }
      return Status::ok();
    }
    QD_ASSIGN_OR_RETURN(record.dtype, reconcile_dtype(record.dtype, encoding));
    QD_RETURN_IF_ERROR(apply_encoding(encoding, record));
    summary_.with_encoding += record.quant.is_quantized() ? 1 : 0;
    return Status::ok();
  }

  // A Fortran-ordered array's memory is the C-order array of the reversed dims: store it as it
  // is, with the axis order that reads it back. Reference axis i is axis order[i] of the array
  // as numpy shows it, which is axis rank - 1 - order[i] of the memory.
  static void store_column_major(TensorRecord& record) {
    const size_t rank = record.dims.size();
    std::vector<uint8_t> order = record.axis_order;
    if (order.empty()) {
      for (size_t i = 0; i < rank; ++i) order.push_back(static_cast<uint8_t>(i));
    }
    for (uint8_t& axis : order) axis = static_cast<uint8_t>(rank - 1 - axis);
    record.axis_order = std::move(order);
    std::reverse(record.dims.begin(), record.dims.end());
  }

  Result<std::span<const uint8_t>> read_all(NpyArrayReader& reader, const std::string& where) {
    const uint64_t bytes = reader.header().data_bytes;
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    const std::span<uint8_t> data(scratch_.data(), bytes);
    size_t filled = 0;
    while (filled < data.size()) {
      QD_ASSIGN_OR_RETURN(const size_t got, reader.read(data.subspan(filled)));
      if (got == 0) break;
      filled += got;
    }
    if (filled != data.size()) {
      return error(ErrorCode::kCorrupt, where + ": the data ends after " + std::to_string(filled) +
                                            " of " + std::to_string(data.size()) + " bytes");
    }
    return std::span<const uint8_t>(data);
  }

  const EncodingTable& encodings_;
  EncodingAudit audit_;
  naming::NameParser parser_;
  StoreSink& sink_;
  NpzImportSummary& summary_;
  std::vector<uint8_t> scratch_;
};

std::string member_context(const std::string& path, const std::string& key) {
  return quote_name(path) + ": array " + quote_name(key);
}

Status import_file(const std::string& path, std::string run_name, ArrayCapturer& capturer,
                   StoreSink& sink, NpzImportSummary& summary) {
  if (is_npy_file(path)) {
    QD_ASSIGN_OR_RETURN(NpyArrayReader reader, NpyArrayReader::open_file(path));
    const std::string name = fs::path(path).stem().string();
    QD_RETURN_IF_ERROR(sink.begin_run(run_name));
    QD_RETURN_IF_ERROR(capturer.capture(name, reader, member_context(path, name)));
    summary.runs += 1;
    return sink.end_run();
  }
  QD_ASSIGN_OR_RETURN(const NpzReader npz, NpzReader::open(path));
  QD_ASSIGN_OR_RETURN(const std::vector<PlannedRun> runs, plan_runs(npz, run_name));
  for (const PlannedRun& run : runs) {
    QD_RETURN_IF_ERROR(sink.begin_run(run.name));
    for (const ArrayRef& ref : run.arrays) {
      QD_ASSIGN_OR_RETURN(NpyArrayReader reader, npz.open_array(ref.index));
      const std::string& key = npz.arrays()[ref.index].key;
      QD_RETURN_IF_ERROR(capturer.capture(ref.name, reader, member_context(path, key)));
    }
    summary.runs += 1;
    QD_RETURN_IF_ERROR(sink.end_run());
  }
  return Status::ok();
}

}  // namespace

Result<NpzImportSummary> import_npz(const NpzImportOptions& o) {
  if (o.paths.empty()) return error(ErrorCode::kInvalidArgument, "no .npz or .npy file given");
  QD_ASSIGN_OR_RETURN(const EncodingTable table, load_encodings_files(o.encodings_paths));
  QD_ASSIGN_OR_RETURN(naming::NameParser parser,
                      naming::NameParser::create(o.naming, "", o.handle_map_path));
  QD_ASSIGN_OR_RETURN(StoreSink sink,
                      StoreSink::open(sink_options_of(
                          o, "npz", "npz", fs::path(o.paths.front()).filename().string())));
  for (const GraphNode& node : table.graph) QD_RETURN_IF_ERROR(sink.graph_node(node));
  NpzImportSummary summary;
  ArrayCapturer capturer(table, std::move(parser), sink, summary);
  for (const std::string& path : o.paths) {
    QD_RETURN_IF_ERROR(
        import_file(path, fs::path(path).filename().string(), capturer, sink, summary));
  }
  capturer.add_warnings(summary.warnings);
  QD_RETURN_IF_ERROR(sink.commit());
  return summary;
}

// ---- the npz format (input_format.h) ------------------------------------------------------

namespace {

Result<ImportOutcome> import_npz_format(const InputSpec& spec, const std::string& output) {
  NpzImportOptions o;
  o.paths = {spec.path};
  o.paths.insert(o.paths.end(), spec.more_paths.begin(), spec.more_paths.end());
  read_shared_options(spec, output, o);
  QD_ASSIGN_OR_RETURN(NpzImportSummary s, import_npz(o));
  std::string said = fmt::format("wrote {}: {} runs, {} tensors ({} bytes)", output, s.runs,
                                 s.tensors, s.tensor_bytes);
  if (s.with_encoding > 0) said += fmt::format(", {} quantized by the encodings", s.with_encoding);
  if (s.fortran_order > 0) said += fmt::format(", {} Fortran-ordered", s.fortran_order);
  return ImportOutcome{said + "\n", std::move(s.warnings), s.tensor_bytes};
}

}  // namespace

const InputFormat& npz_format() {
  static const InputFormat kNpz = [] {
    InputFormat f;
    f.name = "npz";
    f.noun = "an npz or npy file";
    f.detected_as = "an npz/npy file";
    f.detect = [](const InputHead& head) {
      return head.starts_with("PK\x03\x04") || head.starts_with("PK\x05\x06") ||
             head.starts_with("\x93NUMPY");
    };
    f.capture_help =
        "Arrays saved with numpy by any framework (np.savez, np.savez_compressed, "
        "np.save): each file a run, or one run per 'run<k>/' key prefix";
    f.input_name = "file";
    f.input_help = "The .npz or .npy file";
    f.more_inputs_help = "More files, each a run (or several)";
    f.options = with_naming_options(
        {encodings_option("Quantization and layout for arrays named in it: an integer array "
                          "becomes the fixed-point tensor it describes (repeatable)")},
        NpzImportOptions{}.naming);
    f.import = import_npz_format;
    return f;
  }();
  return kNpz;
}

}  // namespace qd::importers
