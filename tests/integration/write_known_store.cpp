// qd_write_known_store OUT.h5
//
// Writes a small store through the public C API only (qnn_debug/capture.h), with every value
// given by a formula, so that tests/python/read_store.py can recompute all of it from
// docs/store-format.md with h5py + numpy alone. Prints nothing on success; on failure prints the
// qd_last_error() message to stderr and exits 2.
//
// Session: naming preset "debug-id" (the default), producer "qd_write_known_store",
// backend "cpu-test", soc "SM8650", model "known-store-v1".
//
// Order of calls (this is also the store's order):
//   memory checkpoint "DSP:before_context_created", 123456789 bytes  (outside any run: kNoRun)
//   graph node "conv_relu"  op "Conv2d+ReLU" inputs {"input_0", "weights/conv<1>"}
//                           outputs {"conv_relu__debugID_4_debugID_5"} handles {4, 5}
//   graph node "loss"       op "Mean" inputs {} outputs {"loss_scalar"} handles {}
//   begin run "run_a"  (run 0): tensors seq 0..9, then
//       profile event "conv_relu__debugID_4_debugID_5" handles NULL (parsed: {4, 5}),
//       start 1000, end 2500, unit "ns" (the default), instruction id 2
//   end run
//   begin run "run_b"  (run 1): tensors seq 10..11
//   end run
//   profile event "graph_execute" handles {7, 8000000000}, start -5, end 40, unit "cycles"
//       (outside any run: kNoRun)
//   close
//
// Tensors. i is the flat row-major index in the STORED layout; r is the run id (0 or 1).
// Unless stated: output index -1 (none), not quantized, no axis order.
//  seq 0  "conv_relu__debugID_4_debugID_5"  FLOAT_32 (562), stored NHWC dims {1,3,4,2},
//         axis_order {0,3,1,2}. The value at REFERENCE (NCHW) coordinate (n,c,h,w), i.e. at
//         stored coordinate (n,h,w,c), is 100*c + 10*h + w - 20.25 + 1000*r. Handles {4,5}.
//  seq 1  "aten_add_tensor_0_debugID_12@1"  SFIXED_POINT_8 (776), dims {2,3,5}:
//         q[i] = (37*i mod 256) - 128. Per-tensor, QNN convention, scale 0.05, offset -3,
//         bitwidth 8: real = (q - 3) * 0.05. Handles {12}, output index 1 (from "@1").
//  seq 2  "relu__debugID_1"  UFIXED_POINT_8 (1032), dims {4,4}: q[i] = (17*i + 5) mod 256.
//         Per-tensor, zero-point convention, scale 0.1, zero point 128, bitwidth 8:
//         real = (q - 128) * 0.1. Handles {1}.
//  seq 3  "linear__debugID_20@0"  SFIXED_POINT_16 (790), dims {2,3,4}:
//         q[i] = (5003*i mod 65536) - 32768. Per-axis on axis 1 (channel c = (i / 4) mod 3),
//         QNN convention, scales {0.001, 0.002, 0.004}, offsets {0, -10, 25}, bitwidth 16:
//         real = (q + offset[c]) * scale[c]. Handles {20}; output index 2, given explicitly
//         (it overrides the "@0" in the name).
//  seq 4  "layer_norm__debugID_30"  FLOAT_16 (534), dims {3,5}: v[i] = (i - 7) * 0.375, except
//         v[3] = +inf (0x7C00), v[5] = NaN (bit pattern 0x7E00), v[11] = -inf (0xFC00).
//         Handles {30}.
//  seq 5  "bf16_out__debugID_31"  BFLOAT_16 (550), dims {7}: v[i] = (2*i - 5) * 2^(10*i)
//         (exact in bfloat16; the bits are the upper half of the float32). Handles {31}.
//  seq 6  "w4__debugID_40"  UFIXED_POINT_4 (1028), dims {3,3}, 9 elements in 5 bytes:
//         q[i] = (5*i + 3) mod 16, two per byte, element 2k in the low nibble of byte k,
//         element 2k+1 in its high nibble; the unused high nibble of byte 4 is 0xA (padding).
//         Per-tensor, QNN convention, scale 0.5, offset -8, bitwidth 4: real = (q - 8) * 0.5.
//         Handles {40}.
//  seq 7  "index_tensor__debugID_50"  INT_64 (100), dims {6}: v[i] = (i - 2) * 3000000000 + i.
//         Handles {50}.
//  seq 8  "mask__debugID_51"  BOOL_8 (1288), dims {2,5}: v[i] = 1 if i mod 3 == 0 else 0.
//         Handles {51}.
//  seq 9  "loss_scalar"  FLOAT_32, rank 0 (a scalar, one element): 2.71875. No handles, so the
//         name matched nothing (name_matched 0).
//  seq 10 as seq 0, with r = 1 (run "run_b").
//  seq 11 "<script>alert('\u00fc')</script>/x__debugID_60" (UTF-8, a '/' and markup) FLOAT_32,
//         dims {2}: {-1.5, 1.5}. Handles {60}.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "qnn_debug/capture.h"

