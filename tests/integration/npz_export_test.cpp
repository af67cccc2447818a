// `export npz` (pipeline/export.h) on stores only a runtime writes: 4-bit and BFLOAT_16 tensors,
// which numpy has no dtype for; a quantized NHWC tensor dequantized into the reference layout;
// names a key cannot carry. Read back with the npz reader that tests/unit/npy_test.cpp checks
// against numpy itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "../common/records.h"
#include "../common/status_matchers.h"
#include "../common/temp_dir.h"
#include "qnn_debug/etdump/store_writer.h"
#include "qnn_debug/importers/npy.h"
#include "qnn_debug/pipeline/export.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd {
namespace {

using importers::NpzReader;
using pipeline::export_npz;
using pipeline::NpzExportOptions;
using testing::TempDir;
using testing::tensor_record;
using Bytes = std::vector<uint8_t>;

// A store of one run per list, each tensor with its bytes.
void write_store(const std::string& path,
                 const std::vector<std::vector<std::pair<TensorRecord, Bytes>>>& runs) {
  auto writer = StoreWriter::create(path, {"npz_export_test", "QnnHtp", "", "tiny", 1});
  ASSERT_THAT(writer, IsOk());
  for (const auto& tensors : runs) {
    ASSERT_THAT((*writer)->begin_run("run", 1), IsOk());
    for (const auto& [r, bytes] : tensors) {
      const Status appended = (*writer)->append_tensor(r, bytes, 1);
      ASSERT_THAT(appended, IsOk());
    }
    ASSERT_THAT((*writer)->end_run(2, 0), IsOk());
  }
  ASSERT_THAT((*writer)->close(), IsOk());
}

struct Array {
  std::string key;
  std::string descr;
  std::vector<uint64_t> shape;
  Bytes data;
};

std::vector<Array> read_npz(const std::string& path) {
  auto npz = NpzReader::open(path);
  EXPECT_THAT(npz, IsOk());
  std::vector<Array> arrays;
  if (!npz.is_ok()) return arrays;
  for (size_t i = 0; i < npz->arrays().size(); ++i) {
    auto reader = npz->open_array(i);
    EXPECT_THAT(reader, IsOk());
    Array a{npz->arrays()[i].key, reader->header().descr, reader->header().shape, {}};
    a.data.resize(reader->header().data_bytes);
    size_t filled = 0;
    while (filled < a.data.size()) {
      auto got = reader->read(std::span<uint8_t>(a.data).subspan(filled));
      EXPECT_THAT(got, IsOk());
      if (!got.is_ok() || *got == 0) break;
      filled += *got;
    }
    arrays.push_back(std::move(a));
  }
  return arrays;
}

template <typename T>
std::vector<T> values(const Array& a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

Bytes bf16_of(const std::vector<float>& values) {
  Bytes bytes;
  for (float f : values) {
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    bytes.push_back(static_cast<uint8_t>(bits >> 16));
    bytes.push_back(static_cast<uint8_t>(bits >> 24));
  }
  return bytes;
}

TEST(NpzExport, WidensFourBitAndBfloat16ToTypesNumpyHas) {
  TempDir dir;
  const std::string store = dir.file("s.h5");
  // Nibbles low first: 1, 2, 3, 0xF, 8.
  const Bytes nibbles = {0x21, 0xF3, 0x08};
  TensorRecord signed4 = tensor_record("w4", DType::kSFixed4, {5});
  signed4.quant.scales = {0.5};
  signed4.quant.offsets = {0};
  const std::vector<float> bf = {1.5f, -2.0f, std::ldexp(1.0f, 127), 0.0078125f};
  write_store(store, {{{signed4, nibbles},
                       {tensor_record("u4", DType::kUFixed4, {5}), nibbles},
                       {tensor_record("bf", DType::kBFloat16, {2, 2}), bf16_of(bf)}}});

  auto summary = export_npz({store, dir.file("raw.npz"), false, std::nullopt});
  ASSERT_THAT(summary, IsOk());
  EXPECT_EQ(summary->widened, 3u);
  const std::vector<Array> raw = read_npz(dir.file("raw.npz"));
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(raw[0].descr, "|i1");
  EXPECT_EQ(values<int8_t>(raw[0]), (std::vector<int8_t>{1, 2, 3, -1, -8}));  // storage ints
  EXPECT_EQ(raw[1].descr, "|u1");
  EXPECT_EQ(values<uint8_t>(raw[1]), (std::vector<uint8_t>{1, 2, 3, 15, 8}));
  EXPECT_EQ(raw[2].descr, "<f4");
  EXPECT_EQ(raw[2].shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(values<float>(raw[2]), bf);  // every value is exact in bfloat16

  ASSERT_THAT(export_npz({store, dir.file("real.npz"), true, std::nullopt}), IsOk());
  const std::vector<Array> real = read_npz(dir.file("real.npz"));
  EXPECT_EQ(values<float>(real[0]), (std::vector<float>{0.5f, 1.0f, 1.5f, -0.5f, -4.0f}));
}

TEST(NpzExport, DequantizesNhwcIntoTheReferenceLayout) {
  TempDir dir;
  const std::string store = dir.file("s.h5");
  TensorRecord nhwc = tensor_record("act", DType::kUFixed8, {1, 2, 2, 3});
  nhwc.axis_order = {0, 3, 1, 2};
  nhwc.quant.scales = {0.5};
  nhwc.quant.offsets = {-10};
  Bytes stored(12);
  for (uint8_t i = 0; i < 12; ++i) stored[i] = static_cast<uint8_t>(10 + i);  // h, w, c
  TensorRecord plain_nhwc = tensor_record("logits", DType::kFloat32, {1, 1, 2, 2});
  plain_nhwc.axis_order = {0, 3, 1, 2};
  const std::vector<float> logits = {1, 2, 3, 4};
  Bytes logit_bytes(16);
  std::memcpy(logit_bytes.data(), logits.data(), 16);
  write_store(store, {{{nhwc, stored}, {plain_nhwc, logit_bytes}}});

  ASSERT_THAT(export_npz({store, dir.file("real.npz"), true, std::nullopt}), IsOk());
  const std::vector<Array> real = read_npz(dir.file("real.npz"));
  ASSERT_EQ(real.size(), 2u);
  EXPECT_EQ(real[0].shape, (std::vector<uint64_t>{1, 3, 2, 2}));
  std::vector<float> expected;
  for (int c = 0; c < 3; ++c) {
    for (int hw = 0; hw < 4; ++hw) expected.push_back(0.5f * static_cast<float>(hw * 3 + c));
  }
  EXPECT_EQ(values<float>(real[0]), expected);
  // A float tensor with a stored layout is reordered too, not copied as stored.
  EXPECT_EQ(real[1].shape, (std::vector<uint64_t>{1, 2, 1, 2}));
  EXPECT_EQ(values<float>(real[1]), (std::vector<float>{1, 3, 2, 4}));

  ASSERT_THAT(export_npz({store, dir.file("raw.npz"), false, std::nullopt}), IsOk());
  const std::vector<Array> raw = read_npz(dir.file("raw.npz"));
  EXPECT_EQ(raw[0].descr, "|u1");
  EXPECT_EQ(raw[0].shape, (std::vector<uint64_t>{1, 2, 2, 3}));
  EXPECT_EQ(raw[0].data, stored);
}

TEST(NpzExport, NamesAKeyCannotCarryGetStandIns) {
  TempDir dir;
  const std::string store = dir.file("s.h5");
  const Bytes four(4, 0);
  write_store(store, {{{tensor_record("x", DType::kFloat32, {1}), four},
                       {tensor_record("x", DType::kFloat32, {1}), four},
                       {tensor_record("bad\xff", DType::kFloat32, {1}), four}},
                      {{tensor_record("x", DType::kFloat32, {1}), four}}});
  auto summary = export_npz({store, dir.file("out.npz"), false, std::nullopt});
  ASSERT_THAT(summary, IsOk());
  std::vector<std::string> keys;
  for (const Array& a : read_npz(dir.file("out.npz"))) keys.push_back(a.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"run0/x", "run0/x#1", "run0/tensor_2", "run1/x"}));
  EXPECT_EQ(summary->renamed, 2u);
  ASSERT_EQ(summary->renamed_examples.size(), 2u);
  EXPECT_EQ(summary->renamed_examples[0], "'run0/x' -> 'run0/x#1'");
}

TEST(NpzExport, RefusesAMissingRunAndAnUnwritableFolderLeavingNothing) {
  TempDir dir;
  const std::string store = dir.file("s.h5");
  write_store(store, {{{tensor_record("x", DType::kFloat32, {1}), Bytes(4, 0)}}});
  auto missing = export_npz({store, dir.file("out.npz"), false, 3});
  ASSERT_THAT(missing, StatusIs(ErrorCode::kInvalidArgument));
  EXPECT_NE(missing.status().message().find("no run 3 (1 runs)"), std::string::npos);
  EXPECT_NE(missing.status().message().find("s.h5"), std::string::npos);
  auto unwritable = export_npz({store, dir.file("no/such/folder/out.npz"), false, std::nullopt});
  ASSERT_THAT(unwritable, StatusIs(ErrorCode::kIo));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.npz")));
}

}  // namespace
}  // namespace qd
