// StoreSink, the writer every importer and the Python StoreWriter share: what the capture ABI
// cannot carry (a 64-bit offset, a NUL in a name, an index below -1) is refused there with the
// tensor's name, never wrapped or cut on the way to qd_tensor.
#include "qnn_debug/importers/store_sink.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../common/records.h"
#include "../common/store_reading.h"
#include "../common/temp_dir.h"
#include "capture_abi.h"
#include "qnn_debug/etdump/store_reader.h"

using qd::testing::IsOk;

namespace qd::importers {
namespace {

constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// One int8 value, quantized per tensor with `offset`.
TensorRecord quantized(const std::string& name, int64_t offset) {
  TensorRecord record;
  record.name = name;
  record.dtype = DType::kSFixed8;
  record.dims = {1};
  record.quant.scales = {0.5};
  record.quant.offsets = {offset};
  return record;
}

class StoreSinkTest : public ::testing::Test {
 protected:
  StoreSink open_sink() {
    SinkOptions options;
    options.output_path = path_;
    options.producer = "store_sink_test";
    Result<StoreSink> sink = StoreSink::open(options);
    EXPECT_THAT(sink, IsOk());
    return std::move(sink).value();
  }
  Status capture(StoreSink& sink, const TensorRecord& record) {
    const std::vector<uint8_t> data(storage_bytes(record.dtype, record.element_count()), 1);
    return sink.capture(record, data, /*handles_given=*/true);
  }
  // The one tensor's offsets as stored.
  std::vector<int64_t> stored_offsets() {
    auto reader = StoreReader::open(path_);
    EXPECT_THAT(reader, IsOk());
    EXPECT_EQ(testing::all_tensors(**reader).size(), 1u);
    return testing::all_tensors(**reader).at(0).quant.offsets;
  }

  const qd::testing::TempDir dir_;
  const std::string path_ = dir_.file("s.h5");
};

void expect_refused(const Status& status, const std::string& fragment) {
  testing::expect_failure(status, ErrorCode::kInvalidArgument, fragment);
}

TEST(CaptureAbiRange, OffsetsFitInt32Exactly) {
  EXPECT_TRUE(offset_fits_capture_abi(kInt32Min));
  EXPECT_TRUE(offset_fits_capture_abi(kInt32Max));
  EXPECT_FALSE(offset_fits_capture_abi(kInt32Min - 1));
  EXPECT_FALSE(offset_fits_capture_abi(kInt32Max + 1));
  EXPECT_FALSE(offset_fits_capture_abi(int64_t{1} << 40));
}

// Before: 2^31 + 5 was stored as -2147483643, 2^40 as 0 and 2^32 + 5 as 5.
TEST_F(StoreSinkTest, OffsetsBeyondInt32AreRefusedNamingTheTensor) {
  StoreSink sink = open_sink();
  ASSERT_THAT(sink.begin_run("r"), IsOk());
  for (const int64_t offset :
       {kInt32Max + 6, int64_t{1} << 40, (int64_t{1} << 32) + 5, kInt32Min - 1}) {
    expect_refused(
        capture(sink, quantized("wide", offset)),
        "tensor 'wide': quantization offset " + std::to_string(offset) + " is outside int32");
  }
}

TEST_F(StoreSinkTest, Int32BoundaryOffsetsAreStoredExactly) {
  {
    StoreSink sink = open_sink();
    ASSERT_THAT(sink.begin_run("r"), IsOk());
    TensorRecord record = quantized("edge", 0);
    record.dims = {2};
    record.quant.axis = 0;
    record.quant.scales = {0.5, 0.25};
    record.quant.offsets = {kInt32Min, kInt32Max};
    ASSERT_THAT(capture(sink, record), IsOk());
    ASSERT_THAT(sink.end_run(), IsOk());
    ASSERT_THAT(sink.commit(), IsOk());
  }
  EXPECT_EQ(stored_offsets(), (std::vector<int64_t>{kInt32Min, kInt32Max}));
}

// Before: 'a\0b' was stored as 'a', colliding with a tensor named 'a'.
TEST_F(StoreSinkTest, NamesWithNulAreRefusedEverywhere) {
  StoreSink sink = open_sink();
  expect_refused(sink.begin_run(std::string("r\0x", 3)), "run 'r\\x00x' contains a NUL byte");
  ASSERT_THAT(sink.begin_run("r"), IsOk());
  expect_refused(capture(sink, quantized(std::string("a\0b", 3), 0)),
                 "tensor 'a\\x00b': the name contains a NUL byte, which the capture ABI cannot "
                 "carry");
  expect_refused(sink.graph_node({std::string("n\0", 2), "Conv", {}, {}, {}}),
                 "graph node 'n\\x00' contains a NUL byte");
  expect_refused(sink.graph_node({"n", "Conv", {std::string("in\0put", 6)}, {}, {}}),
                 "graph node 'n': tensor 'in\\x00put' contains a NUL byte");
  expect_refused(sink.profile_event(std::string("e\0", 2), {}, 0, 1, "ns"),
                 "profile event 'e\\x00' contains a NUL byte");
  expect_refused(sink.memory_checkpoint(std::string("m\0", 2), 1),
                 "memory checkpoint 'm\\x00' contains a NUL byte");
}

TEST_F(StoreSinkTest, OutputPathWithNulIsRefused) {
  SinkOptions options;
  options.output_path = std::string("s.h5\0.tmp", 9);
  const Result<StoreSink> sink = StoreSink::open(options);
  ASSERT_FALSE(sink.is_ok());
  expect_refused(sink.status(), "output path 's.h5\\x00.tmp' contains a NUL byte");
}

// Before: the ABI read any negative value as -1, so -7 was stored as "unknown" / "per tensor".
TEST_F(StoreSinkTest, IndicesBelowMinusOneAreRefused) {
  StoreSink sink = open_sink();
  ASSERT_THAT(sink.begin_run("r"), IsOk());
  TensorRecord record = quantized("t", 0);
  record.output_index = -7;
  expect_refused(capture(sink, record), "tensor 't': output_index -7 is neither -1 nor an index");
  record = quantized("t", 0);
  record.quant.axis = -3;
  expect_refused(capture(sink, record),
                 "tensor 't': quantization axis -3 is neither -1 nor an index");
}

// Before: the count came from the scales alone, so the ABI read two offsets from a one-entry
// vector; offsets without scales were dropped.
TEST_F(StoreSinkTest, OffsetsMustMatchTheScales) {
  StoreSink sink = open_sink();
  ASSERT_THAT(sink.begin_run("r"), IsOk());
  TensorRecord record = quantized("t", 0);
  record.dims = {2};
  record.quant.axis = 0;
  record.quant.scales = {0.5, 0.25};
  expect_refused(capture(sink, record), "tensor 't': quantization has 2 scales but 1 offsets");
  record = quantized("t", 3);
  record.quant.scales.clear();
  expect_refused(capture(sink, record), "tensor 't': quantization has offsets or an axis but no");
}

}  // namespace
}  // namespace qd::importers
