// The Model Explorer views (docs/reports.md, "Model Explorer"): node data keyed by the model's
// node names, each op's SQNR coloured as Model Explorer applies the thresholds, and the stored
// graph as Model Explorer's graph JSON; from a hand-built report, from ExecuTorch's dump of the
// demo through diff, report and check, and through a FIFO and a symlink.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "../common/cli_runner.h"
#include "../common/fifo_reader.h"
#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/report/views.h"

namespace qd {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::run_cli;
using testing::slurp;
using testing::TempDir;

constexpr char kFail[] = "#c62828";
constexpr char kWarn[] = "#b26a00";
constexpr char kPass[] = "#2e7d32";

std::string render_view(const report::Report& report, const char* name) {
  const report::FileView* view = report::find_view(name);
  EXPECT_NE(view, nullptr) << name;
  return view == nullptr ? "" : report::render(report, *view);
}

// Model Explorer's rule (node_data_provider_extension_service.ts, getBgColor): a result's own
// bgColor, else the first threshold the value is <= to, else none.
std::string colour_in_model_explorer(const json& result, const json& thresholds) {
  if (result.contains("bgColor")) return result["bgColor"];
  for (const json& threshold : thresholds) {
    if (result["value"].get<double>() <= threshold["value"].get<double>()) {
      return threshold["bgColor"];
    }
  }
  return "transparent";
}

report::GroupReport group(const std::string& id, const std::string& device_name,
                          int32_t output_index, std::optional<double> sqnr_db,
                          compare::Verdict verdict, std::vector<std::string> inputs = {}) {
  report::GroupReport g;
  g.id = id;
  g.op_type = "Op" + id;
  g.sqnr_db = sqnr_db;
  g.verdict = verdict;
  g.inputs = std::move(inputs);
  report::PairReport pair;
  pair.reference.name = device_name + ".ref";
  pair.reference.dtype = "FLOAT_32";
  pair.reference.dims = {1, 4};
  pair.device.name = device_name;
  pair.device.output_index = output_index;
  g.pairs.push_back(pair);
  return g;
}

// Names as ExecuTorch's QNN backend, an fx graph and a module capture give them, an exact and an
// all-wrong output, one not compared, and verdicts the default thresholds alone would not give.
report::Report hand_built() {
  using compare::Verdict;
  const double inf = std::numeric_limits<double>::infinity();
  report::RunReport run;
  run.groups = {
      group("h1", "aten_convolution_default_1@0", 0, 36.5, Verdict::kPass),
      group("h2", "aten_relu_default_3", 0, inf, Verdict::kPass),  // an fx name: its own counter
      group("h3", "output_aten_add_tensor@0", 0, 5.0, Verdict::kFail, {"h1", "h2"}),
      group("h4", "layer1.0.conv1", -1, 10.0, Verdict::kWarn, {"h3"}),  // exactly fail_below_db
      group("h5", "aten_mul_tensor@0", 0, std::nullopt, Verdict::kFail, {"h4", "h99"}),
      group("h6", "input_0_x_0", 0, 26.9, Verdict::kFail),  // NaN/Inf introduced: fails anyway
      group("h7", "aten_add_tensor@1", 1, -inf, Verdict::kFail, {"h3"}),  // h3's node again
      group("h8", "softmax@0", 0, 12.0, Verdict::kFail),  // a rule for Softmax fails below 15
  };
  report::Report report;
  report.runs.push_back(run);
  return report;
}

TEST(ModelExplorer, NodeDataKeysValuesAndColours) {
  const json data = json::parse(render_view(hand_built(), "model-explorer"));
  // The single-graph form: Model Explorer applies it to whichever graph is open.
  ASSERT_TRUE(data.contains("results"));
  const json& results = data["results"];
  const std::map<std::string, double> expected = {{"aten_convolution_default_1", 36.5},
                                                  {"aten_relu_default_3", compare::kExactSqnrDb},
                                                  {"aten_add_tensor", 5.0},
                                                  {"layer1.0.conv1", 10.0},
                                                  {"x", 26.9},
                                                  {"aten_add_tensor#h7", -compare::kExactSqnrDb},
                                                  {"softmax", 12.0}};
  ASSERT_EQ(results.size(), expected.size()) << results.dump(1);  // h5 was not compared
  for (const auto& [key, value] : expected) {
    ASSERT_TRUE(results.contains(key)) << key;
    EXPECT_EQ(results[key]["value"].get<double>(), value) << key;
  }
  const json& thresholds = data["thresholds"];
  ASSERT_EQ(thresholds.size(), 3u);
  EXPECT_EQ(thresholds[0]["bgColor"], kFail);
  EXPECT_EQ(thresholds[1]["bgColor"], kWarn);
  EXPECT_EQ(thresholds[2]["bgColor"], kPass);
  EXPECT_LT(thresholds[0]["value"].get<double>(), 10.0);  // the policy fails below 10 dB
  EXPECT_EQ(thresholds[0]["value"].get<double>(), std::nextafter(10.0, 0.0));
  EXPECT_EQ(thresholds[1]["value"].get<double>(), std::nextafter(20.0, 0.0));
  EXPECT_EQ(thresholds[2]["value"].get<double>(), compare::kExactSqnrDb);
  const std::map<std::string, std::string> colours = {{"aten_convolution_default_1", kPass},
                                                      {"aten_relu_default_3", kPass},
                                                      {"aten_add_tensor", kFail},
                                                      {"layer1.0.conv1", kWarn},
                                                      {"x", kFail},
                                                      {"aten_add_tensor#h7", kFail},
                                                      {"softmax", kFail}};
  for (const auto& [key, colour] : colours) {
    EXPECT_EQ(colour_in_model_explorer(results[key], thresholds), colour) << key;
  }
  // Only the verdicts the thresholds do not give carry their own colour.
  EXPECT_EQ(results["x"]["bgColor"], kFail);
  EXPECT_EQ(results["softmax"]["bgColor"], kFail);
  EXPECT_FALSE(results["aten_add_tensor"].contains("bgColor"));
}

TEST(ModelExplorer, GraphNodesEdgesAndTensorNames) {
  const json collection = json::parse(render_view(hand_built(), "model-explorer-graph"));
  ASSERT_TRUE(collection.contains("label"));
  ASSERT_EQ(collection["graphs"].size(), 1u);
  const json& nodes = collection["graphs"][0]["nodes"];
  ASSERT_EQ(nodes.size(), 8u);  // one per group, compared or not
  std::map<std::string, json> by_id;
  for (const json& node : nodes) by_id[node["id"]] = node;
  ASSERT_EQ(by_id.size(), nodes.size()) << "node ids must be unique";
  for (const json& node : nodes) {
    for (const json& edge : node["incomingEdges"]) {
      EXPECT_TRUE(by_id.count(edge["sourceNodeId"])) << node["id"] << " <- " << edge.dump();
      EXPECT_EQ(edge["sourceNodeOutputId"], "0");
    }
    ASSERT_EQ(node["outputsMetadata"].size(), 1u);
    const json& attrs = node["outputsMetadata"][0]["attrs"];
    EXPECT_EQ(attrs[0]["key"], "tensor_name");
    EXPECT_EQ(attrs[1]["key"], "reference_tensor");
    EXPECT_EQ(attrs[1]["value"], attrs[0]["value"].get<std::string>() + ".ref");
  }
  const json& add = by_id["aten_add_tensor"];
  EXPECT_EQ(add["label"], "Oph3");
  EXPECT_EQ(add["incomingEdges"], json::parse(R"([{"sourceNodeId": "aten_convolution_default_1",
                             "sourceNodeOutputId": "0", "targetNodeInputId": "0"},
                            {"sourceNodeId": "aten_relu_default_3",
                             "sourceNodeOutputId": "0", "targetNodeInputId": "1"}])"));
  EXPECT_EQ(add["outputsMetadata"][0]["attrs"][0]["value"], "output_aten_add_tensor@0");
  EXPECT_EQ(add["outputsMetadata"][0]["attrs"][2],
            json({{"key", "tensor_shape"}, {"value", "FLOAT_32[1, 4]"}}));
  EXPECT_EQ(by_id["layer1.0.conv1"]["namespace"], "layer1/0");
  EXPECT_EQ(add["namespace"], "");
  // The group not compared is a node; its edge to a group the run does not have is left out.
  const json& mul = by_id["aten_mul_tensor"];
  EXPECT_EQ(mul["incomingEdges"].size(), 1u);
  EXPECT_EQ(mul["attrs"][3], json({{"key", "sqnr_db"}, {"value", "not compared"}}));
  EXPECT_EQ(add["attrs"][2], json({{"key", "verdict"}, {"value", "fail"}}));
}

