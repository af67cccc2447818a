// `qnn-debug diff` end to end on stores whose culprit is known: a chain of ops where op 3's
// device encoding is wrong (too small a scale: it clips), so op 3 must be the first divergence
// and the top introducer; later ops inherit the error but add none.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "../common/cli_runner.h"
#include "../common/report_json.h"
#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "compare_testing.h"
#include "qnn_debug/compare/compare.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/pipeline/diff.h"
#include "qnn_debug/report/json.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using nlohmann::json;

constexpr uint64_t kElements = 1 << 20;  // 4 MiB of float32: several 1 MiB streaming chunks

std::vector<float> op_output(int op, uint64_t elements) {
  std::vector<float> v(elements);
  for (uint64_t i = 0; i < elements; ++i) {
    v[i] = static_cast<float>(std::sin(0.001 * double(i) * op + op) * (1.0 + 0.1 * op));
  }
  return v;
}

// QNN offset convention, offset 0: q = clamp(round(x / scale)).
std::vector<int8_t> quantize(const std::vector<float>& x, double scale) {
  std::vector<int8_t> q(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] / scale), -128.0, 127.0));
  }
  return q;
}

template <typename T>
std::span<const uint8_t> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

TensorRecord record(const std::string& name, std::vector<int64_t> handles, DType dtype) {
  TensorRecord r;
  r.name = name;
  r.handles = std::move(handles);
  r.dtype = dtype;
  r.dims = {kElements};
  return r;
}

// Reference: ops 1..5 in float. Device: int8 per-tensor; op 3 clips (scale 1/8 of what its range
// needs), and ops 4-5 carry op 3's damage forward through their inputs.
void write_stores(const std::string& ref_path, const std::string& device_path) {
  auto ref = StoreWriter::create(ref_path, {"diff_test", "cpu", "", "chain", 1}).value();
  auto device = StoreWriter::create(device_path, {"diff_test", "QnnHtp", "", "chain", 1}).value();
  ASSERT_THAT(ref->begin_run("r", 1), IsOk());
  ASSERT_THAT(device->begin_run("d", 1), IsOk());
  std::vector<float> carried(kElements, 0.0f);  // damage from op 3 onward
  for (int op = 1; op <= 5; ++op) {
    const std::string name = "op" + std::to_string(op) + "__debugID_" + std::to_string(op);
    const std::vector<float> exact = op_output(op, kElements);
    ASSERT_THAT(ref->append_tensor(record(name, {op}, DType::kFloat32), bytes_of(exact), 0),
                IsOk());
    const double good_scale = (1.0 + 0.1 * op) / 127.0;
    const double scale = op == 3 ? good_scale / 8 : good_scale;
    std::vector<float> target = exact;
    for (uint64_t i = 0; i < kElements; ++i) target[i] += carried[i];
    const std::vector<int8_t> q = quantize(target, scale);
    if (op == 3) {
      for (uint64_t i = 0; i < kElements; ++i) carried[i] = float(q[i] * scale) - exact[i];
    }
    TensorRecord r = record(name, {op}, DType::kSFixed8);
    r.quant.scales = {scale};
    r.quant.offsets = {0};
    ASSERT_THAT(device->append_tensor(r, bytes_of(q), 0), IsOk());
  }
  ASSERT_THAT(ref->end_run(2, 0), IsOk());
  ASSERT_THAT(device->end_run(2, 0), IsOk());
  ASSERT_THAT(ref->close(), IsOk());
  ASSERT_THAT(device->close(), IsOk());
}

using testing::CliResult;
using testing::slurp;

using testing::real;
using testing::run_cli;

class Diff : public ::testing::Test {
 protected:
  void SetUp() override {
    ref_ = dir_.file("ref.h5");
    device_ = dir_.file("device.h5");
    write_stores(ref_, device_);
  }
  testing::TempDir dir_;
  std::string ref_, device_;
};

TEST_F(Diff, FindsTheOpThatIntroducesTheError) {
  const std::string report = dir_.file("report.json");
  CliResult r =
      run_cli("diff " + ref_ + " " + device_ + " --json " + report + " --jobs 2 --chunk-kib 1024");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // the default policy fails
  EXPECT_NE(r.out.find("first divergence: group h3"), std::string::npos) << r.out;
  const json doc = json::parse(slurp(report));
  EXPECT_EQ(doc["schema"], "qnn-debug-report");
  EXPECT_EQ(doc["summary"]["verdict"], "fail");
  EXPECT_EQ(doc["summary"]["first_divergence"]["group"], "h3");
  const json& run = doc["runs"][0];
  EXPECT_EQ(run["first_divergence"], "h3");
  EXPECT_EQ(run["introducers"][0]["id"], "h3");
  ASSERT_EQ(run["groups"].size(), 5u);
  EXPECT_EQ(run["groups"][0]["verdict"], "pass");  // good int8 encodings: ~40 dB
  EXPECT_GT(run["groups"][0]["sqnr_db"].get<double>(), 30);
  const json& op3 = run["groups"][2];
  EXPECT_EQ(op3["verdict"], "fail");
  EXPECT_NE(std::find(op3["flags"].begin(), op3["flags"].end(), "saturation"), op3["flags"].end());
  EXPECT_GT(op3["pairs"][0]["metrics"]["saturation"].get<double>(), 0.1);
  // Ops 4 and 5 fail too (they inherit the damage) but introduce less than op 3.
  EXPECT_EQ(run["groups"][3]["verdict"], "fail");
  EXPECT_LT(run["groups"][3]["introduced_db"].get<double>(), op3["introduced_db"].get<double>());
}

