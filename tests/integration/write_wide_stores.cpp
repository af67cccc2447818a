// qd_write_wide_stores REF.h5 DEVICE.h5 GROUPS
//
// Writes a reference / device pair with GROUPS ops of 64 elements each, for the HTML report's
// browser test: float32 reference, int8 device whose quantization error grows with the op index
// (SQNR falls from about 50 dB to about 0 dB, so the table has all three verdicts and sorting by
// SQNR reorders it), profile events and a memory checkpoint, and one tensor whose name is markup:
// `<img src=x onerror=alert(1)>` (op GROUPS / 2). Exits 2 with a message on any failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "qnn_debug/etdump/store_writer.h"

namespace {

constexpr uint64_t kElements = 64;
constexpr const char* kHostileName = "<img src=x onerror=alert(1)>";

qd::Status write(const std::string& ref_path, const std::string& device_path, int groups) {
  QD_ASSIGN_OR_RETURN(auto ref, qd::StoreWriter::create(ref_path, {"wide", "cpu", "", "wide", 0}));
  QD_ASSIGN_OR_RETURN(
      auto device, qd::StoreWriter::create(device_path, {"wide", "QnnHtp", "SM8650", "wide", 0}));
  QD_RETURN_IF_ERROR(ref->begin_run("ref", 0).status());
  QD_RETURN_IF_ERROR(device->begin_run("device", 0).status());
  std::vector<float> values(kElements);
  std::vector<int8_t> quantized(kElements);
  for (int op = 0; op < groups; ++op) {
    for (uint64_t i = 0; i < kElements; ++i) {
      values[i] = static_cast<float>(std::sin(0.37 * double(i) + op));
    }
    // The step grows geometrically with the op: coarser and coarser encodings.
    const double scale = std::pow(2.0, -7.0 + 8.0 * op / std::max(1, groups - 1));
    for (uint64_t i = 0; i < kElements; ++i) {
      quantized[i] =
          static_cast<int8_t>(std::clamp(std::nearbyint(values[i] / scale), -128.0, 127.0));
    }
    qd::TensorRecord record;
    record.name = op == groups / 2 ? kHostileName : "op_" + std::to_string(op);
    record.handles = {op + 1};
    record.dims = {1, 4, 4, 4};
    const auto* ref_bytes = reinterpret_cast<const uint8_t*>(values.data());
    QD_RETURN_IF_ERROR(ref->append_tensor(record, {ref_bytes, kElements * 4}, 0));
    record.dtype = qd::DType::kSFixed8;
    record.quant.scales = {scale};
    record.quant.offsets = {0};
    const auto* device_bytes = reinterpret_cast<const uint8_t*>(quantized.data());
    QD_RETURN_IF_ERROR(device->append_tensor(record, {device_bytes, kElements}, 0));
    if (op < 100) {
      QD_RETURN_IF_ERROR(device->append_profile_event(
          {0, record.name, {op + 1}, int64_t{op} * 1000, int64_t{op} * 1000 + 700 + op, "ns"}));
    }
  }
  QD_RETURN_IF_ERROR(
      device->append_memory_checkpoint({0, "after_execute", uint64_t{123} << 20, 0}));
  QD_RETURN_IF_ERROR(ref->end_run(1, 0));
  QD_RETURN_IF_ERROR(device->end_run(1, 0));
  QD_RETURN_IF_ERROR(ref->close());
  return device->close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || std::atoi(argv[3]) < 1) {
    std::fprintf(stderr, "usage: qd_write_wide_stores REF.h5 DEVICE.h5 GROUPS\n");
    return 2;
  }
  const qd::Status status = write(argv[1], argv[2], std::atoi(argv[3]));
  if (!status.is_ok()) {
    std::fprintf(stderr, "qd_write_wide_stores: %s\n", status.message().c_str());
    return 2;
  }
  return 0;
}