// Several device runs: each node's lowest SQNR and worst verdict.
TEST(ModelExplorer, SeveralRunsGiveEachNodesWorst) {
  report::Report report = hand_built();
  report::RunReport second = report.runs[0];
  second.device_run = 1;
  second.groups[0].sqnr_db = 8.0;
  second.groups[0].verdict = compare::Verdict::kFail;
  report.runs.push_back(second);
  const json data = json::parse(render_view(report, "model-explorer"));
  EXPECT_EQ(data["results"]["aten_convolution_default_1"]["value"].get<double>(), 8.0);
  EXPECT_EQ(data["name"], "qnn-debug SQNR (dB), worst of 2 device runs");
  EXPECT_EQ(json::parse(render_view(report, "model-explorer-graph"))["graphs"][0]["nodes"].size(),
            8u);
}

TEST(ModelExplorer, HostileNamesGiveValidJson) {
  report::Report report = hand_built();
  const std::string hostile = std::string("a\"b\\c\x01\x1f\n</script><img src=x>\xff\xfe@0");
  report.runs[0].groups[0].pairs[0].device.name = hostile;
  report.runs[0].groups[0].pairs[0].reference.name = hostile;
  report.runs[0].groups[0].op_type = "</script>\"";
  for (const char* view : {"model-explorer", "model-explorer-graph"}) {
    const std::string text = render_view(report, view);
    json parsed;
    ASSERT_NO_THROW(parsed = json::parse(text)) << view << ":\n" << text.substr(0, 400);
  }
  const json data = json::parse(render_view(report, "model-explorer"));
  // The bytes that are not UTF-8 become U+FFFD; everything else is the name, escaped.
  EXPECT_TRUE(
      data["results"].contains("a\"b\\c\x01\x1f\n</script><img src=x>\xEF\xBF\xBD\xEF\xBF\xBD"))
      << data["results"].dump();
}

