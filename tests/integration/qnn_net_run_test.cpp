// `qnn-debug capture qnn-net-run` (importers/): output folders as qnn-net-run writes them, in
// every layout (one graph or several, float_only, native_only, float_and_native, sanitized names
// and sub-folders, files no net JSON describes), every value read back, every bad layout refused
// naming the file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "../common/cli_runner.h"
#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_net_run_import.h"

using qd::testing::IsOk;

namespace qd {
namespace {

namespace fs = std::filesystem;
using importers::QnnNetRunImportOptions;
using nlohmann::json;
using testing::CliResult;
using testing::run_cli;
using testing::TempDir;
using Bytes = std::vector<uint8_t>;
using testing::write_bytes;

Bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  Bytes bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
  return bytes;
}

template <typename T>
Bytes bytes_of(const std::vector<T>& values) {
  Bytes bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

json quant(double scale, int64_t offset) {
  return {
      {"definition", 1}, {"encoding", 0}, {"scale_offset", {{"scale", scale}, {"offset", offset}}}};
}
const json kNoQuant = {{"definition", 2147483647}, {"encoding", 2147483647}};

json tensor(uint32_t data_type, std::vector<uint64_t> dims, json quant_params) {
  return {{"id", 0},
          {"type", 3},
          {"data_type", data_type},
          {"dims", dims},
          {"quant_params", quant_params}};
}

std::unique_ptr<StoreReader> open_store(const std::string& path) {
  auto reader = StoreReader::open(path);
  EXPECT_THAT(reader, IsOk());
  return reader.is_ok() ? std::move(reader).value() : nullptr;
}

// A converter net JSON: an NHWC uint8 activation, a per-axis int16 one, an fp16 one, an int32
// index, a float32 output, and the graph that links them, nodes in graph order as the converter
// writes them.
nlohmann::ordered_json net_json() {
  json conv = tensor(1032, {1, 2, 2, 3}, quant(0.1, -10));
  conv["axis_format"] = "NHWC";
  conv["src_axis_format"] = "NCHW";
  json per_axis = {
      {"definition", 1},
      {"encoding", 1},
      {"axis_scale_offset",
       {{"axis", 1},
        {"num_scale_offsets", 2},
        {"scale_offsets", {{{"scale", 0.01}, {"offset", 0}}, {{"scale", 0.02}, {"offset", -3}}}}}}};
  const json tensors = {{"conv/Relu:0", conv},
                        {"linear", tensor(790, {3, 2}, per_axis)},
                        {"norm", tensor(534, {3, 2}, kNoQuant)},
                        {"argmax", tensor(50, {3}, kNoQuant)},
                        {"logits", tensor(562, {3, 2}, kNoQuant)}};
  const nlohmann::ordered_json nodes = {
      {"conv", {{"type", "Conv2d"}, {"input_names", {"input"}}, {"output_names", {"conv/Relu:0"}}}},
      {"linear",
       {{"type", "FullyConnected"},
        {"input_names", {"conv/Relu:0"}},
        {"output_names", {"linear"}}}},
      {"norm", {{"type", "LayerNorm"}, {"input_names", {"linear"}}, {"output_names", {"norm"}}}},
      {"head",
       {{"type", "FullyConnected"}, {"input_names", {"norm"}}, {"output_names", {"logits"}}}},
      {"argmax", {{"type", "Argmax"}, {"input_names", {"logits"}}, {"output_names", {"argmax"}}}}};
  nlohmann::ordered_json doc;
  doc["graph"]["tensors"] = tensors;
  doc["graph"]["nodes"] = nodes;
  return doc;
}

// What one result holds for each tensor: native bytes, and what qnn-net-run's float file holds.
struct ResultData {
  Bytes conv_native, linear_native, norm_native, argmax_native;
  std::vector<float> conv_float, linear_float, logits;
};

ResultData result_data(uint32_t seed) {
  ResultData d;
  d.conv_native = random_bytes(12, seed);
  d.linear_native = random_bytes(12, seed + 1);
  d.norm_native = random_bytes(12, seed + 2);
  for (size_t i = 1; i < d.norm_native.size(); i += 2) d.norm_native[i] &= 0x3B;  // finite halves
  d.argmax_native = bytes_of(std::vector<int32_t>{1, 0, 1});
  for (uint8_t q : d.conv_native) d.conv_float.push_back((float(q) - 10) * 0.1f);
  d.linear_float.assign(6, 0.5f);
  d.logits = {0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f};
  return d;
}

enum class Written { kFloatAndNative, kFloatOnly, kNativeOnly };

// One Result_<k> folder as qnn-net-run writes it with --output_data_type <written>; '/' in the
// tensor name becomes a sub-folder and ':' an underscore when `subfolders`, else both become '_'.
void write_result(const fs::path& dir, const ResultData& d, Written written, bool subfolders) {
  const std::string conv = subfolders ? "conv/Relu_0" : "conv_Relu_0";
  const bool floats = written != Written::kNativeOnly;
  const bool natives = written != Written::kFloatOnly;
  if (floats) {
    write_bytes(dir / (conv + ".raw"), bytes_of(d.conv_float));
    write_bytes(dir / "linear.raw", bytes_of(d.linear_float));
    write_bytes(dir / "norm.raw", bytes_of(std::vector<float>(6, 0.25f)));
    write_bytes(dir / "argmax.raw", bytes_of(std::vector<float>{1, 0, 1}));
  }
  if (natives) {
    write_bytes(dir / (conv + "_native.raw"), d.conv_native);
    write_bytes(dir / "linear_native.raw", d.linear_native);
    write_bytes(dir / "norm_native.raw", d.norm_native);
    write_bytes(dir / "argmax_native.raw", d.argmax_native);
  }
  write_bytes(dir / "logits.raw", bytes_of(d.logits));  // FLOAT_32: always <name>.raw
}

class NetRunTree : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir_.file("model_net.json")) << net_json().dump(); }
  void write_results(const fs::path& base, int count, Written written, bool subfolders) {
    for (int k = 0; k < count; ++k) {
      data_.push_back(result_data(static_cast<uint32_t>(10 * k + 1)));
      write_result(base / ("Result_" + std::to_string(k)), data_.back(), written, subfolders);
    }
  }
  QnnNetRunImportOptions options(const std::string& out_dir) const {
    QnnNetRunImportOptions o;
    o.output_dir = out_dir;
    o.net_json = dir_.file("model_net.json");
    o.output_path = dir_.file("store.h5");
    return o;
  }
  TempDir dir_;
  std::vector<ResultData> data_;
};

