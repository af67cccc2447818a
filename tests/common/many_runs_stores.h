// A reference / device store pair shaped like an LLM decode loop: many runs of the same small
// float32 tensors. The device holds the reference plus a small deterministic noise (relative
// error about 1e-4, so every pair is compared and passes). For the scale benchmark
// (tests/bench/scale_bench.cpp) and the out-of-memory test of the CLI.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/etdump/store_writer.h"

namespace qd::testing {

struct ManyRunsShape {
  uint32_t runs = 50;
  uint32_t tensors_per_run = 200;
  uint64_t elements = 64;  // float32 each: 256 bytes a tensor
};

inline Status write_many_runs_pair(const std::string& ref_path, const std::string& device_path,
                                   const ManyRunsShape& shape) {
  // Not durable: the stores are scratch files, and fsync would time the disk, not qnn-debug.
  const WriterOptions options{.deflate_level = 0, .durable = false};
  QD_ASSIGN_OR_RETURN(auto ref,
                      StoreWriter::create(ref_path, {"scale", "cpu", "", "decode", 0}, options));
  QD_ASSIGN_OR_RETURN(
      auto device,
      StoreWriter::create(device_path, {"scale", "QnnHtp", "SM8650", "decode", 0}, options));
  std::vector<float> ref_values(shape.elements), device_values(shape.elements);
  const auto bytes = [](const std::vector<float>& values) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                    values.size() * sizeof(float));
  };
  for (uint32_t run = 0; run < shape.runs; ++run) {
    const std::string name = "step" + std::to_string(run);
    QD_RETURN_IF_ERROR(ref->begin_run(name, run).status());
    QD_RETURN_IF_ERROR(device->begin_run(name, run).status());
    for (uint32_t t = 0; t < shape.tensors_per_run; ++t) {
      for (uint64_t i = 0; i < shape.elements; ++i) {
        const double x = 0.37 * double(i) + 0.11 * t + 0.013 * run;
        ref_values[i] = static_cast<float>(std::sin(x));
        device_values[i] = static_cast<float>(std::sin(x) + 1e-4 * std::cos(7.0 * x));
      }
      TensorRecord record;
      record.name = "layer" + std::to_string(t);
      record.handles = {int64_t{t} + 1};
      record.dims = {shape.elements};
      QD_RETURN_IF_ERROR(ref->append_tensor(record, bytes(ref_values), run));
      QD_RETURN_IF_ERROR(device->append_tensor(record, bytes(device_values), run));
    }
    QD_RETURN_IF_ERROR(ref->end_run(run, 0));
    QD_RETURN_IF_ERROR(device->end_run(run, 0));
    QD_RETURN_IF_ERROR(ref->commit());
    QD_RETURN_IF_ERROR(device->commit());
  }
  QD_RETURN_IF_ERROR(ref->close());
  return device->close();
}

}  // namespace qd::testing