namespace {

// Raised (as a plain return code) when a call fails; the message is printed once.
struct Failure {
  qd_status status;
};

void check(qd_status status) {
  if (status != QD_OK) throw Failure{status};
}

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// IEEE binary16 bits of a float that binary16 represents exactly (zero, normals, infinities).
uint16_t half_bits(float value) {
  if (std::isinf(value)) return value > 0 ? 0x7C00 : 0xFC00;
  const uint32_t bits = float_bits(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if ((bits & 0x7FFFFFFFu) == 0) return sign;
  const int exponent = static_cast<int>((bits >> 23) & 0xFFu) - 127 + 15;
  const uint32_t mantissa = bits & 0x7FFFFFu;
  if (exponent < 1 || exponent > 30 || (mantissa & 0x1FFFu) != 0) {
    std::fprintf(stderr, "qd_write_known_store: %g is not exact in float16\n", value);
    throw Failure{QD_ERR_INTERNAL};
  }
  return static_cast<uint16_t>(sign | (exponent << 10) | (mantissa >> 13));
}

uint16_t bfloat16_bits(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0xFFFFu) != 0) {
    std::fprintf(stderr, "qd_write_known_store: %g is not exact in bfloat16\n", value);
    throw Failure{QD_ERR_INTERNAL};
  }
  return static_cast<uint16_t>(bits >> 16);
}

template <typename T>
qd_tensor make_tensor(const char* name, uint32_t dtype, const std::vector<uint64_t>& dims,
                      const std::vector<T>& values) {
  qd_tensor tensor;
  qd_tensor_init(&tensor);
  tensor.name = name;
  tensor.dtype = dtype;
  tensor.rank = static_cast<uint32_t>(dims.size());
  tensor.dims = dims.empty() ? nullptr : dims.data();
  tensor.data = values.data();
  tensor.nbytes = values.size() * sizeof(T);
  tensor.output_index = -1;
  tensor.quant.axis = -1;
  return tensor;
}

qd_quantization quantization(const std::vector<double>& scales, const std::vector<int32_t>& offsets,
                             int32_t axis, uint8_t bitwidth, qd_quant_convention convention) {
  qd_quantization quant{};
  quant.count = static_cast<uint32_t>(scales.size());
  quant.axis = axis;
  quant.scales = scales.data();
  quant.offsets = offsets.data();
  quant.bitwidth = bitwidth;
  quant.convention = static_cast<uint8_t>(convention);
  return quant;
}

// seq 0 and seq 10: NHWC storage of the NCHW formula 100c + 10h + w - 20.25 + 1000r.
void capture_conv(qd_session* session, uint32_t run) {
  static const std::vector<uint64_t> dims = {1, 3, 4, 2};  // N, H, W, C
  static const uint8_t nhwc_to_nchw[] = {0, 3, 1, 2};
  std::vector<float> values;
  for (int h = 0; h < 3; ++h) {
    for (int w = 0; w < 4; ++w) {
      for (int c = 0; c < 2; ++c) {
        values.push_back(static_cast<float>(100.0 * c + 10.0 * h + w - 20.25 + 1000.0 * run));
      }
    }
  }
  qd_tensor tensor = make_tensor("conv_relu__debugID_4_debugID_5", 562, dims, values);
  tensor.axis_order = nhwc_to_nchw;
  check(qd_capture_tensor(session, &tensor));
}