TEST_F(Diff, TheLibraryCallWritesTheCliReportByteForByte) {
  const std::string report = dir_.file("cli.json");
  ASSERT_EQ(run_cli("diff " + ref_ + " " + device_ + " --json " + report).exit_code, 1);
  pipeline::DiffRequest request;
  request.reference.path = ref_;
  request.devices = {qd::pipeline::InputSpec{device_, {}, {}, {}}};
  request.tool_version = QD_VERSION;
  const Result<report::Report> doc = pipeline::run_diff(request);
  ASSERT_THAT(doc, IsOk());
  EXPECT_EQ(report::report_text(*doc), slurp(report));
  request.devices = {qd::pipeline::InputSpec{dir_.file("missing.h5"), {}, {}, {}}};
  const Result<report::Report> missing = pipeline::run_diff(request);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("missing.h5"), std::string::npos);
}

TEST_F(Diff, AStricterPolicyAndAGenerousOneChangeTheVerdict) {
  const std::string lenient = dir_.file("lenient.json");
  std::ofstream(lenient) << R"({"default": {"fail_below_db": -100, "warn_below_db": -50}})";
  EXPECT_EQ(run_cli("diff " + ref_ + " " + device_ + " --policy " + lenient).exit_code, 0);
  const std::string bad = dir_.file("bad_policy.json");
  std::ofstream(bad) << "{\"default\": 3}";
  CliResult r = run_cli("diff " + ref_ + " " + device_ + " --policy " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
}

TEST_F(Diff, IdenticalStoresPass) {
  CliResult r = run_cli("diff " + ref_ + " " + ref_);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("first divergence: none"), std::string::npos) << r.out;
}

// Encodings that cannot be right fail their group even where the numbers happen to agree, and
// `inspect` names them; `check` re-judges the saved report the same way.
TEST(DiffEncodingLint, AnImplausibleEncodingFailsItsGroupWhateverTheNumbers) {
  testing::TempDir dir;
  const std::string ref_path = dir.file("ref.h5"), device_path = dir.file("device.h5");
  auto ref = StoreWriter::create(ref_path, {"lint", "cpu", "", "m", 1}).value();
  auto device = StoreWriter::create(device_path, {"lint", "QnnHtp", "", "m", 1}).value();
  // Values of 1e-9: an 8-bit scale of 1e-11 represents them exactly, but 255 steps of 1e-11
  // cover 2.6e-9 of range, less than kMinEncodedRange.
  const std::vector<float> tiny(64, 1e-9f);
  std::vector<uint8_t> raw(64, 100);
  auto tensor = [](const char* name, int64_t handle, DType dtype) {
    TensorRecord r;
    r.name = name;
    r.handles = {handle};
    r.dtype = dtype;
    r.dims = {64};
    return r;
  };
  ASSERT_THAT(ref->append_tensor(tensor("a", 1, DType::kFloat32), bytes_of(tiny), 0), IsOk());
  ASSERT_THAT(ref->append_tensor(tensor("b", 2, DType::kFloat32), bytes_of(tiny), 0), IsOk());
  ASSERT_THAT(device->append_tensor(tensor("a", 1, DType::kFloat32), bytes_of(tiny), 0), IsOk());
  TensorRecord collapsed = tensor("b", 2, DType::kUFixed8);
  collapsed.quant.scales = {1e-11};
  collapsed.quant.offsets = {0};
  ASSERT_THAT(device->append_tensor(collapsed, bytes_of(raw), 0), IsOk());
  ASSERT_THAT(ref->close(), IsOk());
  ASSERT_THAT(device->close(), IsOk());

  const std::string report = dir.file("r.json");
  const CliResult r = run_cli("diff " + ref_path + " " + device_path + " --json " + report);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const json doc = json::parse(slurp(report));
  const json& groups = doc["runs"][0]["groups"];
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]["verdict"], "pass");
  EXPECT_EQ(groups[1]["verdict"], "fail");
  EXPECT_GT(real(groups[1]["sqnr_db"]), 100);  // the numbers agree
  EXPECT_EQ(groups[1]["flags"], json::array({"degenerate_encoding"}));
  const json& problems = groups[1]["pairs"][0]["device"]["encoding_problems"];
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0]["problem"], "range_collapsed");
  EXPECT_EQ(doc["summary"]["first_divergence"]["group"], "h2");
  EXPECT_EQ(run_cli("check " + report).exit_code, 1);
  const CliResult listing = run_cli("inspect " + device_path);
  EXPECT_EQ(listing.exit_code, 0);
  EXPECT_NE(listing.out.find("encoding: range_collapsed (scale 1e-11)"), std::string::npos)
      << listing.out;
  EXPECT_NE(listing.out.find("encodings 1 tensors"), std::string::npos) << listing.out;
  const json listed = json::parse(run_cli("inspect --json " + device_path).out);
  EXPECT_EQ(listed["tensors"][1]["encoding_problems"][0]["problem"], "range_collapsed");
  EXPECT_TRUE(listed["tensors"][0]["encoding_problems"].empty());
}

