// The capture hook through its public C ABI, as a runtime uses it.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <set>
#include <thread>

#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "../common/temp_dir.h"
#include "qnn_debug/capture.h"
#include "qnn_debug/capture.hpp"
#include "qnn_debug/etdump/store_reader.h"

using qd::testing::IsOk;

// status_from_c.c: qd_status_name called from C with any int.
extern "C" const char* qd_test_status_name_of_int(int value);

// Allocation failure on demand, to show that out of memory on the caller's thread becomes a
// status: while armed, the calling thread's Nth operator new from now throws std::bad_alloc.
// Other threads (the session's pipeline) allocate normally. Replacing the global operators is the
// only way to reach the allocations inside the library; unarmed, they are malloc and free. Every
// non-aligned form is replaced, so that no runtime's own (a sanitizer's) pairs with ours.
namespace {
thread_local long t_allocations_before_failure = -1;  // -1: never fail
// The same for the session's own threads together (every thread but the one that armed it), to
// show that out of memory in the capture pipeline is a status too.
thread_local bool t_arms_pipeline_failures = false;
std::atomic<long> g_pipeline_allocations_before_failure{-1};

void* allocate(std::size_t size) {
  if (t_allocations_before_failure >= 0 && t_allocations_before_failure-- == 0) {
    throw std::bad_alloc();
  }
  if (!t_arms_pipeline_failures && g_pipeline_allocations_before_failure.load() >= 0 &&
      g_pipeline_allocations_before_failure.fetch_sub(1) == 0) {
    throw std::bad_alloc();
  }
  if (void* block = std::malloc(size == 0 ? 1 : size)) return block;
  throw std::bad_alloc();
}

void* allocate_or_null(std::size_t size) noexcept {
  try {
    return allocate(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

// Not inlined: GCC would see free() of what it takes for operator new's memory, and warn.
[[gnu::noinline]] void release(void* block) noexcept { std::free(block); }
}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return allocate_or_null(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return allocate_or_null(size);
}
void operator delete(void* block) noexcept { release(block); }
void operator delete[](void* block) noexcept { release(block); }
void operator delete(void* block, std::size_t) noexcept { release(block); }
void operator delete[](void* block, std::size_t) noexcept { release(block); }
void operator delete(void* block, const std::nothrow_t&) noexcept { release(block); }
void operator delete[](void* block, const std::nothrow_t&) noexcept { release(block); }

namespace qd {
namespace {

using testing::TempDir;

// The options point into `path`, so it must outlive them: no temporaries.
qd_session_options options_for(std::string&&) = delete;
qd_session_options options_for(const std::string& path) {
  qd_session_options options;
  qd_session_options_init(&options);
  options.path = path.c_str();
  return options;
}

qd_session* open_session(const qd_session_options& options) {
  qd_session* session = nullptr;
  const qd_status status = qd_session_open(&options, &session);
  EXPECT_EQ(status, QD_OK) << qd_last_error();
  return session;
}

// A float32 tensor over caller-owned storage.
struct FloatTensor {
  std::string name;
  std::vector<uint64_t> dims;
  std::vector<float> values;
  qd_tensor view() const {
    qd_tensor t;
    qd_tensor_init(&t);
    t.name = name.c_str();
    t.dtype = 562;
    t.rank = static_cast<uint32_t>(dims.size());
    t.dims = dims.data();
    t.data = values.data();
    t.nbytes = values.size() * sizeof(float);
    t.output_index = -1;
    t.quant.axis = -1;
    return t;
  }
};

FloatTensor float_tensor(std::string name, size_t count, float base) {
  FloatTensor t{std::move(name), {count}, std::vector<float>(count)};
  for (size_t i = 0; i < count; ++i) t.values[i] = base + static_cast<float>(i);
  return t;
}

qd_status capture(qd_session* session, const FloatTensor& tensor) {
  const qd_tensor view = tensor.view();
  return qd_capture_tensor(session, &view);
}

std::unique_ptr<StoreReader> read_back(const std::string& path) {
  auto reader = StoreReader::open(path);
  EXPECT_THAT(reader, IsOk());
  return reader.is_ok() ? std::move(reader).value() : nullptr;
}

std::vector<float> floats_of(const StoreReader& reader, const TensorEntry& t) {
  auto bytes = reader.read_tensor(t);
  EXPECT_THAT(bytes, IsOk());
  std::vector<float> values(bytes->size() / 4);
  std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

TEST(CaptureApi, CopiesBytesBeforeReturningAndParsesNames) {
  TempDir dir;
  const std::string path = dir.file("s.h5");
  qd_session* s = open_session(options_for(path));
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(qd_begin_run(s, "sample"), QD_OK);
  FloatTensor t = float_tensor("conv_relu__debugID_4_debugID_5", 256, 1.0f);
  ASSERT_EQ(capture(s, t), QD_OK);
  std::fill(t.values.begin(), t.values.end(), -7.0f);  // the runtime reuses its buffer at once
  FloatTensor plain = float_tensor("no handles here", 4, 0.0f);
  ASSERT_EQ(capture(s, plain), QD_OK);
  ASSERT_EQ(qd_end_run(s), QD_OK);
  ASSERT_EQ(qd_session_close(s), QD_OK);

  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), 2u);
  const TensorEntry fused = testing::all_tensors(*reader)[0];
  EXPECT_EQ(fused.handles, (std::vector<int64_t>{4, 5}));
  EXPECT_TRUE(fused.name_matched);
  EXPECT_EQ(floats_of(*reader, fused), float_tensor("", 256, 1.0f).values);
  EXPECT_DOUBLE_EQ(fused.stats.max, 256.0);
  const TensorEntry unmatched = testing::all_tensors(*reader)[1];
  EXPECT_EQ(unmatched.name, "no handles here");  // kept, flagged
  EXPECT_FALSE(unmatched.name_matched);
  EXPECT_TRUE(unmatched.handles.empty());
}

TEST(CaptureApi, ExecutorchPresetParsesRolesAndOutputIndex) {
  TempDir dir;
  const std::string path = dir.file("et.h5");
  qd_session_options options = options_for(path);
  options.naming = "executorch-qnn";
  qd_session* s = open_session(options);
  ASSERT_NE(s, nullptr);
  for (const char* name : {"input_1_tokens@0", "aten_relu_default@1", "output_aten_add_tensor@0"}) {
    FloatTensor t = float_tensor(name, 2, 0.0f);
    ASSERT_EQ(capture(s, t), QD_OK);
  }
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), 3u);
  EXPECT_EQ(testing::all_tensors(*reader)[0].role, TensorRole::kGraphInput);
  EXPECT_EQ(testing::all_tensors(*reader)[1].output_index, 1);
  EXPECT_EQ(testing::all_tensors(*reader)[2].role, TensorRole::kGraphOutput);
  EXPECT_TRUE(reader->runs().at(0).complete);  // close ends the implicit run
}

TEST(CaptureApi, RejectsBadArgumentsWithCodeAndMessage) {
  TempDir dir;
  const std::string path = dir.file("bad.h5");
  qd_session* s = open_session(options_for(path));
  ASSERT_NE(s, nullptr);
  FloatTensor good = float_tensor("t", 4, 0.0f);
  const double one = 1.0;
  const uint8_t bad_order[1] = {3};
  const uint64_t huge_dims[2] = {uint64_t{1} << 62, 8};

  struct Case {
    const char* what;
    std::function<void(qd_tensor&)> mutate;
    const char* message_fragment;
  };
  static const int32_t offset = 0;
  // Turns the 4-float tensor into a per-tensor quantized INT_32 one (the same 16 bytes).
  auto quantize_int32 = [](const double* scale) {
    return [scale](qd_tensor& t) {
      t.dtype = 50;
      t.quant.count = 1;
      t.quant.scales = scale;
      t.quant.offsets = &offset;
    };
  };
  const std::vector<Case> cases = {
      {"null name", [](qd_tensor& t) { t.name = nullptr; }, "name is NULL"},
      {"short nbytes", [](qd_tensor& t) { t.nbytes = 15; }, "15 bytes given"},
      {"unknown dtype", [](qd_tensor& t) { t.dtype = 12345; }, "unknown dtype"},
      {"null data", [](qd_tensor& t) { t.data = nullptr; }, "data is NULL"},
      {"null dims", [](qd_tensor& t) { t.dims = nullptr; }, "dims is NULL"},
      {"rank 9", [](qd_tensor& t) { t.rank = 9; }, "rank 9"},
      {"rank 0 with 16 bytes", [](qd_tensor& t) { t.rank = 0; }, "16 bytes given"},
      {"overflowing dims",
       [&](qd_tensor& t) {
         t.rank = 2;
         t.dims = huge_dims;
       },
       "overflow"},
      {"bad axis order", [&](qd_tensor& t) { t.axis_order = bad_order; }, "permutation"},
      {"null scales", [](qd_tensor& t) { t.quant.count = 2; }, "NULL"},
      {"quantized float",
       [&](qd_tensor& t) {
         quantize_int32 (&one)(t);
         t.dtype = 562;
       },
       "not an integer type"},
      {"bitwidth wider than dtype",
       [&](qd_tensor& t) {
         quantize_int32 (&one)(t);
         t.quant.bitwidth = 33;
       },
       "exceeds the 32 bits"},
      {"axis out of range",
       [&](qd_tensor& t) {
         quantize_int32 (&one)(t);
         t.quant.axis = 5;
       },
       "axis"},
  };
  for (const Case& c : cases) {
    qd_tensor t = good.view();
    c.mutate(t);
    EXPECT_EQ(qd_capture_tensor(s, &t), QD_ERR_INVALID_ARGUMENT) << c.what;
    EXPECT_NE(std::string(qd_last_error()).find(c.message_fragment), std::string::npos)
        << c.what << ": " << qd_last_error();
  }
  EXPECT_EQ(qd_capture_tensor(s, nullptr), QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qd_capture_tensor(nullptr, nullptr), QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qd_end_run(s), QD_ERR_STATE);
  ASSERT_EQ(qd_begin_run(s, "a"), QD_OK);
  EXPECT_EQ(qd_begin_run(s, "b"), QD_ERR_STATE);
  EXPECT_EQ(qd_record_profile_event(s, nullptr, nullptr, 0, 0, 0, nullptr),
            QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qd_record_profile(s, nullptr), QD_ERR_INVALID_ARGUMENT);
  qd_profile_event event;
  qd_profile_event_init(&event);
  event.name = "op";
  event.struct_size -= 8;  // a caller built against another layout
  EXPECT_EQ(qd_record_profile(s, &event), QD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qd_last_error()).find("call qd_profile_event_init"), std::string::npos)
      << qd_last_error();
  qd_profile_event_init(&event);
  event.name = "op";
  event.instruction_id = -2;
  EXPECT_EQ(qd_record_profile(s, &event), QD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qd_last_error()).find("instruction_id is -2"), std::string::npos)
      << qd_last_error();
  EXPECT_EQ(qd_record_memory_checkpoint(s, nullptr, 0), QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qd_add_graph_node(s, nullptr), QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qd_record_shape_guess(s, nullptr), QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qd_session_close(s), QD_OK);
  EXPECT_EQ(qd_session_close(nullptr), QD_ERR_INVALID_ARGUMENT);
}

