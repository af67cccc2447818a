#include "qnn_debug/importers/encodings.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "../common/records.h"
#include "../common/temp_dir.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd::importers {
namespace {

constexpr const char* kFile = "enc.json";
constexpr const char* kPrefix = "encodings 'enc.json': ";

Result<EncodingTable> parse(std::string_view text) { return parse_encodings(text, kFile); }

// The table of a document that must parse; fails the test otherwise.
EncodingTable parse_ok(std::string_view text) {
  Result<EncodingTable> table = parse(text);
  EXPECT_THAT(table, IsOk());
  return table.is_ok() ? std::move(table).value() : EncodingTable{};
}

// Expects an error of `code` whose one-line message names the file and contains `fragment`.
void expect_error(const Result<EncodingTable>& result, ErrorCode code, std::string_view fragment) {
  testing::expect_failure(result.status(), code, fragment);
  EXPECT_EQ(result.status().message().rfind(kPrefix, 0), 0u) << result.status().message();
}

void expect_corrupt(std::string_view text, std::string_view fragment) {
  expect_error(parse(text), ErrorCode::kCorrupt, fragment);
}

// A converter net JSON holding one tensor called "conv@0" with the body `tensor`.
std::string net_json(std::string_view tensor) {
  return R"({"graph": {"tensors": {"conv@0": )" + std::string(tensor) + "}}}";
}

// A converter tensor entry with `quant_params` and `dims`, UFIXED_POINT_8 in NHWC.
std::string net_tensor(std::string_view quant_params, std::string_view dims = "[1, 8, 8, 4]") {
  return R"({"id": 7, "type": 3, "dataFormat": 0, "data_type": 1032, "dims": )" +
         std::string(dims) +
         R"(, "src_axis_format": "NCHW", "axis_format": "NHWC", "quant_params": )" +
         std::string(quant_params) + "}";
}

// A copy of the one tensor of `table` (a copy, so a temporary table may be passed).
TensorEncoding only_tensor(const EncodingTable& table) {
  EXPECT_EQ(table.tensors.size(), 1u);
  return table.tensors.empty() ? TensorEncoding{} : table.tensors.begin()->second;
}

// ---------------------------------------------------------------------------------------------
// Converter net JSON

TEST(EncodingsNetJson, PerTensorScaleOffsetWithLayoutAndNodesInFileOrder) {
  const EncodingTable table = parse_ok(R"json({
    "model.cpp": "", "converter_command": "qnn-onnx-converter",
    "graph": {
      "tensors": {
        "input_0": {"id": 1, "type": 0, "data_type": 562, "dims": [1, 224, 224, 3],
                    "src_axis_format": "NCHW", "axis_format": "NHWC",
                    "quant_params": {"definition": 2147483647, "encoding": 2147483647,
                                     "scale_offset": {"scale": 0.0, "offset": 0}}},
        "conv@0": {"id": 2, "type": 3, "data_type": 1032, "dims": [1, 112, 112, 32],
                   "src_axis_format": "NCHW", "axis_format": "NHWC",
                   "quant_params": {"definition": 1, "encoding": 0,
                     "scale_offset": {"bitwidth": 8, "minimum": -1e38, "maximum": 1e38,
                                      "scale": 0.0078125, "offset": -128,
                                      "is_symmetric": false}}}
      },
      "nodes": {
        "z_conv": {"package": "qti.aisw", "type": "Conv2d", "input_names": ["input_0", "w"],
                   "output_names": ["conv@0"], "tensor_params": {}, "scalar_params": {}},
        "a_relu": {"package": "qti.aisw", "type": "Relu", "input_names": ["conv@0"],
                   "output_names": ["relu@0"]},
        "m_end": {"type": "Reshape"}
      }
    }})json");
  ASSERT_EQ(table.sources.size(), 1u);
  EXPECT_EQ(table.sources[0].path, kFile);
  EXPECT_EQ(table.sources[0].format, EncodingFormat::kConverterNetJson);
  EXPECT_EQ(table.sources[0].tensor_count, 2u);

  const TensorEncoding* conv = table.find("conv@0");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->name, "conv@0");
  EXPECT_EQ(conv->source, kFile);
  EXPECT_EQ(conv->dtype, DType::kUFixed8);
  EXPECT_EQ(conv->dims, (std::vector<uint64_t>{1, 112, 112, 32}));
  EXPECT_EQ(conv->axis_format, "NHWC");
  EXPECT_EQ(conv->src_axis_format, "NCHW");
  EXPECT_EQ(conv->axis_order, (std::vector<uint8_t>{0, 3, 1, 2}));
  EXPECT_EQ(conv->quant.scales, std::vector<double>{0.0078125});
  EXPECT_EQ(conv->quant.offsets, std::vector<int64_t>{-128});
  EXPECT_EQ(conv->quant.axis, -1);
  EXPECT_EQ(conv->quant.bitwidth, 8);
  EXPECT_EQ(conv->quant.convention, QuantConvention::kQnnOffset);
  EXPECT_TRUE(conv->notes.empty());
  EXPECT_TRUE(conv->graph.empty());

  const TensorEncoding* input = table.find("input_0");
  ASSERT_NE(input, nullptr);
  EXPECT_EQ(input->dtype, DType::kFloat32);
  EXPECT_FALSE(input->quant.is_quantized());
  EXPECT_TRUE(input->quant.offsets.empty());
  EXPECT_EQ(table.find("conv"), nullptr);

  ASSERT_EQ(table.graph.size(), 3u);
  EXPECT_EQ(table.graph[0].name, "z_conv");
  EXPECT_EQ(table.graph[0].op_type, "Conv2d");
  EXPECT_EQ(table.graph[0].inputs, (std::vector<std::string>{"input_0", "w"}));
  EXPECT_EQ(table.graph[0].outputs, std::vector<std::string>{"conv@0"});
  EXPECT_TRUE(table.graph[0].handles.empty());
  EXPECT_EQ(table.graph[1].name, "a_relu");
  EXPECT_EQ(table.graph[1].op_type, "Relu");
  EXPECT_EQ(table.graph[2].name, "m_end");
  EXPECT_TRUE(table.graph[2].inputs.empty());
}

TEST(EncodingsNetJson, PerAxisScaleOffset) {
  const EncodingTable table = parse_ok(net_json(R"({"data_type": 776, "dims": [3, 3, 8, 4],
      "axis_format": "HWIO", "src_axis_format": "OIHW",
      "quant_params": {"definition": 1, "encoding": 1,
        "axis_scale_offset": {"axis": 3, "num_scale_offsets": 4, "scale_offsets": [
          {"scale": 0.5, "offset": 0}, {"scale": 0.25, "offset": -3},
          {"scale": 0.125, "offset": 7}, {"scale": 1e-14, "offset": 0}]}}})"));
  const TensorEncoding& tensor = only_tensor(table);
  EXPECT_EQ(tensor.dtype, DType::kSFixed8);
  EXPECT_EQ(tensor.quant.axis, 3);
  EXPECT_TRUE(tensor.quant.per_axis());
  EXPECT_EQ(tensor.quant.scales, (std::vector<double>{0.5, 0.25, 0.125, 1e-14}));
  EXPECT_EQ(tensor.quant.offsets, (std::vector<int64_t>{0, -3, 7, 0}));
  EXPECT_EQ(tensor.quant.bitwidth, 0);
  EXPECT_EQ(tensor.axis_order, (std::vector<uint8_t>{3, 2, 0, 1}));  // O I H W in HWIO
}

