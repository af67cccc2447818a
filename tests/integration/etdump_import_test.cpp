// `qnn-debug capture etdump` (importers/): ETDumps as ExecuTorch writes them, built by the
// fixtures' FlatBuffer writer and by flatc from the project's schema, the real ETDump of
// ExecuTorch's devtools tutorial, every corruption class, and the fixture model's device run
// imported and diffed against its reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "../common/cli_runner.h"
#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "etdump_import.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/fixtures/etdump_writer.h"
#include "qnn_debug/fixtures/model.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using fixtures::EtdumpEventOut;
using fixtures::EtdumpRunOut;
using fixtures::EtdumpTensorOut;
using fixtures::EtdumpValueOut;
using importers::EtdumpImportOptions;
using importers::EtdumpImportSummary;
using nlohmann::json;
using testing::CliResult;
using testing::run_cli;
using testing::slurp;
using testing::TempDir;
using Bytes = std::vector<uint8_t>;
using testing::write_bytes;
using testing::write_text;
using Kind = EtdumpEventOut::Kind;

// ExecuTorch ScalarType codes.
constexpr int8_t kByte = 0, kChar = 1, kShort = 2, kInt = 3, kHalf = 5, kFloat = 6, kUInt16 = 27;
constexpr int32_t kDelegateCall = 1;  // the DELEGATE_CALL's instruction id

Bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  Bytes bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
  return bytes;
}

// One tensor as ExecuTorch's QNN delegate logs it: its QNN name, raw storage, QNN dims.
EtdumpEventOut qnn_tensor(const std::string& name, int8_t scalar_type, std::vector<int64_t> sizes,
                          int64_t offset) {
  EtdumpEventOut e;
  e.kind = Kind::kDebug;
  e.delegate_debug_id_str = name;
  e.instruction_id = kDelegateCall;
  e.value = EtdumpValueOut{5, {EtdumpTensorOut{scalar_type, std::move(sizes), {}, offset}}};
  return e;
}

EtdumpEventOut qnn_profile(const std::string& identifier, uint64_t value) {
  EtdumpEventOut e;
  e.kind = Kind::kProfile;
  e.delegate_debug_id_str = identifier;
  e.instruction_id = kDelegateCall;
  e.end_time = value;  // QNN reports a value: start 0, end the count
  return e;
}

// The ETRecord of a QNN-delegated method: its delegate map gives QNN names their handles.
void write_etrecord(const std::string& path, const json& delegate_map,
                    const json& debug_handle_map = json::object()) {
  const json delegates = {{"forward",
                           {{std::to_string(kDelegateCall),
                             {{"name", "QnnBackend"}, {"delegate_map", delegate_map}}}}}};
  ASSERT_TRUE(fixtures::write_stored_zip(
                  path, {{"ETRECORD_V0", ""},
                         {"debug_handle_map", json({{"forward", debug_handle_map}}).dump()},
                         {"delegate_map", delegates.dump()}})
                  .is_ok());
}

json scale_offset(double scale, int64_t offset) {
  return {
      {"definition", 1}, {"encoding", 0}, {"scale_offset", {{"scale", scale}, {"offset", offset}}}};
}

json net_tensor(uint32_t data_type, std::vector<uint64_t> dims, json quant) {
  return {
      {"id", 0}, {"type", 3}, {"data_type", data_type}, {"dims", dims}, {"quant_params", quant}};
}

std::unique_ptr<StoreReader> open_store(const std::string& path) {
  auto reader = StoreReader::open(path);
  EXPECT_THAT(reader, IsOk());
  return reader.is_ok() ? std::move(reader).value() : nullptr;
}

Result<EtdumpImportSummary> import(const EtdumpImportOptions& options) {
  return importers::import_etdump(options);
}

// ---------------------------------------------------------------------------------------------
// The real ETDump: written by the ExecuTorch runtime, profiling only.