// A runtime's encoding is evidence: scales that cannot be right are stored as given (the encoding
// lint flags them and diff fails their group), never refused and lost.
TEST(CaptureApi, ImplausibleScalesAreKeptAsGiven) {
  TempDir dir;
  const std::string path = dir.file("scales.h5");
  qd_session* s = open_session(options_for(path));
  const int32_t raw[4] = {1, 2, 3, 4};
  const uint64_t dims[1] = {4};
  const int32_t offset = 0;
  const double scales[4] = {std::nan(""), 0.0, -1.0, 1e36};
  for (const double& scale : scales) {
    qd_tensor t;
    qd_tensor_init(&t);
    t.name = "bias";
    t.dtype = 818;  // SFIXED_POINT_32
    t.rank = 1;
    t.dims = dims;
    t.data = raw;
    t.nbytes = sizeof raw;
    t.quant.count = 1;
    t.quant.scales = &scale;
    t.quant.offsets = &offset;
    ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  }
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), 4u);
  EXPECT_TRUE(std::isnan(testing::all_tensors(*reader)[0].quant.scales.at(0)));
  EXPECT_EQ(testing::all_tensors(*reader)[1].quant.scales.at(0), 0.0);
  EXPECT_EQ(testing::all_tensors(*reader)[2].quant.scales.at(0), -1.0);
  EXPECT_EQ(testing::all_tensors(*reader)[3].quant.scales.at(0), 1e36);
}

TEST(CaptureApi, InitializedTensorTakesItsOutputIndexFromTheName) {
  TempDir dir;
  const std::string path = dir.file("init.h5");
  qd_session* s = open_session(options_for(path));
  const float value = 2.0f;
  const uint64_t dims[1] = {1};
  qd_tensor t;
  qd_tensor_init(&t);
  t.name = "split__debugID_9@1";
  t.rank = 1;
  t.dims = dims;
  t.data = &value;
  t.nbytes = sizeof value;
  ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(testing::all_tensors(*reader).at(0).output_index, 1);
  EXPECT_FALSE(testing::all_tensors(*reader).at(0).quant.is_quantized());
}

