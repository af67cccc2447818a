// A reference / device store pair shaped like an LLM decode loop: many runs of the same small
// float32 tensors. The device holds the reference plus a small deterministic noise (relative
// error about 1e-4, so every pair is compared and passes). For the scale benchmark
// (tests/bench/scale_bench.cpp), the out-of-memory test of the CLI and, `mixed` and with a fault,
// the long report's tests (tests/integration/long_report_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/base/dtype.h"
#include "qnn_debug/base/tensor.h"

#include "qnn_debug/etdump/store_writer.h"

namespace qd::testing {

struct ManyRunsShape {
  uint32_t runs = 50;
  uint32_t tensors_per_run = 200;
  uint64_t elements = 64;  // float32 each: 256 bytes a tensor
  // What else a decode's report carries: tensor t % 3 == 1 a KV cache "layer<t>.k_cache" of
  // [1, 2, elements / 8, 4] (figures per position; the positions after the run's are 0 on both
  // sides, as a cache not yet written), t % 3 == 2 a UFIXED_POINT_16 device tensor (one scale
  // over [-2, 2]: LSB figures, an ideal SQNR, what the encoding allows). `elements` a multiple of
  // 8.
  bool mixed = false;
  // From this run on, tensor fault_tensor and every one after it carry an error as large as their
  // values (they fail, and depart from their earlier runs).
  uint32_t fault_run = UINT32_MAX;
  uint32_t fault_tensor = UINT32_MAX;
};

// Tensor t of run `run` as ManyRunsShape says: its record on the device (the reference's is the
// same but float32) and both sides' values.
struct ManyRunsTensor {
  TensorRecord device;
  std::vector<float> ref;
  std::vector<float> dev;  // dequantized when the device is quantized
};

inline ManyRunsTensor many_runs_tensor(const ManyRunsShape& shape, uint32_t run, uint32_t t) {
  ManyRunsTensor out;
  out.device.name = "layer" + std::to_string(t);
  out.device.handles = {int64_t{t} + 1};
  out.device.dims = {shape.elements};
  const uint32_t kind = shape.mixed ? t % 3 : 0;
  if (kind == 1) {
    out.device.name += ".k_cache";
    out.device.dims = {1, 2, shape.elements / 8, 4};
  } else if (kind == 2) {
    out.device.dtype = DType::kUFixed16;
    out.device.quant.scales = {4.0 / 65535};
    out.device.quant.offsets = {-32768};
  }
  const bool wrong = run >= shape.fault_run && t >= shape.fault_tensor;
  for (uint64_t i = 0; i < shape.elements; ++i) {
    const double x = 0.37 * double(i) + 0.11 * t + 0.013 * run;
    // A cache holds the positions up to the run's; the later ones are not written yet.
    const bool unwritten = kind == 1 && (i / 4) % (shape.elements / 8) > run;
    out.ref.push_back(unwritten ? 0.0f : static_cast<float>(std::sin(x)));
    out.dev.push_back(
        unwritten
            ? 0.0f
            : static_cast<float>(std::sin(x) + (wrong ? std::cos(3 * x) : 1e-4 * std::cos(7 * x))));
  }
  return out;
}

inline Status write_many_runs_pair(const std::string& ref_path, const std::string& device_path,
                                   const ManyRunsShape& shape) {
  // Not durable: the stores are scratch files, and fsync would time the disk, not qnn-debug.
  const WriterOptions options{.deflate_level = 0, .durable = false};
  QD_ASSIGN_OR_RETURN(auto ref,
                      StoreWriter::create(ref_path, {"scale", "cpu", "", "decode", 0}, options));
  QD_ASSIGN_OR_RETURN(
      auto device,
      StoreWriter::create(device_path, {"scale", "QnnHtp", "SM8650", "decode", 0}, options));
  const auto bytes = [](const auto& values) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                    values.size() * sizeof(values[0]));
  };
  for (uint32_t run = 0; run < shape.runs; ++run) {
    const std::string name = "step" + std::to_string(run);
    QD_RETURN_IF_ERROR(ref->begin_run(name, run).status());
    QD_RETURN_IF_ERROR(device->begin_run(name, run).status());
    for (uint32_t t = 0; t < shape.tensors_per_run; ++t) {
      const ManyRunsTensor tensor = many_runs_tensor(shape, run, t);
      TensorRecord record = tensor.device;
      record.dtype = DType::kFloat32;
      record.quant = {};
      QD_RETURN_IF_ERROR(ref->append_tensor(record, bytes(tensor.ref), run));
      if (!tensor.device.quant.is_quantized()) {
        QD_RETURN_IF_ERROR(device->append_tensor(tensor.device, bytes(tensor.dev), run));
        continue;
      }
      std::vector<uint16_t> codes;  // real = (q + offset) * scale, rounded and clamped
      for (float v : tensor.dev) {
        const double q = std::nearbyint(v / tensor.device.quant.scales[0]) + 32768;
        codes.push_back(static_cast<uint16_t>(std::clamp(q, 0.0, 65535.0)));
      }
      QD_RETURN_IF_ERROR(device->append_tensor(tensor.device, bytes(codes), run));
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