TEST_F(Diff, BadInputsGiveOneLineAndExitTwo) {
  const std::string text = dir_.file("text.h5");
  std::ofstream(text) << "not a store";
  const std::string cut = dir_.file("cut.h5");
  std::filesystem::copy_file(device_, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(device_) / 2);
  for (const std::string& args :
       {"diff " + ref_ + " " + dir_.file("missing.h5"), "diff " + text + " " + device_,
        "diff " + ref_ + " " + cut, "diff " + ref_ + " " + device_ + " --ref-run 7"}) {
    CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace qd

namespace qd {
namespace {

// A device tensor stored NHWC, int16 with per-channel scales on its C axis, against an NCHW
// float reference: un-permuted, dequantized per channel, streamed in chunks of any size, the
// SQNR equals an independent float64 computation.
TEST(DiffLayout, PermutedPerAxisTensorMatchesAnExactComputation) {
  testing::TempDir dir;
  const uint64_t n = 1, c = 4, h = 64, w = 48;
  std::vector<float> ref_nchw(n * c * h * w);
  for (size_t i = 0; i < ref_nchw.size(); ++i) ref_nchw[i] = float(std::cos(0.37 * double(i)));
  const std::vector<double> scales = {1e-4, 2e-4, 4e-4, 8e-4};
  std::vector<int16_t> q_nhwc(ref_nchw.size());
  double signal = 0, noise = 0;
  for (uint64_t ci = 0; ci < c; ++ci) {
    for (uint64_t y = 0; y < h; ++y) {
      for (uint64_t x = 0; x < w; ++x) {
        const float r = ref_nchw[(ci * h + y) * w + x];
        const auto q = static_cast<int16_t>(std::nearbyint(r / scales[ci]));
        q_nhwc[(y * w + x) * c + ci] = q;
        const double e = double(float(q * scales[ci])) - double(r);
        signal += double(r) * double(r);
        noise += e * e;
      }
    }
  }
  const std::string ref_path = dir.file("ref.h5"), device_path = dir.file("dev.h5");
  {
    auto ref = StoreWriter::create(ref_path, {}).value();
    TensorRecord r = record("conv__debugID_1", {1}, DType::kFloat32);
    r.dims = {n, c, h, w};
    ASSERT_THAT(ref->append_tensor(r, bytes_of(ref_nchw), 0), IsOk());
    ASSERT_THAT(ref->close(), IsOk());
    auto device = StoreWriter::create(device_path, {}).value();
    TensorRecord d = record("conv__debugID_1", {1}, DType::kSFixed16);
    d.dims = {n, h, w, c};
    d.axis_order = {0, 3, 1, 2};
    d.quant.axis = 3;
    d.quant.scales = scales;
    d.quant.offsets = {0, 0, 0, 0};
    ASSERT_THAT(device->append_tensor(d, bytes_of(q_nhwc), 0), IsOk());
    ASSERT_THAT(device->close(), IsOk());
  }
  auto ref = StoreReader::open(ref_path).value();
  auto device = StoreReader::open(device_path).value();
  const TensorEntry rt = testing::all_tensors(*ref).at(0);
  const TensorEntry dt = testing::all_tensors(*device).at(0);
  auto layout = compare::plan_layout(rt, dt);
  ASSERT_THAT(layout, IsOk());
  EXPECT_FALSE(layout->inferred);
  const double exact_sqnr = 10 * std::log10(signal / noise);
  for (uint64_t chunk : {uint64_t{998}, uint64_t{1} << 20}) {
    compare::CompareOptions options;
    options.chunk_elements = chunk;
    auto m = compare::compare_tensors(*ref, rt, *device, dt, *layout, options);
    ASSERT_THAT(m, IsOk());
    EXPECT_NEAR(m->sqnr_db, exact_sqnr, 1e-6 * std::abs(exact_sqnr)) << "chunk " << chunk;
    EXPECT_EQ(m->n, ref_nchw.size());
    ASSERT_EQ(m->channels.size(), 4u);
    EXPECT_EQ(m->worst_channel, std::optional<uint64_t>(3));  // the coarsest scale
  }
}

// Tensors above the slice size (4M elements) are compared in slices on any free thread and merged
// in slice order: every thread count gives the same bits, the figures still match float64, and a
// byte damaged in a later slice still fails the whole tensor's checksum.
struct SlicedPair {
  std::string ref_path, device_path;
  std::vector<float> ref;
  std::vector<int8_t> q;          // int8 device, per tensor
  std::vector<uint8_t> nibbles;   // int4 device (two a byte), an odd element count
  std::vector<float> nibble_ref;  // its reference
  double scale = 0;
};

constexpr uint64_t kSlicedRows = (uint64_t{9} << 20) / 8 + 3;  // 9M + 24 elements: three slices
constexpr uint64_t kSlicedChannels = 8;                        // channel-last: the rows mode

void write_sliced_pair(SlicedPair& p) {
  const uint64_t n = kSlicedRows * kSlicedChannels;
  p.scale = 3.0 / 127;
  p.ref.resize(n);
  p.q.resize(n);
  uint32_t lcg = 12345;
  for (uint64_t i = 0; i < n; ++i) {
    lcg = lcg * 1664525u + 1013904223u;
    const double noise = double(lcg >> 8) / double(1u << 24) - 0.5;
    p.ref[i] = static_cast<float>(2.5 * std::sin(0.0007 * double(i)) + noise);
    // Channel 5 reads a bit high: a channel that stands out.
    const double device = p.ref[i] + (i % kSlicedChannels == 5 ? 0.05 : 0.0);
    p.q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(device / p.scale), -128.0, 127.0));
  }
  const uint64_t odd = (uint64_t{1} << 23) + 1;  // two slices and one element
  p.nibble_ref.resize(odd);
  p.nibbles.assign((odd + 1) / 2, 0);
  for (uint64_t i = 0; i < odd; ++i) {
    p.nibble_ref[i] = static_cast<float>(std::sin(0.013 * double(i)) * 0.7);
    const double q = std::clamp(std::nearbyint(p.nibble_ref[i] / 0.1), -8.0, 7.0);
    const auto nibble = static_cast<uint8_t>(static_cast<int>(q) & 0xF);
    p.nibbles[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? nibble : nibble << 4);
  }
  auto ref = StoreWriter::create(p.ref_path, {}).value();
  auto device = StoreWriter::create(p.device_path, {}).value();
  TensorRecord r = record("rows__debugID_1", {1}, DType::kFloat32);
  r.dims = {kSlicedRows, kSlicedChannels};
  ASSERT_THAT(ref->append_tensor(r, bytes_of(p.ref), 0), IsOk());
  TensorRecord d = record("rows__debugID_1", {1}, DType::kSFixed8);
  d.dims = r.dims;
  d.quant.scales = {p.scale};
  d.quant.offsets = {0};
  ASSERT_THAT(device->append_tensor(d, bytes_of(p.q), 0), IsOk());
  TensorRecord r4 = record("nibbles__debugID_2", {2}, DType::kFloat32);
  r4.dims = {odd};
  ASSERT_THAT(ref->append_tensor(r4, bytes_of(p.nibble_ref), 0), IsOk());
  TensorRecord d4 = record("nibbles__debugID_2", {2}, DType::kSFixed4);
  d4.dims = r4.dims;
  d4.quant.scales = {0.1};
  d4.quant.offsets = {0};
  ASSERT_THAT(device->append_tensor(d4, bytes_of(p.nibbles), 0), IsOk());
  ASSERT_THAT(ref->close(), IsOk());
  ASSERT_THAT(device->close(), IsOk());
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

void expect_same_bits(const compare::Metrics& a, const compare::Metrics& b, unsigned jobs) {
  EXPECT_TRUE(same_bits(a.sqnr_db, b.sqnr_db)) << jobs;
  EXPECT_TRUE(same_bits(a.mse, b.mse)) << jobs;
  EXPECT_TRUE(same_bits(a.cosine, b.cosine)) << jobs;
  EXPECT_TRUE(same_bits(a.max_abs, b.max_abs)) << jobs;
  EXPECT_EQ(a.max_abs_index, b.max_abs_index) << jobs;
  EXPECT_EQ(a.allclose_frac, b.allclose_frac) << jobs;
  EXPECT_EQ(a.error_histogram, b.error_histogram) << jobs;
  EXPECT_EQ(a.saturated_low, b.saturated_low) << jobs;
  EXPECT_EQ(a.saturated_high, b.saturated_high) << jobs;
  EXPECT_EQ(a.worst_channels, b.worst_channels) << jobs;
  ASSERT_EQ(a.worst.size(), b.worst.size());
  for (size_t i = 0; i < a.worst.size(); ++i) EXPECT_EQ(a.worst[i].index, b.worst[i].index);
  ASSERT_EQ(a.channels.size(), b.channels.size());
  for (size_t c = 0; c < a.channels.size(); ++c) {
    EXPECT_TRUE(same_bits(a.channels[c].sqnr_db, b.channels[c].sqnr_db)) << jobs << " " << c;
  }
}

// Writes the pair once per test (gtest skips the test when that fails).
class DiffSlices : public ::testing::Test {
 protected:
  void SetUp() override {
    p.ref_path = dir.file("ref.h5");
    p.device_path = dir.file("dev.h5");
    write_sliced_pair(p);
  }

  testing::TempDir dir;
  SlicedPair p;
};

TEST_F(DiffSlices, AnyThreadCountGivesTheSameBitsAndTheExactFigures) {
  auto ref = StoreReader::open(p.ref_path).value();
  auto device = StoreReader::open(p.device_path).value();
  std::vector<compare::Metrics> by_jobs;
  for (unsigned jobs : {1u, 2u, 3u}) {
    compare::CompareOptions options;
    options.jobs = jobs;
    auto result = compare::compare_stores(*ref, *device, options);
    ASSERT_THAT(result, IsOk());
    const auto& pairs = result->runs.at(0).pairs;
    ASSERT_EQ(pairs.size(), 2u);
    for (const auto& pair : pairs) ASSERT_TRUE(pair.metrics) << pair.error;
    if (by_jobs.empty()) {
      by_jobs = {*pairs[0].metrics, *pairs[1].metrics};
      continue;
    }
    expect_same_bits(*pairs[0].metrics, by_jobs[0], jobs);
    expect_same_bits(*pairs[1].metrics, by_jobs[1], jobs);
  }
  // The merged figures against float64 over the whole tensor.
  double signal = 0, noise = 0, largest = 0;
  uint64_t largest_at = 0;
  for (size_t i = 0; i < p.ref.size(); ++i) {
    const double e = double(p.q[i]) * p.scale - double(p.ref[i]);
    signal += double(p.ref[i]) * double(p.ref[i]);
    noise += e * e;
    if (std::abs(e) > largest) {
      largest = std::abs(e);
      largest_at = i;
    }
  }
  const compare::Metrics& m = by_jobs[0];
  EXPECT_EQ(m.n, p.ref.size());
  EXPECT_NEAR(m.sqnr_db, 10 * std::log10(signal / noise), 1e-9 * std::abs(m.sqnr_db));
  EXPECT_NEAR(m.max_abs, largest, 1e-12);
  EXPECT_EQ(m.max_abs_index, largest_at);
  ASSERT_EQ(m.channels.size(), kSlicedChannels);
  EXPECT_EQ(m.worst_channel, std::optional<uint64_t>(5));
  uint64_t counted = 0;
  for (uint64_t c : m.error_histogram) counted += c;
  EXPECT_EQ(counted, m.n);
  EXPECT_EQ(by_jobs[1].n, p.nibble_ref.size());
  // The library's single-pair call merges the same slices.
  const TensorEntry rt = testing::all_tensors(*ref).at(0);
  const TensorEntry dt = testing::all_tensors(*device).at(0);
  auto single =
      compare::compare_tensors(*ref, rt, *device, dt, compare::plan_layout(rt, dt).value(), {});
  ASSERT_THAT(single, IsOk());
  expect_same_bits(*single, m, 0);
}

TEST_F(DiffSlices, ADamagedByteInALaterSliceFailsTheTensor) {
  // Flip one byte of the int8 device tensor in its third slice, where it sits in the file.
  const uint64_t at = (uint64_t{9} << 20) - 4096;
  std::fstream file(p.device_path, std::ios::in | std::ios::out | std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(file)), {});
  const std::string needle(reinterpret_cast<const char*>(p.q.data() + at), 256);
  const auto where = content.find(needle);
  ASSERT_NE(where, std::string::npos);
  ASSERT_EQ(content.find(needle, where + 1), std::string::npos);
  file.seekp(static_cast<std::streamoff>(where + 7));
  file.put(static_cast<char>(p.q[at + 7] ^ 0x10));
  file.close();
  auto ref = StoreReader::open(p.ref_path).value();
  auto device = StoreReader::open(p.device_path).value();
  for (unsigned jobs : {1u, 2u}) {
    compare::CompareOptions options;
    options.jobs = jobs;
    auto result = compare::compare_stores(*ref, *device, options);
    ASSERT_THAT(result, IsOk());
    const auto& pairs = result->runs.at(0).pairs;
    EXPECT_FALSE(pairs.at(0).metrics);
    EXPECT_NE(pairs.at(0).error.find("'rows__debugID_1' (seq 0): checksum mismatch"),
              std::string::npos)
        << pairs.at(0).error;
    EXPECT_EQ(pairs.at(0).error_code, ErrorCode::kCorrupt);
    EXPECT_TRUE(pairs.at(1).metrics) << "the other tensor is intact";
  }
}

}  // namespace
}  // namespace qd

