// qnn_debug._native: the C++ libraries as the Python package sees them. Thin on purpose: every
// rule (dtype decoding, layouts, the writer, the diff pipeline, the report) stays in C++ and is
// reached through the same calls the CLI makes. Errors come out as qnn_debug.QnnDebugError with
// the C++ message and a `code`; no C++ exception escapes into the interpreter.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "native_error.h"
#include "qnn_debug/base/output_file.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/importers/input_format.h"
#include "qnn_debug/importers/npy.h"
#include "qnn_debug/importers/store_sink.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/pipeline/memory_reserve.h"
#include "qnn_debug/pipeline/request.h"
#include "qnn_debug/pipeline/tensor_values.h"
#include "qnn_debug/report/inspect.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/views.h"

#ifndef QD_VERSION
#define QD_VERSION "unknown"
#endif

namespace py = pybind11;

namespace qd::python {
namespace {

// Runs `work`; running out of memory (an input too big for this process) becomes a
// QnnDebugError with code no_memory naming what was being done to which file, instead of the
// translator's bare "out of memory".
template <typename Work>
auto within_memory(const std::string& doing, Work&& work) {
  const pipeline::MemoryReserve reserve;  // lets the unwinding of a std::bad_alloc finish
  try {
    return work();
  } catch (const std::bad_alloc&) {
    throw NativeError{ErrorCode::kNoMemory, "out of memory while " + doing};
  }
}

// numpy's dtype for the values of `dtype` (after pipeline::numpy_dtype): the npz writer's.
std::string numpy_name(DType dtype) { return take(importers::npy_descr(dtype)); }

// A new numpy array of `dtype` and `dims` holding `bytes` (little-endian, as numpy on the hosts
// qnn-debug supports).
py::array to_array(const std::vector<uint8_t>& bytes, const std::string& dtype,
                   const std::vector<uint64_t>& dims) {
  std::vector<py::ssize_t> shape(dims.begin(), dims.end());
  py::array array(py::dtype(dtype), shape);
  if (static_cast<size_t>(array.nbytes()) != bytes.size()) {
    throw NativeError{ErrorCode::kInternal, "array size does not match its bytes"};
  }
  std::memcpy(array.mutable_data(), bytes.data(), bytes.size());
  return array;
}

// ---- reading -----------------------------------------------------------------------------------

class Store {
 public:
  explicit Store(const std::string& path)
      : reader_(within_memory("reading " + path, [&] { return take(StoreReader::open(path)); })) {}

  std::string inspect_json() const {
    return within_memory("reading " + reader_->path(),
                         [&] { return take(report::inspect_json(*reader_, {})); });
  }
  const std::string& path() const { return reader_->path(); }

  // Stored values in numpy's dtype for them, stored dims and layout.
  py::array values(uint64_t seq) const {
    const TensorEntry t = tensor(seq);
    std::vector<uint8_t> bytes;
    {
      py::gil_scoped_release unlocked;
      bytes = within_memory(describe(t),
                            [&] { return take(pipeline::read_stored_values(*reader_, t)); });
    }
    return to_array(bytes, numpy_name(pipeline::numpy_dtype(t.dtype)), t.dims);
  }

  // Real values as float32, in the reference layout or the stored one.
  py::array real_values(uint64_t seq, bool reference_layout) const {
    const TensorEntry t = tensor(seq);
    std::vector<float> values;
    {
      py::gil_scoped_release unlocked;
      values = within_memory(describe(t), [&] {
        return take(pipeline::read_real_values(*reader_, t, reference_layout));
      });
    }
    const auto* raw = reinterpret_cast<const uint8_t*>(values.data());
    return to_array(std::vector<uint8_t>(raw, raw + values.size() * sizeof(float)), "float32",
                    reference_layout ? pipeline::reference_dims(t) : t.dims);
  }

  std::string describe(const TensorEntry& t) const {
    return "reading tensor " + quote_name(t.name) + " of " + reader_->path();
  }

  TensorEntry tensor(uint64_t seq) const {
    return within_memory("reading " + reader_->path(),
                         [&] { return take(reader_->tensor_at(seq)); });
  }

  const StoreReader& reader() const { return *reader_; }