TEST(CaptureApi, ExplicitHandlesReplaceTheParsedOnes) {
  TempDir dir;
  const std::string path = dir.file("handles.h5");
  qd_session* s = open_session(options_for(path));  // debug-id preset
  const float value = 2.0f;
  const uint64_t dims[1] = {1};
  const int64_t handles[2] = {7, 3};
  qd_tensor t;
  qd_tensor_init(&t);
  t.name = "fused__debugID_1@2";  // the name's own handle 1 is ignored, its index is not
  t.rank = 1;
  t.dims = dims;
  t.data = &value;
  t.nbytes = sizeof value;
  t.handles = handles;
  t.handle_count = 2;
  ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  t.name = "plain_name";  // matches no preset rule, yet its (zero) handles are known
  t.handle_count = 0;
  ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  t.name = "parsed__debugID_5";
  t.handles = nullptr;  // back to parsing
  ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  const auto& tensors = testing::all_tensors(*reader);
  ASSERT_EQ(tensors.size(), 3u);
  EXPECT_EQ(tensors[0].handles, (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(tensors[0].output_index, 2);
  EXPECT_TRUE(tensors[0].name_matched);
  EXPECT_TRUE(tensors[1].handles.empty());
  EXPECT_TRUE(tensors[1].name_matched);
  EXPECT_EQ(tensors[2].handles, (std::vector<int64_t>{5}));
}

TEST(CaptureApi, TensorOfAnotherAbiVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.file("abi.h5");
  qd_session* s = open_session(options_for(path));
  const float value = 2.0f;
  qd_tensor t;
  qd_tensor_init(&t);
  t.name = "x";
  t.data = &value;
  t.nbytes = sizeof value;
  t.struct_size = 0;  // zero-filled, as a caller that skipped qd_tensor_init would pass
  EXPECT_EQ(qd_capture_tensor(s, &t), QD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qd_last_error()).find("qd_tensor_init"), std::string::npos)
      << qd_last_error();
  t.struct_size = sizeof(qd_tensor) - 8;
  EXPECT_EQ(qd_capture_tensor(s, &t), QD_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(qd_session_close(s), QD_OK);
}

TEST(CaptureApi, StatedRolesReplaceTheNamesAndAbi2StructsStillWork) {
  TempDir dir;
  const std::string path = dir.file("roles.h5");
  qd_session_options options = options_for(path);
  options.naming = "executorch-qnn";
  qd_session* s = open_session(options);
  const float value = 2.0f;
  qd_tensor t;
  qd_tensor_init(&t);
  EXPECT_EQ(t.role, QD_ROLE_FROM_NAME);
  t.name = "aten_relu_default@0";  // an intermediate by its name
  t.data = &value;
  t.nbytes = sizeof value;
  t.role = QD_ROLE_GRAPH_OUTPUT;
  ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  t.name = "output_aten_add_tensor@0";  // a graph output by its name
  t.role = QD_ROLE_INTERMEDIATE;
  ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  t.role = QD_ROLE_FROM_NAME;
  ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  t.role = 7;
  EXPECT_EQ(qd_capture_tensor(s, &t), QD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qd_last_error()).find("unknown role 7"), std::string::npos);
  // A struct of ABI 2's size ends before `role`: whatever lies there is not read.
  t.struct_size = offsetof(qd_tensor, role);
  ASSERT_EQ(qd_capture_tensor(s, &t), QD_OK) << qd_last_error();
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  const auto& tensors = testing::all_tensors(*reader);
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_EQ(tensors[0].role, TensorRole::kGraphOutput);
  EXPECT_EQ(tensors[1].role, TensorRole::kIntermediate);
  EXPECT_EQ(tensors[2].role, TensorRole::kGraphOutput);
  EXPECT_EQ(tensors[3].role, TensorRole::kGraphOutput);
}

TEST(CaptureApi, ScalarsAndEmptyTensorsAreValid) {
  TempDir dir;
  const std::string path = dir.file("scalar.h5");
  qd_session* s = open_session(options_for(path));
  const float one = 1.0f;
  qd_tensor scalar;
  qd_tensor_init(&scalar);
  scalar.name = "scalar";
  scalar.data = &one;
  scalar.nbytes = 4;
  ASSERT_EQ(qd_capture_tensor(s, &scalar), QD_OK) << qd_last_error();
  const uint64_t zero_dim[2] = {0, 3};
  qd_tensor empty = scalar;
  empty.name = "empty";
  empty.rank = 2;
  empty.dims = zero_dim;
  empty.data = nullptr;
  empty.nbytes = 0;
  ASSERT_EQ(qd_capture_tensor(s, &empty), QD_OK) << qd_last_error();
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), 2u);
  EXPECT_TRUE(testing::all_tensors(*reader)[0].dims.empty());
  EXPECT_EQ(floats_of(*reader, testing::all_tensors(*reader)[0]), std::vector<float>{1.0f});
  EXPECT_EQ(testing::all_tensors(*reader)[1].data_nbytes, 0u);
}