// ExecuTorch's dump of the demo, captured and diffed: every group keyed by its op's node name,
// valued by its SQNR, the same files again from the saved report (report and check).
class ModelExplorerDemo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string out = dir_->file("demo");
    ASSERT_EQ(run_cli("demo --etdump --fault requant-scale --out " + out).exit_code, 0);
    const std::string et = out + "/executorch";
    const CliResult captured =
        run_cli("capture etdump " + et + "/device.etdp --debug-buffer " + et +
                "/debug_output.bin --encodings " + et + "/model_net.json --etrecord " + et +
                "/etrecord.bin -o " + out + "/captured.h5");
    ASSERT_EQ(captured.exit_code, 0) << captured.err;
    const CliResult diff = run_cli("diff " + out + "/reference.h5 " + out + "/captured.h5" +
                                   " --json " + file("r.json") + " --model-explorer " +
                                   file("me.json") + " --model-explorer-graph " + file("g.json"));
    ASSERT_EQ(diff.exit_code, 1) << diff.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static TempDir* dir_;
};
TempDir* ModelExplorerDemo::dir_ = nullptr;

TEST_F(ModelExplorerDemo, OverlayHoldsEachGroupsSqnrUnderItsNodeName) {
  const json report = json::parse(slurp(file("r.json")));
  const json data = json::parse(slurp(file("me.json")));
  ASSERT_EQ(report["runs"].size(), 1u);
  const json& groups = report["runs"][0]["groups"];
  ASSERT_EQ(data["results"].size(), groups.size());
  for (const json& g : groups) {
    // "conv3@0" is node conv3; the graph output "output_softmax@0" is node softmax.
    std::string node = g["pairs"][0]["device"]["name"];
    node = node.substr(0, node.rfind('@'));
    if (node.rfind("output_", 0) == 0) node = node.substr(7);
    ASSERT_TRUE(data["results"].contains(node)) << node;
    EXPECT_EQ(data["results"][node]["value"].get<double>(), g["sqnr_db"].get<double>()) << node;
  }
  EXPECT_TRUE(data["results"].contains("softmax"));
  EXPECT_EQ(report["runs"][0]["first_divergence"], "h5");
  EXPECT_LT(data["results"]["conv3"]["value"].get<double>(),
            data["thresholds"][0]["value"].get<double>());
  EXPECT_EQ(colour_in_model_explorer(data["results"]["conv3"], data["thresholds"]), kFail);
  EXPECT_EQ(colour_in_model_explorer(data["results"]["conv1"], data["thresholds"]), kPass);
}