void write_run_a(qd_session* session) {
  capture_conv(session, 0);

  {  // seq 1: int8, per-tensor, QNN offset convention
    const std::vector<uint64_t> dims = {2, 3, 5};
    std::vector<int8_t> q;
    for (int i = 0; i < 30; ++i) q.push_back(static_cast<int8_t>((37 * i) % 256 - 128));
    const std::vector<double> scales = {0.05};
    const std::vector<int32_t> offsets = {-3};
    qd_tensor tensor = make_tensor("aten_add_tensor_0_debugID_12@1", 776, dims, q);
    tensor.quant = quantization(scales, offsets, -1, 8, QD_QUANT_QNN_OFFSET);
    check(qd_capture_tensor(session, &tensor));
  }
  {  // seq 2: uint8, per-tensor, zero-point convention
    const std::vector<uint64_t> dims = {4, 4};
    std::vector<uint8_t> q;
    for (int i = 0; i < 16; ++i) q.push_back(static_cast<uint8_t>((17 * i + 5) % 256));
    const std::vector<double> scales = {0.1};
    const std::vector<int32_t> zero_points = {128};
    qd_tensor tensor = make_tensor("relu__debugID_1", 1032, dims, q);
    tensor.quant = quantization(scales, zero_points, -1, 8, QD_QUANT_ZERO_POINT);
    check(qd_capture_tensor(session, &tensor));
  }
  {  // seq 3: int16, per-axis on axis 1, explicit output index
    const std::vector<uint64_t> dims = {2, 3, 4};
    std::vector<int16_t> q;
    for (int i = 0; i < 24; ++i) q.push_back(static_cast<int16_t>((5003 * i) % 65536 - 32768));
    const std::vector<double> scales = {0.001, 0.002, 0.004};
    const std::vector<int32_t> offsets = {0, -10, 25};
    qd_tensor tensor = make_tensor("linear__debugID_20@0", 790, dims, q);
    tensor.quant = quantization(scales, offsets, 1, 16, QD_QUANT_QNN_OFFSET);
    tensor.output_index = 2;
    check(qd_capture_tensor(session, &tensor));
  }
  {  // seq 4: float16 with +inf, NaN, -inf
    const std::vector<uint64_t> dims = {3, 5};
    std::vector<uint16_t> v;
    for (int i = 0; i < 15; ++i) v.push_back(half_bits(static_cast<float>((i - 7) * 0.375)));
    v[3] = 0x7C00;
    v[5] = 0x7E00;
    v[11] = 0xFC00;
    const qd_tensor tensor = make_tensor("layer_norm__debugID_30", 534, dims, v);
    check(qd_capture_tensor(session, &tensor));
  }
  {  // seq 5: bfloat16
    const std::vector<uint64_t> dims = {7};
    std::vector<uint16_t> v;
    for (int i = 0; i < 7; ++i) {
      v.push_back(bfloat16_bits(std::ldexp(static_cast<float>(2 * i - 5), 10 * i)));
    }
    const qd_tensor tensor = make_tensor("bf16_out__debugID_31", 550, dims, v);
    check(qd_capture_tensor(session, &tensor));
  }
  {  // seq 6: 4-bit unsigned, odd element count, low nibble first, padding nibble 0xA
    const std::vector<uint64_t> dims = {3, 3};
    std::vector<uint8_t> packed(5, 0);
    for (int i = 0; i < 9; ++i) {
      const auto q = static_cast<uint8_t>((5 * i + 3) % 16);
      packed[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? q : q << 4);
    }
    packed[4] |= 0xA0;
    const std::vector<double> scales = {0.5};
    const std::vector<int32_t> offsets = {-8};
    qd_tensor tensor = make_tensor("w4__debugID_40", 1028, dims, packed);
    tensor.quant = quantization(scales, offsets, -1, 4, QD_QUANT_QNN_OFFSET);
    check(qd_capture_tensor(session, &tensor));
  }
  {  // seq 7: int64 beyond the int32 range
    const std::vector<uint64_t> dims = {6};
    std::vector<int64_t> v;
    for (int64_t i = 0; i < 6; ++i) v.push_back((i - 2) * 3000000000LL + i);
    const qd_tensor tensor = make_tensor("index_tensor__debugID_50", 100, dims, v);
    check(qd_capture_tensor(session, &tensor));
  }
  {  // seq 8: bool
    const std::vector<uint64_t> dims = {2, 5};
    std::vector<uint8_t> v;
    for (int i = 0; i < 10; ++i) v.push_back(i % 3 == 0 ? 1 : 0);
    const qd_tensor tensor = make_tensor("mask__debugID_51", 1288, dims, v);
    check(qd_capture_tensor(session, &tensor));
  }
  {  // seq 9: a scalar, and a name without handles
    const std::vector<uint64_t> dims;
    const std::vector<float> v = {2.71875f};
    const qd_tensor tensor = make_tensor("loss_scalar", 562, dims, v);
    check(qd_capture_tensor(session, &tensor));
  }
}