TEST(CaptureApi, OpenReportsBadOptions) {
  TempDir dir;
  qd_session* s = reinterpret_cast<qd_session*>(0x1);
  const std::string path = dir.file("x.h5");
  const std::string unwritable = "/nonexistent-dir/x.h5";
  qd_session_options options = options_for(path);
  options.naming = "no-such-preset";
  EXPECT_EQ(qd_session_open(&options, &s), QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  options.naming = "custom";
  options.custom_pattern = "(unclosed";
  EXPECT_EQ(qd_session_open(&options, &s), QD_ERR_INVALID_ARGUMENT);
  options = options_for(path);
  options.handle_map_path = "/nonexistent/map.json";
  EXPECT_EQ(qd_session_open(&options, &s), QD_ERR_NOT_FOUND);
  EXPECT_NE(std::string(qd_last_error()).find("/nonexistent/map.json"), std::string::npos);
  options = options_for(unwritable);
  EXPECT_EQ(qd_session_open(&options, &s), QD_ERR_IO);
  EXPECT_NE(std::string(qd_last_error()).find("/nonexistent-dir/x.h5"), std::string::npos);
  options = options_for(path);
  options.struct_size = 3;
  EXPECT_EQ(qd_session_open(&options, &s), QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qd_session_open(nullptr, &s), QD_ERR_INVALID_ARGUMENT);
  options = options_for(path);
  options.queue_budget_bytes = 1000;
  EXPECT_EQ(qd_session_open(&options, &s), QD_ERR_INVALID_ARGUMENT);
}

TEST(CaptureApi, CustomPatternAndHandleMap) {
  TempDir dir;
  const std::string map = dir.file("map.json");
  std::ofstream(map) << R"({"aten_relu_default": [7, 8]})";
  const std::string custom_path = dir.file("c.h5"), map_path = dir.file("m.h5");
  qd_session_options options = options_for(custom_path);
  options.naming = "custom";
  options.custom_pattern = R"(#(?P<handle>\d+))";
  qd_session* s = open_session(options);
  FloatTensor t = float_tensor("op#12#13", 1, 0.0f);
  ASSERT_EQ(capture(s, t), QD_OK);
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(custom_path);
  EXPECT_EQ(testing::all_tensors(*reader).at(0).handles, (std::vector<int64_t>{12, 13}));

  options = options_for(map_path);
  options.naming = "executorch-qnn";
  options.handle_map_path = map.c_str();
  s = open_session(options);
  FloatTensor relu = float_tensor("aten_relu_default@0", 1, 0.0f);
  ASSERT_EQ(capture(s, relu), QD_OK);
  ASSERT_EQ(qd_session_close(s), QD_OK);
  reader = read_back(map_path);
  EXPECT_EQ(testing::all_tensors(*reader).at(0).handles, (std::vector<int64_t>{7, 8}));
}

std::string thread_tag(int thread) { return std::string(1, 't') + char('0' + thread); }

TEST(CaptureApi, FourThreadsCaptureWithoutLossOrMixUp) {
  TempDir dir;
  const std::string path = dir.file("threads.h5");
  qd_session_options options = options_for(path);
  options.queue_budget_bytes = 2 << 20;  // small: producers really wait on the writer
  qd_session* s = open_session(options);
  constexpr int kThreads = 4, kPerThread = 500;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&, thread] {
      for (int i = 0; i < kPerThread; ++i) {
        const int id = thread * kPerThread + i;
        const std::string name = thread_tag(thread) + "__debugID_" + std::to_string(id);
        FloatTensor t = float_tensor(name, 64 + static_cast<size_t>(i % 7) * 1000, float(id));
        if (capture(s, t) != QD_OK) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  qd_session_stats stats{};
  ASSERT_EQ(qd_flush(s), QD_OK);
  ASSERT_EQ(qd_get_stats(s, &stats), QD_OK);
  EXPECT_EQ(stats.captured, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(stats.written, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(stats.dropped, 0u);
  EXPECT_LE(stats.queue_peak_bytes, uint64_t{2 << 20});
  ASSERT_EQ(qd_session_close(s), QD_OK);

  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), size_t{kThreads * kPerThread});
  std::vector<int> seen(kThreads * kPerThread, 0);
  std::vector<int> last_in_thread(kThreads, -1);
  for (const TensorEntry& t : testing::all_tensors(*reader)) {
    ASSERT_EQ(t.handles.size(), 1u);
    const int id = static_cast<int>(t.handles[0]);
    const int thread = id / kPerThread, i = id % kPerThread;
    ++seen[id];
    EXPECT_EQ(t.name.substr(0, 2), thread_tag(thread));
    EXPECT_GT(i, last_in_thread[thread]);  // each thread's order is kept
    last_in_thread[thread] = i;
    const std::vector<float> values = floats_of(*reader, t);
    ASSERT_EQ(values.size(), 64 + static_cast<size_t>(i % 7) * 1000);
    EXPECT_EQ(values.front(), float(id));  // bytes not mixed between threads
    EXPECT_EQ(values.back(), float(id) + float(values.size() - 1));
  }
  for (int count : seen) EXPECT_EQ(count, 1);
}

TEST(CaptureApi, DropPolicyCountsWhatItDrops) {
  TempDir dir;
  const std::string path = dir.file("drop.h5");
  qd_session_options options = options_for(path);
  options.queue_budget_bytes = 1 << 20;
  options.full_queue_policy = QD_FULL_QUEUE_DROP;
  qd_session* s = open_session(options);
  ASSERT_EQ(qd_begin_run(s, "burst"), QD_OK);
  FloatTensor t = float_tensor("burst__debugID_1", (512 << 10) / 4, 0.0f);  // 512 KiB each
  int accepted = 0, dropped = 0;
  for (int i = 0; i < 200; ++i) {
    const qd_status status = capture(s, t);
    ASSERT_TRUE(status == QD_OK || status == QD_DROPPED) << qd_status_name(status);
    (status == QD_OK ? accepted : dropped)++;
  }
  FloatTensor oversize = float_tensor("oversize", (2 << 20) / 4, 0.0f);  // larger than the queue
  EXPECT_EQ(capture(s, oversize), QD_DROPPED);
  ++dropped;
  EXPECT_GT(dropped, 1) << "a 1 MiB queue cannot absorb 100 MiB at once";
  ASSERT_EQ(qd_end_run(s), QD_OK);
  qd_session_stats stats{};
  ASSERT_EQ(qd_flush(s), QD_OK);
  ASSERT_EQ(qd_get_stats(s, &stats), QD_OK);
  EXPECT_EQ(stats.dropped, uint64_t(dropped));
  EXPECT_EQ(stats.captured, uint64_t(accepted));
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(testing::all_tensors(*reader).size(), size_t(accepted));
  EXPECT_EQ(reader->runs().at(0).dropped_count, uint64_t(dropped));
}

TEST(CaptureApi, DropOutsideARunDoesNotBreakTheNextRun) {
  TempDir dir;
  const std::string path = dir.file("early_drop.h5");
  qd_session_options options = options_for(path);
  options.queue_budget_bytes = 1 << 20;
  options.full_queue_policy = QD_FULL_QUEUE_DROP;
  qd_session* s = open_session(options);
  FloatTensor oversize = float_tensor("oversize", (2 << 20) / 4, 0.0f);
  EXPECT_EQ(capture(s, oversize), QD_DROPPED);
  ASSERT_EQ(qd_begin_run(s, "after"), QD_OK);
  FloatTensor small = float_tensor("small", 4, 0.0f);
  EXPECT_EQ(capture(s, small), QD_OK) << qd_last_error();
  ASSERT_EQ(qd_end_run(s), QD_OK);
  qd_session_stats stats{};
  ASSERT_EQ(qd_get_stats(s, &stats), QD_OK);
  EXPECT_EQ(stats.dropped, 1u);
  ASSERT_EQ(qd_session_close(s), QD_OK) << qd_last_error();
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(reader->runs().size(), 1u);
  EXPECT_TRUE(reader->runs()[0].complete);
  EXPECT_EQ(reader->runs()[0].dropped_count, 0u);
}

TEST(CaptureApi, BlockPolicyLosesNothingEvenForTensorsLargerThanTheQueue) {
  TempDir dir;
  const std::string path = dir.file("block.h5");
  qd_session_options options = options_for(path);
  options.queue_budget_bytes = 1 << 20;
  qd_session* s = open_session(options);
  for (int i = 0; i < 30; ++i) {
    FloatTensor t = float_tensor("b__debugID_" + std::to_string(i), (700 << 10) / 4, float(i));
    ASSERT_EQ(capture(s, t), QD_OK);
  }
  FloatTensor oversize = float_tensor("oversize", (3 << 20) / 4, 5.0f);
  ASSERT_EQ(capture(s, oversize), QD_OK) << qd_last_error();
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), 31u);
  EXPECT_EQ(floats_of(*reader, testing::all_tensors(*reader)[30]), oversize.values);
  EXPECT_EQ(floats_of(*reader, testing::all_tensors(*reader)[29])[0], 29.0f);
}