namespace qd {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::run_cli;
using testing::slurp;

// A one-run store of float32 tensors {name: (dims, values)}.
void write_float_store(
    const std::string& path,
    const std::vector<std::tuple<std::string, std::vector<uint64_t>, std::vector<float>>>&
        tensors) {
  auto writer = StoreWriter::create(path, {"verdicts", "cpu", "", "m", 1}).value();
  ASSERT_THAT(writer->begin_run("sample", 1), IsOk());
  for (const auto& [name, dims, values] : tensors) {
    TensorRecord r;
    r.name = name;
    r.dims = dims;
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(values.data()),
                                         values.size() * sizeof(float));
    ASSERT_THAT(writer->append_tensor(r, bytes, 0), IsOk());
  }
  ASSERT_THAT(writer->end_run(2, 0), IsOk());
  ASSERT_THAT(writer->close(), IsOk());
}

const std::vector<float> kRamp = {1, 2, 3, 4, 5, 6, 7, 8};

// Two stores with nothing in common used to compare 0 pairs and print "verdict: pass".
TEST(DiffVerdicts, NothingComparedFailsWithTheReason) {
  testing::TempDir dir;
  write_float_store(dir.file("a.h5"), {{"conv", {8}, kRamp}, {"relu", {8}, kRamp}});
  write_float_store(dir.file("b.h5"), {{"dense", {8}, kRamp}});
  const std::string report = dir.file("r.json");
  const CliResult r =
      run_cli("diff " + dir.file("a.h5") + " " + dir.file("b.h5") + " --json " + report);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("fails because device run 0: no tensor pair was compared"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdict: fail"), std::string::npos) << r.out;
  const json doc = json::parse(slurp(report));
  EXPECT_EQ(doc["summary"]["verdict"], "fail");
  EXPECT_EQ(doc["runs"][0]["coverage"]["reference_tensors"], 2);
  EXPECT_EQ(doc["runs"][0]["coverage"]["compared_pairs"], 0);
  EXPECT_EQ(run_cli("check " + report).exit_code, 1);  // and CI's re-judging agrees
}

TEST(DiffVerdicts, APolicyCanRequireAMatchedFraction) {
  testing::TempDir dir;
  write_float_store(dir.file("a.h5"), {{"conv", {8}, kRamp}, {"relu", {8}, kRamp}});
  write_float_store(dir.file("b.h5"), {{"conv", {8}, kRamp}});
  const std::string report = dir.file("r.json"), strict = dir.file("strict.json");
  std::ofstream(strict) << R"({"min_matched_fraction": 0.9})";
  EXPECT_EQ(
      run_cli("diff " + dir.file("a.h5") + " " + dir.file("b.h5") + " --json " + report).exit_code,
      0);
  const CliResult r = run_cli("check " + report + " --policy " + strict);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("1 of 2 reference tensors (50.0%) were compared"), std::string::npos)
      << r.out;
}