TEST_F(NetRunTree, NativeBytesWinWithTheirEncodingDtypeAndLayout) {
  write_results(dir_.path() / "out", 3, Written::kFloatAndNative, /*subfolders=*/false);
  const auto summary = importers::import_qnn_net_run(options(dir_.file("out")));
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->runs, 3u);
  EXPECT_EQ(summary->tensors, 15u);
  EXPECT_EQ(summary->native, 12u);
  EXPECT_EQ(summary->graph_nodes, 5u);
  auto store = open_store(dir_.file("store.h5"));
  ASSERT_TRUE(store);
  ASSERT_EQ(store->runs().size(), 3u);
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(store->runs()[r].name, "Result_" + std::to_string(r));
    const auto t = testing::run_tensors(*store, r);
    ASSERT_EQ(t.size(), 5u);
    // The graph's order: conv, linear, norm, logits, argmax.
    EXPECT_EQ(t[0].name, "conv/Relu:0");
    EXPECT_EQ(t[0].dtype, DType::kUFixed8);
    EXPECT_EQ(t[0].dims, (std::vector<uint64_t>{1, 2, 2, 3}));
    EXPECT_EQ(t[0].axis_order, (std::vector<uint8_t>{0, 3, 1, 2}));
    EXPECT_EQ(t[0].quant.scales, std::vector<double>{0.1});
    EXPECT_EQ(t[0].quant.offsets, std::vector<int64_t>{-10});
    EXPECT_EQ(*store->read_tensor(t[0]), data_[r].conv_native);
    EXPECT_EQ(t[1].name, "linear");
    EXPECT_EQ(t[1].dtype, DType::kSFixed16);
    EXPECT_EQ(t[1].quant.axis, 1);
    EXPECT_EQ(t[1].quant.scales, (std::vector<double>{0.01, 0.02}));
    EXPECT_EQ(*store->read_tensor(t[1]), data_[r].linear_native);
    EXPECT_EQ(t[2].dtype, DType::kFloat16);
    EXPECT_EQ(*store->read_tensor(t[2]), data_[r].norm_native);
    EXPECT_EQ(t[3].name, "logits");
    EXPECT_EQ(*store->read_tensor(t[3]), bytes_of(data_[r].logits));
    EXPECT_EQ(t[4].name, "argmax");
    EXPECT_EQ(t[4].dtype, DType::kInt32);
    EXPECT_EQ(*store->read_tensor(t[4]), data_[r].argmax_native);
    EXPECT_TRUE(t[0].name_matched);
  }
  ASSERT_EQ(store->graph().size(), 5u);
  EXPECT_EQ(store->graph()[1].op_type, "FullyConnected");
}

