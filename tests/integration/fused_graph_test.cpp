// Fused ops (issue 33): on HTP a conv+bn+relu runs as one op, and its one device tensor carries
// the three debug handles. An emulated CNN block of that kind, with a side branch captured
// between two fused groups and a device that rounds 2% of its codes 1 LSB the other way: each
// fused group's inputs are its conv's inputs (not the previous group in capture order), the
// error a kernel fault adds is measured against that input, and Model Explorer colours every
// node of the chain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "../common/files.h"
#include "../common/status_matchers.h"
#include "../common/temp_dir.h"
#include "qnn_debug/etdump/store_writer.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using nlohmann::json;

constexpr uint64_t kElements = 4096;

// One op of the emulated model: its output tensor, its inputs, its handle, and the device
// tensor it belongs to (the last op of a fused chain names the chain's device tensor).
struct Op {
  std::string name, op_type;
  std::vector<std::string> inputs;
  int64_t handle;
  std::string device_tensor;  // "" inside a fused chain: its value never leaves the NPU
};

// x -> [conv1 bn1 relu1] -> side (a coarse 1x1 branch) ; [conv2 bn2 relu2] <- relu1 ;
// add(relu2, side) -> [conv3 bn3 relu3]. `side` is captured between the two fused groups.
std::vector<Op> model() {
  return {
      {"conv1", "Conv2d", {"x", "w1"}, 1, ""},     {"bn1", "BatchNorm", {"conv1"}, 2, ""},
      {"relu1", "Relu", {"bn1"}, 3, "relu1"},      {"side", "Conv2d", {"relu1", "ws"}, 4, "side"},
      {"conv2", "Conv2d", {"relu1", "w2"}, 5, ""}, {"bn2", "BatchNorm", {"conv2"}, 6, ""},
      {"relu2", "Relu", {"bn2"}, 7, "relu2"},      {"add", "Add", {"relu2", "side"}, 8, "add"},
      {"conv3", "Conv2d", {"add", "w3"}, 9, ""},   {"bn3", "BatchNorm", {"conv3"}, 10, ""},
      {"relu3", "Relu", {"bn3"}, 11, "relu3"}};
}

// The float value of every op output: a smooth function of its first input.
std::map<std::string, std::vector<float>> reference_values() {
  std::map<std::string, std::vector<float>> values;
  std::vector<float> x(kElements);
  for (uint64_t i = 0; i < kElements; ++i) x[i] = std::sin(0.013f * float(i));
  values["x"] = x;
  float k = 0;
  for (const Op& op : model()) {
    const std::vector<float>& in = values.at(op.inputs.front());
    std::vector<float> out(kElements);
    k += 1;
    for (uint64_t i = 0; i < kElements; ++i) {
      const float extra =
          op.inputs.size() > 1 && values.count(op.inputs[1]) ? values.at(op.inputs[1])[i] : 0.0f;
      out[i] = op.op_type == "Relu" ? std::max(in[i], 0.0f) + 0.1f
                                    : std::sin(0.8f * in[i] + 0.1f * k) + 0.5f * extra;
    }
    values[op.name] = std::move(out);
  }
  return values;
}

struct Device {
  int64_t fault_at = 0;       // the handle of the device tensor whose kernel is off by 5 LSB
  double side_scale_x = 1.0;  // the side branch's encoding, this many times too wide
};

std::vector<int64_t> chain_handles(const std::vector<Op>& ops, size_t last) {
  std::vector<int64_t> handles{ops[last].handle};
  for (size_t j = last; j-- > 0 && ops[j].device_tensor.empty();) {
    handles.insert(handles.begin(), ops[j].handle);
  }
  return handles;
}

void write_graph(StoreWriter& store) {
  for (const Op& op : model()) {
    ASSERT_THAT(store.append_graph_node({op.name, op.op_type, op.inputs, {op.name}, {op.handle}}),
                IsOk());
  }
}

void write_reference(const std::string& path) {
  auto store = StoreWriter::create(path, {"fused_graph_test", "cpu", "", "cnn", 1}).value();
  write_graph(*store);
  ASSERT_THAT(store->begin_run("r", 1), IsOk());
  const auto values = reference_values();
  for (const Op& op : model()) {
    TensorRecord r;
    r.name = op.name;
    r.handles = {op.handle};
    r.dims = {1, 16, 16, 16};
    r.dtype = DType::kFloat32;
    const auto& v = values.at(op.name);
    ASSERT_TRUE(
        store->append_tensor(r, {reinterpret_cast<const uint8_t*>(v.data()), kElements * 4}, 0)
            .is_ok());
  }
  ASSERT_THAT(store->end_run(2, 0), IsOk());
  ASSERT_THAT(store->close(), IsOk());
}