TEST(DiffVerdicts, UnknownPolicyKeysAreBadInput) {
  testing::TempDir dir;
  write_float_store(dir.file("a.h5"), {{"conv", {8}, kRamp}});
  const std::string policy = dir.file("p.json");
  std::ofstream(policy) << R"({"defaults": {"fail_below": 10}})";
  const CliResult r =
      run_cli("diff " + dir.file("a.h5") + " " + dir.file("a.h5") + " --policy " + policy);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown key \"defaults\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("accepted: default, rules"), std::string::npos) << r.err;
}

TEST(DiffVerdicts, MappingEntriesThatNameNothingAreReported) {
  testing::TempDir dir;
  write_float_store(dir.file("a.h5"), {{"conv", {8}, kRamp}});
  write_float_store(dir.file("b.h5"), {{"conv", {8}, kRamp}});
  const std::string map = dir.file("map.json"), report = dir.file("r.json");
  std::ofstream(map) << R"({"conv": "conv", "old_name": "gone", "conv_typo": "conv"})";
  const CliResult r = run_cli("diff " + dir.file("a.h5") + " " + dir.file("b.h5") + " --map " +
                              map + " --json " + report);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("warning: mapping entry 'old_name' -> 'gone' was not used: neither tensor "
                       "exists"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("'conv_typo' -> 'conv' was not used: the reference has no such tensor"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(json::parse(slurp(report))["warnings"].size(), 2u);
}

struct HandleTensor {
  std::string name;
  int64_t handle;
  std::vector<float> values;
};

// A one-run store of float32 tensors with one debug handle each, output 0.
void write_handle_store(const std::string& path, const std::vector<HandleTensor>& tensors) {
  auto writer = StoreWriter::create(path, {"verdicts", "cpu", "", "m", 1}).value();
  ASSERT_THAT(writer->begin_run("sample", 1), IsOk());
  for (const HandleTensor& t : tensors) {
    TensorRecord r;
    r.name = t.name;
    r.handles = {t.handle};
    r.output_index = 0;
    r.dims = {t.values.size()};
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(t.values.data()),
                                         t.values.size() * sizeof(float));
    ASSERT_THAT(writer->append_tensor(r, bytes, 0), IsOk());
  }
  ASSERT_THAT(writer->end_run(2, 0), IsOk());
  ASSERT_THAT(writer->close(), IsOk());
}

// Issue 17: the device has "s@0" (bit-identical to the reference) and "s_copy@0" (half of it,
// -6.02 dB), both handle 5, output 0. The old code compared the reference with "s_copy@0"
// (fail, exit 1), dropped "s@0" and said "unmatched 0 device" with no warning.
TEST(DiffVerdicts, AKeyTwoDeviceTensorsClaimPrefersTheExactNameAndWarns) {
  testing::TempDir dir;
  std::vector<float> half = kRamp;
  for (float& v : half) v /= 2;
  write_handle_store(dir.file("a.h5"), {{"s@0", 5, kRamp}});
  write_handle_store(dir.file("b.h5"), {{"s@0", 5, kRamp}, {"s_copy@0", 5, half}});
  const std::string report = dir.file("r.json"), html = dir.file("r.html");
  const CliResult r = run_cli("diff " + dir.file("a.h5") + " " + dir.file("b.h5") + " --json " +
                              report + " --html " + html);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("unmatched 0 reference, 1 device"), std::string::npos) << r.out;
  const std::string warning =
      "device run 0: device tensor 's_copy@0' was not compared: ambiguous: 2 device tensors "
      "claim output 0 of the last op of group h5 (handles {5}); compared 's@0' with 's@0' (same "
      "name)";
  EXPECT_NE(r.out.find("warning: " + warning), std::string::npos) << r.out;
  const json doc = json::parse(slurp(report));
  const json& pair = doc["runs"][0]["groups"][0]["pairs"][0];
  EXPECT_EQ(pair["device"]["name"], "s@0");
  EXPECT_EQ(pair["metrics"]["sqnr_db"], "inf");
  ASSERT_EQ(doc["runs"][0]["unmatched"].size(), 1u);
  EXPECT_EQ(doc["runs"][0]["unmatched"][0]["name"], "s_copy@0");
  EXPECT_EQ(doc["runs"][0]["unmatched"][0]["ambiguous"], true);
  EXPECT_EQ(doc["warnings"], json::array({warning}));
  EXPECT_NE(slurp(html).find("s_copy@0"), std::string::npos);

  // The symmetric case: two reference tensors claim the key the device's one tensor has.
  const CliResult back = run_cli("diff " + dir.file("b.h5") + " " + dir.file("a.h5"));
  EXPECT_EQ(back.exit_code, 0) << back.out << back.err;
  EXPECT_NE(back.out.find("unmatched 1 reference, 0 device"), std::string::npos) << back.out;
  EXPECT_NE(back.out.find("warning: device run 0: reference tensor 's_copy@0' was not compared: "
                          "ambiguous: 2 reference tensors claim output 0"),
            std::string::npos)
      << back.out;
}