 private:
  std::shared_ptr<StoreReader> reader_;
};

// Streams one tensor's stored values in pieces of whole elements, CRC checked at the end.
class Chunks {
 public:
  Chunks(std::shared_ptr<Store> store, uint64_t seq, uint64_t piece_bytes)
      : store_(std::move(store)), tensor_(store_->tensor(seq)), bytes_(store_->reader(), tensor_) {
    if (pipeline::numpy_dtype(tensor_.dtype) != tensor_.dtype) {
      throw NativeError{ErrorCode::kInvalidArgument,
                        pipeline::tensor_context(store_->reader(), tensor_) + ": " +
                            std::string(info(tensor_.dtype).name) +
                            " has no numpy dtype: read it whole (values are widened)"};
    }
    const uint64_t item = storage_bytes(tensor_.dtype, 1);
    piece_ = std::max<uint64_t>(item, piece_bytes / item * item);
    dtype_ = numpy_name(tensor_.dtype);
  }

  py::array next() {
    if (bytes_.remaining() == 0) throw py::stop_iteration();
    std::vector<uint8_t> piece(static_cast<size_t>(std::min(piece_, bytes_.remaining())));
    {
      py::gil_scoped_release unlocked;
      check(bytes_.read(piece).status());
    }
    const uint64_t item = storage_bytes(tensor_.dtype, 1);
    return to_array(piece, dtype_, {piece.size() / item});
  }

 private:
  std::shared_ptr<Store> store_;
  const TensorEntry tensor_;
  pipeline::StoredBytes bytes_;
  uint64_t piece_ = 0;
  std::string dtype_;
};

// ---- writing -----------------------------------------------------------------------------------

// A Python int as T, refused with the tensor's and the field's name when it does not fit: a
// static_cast would wrap it, and pybind11's own conversion gives a TypeError about the signature.
// The ABI's narrower ranges are checked after this, by importers::check_capture_abi
// (importers/src/capture_abi.h).
template <typename T>
T checked_int(const py::handle& value, const std::string& tensor, std::string_view field) {
  const auto refuse = [&](const std::string& why) {
    return NativeError{ErrorCode::kInvalidArgument,
                       "tensor " + quote_name(tensor) + ": " + std::string(field) + " " + why};
  };
  if (!PyLong_Check(value.ptr())) throw refuse("must be an int");
  int overflow = 0;
  const long long wide = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0 || !std::in_range<T>(wide)) {
    throw refuse(py::str(value).cast<std::string>() + " is outside " +
                 std::to_string(std::numeric_limits<T>::min()) + ".." +
                 std::to_string(std::numeric_limits<T>::max()));
  }
  return static_cast<T>(wide);
}

template <typename T>
std::vector<T> checked_ints(const py::list& values, const std::string& tensor,
                            std::string_view field) {
  std::vector<T> out;
  out.reserve(values.size());
  for (const py::handle& value : values) out.push_back(checked_int<T>(value, tensor, field));
  return out;
}

class Writer {
 public:
  Writer(const std::string& path, const std::string& producer, const std::string& backend,
         const std::string& model, const std::string& naming) {
    importers::SinkOptions options;
    options.output_path = path;
    options.producer = producer;
    options.backend = backend;
    options.model = model;
    options.naming = naming;
    sink_.emplace(take(importers::StoreSink::open(options)));
  }

  void begin_run(const std::string& name) { check(sink().begin_run(name)); }
  void end_run() { check(sink().end_run()); }

  // `array` is C-contiguous (the Python layer makes it so); its bytes are copied before return.
  // The integers come as Python ints (py::object, py::list) so that each is range-checked here
  // with the tensor's name (checked_int), never wrapped.
  void write(const std::string& name, const py::array& array, uint32_t dtype_code,
             const std::optional<py::list>& handles, const py::object& output_index, int role,
             const std::vector<double>& scales, const py::list& offsets, const py::object& axis,
             const py::object& bitwidth, int convention, const py::list& axis_order) {
    if (!(array.flags() & py::array::c_style)) {
      throw NativeError{ErrorCode::kInvalidArgument,
                        "tensor " + quote_name(name) + ": the array must be C-contiguous"};
    }
    const auto dtype = dtype_info(dtype_code);
    if (!dtype) {
      throw NativeError{
          ErrorCode::kInvalidArgument,
          "tensor " + quote_name(name) + ": unknown dtype code " + std::to_string(dtype_code)};
    }
    TensorRecord record;
    record.name = name;
    record.dtype = dtype->dtype;
    record.dims.assign(array.shape(), array.shape() + array.ndim());
    if (handles) record.handles = checked_ints<int64_t>(*handles, name, "handle");
    record.output_index = checked_int<int32_t>(output_index, name, "output_index");
    record.role = static_cast<TensorRole>(std::max(role, 0));  // < 0: from the name
    record.axis_order = checked_ints<uint8_t>(axis_order, name, "axis_order entry");
    record.quant.scales = scales;
    record.quant.offsets = checked_ints<int64_t>(offsets, name, "offset");
    record.quant.axis = checked_int<int32_t>(axis, name, "axis");
    record.quant.bitwidth = checked_int<uint8_t>(bitwidth, name, "bitwidth");
    record.quant.convention = static_cast<QuantConvention>(convention);
    const std::span<const uint8_t> data(static_cast<const uint8_t*>(array.data()),
                                        static_cast<size_t>(array.nbytes()));
    Status captured;
    {
      py::gil_scoped_release unlocked;
      captured = sink().capture(record, data, handles.has_value(), role >= 0);
    }
    check(captured);
  }

