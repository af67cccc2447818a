// qd_write_decode_stores REF.h5 DEVICE.h5 RUNS OPS FAULT_RUN FAULT_OP
//
// Writes a reference / device pair shaped like a long generation, for the page's browser test at
// scale: RUNS runs ("step k") of OPS float32 ops of 64 elements each (handle = op + 1, named
// "layer<op>"), the device the reference plus noise of about 1e-4 (every op passes), except that
// from run FAULT_RUN on, op FAULT_OP and every op after it carry an error as large as the values
// (they fail: the op where the decode goes wrong, and what it feeds). Exits 2 on any failure.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/etdump/store_writer.h"

namespace {

constexpr uint64_t kElements = 64;

struct Shape {
  uint32_t runs, ops, fault_run, fault_op;
};

std::span<const uint8_t> bytes(const std::vector<float>& values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)};
}

qd::Status write(const std::string& ref_path, const std::string& device_path, const Shape& shape) {
  const qd::WriterOptions options{.deflate_level = 0, .durable = false};  // scratch files
  QD_ASSIGN_OR_RETURN(
      auto ref, qd::StoreWriter::create(ref_path, {"decode", "cpu", "", "decode", 0}, options));
  QD_ASSIGN_OR_RETURN(
      auto device,
      qd::StoreWriter::create(device_path, {"decode", "QnnHtp", "SM8650", "decode", 0}, options));
  std::vector<float> ref_values(kElements), device_values(kElements);
  for (uint32_t run = 0; run < shape.runs; ++run) {
    const std::string name = "step " + std::to_string(run);
    QD_RETURN_IF_ERROR(ref->begin_run(name, run).status());
    QD_RETURN_IF_ERROR(device->begin_run(name, run).status());
    for (uint32_t op = 0; op < shape.ops; ++op) {
      const bool wrong = run >= shape.fault_run && op >= shape.fault_op;
      for (uint64_t i = 0; i < kElements; ++i) {
        const double x = 0.37 * double(i) + 0.11 * op + 0.013 * run;
        ref_values[i] = static_cast<float>(std::sin(x));
        device_values[i] =
            static_cast<float>(std::sin(x) + (wrong ? std::cos(3 * x) : 1e-4 * std::cos(7 * x)));
      }
      qd::TensorRecord record;
      record.name = "layer" + std::to_string(op);
      record.handles = {int64_t{op} + 1};
      record.dims = {kElements};
      QD_RETURN_IF_ERROR(ref->append_tensor(record, bytes(ref_values), run));
      QD_RETURN_IF_ERROR(device->append_tensor(record, bytes(device_values), run));
    }
    QD_RETURN_IF_ERROR(ref->end_run(run, 0));
    QD_RETURN_IF_ERROR(device->end_run(run, 0));
  }
  QD_RETURN_IF_ERROR(ref->close());
  return device->close();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr,
                 "usage: qd_write_decode_stores REF.h5 DEVICE.h5 RUNS OPS FAULT_RUN FAULT_OP\n");
    return 2;
  }
  const auto number = [&](int i) {
    return static_cast<uint32_t>(std::strtoul(argv[i], nullptr, 10));
  };
  const Shape shape{number(3), number(4), number(5), number(6)};
  if (shape.runs < 1 || shape.ops < 1) {
    std::fprintf(stderr, "qd_write_decode_stores: RUNS and OPS must be at least 1\n");
    return 2;
  }
  const qd::Status status = write(argv[1], argv[2], shape);
  if (!status.is_ok()) {
    std::fprintf(stderr, "qd_write_decode_stores: %s\n", status.message().c_str());
    return 2;
  }
  return 0;
}