// Issue 17: "b" is [2,3] in one npz and [6] in the other. The old summary said "nothing matched
// between the runs" while nothing was unmatched, and "SQNR n/a dB [not_compared]".
TEST(DiffVerdicts, NamesThatMatchWithShapesThatDoNotSaySo) {
  testing::TempDir dir;
  const std::string script =
      "import numpy as np; "
      "np.savez('" +
      dir.file("ref.npz") +
      "', b=np.arange(6, dtype=np.float32).reshape(2, 3)); "
      "np.savez('" +
      dir.file("dev.npz") + "', b=np.arange(6, dtype=np.float32))";
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"" + script + "\"").c_str()), 0);
  const std::string report = dir.file("r.json"), html = dir.file("r.html");
  const CliResult r = run_cli("diff " + dir.file("ref.npz") + " " + dir.file("dev.npz") +
                              " --json " + report + " --html " + html);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string why =
      "reference 'b' and device 'b' matched (exact_name) but could not be compared: shape "
      "mismatch: reference 'b' [2,3] vs device 'b' [6]";
  EXPECT_EQ(r.out.find("nothing matched"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SQNR n/a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fails because device run 0: no tensor pair was compared: 1 pair matched "
                       "but could not be compared; " +
                       why),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("in device run 0: not compared: shape mismatch: reference 'b' [2,3] vs "
                       "device 'b' [6]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("warning: device run 0: " + why), std::string::npos) << r.out;
  const json doc = json::parse(slurp(report));
  ASSERT_EQ(doc["summary"]["verdict_reasons"].size(), 1u);
  EXPECT_NE(doc["summary"]["verdict_reasons"][0].get<std::string>().find(why), std::string::npos);
  EXPECT_NE(slurp(html).find(why), std::string::npos) << "the HTML's warnings";
  // check re-judges the saved report to the same reason.
  const CliResult checked = run_cli("check " + report);
  EXPECT_EQ(checked.exit_code, 1);
  EXPECT_NE(checked.out.find("1 pair matched but could not be compared; " + why), std::string::npos)
      << checked.out;
}

TEST(DiffVerdicts, CheckGivenAStoreSaysSo) {
  testing::TempDir dir;
  write_float_store(dir.file("reference.h5"), {{"conv", {8}, kRamp}});
  const CliResult r = run_cli("check " + dir.file("reference.h5"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is a qnn-debug store (HDF5), not a report"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("qnn-debug diff"), std::string::npos) << r.err;
}

// Four rows of six classes. The device keeps rows 0 and 2, moves row 1's winner to second place
// (still in its top 5) and row 3's winner to last place: top-1 2/4, top-5 3/4.
TEST(DiffVerdicts, ClassifierAgreementIsMeasuredAndGated) {
  testing::TempDir dir;
  const std::vector<float> ref = {9, 1, 2, 3, 4, 5,  //
                                  1, 9, 2, 3, 4, 5,  //
                                  1, 2, 9, 3, 4, 5,  //
                                  1, 2, 3, 9, 4, 5};
  std::vector<float> dev = ref;
  std::swap(dev[6 + 1], dev[6 + 5]);  // row 1: class 5 now wins, class 1 second
  dev[18 + 3] = 0;                    // row 3: class 3 drops to last
  write_float_store(dir.file("ref.h5"), {{"logits", {4, 6}, ref}});
  write_float_store(dir.file("dev.h5"), {{"logits", {4, 6}, dev}});
  const std::string lenient = dir.file("lenient.json"), gate = dir.file("gate.json");
  std::ofstream(lenient) << R"({"default": {"fail_below_db": -100, "warn_below_db": -100}})";
  std::ofstream(gate) << R"({"default": {"fail_below_db": -100, "warn_below_db": -100},
                            "min_top1_agreement": 0.9})";
  const std::string report = dir.file("r.json");
  const CliResult r = run_cli("diff " + dir.file("ref.h5") + " " + dir.file("dev.h5") +
                              " --policy " + lenient + " --json " + report);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("classifier logits (4 rows x 6 classes): top-1 agreement 50.0%, top-5 "
                       "75.0%"),
            std::string::npos)
      << r.out;
  const json doc = json::parse(slurp(report));
  const json& c = doc["runs"][0]["classification"];
  EXPECT_EQ(c["top1_agreement"], 0.5);
  EXPECT_EQ(c["top5_agreement"], 0.75);
  const CliResult gated = run_cli("check " + report + " --policy " + gate);
  EXPECT_EQ(gated.exit_code, 1) << gated.out;
  EXPECT_NE(gated.out.find("top-1 agreement 50.0% is below the policy's 90.0%"), std::string::npos)
      << gated.out;
}