  void graph_node(const std::string& name, const std::string& op_type,
                  const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                  const std::vector<int64_t>& handles) {
    check(sink().graph_node({name, op_type, inputs, outputs, handles}));
  }

  // Closes the store and renames it into place.
  void commit() {
    Status committed;
    {
      py::gil_scoped_release unlocked;
      committed = sink().commit();
    }
    sink_.reset();
    check(committed);
  }

  // Drops everything written: no file appears at the path.
  void abort() { sink_.reset(); }

  bool is_open() const { return sink_.has_value(); }

 private:
  importers::StoreSink& sink() {
    if (!sink_) throw NativeError{ErrorCode::kState, "the store writer is closed"};
    return *sink_;
  }
  std::optional<importers::StoreSink> sink_;
};

// ---- diff and reports
// ----------------------------------------------------------------------------

// A side's options as diff.py gives them, {key: value or [values]}, by the formats' registry.
std::map<std::string, std::vector<std::string>, std::less<>> input_options_of(const py::dict& d) {
  const std::vector<importers::InputOption> known = importers::side_options();
  std::map<std::string, std::vector<std::string>, std::less<>> options;
  for (const auto& [key, value] : d) {
    const std::string k = py::str(key);
    const auto option = std::ranges::find(known, k, &importers::InputOption::key);
    if (option == known.end()) {
      throw NativeError{ErrorCode::kInvalidArgument, "unknown input option " + quote_name(k)};
    }
    if (value.is_none()) continue;
    options[k] = option->many ? value.cast<std::vector<std::string>>()
                              : std::vector<std::string>{value.cast<std::string>()};
  }
  return options;
}

// A side as diff.py gives it: its format (None: told by content) and options.
pipeline::InputSpec input_spec(const std::string& path, const py::object& format,
                               const py::dict& options) {
  pipeline::InputSpec spec;
  spec.path = path;
  if (!format.is_none()) spec.format = format.cast<std::string>();
  spec.options = input_options_of(options);
  return spec;
}

// Every format's options (importers/input_format.h): diff.py's keywords come from this list.
py::list input_options() {
  py::list out;
  for (const importers::InputOption& option : importers::side_options()) {
    py::dict entry;
    entry["key"] = option.key;
    entry["flag"] = option.flag;
    entry["help"] = option.side_help;
    entry["both_sides"] = !option.both_help.empty();
    entry["many"] = option.many;
    entry["path"] = option.path;
    out.append(entry);
  }
  return out;
}

// A report held typed, as the library made it: the views render from it, and its JSON text is
// written only when asked for (Python's Report.text, .json), once.
class NativeReport {
 public:
  explicit NativeReport(report::Report report) : report_(std::move(report)) {}
  // A saved report's text, loaded as `qnn-debug report` loads a file.
  static NativeReport parse(const std::string& text) {
    return NativeReport(take(report::parse_report(text, "report")));
  }