TEST_F(NetRunTree, FloatOnlyKeepsDimsAndLayoutWithoutTheEncoding) {
  write_results(dir_.path() / "out", 2, Written::kFloatOnly, /*subfolders=*/true);
  const auto summary = importers::import_qnn_net_run(options(dir_.file("out")));
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->native, 0u);
  EXPECT_EQ(summary->float_only, 4u);  // conv and linear, in both runs
  auto store = open_store(dir_.file("store.h5"));
  ASSERT_TRUE(store);
  const auto t = testing::run_tensors(*store, 1);
  EXPECT_EQ(t[0].name, "conv/Relu:0");  // found through its sub-folder: conv/Relu_0.raw
  EXPECT_EQ(t[0].dtype, DType::kFloat32);
  EXPECT_EQ(t[0].dims, (std::vector<uint64_t>{1, 2, 2, 3}));
  EXPECT_EQ(t[0].axis_order, (std::vector<uint8_t>{0, 3, 1, 2}));
  EXPECT_FALSE(t[0].quant.is_quantized());
  EXPECT_EQ(*store->read_tensor(t[0]), bytes_of(data_[1].conv_float));
  EXPECT_EQ(t[4].dtype, DType::kFloat32);  // the int32 argmax, as qnn-net-run's floats
}

TEST_F(NetRunTree, NativeOnly) {
  write_results(dir_.path() / "out", 1, Written::kNativeOnly, /*subfolders=*/false);
  const auto summary = importers::import_qnn_net_run(options(dir_.file("out")));
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->native, 4u);
  auto store = open_store(dir_.file("store.h5"));
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->read_tensor(testing::run_tensors(*store, 0)[0]), data_[0].conv_native);
}

TEST_F(NetRunTree, SeveralGraphsAreRunsInGraphThenIndexOrder) {
  write_results(dir_.path() / "out" / "prefill", 2, Written::kFloatAndNative, false);
  write_results(dir_.path() / "out" / "decode", 3, Written::kFloatAndNative, false);
  const auto summary = importers::import_qnn_net_run(options(dir_.file("out")));
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->graphs, 2u);
  auto store = open_store(dir_.file("store.h5"));
  ASSERT_TRUE(store);
  std::vector<std::string> names;
  for (const RunInfo& run : store->runs()) names.push_back(run.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"decode/Result_0", "decode/Result_1", "decode/Result_2",
                                      "prefill/Result_0", "prefill/Result_1"}));
  // decode's Result_1 is data_[3] (prefill's two results were written first).
  EXPECT_EQ(*store->read_tensor(testing::run_tensors(*store, 1)[0]), data_[3].conv_native);
}

TEST_F(NetRunTree, TheInputListNamesTheRunsAndTenResultsSortByNumber) {
  write_results(dir_.path() / "out", 11, Written::kFloatOnly, false);
  std::ofstream list(dir_.file("input_list.txt"));
  list << "#logits\n";
  for (int k = 0; k < 11; ++k) list << "inputs/sample" << k << ".raw\n";
  list.close();
  QnnNetRunImportOptions o = options(dir_.file("out"));
  o.input_list = dir_.file("input_list.txt");
  ASSERT_THAT(importers::import_qnn_net_run(o), IsOk());
  auto store = open_store(dir_.file("store.h5"));
  ASSERT_TRUE(store);
  EXPECT_EQ(store->runs()[2].name, "Result_2 inputs/sample2.raw");
  EXPECT_EQ(store->runs()[10].name, "Result_10 inputs/sample10.raw");  // 10 after 9, not 1
}