TEST(EncodingsNetJson, BitwidthScaleOffset) {
  const EncodingTable table = parse_ok(net_json(R"({"data_type": 772, "dims": [16],
      "quant_params": {"definition": 1, "encoding": 2,
        "bw_scale_offset": {"bitwidth": 4, "scale": 0.375, "offset": -8}}})"));
  const TensorEncoding& tensor = only_tensor(table);
  EXPECT_EQ(tensor.dtype, DType::kSFixed4);
  EXPECT_EQ(tensor.quant.scales, std::vector<double>{0.375});
  EXPECT_EQ(tensor.quant.offsets, std::vector<int64_t>{-8});
  EXPECT_EQ(tensor.quant.bitwidth, 4);
  EXPECT_EQ(tensor.quant.axis, -1);
  EXPECT_TRUE(tensor.axis_order.empty());
  EXPECT_TRUE(tensor.axis_format.empty());
}

TEST(EncodingsNetJson, BitwidthAxisScaleOffsetWithAndWithoutOffsets) {
  const std::string with_offsets = net_json(R"({"data_type": 1028, "dims": [2, 3],
      "quant_params": {"definition": 1, "encoding": 3, "bw_axis_scale_offset": {
        "bitwidth": 4, "axis": 0, "num_elements": 2, "scales": [0.5, 2], "offsets": [-8, 3]}}})");
  const TensorEncoding& tensor = only_tensor(parse_ok(with_offsets));
  EXPECT_EQ(tensor.dtype, DType::kUFixed4);
  EXPECT_EQ(tensor.quant.bitwidth, 4);
  EXPECT_EQ(tensor.quant.axis, 0);
  EXPECT_EQ(tensor.quant.scales, (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(tensor.quant.offsets, (std::vector<int64_t>{-8, 3}));

  for (const char* offsets : {R"(, "offsets": [])", ""}) {
    const EncodingTable table = parse_ok(
        net_json(std::string(R"({"dims": [1, 3], "quant_params": {"definition": 1, "encoding": 3,
        "bw_axis_scale_offset": {"bitwidth": 8, "axis": 1, "scales": [1, 2, 3])") +
                 offsets + "}}}"));
    const TensorEncoding& zeroed = only_tensor(table);
    EXPECT_FALSE(zeroed.dtype.has_value());
    EXPECT_EQ(zeroed.quant.scales, (std::vector<double>{1, 2, 3}));
    EXPECT_EQ(zeroed.quant.offsets, (std::vector<int64_t>{0, 0, 0})) << offsets;
  }
}

TEST(EncodingsNetJson, UndefinedAndBackendGeneratedDefinitionsHaveNoQuantization) {
  // The converter writes a placeholder body for undefined encodings; it is not read.
  const TensorEncoding& undefined =
      only_tensor(parse_ok(net_json(net_tensor(R"({"definition": 2147483647, "encoding": 0,
                     "scale_offset": {"scale": "ignored", "offset": 0}})"))));
  EXPECT_FALSE(undefined.quant.is_quantized());
  EXPECT_TRUE(undefined.notes.empty());

  const TensorEncoding& backend =
      only_tensor(parse_ok(net_json(net_tensor(R"({"definition": 0, "encoding": 0})"))));
  EXPECT_FALSE(backend.quant.is_quantized());
  ASSERT_EQ(backend.notes.size(), 1u);
  EXPECT_NE(backend.notes[0].find("IMPL_GENERATED"), std::string::npos);

  const TensorEncoding& no_params = only_tensor(parse_ok(net_json(R"({"data_type": 562})")));
  EXPECT_FALSE(no_params.quant.is_quantized());
  EXPECT_TRUE(no_params.dims.empty());
}

TEST(EncodingsNetJson, UnsupportedEncodingsAreKeptWithANote) {
  const std::pair<int, const char*> cases[] = {{4, "unsupported encoding 4 (BLOCK)"},
                                               {5, "unsupported encoding 5 (BLOCKWISE_EXPANSION)"},
                                               {6, "unsupported encoding 6 (VECTOR)"},
                                               {9, "unsupported encoding 9"},
                                               {2147483647, "unsupported encoding 2147483647"}};
  for (const auto& [code, note] : cases) {
    const std::string params = R"({"definition": 1, "encoding": )" + std::to_string(code) +
                               R"(, "block_encoding": {"whatever": [1, 2]}})";
    const EncodingTable table = parse_ok(net_json(net_tensor(params)));
    const TensorEncoding& tensor = only_tensor(table);
    EXPECT_EQ(tensor.dtype, DType::kUFixed8);
    EXPECT_FALSE(tensor.quant.is_quantized()) << code;
    ASSERT_EQ(tensor.notes.size(), 1u) << code;
    EXPECT_EQ(tensor.notes[0].rfind(note, 0), 0u) << tensor.notes[0];
  }
}

TEST(EncodingsNetJson, AxisOrdersFromAxisFormats) {
  struct Case {
    const char* stored;
    const char* source;
    const char* dims;
    std::vector<uint8_t> order;
    bool noted;
  };
  const Case cases[] = {
      {"NHWC", "NCHW", "[1, 8, 8, 4]", {0, 3, 1, 2}, false},
      {"NDHWC", "NCDHW", "[1, 2, 8, 8, 4]", {0, 4, 1, 2, 3}, false},
      {"NFC", "NCF", "[1, 16, 4]", {0, 2, 1}, false},
      {"NCHW", "NCHW", "[1, 4, 8, 8]", {}, false},
      {"ANY", "ANY", "[4]", {}, false},
      {"NHWC", "ANY", "[1, 8, 8, 4]", {}, false},
      {"NONTRIVIAL", "NONTRIVIAL", "[3]", {}, false},
      {"NOT_YET_DEFINED", "NCHW", "[1, 4, 8, 8]", {}, false},
      {"NHWC", "NCH", "[1, 8, 8]", {}, false},
      {"NHWC", "NCHW", "[8, 8, 4]", {}, true},  // formats of rank 4 on a rank-3 tensor
  };
  for (const Case& c : cases) {
    const std::string tensor = std::string(R"({"dims": )") + c.dims + R"(, "axis_format": ")" +
                               c.stored + R"(", "src_axis_format": ")" + c.source + R"("})";
    const EncodingTable table = parse_ok(net_json(tensor));
    const TensorEncoding& entry = only_tensor(table);
    EXPECT_EQ(entry.axis_order, c.order) << c.stored << " " << c.source;
    EXPECT_EQ(entry.axis_format, c.stored);
    EXPECT_EQ(entry.src_axis_format, c.source);
    EXPECT_EQ(entry.notes.size(), c.noted ? 1u : 0u) << c.stored << " " << c.source;
  }
  const TensorEncoding& absent = only_tensor(parse_ok(net_json(R"({"axis_format": "NHWC"})")));
  EXPECT_TRUE(absent.axis_order.empty());
  EXPECT_EQ(absent.axis_format, "NHWC");
  EXPECT_EQ(absent.src_axis_format, "");
}

TEST(EncodingsNetJson, RealWorldOdditiesAreKeptVerbatim) {
  const EncodingTable table = parse_ok(R"json({"graph": {"tensors": {
    "huge": {"data_type": 1032, "dims": [4], "quant_params": {"definition": 1, "encoding": 0,
      "scale_offset": {"bitwidth": 8, "minimum": -1e38, "maximum": 1e38, "scale": 1e36,
                       "offset": -128}}},
    "zero": {"data_type": 1046, "quant_params": {"definition": 1, "encoding": 0,
      "scale_offset": {"scale": 0, "offset": 0}}},
    "negative": {"data_type": 1032, "quant_params": {"definition": 1, "encoding": 0,
      "scale_offset": {"scale": -0.5, "offset": 12}}},
    "bias": {"data_type": 50, "dims": [32], "quant_params": {"definition": 1, "encoding": 0,
      "scale_offset": {"bitwidth": 32, "scale": 1e-14, "offset": 0}}},
    "python_nan": {"quant_params": {"definition": 1, "encoding": 0,
      "scale_offset": {"scale": NaN, "offset": 0, "minimum": -Infinity, "maximum": Infinity}}},
    "python_inf": {"quant_params": {"definition": 1, "encoding": 1, "axis_scale_offset": {
      "axis": 0, "scale_offsets": [{"scale": Infinity, "offset": 1},
                                   {"scale": -Infinity, "offset": 2}]}}},
    "NaN [Infinity]": {"quant_params": {"definition": 1, "encoding": 0,
      "scale_offset": {"scale": 3, "offset": -1.0}}}
  }}})json");
  EXPECT_EQ(table.find("huge")->quant.scales[0], 1e36);
  EXPECT_EQ(table.find("zero")->quant.scales[0], 0.0);
  EXPECT_EQ(table.find("zero")->dtype, DType::kUFixed16);
  EXPECT_EQ(table.find("negative")->quant.scales[0], -0.5);
  EXPECT_EQ(table.find("negative")->quant.offsets[0], 12);
  EXPECT_EQ(table.find("bias")->quant.scales[0], 1e-14);
  EXPECT_EQ(table.find("bias")->dtype, DType::kInt32);
  EXPECT_EQ(table.find("bias")->quant.bitwidth, 32);
  EXPECT_TRUE(std::isnan(table.find("python_nan")->quant.scales[0]));
  const Quantization& inf = table.find("python_inf")->quant;
  EXPECT_EQ(inf.scales[0], std::numeric_limits<double>::infinity());
  EXPECT_EQ(inf.scales[1], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(inf.offsets, (std::vector<int64_t>{1, 2}));
  // Words inside strings are names, not numbers; the numbers after them keep their values.
  const TensorEncoding* named = table.find("NaN [Infinity]");
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(named->quant.scales[0], 3.0);
  EXPECT_EQ(named->quant.offsets[0], -1);  // integral floats count as integers
}