TEST(RealEtdump, CapturesTwoRunsAndThirtyOneProfileEvents) {
  const std::string real = std::string(QD_REALDATA_DIR) + "/executorch/etdump.etdp";
  if (!std::filesystem::exists(real)) GTEST_SKIP() << real << " is not on this machine";
  TempDir dir;
  EtdumpImportOptions options;
  options.etdump_path = real;  // no debug buffer: the dump has no debug events
  options.output_path = dir.file("real.h5");
  const auto summary = import(options);
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->runs, 2u);
  EXPECT_EQ(summary->profile_events, 31u);
  EXPECT_EQ(summary->tensors, 0u);
  auto store = open_store(options.output_path);
  ASSERT_TRUE(store);
  ASSERT_EQ(store->runs().size(), 2u);
  EXPECT_EQ(store->runs()[0].name, "Default");
  EXPECT_EQ(store->runs()[1].name, "Execute");
  EXPECT_TRUE(store->runs()[0].complete && store->runs()[1].complete);
  const auto& events = store->profile_events();
  ASSERT_EQ(events.size(), 31u);
  EXPECT_EQ(events[0].name, "Method::init");
  EXPECT_EQ(events[0].run_id, 0u);
  // Values decoded independently (../shared/realdata/executorch/SOURCES.md).
  EXPECT_EQ(events[2].name, "native_call_convolution.out");
  EXPECT_EQ(events[2].run_id, 1u);
  EXPECT_EQ(events[2].start, 426786);
  EXPECT_EQ(events[2].end, 971569);
  EXPECT_EQ(events[2].unit, "ticks");
  EXPECT_EQ(events[30].name, "Method::execute");
  const CliResult listing = run_cli("inspect " + options.output_path);
  EXPECT_EQ(listing.exit_code, 0);
  EXPECT_NE(listing.out.find("duration per op"), std::string::npos) << listing.out;
  EXPECT_NE(listing.out.find("native_call_convolution.out"), std::string::npos);
  EXPECT_NE(listing.out.find("Method::execute"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The writer and the reader, each checked against flatc.

// Runs flatc, returning its exit status.
int flatc(const std::string& args) {
  return std::system((std::string(QD_FLATC) + " " + args + " >/dev/null 2>&1").c_str());
}

TEST(EtdumpFlatc, FlatcDecodesWhatTheFixtureWriterWrites) {
  TempDir dir;
  EtdumpRunOut run{"Execute", 3, {"planned"}, {}};
  run.events.push_back(qnn_tensor("aten_relu_default@0", kChar, {1, 2, 2, 3}, 128));
  run.events.push_back(qnn_profile("aten_relu_default:OpId_7 (cycles)", 1234));
  EtdumpEventOut allocation;
  allocation.kind = Kind::kAllocation;
  allocation.allocation_size = 4096;
  run.events.push_back(allocation);
  const std::string path = dir.file("w.etdp");
  write_bytes(path, fixtures::write_etdump({run}, 7));
  ASSERT_EQ(flatc("--json --raw-binary --size-prefixed --strict-json --defaults-json -o " +
                  dir.path().string() + " " + QD_ETDUMP_SCHEMA + " -- " + path),
            0);
  const json decoded = json::parse(slurp(dir.file("w.json")));
  EXPECT_EQ(decoded["version"], 7);
  const json& r = decoded["run_data"][0];
  EXPECT_EQ(r["name"], "Execute");
  EXPECT_EQ(r["bundled_input_index"], 3);
  EXPECT_EQ(r["allocators"][0]["name"], "planned");
  const json& debug = r["events"][0]["debug_event"];
  EXPECT_EQ(debug["delegate_debug_id_str"], "aten_relu_default@0");
  EXPECT_EQ(debug["delegate_debug_id_int"], -1);
  EXPECT_EQ(debug["instruction_id"], kDelegateCall);
  EXPECT_EQ(debug["debug_entry"]["val"], "Tensor");
  EXPECT_EQ(debug["debug_entry"]["tensor"]["scalar_type"], kChar);
  EXPECT_EQ(debug["debug_entry"]["tensor"]["sizes"], json::array({1, 2, 2, 3}));
  EXPECT_EQ(debug["debug_entry"]["tensor"]["offset"], 128);
  const json& profile = r["events"][1]["profile_event"];
  EXPECT_EQ(profile["delegate_debug_id_str"], "aten_relu_default:OpId_7 (cycles)");
  EXPECT_EQ(profile["start_time"], 0);
  EXPECT_EQ(profile["end_time"], 1234);
  EXPECT_EQ(r["events"][2]["allocation_event"]["allocation_size"], 4096);
}

TEST(EtdumpFlatc, TheReaderReadsWhatFlatcWrites) {
  TempDir dir;
  const Bytes data = random_bytes(12, 5);
  Bytes buffer(64, 0);
  buffer.insert(buffer.end(), data.begin(), data.end());
  write_bytes(dir.file("debug.bin"), buffer);
  const json doc = {
      {"version", 0},
      {"run_data",
       {{{"name", "Execute"},
         {"events",
          {{{"debug_event",
             {{"instruction_id", 1},
              {"delegate_debug_id_str", "aten_add_tensor@0"},
              {"debug_entry",
               {{"val", "Tensor"},
                {"tensor", {{"scalar_type", kByte}, {"sizes", {3, 4}}, {"offset", 64}}}}}}}},
           {{"profile_event",
             {{"delegate_debug_id_str", "aten_add_tensor:OpId_3 (cycles)"},
              {"start_time", 0},
              {"end_time", 777}}}}}}}}}};
  write_text(dir.file("f.json"), doc.dump());
  ASSERT_EQ(flatc("-b --size-prefixed -o " + dir.path().string() + " " + QD_ETDUMP_SCHEMA + " " +
                  dir.file("f.json")),
            0);
  EtdumpImportOptions options;
  options.etdump_path = dir.file("f.etdp");
  options.debug_buffer_path = dir.file("debug.bin");
  options.output_path = dir.file("f.h5");
  const auto summary = import(options);
  ASSERT_THAT(summary, IsOk());
  auto store = open_store(options.output_path);
  ASSERT_TRUE(store);
  ASSERT_EQ(testing::all_tensors(*store).size(), 1u);
  const TensorEntry t = testing::all_tensors(*store)[0];
  EXPECT_EQ(t.name, "aten_add_tensor@0");
  EXPECT_EQ(t.dtype, DType::kUFixed8);  // the QNN delegate's Byte is UFIXED_POINT_8 storage
  EXPECT_EQ(t.dims, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(*store->read_tensor(t), data);
  ASSERT_EQ(store->profile_events().size(), 1u);
  EXPECT_EQ(store->profile_events()[0].name, "aten_add_tensor");
  EXPECT_EQ(store->profile_events()[0].end, 777);
  EXPECT_EQ(store->profile_events()[0].unit, "cycles");
}

// ---------------------------------------------------------------------------------------------
// Everything ExecuTorch's QNN delegate logs, read back byte for byte.

struct ExpectedTensor {
  std::string name;
  DType dtype;
  std::vector<uint64_t> dims;
  std::vector<uint8_t> axis_order;
  std::vector<int64_t> handles;
  int32_t output_index;
  TensorRole role;
  std::vector<double> scales;
  std::vector<int64_t> offsets;
  int32_t axis = -1;
  Bytes bytes;
};

struct QnnOp {
  std::string name;
  int8_t scalar_type;
  std::vector<int64_t> sizes;
  size_t element_bytes;
};

// Three runs of a QNN graph: every storage type the delegate uses, an NHWC activation, a
// per-axis encoding, a two-output op, a graph output, a tensor with no encoding.
class QnnDump : public ::testing::Test {
 protected:
  void SetUp() override {
    auto buffer = fixtures::DebugBufferFile::create(dir_.file("debug_output.bin"));
    ASSERT_THAT(buffer, IsOk());
    for (int r = 0; r < 3; ++r) {
      EtdumpRunOut run;
      for (size_t k = 0; k < ops().size(); ++k) {
        const QnnOp& op = ops()[k];
        size_t count = 1;
        for (int64_t s : op.sizes) count *= static_cast<size_t>(s);
        Bytes bytes = random_bytes(count * op.element_bytes, static_cast<uint32_t>(100 * r + k));
        if (op.scalar_type == kHalf) {
          for (size_t i = 1; i < bytes.size(); i += 2) bytes[i] &= 0x3B;  // finite halves
        }
        const auto offset = buffer->append(bytes);
        ASSERT_THAT(offset, IsOk());
        run.events.push_back(qnn_tensor(op.name, op.scalar_type, op.sizes, *offset));
        data_[r].push_back(std::move(bytes));
      }
      run.events.push_back(qnn_profile("aten_convolution_default:OpId_0 (cycles)", 100 + r));
      run.events.push_back(qnn_profile("aten_add_tensor:OpId_9 (cycles)", 200 + r));
      run.events.push_back(qnn_profile("QnnGraph_execute (us)", 300 + r));
      runs_.push_back(std::move(run));
    }
    ASSERT_THAT(buffer->finish(uint64_t{4} << 20), IsOk());  // the whole preallocated buffer
    write_bytes(dir_.file("dump.etdp"), fixtures::write_etdump(runs_));
    write_encodings();
    write_etrecord(dir_.file("etrecord.bin"),
                   {{"aten_convolution_default@0", {1}},
                    {"aten_relu_default@0", {2}},
                    // Names holding a real name: an exact match never takes them.
                    {"_aten_relu_default@0", {97}},
                    {"aten_relu_default_1@0", {99}},
                    {"aten_linear_default@0", {3}},
                    {"aten_split_with_sizes_default@0", {4}},
                    {"aten_split_with_sizes_default@1", {4}},
                    {"aten_native_layer_norm_default@0", {5}},
                    {"aten_argmax_default@0", {6}},
                    {"output_aten_add_tensor@0", {7, 8}}});
  }

  static const std::vector<QnnOp>& ops() {
    static const std::vector<QnnOp> kOps = {
        {"aten_convolution_default@0", kChar, {1, 4, 4, 3}, 1},
        {"aten_relu_default@0", kByte, {1, 4, 4, 3}, 1},
        {"aten_linear_default@0", kShort, {2, 6}, 2},
        {"aten_split_with_sizes_default@0", kUInt16, {2, 3}, 2},
        {"aten_split_with_sizes_default@1", kUInt16, {2, 3}, 2},
        {"aten_native_layer_norm_default@0", kHalf, {2, 6}, 2},
        {"aten_argmax_default@0", kInt, {2}, 4},
        {"aten_mean_dim@0", kChar, {2, 2}, 1},  // no encoding anywhere: kept raw, flagged
        {"output_aten_add_tensor@0", kFloat, {2, 6}, 4},
    };
    return kOps;
  }

  void write_encodings() {
    json tensors;
    json conv = net_tensor(776, {1, 4, 4, 3}, scale_offset(0.05, 0));
    conv["axis_format"] = "NHWC";
    conv["src_axis_format"] = "NCHW";
    tensors["aten_convolution_default@0"] = conv;
    json relu = net_tensor(1032, {1, 4, 4, 3}, scale_offset(0.02, -10));
    relu["axis_format"] = "NHWC";
    relu["src_axis_format"] = "NCHW";
    tensors["aten_relu_default@0"] = relu;
    json per_axis = {{"definition", 1},
                     {"encoding", 1},
                     {"axis_scale_offset",
                      {{"axis", 1}, {"num_scale_offsets", 6}, {"scale_offsets", json::array()}}}};
    for (int c = 0; c < 6; ++c) {
      per_axis["axis_scale_offset"]["scale_offsets"].push_back(
          {{"scale", 0.001 * (c + 1)}, {"offset", -c}});
    }
    tensors["aten_linear_default@0"] = net_tensor(790, {2, 6}, per_axis);
    tensors["aten_split_with_sizes_default@0"] =
        net_tensor(1046, {2, 3}, scale_offset(1e-4, -32768));
    tensors["aten_split_with_sizes_default@1"] =
        net_tensor(1046, {2, 3}, scale_offset(2e-4, -32768));
    const json none = {{"definition", 2147483647}, {"encoding", 2147483647}};
    tensors["aten_native_layer_norm_default@0"] = net_tensor(534, {2, 6}, none);
    tensors["output_aten_add_tensor@0"] = net_tensor(562, {2, 6}, none);
    const json nodes = {
        {"aten_add_tensor",
         {{"type", "ElementWiseAdd"},
          {"input_names", {"aten_linear_default@0", "aten_native_layer_norm_default@0"}},
          {"output_names", {"output_aten_add_tensor@0"}}}}};
    write_text(dir_.file("model_net.json"),
               json({{"graph", {{"tensors", tensors}, {"nodes", nodes}}}}).dump());
  }

  EtdumpImportOptions options() const {
    EtdumpImportOptions o;
    o.etdump_path = dir_.file("dump.etdp");
    o.debug_buffer_path = dir_.file("debug_output.bin");
    o.encodings_paths = {dir_.file("model_net.json")};
    o.etrecord_path = dir_.file("etrecord.bin");
    o.output_path = dir_.file("device.h5");
    return o;
  }

  std::vector<ExpectedTensor> expected(int run) const {
    const auto& d = data_[run];
    using R = TensorRole;
    return {
        {"aten_convolution_default@0",
         DType::kSFixed8,
         {1, 4, 4, 3},
         {0, 3, 1, 2},
         {1},
         0,
         R::kIntermediate,
         {0.05},
         {0},
         -1,
         d[0]},
        {"aten_relu_default@0",
         DType::kUFixed8,
         {1, 4, 4, 3},
         {0, 3, 1, 2},
         {2},
         0,
         R::kIntermediate,
         {0.02},
         {-10},
         -1,
         d[1]},
        {"aten_linear_default@0",
         DType::kSFixed16,
         {2, 6},
         {},
         {3},
         0,
         R::kIntermediate,
         {0.001, 0.002, 0.003, 0.004, 0.005, 0.006},
         {0, -1, -2, -3, -4, -5},
         1,
         d[2]},
        {"aten_split_with_sizes_default@0",
         DType::kUFixed16,
         {2, 3},
         {},
         {4},
         0,
         R::kIntermediate,
         {1e-4},
         {-32768},
         -1,
         d[3]},
        {"aten_split_with_sizes_default@1",
         DType::kUFixed16,
         {2, 3},
         {},
         {4},
         1,
         R::kIntermediate,
         {2e-4},
         {-32768},
         -1,
         d[4]},
        {"aten_native_layer_norm_default@0",
         DType::kFloat16,
         {2, 6},
         {},
         {5},
         0,
         R::kIntermediate,
         {},
         {},
         -1,
         d[5]},
        {"aten_argmax_default@0",
         DType::kInt32,
         {2},
         {},
         {6},
         0,
         R::kIntermediate,
         {},
         {},
         -1,
         d[6]},
        {"aten_mean_dim@0", DType::kSFixed8, {2, 2}, {}, {}, 0, R::kIntermediate, {}, {}, -1, d[7]},
        {"output_aten_add_tensor@0",
         DType::kFloat32,
         {2, 6},
         {},
         {7, 8},
         0,
         R::kGraphOutput,
         {},
         {},
         -1,
         d[8]},
    };
  }

  TempDir dir_;
  std::vector<EtdumpRunOut> runs_;
  std::vector<Bytes> data_[3];
};

TEST_F(QnnDump, EveryByteDtypeDimHandleAndEncodingReadsBack) {
  const auto summary = import(options());
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->runs, 3u);
  EXPECT_EQ(summary->tensors, 27u);
  EXPECT_EQ(summary->handles_from_etrecord, 24u);  // all but aten_mean_dim@0, in every run
  EXPECT_EQ(summary->missing_encoding, 3u);
  EXPECT_EQ(summary->graph_nodes, 1u);
  auto store = open_store(options().output_path);
  ASSERT_TRUE(store);
  ASSERT_EQ(store->runs().size(), 3u);
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(store->runs()[r].name, "Execute");
    EXPECT_TRUE(store->runs()[r].complete);
    const std::vector<TensorEntry> tensors = testing::run_tensors(*store, r);
    const std::vector<ExpectedTensor> want = expected(static_cast<int>(r));
    ASSERT_EQ(tensors.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      const TensorEntry& t = tensors[k];
      const ExpectedTensor& w = want[k];
      SCOPED_TRACE("run " + std::to_string(r) + " " + w.name);
      EXPECT_EQ(t.name, w.name);
      EXPECT_EQ(t.dtype, w.dtype);
      EXPECT_EQ(t.dims, w.dims);
      EXPECT_EQ(t.axis_order, w.axis_order);
      EXPECT_EQ(t.handles, w.handles);
      EXPECT_EQ(t.output_index, w.output_index);
      EXPECT_EQ(t.role, w.role);
      EXPECT_EQ(t.quant.scales, w.scales);
      EXPECT_EQ(t.quant.offsets, w.offsets);
      EXPECT_EQ(t.quant.axis, w.axis);
      EXPECT_EQ(t.quant.convention, QuantConvention::kQnnOffset);
      const auto bytes = store->read_tensor(t);
      ASSERT_THAT(bytes, IsOk());
      EXPECT_EQ(*bytes, w.bytes);
    }
  }
  ASSERT_EQ(store->graph().size(), 1u);
  EXPECT_EQ(store->graph()[0].op_type, "ElementWiseAdd");
}

TEST_F(QnnDump, ProfileEventsJoinTheirOps) {
  ASSERT_THAT(import(options()), IsOk());
  auto store = open_store(options().output_path);
  ASSERT_TRUE(store);
  const auto& events = store->profile_events();
  ASSERT_EQ(events.size(), 9u);
  for (uint32_t r = 0; r < 3; ++r) {
    const ProfileEvent& conv = events[3 * r];
    EXPECT_EQ(conv.run_id, r);
    EXPECT_EQ(conv.name, "aten_convolution_default");
    EXPECT_EQ(conv.handles, (std::vector<int64_t>{1}));
    EXPECT_EQ(conv.start, 0);
    EXPECT_EQ(conv.end, 100 + r);
    EXPECT_EQ(conv.unit, "cycles");
    const ProfileEvent& add = events[3 * r + 1];  // the graph output's op, "output_" dropped
    EXPECT_EQ(add.name, "aten_add_tensor");
    EXPECT_EQ(add.handles, (std::vector<int64_t>{7, 8}));
    const ProfileEvent& graph = events[3 * r + 2];
    EXPECT_EQ(graph.name, "QnnGraph_execute");
    EXPECT_TRUE(graph.handles.empty());
    EXPECT_EQ(graph.unit, "us");
  }
}

TEST_F(QnnDump, WithoutEtrecordHandlesComeFromTheNamingPreset) {
  EtdumpImportOptions o = options();
  o.etrecord_path.clear();
  const std::string map = dir_.file("handles.json");
  write_text(map, R"({"aten_convolution_default": 1, "aten_add_tensor": [7, 8]})");
  o.handle_map_path = map;
  const auto summary = import(o);
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->handles_from_etrecord, 0u);
  auto store = open_store(o.output_path);
  ASSERT_TRUE(store);
  EXPECT_EQ(testing::all_tensors(*store)[0].handles, (std::vector<int64_t>{1}));  // by node name
  EXPECT_EQ(testing::all_tensors(*store)[8].handles,
            (std::vector<int64_t>{7, 8}));  // output_ dropped
  EXPECT_TRUE(testing::all_tensors(*store)[1].handles.empty());
  EXPECT_EQ(store->profile_events()[1].handles, (std::vector<int64_t>{7, 8}));
}

