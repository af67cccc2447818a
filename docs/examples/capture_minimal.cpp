// capture_minimal.c again, through the C++ wrapper qd::CaptureSession (qnn_debug/capture.hpp):
// one run holding a float32 NHWC activation and an int8 per-tensor quantized tensor, a profile
// event and a memory checkpoint. See docs/c-api.md.
//
// Usage: capture_minimal_cpp OUT.h5     (then: qnn-debug inspect OUT.h5)
// Exit status: 0 on success, 2 on any failure (the reason is printed to stderr).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "qnn_debug/capture.hpp"

namespace {

// A failed qd::Status carries the code and a copy of qd_last_error() taken right after the call.
bool failed(const qd::Status& status, const char* what) {
  if (status.is_ok()) return false;
  std::fprintf(stderr, "capture_minimal: %s: %s: %s\n", what,
               qd_status_name(static_cast<qd_status>(status.code())), status.message().c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.h5\n", argv[0]);
    return 2;
  }

  qd_session_options options;
  qd_session_options_init(&options);  // sets struct_size; 64 MiB queue, block policy
  options.path = argv[1];
  options.naming = "debug-id";
  options.producer = "capture_minimal (C++)";
  options.model = "docs/examples";
  qd::Result<qd::CaptureSession> opened = qd::CaptureSession::open(options);
  if (failed(opened.status(), "open")) return 2;
  qd::CaptureSession session = std::move(opened).value();

  // A float32 activation that the runtime stores NHWC; the reference layout is NCHW.
  static constexpr std::array<uint64_t, 4> act_dims = {1, 2, 2, 3};  // N, H, W, C as stored
  static constexpr std::array<uint8_t, 4> nhwc_to_nchw = {0, 3, 1, 2};
  std::array<float, 12> act_values{};
  for (std::size_t i = 0; i < act_values.size(); ++i) act_values[i] = 0.25f * float(i) - 1.0f;

  // Always start from qd_tensor_init: a value-initialized qd_tensor{} has dtype 0 (unknown) and
  // output_index 0, which would override an "@<k>" index in the name.
  qd_tensor activation;
  qd_tensor_init(&activation);  // FLOAT_32, output_index -1, not quantized
  activation.name = "aten_convolution_default__debugID_1";
  activation.rank = act_dims.size();
  activation.dims = act_dims.data();
  activation.axis_order = nhwc_to_nchw.data();
  activation.data = act_values.data();
  activation.nbytes = sizeof act_values;  // 12 elements x 4 bytes

  // An int8 tensor with one scale and offset: real = (q + offset) * scale (QNN convention).
  static constexpr std::array<uint64_t, 2> q_dims = {1, 8};
  static constexpr std::array<int8_t, 8> q_values = {-128, -64, -1, 0, 1, 63, 64, 127};
  const double scale = 0.05;
  const int32_t offset = 0;
  qd_tensor quantized;
  qd_tensor_init(&quantized);
  quantized.name = "aten_relu_default__debugID_2@0";  // handle 2, output index 0
  quantized.dtype = 776;                              // QNN SFIXED_POINT_8
  quantized.rank = q_dims.size();
  quantized.dims = q_dims.data();
  quantized.data = q_values.data();
  quantized.nbytes = sizeof q_values;  // 8 elements x 1 byte
  quantized.quant.count = 1;           // per-tensor (quant.axis is -1 from qd_tensor_init)
  quantized.quant.scales = &scale;
  quantized.quant.offsets = &offset;
  quantized.quant.bitwidth = 8;
  quantized.quant.convention = QD_QUANT_QNN_OFFSET;

  bool bad =
      failed(session.begin_run("sample_0"), "begin_run") ||
      failed(session.capture(activation), "capture (activation)") ||
      failed(session.capture(quantized), "capture (quantized)") ||
      // The wrapper passes no handles: they are parsed from the name, here {1}.
      failed(session.profile_event("aten_convolution_default__debugID_1", 1000, 1850, "cycles"),
             "profile_event") ||
      failed(session.memory_checkpoint("DSP:after_execute", 1048576u), "memory_checkpoint") ||
      failed(session.end_run(), "end_run");

  // close() reports what the destructor would swallow. It ends an open run, drains the queue,
  // syncs the file and frees the session even after a failure.
  if (failed(session.close(), "close")) bad = true;
  if (bad) return 2;
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
