// The input formats' registry (qnn_debug/importers/input_format.h): each format listed once, each
// told by its own content and by no other format's detector, options that mean one thing
// whatever format declares them, and the rules diff and capture build on it.
#include "qnn_debug/importers/input_format.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "../common/files.h"
#include "../common/temp_dir.h"
#include "qnn_debug/importers/npy.h"
#include "qnn_debug/importers/store_sink.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd::importers {
namespace {

using testing::TempDir;
using testing::write_text;

const std::string kRealData = QD_REALDATA_DIR "/executorch/";

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const InputFormat* format : input_formats()) out.push_back(format->name);
  return out;
}

// The formats whose detector recognizes `path`, by name.
std::vector<std::string> recognizing(const std::string& path) {
  InputHead head;
  head.folder = std::filesystem::is_directory(path);
  if (!head.folder) head.bytes = testing::slurp(path).substr(0, 16);
  std::vector<std::string> out;
  for (const InputFormat* format : input_formats()) {
    if (format->detect(head)) out.push_back(format->name);
  }
  return out;
}

// A fixture of each format, written the way its producer writes it (the real ETDump is read
// from ../shared/realdata).
class Fixtures : public ::testing::Test {
 protected:
  std::string store() {
    const std::string path = dir_.file("s.h5");
    SinkOptions options;
    options.output_path = path;
    options.producer = "input_format_test";
    auto sink = StoreSink::open(options);
    EXPECT_THAT(sink, IsOk());
    EXPECT_THAT(sink->commit(), IsOk());
    return path;
  }
  std::string npz() {
    const std::string path = dir_.file("a.npz");
    auto writer = NpzWriter::create(path);
    EXPECT_THAT(writer, IsOk());
    const uint64_t shape[] = {1};
    const uint8_t value[4] = {0, 0, 128, 63};
    EXPECT_THAT(writer->begin_array("x", DType::kFloat32, shape), IsOk());
    EXPECT_THAT(writer->write(value), IsOk());
    EXPECT_THAT(writer->end_array(), IsOk());
    EXPECT_THAT(writer->finish(), IsOk());
    return path;
  }
  std::string npy() {  // as np.save writes a 0-d float32
    const std::string path = dir_.file("x.npy");
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
    header.resize(117, ' ');  // + "\n": 118 bytes, data at byte 128
    write_text(path, std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header + "\n" +
                         std::string("\x00\x00\x80\x3f", 4));
    return path;
  }
  std::string folder() {
    const std::string path = dir_.file("HTP_OUT");
    std::filesystem::create_directories(path + "/Result_0");
    return path;
  }
  TempDir dir_;
};

TEST(InputFormats, EachFormatIsListedOnceWithItsCommandAndOptions) {
  EXPECT_EQ(names(), (std::vector<std::string>{"store", "qnn-net-run", "npz", "etdump"}));
  EXPECT_EQ(format_names(), "store, qnn-net-run, npz or etdump");
  for (const InputFormat* format : input_formats()) {
    SCOPED_TRACE(format->name);
    EXPECT_FALSE(format->noun.empty());
    EXPECT_FALSE(format->detected_as.empty());
    ASSERT_TRUE(format->detect);
    if (!format->import) {  // the store: read as it is, nothing to capture
      EXPECT_EQ(format->name, "store");
      EXPECT_TRUE(format->options.empty());
      continue;
    }
    EXPECT_FALSE(format->capture_help.empty());
    EXPECT_FALSE(format->input_name.empty());
    // Every conversion takes the shared options, last: the naming preset with the importer's
    // default, its handle map, the heap profile.
    ASSERT_GE(format->options.size(), 3u);
    const size_t shared = format->options.size() - 3;
    EXPECT_EQ(format->options[shared].key, "naming");
    EXPECT_FALSE(format->options[shared].default_value.empty());
    EXPECT_EQ(format->options[shared + 1].key, "handle_map");
    EXPECT_EQ(format->options.back().key, "heap_profile");
    std::set<std::string> keys, flags;
    for (const InputOption& option : format->options) {
      EXPECT_TRUE(keys.insert(option.key).second) << option.key;
      EXPECT_TRUE(flags.insert(option.flag).second) << option.flag;
      EXPECT_FALSE(option.help.empty()) << option.key;
    }
  }
}

// The report names each input's format; its schema's enum must know every format.
TEST(InputFormats, TheReportSchemaKnowsEveryFormat) {
  const std::string schema = testing::slurp(QD_REPORT_SCHEMA);
  const std::string marker = "\"format\": {\"enum\": [";
  const size_t at = schema.find(marker);
  ASSERT_NE(at, std::string::npos) << "no format enum in " << QD_REPORT_SCHEMA;
  const size_t end = schema.find(']', at);
  const std::string listed = schema.substr(at + marker.size(), end - at - marker.size());
  std::set<std::string> in_schema;
  for (size_t q = listed.find('"'); q != std::string::npos; q = listed.find('"', q + 1)) {
    const size_t close = listed.find('"', q + 1);
    in_schema.insert(listed.substr(q + 1, close - q - 1));
    q = close;
  }
  const std::vector<std::string> registered = names();
  EXPECT_EQ(in_schema, std::set<std::string>(registered.begin(), registered.end()));
}