TEST_F(NetRunTree, WithoutANetJsonShapesComeFromTheFlagOrOneDimension) {
  const fs::path result = dir_.path() / "bare" / "Result_0";
  write_bytes(result / "a.raw", bytes_of(std::vector<float>(10, 1.5f)));
  write_bytes(result / "b_native.raw", Bytes{1, 2, 3, 4});
  QnnNetRunImportOptions o = options(dir_.file("bare"));
  o.net_json.clear();
  const auto refused = importers::import_qnn_net_run(o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("b_native.raw"), std::string::npos);
  EXPECT_NE(refused.status().message().find("--shape b="), std::string::npos);
  o.shapes = {"b=2,2:UFIXED_POINT_8"};
  auto summary = importers::import_qnn_net_run(o);
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->undescribed, 1u);
  auto store = open_store(o.output_path);
  ASSERT_TRUE(store);
  EXPECT_EQ(testing::all_tensors(*store)[0].name, "a");
  EXPECT_EQ(testing::all_tensors(*store)[0].dims, std::vector<uint64_t>{10});
  EXPECT_EQ(testing::all_tensors(*store)[1].dtype, DType::kUFixed8);
  EXPECT_EQ(testing::all_tensors(*store)[1].dims, (std::vector<uint64_t>{2, 2}));
  o.shapes = {"a=2,5"};
  write_bytes(result / "b_native.raw", Bytes{});
  fs::remove(result / "b_native.raw");
  ASSERT_THAT(importers::import_qnn_net_run(o), IsOk());
  EXPECT_EQ(testing::all_tensors(*open_store(o.output_path))[0].dims,
            (std::vector<uint64_t>{2, 5}));
}