TEST_F(QnnDump, TheMissingEncodingIsFlaggedByInspect) {
  ASSERT_THAT(import(options()), IsOk());
  const CliResult r = run_cli("inspect --run 0 " + options().output_path);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("encoding: missing_encoding"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("encodings 3 tensors"), std::string::npos) << r.out;
}

TEST_F(QnnDump, TheCliSaysWhatItWrote) {
  const EtdumpImportOptions o = options();
  const CliResult r = run_cli("capture etdump " + o.etdump_path + " --debug-buffer " +
                              o.debug_buffer_path + " --encodings " + o.encodings_paths[0] +
                              " --etrecord " + o.etrecord_path + " -o " + o.output_path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 runs, 27 tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("9 profile events"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 fixed-point tensors have no encoding"), std::string::npos) << r.out;
  const CliResult help = run_cli("capture etdump --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--debug-buffer"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Ops the runtime ran itself (no delegate): names, instruction handles, dim order, scalars.

// The bytes a portable-ops dump stores: a channels-last convolution output, a two-tensor list.
struct PortableBytes {
  Bytes conv, first, second;
};

// One run of ops the runtime ran itself: a channels-last tensor, a tensor list, the four scalar
// kinds and a Null, two allocation events and a profile event; an ETRecord with their handles.
PortableBytes write_portable_dump(const TempDir& dir) {
  auto buffer = fixtures::DebugBufferFile::create(dir.file("debug.bin"));
  EXPECT_THAT(buffer, IsOk());
  std::vector<float> nchw(12);
  for (size_t i = 0; i < nchw.size(); ++i) nchw[i] = static_cast<float>(i);
  // Channels-last [1, 3, 2, 2]: memory holds NHWC, so element (n, c, h, w) is at h*6 + w*3 + c.
  std::vector<float> memory(12);
  for (int c = 0; c < 3; ++c) {
    for (int hw = 0; hw < 4; ++hw) memory[static_cast<size_t>(hw * 3 + c)] = nchw[c * 4 + hw];
  }
  const Bytes memory_bytes(reinterpret_cast<const uint8_t*>(memory.data()),
                           reinterpret_cast<const uint8_t*>(memory.data()) + 48);
  const int64_t conv_at = *buffer->append(memory_bytes);
  const Bytes a = random_bytes(8, 1), b = random_bytes(16, 2);
  const int64_t a_at = *buffer->append(a), b_at = *buffer->append(b);
  EXPECT_THAT(buffer->finish(0), IsOk());

  EtdumpRunOut run{"Execute", -1, {"planned"}, {}};
  EtdumpEventOut conv;
  conv.name = "native_call_convolution.out";
  conv.instruction_id = 0;
  conv.value = EtdumpValueOut{5, {EtdumpTensorOut{kFloat, {1, 3, 2, 2}, {12, 1, 6, 3}, conv_at}}};
  run.events.push_back(conv);
  EtdumpEventOut split;
  split.name = "native_call_split_copy.Tensor_out";
  split.instruction_id = 1;
  split.value = EtdumpValueOut{
      6, {EtdumpTensorOut{kFloat, {2}, {}, a_at}, EtdumpTensorOut{kFloat, {4}, {}, b_at}}};
  run.events.push_back(split);
  auto scalar = [&](int8_t type, const char* name) {
    EtdumpEventOut e;
    e.name = name;
    e.instruction_id = 2;
    e.value = EtdumpValueOut{type, {}, -7, 2.5, true};
    run.events.push_back(e);
  };
  scalar(1, "int_value");
  scalar(2, "bool_value");
  scalar(3, "float_value");
  scalar(4, "double_value");
  scalar(0, "null_value");  // nothing to store
  EtdumpEventOut allocation;
  allocation.kind = Kind::kAllocation;
  allocation.allocator_id = 0;
  allocation.allocation_size = 4096;
  run.events.push_back(allocation);
  allocation.allocator_id = 7;
  run.events.push_back(allocation);
  EtdumpEventOut profile;
  profile.kind = Kind::kProfile;
  profile.name = "native_call_convolution.out";
  profile.instruction_id = 0;
  profile.start_time = 10;
  profile.end_time = 50;
  run.events.push_back(profile);
  write_bytes(dir.file("p.etdp"), fixtures::write_etdump({run}));
  write_etrecord(dir.file("etrecord.bin"), json::object(), {{"0", 1}, {"1", {2, 3}}});

  return {memory_bytes, a, b};
}

// A dump of ops the runtime ran itself, `<stem>.etdp` beside debug.bin and etrecord.bin.
EtdumpImportOptions runtime_dump_options(const TempDir& dir, const std::string& stem) {
  EtdumpImportOptions o;
  o.etdump_path = dir.file(stem + ".etdp");
  o.debug_buffer_path = dir.file("debug.bin");
  o.etrecord_path = dir.file("etrecord.bin");
  o.output_path = dir.file(stem + ".h5");
  return o;
}

TEST(PortableEtdump, OpsScalarsListsAndDimOrderReadBack) {
  TempDir dir;
  const PortableBytes expected = write_portable_dump(dir);
  const EtdumpImportOptions o = runtime_dump_options(dir, "p");
  const auto summary = import(o);
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->skipped_values, 1u);
  auto store = open_store(o.output_path);
  ASSERT_TRUE(store);
  const auto& t = testing::all_tensors(*store);
  ASSERT_EQ(t.size(), 7u);
  EXPECT_EQ(t[0].name, "native_call_convolution.out");
  EXPECT_EQ(t[0].dims, (std::vector<uint64_t>{1, 2, 2, 3}));  // memory order
  EXPECT_EQ(t[0].axis_order, (std::vector<uint8_t>{0, 3, 1, 2}));
  EXPECT_EQ(t[0].handles, (std::vector<int64_t>{1}));
  EXPECT_EQ(*store->read_tensor(t[0]), expected.conv);
  EXPECT_EQ(t[1].output_index, 0);
  EXPECT_EQ(t[2].output_index, 1);
  EXPECT_EQ(t[2].handles, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(*store->read_tensor(t[1]), expected.first);
  EXPECT_EQ(*store->read_tensor(t[2]), expected.second);
  const std::vector<std::pair<DType, double>> scalars = {
      {DType::kInt64, -7}, {DType::kBool8, 1}, {DType::kFloat32, 2.5}, {DType::kFloat64, 2.5}};
  for (size_t k = 0; k < scalars.size(); ++k) {
    EXPECT_EQ(t[3 + k].dtype, scalars[k].first) << k;
    EXPECT_TRUE(t[3 + k].dims.empty()) << k;
    EXPECT_EQ(t[3 + k].stats.mean, scalars[k].second) << k;
  }
  ASSERT_EQ(store->memory_checkpoints().size(), 2u);
  EXPECT_EQ(store->memory_checkpoints()[0].label, "planned");
  EXPECT_EQ(store->memory_checkpoints()[0].bytes, 4096u);
  EXPECT_EQ(store->memory_checkpoints()[1].label, "allocator 7");
  ASSERT_EQ(store->profile_events().size(), 1u);
  EXPECT_EQ(store->profile_events()[0].handles, (std::vector<int64_t>{1}));
  EXPECT_EQ(store->profile_events()[0].unit, "ticks");
}

// Outside any instruction ExecuTorch's ETDumpGen writes chain -1 and its unset debug handle 0 as
// the instruction id (Method::execute, and the program outputs Method::log_outputs logs after the
// last instruction). That 0 is not instruction 0: such an event gets neither instruction 0's id
// nor its ETRecord handles, and a program output is output k of the run, a graph output.
TEST(PortableEtdump, EventsOutsideInstructionsAreNotInstructionZero) {
  TempDir dir;
  auto buffer = fixtures::DebugBufferFile::create(dir.file("debug.bin"));
  ASSERT_THAT(buffer, IsOk());
  const Bytes first = random_bytes(8, 3), second = random_bytes(4, 4);
  const int64_t first_at = *buffer->append(first), second_at = *buffer->append(second);
  ASSERT_THAT(buffer->finish(0), IsOk());
  constexpr uint64_t kUnsetChain = ~uint64_t{0};  // int -1 as a ulong (a profile event's is int)

  EtdumpRunOut run{"Execute", -1, {}, {}};
  auto profile = [&](const char* name, uint64_t chain, int64_t start, int64_t end) {
    EtdumpEventOut e;
    e.kind = Kind::kProfile;
    e.name = name;
    e.chain_index = chain;
    e.instruction_id = 0;
    e.start_time = static_cast<uint64_t>(start);
    e.end_time = static_cast<uint64_t>(end);
    run.events.push_back(e);
  };
  profile("native_call_add.out", 0, 10, 40);
  auto program_output = [&](int64_t at, int64_t size) {
    EtdumpEventOut e;
    e.chain_index = kUnsetChain;
    e.instruction_id = 0;
    e.value = EtdumpValueOut{5, {EtdumpTensorOut{kFloat, {size}, {}, at}}, 0, 0, false, true};
    run.events.push_back(e);
  };
  program_output(first_at, 2);
  program_output(second_at, 1);
  profile("Method::execute", kUnsetChain, 0, 90);
  write_bytes(dir.file("o.etdp"), fixtures::write_etdump({run, run}));
  write_etrecord(dir.file("etrecord.bin"), json::object(), {{"0", 7}});

  const EtdumpImportOptions o = runtime_dump_options(dir, "o");
  const auto summary = import(o);
  ASSERT_THAT(summary, IsOk());
  auto store = open_store(o.output_path);
  ASSERT_TRUE(store);
  const auto& events = store->profile_events();
  ASSERT_EQ(events.size(), 4u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(events[2 * r].instruction_id, 0);
    EXPECT_EQ(events[2 * r].handles, (std::vector<int64_t>{7}));
    EXPECT_EQ(events[2 * r + 1].name, "Method::execute");
    EXPECT_EQ(events[2 * r + 1].instruction_id, -1);
    EXPECT_TRUE(events[2 * r + 1].handles.empty());
  }
  const auto& t = testing::all_tensors(*store);
  ASSERT_EQ(t.size(), 4u);
  for (size_t k = 0; k < t.size(); ++k) {
    EXPECT_EQ(t[k].name, "program_output") << k;
    EXPECT_EQ(t[k].output_index, static_cast<int32_t>(k % 2)) << k;  // numbered again each run
    EXPECT_EQ(t[k].role, TensorRole::kGraphOutput) << k;
    EXPECT_TRUE(t[k].handles.empty()) << k;
  }
  EXPECT_EQ(*store->read_tensor(t[1]), second);
}

// ---------------------------------------------------------------------------------------------
// Damaged input: exit 2 with the file, the event and what was wrong; nothing left behind.

// ExecuTorch numbers debug handles from 0: a negative one in the ETRecord is damage, refused
// naming the file and the entry, not a handle that silently pairs with nothing.
TEST(PortableEtdump, ANegativeDebugHandleInTheEtrecordIsRefused) {
  TempDir dir;
  write_portable_dump(dir);
  write_etrecord(dir.file("etrecord.bin"), json::object(), {{"0", 1}, {"1", {2, -3}}});
  const EtdumpImportOptions o = runtime_dump_options(dir, "p");
  const auto summary = import(o);
  ASSERT_FALSE(summary.is_ok());
  EXPECT_NE(summary.status().message().find("etrecord '" + dir.file("etrecord.bin") + "'"),
            std::string::npos)
      << summary.status().message();
  EXPECT_NE(summary.status().message().find("debug_handle_map['forward']['1'][1]: debug handle -3"),
            std::string::npos)
      << summary.status().message();
  EXPECT_FALSE(std::filesystem::exists(o.output_path));
}

class BadDump : public ::testing::Test {
 protected:
  // One run: a Char tensor at `offset` with `sizes`, then a profile event.
  void write(std::vector<int64_t> sizes = {2, 2}, int64_t offset = 64, int8_t scalar_type = kChar,
             std::vector<int64_t> strides = {}) {
    EtdumpRunOut run;
    EtdumpEventOut e = qnn_tensor("x@0", scalar_type, std::move(sizes), offset);
    e.value->tensors[0].strides = std::move(strides);
    run.events.push_back(e);
    run.events.push_back(qnn_profile("x:OpId_0 (cycles)", 5));
    etdump_ = fixtures::write_etdump({run});
    write_bytes(dir_.file("d.etdp"), etdump_);
    write_bytes(dir_.file("debug.bin"), Bytes(256, 1));
  }

  CliResult capture(const std::string& extra = "") {
    return run_cli("capture etdump " + dir_.file("d.etdp") + " --debug-buffer " +
                   dir_.file("debug.bin") + " -o " + dir_.file("out.h5") + " " + extra);
  }

  // Exit 2, one line naming the ETDump and containing every fragment.
  void expect_refused(const CliResult& r, std::initializer_list<std::string> fragments) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(r.err.find(fragment), std::string::npos)
          << "missing '" << fragment << "' in " << r.err;
    }
    EXPECT_FALSE(std::filesystem::exists(dir_.file("out.h5")));
  }

  TempDir dir_;
  Bytes etdump_;
};

TEST_F(BadDump, OffsetOutsideTheBuffer) {
  write({4, 4}, 250);
  expect_refused(capture(), {"d.etdp", "run_data[0].events[0]", "'x@0'", "outside debug buffer",
                             "debug.bin", "(256 bytes)"});
}

TEST_F(BadDump, UnknownScalarType) {
  write({2}, 64, 99);
  expect_refused(capture(), {"d.etdp", "run_data[0].events[0]", "unknown scalar type 99"});
}

TEST_F(BadDump, SizesThatOverflowOrAreNegative) {
  write({int64_t{1} << 40, int64_t{1} << 40});
  expect_refused(capture(), {"d.etdp", "run_data[0].events[0]", "overflow"});
  write({2, -3});
  expect_refused(capture(), {"run_data[0].events[0]", "negative"});
}

TEST_F(BadDump, StridesThatDescribeNoDenseLayout) {
  write({2, 2}, 64, kChar, {4, 1});
  expect_refused(capture(), {"run_data[0].events[0]", "no dense layout"});
}

TEST_F(BadDump, TensorsWithoutTheirDebugBuffer) {
  write();
  const CliResult r =
      run_cli("capture etdump " + dir_.file("d.etdp") + " -o " + dir_.file("out.h5"));
  expect_refused(r, {"d.etdp", "--debug-buffer"});
}

TEST_F(BadDump, EncodingsThatDescribeAnotherTensor) {
  write();
  write_text(
      dir_.file("net.json"),
      json({{"graph", {{"tensors", {{"x@0", net_tensor(1046, {2, 2}, scale_offset(0.1, 0))}}}}}})
          .dump());
  expect_refused(capture("--encodings " + dir_.file("net.json")),
                 {"run_data[0].events[0]", "UFIXED_POINT_16", "SFIXED_POINT_8"});
  write_text(dir_.file("net.json"),
             json({{"graph", {{"tensors", {{"x@0", net_tensor(776, {4}, scale_offset(0.1, 0))}}}}}})
                 .dump());
  expect_refused(capture("--encodings " + dir_.file("net.json")), {"give dims [4]", "[2,2]"});
}

TEST_F(BadDump, NotAnEtdumpAndTruncated) {
  write();
  Bytes wrong = etdump_;
  std::memcpy(wrong.data() + 8, "XXXX", 4);
  write_bytes(dir_.file("d.etdp"), wrong);
  expect_refused(capture(), {"d.etdp", "not an ETDump"});
  for (size_t cut = 0; cut < etdump_.size(); cut += 5) {
    write_bytes(dir_.file("d.etdp"),
                Bytes(etdump_.begin(), etdump_.begin() + static_cast<ptrdiff_t>(cut)));
    const CliResult r = capture();
    ASSERT_EQ(r.exit_code, 2) << "cut at " << cut << ": " << r.err;
    EXPECT_NE(r.err.find("d.etdp"), std::string::npos) << r.err;
  }
}

// Any single changed byte gives a clean error or a store: never a crash or a hang.
TEST_F(BadDump, EveryByteFlippedFailsCleanlyOrReads) {
  write();
  EtdumpImportOptions o;
  o.etdump_path = dir_.file("d.etdp");
  o.debug_buffer_path = dir_.file("debug.bin");
  o.output_path = dir_.file("out.h5");
  size_t refused = 0;
  for (size_t i = 0; i < etdump_.size(); ++i) {
    Bytes flipped = etdump_;
    flipped[i] ^= 0xFF;
    write_bytes(o.etdump_path, flipped);
    const auto result = import(o);
    if (!result.is_ok()) {
      ++refused;
      const ErrorCode code = result.status().code();
      EXPECT_TRUE(code == ErrorCode::kCorrupt || code == ErrorCode::kInvalidArgument)
          << "byte " << i << ": " << result.status().message();
      EXPECT_NE(result.status().message().find("d.etdp"), std::string::npos)
          << "byte " << i << ": " << result.status().message();
    }
  }
  EXPECT_GT(refused, etdump_.size() / 4);  // most bytes of a FlatBuffer are structure
}

TEST_F(BadDump, AFailedImportKeepsThePreviousStoreAndLeavesNoTemporaryFile) {
  write();
  ASSERT_EQ(capture().exit_code, 0);
  const std::string before = slurp(dir_.file("out.h5"));
  write({4, 4}, 250);
  const CliResult r = capture();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(slurp(dir_.file("out.h5")), before);
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos) << entry.path();
  }
}