TEST(CaptureApi, HundredThousandTinyTensorsThroughTheHook) {
  TempDir dir;
  const std::string path = dir.file("tiny.h5");
  qd_session* s = open_session(options_for(path));
  FloatTensor t = float_tensor("", 16, 0.0f);
  for (int i = 0; i < 100'000; ++i) {
    t.name = "op__debugID_" + std::to_string(i);
    t.values[0] = float(i);
    ASSERT_EQ(capture(s, t), QD_OK);
  }
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  const std::vector<TensorEntry> tensors = testing::all_tensors(*reader);
  ASSERT_EQ(tensors.size(), 100'000u);
  EXPECT_EQ(tensors[99'999].handles, std::vector<int64_t>{99'999});
  EXPECT_EQ(floats_of(*reader, tensors[12'345])[0], 12345.0f);
}

TEST(CaptureApi, ProfileMemoryAndGraphReachTheStore) {
  TempDir dir;
  const std::string path = dir.file("events.h5");
  auto session = CaptureSession::open(options_for(path));
  ASSERT_THAT(session, IsOk());
  ASSERT_THAT(session->memory_checkpoint("DSP:before_context_created", 1024), IsOk());
  ASSERT_THAT(session->begin_run("r"), IsOk());
  ASSERT_THAT(session->profile_event("aten_add_tensor_0_debugID_12", 10, 30, "cycles"), IsOk());
  ASSERT_THAT(session->profile_event("OPERATOR_CALL", {12}, 30, 35, "ticks", 4), IsOk());
  qd_profile_event from_c;  // the C struct: handles from the name, unit "ns" by default
  qd_profile_event_init(&from_c);
  from_c.name = "aten_relu_default_0_debugID_13";
  from_c.start = 35;
  from_c.end = 36;
  from_c.instruction_id = 5;
  ASSERT_EQ(qd_record_profile(session->get(), &from_c), QD_OK) << qd_last_error();
  const char* inputs[] = {"a", "b"};
  const char* outputs[] = {"c"};
  const int64_t handle = 12;
  ASSERT_THAT(session->graph_node({"add", "Add", inputs, 2, outputs, 1, &handle, 1}), IsOk());
  ASSERT_THAT(session->shape_guess("c"), IsOk());
  ASSERT_THAT(session->end_run(), IsOk());
  ASSERT_THAT(session->close(), IsOk());
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->shape_guesses(), std::vector<std::string>{"c"});
  const auto& events = reader->profile_events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].handles, std::vector<int64_t>{12});  // parsed from name
  EXPECT_EQ(events[0].instruction_id, -1);
  EXPECT_EQ(events[1].handles, std::vector<int64_t>{12});
  EXPECT_EQ(events[1].instruction_id, 4);
  EXPECT_EQ(events[2].handles, std::vector<int64_t>{13});
  EXPECT_EQ(events[2].unit, "ns");
  EXPECT_EQ(events[2].instruction_id, 5);
  EXPECT_EQ(reader->memory_checkpoints().at(0).run_id, kNoRun);
  EXPECT_EQ(reader->graph().at(0).inputs, (std::vector<std::string>{"a", "b"}));
}

TEST(CaptureApi, HostileNamesNeverCrashAndAreKeptVerbatim) {
  TempDir dir;
  const std::string path = dir.file("hostile.h5");
  qd_session* s = open_session(options_for(path));
  const std::vector<std::string> names = {"", std::string(1 << 20, 'a') + "__debugID_1",
                                          "\xc3\x28\xff__debugID_2", "a/b/../c__debugID_3",
                                          "<script>alert(1)</script>__debugID_4"};
  for (const std::string& name : names) {
    FloatTensor t{name, {1}, {1.0f}};
    ASSERT_EQ(capture(s, t), QD_OK);
  }
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  const std::vector<TensorEntry> tensors = testing::all_tensors(*reader);
  ASSERT_EQ(tensors.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(tensors[i].name, names[i]);
    if (i > 0) {
      EXPECT_EQ(tensors[i].handles, std::vector<int64_t>{int64_t(i)});
    }
  }
}

// A full disk, simulated with a file-size limit in a child process: the hook reports QD_ERR_IO
// and never crashes; what was flushed before stays readable.
TEST(CaptureApi, WriteErrorIsReportedAndFlushedDataSurvives) {
  TempDir dir;
  const std::string path = dir.file("full.h5");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead of killing us
    qd_session* s = nullptr;
    qd_session_options options = options_for(path);
    if (qd_session_open(&options, &s) != QD_OK) _exit(10);
    FloatTensor first = float_tensor("first__debugID_1", 1000, 1.0f);
    if (capture(s, first) != QD_OK || qd_flush(s) != QD_OK) _exit(11);
    rlimit limit{8 << 20, 8 << 20};
    setrlimit(RLIMIT_FSIZE, &limit);
    FloatTensor big = float_tensor("big__debugID_2", (4 << 20) / 4, 0.0f);
    qd_status status = QD_OK;
    for (int i = 0; i < 10 && status == QD_OK; ++i) {
      status = capture(s, big);
      if (status == QD_OK) status = qd_flush(s);
    }
    if (status != QD_ERR_IO) _exit(12);
    if (std::string(qd_last_error()).find(path) == std::string::npos) _exit(13);
    qd_session_close(s);
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "child crashed, signal " << WTERMSIG(wstatus);
  ASSERT_EQ(WEXITSTATUS(wstatus), 0);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_GE(testing::all_tensors(*reader).size(), 1u);
  EXPECT_EQ(testing::all_tensors(*reader)[0].name, "first__debugID_1");
  EXPECT_EQ(floats_of(*reader, testing::all_tensors(*reader)[0]),
            float_tensor("", 1000, 1.0f).values);
  for (const TensorEntry& t : testing::all_tensors(*reader))
    EXPECT_THAT(reader->verify_tensor(t), IsOk());
}

// ---- handles: closed, never opened, closed while in use ----

bool says_not_open() {
  return std::string(qd_last_error()).find("is not open") != std::string::npos;
}

// The C names, spelled from error_code_name (base/status.h): stable, part of the ABI.
TEST(CaptureApi, EveryStatusHasItsName) {
  const std::pair<qd_status, const char*> names[] = {
      {QD_OK, "QD_OK"},
      {QD_ERR_INVALID_ARGUMENT, "QD_ERR_INVALID_ARGUMENT"},
      {QD_ERR_IO, "QD_ERR_IO"},
      {QD_ERR_CORRUPT, "QD_ERR_CORRUPT"},
      {QD_ERR_NOT_FOUND, "QD_ERR_NOT_FOUND"},
      {QD_ERR_STATE, "QD_ERR_STATE"},
      {QD_DROPPED, "QD_DROPPED"},
      {QD_ERR_NO_MEMORY, "QD_ERR_NO_MEMORY"},
      {QD_ERR_INTERNAL, "QD_ERR_INTERNAL"}};
  for (const auto& [status, name] : names) EXPECT_STREQ(qd_status_name(status), name);
  // Values no enumerator has, passed from C (status_from_c.c): in C++ forming them is undefined.
  for (const int unknown : {9, 16, -1, 1 << 30}) {
    EXPECT_STREQ(qd_test_status_name_of_int(unknown), "QD_UNKNOWN_STATUS") << unknown;
  }
}

TEST(CaptureApi, DoubleCloseIsRefused) {
  TempDir dir;
  const std::string path = dir.file("twice.h5");
  qd_session* s = open_session(options_for(path));
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(qd_session_close(s), QD_OK);
  EXPECT_EQ(qd_session_close(s), QD_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(says_not_open()) << qd_last_error();
  EXPECT_EQ(qd_session_close(s), QD_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(read_back(path));
}

// Every function taking a session, with `handle`: each must refuse it as not open.
void expect_every_call_refused(qd_session* handle, const std::string& which) {
  FloatTensor tensor = float_tensor("t__debugID_1", 4, 0.0f);
  const qd_tensor view = tensor.view();
  const char* inputs[] = {"a"};
  const qd_graph_node node{"n", "Add", inputs, 1, nullptr, 0, nullptr, 0};
  qd_session_stats stats{};
  qd_profile_event event;
  qd_profile_event_init(&event);
  event.name = "e";
  const std::vector<std::pair<const char*, std::function<qd_status()>>> calls = {
      {"qd_begin_run", [&] { return qd_begin_run(handle, "r"); }},
      {"qd_record_profile", [&] { return qd_record_profile(handle, &event); }},
      {"qd_end_run", [&] { return qd_end_run(handle); }},
      {"qd_capture_tensor", [&] { return qd_capture_tensor(handle, &view); }},
      {"qd_record_profile_event",
       [&] { return qd_record_profile_event(handle, "e", nullptr, 0, 0, 1, "ns"); }},
      {"qd_record_memory_checkpoint", [&] { return qd_record_memory_checkpoint(handle, "m", 1); }},
      {"qd_add_graph_node", [&] { return qd_add_graph_node(handle, &node); }},
      {"qd_record_shape_guess", [&] { return qd_record_shape_guess(handle, "t"); }},
      {"qd_flush", [&] { return qd_flush(handle); }},
      {"qd_get_stats", [&] { return qd_get_stats(handle, &stats); }},
      {"qd_session_close", [&] { return qd_session_close(handle); }},
  };
  for (const auto& [name, call] : calls) {
    EXPECT_EQ(call(), QD_ERR_INVALID_ARGUMENT) << name << " with a " << which << " handle";
    EXPECT_TRUE(says_not_open()) << name << ": " << qd_last_error();
  }
}

TEST(CaptureApi, EveryCallWithAClosedOrUnknownHandleIsRefused) {
  TempDir dir;
  const std::string path = dir.file("closed.h5");
  qd_session* s = open_session(options_for(path));
  ASSERT_NE(s, nullptr);
  FloatTensor t = float_tensor("kept__debugID_1", 4, 1.0f);
  ASSERT_EQ(capture(s, t), QD_OK);
  ASSERT_EQ(qd_session_close(s), QD_OK);
  expect_every_call_refused(s, "closed");
  int not_a_session = 0;  // an address, as a caller's stray pointer would be
  expect_every_call_refused(reinterpret_cast<qd_session*>(&not_a_session), "never opened");

  // Handles are not reused: a later session gets another one, and the old one stays closed.
  const std::string next_path = dir.file("next.h5");
  qd_session* next = open_session(options_for(next_path));
  ASSERT_NE(next, nullptr);
  EXPECT_NE(next, s);
  EXPECT_EQ(qd_flush(s), QD_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qd_flush(next), QD_OK);
  ASSERT_EQ(qd_session_close(next), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), 1u);
  EXPECT_TRUE(reader->runs().at(0).complete);
}

// What one capturing thread saw while the session was closed under it.
struct RacingThread {
  std::vector<int> accepted;  // ids whose capture returned QD_OK
  int unexpected = 0;         // statuses other than QD_OK and "not open"
};

// Captures until the session refuses it as closed; `thread` 0 also flushes and reads the stats.
// Any other failure is counted and the thread carries on, as a runtime's loop would.
void capture_until_closed(qd_session* s, int thread, RacingThread* out) {
  auto stop_on = [&](qd_status status) {
    if (status == QD_OK) return false;
    if (status == QD_ERR_INVALID_ARGUMENT && says_not_open()) return true;
    return ++out->unexpected >= 100;
  };
  for (int i = 0;; ++i) {
    const int id = thread * 1'000'000 + i;
    // Mostly small, some of 64 and 256 KiB: four threads fill the 1 MiB queue and block on it.
    static constexpr size_t kCounts[] = {16, 16 << 10, 16, 64 << 10, 100};
    FloatTensor t = float_tensor(thread_tag(thread) + "__debugID_" + std::to_string(id),
                                 kCounts[i % 5], float(id));
    const qd_status status = capture(s, t);
    if (status == QD_OK) out->accepted.push_back(id);
    if (stop_on(status)) return;
    if (thread == 0 && i % 8 == 7) {
      qd_session_stats stats{};
      if (stop_on(qd_flush(s)) || stop_on(qd_get_stats(s, &stats))) return;
    }
  }
}

// The store a racing close wrote holds exactly the tensors whose capture returned QD_OK.
void expect_store_holds(const std::string& path, const std::vector<RacingThread>& threads) {
  std::set<int64_t> accepted;
  for (const RacingThread& thread : threads) {
    accepted.insert(thread.accepted.begin(), thread.accepted.end());
  }
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  std::set<int64_t> stored;
  for (const TensorEntry& t : testing::all_tensors(*reader)) {
    ASSERT_EQ(t.handles.size(), 1u);
    stored.insert(t.handles[0]);
    EXPECT_EQ(t.stats.min, double(t.handles[0])) << t.name;  // its own bytes
  }
  EXPECT_EQ(stored, accepted);
  EXPECT_EQ(testing::all_tensors(*reader).size(), accepted.size());
}

TEST(CaptureApi, CloseRacingWithFourCapturingThreadsKeepsEveryAcceptedTensor) {
  TempDir dir;
  constexpr int kThreads = 4, kRounds = 50;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = dir.file("race" + std::to_string(round) + ".h5");
    qd_session_options options = options_for(path);
    options.queue_budget_bytes = 1 << 20;
    options.durable = 0;  // fsync is not what this tests
    qd_session* s = open_session(options);
    ASSERT_NE(s, nullptr);
    std::vector<RacingThread> seen(kThreads);
    std::atomic<int> started{0};
    std::vector<std::thread> threads;
    for (int thread = 0; thread < kThreads; ++thread) {
      threads.emplace_back([&, thread] {
        ++started;
        capture_until_closed(s, thread, &seen[thread]);
      });
    }
    while (started.load() < kThreads) std::this_thread::yield();
    // From at once to 2 ms in: the close lands in different phases of the captures.
    std::this_thread::sleep_for(std::chrono::microseconds(round * 40));
    EXPECT_EQ(qd_session_close(s), QD_OK) << qd_last_error();
    for (auto& t : threads) t.join();
    for (const RacingThread& thread : seen) EXPECT_EQ(thread.unexpected, 0) << "round " << round;
    expect_store_holds(path, seen);
    if (HasFailure()) break;
  }
}

// ---- counts are checked before the arrays behind them are read ----

TEST(CaptureApi, CountsAreCheckedBeforeTheArraysBehindThemAreRead) {
  TempDir dir;
  const std::string path = dir.file("counts.h5");
  qd_session* s = open_session(options_for(path));
  ASSERT_NE(s, nullptr);
  const int8_t raw[4] = {1, 2, 3, 4};
  const uint64_t dims[1] = {4};
  const double one_scale[1] = {0.5};  // one-element arrays: a larger count would read past them
  const int32_t one_offset[1] = {0};
  const int64_t one_handle[1] = {7};
  auto quantized = [&](uint32_t count, int32_t axis) {
    qd_tensor t;
    qd_tensor_init(&t);
    t.name = "q__debugID_1";
    t.dtype = 776;  // SFIXED_POINT_8
    t.rank = 1;
    t.dims = dims;
    t.data = raw;
    t.nbytes = sizeof raw;
    t.quant.count = count;
    t.quant.axis = axis;
    t.quant.scales = one_scale;
    t.quant.offsets = one_offset;
    return t;
  };
  struct Case {
    const char* what;
    qd_tensor tensor;
    std::vector<std::string> fragments;
  };
  qd_tensor many_handles = quantized(1, -1);
  many_handles.handles = one_handle;
  many_handles.handle_count = QD_MAX_LIST_COUNT + 1;
  qd_tensor all_handles = many_handles;
  all_handles.handle_count = UINT32_MAX;
  const std::vector<Case> cases = {
      {"per-tensor count 2^20", quantized(1 << 20, -1), {"'q__debugID_1'", "count 1048576"}},
      {"per-axis count 2^20", quantized(1 << 20, 0), {"count 1048576", "dims[0] = 4"}},
      {"per-axis count on a missing axis", quantized(4, 1), {"axis 1 is outside rank 1"}},
      {"handle_count 2^16 + 1", many_handles, {"'q__debugID_1'", "handle_count 65537 exceeds"}},
      {"handle_count 2^32 - 1", all_handles, {"handle_count 4294967295 exceeds 65536"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(qd_capture_tensor(s, &c.tensor), QD_ERR_INVALID_ARGUMENT) << c.what;
    for (const std::string& fragment : c.fragments) {
      EXPECT_NE(std::string(qd_last_error()).find(fragment), std::string::npos)
          << c.what << ": " << qd_last_error();
    }
  }
  // The bounds themselves are fine: per-axis with dims[axis] entries, QD_MAX_LIST_COUNT handles.
  const double scales[4] = {0.5, 0.25, 0.125, 1.0};
  const int32_t offsets[4] = {0, 1, 2, 3};
  qd_tensor per_axis = quantized(4, 0);
  per_axis.quant.scales = scales;
  per_axis.quant.offsets = offsets;
  EXPECT_EQ(qd_capture_tensor(s, &per_axis), QD_OK) << qd_last_error();
  const std::vector<int64_t> handles(QD_MAX_LIST_COUNT, 3);
  qd_tensor most_handles = quantized(1, -1);
  most_handles.handles = handles.data();
  most_handles.handle_count = QD_MAX_LIST_COUNT;
  EXPECT_EQ(qd_capture_tensor(s, &most_handles), QD_OK) << qd_last_error();
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), 2u);
  EXPECT_EQ(testing::all_tensors(*reader)[0].quant.scales, std::vector<double>(scales, scales + 4));
  EXPECT_EQ(testing::all_tensors(*reader)[1].handles.size(), size_t{QD_MAX_LIST_COUNT});
}

TEST(CaptureApi, EventAndGraphNodeListCountsAreBounded) {
  TempDir dir;
  const std::string path = dir.file("lists.h5");
  qd_session* s = open_session(options_for(path));
  ASSERT_NE(s, nullptr);
  const int64_t one_handle[1] = {7};
  const char* one_name[1] = {"a"};
  constexpr uint32_t kTooMany = QD_MAX_LIST_COUNT + 1;
  EXPECT_EQ(qd_record_profile_event(s, "op", one_handle, kTooMany, 0, 1, "ns"),
            QD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qd_last_error()).find("profile event 'op': handle_count 65537 exceeds"),
            std::string::npos)
      << qd_last_error();
  const qd_graph_node good{"n", "Add", one_name, 1, one_name, 1, one_handle, 1};
  const std::vector<std::pair<const char*, std::function<void(qd_graph_node&)>>> cases = {
      {"input_count", [&](qd_graph_node& n) { n.input_count = kTooMany; }},
      {"output_count", [&](qd_graph_node& n) { n.output_count = UINT32_MAX; }},
      {"handle_count", [&](qd_graph_node& n) { n.handle_count = kTooMany; }},
  };
  for (const auto& [count_name, mutate] : cases) {
    qd_graph_node node = good;
    mutate(node);
    EXPECT_EQ(qd_add_graph_node(s, &node), QD_ERR_INVALID_ARGUMENT) << count_name;
    const std::string message = qd_last_error();
    EXPECT_NE(message.find("graph node 'n': " + std::string(count_name)), std::string::npos)
        << message;
    EXPECT_NE(message.find("exceeds 65536"), std::string::npos) << message;
  }
  EXPECT_EQ(qd_record_profile_event(s, "op", one_handle, 1, 0, 1, "ns"), QD_OK);
  EXPECT_EQ(qd_add_graph_node(s, &good), QD_OK);
  ASSERT_EQ(qd_session_close(s), QD_OK);
  auto reader = read_back(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->profile_events().size(), 1u);
  EXPECT_EQ(reader->graph().size(), 1u);
}

