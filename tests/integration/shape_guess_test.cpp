// A qnn-net-run `.raw` read without --net-json or --shape has a guessed shape (1-D float32): its
// rows and classes are unknown, so no classifier figure is given for it, and the summary says
// which tensor was guessed and how to give its shape. The guess is kept in the store
// (docs/store-format.md, /shape_guesses), so `capture` then `diff` knows it too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "../common/cli_runner.h"
#include "../common/report_json.h"

namespace qd {
namespace {

using nlohmann::json;
using testing::has_warning;
using testing::run_cli;
using testing::slurp;

constexpr int kRows = 4;
constexpr int kClasses = 10;

// Scores of 4 rows x 10 classes: row r's best class is r, or (device, last row) class 9. The
// truth is a top-1 agreement of 3 of 4 rows; read as one row of 40, the figure is meaningless.
void write_tree(const std::string& dir, bool device) {
  std::filesystem::create_directories(dir + "/Result_0");
  std::vector<float> scores(kRows * kClasses, 0.0f);
  for (int r = 0; r < kRows; ++r) {
    const int best = device && r == kRows - 1 ? 9 : r;
    scores[r * kClasses + best] = 1.0f + 0.25f * float(r);
  }
  std::ofstream(dir + "/Result_0/class_probs.raw", std::ios::binary)
      .write(reinterpret_cast<const char*>(scores.data()), sizeof(float) * scores.size());
}

class ShapeGuess : public ::testing::Test {
 protected:
  void SetUp() override {
    ref_ = dir_.file("cpu");
    device_ = dir_.file("htp");
    write_tree(ref_, false);
    write_tree(device_, true);
  }
  // The summary and the report of one diff: no classifier figure, the guess said.
  void expect_no_figure_and_the_guess_said(const std::string& args, const std::string& named) {
    const std::string report_path = dir_.file("r.json");
    const auto r = run_cli("diff " + args + " --json " + report_path);
    ASSERT_NE(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out.find("top-1 agreement"), std::string::npos) << r.out;
    const std::string said = named +
                             ": 1 tensors were read with a guessed shape ('class_probs')"
                             ": no top-k figure for them; give their shapes with "
                             "--net-json (qnn-net-run) or --shape NAME=D0,D1,...";
    EXPECT_NE(r.out.find("warning: " + said), std::string::npos) << r.out;
    const json report = json::parse(slurp(report_path));
    EXPECT_TRUE(report.at("runs").at(0).at("classification").is_null())
        << report.at("runs").at(0).at("classification").dump();
    EXPECT_TRUE(has_warning(report, said)) << report.at("warnings").dump();
  }
  testing::TempDir dir_;
  std::string ref_;
  std::string device_;
};

TEST_F(ShapeGuess, DiffOfTwoTreesGivesNoTopKForAGuessedShape) {
  expect_no_figure_and_the_guess_said(ref_ + " " + device_, ref_);
}

TEST_F(ShapeGuess, TheGuessIsKeptInTheCapturedStore) {
  const std::string ref_store = dir_.file("cpu.h5"), device_store = dir_.file("htp.h5");
  ASSERT_EQ(run_cli("capture qnn-net-run " + ref_ + " -o " + ref_store).exit_code, 0);
  ASSERT_EQ(run_cli("capture qnn-net-run " + device_ + " -o " + device_store).exit_code, 0);
  expect_no_figure_and_the_guess_said(ref_store + " " + device_store, ref_store);
  const auto inspect = run_cli("inspect " + ref_store);
  EXPECT_NE(inspect.out.find("1 tensors were read with a guessed shape ('class_probs')"),
            std::string::npos)
      << inspect.out;
}

TEST_F(ShapeGuess, AGivenShapeGivesTheTrueFigure) {
  const auto r = run_cli("diff " + ref_ + " " + device_ + " --shape class_probs=4,10");
  ASSERT_NE(r.exit_code, 2) << r.err;
  EXPECT_NE(r.out.find("classifier class_probs (4 rows x 10 classes): top-1 agreement 75.0%"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("guessed shape"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qd