// An option several formats declare (encodings, naming) is one option of a diff side: its
// spelling, diff help and arity must not depend on the format.
TEST(InputFormats, AnOptionMeansOneThingInEveryFormat) {
  const std::vector<InputOption> sides = side_options();
  std::set<std::string> keys;
  for (const InputOption& side : sides) {
    EXPECT_TRUE(keys.insert(side.key).second) << side.key;
    EXPECT_TRUE(side.default_value.empty()) << side.key;
  }
  size_t declared = 0;
  for (const InputFormat* format : input_formats()) {
    for (const InputOption& option : format->options) {
      ++declared;
      SCOPED_TRACE(format->name + " --" + option.flag);
      ASSERT_EQ(keys.count(option.key), 1u);
      const InputOption& side = *std::ranges::find(sides, option.key, &InputOption::key);
      EXPECT_EQ(option.flag, side.flag);
      EXPECT_EQ(option.side_help, side.side_help);
      EXPECT_EQ(option.both_help, side.both_help);
      EXPECT_EQ(option.many, side.many);
      EXPECT_EQ(option.path, side.path);
    }
  }
  EXPECT_EQ(keys, (std::set<std::string>{"net_json", "input_list", "encodings", "shapes", "naming",
                                         "handle_map", "heap_profile", "debug_buffer", "etrecord",
                                         "etrecord_method"}));
  EXPECT_GT(declared, sides.size());  // encodings and the naming options are shared
}

TEST_F(Fixtures, EachFixtureIsRecognizedByItsFormatAlone) {
  const std::vector<std::pair<std::string, std::string>> fixtures = {
      {store(), "store"}, {npz(), "npz"}, {npy(), "npz"}, {folder(), "qnn-net-run"}};
  for (const auto& [path, format] : fixtures) {
    SCOPED_TRACE(path);
    EXPECT_EQ(recognizing(path), std::vector<std::string>{format});
    const auto detected = detect_format(path);
    ASSERT_THAT(detected, IsOk());
    EXPECT_EQ((*detected)->name, format);
  }
}

TEST_F(Fixtures, TheRealEtdumpIsAnEtdumpAndProgramsAreNamed) {
  if (!std::filesystem::exists(kRealData + "etdump.etdp")) GTEST_SKIP() << kRealData;
  EXPECT_EQ(recognizing(kRealData + "etdump.etdp"), std::vector<std::string>{"etdump"});
  for (const char* file : {"stories260k_hybrid_llama_qnn.pte", "bundled_program.bp"}) {
    SCOPED_TRACE(file);
    EXPECT_TRUE(recognizing(kRealData + file).empty());
  }
  const auto program = detect_format(kRealData + "stories260k_hybrid_llama_qnn.pte");
  ASSERT_FALSE(program.is_ok());
  EXPECT_NE(program.status().message().find("an ExecuTorch program (flatbuffer ET12)"),
            std::string::npos);
  EXPECT_EQ(other_content(kRealData + "bundled_program.bp"), OtherContent::kBundledProgram);
}

TEST_F(Fixtures, WhatNoFormatReadsIsNamedWithEveryFormat) {
  const std::string json = dir_.file("enc.json");
  write_text(json, "  {\"x\": {}}");
  EXPECT_TRUE(recognizing(json).empty());
  EXPECT_EQ(other_content(json), OtherContent::kJson);
  const std::string text = dir_.file("notes.txt");
  write_text(text, "hello");
  const auto unknown = detect_format(text);
  ASSERT_THAT(unknown, StatusIs(ErrorCode::kCorrupt));
  EXPECT_EQ(unknown.status().message(),
            "'" + text +
                "': not a qnn-debug store, a qnn-net-run output folder, an npz or npy file or an "
                "ETDump (its first bytes match none of them)");
  EXPECT_EQ(detect_format(dir_.file("none")).status().code(), ErrorCode::kNotFound);
  const auto wrong = parse_format("tflite");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().message(),
            "unknown input format 'tflite'; expected store, qnn-net-run, npz or etdump");
}

TEST_F(Fixtures, AConversionRefusesAnotherFormatNamingTheCommandThatReadsIt) {
  const InputFormat& etdump = **parse_format("etdump");
  const std::string npz_path = npz();
  EXPECT_EQ(refuse_other_format(etdump, npz_path).message(),
            "'" + npz_path + "' is an npz/npy file, not an ETDump: use `qnn-debug capture npz " +
                npz_path + " -o store.h5`");
  const std::string store_path = store();
  EXPECT_EQ(refuse_other_format(etdump, store_path).message(),
            "'" + store_path + "' is already a qnn-debug store, not an ETDump");
  EXPECT_THAT(refuse_other_format(**parse_format("npz"), npz_path), IsOk());
  const std::string text = dir_.file("notes.txt");
  write_text(text, "hello");
  EXPECT_THAT(refuse_other_format(etdump, text), IsOk());  // the importer says what is wrong
  EXPECT_EQ(capture_command(**parse_format("qnn-net-run"), "OUT"),
            "qnn-debug capture qnn-net-run OUT --net-json model_net.json -o store.h5");
}

// diff's options for both sides: a list is added after the side's own values, a single value
// only where the side gave none.
TEST(InputSpecs, SharedOptionsAddToListsAndFillSingleValues) {
  InputSpec side;
  side.path = "ref.npz";
  side.options["encodings"] = {"mine.json"};
  side.options["net_json"] = {"mine_net.json"};
  InputSpec shared;
  shared.options["encodings"] = {"both.json"};
  shared.options["net_json"] = {"both_net.json"};
  shared.options["input_list"] = {"list.txt"};
  const InputSpec merged = with_shared_options(side, shared);
  EXPECT_EQ(merged.path, "ref.npz");
  EXPECT_EQ(merged.values("encodings"), (std::vector<std::string>{"mine.json", "both.json"}));
  EXPECT_EQ(merged.value("net_json"), "mine_net.json");
  EXPECT_EQ(merged.value("input_list"), "list.txt");
  EXPECT_EQ(merged.value("etrecord"), "");
  EXPECT_TRUE(merged.values("shapes").empty());
}

}  // namespace
}  // namespace qd::importers