// ---- out of memory is a status ----

// Arms the allocation failure: the calling thread's `n`th allocation from now on throws.
// "" if the store at `path` holds exactly `tensors`, with their handles and values, and one
// profile event; otherwise what differs.
std::string everything_is_stored(const std::string& path, const std::vector<FloatTensor>& tensors) {
  auto reader = StoreReader::open(path);
  if (!reader.is_ok()) return "the store does not open: " + reader.status().message();
  const auto& stored = testing::all_tensors(**reader);
  if (stored.size() != tensors.size()) return std::to_string(stored.size()) + " tensors stored";
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (stored[i].name != tensors[i].name ||
        stored[i].handles != std::vector<int64_t>{int64_t(i)}) {
      return "tensor " + std::to_string(i) + " is stored as " + stored[i].name;
    }
    auto bytes = reader.value()->read_tensor(stored[i]);
    if (!bytes.is_ok() || bytes->size() != tensors[i].values.size() * sizeof(float) ||
        std::memcmp(bytes->data(), tensors[i].values.data(), bytes->size()) != 0) {
      return "tensor " + std::to_string(i) + " reads back different bytes";
    }
  }
  if (reader.value()->profile_events().size() != 1) return "the profile event is missing";
  return "";
}

// Out of memory in the pipeline threads: the `n`th allocation of the session's threads (the
// name parser, the digest, the store writer, ...) fails. Every call returns QD_OK or
// QD_ERR_NO_MEMORY, nothing terminates the process, and close returns; when every call says
// QD_OK, the store holds everything (a library may absorb a failed allocation, as RE2's DFA
// does, but nothing may be lost silently). Before, the threads allocated their batch lists
// outside any try: std::terminate in the host.
std::string sweep_pipeline_allocation_failures(const qd_session_options& options) {
  t_arms_pipeline_failures = true;
  const auto allowed = [](qd_status status) {
    return status == QD_OK || status == QD_ERR_NO_MEMORY;
  };
  for (long n = 0;; ++n) {
    const std::string at = "pipeline allocation " + std::to_string(n) + " failing: ";
    qd_session* s = nullptr;
    if (qd_session_open(&options, &s) != QD_OK) return at + "open failed: " + qd_last_error();
    g_pipeline_allocations_before_failure = n;
    std::vector<qd_status> results;
    std::vector<FloatTensor> tensors;
    for (int i = 0; i < 6; ++i) {
      tensors.push_back(float_tensor("conv__debugID_" + std::to_string(i), 256, float(i)));
      results.push_back(capture(s, tensors.back()));
      if (i == 2) results.push_back(qd_flush(s));
    }
    results.push_back(qd_record_profile_event(s, "conv__debugID_3", nullptr, 0, 0, 1, "cycles"));
    results.push_back(qd_flush(s));
    const qd_status closed = qd_session_close(s);
    const bool failed = g_pipeline_allocations_before_failure.exchange(-1) < 0;
    for (qd_status status : results) {
      if (!allowed(status)) return at + qd_status_name(status) + ": " + qd_last_error();
    }
    if (!allowed(closed)) return at + "close: " + qd_status_name(closed) + ": " + qd_last_error();
    const bool reported = closed == QD_ERR_NO_MEMORY ||
                          std::count(results.begin(), results.end(), QD_ERR_NO_MEMORY) > 0;
    if (!reported) {
      const std::string lost = everything_is_stored(options.path, tensors);
      if (!lost.empty()) return at + "every call said QD_OK, but " + lost;
    }
    if (!failed) return n > 0 ? "" : "the pipeline never allocated";
  }
}
void fail_allocation(long n) { t_allocations_before_failure = n; }
// Disarms it; true if the failure happened.
bool allocation_failed() {
  const bool failed = t_allocations_before_failure < 0;
  t_allocations_before_failure = -1;
  return failed;
}