// ---------------------------------------------------------------------------------------------
// qnn-context-binary-utility JSON

constexpr const char* kContextJson = R"json({"info": {"buildId": "v2.26.0", "numGraphs": 2,
  "graphs": [
    {"info": {"graphName": "prefill", "graphInputs": [
      {"info": {"id": 1, "name": "input_ids", "type": "QNN_TENSOR_TYPE_APP_WRITE",
        "dataType": "QNN_DATATYPE_INT_32", "dimensions": [1, 128],
        "quantizeParams": {"definition": "QNN_DEFINITION_UNDEFINED",
          "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_UNDEFINED",
          "scaleOffset": {"scale": 0.0, "offset": 0}}}},
      {"info": {"name": "kv_in", "dataType": "QNN_DATATYPE_UFIXED_POINT_8",
        "dimensions": [1, 8, 128, 64],
        "quantizeParams": {"definition": "QNN_DEFINITION_DEFINED",
          "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_SCALE_OFFSET",
          "scaleOffset": {"scale": 0.0625, "offset": -128}}}}],
     "graphOutputs": [
      {"info": {"name": "logits", "dataType": "QNN_DATATYPE_FIXED_POINT_16",
        "dimensions": [1, 128, 32000],
        "quantizeParams": {"definition": "QNN_DEFINITION_DEFINED",
          "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_SCALE_OFFSET",
          "scaleOffset": {"scale": 0.001, "offset": 0}}}}]}},
    {"info": {"graphName": "decode", "graphInputs": [
      {"info": {"name": "kv_in", "dataType": "QNN_DATATYPE_UFIXED_POINT_8",
        "dimensions": [1, 8, 1, 64],
        "quantizeParams": {"definition": "QNN_DEFINITION_DEFINED",
          "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_SCALE_OFFSET",
          "scaleOffset": {"scale": 0.0625, "offset": -128}}}},
      {"info": {"name": "weights_per_axis", "dataType": "QNN_DATATYPE_SFIXED_POINT_8",
        "dimensions": [2, 16],
        "quantizeParams": {"definition": "QNN_DEFINITION_DEFINED",
          "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET",
          "axisScaleOffset": {"axis": 0, "numScaleOffsets": 2,
            "scaleOffset": [{"scale": 0.5, "offset": 0}, {"scale": 0.75, "offset": -1}]}}}}],
     "graphOutputs": [
      {"info": {"name": "token", "dataType": "QNN_DATATYPE_SFIXED_POINT_16", "dimensions": [1],
        "quantizeParams": {"definition": "QNN_DEFINITION_IMPL_GENERATED"}}},
      {"info": {"name": "blocky", "dataType": "QNN_DATATYPE_UFIXED_POINT_8", "dimensions": [1],
        "quantizeParams": {"definition": "QNN_DEFINITION_DEFINED",
          "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_BLOCK"}}}]}}
  ]}})json";