// 300 rows of 1000 classes stream in batches of 65 rows; every seventh row's winner drops to the
// device's second place: top-1 misses 43 of 300 rows, top-5 none. A flat output of 2^21 values is
// no 2M-way classifier (it used to be ranked whole: seconds, and the whole tensor in memory).
TEST(DiffVerdicts, ClassifierRowsStreamAndAFlatOutputIsNoClassifier) {
  testing::TempDir dir;
  constexpr uint64_t kRows = 300, kClasses = 1000;
  std::vector<float> ref(kRows * kClasses), dev;
  for (uint64_t i = 0; i < ref.size(); ++i) ref[i] = static_cast<float>((i * 7919) % 1009);
  dev = ref;
  uint64_t moved = 0;
  for (uint64_t row = 0; row < kRows; row += 7, ++moved) {
    float* d = dev.data() + row * kClasses;
    const auto best =
        std::max_element(ref.data() + row * kClasses, ref.data() + (row + 1) * kClasses) -
        (ref.data() + row * kClasses);
    d[best] = 2000;  // still ranked: second after the new winner
    d[(best + 1) % kClasses] = 3000;
  }
  write_float_store(dir.file("ref.h5"), {{"logits", {kRows, kClasses}, ref}});
  write_float_store(dir.file("dev.h5"), {{"logits", {kRows, kClasses}, dev}});
  const std::string report = dir.file("r.json");
  CliResult r =
      run_cli("diff " + dir.file("ref.h5") + " " + dir.file("dev.h5") + " --json " + report);
  ASSERT_NE(r.exit_code, 2) << r.out << r.err;
  json c = json::parse(slurp(report))["runs"][0]["classification"];
  EXPECT_EQ(c["rows"], kRows);
  EXPECT_DOUBLE_EQ(c["top1_agreement"].get<double>(), double(kRows - moved) / double(kRows));
  EXPECT_EQ(c["top5_agreement"], 1.0);

  const std::vector<float> flat((uint64_t{1} << 21), 1.0f);
  write_float_store(dir.file("ref.h5"), {{"flat", {flat.size()}, flat}});
  write_float_store(dir.file("dev.h5"), {{"flat", {flat.size()}, flat}});
  r = run_cli("diff " + dir.file("ref.h5") + " " + dir.file("dev.h5") + " --json " + report);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  c = json::parse(slurp(report))["runs"][0]["classification"];
  EXPECT_TRUE(c.is_null()) << c;
}

// An empty final output whose last axis is 2^40 long is no classifier: it used to size the
// rank buffer by that axis (std::length_error: "internal error", and a crash in the Python
// package). Found by the diff fuzzer.
TEST(DiffVerdicts, AnEmptyFinalOutputWithAHugeLastAxisIsNoClassifier) {
  testing::TempDir dir;
  const std::vector<uint64_t> empty_dims = {0, uint64_t{1} << 40};
  write_float_store(dir.file("ref.h5"), {{"conv", {8}, kRamp}, {"logits", empty_dims, {}}});
  write_float_store(dir.file("dev.h5"), {{"conv", {8}, kRamp}, {"logits", empty_dims, {}}});
  const std::string report = dir.file("r.json");
  const CliResult r =
      run_cli("diff " + dir.file("ref.h5") + " " + dir.file("dev.h5") + " --json " + report);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  const json doc = json::parse(slurp(report));
  EXPECT_EQ(doc["runs"][0]["coverage"]["compared_pairs"], 2);
  EXPECT_TRUE(doc["runs"][0]["classification"].is_null()) << doc["runs"][0]["classification"];
}

}  // namespace
}  // namespace qd