// One call under test. `call` gets an open session whose implicit run holds one tensor (for
// qd_session_open: the place to put the new one); `closes`: the call closes it.
struct AllocationCase {
  const char* name;
  std::function<qd_status(qd_session**)> call;
  bool closes;
};

std::vector<AllocationCase> allocation_cases(const qd_session_options& options) {
  static const FloatTensor tensor = float_tensor("a_long_tensor_name_to_copy__debugID_9", 64, 0);
  static const char* inputs[] = {"input_tensor_with_a_long_name"};
  static const int64_t handles[] = {1, 2};
  static const qd_graph_node node{
      "graph_node_with_a_long_name", "Add", inputs, 1, inputs, 1, handles, 2};
  return {
      {"qd_session_open", [&](qd_session** s) { return qd_session_open(&options, s); }, false},
      {"qd_begin_run", [](qd_session** s) { return qd_begin_run(*s, "a_long_run_name_to_copy"); },
       false},
      {"qd_end_run", [](qd_session** s) { return qd_end_run(*s); }, false},
      {"qd_capture_tensor", [](qd_session** s) { return capture(*s, tensor); }, false},
      {"qd_record_profile_event",
       [](qd_session** s) {
         return qd_record_profile_event(*s, "a_long_event_name_to_copy__debugID_3", nullptr, 0, 0,
                                        1, "cycles");
       },
       false},
      {"qd_record_memory_checkpoint",
       [](qd_session** s) { return qd_record_memory_checkpoint(*s, "a_long_label_to_copy", 1); },
       false},
      {"qd_add_graph_node", [](qd_session** s) { return qd_add_graph_node(*s, &node); }, false},
      {"qd_flush", [](qd_session** s) { return qd_flush(*s); }, false},
      {"qd_get_stats",
       [](qd_session** s) {
         qd_session_stats stats{};
         return qd_get_stats(*s, &stats);
       },
       false},
      {"qd_session_close", [](qd_session** s) { return qd_session_close(*s); }, true},
  };
}