  const std::string& text() {
    if (!text_)
      text_ = within_memory("writing the report", [&] { return report::report_text(report_); });
    return *text_;
  }
  // "summary" (the terminal's) or a file view's name (report/views.h).
  std::string render(const std::string& view, size_t top) const {
    if (view == "summary") return report::render_summary(report_, top, /*color=*/false);
    const report::FileView* file_view = report::find_view(view);
    if (file_view == nullptr) {
      throw NativeError{ErrorCode::kInvalidArgument, "unknown view " + quote_name(view)};
    }
    return within_memory("rendering the report",
                         [&] { return report::render(report_, *file_view); });
  }
  std::string verdict() const {
    return std::string(compare::verdict_name(report_.ending.summary.verdict));
  }
  size_t run_count() const { return report_.runs.size(); }
  // One part of the typed report as JSON text (report/json.h, ReportSection), by name.
  std::string section(const std::string& name) const {
    static const std::map<std::string, report::ReportSection, std::less<>> kSections = {
        {"summary", report::ReportSection::kSummary},
        {"runs", report::ReportSection::kRuns},
        {"groups", report::ReportSection::kFirstRunGroups},
        {"first_divergence", report::ReportSection::kFirstDivergence},
        {"steps", report::ReportSection::kSteps},
        {"device_matrix", report::ReportSection::kDeviceMatrix},
        {"aggregate", report::ReportSection::kAggregate},
        {"kv_cache", report::ReportSection::kKvCache}};
    const auto found = kSections.find(name);
    if (found == kSections.end()) {
      throw NativeError{ErrorCode::kInvalidArgument, "unknown report section " + quote_name(name)};
    }
    return within_memory("writing the report's " + name,
                         [&] { return report::section_text(report_, found->second); });
  }
  // The devices' labels, as every view shows them.
  std::vector<std::string> devices() const {
    std::vector<std::string> labels;
    for (const report::StoreSummary& device : report_.header.devices)
      labels.push_back(device.label);
    return labels;
  }

 private:
  report::Report report_;
  std::optional<std::string> text_;
};

// The diff's own settings (pipeline/request.h): diff.py's keywords come from this list.
py::list diff_settings() {
  py::list out;
  for (const pipeline::DiffSetting& setting : pipeline::diff_settings()) {
    py::dict entry;
    entry["key"] = setting.key;
    entry["many"] = setting.many;
    entry["path"] = setting.path;
    out.append(entry);
  }
  return out;
}

// The request is built as the CLI builds it (pipeline::make_diff_request), from the same lists.
NativeReport diff(const std::string& reference, const py::object& reference_format,
                  const py::dict& reference_options, const std::vector<std::string>& devices,
                  const py::object& device_format, const py::dict& device_options,
                  const py::dict& shared_options, const std::string& simulation,
                  const std::string& isolated, const pipeline::DiffSettingValues& settings) {
  pipeline::DiffInputs inputs;
  inputs.reference = input_spec(reference, reference_format, reference_options);
  inputs.device = input_spec("", device_format, device_options);
  inputs.device_paths = devices;
  inputs.shared.options = input_options_of(shared_options);
  inputs.simulation = simulation;
  inputs.isolated = isolated;
  const pipeline::DiffRequest request =
      take(pipeline::make_diff_request(inputs, settings, QD_VERSION));
  std::string device_paths;
  for (const std::string& path : devices) device_paths += (device_paths.empty() ? "" : ", ") + path;
  const std::string doing = "comparing " + reference + " with " + device_paths;
  py::gil_scoped_release unlocked;
  return NativeReport(within_memory(doing, [&] { return take(pipeline::run_diff(request)); }));
}

// The file views (report/views.h): Report.write_<name> for each.
std::vector<std::string> views() {
  std::vector<std::string> names;
  for (const report::FileView& view : report::file_views()) names.emplace_back(view.name);
  return names;
}

py::list dtypes() {
  py::list out;
  size_t count = 0;
  const DTypeInfo* all = all_dtypes(&count);
  for (size_t i = 0; i < count; ++i) {
    const DTypeInfo& d = all[i];
    py::dict entry;
    entry["name"] = std::string(d.name);
    entry["code"] = static_cast<uint32_t>(d.dtype);
    entry["bits"] = d.bits;
    entry["kind"] = d.kind == DTypeKind::kSignedInt     ? "signed"
                    : d.kind == DTypeKind::kUnsignedInt ? "unsigned"
                    : d.kind == DTypeKind::kFloat       ? "float"
                                                        : "bool";
    entry["fixed_point"] = d.fixed_point;
    const DType values = pipeline::numpy_dtype(d.dtype);
    entry["numpy"] = numpy_name(values);
    // numpy holds this dtype's values as they are and it is no fixed-point dtype: an array of
    // that numpy type is stored as this dtype when the caller names none.
    entry["plain"] = values == d.dtype && !d.fixed_point;
    out.append(entry);
  }
  return out;
}

}  // namespace
}  // namespace qd::python