void write_run_b(qd_session* session) {
  capture_conv(session, 1);
  const std::vector<uint64_t> dims = {2};
  const std::vector<float> v = {-1.5f, 1.5f};
  const qd_tensor tensor =
      make_tensor("<script>alert('\xc3\xbc')</script>/x__debugID_60", 562, dims, v);
  check(qd_capture_tensor(session, &tensor));
}

int write_store(const char* path) {
  qd_session_options options;
  qd_session_options_init(&options);
  options.path = path;
  options.producer = "qd_write_known_store";
  options.backend = "cpu-test";
  options.soc = "SM8650";
  options.model = "known-store-v1";
  qd_session* session = nullptr;
  try {
    check(qd_session_open(&options, &session));

    check(qd_record_memory_checkpoint(session, "DSP:before_context_created", 123456789));

    const char* conv_inputs[] = {"input_0", "weights/conv<1>"};
    const char* conv_outputs[] = {"conv_relu__debugID_4_debugID_5"};
    const int64_t conv_handles[] = {4, 5};
    qd_graph_node conv{};
    conv.name = "conv_relu";
    conv.op_type = "Conv2d+ReLU";
    conv.inputs = conv_inputs;
    conv.input_count = 2;
    conv.outputs = conv_outputs;
    conv.output_count = 1;
    conv.handles = conv_handles;
    conv.handle_count = 2;
    check(qd_add_graph_node(session, &conv));

    const char* loss_outputs[] = {"loss_scalar"};
    qd_graph_node loss{};
    loss.name = "loss";
    loss.op_type = "Mean";
    loss.outputs = loss_outputs;
    loss.output_count = 1;
    check(qd_add_graph_node(session, &loss));

    check(qd_begin_run(session, "run_a"));
    write_run_a(session);
    qd_profile_event conv_relu;
    qd_profile_event_init(&conv_relu);
    conv_relu.name = "conv_relu__debugID_4_debugID_5";
    conv_relu.start = 1000;
    conv_relu.end = 2500;
    conv_relu.instruction_id = 2;
    check(qd_record_profile(session, &conv_relu));
    check(qd_end_run(session));

    check(qd_begin_run(session, "run_b"));
    write_run_b(session);
    check(qd_end_run(session));

    const int64_t execute_handles[] = {7, 8000000000LL};
    check(qd_record_profile_event(session, "graph_execute", execute_handles, 2, -5, 40, "cycles"));

    qd_session* closing = session;
    session = nullptr;
    check(qd_session_close(closing));
  } catch (const Failure& failure) {
    std::fprintf(stderr, "qd_write_known_store: %s: %s\n", qd_status_name(failure.status),
                 qd_last_error());
    if (session != nullptr) (void)qd_session_close(session);
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: qd_write_known_store OUT.h5\n");
    return 2;
  }
  return write_store(argv[1]);
}