// The device: each device tensor int8 with its own per-tensor encoding, 2% of the codes rounded
// the other way (+-1 LSB, as kernels round differently), and the fault's +-5 LSB on a quarter.
void write_device(const std::string& path, const Device& device) {
  auto store =
      StoreWriter::create(path, {"fused_graph_test", "QnnHtp", "SM8650", "cnn", 1}).value();
  ASSERT_THAT(store->begin_run("r", 1), IsOk());
  const auto values = reference_values();
  const std::vector<Op> ops = model();
  for (size_t o = 0; o < ops.size(); ++o) {
    if (ops[o].device_tensor.empty()) continue;
    const auto& v = values.at(ops[o].name);
    const float peak = *std::max_element(
        v.begin(), v.end(), [](float a, float b) { return std::abs(a) < std::abs(b); });
    const double scale = std::abs(peak) / 127 * (ops[o].name == "side" ? device.side_scale_x : 1);
    std::vector<int8_t> q(kElements);
    for (uint64_t i = 0; i < kElements; ++i) {
      double code = std::nearbyint(v[i] / scale);
      if (i % 50 == 7) code += (i % 100 == 7) ? 1 : -1;  // the other rounding
      if (ops[o].handle == device.fault_at && i % 4 == 0) code += (i % 8 == 0) ? 5 : -5;
      q[i] = static_cast<int8_t>(std::clamp(code, -128.0, 127.0));
    }
    TensorRecord r;
    r.name = ops[o].device_tensor;
    r.handles = chain_handles(ops, o);
    r.dims = {1, 16, 16, 16};
    r.dtype = DType::kSFixed8;
    r.quant.scales = {scale};
    r.quant.offsets = {0};
    ASSERT_TRUE(store->append_tensor(r, {reinterpret_cast<const uint8_t*>(q.data()), kElements}, 0)
                    .is_ok());
  }
  ASSERT_THAT(store->end_run(2, 0), IsOk());
  ASSERT_THAT(store->close(), IsOk());
}

class FusedGraph : public ::testing::Test {
 protected:
  json diff(const Device& device) {
    write_reference(ref_);
    write_device(device_, device);
    const auto r = testing::run_cli("diff " + ref_ + " " + device_ + " --json " + file("r.json") +
                                    " --model-explorer " + file("me.json"));
    EXPECT_LE(r.exit_code, 1) << r.out << r.err;
    return json::parse(testing::slurp(file("r.json")));
  }
  std::string file(const std::string& name) const { return dir_.file(name); }

  static const json& group(const json& doc, const std::string& id) {
    for (const json& g : doc["runs"][0]["groups"]) {
      if (g["id"] == id) return g;
    }
    ADD_FAILURE() << "no group " << id;
    static const json none;
    return none;
  }

  testing::TempDir dir_;
  std::string ref_ = dir_.file("ref.h5"), device_ = dir_.file("dev.h5");
};

TEST_F(FusedGraph, EveryGroupKeepsItsGraphInputs) {
  const json doc = diff({});
  EXPECT_EQ(group(doc, "h1-3")["fused"], json({"conv1", "bn1"}));
  EXPECT_FALSE(group(doc, "h1-3").contains("inputs")) << "its inputs are the model's";
  EXPECT_EQ(group(doc, "h4")["inputs"], json({"h1-3"}));
  EXPECT_EQ(group(doc, "h5-7")["inputs"], json({"h1-3"})) << "conv2's input, not `side`";
  EXPECT_EQ(group(doc, "h5-7")["fused"], json({"conv2", "bn2"}));
  EXPECT_EQ(group(doc, "h8")["inputs"], json({"h5-7", "h4"}));
  EXPECT_EQ(group(doc, "h9-11")["inputs"], json({"h8"}));
  EXPECT_EQ(group(doc, "h5-7")["op_type"], "Relu");
}

// A +-5 LSB kernel fault in the second block, while the side branch (captured just before it)
// is coarsely encoded: the fault's error is measured against its true input (the first block),
// not against the coarse branch, which would have hidden it.
TEST_F(FusedGraph, IntroducedErrorIsMeasuredAgainstTheTrueInput) {
  const json doc = diff({7, 8.0});
  const json& faulty = group(doc, "h5-7");
  const double in = group(doc, "h1-3")["sqnr_db"].get<double>();
  EXPECT_EQ(faulty["input_sqnr_db"].get<double>(), in);
  EXPECT_GT(in - group(doc, "h4")["sqnr_db"].get<double>(), 10) << "the branch is far worse";
  EXPECT_DOUBLE_EQ(faulty["introduced_db"].get<double>(), in - faulty["sqnr_db"].get<double>());
  EXPECT_GT(faulty["introduced_db"].get<double>(), 10) << faulty.dump();
  bool introducer = false;
  for (const json& i : doc["runs"][0]["introducers"]) introducer = introducer || i["id"] == "h5-7";
  EXPECT_TRUE(introducer) << doc["runs"][0]["introducers"];
}

TEST_F(FusedGraph, ModelExplorerColoursEveryNodeOfTheChain) {
  diff({7, 1.0});
  const json data = json::parse(testing::slurp(file("me.json")));
  const json& results = data["results"];
  for (const char* node : {"conv2", "bn2", "relu2"}) {
    ASSERT_TRUE(results.contains(node)) << node << " in " << results.dump();
    EXPECT_EQ(results[node], results["relu2"]) << node;
  }
  for (const char* node : {"conv1", "bn1", "relu1", "side", "add", "conv3", "bn3", "relu3"}) {
    EXPECT_TRUE(results.contains(node)) << node;
  }
}

}  // namespace
}  // namespace qd