TEST_F(ModelExplorerDemo, GraphHasEveryGroupAndItsEdges) {
  const json report = json::parse(slurp(file("r.json")));
  const json graph = json::parse(slurp(file("g.json")));
  const json& nodes = graph["graphs"][0]["nodes"];
  ASSERT_EQ(nodes.size(), report["runs"][0]["groups"].size());
  std::set<std::string> ids;
  for (const json& node : nodes) ids.insert(node["id"].get<std::string>());
  const json overlay = json::parse(slurp(file("me.json")));
  size_t edges = 0;
  for (const json& node : nodes) {
    EXPECT_TRUE(overlay["results"].contains(node["id"])) << node["id"];
    for (const json& edge : node["incomingEdges"]) {
      EXPECT_TRUE(ids.count(edge["sourceNodeId"])) << edge.dump();
      ++edges;
    }
    EXPECT_EQ(node["outputsMetadata"][0]["attrs"][0]["key"], "tensor_name");
  }
  EXPECT_EQ(edges, 17u);  // 15 ops fed by one op each, the two residual adds by two
  std::map<std::string, json> by_id;
  for (const json& node : nodes) by_id[node["id"]] = node;
  EXPECT_EQ(by_id["add1"]["incomingEdges"].size(), 2u);
  EXPECT_EQ(by_id["add1"]["incomingEdges"][1]["sourceNodeId"], "gelu1");
  EXPECT_EQ(by_id["conv3"]["outputsMetadata"][0]["attrs"][0]["value"], "conv3@0");
  EXPECT_EQ(by_id["conv3"]["outputsMetadata"][0]["attrs"][1]["value"], "conv3__debugID_5");
}

TEST_F(ModelExplorerDemo, ASavedReportGivesTheSameFiles) {
  const CliResult again = run_cli("report " + file("r.json") + " --model-explorer " +
                                  file("me2.json") + " --model-explorer-graph " + file("g2.json"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(slurp(file("me2.json")), slurp(file("me.json")));
  EXPECT_EQ(slurp(file("g2.json")), slurp(file("g.json")));
  const CliResult check = run_cli("check " + file("r.json") + " --model-explorer " +
                                  file("me3.json") + " --model-explorer-graph " + file("g3.json"));
  ASSERT_EQ(check.exit_code, 1) << check.err;
  EXPECT_EQ(slurp(file("me3.json")), slurp(file("me.json")));
  EXPECT_EQ(slurp(file("g3.json")), slurp(file("g.json")));
}

TEST_F(ModelExplorerDemo, WrittenThroughAFifoAndASymlink) {
  const std::string fifo = file("overlay.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto drained = testing::drain_fifo(fifo);
  std::filesystem::create_directory(file("real"));
  const std::string link = file("graph-link.json");
  std::filesystem::create_symlink("real/graph.json", link);
  const CliResult r = run_cli("report " + file("r.json") + " --model-explorer " + fifo +
                              " --model-explorer-graph " + link);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(drained.get(), slurp(file("me.json")));
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(slurp(file("real/graph.json")), slurp(file("g.json")));
}

}  // namespace
}  // namespace qd
