// What the user points an output at is written, never replaced (docs/output-files.md): every
// command that writes (diff and report views, export npz, capture, the C API's stores) through
// a character device, a FIFO and a symlink, and one-line errors that name the user's path.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <string>

#include "../common/cli_runner.h"
#include "../common/fifo_reader.h"

namespace qd {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::drain_fifo;
using testing::kHdf5Signature;
using testing::run_cli;
using testing::slurp;

bool is_symlink_to(const std::string& link, const std::string& target) {
  return fs::is_symlink(link) && fs::read_symlink(link) == target;
}

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = dir_.file("example.h5");
    ASSERT_EQ(std::system((std::string(QD_EXAMPLE_CAPTURE) + " " + store_ + " >/dev/null").c_str()),
              0);
  }
  // `qnn-debug diff` of the example store against itself, with `outputs` appended.
  CliResult diff(const std::string& outputs) {
    return run_cli("diff " + store_ + " " + store_ + " " + outputs);
  }
  std::string fifo(const std::string& name) {
    const std::string path = dir_.file(name);
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
    return path;
  }
  testing::TempDir dir_;
  std::string store_;
};

TEST_F(OutputPath, ACharacterDeviceStaysADevice) {
  // A private copy of /dev/null (1, 3): the old code replaced the system's own with a file.
  const std::string device = dir_.file("null");
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod is not allowed here";
  }
  for (const char* option : {"--json", "--html", "--csv"}) {
    CliResult result = diff(std::string(option) + " " + device);
    EXPECT_EQ(result.exit_code, 0) << option << ": " << result.err;
  }
  EXPECT_EQ(run_cli("export npz " + store_ + " -o " + device).exit_code, 0);
  struct stat st {};
  ASSERT_EQ(::lstat(device.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device was replaced";
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
}

TEST_F(OutputPath, ReportViewsAreWrittenThroughAFifo) {
  ASSERT_EQ(diff("--json " + dir_.file("r.json")).exit_code, 0);
  const std::string csv_fifo = fifo("report.csv");
  auto csv = drain_fifo(csv_fifo);
  CliResult result = run_cli("report " + dir_.file("r.json") + " --csv " + csv_fifo);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const std::string text = csv.get();
  EXPECT_EQ(text.rfind("device_run,", 0), 0u) << text.substr(0, 200);
  EXPECT_TRUE(fs::is_fifo(csv_fifo));
}

TEST_F(OutputPath, AStoreAndAnNpzReachAFifoWhole) {
  const std::string npz_fifo = fifo("out.npz");
  auto npz = drain_fifo(npz_fifo);
  EXPECT_EQ(run_cli("export npz " + store_ + " -o " + npz_fifo).exit_code, 0);
  const std::string npz_bytes = npz.get();
  EXPECT_EQ(npz_bytes.substr(0, 4), std::string("PK\x03\x04", 4));
  EXPECT_TRUE(fs::is_fifo(npz_fifo));

  ASSERT_EQ(run_cli("export npz " + store_ + " -o " + dir_.file("x.npz")).exit_code, 0);
  const std::string store_fifo = fifo("store.h5");
  auto store = drain_fifo(store_fifo);
  CliResult capture = run_cli("capture npz " + dir_.file("x.npz") + " -o " + store_fifo);
  EXPECT_EQ(capture.exit_code, 0) << capture.err;
  const std::string store_bytes = store.get();
  EXPECT_EQ(store_bytes.substr(0, 8), std::string(kHdf5Signature, 8));
  EXPECT_TRUE(fs::is_fifo(store_fifo));
  // Nothing is left behind beside the FIFO.
  for (const auto& entry : fs::directory_iterator(dir_.path())) {
    EXPECT_NE(entry.path().filename().string().front(), '.') << entry.path();
  }
}

TEST_F(OutputPath, SymlinksAreFollowedAndStayLinks) {
  fs::create_directory(dir_.path() / "real");
  const std::string link = dir_.file("link.csv");
  fs::create_symlink("real/target.csv", link);
  ASSERT_EQ(diff("--csv " + link).exit_code, 0);
  EXPECT_TRUE(is_symlink_to(link, "real/target.csv"));
  EXPECT_EQ(slurp(dir_.file("real/target.csv")).rfind("device_run,", 0), 0u);

  const std::string npz_link = dir_.file("link.npz");
  fs::create_symlink("real/x.npz", npz_link);
  ASSERT_EQ(run_cli("export npz " + store_ + " -o " + npz_link).exit_code, 0);
  EXPECT_TRUE(is_symlink_to(npz_link, "real/x.npz"));
  EXPECT_EQ(slurp(dir_.file("real/x.npz")).substr(0, 2), "PK");

  const std::string store_link = dir_.file("link.h5");
  fs::create_symlink("real/store.h5", store_link);
  ASSERT_EQ(run_cli("capture npz " + npz_link + " -o " + store_link).exit_code, 0);
  EXPECT_TRUE(is_symlink_to(store_link, "real/store.h5"));
  EXPECT_EQ(slurp(dir_.file("real/store.h5")).substr(0, 8), std::string(kHdf5Signature, 8));

  // A runtime's capture through the C API, to a link.
  const std::string runtime_link = dir_.file("runtime.h5");
  fs::create_symlink("real/runtime_target.h5", runtime_link);
  ASSERT_EQ(
      std::system((std::string(QD_EXAMPLE_CAPTURE) + " " + runtime_link + " >/dev/null").c_str()),
      0);
  EXPECT_TRUE(is_symlink_to(runtime_link, "real/runtime_target.h5"));
  EXPECT_EQ(run_cli("inspect " + runtime_link).exit_code, 0);
}

TEST_F(OutputPath, DashIsStandardOutput) {
  CliResult result = diff("--json -");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("\"schema\""), std::string::npos) << result.out.substr(0, 300);
  EXPECT_FALSE(fs::exists(dir_.file("-")));
}

TEST_F(OutputPath, AMissingFolderNamesTheUsersPathNotATemporaryOne) {
  ASSERT_EQ(run_cli("export npz " + store_ + " -o " + dir_.file("x.npz")).exit_code, 0);
  const std::string missing = dir_.file("no_such_dir/ct.h5");
  for (const std::string& command : {"capture npz " + dir_.file("x.npz") + " -o " + missing,
                                     "diff " + store_ + " " + store_ + " --json " + missing,
                                     "export npz " + store_ + " -o " + missing}) {
    CliResult result = run_cli(command);
    EXPECT_EQ(result.exit_code, 2) << command;
    EXPECT_NE(result.err.find("'" + missing + "': cannot be written (no such folder: "),
              std::string::npos)
        << command << "\n"
        << result.err;
    EXPECT_EQ(result.err.find(".partial"), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find(".creating"), std::string::npos) << result.err;
  }
}

}  // namespace
}  // namespace qd
