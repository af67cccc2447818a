// What `capture` (and `diff`, when it converts an input) says about inputs it read but could not
// fully use (docs/formats.md, "What capture warns about"): encodings the lint flags, an encodings
// file that names no captured tensor, a damaged layout; and what it refuses outright: a folder
// that looks like a qnn-net-run result but is not named as one, tolerances that mean nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/cli_runner.h"
#include "../common/report_json.h"

namespace qd {
namespace {

using nlohmann::json;
using testing::has_warning;
using testing::run_cli;
using testing::slurp;
using testing::write_text;

// An .npy (format 1.0) of `count` elements of `descr`, all bytes `fill`.
void write_npy(const std::string& path, const std::string& descr, size_t count, size_t element_size,
               uint8_t fill = 3) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(count) + ",), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xFF);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes += std::string(count * element_size, static_cast<char>(fill));
  write_text(path, bytes);
}

class CaptureWarnings : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }
  testing::TempDir dir_;
};

// Six tensors, two with encodings the lint flags: capture names both (count and names), as
// `inspect` does later.
TEST_F(CaptureWarnings, CaptureNamesTheEncodingsTheLintFlags) {
  const std::vector<std::string> names = {"a", "b", "zero_scale", "c", "huge_range", "d"};
  std::string args;
  json encodings = json::object();
  for (const std::string& name : names) {
    write_npy(file(name + ".npy"), "|u1", 4, 1);
    args += " " + file(name + ".npy");
    encodings[name] = {{"scale", 0.05}, {"offset", -128}};
  }
  encodings["zero_scale"]["scale"] = 0.0;
  encodings["huge_range"]["scale"] = 1e36;
  write_text(file("enc.json"), encodings.dump());
  const auto r =
      run_cli("capture npz" + args + " --encodings " + file("enc.json") + " -o " + file("s.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("6 quantized by the encodings"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warning: 2 tensors have an encoding that cannot be right"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("'zero_scale' (scale_not_positive"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'huge_range' (range_overflow"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("'a' ("), std::string::npos) << r.out;
  const auto inspect = run_cli("inspect " + file("s.h5"));
  EXPECT_NE(inspect.out.find("encodings 2 tensors have an encoding that cannot be right"),
            std::string::npos)
      << inspect.out;
}

// An encodings map none of whose names is a captured tensor: said by capture, and in the report
// of a diff that converts the input.
TEST_F(CaptureWarnings, AnEncodingsMapThatNamesNoTensorIsSaid) {
  write_npy(file("t.npy"), "<f4", 4, 4, 0);
  write_text(file("enc.json"), R"({"conv_out": {"scale": 0.1, "offset": 0}})");
  const std::string warning = "encodings '" + file("enc.json") +
                              "': none of its 1 tensor names matched a captured tensor "
                              "('conv_out'...)";
  const auto r = run_cli("capture npz " + file("t.npy") + " --encodings " + file("enc.json") +
                         " -o " + file("s.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("warning: " + warning), std::string::npos) << r.out;
  const auto d = run_cli("diff " + file("t.npy") + " " + file("t.npy") + " --encodings " +
                         file("enc.json") + " --json " + file("r.json"));
  ASSERT_NE(d.exit_code, 2) << d.err;
  EXPECT_NE(d.out.find("warning: " + warning), std::string::npos) << d.out;
  EXPECT_TRUE(has_warning(json::parse(slurp(file("r.json"))), warning));
}

// axis_format and src_axis_format of one rank that are not the same axes reordered: the tensor
// is compared as stored, and capture says why.
TEST_F(CaptureWarnings, ADamagedAxisFormatIsSaid) {
  write_npy(file("x.npy"), "<f4", 24, 4, 0);
  const json net = {{"graph",
                     {{"tensors",
                       {{"other", {{"id", 1}, {"type", 3}, {"data_type", 562}, {"dims", {24}}}},
                        {"x",
                         {{"id", 0},
                          {"type", 3},
                          {"data_type", 562},
                          {"dims", {24}},
                          {"axis_format", "NHWX"},
                          {"src_axis_format", "NCHW"}}}}},
                      {"nodes", json::object()}}}};
  write_text(file("net.json"), net.dump());
  const auto r = run_cli("capture npz " + file("x.npy") + " --encodings " + file("net.json") +
                         " -o " + file("s.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("warning: encodings '" + file("net.json") +
                       "': tensor 'x': axis_format 'NHWX' and src_axis_format 'NCHW' are not "
                       "the same axes reordered: no layout, compared as stored"),
            std::string::npos)
      << r.out;
}

// qnn-net-run writes Result_<k>; a look-alike beside them would silently not be compared.
TEST_F(CaptureWarnings, AResultFolderLookAlikeIsRefused) {
  for (const char* stray : {"Result_01", "result_1"}) {
    SCOPED_TRACE(stray);
    const std::string out = file(std::string("out_") + stray);
    for (const std::string sub : {"Result_0", "Result_1", stray}) {
      std::filesystem::create_directories(out + "/" + sub);
      write_text(out + "/" + sub + "/y.raw", std::string(16, '\0'));
    }
    const auto r = run_cli("capture qnn-net-run " + out + " -o " + file("s.h5"));
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.err.find("'" + out + "/" + stray + "': not a folder name qnn-net-run writes"),
              std::string::npos)
        << r.err;
  }
  // A graph folder of results beside Result_<k> folders: which tree is meant is not known.
  const std::string mixed = file("mixed");
  for (const std::string sub : {"Result_0", "graph_b/Result_0"}) {
    std::filesystem::create_directories(mixed + "/" + sub);
    write_text(mixed + "/" + sub + "/y.raw", std::string(16, '\0'));
  }
  const auto r = run_cli("capture qnn-net-run " + mixed + " -o " + file("s.h5"));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("'" + mixed + "/graph_b': a graph folder of Result_<k> folders beside"),
            std::string::npos)
      << r.err;
}

TEST_F(CaptureWarnings, ToleranceThatMeanNothingAreRefused) {
  write_npy(file("t.npy"), "<f4", 4, 4, 0);
  const std::string t = file("t.npy");
  const auto nan = run_cli("diff " + t + " " + t + " --atol nan");
  EXPECT_EQ(nan.exit_code, 2);
  EXPECT_NE(nan.err.find("--atol nan: a tolerance must be a finite number >= 0"), std::string::npos)
      << nan.err;
  const auto negative = run_cli("diff " + t + " " + t + " --rtol -1");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--rtol -1: a tolerance must be a finite number >= 0"),
            std::string::npos)
      << negative.err;
}

}  // namespace
}  // namespace qd
