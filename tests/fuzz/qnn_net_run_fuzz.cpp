// `qnn-debug capture qnn-net-run` on a tiny output folder: a fixed converter net JSON describing
// one quantized tensor (its native file is fixed and valid), and one tensor the net JSON does not
// describe whose files hold the fuzz bytes, read as the fuzzed --shape says. The input list names
// the run. Input: "<--shape value>\n<input list>\n<raw bytes>"; an empty first line passes no
// --shape, so the file must then be read as 1-D float32.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_util.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_net_run_import.h"

namespace {

constexpr std::string_view kNetJson = R"({"graph": {
  "tensors": {"conv/Relu:0": {"id": 1, "type": 3, "data_type": 1032, "dims": [1, 2],
                              "axis_format": "NC", "src_axis_format": "NC",
                              "quant_params": {"definition": 1, "encoding": 0,
                                               "scale_offset": {"scale": 0.5, "offset": -3}}}},
  "nodes": {"conv": {"type": "Conv2d", "input_names": ["t"], "output_names": ["conv/Relu:0"]}}}})";

// The folder and its fixed files, made once per process.
const std::string& output_dir() {
  static const std::string dir = [] {
    const std::string result = qd::fuzz::scratch_dir() + "/net_run/Result_0";
    std::filesystem::create_directories(result);
    qd::fuzz::write_file("net_run/Result_0/conv_Relu_0_native.raw", std::string_view("\x01\xfe"));
    qd::fuzz::write_file("model_net.json", kNetJson);
    return qd::fuzz::scratch_dir() + "/net_run";
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  qd::keep_hdf5_quiet_at_exit();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = qd::fuzz::as_text(data, size);
  const std::string_view shape = qd::fuzz::take_until(input, '\n');
  const std::string_view input_list = qd::fuzz::take_until(input, '\n');
  qd::importers::QnnNetRunImportOptions options;
  options.output_dir = output_dir();
  options.net_json = qd::fuzz::scratch_dir() + "/model_net.json";
  options.input_list = qd::fuzz::write_file("input_list.txt", input_list);
  if (!shape.empty()) options.shapes.emplace_back(shape);
  qd::fuzz::write_file("net_run/Result_0/t.raw", input);
  qd::fuzz::write_file("net_run/Result_0/t_native.raw", input);
  options.output_path = qd::fuzz::scratch_dir() + "/out.h5";
  if (qd::fuzz::checked(qd::importers::import_qnn_net_run(options)).is_ok()) {
    qd::fuzz::expect_readable_store(options.output_path);
  }
  return 0;
}