TEST(EncodingsContextBinary, GraphsAreMergedAndEachTensorNamesItsGraph) {
  const EncodingTable table = parse_ok(kContextJson);
  ASSERT_EQ(table.sources.size(), 1u);
  EXPECT_EQ(table.sources[0].format, EncodingFormat::kContextBinaryJson);
  EXPECT_EQ(table.tensors.size(), 6u);
  EXPECT_TRUE(table.graph.empty());

  const TensorEncoding* ids = table.find("input_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, DType::kInt32);
  EXPECT_EQ(ids->dims, (std::vector<uint64_t>{1, 128}));
  EXPECT_FALSE(ids->quant.is_quantized());
  EXPECT_EQ(ids->graph, "prefill");

  const TensorEncoding* kv = table.find("kv_in");  // in both graphs, the first one is kept
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->graph, "prefill");
  EXPECT_EQ(kv->dtype, DType::kUFixed8);
  EXPECT_EQ(kv->dims, (std::vector<uint64_t>{1, 8, 128, 64}));
  EXPECT_EQ(kv->quant.scales, std::vector<double>{0.0625});
  EXPECT_EQ(kv->quant.offsets, std::vector<int64_t>{-128});
  ASSERT_EQ(kv->notes.size(), 1u);  // its dims differ between the graphs
  EXPECT_NE(kv->notes[0].find("[1, 8, 1, 64]"), std::string::npos) << kv->notes[0];

  const TensorEncoding* logits = table.find("logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->dtype, DType::kSFixed16);  // "FIXED_POINT_16" as onnxruntime spells it
  EXPECT_EQ(logits->quant.scales, std::vector<double>{0.001});
  EXPECT_EQ(logits->quant.convention, QuantConvention::kQnnOffset);

  const TensorEncoding* weights = table.find("weights_per_axis");
  ASSERT_NE(weights, nullptr);
  EXPECT_EQ(weights->graph, "decode");
  EXPECT_EQ(weights->dtype, DType::kSFixed8);
  EXPECT_EQ(weights->quant.axis, 0);
  EXPECT_EQ(weights->quant.scales, (std::vector<double>{0.5, 0.75}));
  EXPECT_EQ(weights->quant.offsets, (std::vector<int64_t>{0, -1}));

  const TensorEncoding* token = table.find("token");
  ASSERT_NE(token, nullptr);
  EXPECT_FALSE(token->quant.is_quantized());
  ASSERT_EQ(token->notes.size(), 1u);
  EXPECT_NE(token->notes[0].find("IMPL_GENERATED"), std::string::npos);

  const TensorEncoding* blocky = table.find("blocky");
  ASSERT_NE(blocky, nullptr);
  EXPECT_FALSE(blocky->quant.is_quantized());
  ASSERT_EQ(blocky->notes.size(), 1u);
  EXPECT_EQ(blocky->notes[0].rfind("unsupported encoding 4 (BLOCK)", 0), 0u) << blocky->notes[0];
}

// A context-binary document with one graph `graph` whose inputs are `inputs` (JSON list items).
std::string context_json(std::string_view inputs) {
  return R"({"info": {"graphs": [{"info": {"graphName": "g", "graphInputs": [)" +
         std::string(inputs) + "]}}]}}";
}

// One context-binary tensor entry named "x" with `quantize_params`.
std::string context_tensor(std::string_view quantize_params, std::string_view dims = "[2, 3]") {
  return R"({"info": {"name": "x", "dataType": "QNN_DATATYPE_UFIXED_POINT_8", "dimensions": )" +
         std::string(dims) + R"(, "quantizeParams": )" + std::string(quantize_params) + "}}";
}

TEST(EncodingsContextBinary, SameTensorWithAnotherEncodingInAnotherGraphIsAConflict) {
  std::string text = kContextJson;
  const std::string decode_kv = R"("scaleOffset": {"scale": 0.0625, "offset": -128}}}},
      {"info": {"name": "weights_per_axis")";
  const size_t at = text.find(decode_kv);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string_view(R"("scaleOffset": {"scale": 0.0625)").size(),
               R"("scaleOffset": {"scale": 0.0626)");
  expect_corrupt(text,
                 "info.graphs[1].info.graphInputs[0]: tensor 'kv_in' in graph 'decode' "
                 "differs from graph 'prefill': scale 0.0625 vs 0.0626");
}

TEST(EncodingsContextBinary, StructuralErrors) {
  const char* defined = R"("definition": "QNN_DEFINITION_DEFINED", )";
  expect_corrupt(context_json(context_tensor(
                     R"({"definition": "QNN_DEFINITION_MAYBE", "quantizationEncoding": 0})")),
                 "info.graphs[0].info.graphInputs[0].info.quantizeParams.definition: expected "
                 "QNN_DEFINITION_DEFINED");
  expect_corrupt(context_json(context_tensor(
                     std::string("{") + defined +
                     R"("quantizationEncoding": "QNN_QUANTIZATION_ENCODING_SCALE_OFFSET"})")),
                 "quantizeParams.scaleOffset: required field missing");
  expect_corrupt(
      context_json(
          context_tensor(std::string("{") + defined +
                         R"("quantizationEncoding": "QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET",
             "axisScaleOffset": {"axis": 1, "numScaleOffsets": 2,
               "scaleOffset": [{"scale": 1, "offset": 0}, {"scale": 1, "offset": 0}]}})")),
      "quantizeParams.axisScaleOffset.scaleOffset: 2 per-axis entries, but dims [2, 3] have 3");
  expect_corrupt(context_json(R"({"info": {"name": "x", "dataType": "QNN_DATATYPE_FLOAT_128"}})"),
                 "graphInputs[0].info.dataType: unknown QNN data type");
  expect_corrupt(context_json(R"({"info": {"dataType": "QNN_DATATYPE_FLOAT_32"}})"),
                 "graphInputs[0].info.name: required field missing");
  expect_corrupt(R"({"info": {"graphs": {"g": 1}}})", "info.graphs: expected an array");
  expect_corrupt(R"({"info": {"graphs": [{"info": {"graphName": 3}}]}})",
                 "info.graphs[0].info.graphName: expected a string, found the number 3");
}

TEST(EncodingsContextBinary, UnknownEncodingNamesAreKeptWithANote) {
  const EncodingTable table = parse_ok(context_json(context_tensor(
      R"({"definition": 1, "quantizationEncoding": "QNN_QUANTIZATION_ENCODING_FUTURE"})")));
  const TensorEncoding& tensor = only_tensor(table);
  EXPECT_FALSE(tensor.quant.is_quantized());
  ASSERT_EQ(tensor.notes.size(), 1u);
  EXPECT_NE(tensor.notes[0].find("QNN_QUANTIZATION_ENCODING_FUTURE"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Plain map

TEST(EncodingsPlainMap, OffsetsInQnnConvention) {
  const EncodingTable table = parse_ok(R"({
    "act": {"scale": 0.02, "offset": -5, "bitwidth": 8, "dtype": "UFIXED_POINT_8"},
    "symmetric": {"scale": 0.5, "offset": 0},
    "weight": {"axis": 0, "scales": [0.1, 0.2, 0.3], "offsets": [1, 2, 3],
               "dtype": "QNN_DATATYPE_SFIXED_POINT_16"},
    "weight_no_offsets": {"axis": 2, "scales": [0.1, 0.2]}})");
  ASSERT_EQ(table.sources.size(), 1u);
  EXPECT_EQ(table.sources[0].format, EncodingFormat::kPlainMap);
  ASSERT_EQ(table.tensors.size(), 4u);
  const TensorEncoding* act = table.find("act");
  EXPECT_EQ(act->quant.scales, std::vector<double>{0.02});
  EXPECT_EQ(act->quant.offsets, std::vector<int64_t>{-5});
  EXPECT_EQ(act->quant.convention, QuantConvention::kQnnOffset);
  EXPECT_EQ(act->quant.bitwidth, 8);
  EXPECT_EQ(act->quant.axis, -1);
  EXPECT_EQ(act->dtype, DType::kUFixed8);
  EXPECT_TRUE(act->dims.empty());
  EXPECT_EQ(table.find("symmetric")->quant.offsets, std::vector<int64_t>{0});
  EXPECT_FALSE(table.find("symmetric")->dtype.has_value());
  const TensorEncoding* weight = table.find("weight");
  EXPECT_EQ(weight->quant.axis, 0);
  EXPECT_EQ(weight->quant.scales, (std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_EQ(weight->quant.offsets, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(weight->dtype, DType::kSFixed16);
  EXPECT_EQ(table.find("weight_no_offsets")->quant.offsets, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(table.find("weight_no_offsets")->quant.axis, 2);
}

TEST(EncodingsPlainMap, ZeroPointsAndDTypeSpellings) {
  const EncodingTable table = parse_ok(R"({
    "act": {"scale": 0.02, "zero_point": 128, "dtype": 1032},
    "signed": {"scale": 1, "offset": 0, "dtype": "FIXED_POINT_8"},
    "weight": {"axis": 1, "scales": [0.1, 0.2], "zero_points": [0, -4], "dtype": "1046"}})");
  const TensorEncoding* act = table.find("act");
  EXPECT_EQ(act->quant.convention, QuantConvention::kZeroPoint);
  EXPECT_EQ(act->quant.offsets, std::vector<int64_t>{128});
  EXPECT_EQ(act->dtype, DType::kUFixed8);
  EXPECT_EQ(table.find("signed")->dtype, DType::kSFixed8);
  EXPECT_EQ(table.find("signed")->quant.convention, QuantConvention::kQnnOffset);
  const TensorEncoding* weight = table.find("weight");
  EXPECT_EQ(weight->quant.convention, QuantConvention::kZeroPoint);
  EXPECT_EQ(weight->quant.offsets, (std::vector<int64_t>{0, -4}));
  EXPECT_EQ(weight->dtype, DType::kUFixed16);
}

TEST(EncodingsPlainMap, StructuralErrors) {
  expect_corrupt(R"({"t": {"scale": 0.1, "offest": 3}})", R"(["t"].offest: unknown key)");
  expect_corrupt(R"({"t": {"scale": 0.1, "offset": 0}, "u": {"offset": 3}})",
                 R"(["u"].scale: required field missing)");
  // An offset left out is not read as 0: it would shift every value unseen.
  expect_corrupt(R"({"t": {"scale": 0.1, "offset": 0}, "u": {"scale": 0.5}})",
                 R"(["u"].offset: required field missing ("offset" or "zero_point")");
  expect_corrupt(R"({"t": {"scale": "0.1"}})",
                 R"(["t"].scale: expected a number, found the string '0.1')");
  expect_corrupt(R"({"t": {"scale": 0.1, "offset": 1, "zero_point": 1}})",
                 R"(["t"].zero_point: cannot be combined with "offset")");
  expect_corrupt(R"({"t": {"scale": 0.1, "axis": 0}})",
                 R"(["t"].axis: cannot be combined with "scale")");
  expect_corrupt(R"({"t": {"scales": [0.1]}})", R"(["t"].axis: required field missing)");
  expect_corrupt(R"({"t": {"axis": 0, "scales": [0.1, 0.2], "offsets": [1]}})",
                 R"(["t"].offsets: 1 offsets for 2 scales)");
  expect_corrupt(R"({"t": {"axis": 0, "scales": []}})",
                 R"(["t"].scales: expected at least one scale)");
  expect_corrupt(R"({"t": {"axis": -1, "scales": [1]}})",
                 R"(["t"].axis: expected an integer in [0, 2147483647], found the number -1)");
  expect_corrupt(R"({"t": {"scale": 1, "offset": 0, "dtype": "UFIXED_POINT_7"}})",
                 R"(["t"].dtype: unknown QNN data type 'UFIXED_POINT_7')");
  expect_corrupt(R"({"t": {"scale": 1, "offset": 0, "bitwidth": 65}})",
                 R"(["t"].bitwidth: expected an integer in [0, 64], found the number 65)");
  expect_corrupt(R"({"t": {"scale": 1, "offset": 2.5}})",
                 R"(["t"].offset: expected an integer within int64, found the number 2.5)");
}

// ---------------------------------------------------------------------------------------------
// Structural errors of the converter form

TEST(EncodingsErrors, ConverterStructuralErrorsNameTheJsonPath) {
  const std::string tensor = R"(graph.tensors["conv@0"])";
  const std::string params = tensor + ".quant_params";
  expect_corrupt(net_json(net_tensor(
                     R"({"definition": 1, "encoding": 0, "scale_offset": {"scale": "0.1",
                         "offset": 0}})")),
                 params + ".scale_offset.scale: expected a number, found the string '0.1'");
  expect_corrupt(net_json(net_tensor(R"({"definition": 1, "encoding": 0})")),
                 params + ".scale_offset: required field missing");
  expect_corrupt(net_json(net_tensor(R"({"encoding": 0})")),
                 params + ".definition: required field missing");
  expect_corrupt(net_json(net_tensor(R"({"definition": 3, "encoding": 0})")),
                 params + ".definition: expected 0, 1 or 2147483647, found 3");
  expect_corrupt(net_json(net_tensor(R"({"definition": 1, "encoding": -2})")),
                 params + ".encoding: expected an integer in [0, 2147483647]");
  expect_corrupt(net_json(net_tensor(R"({"definition": 1, "encoding": 0,
                                         "scale_offset": [0.1, 0]})")),
                 params + ".scale_offset: expected an object, found an array");
  expect_corrupt(net_json(net_tensor(R"({"definition": 1, "encoding": 0,
                                         "scale_offset": {"scale": 0.1}})")),
                 params + ".scale_offset.offset: required field missing");
  expect_corrupt(net_json(net_tensor(R"({"definition": "1", "encoding": 0})")),
                 params + ".definition: expected an integer within int64, found the string '1'");
  expect_corrupt(net_json(net_tensor("[]")), params + ": expected an object, found an array");
}

TEST(EncodingsErrors, PerAxisStructuralErrors) {
  const std::string body = R"(graph.tensors["conv@0"].quant_params.axis_scale_offset)";
  const auto axis_params = [](std::string_view axis, std::string_view count,
                              std::string_view pairs) {
    return R"({"definition": 1, "encoding": 1, "axis_scale_offset": {"axis": )" +
           std::string(axis) + R"(, "num_scale_offsets": )" + std::string(count) +
           R"(, "scale_offsets": [)" + std::string(pairs) + "]}}";
  };
  const std::string three_pairs = R"({"scale": 1, "offset": 0}, {"scale": 1, "offset": 0},
                              {"scale": 1, "offset": 0})";
  expect_corrupt(net_json(net_tensor(axis_params("3", "4", three_pairs + R"(, {"scale": true,
                                                                "offset": 0})"))),
                 body + ".scale_offsets[3].scale: expected a number, found true");
  expect_corrupt(
      net_json(net_tensor(axis_params("3", "5", three_pairs + R"(, {"scale": 1,
                                                                "offset": 0})"))),
      body + ".num_scale_offsets: states 5 entries, but " + body + ".scale_offsets has 4");
  expect_corrupt(net_json(net_tensor(axis_params("4", "3", three_pairs))),
                 body + ".axis: axis 4 is outside dims [1, 8, 8, 4] (rank 4)");
  expect_corrupt(net_json(net_tensor(axis_params("3", "3", three_pairs))),
                 body +
                     ".scale_offsets: 3 per-axis entries, but dims [1, 8, 8, 4] have 4 on "
                     "axis 3");
  expect_corrupt(net_json(net_tensor(axis_params("0", "0", ""))),
                 body + ".scale_offsets: expected at least one scale/offset pair");

  const std::string bw = R"(graph.tensors["conv@0"].quant_params.bw_axis_scale_offset)";
  const auto bw_params = [](std::string_view rest) {
    return R"({"definition": 1, "encoding": 3, "bw_axis_scale_offset": {"bitwidth": 4, )" +
           std::string(rest) + "}}";
  };
  expect_corrupt(net_json(net_tensor(bw_params(R"("axis": 3, "scales": [1, 2, 3, 4],
                                                  "offsets": [0, 0, 0])"))),
                 bw + ".offsets: 3 offsets for 4 scales");
  expect_corrupt(net_json(net_tensor(bw_params(R"("axis": 3, "num_elements": 3,
                                                  "scales": [1, 2, 3, 4])"))),
                 bw + ".num_elements: states 3, but there are 4 scales");
  expect_corrupt(net_json(net_tensor(bw_params(R"("axis": 0, "scales": [1, 2, 3, 4])"))),
                 bw + ".scales: 4 per-axis entries, but dims [1, 8, 8, 4] have 1 on axis 0");
  expect_corrupt(net_json(net_tensor(bw_params(R"("axis": 3, "scales": [1, 2, 3, "4"])"))),
                 bw + ".scales[3]: expected a number, found the string '4'");
  expect_corrupt(net_json(net_tensor(R"({"definition": 1, "encoding": 3, "bw_axis_scale_offset":
                              {"axis": 3, "scales": [1, 2, 3, 4]}})")),
                 bw + ".bitwidth: required field missing");
  // Without dims, axis and count cannot be checked against them.
  const EncodingTable table = parse_ok(net_json(R"({"quant_params": {"definition": 1,
      "encoding": 1, "axis_scale_offset": {"axis": 9, "scale_offsets": [
        {"scale": 1, "offset": 0}]}}})"));
  EXPECT_EQ(only_tensor(table).quant.axis, 9);
}

TEST(EncodingsErrors, OffsetsDimsAndDataTypes) {
  const std::string tensor = R"(graph.tensors["conv@0"])";
  const auto per_tensor = [](std::string_view offset) {
    return net_json(net_tensor(R"({"definition": 1, "encoding": 0, "scale_offset":
        {"scale": 1, "offset": )" +
                               std::string(offset) + "}}"));
  };
  expect_corrupt(per_tensor("9223372036854775808"),
                 tensor + ".quant_params.scale_offset.offset: expected an integer within int64");
  expect_corrupt(per_tensor("-1e30"),
                 "scale_offset.offset: expected an integer within int64, "
                 "found the number -1e+30");
  const EncodingTable extreme = parse_ok(per_tensor("-9223372036854775808"));
  EXPECT_EQ(only_tensor(extreme).quant.offsets[0], std::numeric_limits<int64_t>::min());

  expect_corrupt(net_json(net_tensor("{}", "[1, -2]")),
                 tensor + ".dims[1]: expected an integer >= 0, found the number -2");
  expect_corrupt(net_json(net_tensor("{}", "[1, 2.5]")),
                 tensor + ".dims[1]: expected an integer >= 0, found the number 2.5");
  expect_corrupt(net_json(net_tensor("{}", R"([1, "2"])")),
                 tensor + ".dims[1]: expected an integer >= 0, found the string '2'");
  expect_corrupt(net_json(net_tensor("{}", "4")), tensor + ".dims: expected an array");
  const EncodingTable integral =
      parse_ok(net_json(net_tensor(R"({"definition": 2147483647})", "[1.0, 2e1]")));
  EXPECT_EQ(only_tensor(integral).dims, (std::vector<uint64_t>{1, 20}));

  expect_corrupt(net_json(R"({"data_type": 1033})"),
                 tensor + ".data_type: unknown QNN data type code 1033");
  expect_corrupt(net_json(R"({"data_type": -1})"),
                 tensor + ".data_type: expected an integer in [0, 4294967295]");
  expect_corrupt(net_json(R"({"axis_format": 4})"),
                 tensor + ".axis_format: expected a string, found the number 4");
  expect_corrupt(R"({"graph": {"tensors": []}})", "graph.tensors: expected an object");
  expect_corrupt(R"({"graph": {"tensors": {}, "nodes": {"n": {"input_names": ["a", 2]}}}})",
                 R"(graph.nodes["n"].input_names[1]: expected a string, found the number 2)");
  expect_corrupt(R"({"graph": {"tensors": {}, "nodes": {"n": {"type": ["Conv"]}}}})",
                 R"(graph.nodes["n"].type: expected a string, found an array)");
}

TEST(EncodingsErrors, NotJsonOrNotAnEncodingsFile) {
  expect_corrupt(R"({"graph": {"tensors": {"a": }}})", "not valid JSON: ");
  expect_corrupt("{\n  \"a\": [1, 2,\n}", "line 3, column 1");
  expect_corrupt("", "not valid JSON");
  expect_corrupt("{\"a\": \"\xff\"}", "not valid JSON");  // invalid UTF-8
  expect_corrupt(R"({"t": {"scale": 1e999}})", "cannot read the JSON: number overflow");
  expect_corrupt("[1, 2]", "not an encodings file: expected {\"graph\": {\"tensors\": ...}}");
  expect_corrupt("42", "found the number 42");
  expect_corrupt(
      R"({"version": "0.6.1", "activation_encodings": {"conv.out": [{"bitwidth": 8}]},
          "param_encodings": {}})",
      "(plain encodings map), found an object with keys 'activation_encodings', 'param_encodings', "
      "'version'");
  expect_corrupt(R"({"graph": {"nodes": {}}})", "not an encodings file");
  // The same name twice in one table would silently keep only the last entry.
  expect_corrupt(R"({"t": {"scale": 1}, "t": {"scale": 2}})",
                 R"(["t"]: the same name appears twice)");
  expect_corrupt(R"({"graph": {"tensors": {"a": {}, "b": {}, "a": {}}}})",
                 R"(graph.tensors["a"]: the same name appears twice)");
}

TEST(EncodingsErrors, EmptyPlainMapIsAnEmptyTable) {
  const EncodingTable table = parse_ok("{}");
  EXPECT_TRUE(table.tensors.empty());
  ASSERT_EQ(table.sources.size(), 1u);
  EXPECT_EQ(table.sources[0].format, EncodingFormat::kPlainMap);
}

TEST(EncodingsErrors, HostileInputFailsCleanly) {
  const size_t deep = 100000;
  expect_corrupt(std::string(deep, '[') + std::string(deep, ']'),
                 "nested deeper than 64 levels at line 1, column 65");
  std::string objects;
  for (size_t i = 0; i < deep; ++i) objects += "{\"a\":";
  expect_corrupt(objects + "1" + std::string(deep, '}'), "nested deeper than 64 levels");
  // Exactly the limit is parsed (and then refused for its shape, not its depth).
  const int limit = kMaxEncodingsDepth;
  expect_corrupt(std::string(limit, '[') + std::string(limit, ']'), "not an encodings file");
  // Brackets inside names do not count as nesting.
  const std::string bracket_name = std::string(500, '[') + "\\\"{";
  const EncodingTable table = parse_ok(R"({")" + bracket_name + R"(": {"scale": 1, "offset": 0}})");
  EXPECT_NE(table.find(std::string(500, '[') + "\"{"), nullptr);
  // A name with control characters and a huge length stays one short line in messages.
  const std::string name = "evil\\n\\u001b[31m" + std::string(100000, 'x');
  const Result<EncodingTable> result = parse(R"({")" + name + R"(": {"scale": "x"}})");
  expect_error(result, ErrorCode::kCorrupt, R"(["evil\x0a\x1b[31mxxx)");
  EXPECT_LT(result.status().message().size(), 400u);
}

// ---------------------------------------------------------------------------------------------
// Files

TEST(EncodingsFiles, LoadReadsTheFileAndNamesItInErrors) {
  const qd::testing::TempDir dir;
  const std::string path = dir.file("model_net.json");
  std::ofstream(path) << net_json(net_tensor(R"({"definition": 1, "encoding": 0,
      "scale_offset": {"scale": 0.25, "offset": -3}})"));
  const Result<EncodingTable> table = load_encodings(path);
  ASSERT_THAT(table, IsOk());
  EXPECT_EQ(table->sources[0].path, path);
  EXPECT_EQ(table->find("conv@0")->source, path);
  EXPECT_EQ(table->find("conv@0")->quant.scales, std::vector<double>{0.25});

  const std::string bad = dir.file("bad.json");
  std::ofstream(bad) << R"({"t": {"scale": 1, "offset": "x"}})";
  const Result<EncodingTable> failed = load_encodings(bad);
  ASSERT_THAT(failed, StatusIs(ErrorCode::kCorrupt));
  EXPECT_EQ(failed.status().message().rfind("encodings '" + bad + "': [\"t\"].offset: ", 0), 0u)
      << failed.status().message();

  const Result<EncodingTable> missing = load_encodings(dir.file("absent.json"));
  ASSERT_THAT(missing, StatusIs(ErrorCode::kNotFound));
  EXPECT_NE(missing.status().message().find("absent.json"), std::string::npos);

  const Result<EncodingTable> directory = load_encodings(dir.path().string());
  ASSERT_THAT(directory, StatusIs(ErrorCode::kIo));
}

TEST(EncodingsFiles, OversizedFileIsRefusedBeforeReading) {
  const qd::testing::TempDir dir;
  const std::string path = dir.file("huge.json");
  std::ofstream(path).put('{');
  std::filesystem::resize_file(path, kMaxEncodingsBytes + 1);  // sparse: costs no disk
  const Result<EncodingTable> table = load_encodings(path);
  ASSERT_THAT(table, StatusIs(ErrorCode::kCorrupt));
  EXPECT_NE(table.status().message().find("larger than"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Several files

EncodingTable parse_named(std::string_view text, const std::string& source) {
  Result<EncodingTable> table = parse_encodings(text, source);
  EXPECT_THAT(table, IsOk());
  return table.is_ok() ? std::move(table).value() : EncodingTable{};
}

TEST(EncodingsMerge, LaterFilesAddTensorsAndIdenticalDuplicatesAreFine) {
  EncodingTable into = parse_named(R"({"graph": {"tensors": {
      "a": {"data_type": 1032, "dims": [1, 4], "quant_params": {"definition": 1, "encoding": 0,
            "scale_offset": {"scale": 0.5, "offset": -128}}}},
      "nodes": {"n1": {"type": "Relu", "input_names": ["x"], "output_names": ["a"]}}}})",
                                   "part1_net.json");
  EncodingTable more = parse_named(R"({"graph": {"tensors": {
      "b": {"data_type": 1032, "quant_params": {"definition": 2147483647}}},
      "nodes": {"n1": {"type": "Relu", "input_names": ["x"], "output_names": ["a"]},
                "n2": {"type": "Add", "input_names": ["a"], "output_names": ["b"]}}}})",
                                   "part2_net.json");
  ASSERT_THAT(merge_encodings(into, std::move(more)), IsOk());
  // The same encoding written as a zero point, with a bitwidth: equal, the first entry stays.
  EncodingTable map = parse_named(R"({"a": {"scale": 0.5, "zero_point": 128, "bitwidth": 8},
                                      "c": {"scale": 2, "offset": 0}})",
                                  "extra.json");
  const Status merged = merge_encodings(into, std::move(map));
  ASSERT_THAT(merged, IsOk());

  ASSERT_EQ(into.sources.size(), 3u);
  EXPECT_EQ(into.sources[0].path, "part1_net.json");
  EXPECT_EQ(into.sources[1].path, "part2_net.json");
  EXPECT_EQ(into.sources[2].path, "extra.json");
  EXPECT_EQ(into.sources[2].format, EncodingFormat::kPlainMap);
  EXPECT_EQ(into.tensors.size(), 3u);
  const TensorEncoding* a = into.find("a");
  EXPECT_EQ(a->source, "part1_net.json");
  EXPECT_EQ(a->quant.convention, QuantConvention::kQnnOffset);
  EXPECT_EQ(a->quant.offsets, std::vector<int64_t>{-128});
  EXPECT_EQ(a->quant.bitwidth, 8);  // gained from the duplicate
  EXPECT_EQ(a->dims, (std::vector<uint64_t>{1, 4}));
  EXPECT_EQ(into.find("b")->source, "part2_net.json");
  EXPECT_EQ(into.find("c")->source, "extra.json");
  ASSERT_EQ(into.graph.size(), 2u);  // n1 is in both files once
  EXPECT_EQ(into.graph[0].name, "n1");
  EXPECT_EQ(into.graph[1].name, "n2");

  EncodingTable empty;
  ASSERT_THAT(merge_encodings(empty, parse_named("{}", "none.json")), IsOk());
  EXPECT_EQ(empty.sources.size(), 1u);
}

TEST(EncodingsMerge, ConflictsNameBothFilesAndLeaveTheTableUnchanged) {
  EncodingTable into = parse_named(R"({"a": {"scale": 0.5, "offset": -128},
                                       "w": {"axis": 0, "scales": [1, 2], "dtype": 776}})",
                                   "first.json");
  const auto conflict = [&](std::string_view text, std::string_view expected) {
    const Status status = merge_encodings(into, parse_named(text, "second.json"));
    ASSERT_THAT(status, StatusIs(ErrorCode::kCorrupt));
    EXPECT_EQ(status.message().rfind("encodings 'second.json': ", 0), 0u) << status.message();
    EXPECT_NE(status.message().find(expected), std::string::npos) << status.message();
    EXPECT_EQ(into.sources.size(), 1u);
    EXPECT_EQ(into.tensors.size(), 2u);
    EXPECT_EQ(into.find("new"), nullptr);
  };
  conflict(R"({"new": {"scale": 1, "offset": 0}, "a": {"scale": 0.25, "offset": -128}})",
           "tensor 'a' conflicts with 'first.json': scale 0.5 vs 0.25");
  conflict(R"({"new": {"scale": 1, "offset": 0}, "a": {"scale": 0.5, "zero_point": -128}})",
           "tensor 'a' conflicts with 'first.json': offset -128 vs zero point -128");
  conflict(R"({"w": {"axis": 0, "scales": [1, 3]}})",
           "tensor 'w' conflicts with 'first.json': channel 1: scale 2 vs 3");
  conflict(R"({"w": {"axis": 1, "scales": [1, 2]}})",
           "per-axis on axis 0 with 2 channels vs per-axis on axis 1 with 2 channels");
  conflict(R"({"w": {"axis": 0, "scales": [1, 2], "dtype": "SFIXED_POINT_16"}})",
           "dtype SFIXED_POINT_8 vs SFIXED_POINT_16");
  conflict(R"({"graph": {"tensors": {"a": {"quant_params": {"definition": 2147483647}}}}})",
           "per-tensor vs no quantization");
  const Status same =
      merge_encodings(into, parse_named(R"({"a": {"scale": 0.5, "offset": -128, "bitwidth": 8},
                            "new": {"scale": 1, "offset": 0}})",
                                        "second.json"));
  ASSERT_THAT(same, IsOk());
  EXPECT_EQ(into.tensors.size(), 3u);
  EXPECT_EQ(into.sources.size(), 2u);

  EncodingTable nodes = parse_named(R"({"graph": {"tensors": {},
      "nodes": {"n": {"type": "Relu", "input_names": ["x"]}}}})",
                                    "a_net.json");
  const Status differs = merge_encodings(nodes, parse_named(R"({"graph": {"tensors": {},
      "nodes": {"n": {"type": "Relu", "input_names": ["y"]}}}})",
                                                            "b_net.json"));
  ASSERT_FALSE(differs.is_ok());
  EXPECT_NE(differs.message().find("encodings 'b_net.json': node 'n' differs"), std::string::npos)
      << differs.message();
  EXPECT_NE(differs.message().find("'a_net.json'"), std::string::npos) << differs.message();
  EXPECT_EQ(nodes.graph[0].inputs, std::vector<std::string>{"x"});
}

