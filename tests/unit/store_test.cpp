#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <random>

#include "../common/delayed_allocation.h"
#include "../common/records.h"
#include "../common/status_matchers.h"
#include "../common/store_reading.h"
#include "../common/temp_dir.h"
#include "direct_chunks.h"
#include "h5.h"
#include "qnn_debug/base/checksum.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/etdump/store_writer.h"
#include "schema.h"

using qd::testing::IsOk;

namespace qd {
namespace {

using testing::TempDir;
using testing::tensor_record;

StoreMetadata test_metadata() { return {"store_test", "QnnHtp", "SM8650", "tiny", 1234567}; }

std::unique_ptr<StoreWriter> create_writer(const std::string& path, WriterOptions options = {}) {
  auto writer = StoreWriter::create(path, test_metadata(), options);
  EXPECT_THAT(writer, IsOk());
  return std::move(writer).value();
}

std::unique_ptr<StoreReader> open_reader(const std::string& path) {
  auto reader = StoreReader::open(path);
  EXPECT_THAT(reader, IsOk());
  return reader.is_ok() ? std::move(reader).value() : nullptr;
}

std::vector<uint8_t> pattern_bytes(size_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

TEST(Store, RoundTripsEveryDtypeWithItsBytesAndMetadata) {
  TempDir dir;
  const std::string path = dir.file("all.h5");
  size_t count = 0;
  const DTypeInfo* dtypes = all_dtypes(&count);
  {
    auto writer = create_writer(path);
    ASSERT_THAT(writer->begin_run("every dtype", 10), IsOk());
    for (size_t i = 0; i < count; ++i) {
      TensorRecord r = tensor_record(std::string(dtypes[i].name), dtypes[i].dtype, {3, 5});
      r.handles = {static_cast<int64_t>(i), 1000 + static_cast<int64_t>(i)};
      r.output_index = static_cast<int32_t>(i % 3);
      if (dtypes[i].kind != DTypeKind::kFloat && dtypes[i].kind != DTypeKind::kBool) {
        r.quant.scales = {0.25};
        r.quant.offsets = {-3};
        r.quant.bitwidth = dtypes[i].bits;
        r.quant.convention = (i % 2) ? QuantConvention::kZeroPoint : QuantConvention::kQnnOffset;
      }
      const auto bytes = pattern_bytes(storage_bytes(dtypes[i].dtype, 15), i);
      ASSERT_THAT(writer->append_tensor(r, bytes, 100 + i), IsOk()) << dtypes[i].name;
    }
    ASSERT_THAT(writer->end_run(20, 0), IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->metadata().producer, "store_test");
  EXPECT_EQ(reader->metadata().soc, "SM8650");
  EXPECT_EQ(reader->metadata().created_unix_ns, 1234567);
  const std::vector<TensorEntry> tensors = testing::all_tensors(*reader);
  ASSERT_EQ(tensors.size(), count);
  ASSERT_EQ(reader->runs().size(), 1u);
  EXPECT_TRUE(reader->runs()[0].complete);
  EXPECT_EQ(reader->runs()[0].name, "every dtype");
  EXPECT_EQ(reader->runs()[0].tensor_count, count);
  for (size_t i = 0; i < count; ++i) {
    const TensorEntry& t = tensors[i];
    EXPECT_EQ(t.name, dtypes[i].name);
    EXPECT_EQ(t.dtype, dtypes[i].dtype);
    EXPECT_EQ(t.seq, i);
    EXPECT_EQ(t.capture_unix_ns, static_cast<int64_t>(100 + i));
    EXPECT_EQ(t.dims, (std::vector<uint64_t>{3, 5}));
    EXPECT_EQ(t.handles, (std::vector<int64_t>{static_cast<int64_t>(i), 1000 + int64_t(i)}));
    EXPECT_EQ(t.output_index, static_cast<int32_t>(i % 3));
    if (t.quant.is_quantized()) {
      EXPECT_EQ(t.quant.scales, std::vector<double>{0.25});
      EXPECT_EQ(t.quant.offsets, std::vector<int64_t>{-3});
      EXPECT_EQ(t.quant.convention,
                (i % 2) ? QuantConvention::kZeroPoint : QuantConvention::kQnnOffset);
    }
    auto bytes = reader->read_tensor(t);
    ASSERT_THAT(bytes, IsOk());
    EXPECT_EQ(*bytes, pattern_bytes(storage_bytes(dtypes[i].dtype, 15), i)) << dtypes[i].name;
  }
}

TEST(Store, KeepsPerAxisQuantizationAxisOrderAndStats) {
  TempDir dir;
  const std::string path = dir.file("axis.h5");
  {
    auto writer = create_writer(path);
    TensorRecord r = tensor_record("w", DType::kSFixed8, {1, 2, 2, 3});
    r.axis_order = {0, 3, 1, 2};
    r.quant.axis = 3;
    r.quant.scales = {0.1, 0.2, 0.4};
    r.quant.offsets = {0, 1, -1};
    std::vector<uint8_t> q(12);
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(i);
    ASSERT_THAT(writer->append_tensor(r, q, 0), IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  const TensorEntry t = testing::all_tensors(*reader).at(0);
  EXPECT_EQ(t.axis_order, (std::vector<uint8_t>{0, 3, 1, 2}));
  EXPECT_EQ(describe_axis_order(t.axis_order), "NHWC->NCHW");
  EXPECT_EQ(t.quant.axis, 3);
  EXPECT_EQ(t.quant.scales, (std::vector<double>{0.1, 0.2, 0.4}));
  EXPECT_EQ(t.quant.offsets, (std::vector<int64_t>{0, 1, -1}));
  // channel c = i % 3; real = (q + offset_c) * scale_c; max is q=11 (c=2): (11 - 1) * 0.4
  EXPECT_DOUBLE_EQ(t.stats.max, 4.0);
  EXPECT_DOUBLE_EQ(t.stats.min, 0.0);
  EXPECT_EQ(reader->runs().size(), 1u);
  EXPECT_EQ(reader->runs()[0].name, "run0");  // begun implicitly
  EXPECT_FALSE(reader->runs()[0].complete);   // and never ended
}

TEST(Store, RoundTripsATensorOf64MiBInPieces) {
  TempDir dir;
  const std::string path = dir.file("big.h5");
  const size_t elements = (size_t{64} << 20) / 4 + 3;  // a bit over 64 MiB of float32
  std::vector<float> values(elements);
  for (size_t i = 0; i < elements; ++i) values[i] = static_cast<float>(i % 1000) * 0.5f;
  {
    auto writer = create_writer(path);
    TensorRecord r = tensor_record("big", DType::kFloat32, {elements});
    const std::span bytes(reinterpret_cast<const uint8_t*>(values.data()), elements * 4);
    ASSERT_THAT(writer->append_tensor(r, bytes, 0), IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  const TensorEntry t = testing::all_tensors(*reader).at(0);
  EXPECT_EQ(t.data_nbytes, elements * 4);
  EXPECT_DOUBLE_EQ(t.stats.max, 999 * 0.5);
  auto bytes = reader->read_tensor(t);
  ASSERT_THAT(bytes, IsOk());
  EXPECT_EQ(std::memcmp(bytes->data(), values.data(), bytes->size()), 0);
  // A range read from the middle, as the comparator streams it.
  std::vector<uint8_t> piece(16);
  ASSERT_THAT(reader->read_tensor_range(t, 4 * 1001, piece), IsOk());
  float first;
  std::memcpy(&first, piece.data(), 4);
  EXPECT_EQ(first, 0.5f);
  EXPECT_THAT(reader->verify_tensor(t), IsOk());
  EXPECT_FALSE(reader->read_tensor_range(t, t.data_nbytes - 8, piece).is_ok());
}

TEST(Store, HundredThousandTinyTensorsStayCheap) {
  TempDir dir;
  const std::string path = dir.file("tiny.h5");
  constexpr int kCount = 100'000;
  {
    auto writer = create_writer(path);
    std::vector<uint8_t> bytes(64);
    for (int i = 0; i < kCount; ++i) {
      TensorRecord r = tensor_record("op_" + std::to_string(i) + "__debugID_" + std::to_string(i),
                                     DType::kFloat32, {16});
      r.handles = {i};
      std::memcpy(bytes.data(), &i, sizeof i);
      ASSERT_THAT(writer->append_tensor(r, bytes, i), IsOk());
      if (i % 1000 == 999) {
        ASSERT_THAT(writer->commit(), IsOk());
      }
    }
    ASSERT_THAT(writer->close(), IsOk());
  }
  // 64 data bytes + a ~250-byte row + name: far below a kilobyte each.
  EXPECT_LT(std::filesystem::file_size(path), uint64_t{kCount} * 1024);
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(testing::all_tensors(*reader).size(), static_cast<size_t>(kCount));
  const TensorEntry last = testing::all_tensors(*reader).back();
  EXPECT_EQ(last.handles, std::vector<int64_t>{kCount - 1});
  auto bytes = reader->read_tensor(last);
  ASSERT_THAT(bytes, IsOk());
  int stored;
  std::memcpy(&stored, bytes->data(), sizeof stored);
  EXPECT_EQ(stored, kCount - 1);
}

TEST(Store, KeepsProfileEventsMemoryCheckpointsAndGraph) {
  TempDir dir;
  const std::string path = dir.file("events.h5");
  {
    auto writer = create_writer(path);
    ASSERT_THAT(writer->append_memory_checkpoint({0, "DSP:before_context_created", 42, 7}), IsOk());
    ASSERT_THAT(writer->begin_run("r", 1), IsOk());
    ASSERT_THAT(writer->append_profile_event({0, "conv__debugID_3", {3}, 100, 250, "cycles"}),
                IsOk());
    ASSERT_THAT(writer->append_graph_node({"conv", "Conv2d", {"in", "w"}, {"conv_out"}, {3}}),
                IsOk());
    ASSERT_THAT(writer->end_run(2, 5), IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(reader->memory_checkpoints().size(), 1u);
  EXPECT_EQ(reader->memory_checkpoints()[0].run_id, kNoRun);
  EXPECT_EQ(reader->memory_checkpoints()[0].label, "DSP:before_context_created");
  EXPECT_EQ(reader->memory_checkpoints()[0].bytes, 42u);
  ASSERT_EQ(reader->profile_events().size(), 1u);
  const ProfileEvent& e = reader->profile_events()[0];
  EXPECT_EQ(e.run_id, 0u);
  EXPECT_EQ(e.handles, std::vector<int64_t>{3});
  EXPECT_EQ(e.end - e.start, 150);
  EXPECT_EQ(e.unit, "cycles");
  ASSERT_EQ(reader->graph().size(), 1u);
  EXPECT_EQ(reader->graph()[0].inputs, (std::vector<std::string>{"in", "w"}));
  EXPECT_EQ(reader->graph()[0].outputs, std::vector<std::string>{"conv_out"});
  EXPECT_EQ(reader->runs().at(0).dropped_count, 5u);
  EXPECT_TRUE(reader->runs().at(0).complete);
}

TEST(Store, HostileNamesRoundTripByteForByte) {
  TempDir dir;
  const std::string path = dir.file("names.h5");
  const std::vector<std::string> names = {"",
                                          "<img src=x onerror=alert(1)>",
                                          "a/b/c",
                                          std::string("\xff\xfe\x80 bad utf8"),
                                          std::string(100'000, 'x'),
                                          "tab\tnew\nline"};
  {
    auto writer = create_writer(path);
    for (const std::string& name : names) {
      ASSERT_TRUE(
          writer->append_tensor(tensor_record(name, DType::kUInt8, {1}), std::vector<uint8_t>{1}, 0)
              .is_ok());
    }
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  const std::vector<TensorEntry> tensors = testing::all_tensors(*reader);
  ASSERT_EQ(tensors.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(tensors[i].name, names[i]);
}

// A writer that leaves durability to the page cache leaves its store's data there: closing it
// does not push the store to the disk (ext4 did, as for a file rewritten in place, since HDF5
// creates the file with O_TRUNC). Skipped where the file system allocates blocks at once.
TEST(Store, ANonDurableStoreIsNotWrittenOutAtClose) {
  TempDir dir;
  if (!testing::write_delayed(dir.file("probe"), std::string(1 << 20, 'p')) ||
      testing::has_unallocated_data(dir.file("probe")) != 1) {
    GTEST_SKIP() << "this file system allocated the blocks at once";
  }
  const std::string path = dir.file("s.h5");
  WriterOptions options;
  options.durable = false;
  auto writer = create_writer(path, options);
  const auto bytes = pattern_bytes(4 << 20, 7);
  ASSERT_THAT(writer->append_tensor(tensor_record("t", DType::kUInt8, {4 << 20}), bytes, 1),
              IsOk());
  ASSERT_THAT(writer->close(), IsOk());
  if (testing::has_unallocated_data(dir.file("probe")) != 1) {
    GTEST_SKIP() << "the kernel's writeback ran meanwhile (the older probe file went out too)";
  }
  EXPECT_EQ(testing::has_unallocated_data(path), 1) << "closing the store wrote it out";
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(testing::all_tensors(*reader).size(), 1u);
}

TEST(Store, DeflateIsOptionalAndTransparent) {
  TempDir dir;
  const std::string path = dir.file("deflate.h5");
  std::vector<uint8_t> zeros(1 << 20, 0);
  {
    auto writer = create_writer(path, {.deflate_level = 1});
    ASSERT_TRUE(
        writer->append_tensor(tensor_record("z", DType::kUInt8, {zeros.size()}), zeros, 0).is_ok());
    ASSERT_THAT(writer->close(), IsOk());
  }
  EXPECT_LT(std::filesystem::file_size(path), zeros.size() / 4);  // it really compressed
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(*reader->read_tensor(testing::all_tensors(*reader).at(0)), zeros);
}

TEST(Store, WriterRejectsInconsistentRecords) {
  TempDir dir;
  auto writer = create_writer(dir.file("bad.h5"));
  std::vector<uint8_t> four(4);
  TensorRecord r = tensor_record("n", DType::kFloat32, {2});  // needs 8 bytes
  Status s = writer->append_tensor(r, four, 0);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'n'"), std::string::npos) << s.message();
  r.dims = {1};
  r.axis_order = {1};
  EXPECT_EQ(writer->append_tensor(r, four, 0).code(), ErrorCode::kInvalidArgument);
  r.axis_order = {};
  r.quant.scales = {1.0, 2.0};
  r.quant.offsets = {0, 0};
  r.quant.axis = 0;  // axis 0 has length 1
  EXPECT_EQ(writer->append_tensor(r, four, 0).code(), ErrorCode::kInvalidArgument);
  r.quant = {};
  r.dims = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(writer->append_tensor(r, four, 0).code(), ErrorCode::kInvalidArgument);
  r.dims = {uint64_t{1} << 40, uint64_t{1} << 40};
  EXPECT_EQ(writer->append_tensor(r, four, 0).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(writer->end_run(0, 0).code(), ErrorCode::kState);
}

// ---- bad input to the reader: one precise error naming the file ----

void expect_open_error(const std::string& path, const std::string& fragment) {
  auto reader = StoreReader::open(path);
  ASSERT_FALSE(reader.is_ok());
  const std::string& message = reader.status().message();
  EXPECT_EQ(message.rfind(path, 0), 0u) << message;  // starts with the path
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(StoreReader, ReportsMissingEmptyAndNonHdf5Files) {
  TempDir dir;
  expect_open_error(dir.file("missing.h5"), "no such file");
  std::ofstream(dir.file("empty.h5")).flush();
  expect_open_error(dir.file("empty.h5"), "empty file");
  std::ofstream(dir.file("text.h5")) << "just some text, not HDF5\n";
  expect_open_error(dir.file("text.h5"), "not an HDF5 file");
  expect_open_error(dir.path().string(), "is a directory");
}

TEST(StoreReader, ReportsTruncatedStores) {
  TempDir dir;
  const std::string path = dir.file("whole.h5");
  {
    auto writer = create_writer(path);
    ASSERT_TRUE(
        writer->append_tensor(tensor_record("t", DType::kUInt8, {4096}), pattern_bytes(4096, 1), 0)
            .is_ok());
    ASSERT_THAT(writer->close(), IsOk());
  }
  const auto size = std::filesystem::file_size(path);
  for (uint64_t keep : {uint64_t{100}, uint64_t{1000}, size / 2}) {
    const std::string cut = dir.file("cut" + std::to_string(keep) + ".h5");
    std::filesystem::copy_file(path, cut);
    std::filesystem::resize_file(cut, keep);
    auto reader = StoreReader::open(cut);
    if (reader.is_ok()) {
      // HDF5 may still open a file cut after its index; then the data must fail its check.
      for (const TensorEntry& t : testing::all_tensors(**reader)) {
        EXPECT_FALSE(reader.value()->read_tensor(t).is_ok()) << keep;
      }
    } else {
      EXPECT_EQ(reader.status().message().rfind(cut, 0), 0u) << reader.status().message();
    }
  }
}

TEST(StoreReader, RejectsHdf5FilesThatAreNotStoresAndNewerVersions) {
  TempDir dir;
  const std::string foreign = dir.file("foreign.h5");
  {
    h5::File file(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(file.valid());
  }
  expect_open_error(foreign, "not a qnn-debug store");
  const std::string future = dir.file("future.h5");
  {
    h5::File file(H5Fcreate(future.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(h5::write_fixed_string_attribute(file.get(), "format", "qnn-debug-store"));
    ASSERT_TRUE(h5::write_int64_attribute(file.get(), "format_version", 99));
  }
  expect_open_error(future, "version 99");
}

// A variable-length string attribute, as format 1 wrote its strings (in HDF5's global heap).
void write_heap_string_attribute(hid_t object, const char* name, const std::string& value) {
  h5::Datatype type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  h5::Dataspace scalar(H5Screate(H5S_SCALAR));
  h5::Attribute attribute(
      H5Acreate2(object, name, type.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(attribute.valid()) << name;
  const char* text = value.c_str();
  ASSERT_GE(H5Awrite(attribute.get(), type.get(), &text), 0) << name;
}

// Format 1 (unreleased) kept its strings in the global heap, which carries no checksum: a
// damaged one hung or crashed libhdf5. Such a store is refused in one line before any string is
// read, also when its heap is damaged.
TEST(StoreReader, RefusesFormatVersion1StoresWithoutReadingTheirStrings) {
  TempDir dir;
  const std::string path = dir.file("v1.h5");
  {
    h5::PropertyList access(H5Pcreate(H5P_FILE_ACCESS));
    H5Pset_libver_bounds(access.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    h5::File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()));
    ASSERT_TRUE(file.valid());
    write_heap_string_attribute(file.get(), "format", "qnn-debug-store");
    ASSERT_TRUE(h5::write_int64_attribute(file.get(), "format_version", 1));
    write_heap_string_attribute(file.get(), "producer", "HEAP_PRODUCER_STRING");
  }
  const std::string refusal =
      path +
      ": store format version 1, an unreleased development format with unchecked "
      "strings and rows, no longer read; capture it again";
  expect_open_error(path, refusal);
  // Damage the heap string: the answer is the same line, not a hang, a crash or a warning.
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::string content((std::istreambuf_iterator<char>(file)), {});
  const size_t at = content.find("HEAP_PRODUCER_STRING");
  ASSERT_NE(at, std::string::npos);
  file.seekp(static_cast<std::streamoff>(at - 8));  // into the heap object's length
  file.put('\x7f');
  file.close();
  expect_open_error(path, refusal);
}

// tensors_of_run reads a run's rows through the index built at open: each run's tensors, in
// capture order, the same entries all_tensors() gives; a run with none and an unknown run answer
// empty. Runs cannot
// interleave: the writer refuses a second begin_run while one is open, so each run's tensors are
// contiguous in capture order.
TEST(StoreReader, TensorsOfRunGivesEachRunItsOwnTensorsInCaptureOrder) {
  TempDir dir;
  const std::string path = dir.file("runs.h5");
  const std::vector<uint8_t> four(4, 0);
  const auto append = [&](StoreWriter& writer, const std::string& name) {
    ASSERT_THAT(writer.append_tensor(tensor_record(name, DType::kUInt8, {4}), four, 0), IsOk());
  };
  {
    auto writer = create_writer(path);
    ASSERT_THAT(writer->begin_run("first", 1), IsOk());
    for (const char* name : {"c", "a", "b"}) append(*writer, name);  // not sorted: order kept
    EXPECT_EQ(writer->begin_run("nested", 2).status().code(), ErrorCode::kState);
    ASSERT_THAT(writer->end_run(3, 0), IsOk());
    ASSERT_THAT(writer->begin_run("empty", 4), IsOk());
    ASSERT_THAT(writer->end_run(5, 0), IsOk());
    ASSERT_THAT(writer->begin_run("third", 6), IsOk());
    for (const char* name : {"z", "a"}) append(*writer, name);
    ASSERT_THAT(writer->end_run(7, 0), IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  ASSERT_EQ(reader->runs().size(), 3u);
  const auto names_and_seqs = [&](uint32_t run) {
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const TensorEntry& t : testing::run_tensors(*reader, run)) {
      EXPECT_EQ(t.run_id, run);
      out.emplace_back(t.name, t.seq);
    }
    return out;
  };
  using Named = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(names_and_seqs(0), (Named{{"c", 0}, {"a", 1}, {"b", 2}}));
  EXPECT_TRUE(testing::run_tensors(*reader, 1).empty());
  EXPECT_EQ(reader->runs()[1].tensor_count, 0u);
  EXPECT_EQ(names_and_seqs(2), (Named{{"z", 3}, {"a", 4}}));
  EXPECT_TRUE(testing::run_tensors(*reader, 3).empty());
  EXPECT_TRUE(testing::run_tensors(*reader, kNoRun).empty());
  EXPECT_EQ(reader->tensor_count(), 5u);
  const std::vector<TensorEntry> all = testing::all_tensors(*reader);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[3].name, "z");
  EXPECT_EQ(all[3].run_id, 2u);
  const Result<TensorEntry> by_seq = reader->tensor_at(4);
  ASSERT_THAT(by_seq, IsOk());
  EXPECT_EQ(by_seq->name, "a");
  EXPECT_EQ(by_seq->run_id, 2u);
  EXPECT_EQ(reader->tensor_at(5).status().code(), ErrorCode::kNotFound);
}

// The reader reads tensor rows a few thousand at a time, at open and when a run is asked for:
// runs that straddle those pieces come back whole, with their own names, handles and
// quantization, and a tensor found by seq is the one written with it.
TEST(StoreReader, RunsThatStraddleTheReadPiecesComeBackWhole) {
  TempDir dir;
  const std::string path = dir.file("straddle.h5");
  constexpr uint32_t kRuns = 3;
  constexpr uint32_t kPerRun = 3001;  // runs end at rows 3001, 6002, 9003: past 4096 and 8192
  const auto name_of = [](uint32_t run, uint32_t i) {
    return "run" + std::to_string(run) + "/t" + std::to_string(i);
  };
  {
    auto writer = create_writer(path);
    for (uint32_t run = 0; run < kRuns; ++run) {
      ASSERT_THAT(writer->begin_run("r" + std::to_string(run), 1), IsOk());
      for (uint32_t i = 0; i < kPerRun; ++i) {
        TensorRecord record = tensor_record(name_of(run, i), DType::kUFixed8, {2});
        record.handles = {int64_t{run} * kPerRun + i};
        record.quant.scales = {0.5 + i};
        record.quant.offsets = {-int64_t{run}};
        ASSERT_THAT(writer->append_tensor(record, std::vector<uint8_t>{1, 2}, 0), IsOk());
      }
      ASSERT_THAT(writer->end_run(2, 0), IsOk());
    }
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->tensor_count(), uint64_t{kRuns} * kPerRun);
  for (uint32_t run = 0; run < kRuns; ++run) {
    const std::vector<TensorEntry> tensors = testing::run_tensors(*reader, run);
    ASSERT_EQ(tensors.size(), kPerRun);
    for (uint32_t i = 0; i < kPerRun; ++i) {
      const TensorEntry& t = tensors[i];
      ASSERT_EQ(t.name, name_of(run, i));
      ASSERT_EQ(t.run_id, run);
      ASSERT_EQ(t.seq, uint64_t{run} * kPerRun + i);
      ASSERT_EQ(t.handles, std::vector<int64_t>{int64_t{run} * kPerRun + i});
      ASSERT_EQ(t.quant.scales, std::vector<double>{0.5 + i});
      ASSERT_EQ(t.quant.offsets, std::vector<int64_t>{-int64_t{run}});
    }
  }
  for (const uint64_t seq : {uint64_t{0}, uint64_t{4095}, uint64_t{4096}, uint64_t{9002}}) {
    const Result<TensorEntry> t = reader->tensor_at(seq);
    ASSERT_THAT(t, IsOk());
    EXPECT_EQ(t->name,
              name_of(static_cast<uint32_t>(seq / kPerRun), static_cast<uint32_t>(seq % kPerRun)));
  }
  uint64_t visited = 0;
  ASSERT_TRUE(reader
                  ->for_each_tensor([&](const TensorEntry& t) {
                    EXPECT_EQ(t.seq, visited++);
                    return visited == 5000 ? error(ErrorCode::kInternal, "stop") : Status::ok();
                  })
                  .code() == ErrorCode::kInternal);
  EXPECT_EQ(visited, 5000u);  // a visitor's error stops the walk and is returned
}

// Format 2 rows carry a checksum over their fields and their /meta bytes: a finished store with
// a damaged name is refused, naming the table and the row.
TEST(StoreReader, RefusesADamagedRowOfAFinishedStore) {
  TempDir dir;
  const std::string path = dir.file("rows.h5");
  {
    auto writer = create_writer(path);
    const std::vector<uint8_t> four(4, 0);
    ASSERT_THAT(writer->append_tensor(tensor_record("NAME_ONE", DType::kUInt8, {4}), four, 0),
                IsOk());
    ASSERT_THAT(writer->append_tensor(tensor_record("NAME_TWO", DType::kUInt8, {4}), four, 0),
                IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  ASSERT_TRUE(open_reader(path));
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t at = content.find("NAME_TWO");
  ASSERT_NE(at, std::string::npos);
  file.seekp(static_cast<std::streamoff>(at + 5));
  file.put('X');  // "NAME_XWO": a name the reader would otherwise show as is
  file.close();
  expect_open_error(path, "/tensors row 1 is damaged: checksum mismatch");
}

// /shape_guesses came after format 2's first stores: a store without it reads, with no guesses;
// one with it names the tensors and warns about them.
TEST(StoreReader, ShapeGuessesReadBackAndStoresWithoutTheTableStillRead) {
  TempDir dir;
  const std::string path = dir.file("guess.h5");
  {
    auto writer = create_writer(path);
    const std::vector<uint8_t> four(4, 0);
    ASSERT_THAT(writer->append_tensor(tensor_record("probs", DType::kUInt8, {4}), four, 0), IsOk());
    ASSERT_THAT(writer->append_shape_guess("probs"), IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->shape_guesses(), (std::vector<std::string>{"probs"}));
  EXPECT_TRUE(reader->shape_guessed("probs"));
  EXPECT_FALSE(reader->shape_guessed("other"));
  ASSERT_EQ(reader->warnings().size(), 1u);
  EXPECT_NE(reader->warnings()[0].find("1 tensors were read with a guessed shape ('probs')"),
            std::string::npos)
      << reader->warnings()[0];
  reader.reset();
  {
    h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(file.valid());
    ASSERT_GE(H5Ldelete(file.get(), "shape_guesses", H5P_DEFAULT), 0);
  }
  reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_TRUE(reader->shape_guesses().empty());
  EXPECT_TRUE(reader->warnings().empty());
  EXPECT_EQ(testing::all_tensors(*reader).size(), 1u);
}

// /profile_instructions keeps the instruction ids producers give (a row only for those); a store
// without the table reads every event as having none; a changed id fails its row checksum.
TEST(StoreReader, ProfileInstructionIdsReadBackOptionallyAndChecked) {
  TempDir dir;
  const std::string path = dir.file("instr.h5");
  {
    auto writer = create_writer(path);
    ASSERT_THAT(writer->begin_run("r", 1), IsOk());
    ASSERT_THAT(writer->append_profile_event({0, "init", {}, 0, 5, "ticks"}), IsOk());
    ASSERT_THAT(writer->append_profile_event({0, "conv", {}, 5, 9, "ticks", 3}), IsOk());
    ASSERT_THAT(writer->append_profile_event({0, "conv", {}, 9, 12, "ticks", 7}), IsOk());
    ASSERT_THAT(writer->end_run(2, 0), IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto ids = [](const StoreReader& reader) {
    std::vector<int64_t> out;
    for (const ProfileEvent& e : reader.profile_events()) out.push_back(e.instruction_id);
    return out;
  };
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(ids(*reader), (std::vector<int64_t>{-1, 3, 7}));
  reader.reset();
  {
    h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(file.valid());
    h5::Dataset table(H5Dopen2(file.get(), schema::kProfileInstructionTable, H5P_DEFAULT));
    ASSERT_TRUE(table.valid());
    std::vector<schema::ProfileInstructionRow> rows(2);
    const hid_t type = schema::profile_instruction_row_type();
    ASSERT_GE(H5Dread(table.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
    EXPECT_EQ(rows[0].event, 1u);  // row 0 of /profile_events has no id: no row of its own
    rows[0].instruction_id = 4;
    ASSERT_GE(H5Dwrite(table.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
  }
  auto damaged = StoreReader::open(path);
  ASSERT_FALSE(damaged.is_ok());
  EXPECT_NE(damaged.status().message().find("/profile_instructions row 0 is damaged"),
            std::string::npos)
      << damaged.status().message();
  {
    h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(file.valid());
    ASSERT_GE(H5Ldelete(file.get(), schema::kProfileInstructionTable, H5P_DEFAULT), 0);
  }
  reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(ids(*reader), (std::vector<int64_t>{-1, -1, -1}));
}

TEST(StoreReader, DetectsCorruptedTensorBytes) {
  TempDir dir;
  const std::string path = dir.file("flip.h5");
  const auto payload = pattern_bytes(1 << 16, 9);
  {
    auto writer = create_writer(path);
    ASSERT_TRUE(
        writer->append_tensor(tensor_record("t", DType::kUInt8, {payload.size()}), payload, 0)
            .is_ok());
    ASSERT_THAT(writer->close(), IsOk());
  }
  // Flip one byte of the payload where it sits in the file.
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(file)), {});
  const auto at = content.find(std::string(payload.begin(), payload.begin() + 64));
  ASSERT_NE(at, std::string::npos);
  file.seekp(static_cast<std::streamoff>(at + 100));
  file.put(static_cast<char>(payload[100] ^ 0xFF));
  file.close();
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  auto bytes = reader->read_tensor(testing::all_tensors(*reader).at(0));
  ASSERT_FALSE(bytes.is_ok());
  EXPECT_NE(bytes.status().message().find("checksum mismatch"), std::string::npos);
  EXPECT_NE(bytes.status().message().find("'t'"), std::string::npos);
  EXPECT_FALSE(reader->verify_tensor(testing::all_tensors(*reader).at(0)).is_ok());
}

// Predicted chunk addresses (StoreReader::stream_tensor_range): chunks mostly follow each other,
// but a commit puts other objects between them. Every tensor read streaming, and relocated and
// read again when its CRC disagrees after a prediction, gives the bytes read_tensor gives; a
// damaged tensor stays damaged after relocation.
TEST(StoreReader, PredictedChunksAreRelocatedWhenTheCrcSaysSo) {
  TempDir dir;
  const std::string path = dir.file("predicted.h5");
  std::vector<std::vector<uint8_t>> payloads;
  {
    auto writer = create_writer(path, {.deflate_level = 0, .durable = false});
    for (uint32_t run = 0; run < 6; ++run) {
      ASSERT_THAT(writer->begin_run("r" + std::to_string(run), run), IsOk());
      for (uint32_t t = 0; t < 3; ++t) {
        payloads.push_back(pattern_bytes((size_t{1} << 19) + 4099 * t, run * 3 + t));
        const auto& p = payloads.back();
        ASSERT_THAT(writer->append_tensor(tensor_record("t", DType::kUInt8, {p.size()}), p, 0),
                    IsOk());
      }
      ASSERT_THAT(writer->end_run(run, 0), IsOk());
      ASSERT_THAT(writer->commit(), IsOk());
    }
    ASSERT_THAT(writer->close(), IsOk());
  }
  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  const std::vector<TensorEntry> tensors = testing::all_tensors(*reader);
  ASSERT_EQ(tensors.size(), payloads.size());
  int relocated = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<uint8_t> bytes(tensors[i].data_nbytes);
    bool predicted = false;
    ASSERT_THAT(reader->stream_tensor_range(tensors[i], 0, bytes, predicted), IsOk());
    if (crc32c(bytes.data(), bytes.size()) != tensors[i].data_crc32c) {
      ASSERT_TRUE(predicted) << "a mismatch without a prediction is damage";
      reader->relocate(tensors[i]);
      ++relocated;
      ASSERT_THAT(reader->stream_tensor_range(tensors[i], 0, bytes, predicted), IsOk());
    }
    EXPECT_EQ(bytes, payloads[i]) << "tensor " << i;
  }
  EXPECT_GT(relocated, 0) << "the commits should have put something between two chunks";
}

// The comparator reads the data pool with pread at chunk addresses HDF5 reports; every range,
// aligned or not, within one chunk or across several, must equal what H5Dread returns.
TEST(Store, DirectChunkReadsEqualHdf5Reads) {
  TempDir dir;
  const std::string path = dir.file("direct.h5");
  const std::vector<uint8_t> small = pattern_bytes(1001, 1);  // shifts what follows off alignment
  const std::vector<uint8_t> large = pattern_bytes((size_t{3} << 20) + 77, 2);
  {
    auto writer = create_writer(path);
    ASSERT_THAT(writer->append_tensor(tensor_record("small", DType::kUInt8, {1001}), small, 0),
                IsOk());
    TensorRecord r = tensor_record("large", DType::kUInt8, {large.size()});
    ASSERT_THAT(writer->append_tensor(r, large, 0), IsOk());
    ASSERT_THAT(writer->close(), IsOk());
  }
  h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  h5::Dataset pool(H5Dopen2(file.get(), "/data", H5P_DEFAULT));
  ASSERT_TRUE(pool.valid());
  auto direct = DirectChunks::open(path, pool.get());
  ASSERT_TRUE(direct) << "an unfiltered chunked pool is readable directly";
  const uint64_t chunk = uint64_t{1} << 20;
  const std::pair<uint64_t, uint64_t> ranges[] = {
      {0, 1001}, {1001, 5}, {chunk - 3, 9}, {chunk - 1001, 2 * chunk + 17}, {1001, large.size()}};
  for (const auto& [offset, size] : ranges) {
    std::vector<uint8_t> got(size);
    ASSERT_TRUE(direct->read(offset, got)) << offset;
    for (uint64_t i = 0; i < size; ++i) {
      const uint64_t at = offset + i;
      const uint8_t expected = at < 1001 ? small[at] : large[at - 1001];
      ASSERT_EQ(got[i], expected) << "byte " << at;
    }
  }
  std::vector<uint8_t> past_end(16);
  EXPECT_FALSE(direct->read(1001 + large.size() + chunk, past_end)) << "no chunk there";
}

}  // namespace
}  // namespace qd