namespace qd::python {
void bind_alignment_and_encodings(py::module_& m);  // align_binding.cpp
}  // namespace qd::python

PYBIND11_MODULE(_native, m) {
  using namespace qd::python;
  m.doc() = "qnn-debug's C++ libraries (internal: use the qnn_debug package)";
  m.attr("version") = QD_VERSION;

  static py::object error_type = py::reinterpret_borrow<py::object>(PyErr_NewExceptionWithDoc(
      "qnn_debug.QnnDebugError",
      "An error from qnn-debug: `code` names its kind (not_found, corrupt, invalid_argument, "
      "io, state, no_memory, internal), the message names the file and the tensor.",
      PyExc_RuntimeError, nullptr));
  m.attr("QnnDebugError") = error_type;
  bind_alignment_and_encodings(m);  // align_tensors, load_encodings
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const NativeError& e) {
      py::object exc = error_type(e.message);
      exc.attr("code") = std::string(error_code_name(e.code));
      PyErr_SetObject(error_type.ptr(), exc.ptr());
    } catch (const std::bad_alloc&) {
      py::object exc = error_type("out of memory");
      exc.attr("code") = std::string(qd::error_code_name(qd::ErrorCode::kNoMemory));
      PyErr_SetObject(error_type.ptr(), exc.ptr());
    }
  });

  py::class_<Store, std::shared_ptr<Store>>(m, "Store")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", &Store::path)
      .def("inspect_json", &Store::inspect_json)
      .def("values", &Store::values, py::arg("seq"))
      .def("real_values", &Store::real_values, py::arg("seq"), py::arg("reference_layout"))
      .def(
          "chunks",
          [](std::shared_ptr<Store> store, uint64_t seq, uint64_t piece_bytes) {
            return std::make_unique<Chunks>(std::move(store), seq, piece_bytes);
          },
          py::arg("seq"), py::arg("piece_bytes"));

  py::class_<Chunks>(m, "Chunks")
      .def("__iter__", [](Chunks& self) -> Chunks& { return self; })
      .def("__next__", &Chunks::next);

  py::class_<Writer>(m, "Writer")
      .def(py::init<const std::string&, const std::string&, const std::string&, const std::string&,
                    const std::string&>(),
           py::arg("path"), py::arg("producer"), py::arg("backend"), py::arg("model"),
           py::arg("naming"))
      .def("begin_run", &Writer::begin_run)
      .def("end_run", &Writer::end_run)
      .def("write", &Writer::write, py::arg("name"), py::arg("array"), py::arg("dtype_code"),
           py::arg("handles"), py::arg("output_index"), py::arg("role"), py::arg("scales"),
           py::arg("offsets"), py::arg("axis"), py::arg("bitwidth"), py::arg("convention"),
           py::arg("axis_order"))
      .def("graph_node", &Writer::graph_node)
      .def("commit", &Writer::commit)
      .def("abort", &Writer::abort)
      .def_property_readonly("is_open", &Writer::is_open);

  m.def("diff", &diff, py::arg("reference"), py::arg("reference_format"),
        py::arg("reference_options"), py::arg("devices"), py::arg("device_format"),
        py::arg("device_options"), py::arg("shared_options"), py::arg("simulation"),
        py::arg("isolated"), py::arg("settings"));
  m.def("diff_settings", &diff_settings);
  py::class_<NativeReport>(m, "Report")
      .def_static("parse", &NativeReport::parse, py::arg("text"))
      .def("text", &NativeReport::text)
      .def("render", &NativeReport::render, py::arg("view"), py::arg("top") = 10)
      .def("verdict", &NativeReport::verdict)
      .def("section", &NativeReport::section, py::arg("name"))
      .def("run_count", [](const NativeReport& self) { return self.run_count(); })
      .def("devices", &NativeReport::devices);
  m.def("views", &views);
  m.def("dtypes", &dtypes);
  m.def("input_options", &input_options);
  m.def(
      "write_output_file",
      [](const std::string& path, const py::bytes& content) {
        check(qd::write_output_file(path, std::string_view(content)));
      },
      py::arg("path"), py::arg("content"));
}