TEST_F(NetRunTree, BadLayoutsNameTheFile) {
  fs::create_directories(dir_.path() / "empty" / "not_a_result");
  CliResult r = run_cli("capture qnn-net-run " + dir_.file("empty") + " -o " + dir_.file("s.h5"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no Result_<k> folder"), std::string::npos) << r.err;
  // A file whose size is not its dims times its dtype.
  write_results(dir_.path() / "out", 1, Written::kFloatAndNative, false);
  write_bytes(dir_.path() / "out" / "Result_0" / "linear_native.raw", Bytes(11));
  r = run_cli("capture qnn-net-run " + dir_.file("out") + " --net-json " +
              dir_.file("model_net.json") + " -o " + dir_.file("s.h5"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("linear_native.raw': 11 bytes, but tensor 'linear' is SFIXED_POINT_16 "
                       "[3,2]: 12 bytes"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_.file("s.h5")));
  // A float file that cannot be float32.
  const fs::path odd = dir_.path() / "odd" / "Result_0";
  write_bytes(odd / "x.raw", Bytes(7));
  r = run_cli("capture qnn-net-run " + dir_.file("odd") + " -o " + dir_.file("s.h5"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("x.raw': 7 bytes are not float32 values"), std::string::npos) << r.err;
  r = run_cli("capture qnn-net-run " + dir_.file("missing") + " -o " + dir_.file("s.h5"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
  r = run_cli("capture qnn-net-run " + dir_.file("odd") + " --shape x -o " + dir_.file("s.h5"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--shape 'x'"), std::string::npos) << r.err;
}

// Two folders diffed directly: the CPU backend's and the HTP's, run k against run k.
TEST_F(NetRunTree, DiffTakesTwoFoldersDirectly) {
  write_results(dir_.path() / "cpu", 2, Written::kFloatAndNative, false);
  write_results(dir_.path() / "htp", 2, Written::kFloatAndNative, false);
  const std::string report = dir_.file("r.json");
  const CliResult r = run_cli("diff " + dir_.file("cpu") + " " + dir_.file("htp") + " --net-json " +
                              dir_.file("model_net.json") + " --json " + report);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const json doc = json::parse(testing::slurp(report));
  EXPECT_EQ(doc["reference"]["format"], "qnn-net-run");
  EXPECT_EQ(doc["reference"]["path"], dir_.file("cpu"));
  EXPECT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][1]["groups"].size(), 5u);
  EXPECT_EQ(doc["runs"][1]["groups"][0]["pairs"][0]["match"], "exact_name");
}

// A device tree of 300 Result_k folders of which only 3 hold outputs: 297 runs fail ("no pair
// compared"), and the terminal says so in a few lines, with how many more and where they are,
// not in a line each.
TEST_F(NetRunTree, ManyEmptyResultsKeepTheSummaryShort) {
  constexpr int kResults = 300;
  write_results(dir_.path() / "cpu", kResults, Written::kFloatOnly, false);
  write_results(dir_.path() / "htp", 3, Written::kFloatOnly, false);
  for (int k = 3; k < kResults; ++k)
    fs::create_directories(dir_.path() / "htp" / ("Result_" + std::to_string(k)));
  const CliResult r = run_cli("diff " + dir_.file("cpu") + " " + dir_.file("htp") + " --net-json " +
                              dir_.file("model_net.json"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  size_t lines = 0, reasons = 0;
  for (size_t at = 0; at < r.out.size(); at = r.out.find('\n', at) + 1) {
    ++lines;
    reasons += r.out.compare(at, 14, "fails because ") == 0;
  }
  EXPECT_EQ(reasons, 11u) << r.out;
  EXPECT_LT(lines, 80u) << r.out;
  EXPECT_NE(r.out.find("fails because ... and 287 more reasons: the JSON report (--json) lists "
                       "them all\n"),
            std::string::npos)
      << r.out;
}

// Issue 17: a .raw missing from one Result_k of the device tree. "argmax" is the net's graph
// output (its node's output, no node's input): its absence fails the diff by default (the old
// code passed with "unmatched 1 reference"). A missing intermediate ("linear") only warns, unless
// the policy's max_unmatched_reference sets a limit; `check --policy` applies it from the report.
TEST_F(NetRunTree, AMissingOutputFileWarnsAndAMissingGraphOutputFails) {
  write_results(dir_.path() / "cpu", 2, Written::kFloatAndNative, false);
  write_results(dir_.path() / "htp", 2, Written::kFloatAndNative, false);
  fs::remove(dir_.path() / "htp" / "Result_1" / "argmax.raw");
  fs::remove(dir_.path() / "htp" / "Result_1" / "argmax_native.raw");
  const std::string diff = "diff " + dir_.file("cpu") + " " + dir_.file("htp") + " --net-json " +
                           dir_.file("model_net.json");
  const std::string report = dir_.file("r.json");
  const CliResult r = run_cli(diff + " --json " + report);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("warning: device run 1: 1 reference tensor has no device counterpart "
                       "while others were compared: 'argmax' (graph output)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fails because device run 1: graph output 'argmax' has no device "
                       "counterpart"),
            std::string::npos)
      << r.out;
  const json doc = json::parse(testing::slurp(report));
  EXPECT_EQ(doc["runs"][0]["verdict"], "pass");
  EXPECT_EQ(doc["runs"][1]["verdict"], "fail");
  ASSERT_EQ(doc["runs"][1]["unmatched"].size(), 1u);
  EXPECT_EQ(doc["runs"][1]["unmatched"][0]["graph_output"], true);
  EXPECT_EQ(doc["warnings"].size(), 1u) << doc["warnings"].dump();

  // check re-judges from the report: the stored policy fails it, a generous one passes it.
  EXPECT_EQ(run_cli("check " + report).exit_code, 1);
  const std::string allow = dir_.file("allow.json"), strict = dir_.file("strict.json");
  std::ofstream(allow) << R"({"max_unmatched_reference": 1})";
  std::ofstream(strict) << R"({"max_unmatched_reference": 0})";
  const CliResult allowed = run_cli("check " + report + " --policy " + allow);
  EXPECT_EQ(allowed.exit_code, 0) << allowed.out << allowed.err;

  // An intermediate missing instead: a warning, exit 0; a policy limit of 0 fails it.
  write_bytes(dir_.path() / "htp" / "Result_1" / "argmax.raw",
              bytes_of(std::vector<float>{1, 0, 1}));
  write_bytes(dir_.path() / "htp" / "Result_1" / "argmax_native.raw", data_[3].argmax_native);
  fs::remove(dir_.path() / "htp" / "Result_1" / "linear.raw");
  fs::remove(dir_.path() / "htp" / "Result_1" / "linear_native.raw");
  const CliResult intermediate = run_cli(diff + " --json " + report);
  EXPECT_EQ(intermediate.exit_code, 0) << intermediate.out << intermediate.err;
  EXPECT_NE(intermediate.out.find("warning: device run 1: 1 reference tensor has no device "
                                  "counterpart while others were compared: 'linear'"),
            std::string::npos)
      << intermediate.out;
  const CliResult limited = run_cli("check " + report + " --policy " + strict);
  EXPECT_EQ(limited.exit_code, 1) << limited.out;
  EXPECT_NE(limited.out.find("1 reference tensor has no device counterpart, above the policy's "
                             "max_unmatched_reference 0"),
            std::string::npos)
      << limited.out;
  EXPECT_EQ(run_cli(diff + " --policy " + strict).exit_code, 1);
}

}  // namespace
}  // namespace qd