// Fails the call's 1st, 2nd, ... allocation in turn until it runs without reaching the failure.
// Returns a message for the first misbehaviour, "" if none. Runs in a child process: a crash or
// an escaped exception (std::terminate) must not take the test runner with it.
std::string sweep_allocation_failures(const qd_session_options& options, const AllocationCase& c) {
  auto problem = [&](long n, const std::string& what) {
    return std::string(c.name) + ", allocation " + std::to_string(n) + " failing: " + what;
  };
  for (long n = 0;; ++n) {
    qd_session* s = nullptr;
    const bool opens = std::string(c.name) == "qd_session_open";
    if (!opens && qd_session_open(&options, &s) != QD_OK) return problem(n, "open failed");
    FloatTensor first = float_tensor("first__debugID_1", 16, 0.0f);
    if (!opens && capture(s, first) != QD_OK) return problem(n, "capture failed");
    fail_allocation(n);
    const qd_status status = c.call(&s);
    const bool failed = allocation_failed();
    if (status != QD_OK && !(failed && status == QD_ERR_NO_MEMORY)) {
      return problem(n, std::string(qd_status_name(status)) + ": " + qd_last_error());
    }
    // Whatever failed, the session is still whole: it closes cleanly.
    if (!c.closes && s != nullptr && qd_session_close(s) != QD_OK) {
      return problem(n, std::string("close afterwards: ") + qd_last_error());
    }
    if (!failed) return "";
  }
}

// Runs `sweep` in a child process (a crash or an escaped exception, std::terminate, must not take
// the test runner with it); the child prints the problem `sweep` returns, "" for none.
void expect_sweep_passes_in_a_child(const std::function<std::string()>& sweep) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string problem = sweep();
    if (!problem.empty()) std::fprintf(stderr, "%s\n", problem.c_str());
    _exit(problem.empty() ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "child crashed, signal " << WTERMSIG(wstatus);
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "see the child's message above";
}

TEST(CaptureApi, OutOfMemoryOnTheCallingThreadIsAStatusNeverACrash) {
  TempDir dir;
  const std::string path = dir.file("oom.h5");
  qd_session_options options = options_for(path);
  options.durable = 0;
  expect_sweep_passes_in_a_child([&] {
    for (const AllocationCase& c : allocation_cases(options)) {
      std::string problem = sweep_allocation_failures(options, c);
      if (!problem.empty()) return problem;
    }
    return std::string();
  });
}

TEST(CaptureApi, OutOfMemoryInThePipelineThreadsIsAStatusNeverACrash) {
  TempDir dir;
  const std::string path = dir.file("oom_pipeline.h5");
  qd_session_options options = options_for(path);
  options.durable = 0;
  expect_sweep_passes_in_a_child([&] { return sweep_pipeline_allocation_failures(options); });
}

}  // namespace
}  // namespace qd