// ---------------------------------------------------------------------------------------------
// The fixture model's device run, as ExecuTorch's QNN backend dumps it, diffed after import.

TEST(FixtureEtdump, TheDiffOfAnImportedDumpFindsTheInjectedFault) {
  TempDir dir;
  fixtures::FixtureOptions options;
  options.fault = fixtures::Fault::kRequantScale;
  options.fault_op = "conv3";
  const auto injection = fixtures::write_fixture(
      {dir.file("reference.h5"), dir.file("direct.h5"), dir.file("dump")}, options);
  ASSERT_THAT(injection, IsOk());
  const std::string d = dir.file("dump");
  const CliResult captured =
      run_cli("capture etdump " + d + "/device.etdp --debug-buffer " + d +
              "/debug_output.bin --encodings " + d + "/model_net.json --etrecord " + d +
              "/etrecord.bin -o " + dir.file("device.h5"));
  ASSERT_EQ(captured.exit_code, 0) << captured.err;
  const CliResult diff = run_cli("diff " + dir.file("reference.h5") + " " + dir.file("device.h5") +
                                 " --json " + dir.file("report.json"));
  EXPECT_EQ(diff.exit_code, 1) << diff.err;
  const json report = json::parse(slurp(dir.file("report.json")));
  EXPECT_EQ(report["summary"]["first_divergence"]["group"],
            "h" + std::to_string(injection->debug_handle))
      << diff.out;
  EXPECT_EQ(report["runs"][0]["unmatched"].size(), 0u);
  // The delegate's profile events keep the DELEGATE_CALL's instruction id; the reference's have
  // none.
  ASSERT_FALSE(report["device"]["profile_events"].empty());
  for (const json& e : report["device"]["profile_events"]) EXPECT_EQ(e["instruction_id"], 1) << e;
  for (const json& e : report["reference"]["profile_events"]) {
    EXPECT_TRUE(e["instruction_id"].is_null()) << e;
  }
  // The import holds exactly what the hook captured directly.
  const CliResult same = run_cli("diff " + dir.file("direct.h5") + " " + dir.file("device.h5") +
                                 " --json " + dir.file("same.json"));
  EXPECT_EQ(same.exit_code, 0) << same.out;
  const json same_report = json::parse(slurp(dir.file("same.json")));  // outlives the loop
  for (const json& group : same_report["runs"][0]["groups"]) {
    EXPECT_EQ(group["sqnr_db"], "inf") << group["id"];
  }
}

}  // namespace
}  // namespace qd
