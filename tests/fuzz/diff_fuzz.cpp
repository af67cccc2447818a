// `qnn-debug diff` end to end, as run_diff does it for the CLI and the Python package: two stores
// the fuzz input describes are written, then aligned, decoded, compared, analysed, judged and
// rendered. Beyond crashes, checks what diff promises: it never returns kInternal, and every
// report it builds is valid against docs/report-schema.json (it loads again with parse_report)
// and renders in every view.
//
// The input picks up to 6 tensors per run: names from a small set sharing debug handles (so they
// align, and some collide), any dtype, dims, layout and quantization (tensor_picker.h). A device
// tensor usually takes its reference's bytes with a few changed, so pairs that match and pairs
// that diverge slightly both occur, not only noise against noise.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/views.h"
#include "tensor_picker.h"

namespace {

using namespace qd;
using namespace qd::fuzz;

constexpr uint64_t kMaxElements = 512;  // small tensors: every run writes two HDF5 files
constexpr size_t kMaxTensors = 6;

struct Tensor {
  TensorRecord record;
  std::vector<uint8_t> bytes;
};

std::string pick_name(FuzzedDataProvider& in, size_t index) {
  static const char* const kStems[] = {"conv", "relu", "add", "softmax", "linear", "output"};
  const std::string stem = kStems[in.ConsumeIntegralInRange<size_t>(0, 5)];
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return stem + "__debugID_" + std::to_string(in.ConsumeIntegralInRange<int>(0, 4));
    case 1:
      return stem + "_" + std::to_string(index);
    case 2:
      return stem + "__debugID_" + std::to_string(index) + "@" +
             std::to_string(in.ConsumeIntegralInRange<int>(0, 1));
    default:
      return in.ConsumeRandomLengthString(16);
  }
}

// Picks the record's type, shape, layout, quantization and role; false when it is too large.
bool pick_record(FuzzedDataProvider& in, TensorRecord& record) {
  record.dtype = pick_dtype(in);
  record.dims = pick_dims(in);
  record.axis_order = pick_axis_order(in, record.dims.size());
  record.quant = pick_quantization(in, record.dims);
  record.role = static_cast<TensorRole>(in.ConsumeIntegralInRange<int>(0, 2));
  return record.element_count() <= kMaxElements;
}

std::vector<uint8_t> pick_bytes(FuzzedDataProvider& in, const TensorRecord& record) {
  const uint64_t size = storage_bytes(record.dtype, record.element_count());
  std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(size);
  bytes.resize(size);
  return bytes;
}

// The reference's tensors for one run.
std::vector<Tensor> pick_reference(FuzzedDataProvider& in) {
  std::vector<Tensor> tensors;
  const size_t count = in.ConsumeIntegralInRange<size_t>(0, kMaxTensors);
  for (size_t i = 0; i < count; ++i) {
    Tensor t;
    t.record.name = pick_name(in, i);
    if (!pick_record(in, t.record)) continue;
    t.bytes = pick_bytes(in, t.record);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// The device's version of a reference tensor: mostly the same record with nearly the same
// bytes; sometimes another name, dtype, layout or quantization with bytes of its own.
Tensor pick_device(FuzzedDataProvider& in, const Tensor& ref, size_t index) {
  Tensor t = ref;
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) t.record.name = pick_name(in, index);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    if (!pick_record(in, t.record)) return ref;
    t.bytes = pick_bytes(in, t.record);
    return t;
  }
  const size_t changes = t.bytes.empty() ? 0 : in.ConsumeIntegralInRange<size_t>(0, 3);
  for (size_t c = 0; c < changes; ++c) {
    t.bytes[in.ConsumeIntegralInRange<size_t>(0, t.bytes.size() - 1)] ^=
        in.ConsumeIntegralInRange<uint8_t>(1, 255);
  }
  return t;
}

// Writes one store: each run's tensors, in order. Tensors the writer refuses (validate_tensor)
// are left out, as no store holds them. A run may stay open, as a killed capture leaves it.
std::string write_store(const std::string& name, const std::vector<std::vector<Tensor>>& runs,
                        bool last_run_complete) {
  const std::string path = scratch_dir() + "/" + name;
  auto writer = StoreWriter::create(path, StoreMetadata{"diff_fuzz", "cpu", "", "fuzz", 1},
                                    WriterOptions{0, false});
  if (!writer.is_ok()) {
    std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(), writer.status().message().c_str());
    std::abort();  // a harness fuzzing nothing would look clean
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    if (!(*writer)->begin_run("run" + std::to_string(r), 1).is_ok()) std::abort();
    for (const Tensor& t : runs[r]) (void)(*writer)->append_tensor(t.record, t.bytes, 1);
    if (r + 1 < runs.size() || last_run_complete) (void)(*writer)->end_run(2, 0);
  }
  if (!(*writer)->close().is_ok()) std::abort();
  return path;
}

void expect_valid_report(const report::Report& doc) {
  const std::string text = report::report_text(doc);
  auto again = report::parse_report(text, "diff.json");
  if (!again.is_ok()) {
    std::fprintf(stderr, "diff wrote a report its own schema refuses: %s\n",
                 again.status().message().c_str());
    std::abort();
  }
  (void)report::render_summary(*again, 5, /*color=*/false);
  for (const report::FileView& view : report::file_views()) (void)report::render(*again, view);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  pipeline::DiffRequest request;
  request.chunk_elements = 2 * in.ConsumeIntegralInRange<uint64_t>(1, 64);
  request.jobs = in.ConsumeIntegralInRange<unsigned>(1, 2);
  if (in.ConsumeBool()) {
    request.atol = in.ConsumeFloatingPoint<double>();
    request.rtol = in.ConsumeFloatingPoint<double>();
  }
  const std::vector<Tensor> reference = pick_reference(in);
  std::vector<std::vector<Tensor>> device_runs(in.ConsumeIntegralInRange<size_t>(1, 2));
  for (std::vector<Tensor>& run : device_runs) {
    for (size_t i = 0; i < reference.size(); ++i) {
      if (in.ConsumeIntegralInRange<int>(0, 7) != 0)
        run.push_back(pick_device(in, reference[i], i));
    }
  }
  const bool device_complete = in.ConsumeIntegralInRange<int>(0, 7) != 0;
  request.reference.path = write_store("reference.h5", {reference}, true);
  request.devices = {
      qd::pipeline::InputSpec{write_store("device.h5", device_runs, device_complete), {}, {}, {}}};
  auto doc = checked(pipeline::run_diff(request));
  if (doc.is_ok()) expect_valid_report(*doc);
  return 0;
}