TEST(EncodingsMerge, NonFiniteScalesEqualThemselves) {
  EncodingTable into = parse_named(R"({"a": {"scale": NaN, "offset": 0}})", "one.json");
  ASSERT_TRUE(
      merge_encodings(into, parse_named(R"({"a": {"scale": NaN, "offset": 0}})", "two.json"))
          .is_ok());
  EXPECT_TRUE(std::isnan(into.find("a")->quant.scales[0]));
}

// ---------------------------------------------------------------------------------------------
// Names and helpers

TEST(EncodingsDType, QnnNamesAndCodes) {
  const std::pair<const char*, DType> cases[] = {
      {"QNN_DATATYPE_UFIXED_POINT_8", DType::kUFixed8},
      {"UFIXED_POINT_8", DType::kUFixed8},
      {"ufixed_point_16", DType::kUFixed16},
      {"QNN_DATATYPE_SFIXED_POINT_8", DType::kSFixed8},
      {"QNN_DATATYPE_FIXED_POINT_8", DType::kSFixed8},
      {"FIXED_POINT_16", DType::kSFixed16},
      {"QNN_DATATYPE_FLOAT_32", DType::kFloat32},
      {"INT_32", DType::kInt32},
      {"BOOL_8", DType::kBool8},
      {"1032", DType::kUFixed8},
      {"562", DType::kFloat32},
  };
  for (const auto& [name, dtype] : cases) {
    const Result<DType> parsed = dtype_from_qnn_name(name);
    ASSERT_THAT(parsed, IsOk()) << name;
    EXPECT_EQ(*parsed, dtype) << name;
  }
  for (const char* name : {"", "QNN_DATATYPE_", "UFIXED_POINT_7", "1033", "FIXED_POINT_",
                           "QNN_DATATYPE_STRING", "-8", "99999999999"}) {
    const Result<DType> parsed = dtype_from_qnn_name(name);
    ASSERT_THAT(parsed, StatusIs(ErrorCode::kInvalidArgument)) << name;
  }
}

TEST(EncodingsDType, FormatNamesAndAxisOrders) {
  EXPECT_EQ(encoding_format_name(EncodingFormat::kConverterNetJson), "converter net JSON");
  EXPECT_EQ(encoding_format_name(EncodingFormat::kContextBinaryJson), "context-binary JSON");
  EXPECT_EQ(encoding_format_name(EncodingFormat::kPlainMap), "plain encodings map");
  EXPECT_EQ(axis_order_from_formats("NHWC", "NCHW"), (std::vector<uint8_t>{0, 3, 1, 2}));
  EXPECT_EQ(axis_order_from_formats("NCHW", "NHWC"), (std::vector<uint8_t>{0, 2, 3, 1}));
  EXPECT_TRUE(axis_order_from_formats("", "").empty());
  EXPECT_TRUE(axis_order_from_formats("NHWW", "NWHW").empty());
  EXPECT_TRUE(axis_order_from_formats("NHWC", "NHWX").empty());
  EXPECT_TRUE(axis_order_from_formats("ABCDEFGHI", "IHGFEDCBA").empty());  // beyond kMaxRank
  EXPECT_TRUE(axis_order_from_formats("N1WC", "NCW1").empty());
}

}  // namespace
}  // namespace qd::importers
