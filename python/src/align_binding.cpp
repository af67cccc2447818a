// qnn_debug._native.align_tensors and qnn_debug._native.load_encodings: the diff's alignment and
// the importers' encodings reader, reached from Python so that the quantized simulation and the
// replay (python/qnn_debug/simulate.py, replay.py) match names exactly as `qnn-debug diff` does
// and read encodings exactly as `qnn-debug capture --encodings` does, instead of restating the
// rules in Python. Errors come out as qnn_debug.QnnDebugError with the library's message and
// `code` (native_error.h), like every other binding of the extension.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "native_error.h"
#include "qnn_debug/base/dtype.h"
#include "qnn_debug/base/status.h"
#include "qnn_debug/compare/align.h"
#include "qnn_debug/etdump/store.h"
#include "qnn_debug/importers/encodings.h"

namespace py = pybind11;

namespace qd::python {
namespace {

// One side's tensors as align() reads them: (name, handles, output_index) each, capture order
// given by the position in the list.
using TensorKey = std::tuple<std::string, std::vector<int64_t>, int32_t>;

std::vector<TensorEntry> entries_of(const std::vector<TensorKey>& keys) {
  std::vector<TensorEntry> entries(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    entries[i].name = std::get<0>(keys[i]);
    entries[i].handles = std::get<1>(keys[i]);
    entries[i].output_index = std::get<2>(keys[i]);
    entries[i].seq = i;
  }
  return entries;
}

// compare::align over two lists of tensor keys. Returns {"pairs": [(ref index, device index,
// how)], "unmatched_reference": [index], "unmatched_device": [index]}: the compared pairs of
// every group in the alignment's order, and the tensors align() lists as compared with nothing.
py::dict align_tensors(const std::vector<TensorKey>& reference,
                       const std::vector<TensorKey>& device) {
  const std::vector<TensorEntry> ref_entries = entries_of(reference);
  const std::vector<TensorEntry> device_entries = entries_of(device);
  compare::Alignment alignment;
  {
    py::gil_scoped_release unlocked;
    alignment = compare::align(ref_entries, device_entries, nullptr);
  }
  py::list pairs;
  for (const compare::Group& group : alignment.groups) {
    for (const compare::ComparedPair& pair : group.pairs) {
      pairs.append(py::make_tuple(pair.ref->seq, pair.device->seq,
                                  std::string(compare::match_kind_name(pair.how))));
    }
  }
  py::list unmatched_reference;
  py::list unmatched_device;
  for (const compare::Unmatched& unmatched : alignment.unmatched) {
    (unmatched.side == compare::Side::kReference ? unmatched_reference : unmatched_device)
        .append(unmatched.tensor->seq);
  }
  py::dict out;
  out["pairs"] = pairs;
  out["unmatched_reference"] = unmatched_reference;
  out["unmatched_device"] = unmatched_device;
  return out;
}

// One encoding as a dict, offsets in QNN's convention (real = (q + offset) * scale) whatever the
// file used: a zero point is negated.
py::dict encoding_dict(const importers::TensorEncoding& encoding) {
  const Quantization& quant = encoding.quant;
  std::vector<int64_t> offsets = quant.offsets;
  if (quant.convention == QuantConvention::kZeroPoint) {
    for (int64_t& offset : offsets) offset = -offset;
  }
  py::dict out;
  out["name"] = encoding.name;
  out["dtype"] = encoding.dtype ? py::object(py::str(std::string(info(*encoding.dtype).name)))
                                : py::object(py::none());
  out["scales"] = quant.scales;
  out["offsets"] = offsets;
  out["axis"] = quant.axis;
  out["bitwidth"] = quant.bitwidth;
  out["axis_order"] = std::vector<int>(encoding.axis_order.begin(), encoding.axis_order.end());
  out["dims"] = encoding.dims;
  out["source"] = encoding.source;
  out["notes"] = encoding.notes;
  return out;
}

// Every encodings file read (importers::load_encodings) and merged into the first
// (importers::merge_encodings), in order, as `--encodings A --encodings B` does. Returns one
// dict per tensor name, in name order.
py::list load_encodings(const std::vector<std::string>& paths) {
  if (paths.empty()) throw NativeError{ErrorCode::kInvalidArgument, "no encodings file given"};
  importers::EncodingTable table;
  Status status = Status::ok();
  {
    py::gil_scoped_release unlocked;
    for (size_t i = 0; i < paths.size() && status.is_ok(); ++i) {
      Result<importers::EncodingTable> loaded = importers::load_encodings(paths[i]);
      if (!loaded.is_ok()) {
        status = loaded.status();
      } else if (i == 0) {
        table = std::move(loaded).value();
      } else {
        status = importers::merge_encodings(table, std::move(loaded).value());
      }
    }
  }
  check(status);
  py::list out;
  for (const auto& [name, encoding] : table.tensors) out.append(encoding_dict(encoding));
  return out;
}

}  // namespace

void bind_alignment_and_encodings(py::module_& m) {
  m.def("align_tensors", &align_tensors, py::arg("reference"), py::arg("device"),
        "compare::align over two lists of (name, handles, output_index): the diff's pairs");
  m.def("load_encodings", &load_encodings, py::arg("paths"),
        "Encodings files loaded and merged as --encodings does: one dict per tensor");
}

}  // namespace qd::python
