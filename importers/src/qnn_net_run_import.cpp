#include "qnn_net_run_import.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "encoding_audit.h"
#include "import_steps.h"
#include "qnn_debug/base/input_file.h"
#include "qnn_debug/etdump/store.h"
#include "qnn_debug/importers/encodings.h"
#include "qnn_debug/importers/store_sink.h"
#include "qnn_debug/naming/naming.h"
#include "tensor_layout.h"

namespace qd::importers {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kNativeSuffix = "_native";
constexpr std::string_view kRawExtension = ".raw";

// ---- the folders ------------------------------------------------------------------------------

struct ResultFolder {
  std::string run_name;  // "Result_3", or "<graph>/Result_3"
  fs::path dir;
};

std::optional<uint64_t> result_index(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (!name.starts_with("Result_") || name.size() == 7) return std::nullopt;
  if (name[7] == '0' && name.size() > 8) return std::nullopt;  // qnn-net-run writes no "Result_01"
  uint64_t k = 0;
  const auto [end, failure] = std::from_chars(name.data() + 7, name.data() + name.size(), k);
  if (failure != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return k;
}

// A folder named almost as qnn-net-run names its results ("result_1", "Result_01", "RESULT_2"):
// whatever it holds would otherwise be left out without a word.
bool looks_like_result(const fs::path& dir) {
  std::string name = dir.filename().string();
  if (name.size() <= 7) return false;
  std::transform(name.begin(), name.begin() + 7, name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name.starts_with("result_") &&
         std::all_of(name.begin() + 7, name.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The Result_<k> folders directly in `dir`, by k. A look-alike beside them is refused: its
// tensors would silently be missing from the comparison.
Result<std::vector<std::pair<uint64_t, fs::path>>> results_in(const fs::path& dir) {
  std::vector<std::pair<uint64_t, fs::path>> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (const auto k = result_index(entry.path())) {
      found.emplace_back(*k, entry.path());
    } else if (looks_like_result(entry.path())) {
      return corrupt_input(
          quote_name(entry.path().string()) +
          ": not a folder name qnn-net-run writes (Result_<k>, k without leading zeros): "
          "rename it or move it out, or its tensors are not compared");
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Whether `dir` holds Result_<k> folders (a graph folder of a multi-graph context).
Result<bool> holds_results(const fs::path& dir) {
  QD_ASSIGN_OR_RETURN(const auto found, results_in(dir));
  return !found.empty();
}

// Result_<k> of the output folder, or of each graph folder in it (a context with several graphs),
// graphs in name order. Both at once is refused: one of the two would be left out.
Result<std::vector<ResultFolder>> find_results(const std::string& output_dir, uint32_t& graphs) {
  std::error_code ec;
  if (!fs::is_directory(output_dir, ec)) {
    return error(fs::exists(output_dir, ec) ? ErrorCode::kInvalidArgument : ErrorCode::kNotFound,
                 quote_name(output_dir) + ": not a qnn-net-run output folder");
  }
  std::vector<ResultFolder> folders;
  QD_ASSIGN_OR_RETURN(const auto top, results_in(output_dir));
  for (const auto& [k, dir] : top) folders.push_back({dir.filename().string(), dir});
  std::vector<fs::path> graph_dirs;
  for (const fs::directory_entry& entry : fs::directory_iterator(output_dir, ec)) {
    if (!entry.is_directory(ec) || result_index(entry.path())) continue;
    QD_ASSIGN_OR_RETURN(const bool graph, holds_results(entry.path()));
    if (graph) graph_dirs.push_back(entry);
  }
  std::sort(graph_dirs.begin(), graph_dirs.end());
  if (!folders.empty() && !graph_dirs.empty()) {
    return corrupt_input(
        quote_name(graph_dirs.front().string()) +
        ": a graph folder of Result_<k> folders beside the Result_<k> folders of " +
        quote_name(output_dir) +
        ": an output folder holds one graph's results or one folder per graph, not both");
  }
  graphs = folders.empty() ? 0 : 1;
  if (!folders.empty()) return folders;
  for (const fs::path& graph : graph_dirs) {
    QD_ASSIGN_OR_RETURN(const auto results, results_in(graph));
    for (const auto& [k, dir] : results) {
      folders.push_back({graph.filename().string() + "/" + dir.filename().string(), dir});
    }
  }
  graphs = static_cast<uint32_t>(graph_dirs.size());
  if (folders.empty()) {
    return corrupt_input(
        quote_name(output_dir) +
        ": no Result_<k> folder in it or in a graph folder below it (qnn-net-run writes "
        "one per input line)");
  }
  return folders;
}

// ---- the files of one result -------------------------------------------------------------------

// One tensor's files in a result folder, by the tensor's path-like stem: "conv/Relu" for
// conv/Relu.raw and conv/Relu_native.raw (a '/' in a tensor name becomes a sub-folder).
struct TensorFiles {
  fs::path float_file;
  fs::path native_file;
};

std::map<std::string, TensorFiles> list_tensor_files(const fs::path& result) {
  std::map<std::string, TensorFiles> files;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(result, ec)) {
    if (!entry.is_regular_file(ec) || entry.path().extension() != kRawExtension) continue;
    std::string stem = entry.path().lexically_relative(result).replace_extension().generic_string();
    if (stem.ends_with(kNativeSuffix)) {
      stem.resize(stem.size() - kNativeSuffix.size());
      files[stem].native_file = entry.path();
    } else {
      files[stem].float_file = entry.path();
    }
  }
  return files;
}

// ---- what the files hold -----------------------------------------------------------------------

struct TensorShape {
  std::vector<uint64_t> dims;
  DType dtype = DType::kFloat32;
};

// "NAME=D0,D1,...[:DTYPE]".
Result<std::pair<std::string, TensorShape>> parse_shape(const std::string& text) {
  const auto fail = [&](const std::string& why) {
    return error(ErrorCode::kInvalidArgument, "--shape " + quote_name(text) + ": " + why);
  };
  const size_t equals = text.rfind('=');
  if (equals == std::string::npos || equals == 0) return fail("expected NAME=D0,D1,...[:DTYPE]");
  std::string_view spec = std::string_view(text).substr(equals + 1);
  TensorShape shape;
  if (const size_t colon = spec.find(':'); colon != std::string_view::npos) {
    auto dtype = dtype_from_qnn_name(spec.substr(colon + 1));
    if (!dtype.is_ok()) return fail(dtype.status().message());
    shape.dtype = *dtype;
    spec = spec.substr(0, colon);
  }
  while (!spec.empty()) {
    const size_t comma = std::min(spec.find(','), spec.size());
    uint64_t dim = 0;
    const auto [end, failure] = std::from_chars(spec.data(), spec.data() + comma, dim);
    if (failure != std::errc() || end != spec.data() + comma) return fail("bad dimension");
    shape.dims.push_back(dim);
    spec.remove_prefix(std::min(comma + 1, spec.size()));
  }
  return std::make_pair(text.substr(0, equals), shape);
}

// What the net JSON and the encodings files know, found by a file's stem: the tensor's name, or
// the name as qnn-net-run sanitized it ('/' and ':' become '_').
class TensorIndex {
 public:
  explicit TensorIndex(const EncodingTable& table) : table_(table) {
    for (const auto& [name, encoding] : table.tensors) {
      std::string sanitized = name;
      std::replace(sanitized.begin(), sanitized.end(), ':', '_');
      by_stem_.try_emplace(sanitized, &encoding);
      std::replace(sanitized.begin(), sanitized.end(), '/', '_');
      by_stem_.try_emplace(sanitized, &encoding);
    }
  }
  const TensorEncoding* find(const std::string& stem) const {
    if (const TensorEncoding* exact = table_.find(stem)) return exact;
    const auto it = by_stem_.find(stem);
    return it == by_stem_.end() ? nullptr : it->second;
  }

 private:
  const EncodingTable& table_;
  std::unordered_map<std::string, const TensorEncoding*> by_stem_;
};

// ---- one tensor -----------------------------------------------------------------------------

struct PlannedTensor {
  TensorRecord record;
  fs::path file;
  bool native = false;
  bool float_only = false;
  bool undescribed = false;
  const TensorEncoding* encoding = nullptr;  // what described it, if anything
};

std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "," : "") + std::to_string(dims[i]);
  return text + "]";
}

// The net JSON's (or encodings') view: native container bytes when the tensor is not float32
// and they were written, else the float32 file (dequantized by qnn-net-run when quantized).
Result<PlannedTensor> plan_described(const TensorEncoding& encoding, const TensorFiles& files) {
  PlannedTensor p;
  p.record.name = encoding.name;
  p.record.dims = encoding.dims;
  const DType dtype = encoding.dtype.value_or(DType::kFloat32);
  p.native = dtype != DType::kFloat32 && !files.native_file.empty();
  if (!p.native && files.float_file.empty()) {
    return corrupt_input(quote_name(files.native_file.string()) + ": tensor " +
                         quote_name(encoding.name) + " is " + std::string(info(dtype).name) +
                         " in " + encoding.source +
                         ", but this file holds native bytes of a float32 tensor");
  }
  p.file = p.native ? files.native_file : files.float_file;
  p.record.dtype = p.native ? dtype : DType::kFloat32;
  if (p.native) {
    QD_RETURN_IF_ERROR(apply_encoding(encoding, p.record));
  } else {
    p.record.axis_order = encoding.axis_order.size() == p.record.dims.size()
                              ? encoding.axis_order
                              : std::vector<uint8_t>{};
    p.float_only = encoding.quant.is_quantized();
  }
  return p;
}

// What --shape says, or the only reading of a float32 file: one dimension.
Result<PlannedTensor> plan_undescribed(const std::string& stem, const TensorFiles& files,
                                       const TensorShape* shape) {
  PlannedTensor p;
  p.record.name = stem;
  if (shape != nullptr) {
    p.native = shape->dtype != DType::kFloat32 && !files.native_file.empty();
    p.file = p.native ? files.native_file : files.float_file;
    p.record.dims = shape->dims;
    p.record.dtype = p.native ? shape->dtype : DType::kFloat32;
    if (!p.file.empty()) return p;
  }
  if (files.float_file.empty()) {
    return corrupt_input(quote_name(files.native_file.string()) +
                         ": nothing states its dtype and dims: give --net-json, or --shape " +
                         stem + "=D0,D1,...:DTYPE");
  }
  std::error_code ec;
  const uint64_t size = fs::file_size(files.float_file, ec);
  if (ec || size % 4 != 0) {
    return corrupt_input(
        quote_name(files.float_file.string()) + ": " + std::to_string(size) +
        " bytes are not float32 values, and nothing states its dtype and dims: give "
        "--net-json, or --shape " +
        stem + "=D0,D1,...[:DTYPE]");
  }
  p.file = files.float_file;
  p.record.dims = {size / 4};
  p.undescribed = true;
  return p;
}

class RunReader {
 public:
  RunReader(const EncodingTable& table, std::map<std::string, TensorShape> shapes,
            naming::NameParser parser, StoreSink& sink, QnnNetRunImportSummary& summary)
      : index_(table),
        audit_(table),
        shapes_(std::move(shapes)),
        parser_(std::move(parser)),
        sink_(sink),
        summary_(summary) {
    for (const GraphNode& node : table.graph) {
      for (const std::string& output : node.outputs) order_.try_emplace(output, order_.size());
    }
  }

  Status read(const ResultFolder& folder, const std::string& run_name) {
    std::vector<PlannedTensor> tensors;
    for (const auto& [stem, files] : list_tensor_files(folder.dir)) {
      const TensorEncoding* encoding = index_.find(stem);
      const auto shape = shapes_.find(encoding != nullptr ? encoding->name : stem);
      QD_ASSIGN_OR_RETURN(
          PlannedTensor p,
          encoding != nullptr
              ? plan_described(*encoding, files)
              : plan_undescribed(stem, files, shape == shapes_.end() ? nullptr : &shape->second));
      p.encoding = encoding;
      tensors.push_back(std::move(p));
    }
    // The graph's order (a node's outputs where it stands), then the others by name.
    std::stable_sort(tensors.begin(), tensors.end(), [&](const auto& a, const auto& b) {
      return position(a.record.name) < position(b.record.name);
    });
    QD_RETURN_IF_ERROR(sink_.begin_run(run_name));
    for (PlannedTensor& p : tensors) QD_RETURN_IF_ERROR(capture(p));
    ++summary_.runs;
    return sink_.end_run();
  }

  void add_warnings(std::vector<std::string>& warnings) const { audit_.add_warnings(warnings); }

 private:
  size_t position(const std::string& name) const {
    const auto it = order_.find(name);
    return it == order_.end() ? order_.size() : it->second;
  }

  Status capture(PlannedTensor& p) {
    QD_ASSIGN_OR_RETURN(auto file, InputFile::open(p.file.string(), "a qnn-net-run output file"));
    const uint64_t expected = storage_bytes(p.record.dtype, p.record.element_count());
    if (file->size() != expected) {
      return corrupt_input(quote_name(p.file.string()) + ": " + std::to_string(file->size()) +
                           " bytes, but tensor " + quote_name(p.record.name) + " is " +
                           std::string(info(p.record.dtype).name) + " " + dims_text(p.record.dims) +
                           ": " + std::to_string(expected) + " bytes");
    }
    if (scratch_.size() < expected) scratch_.resize(expected);
    const std::span<uint8_t> data(scratch_.data(), expected);
    QD_RETURN_IF_ERROR(file->read_at(0, data, "tensor data"));
    summary_.tensors += 1;
    summary_.tensor_bytes += expected;
    summary_.native += p.native ? 1 : 0;
    summary_.float_only += p.float_only ? 1 : 0;
    summary_.undescribed += p.undescribed ? 1 : 0;
    // qnn-net-run's names carry handles only when the model's did: whatever the preset finds
    // (often none) is what is known, so no name is flagged for lacking them.
    p.record.handles = parser_.parse(p.record.name).handles;
    audit_.captured(p.record, p.encoding);
    // Kept in the store, so a later `diff` of it gives no figure that rests on the guess.
    if (p.undescribed && guessed_.insert(p.record.name).second) {
      QD_RETURN_IF_ERROR(sink_.shape_guess(p.record.name));
    }
    return sink_.capture(p.record, data, /*handles_given=*/true);
  }

  TensorIndex index_;
  EncodingAudit audit_;
  std::map<std::string, TensorShape> shapes_;
  naming::NameParser parser_;
  StoreSink& sink_;
  QnnNetRunImportSummary& summary_;
  std::unordered_map<std::string, size_t> order_;
  std::set<std::string> guessed_;  // names whose guessed shape is recorded
  std::vector<uint8_t> scratch_;
};

// qnn-net-run's input list: one line of input files per inference ('#' lines name outputs).
Result<std::vector<std::string>> read_input_list(const std::string& path) {
  std::vector<std::string> lines;
  if (path.empty()) return lines;
  std::ifstream in(path);
  if (!in) return error(ErrorCode::kNotFound, quote_name(path) + ": cannot open the input list");
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty() && line.front() != '#') lines.push_back(line);
  }
  return lines;
}

// The net JSON first: later encodings files add to it.
Result<EncodingTable> load_tables(const QnnNetRunImportOptions& o) {
  std::vector<std::string> paths = o.encodings_paths;
  if (!o.net_json.empty()) paths.insert(paths.begin(), o.net_json);
  return load_encodings_files(paths);
}

}  // namespace

Result<QnnNetRunImportSummary> import_qnn_net_run(const QnnNetRunImportOptions& o) {
  QD_ASSIGN_OR_RETURN(const EncodingTable table, load_tables(o));
  std::map<std::string, TensorShape> shapes;
  for (const std::string& text : o.shapes) {
    QD_ASSIGN_OR_RETURN(auto shape, parse_shape(text));
    shapes.insert_or_assign(shape.first, shape.second);
  }
  QnnNetRunImportSummary summary;
  QD_ASSIGN_OR_RETURN(const std::vector<ResultFolder> folders,
                      find_results(o.output_dir, summary.graphs));
  QD_ASSIGN_OR_RETURN(const std::vector<std::string> inputs, read_input_list(o.input_list));
  QD_ASSIGN_OR_RETURN(naming::NameParser parser,
                      naming::NameParser::create(o.naming, "", o.handle_map_path));
  QD_ASSIGN_OR_RETURN(
      StoreSink sink,
      StoreSink::open(sink_options_of(
          o, "qnn-net-run", "qnn-net-run",
          fs::path(o.net_json.empty() ? o.output_dir : o.net_json).filename().string())));
  for (const GraphNode& node : table.graph) QD_RETURN_IF_ERROR(sink.graph_node(node));
  summary.graph_nodes = table.graph.size();
  RunReader reader(table, std::move(shapes), std::move(parser), sink, summary);
  for (size_t r = 0; r < folders.size(); ++r) {
    const std::optional<uint64_t> k = result_index(folders[r].dir);
    std::string name = folders[r].run_name;
    if (k && *k < inputs.size()) name += " " + inputs[*k];
    QD_RETURN_IF_ERROR(reader.read(folders[r], name));
  }
  reader.add_warnings(summary.warnings);
  QD_RETURN_IF_ERROR(sink.commit());
  return summary;
}

// ---- the qnn-net-run format (input_format.h) ------------------------------------------------

namespace {

std::string said_of(const QnnNetRunImportSummary& s, const std::string& output) {
  std::string said =
      fmt::format("wrote {}: {} runs{}, {} tensors ({} bytes; {} from native bytes)", output,
                  s.runs, s.graphs > 1 ? fmt::format(" of {} graphs", s.graphs) : "", s.tensors,
                  s.tensor_bytes, s.native);
  if (s.graph_nodes > 0) said += fmt::format(", {} graph nodes", s.graph_nodes);
  said += "\n";
  if (s.float_only > 0) {
    said += fmt::format(
        "  note: {} quantized tensors were written as dequantized float32 only "
        "(--output_data_type float_only): their raw values and saturation are not known\n",
        s.float_only);
  }
  if (s.undescribed > 0) {
    said += fmt::format(
        "  note: {} files were read as 1-D float32: pass --net-json for their "
        "shapes\n",
        s.undescribed);
  }
  return said;
}

Result<ImportOutcome> import_qnn_net_run_format(const InputSpec& spec, const std::string& output) {
  QnnNetRunImportOptions o;
  o.output_dir = spec.path;
  o.net_json = spec.value("net_json");
  o.input_list = spec.value("input_list");
  o.shapes = spec.values("shapes");
  read_shared_options(spec, output, o);
  QD_ASSIGN_OR_RETURN(QnnNetRunImportSummary s, import_qnn_net_run(o));
  return ImportOutcome{said_of(s, output), std::move(s.warnings), s.tensor_bytes};
}

}  // namespace

const InputFormat& qnn_net_run_format() {
  static const InputFormat kQnnNetRun = [] {
    InputFormat f;
    f.name = "qnn-net-run";
    f.noun = "a qnn-net-run output folder";
    f.detected_as = "a folder (read as a qnn-net-run output)";
    f.detect = [](const InputHead& head) { return head.folder; };
    f.capture_help =
        "The output folder of the QNN SDK's qnn-net-run (--debug for every "
        "intermediate): one run per Result_<k>, one tensor per .raw file";
    f.input_name = "output_dir";
    f.input_help = "qnn-net-run's --output_dir";
    f.capture_example = " --net-json model_net.json";
    f.options = with_naming_options(
        {{.key = "net_json",
          .flag = "net-json",
          .help = "The converter's <model>_net.json: dims, dtypes, layouts, encodings, graph",
          .side_help = "qnn-net-run: the net JSON",
          .both_help = "qnn-net-run: the net JSON of both folders",
          .many = false,
          .path = true,
          .default_value = ""},
         {.key = "input_list",
          .flag = "input-list",
          .help = "qnn-net-run's input list: names the runs",
          .side_help = "qnn-net-run: this side's input list",
          .both_help = "qnn-net-run: the input list",
          .many = false,
          .path = true,
          .default_value = ""},
         encodings_option("More encodings files (repeatable)"),
         {.key = "shapes",
          .flag = "shape",
          .help = "NAME=D0,D1,...[:DTYPE] for a file the net JSON does not describe "
                  "(repeatable)",
          .side_help = "qnn-net-run: NAME=D0,D1,...[:DTYPE] for this side (repeatable)",
          .both_help = "qnn-net-run: NAME=D0,D1,...[:DTYPE] (repeatable)",
          .many = true,
          .path = false,
          .default_value = ""}},
        QnnNetRunImportOptions{}.naming);
    f.import = import_qnn_net_run_format;
    return f;
  }();
  return kQnnNetRun;
}

}  // namespace qd::importers
