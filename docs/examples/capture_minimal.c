/* The smallest complete use of the qnn-debug capture hook through its C ABI (docs/c-api.md):
 * one run holding a float32 NHWC activation and an int8 per-tensor quantized tensor, a profile
 * event and a memory checkpoint.
 *
 * Usage: capture_minimal OUT.h5     (then: qnn-debug inspect OUT.h5)
 * Exit status: 0 on success, 2 on any failure (the reason is printed to stderr). */
#include <stdint.h>
#include <stdio.h>

#include "qnn_debug/capture.h"

/* Prints the failing call, its status and the calling thread's error message. */
static int failed(qd_status status, const char* what) {
  if (status == QD_OK) return 0;
  fprintf(stderr, "capture_minimal: %s: %s: %s\n", what, qd_status_name(status), qd_last_error());
  return 1;
}

int main(int argc, char** argv) {
  /* A float32 activation that the runtime stores NHWC; the reference layout is NCHW. */
  static const uint64_t act_dims[4] = {1, 2, 2, 3}; /* N, H, W, C as stored */
  static const uint8_t nhwc_to_nchw[4] = {0, 3, 1, 2};
  /* An int8 tensor with one scale and offset: real = (q + offset) * scale (QNN convention). */
  static const uint64_t q_dims[2] = {1, 8};
  static const int8_t q_values[8] = {-128, -64, -1, 0, 1, 63, 64, 127};
  const double scale = 0.05;
  const int32_t offset = 0;
  float act_values[12];
  qd_session_options options;
  qd_session* session = NULL;
  qd_tensor activation;
  qd_tensor quantized;
  int i;
  int bad;

  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.h5\n", argv[0]);
    return 2;
  }
  for (i = 0; i < 12; ++i) act_values[i] = 0.25f * (float)i - 1.0f;

  qd_session_options_init(&options); /* sets struct_size; 64 MiB queue, block policy */
  options.path = argv[1];
  options.naming = "debug-id";
  options.producer = "capture_minimal";
  options.model = "docs/examples";
  if (failed(qd_session_open(&options, &session), "qd_session_open")) return 2;

  /* Always start from qd_tensor_init: a zero-filled qd_tensor has dtype 0 (unknown) and
   * output_index 0, which would override an "@<k>" index in the name. */
  qd_tensor_init(&activation); /* FLOAT_32, output_index -1, not quantized */
  activation.name = "aten_convolution_default__debugID_1";
  activation.rank = 4;
  activation.dims = act_dims;
  activation.axis_order = nhwc_to_nchw;
  activation.data = act_values;
  activation.nbytes = sizeof act_values; /* 12 elements x 4 bytes */

  qd_tensor_init(&quantized);
  quantized.name = "aten_relu_default__debugID_2@0"; /* handle 2, output index 0 */
  quantized.dtype = 776;                             /* QNN SFIXED_POINT_8 */
  quantized.rank = 2;
  quantized.dims = q_dims;
  quantized.data = q_values;
  quantized.nbytes = sizeof q_values; /* 8 elements x 1 byte */
  quantized.quant.count = 1;          /* per-tensor (quant.axis is -1 from qd_tensor_init) */
  quantized.quant.scales = &scale;
  quantized.quant.offsets = &offset;
  quantized.quant.bitwidth = 8;
  quantized.quant.convention = QD_QUANT_QNN_OFFSET;

  qd_profile_event convolution;
  qd_profile_event_init(&convolution); /* handles NULL: parsed from the name, here {1} */
  convolution.name = "aten_convolution_default__debugID_1";
  convolution.start = 1000;
  convolution.end = 1850;
  convolution.unit = "cycles";
  convolution.instruction_id = 0; /* the runtime's first instruction; -1 when unknown */

  bad = failed(qd_begin_run(session, "sample_0"), "qd_begin_run") ||
        failed(qd_capture_tensor(session, &activation), "qd_capture_tensor (activation)") ||
        failed(qd_capture_tensor(session, &quantized), "qd_capture_tensor (quantized)") ||
        failed(qd_record_profile(session, &convolution), "qd_record_profile") ||
        failed(qd_record_memory_checkpoint(session, "DSP:after_execute", 1048576u),
               "qd_record_memory_checkpoint") ||
        failed(qd_end_run(session), "qd_end_run");

  /* Close even after a failure: it ends an open run, drains the queue, syncs the file and frees
   * the session in every case. */
  if (failed(qd_session_close(session), "qd_session_close")) bad = 1;
  if (bad) return 2;
  printf("wrote %s\n", argv[1]);
  return 0;
}
