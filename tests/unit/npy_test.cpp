// The .npy/.npz reader against files numpy writes (an independent writer), the npz writer against
// numpy.load (an independent reader), and damaged or misused inputs.
#include "qnn_debug/importers/npy.h"
#include "../common/status_matchers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../common/files.h"
#include "../common/records.h"
#include "../common/temp_dir.h"
#include "qnn_debug/etdump/store.h"

using qd::testing::IsOk;
using qd::testing::StatusIs;

namespace qd::importers {
namespace {

using qd::testing::TempDir;
using Bytes = std::vector<uint8_t>;
using testing::read_bytes;
using testing::write_bytes;

std::string read_text(const std::string& path) {
  const Bytes bytes = read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

template <typename T>
Bytes as_bytes(const std::vector<T>& values) {  // the test hosts are little-endian, like numpy's
  Bytes bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Every error of this module is one line starting with the quoted path.
void expect_error_about(const Status& status, const std::string& path, std::string_view wanted) {
  testing::expect_failure(status, status.code(), wanted);
  EXPECT_EQ(status.message().rfind(quote_name(path) + ": ", 0), 0u) << status.message();
}

// All data of `reader` read in `piece`-byte buffers, checking what each read() promises.
Result<Bytes> read_data(NpyArrayReader& reader, size_t piece) {
  Bytes all, buffer(piece);
  const size_t item = static_cast<size_t>(reader.header().item_bytes);
  while (true) {
    QD_ASSIGN_OR_RETURN(const size_t count, reader.read(buffer));
    if (count == 0) break;
    if (count % item != 0 || count > piece) {
      return error(ErrorCode::kInternal, "read returned " + std::to_string(count) + " bytes");
    }
    all.insert(all.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(count));
  }
  if (reader.remaining() != 0) return error(ErrorCode::kInternal, "data left after the end");
  return all;
}

struct DtypeCase {
  const char* numpy;
  const char* descr;
  DType dtype;
};
const DtypeCase kDtypeCases[] = {
    {"float16", "<f2", DType::kFloat16}, {"float32", "<f4", DType::kFloat32},
    {"float64", "<f8", DType::kFloat64}, {"int8", "|i1", DType::kInt8},
    {"uint8", "|u1", DType::kUInt8},     {"int16", "<i2", DType::kInt16},
    {"uint16", "<u2", DType::kUInt16},   {"int32", "<i4", DType::kInt32},
    {"uint32", "<u4", DType::kUInt32},   {"int64", "<i8", DType::kInt64},
    {"uint64", "<u8", DType::kUInt64},   {"bool", "|b1", DType::kBool8},
};

std::optional<DType> dtype_of_descr(std::string_view descr) {
  const std::string little = descr[0] == '>' ? "<" + std::string(descr.substr(1)) : "";
  for (const DtypeCase& c : kDtypeCases) {
    if (descr == c.descr || little == c.descr) return c.dtype;
  }
  return std::nullopt;
}

// An .npy file: the dict padded to a 64-byte preamble, then `data_bytes` bytes 0, 1, 2...
Bytes npy_bytes(std::string_view dict, size_t data_bytes, uint8_t major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header(dict);
  header.resize((prefix + header.size() + 1 + 63) / 64 * 64 - prefix - 1, ' ');
  header += '\n';
  Bytes bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  for (size_t i = 0; i < prefix - 8; ++i) bytes.push_back(uint8_t(header.size() >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; ++i) bytes.push_back(static_cast<uint8_t>(i));
  return bytes;
}

Result<NpyHeader> parse_bytes(const Bytes& bytes, std::optional<uint64_t> stream_bytes) {
  size_t at = 0;
  const NpyByteSource source = [&](std::span<uint8_t> out) -> Result<size_t> {
    const size_t count = std::min(out.size(), bytes.size() - at);
    std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), count, out.begin());
    at += count;
    return count;
  };
  return parse_npy_header(source, stream_bytes, "'memory'");
}

// Python: each local header holds the central directory's name, CRC and sizes (ZIP64: in its
// extra field, uncompressed size first).
const char kCheckLocalHeaders[] = R"(
import struct
def check_local_headers(archive):
    with zipfile.ZipFile(archive) as z, open(archive, 'rb') as f:
        for info in z.infolist():
            f.seek(info.header_offset)
            h = struct.unpack('<IHHHHHIIIHH', f.read(30))
            name = f.read(h[9])
            extra = f.read(h[10])
            sizes = (h[8], h[7])
            if sizes == (0xFFFFFFFF, 0xFFFFFFFF):
                assert extra[:4] == b'\x01\x00\x10\x00', extra
                sizes = struct.unpack('<QQ', extra[4:20])
            assert h[0] == 0x04034b50 and name == info.filename.encode(), (h, name)
            assert (h[6], sizes) == (info.CRC, (info.file_size, info.compress_size)), (h, info)
)";

class NpyTest : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }

  // Runs `body` under Python with numpy imported as np and `d` the temporary directory.
  void python(const std::string& body) {
    const std::string script = file("script.py");
    std::ofstream(script) << "import os, sys, warnings, zipfile\n"
                             "import numpy as np\n"
                             "warnings.simplefilter('ignore')\n"
                             "d = sys.argv[1]\n"
                             "def path(name): return os.path.join(d, name)\n"
                          << kCheckLocalHeaders << body;
    const std::string command =
        std::string(QD_TEST_PYTHON) + " " + script + " " + dir_.path().string();
    ASSERT_EQ(std::system(command.c_str()), 0) << body;
  }

  // The files in the temporary directory, for checking that nothing was left behind.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  TempDir dir_;
};

// ---- numpy writes, we read ---------------------------------------------------------------------

TEST_F(NpyTest, ReadsEveryDtypeNumpySaves) {
  std::string names;
  for (const DtypeCase& c : kDtypeCases) names += std::string("'") + c.numpy + "', ";
  python(
      "rng = np.random.default_rng(3)\n"
      "for n in [" +
      names +
      "]:\n"
      "    if n == 'bool': a = rng.integers(0, 2, 24) == 1\n"
      "    elif n.startswith('float'): a = (rng.standard_normal(24) * 100).astype(n)\n"
      "    else: a = np.frombuffer(rng.bytes(24 * np.dtype(n).itemsize), dtype=n)\n"
      "    a = a.reshape(2, 3, 4)\n"
      "    np.save(path(n + '.npy'), a)\n"
      "    open(path(n + '.bin'), 'wb').write(a.tobytes())\n");
  for (const DtypeCase& c : kDtypeCases) {
    SCOPED_TRACE(c.numpy);
    Result<NpyArrayReader> reader = NpyArrayReader::open_file(file(std::string(c.numpy) + ".npy"));
    ASSERT_THAT(reader, IsOk());
    const NpyHeader& header = reader->header();
    EXPECT_EQ(header.descr, c.descr);
    EXPECT_EQ(header.dtype, c.dtype);
    EXPECT_EQ(header.item_bytes * 8, info(c.dtype).bits);
    EXPECT_FALSE(header.big_endian);
    EXPECT_FALSE(header.fortran_order);
    EXPECT_EQ(header.shape, (std::vector<uint64_t>{2, 3, 4}));
    EXPECT_EQ(header.element_count, 24u);
    EXPECT_EQ(header.data_bytes, 24 * header.item_bytes);
    EXPECT_EQ(header.data_offset % 64, 0u);  // numpy aligns its data
    EXPECT_EQ(header.version_major, 1);
    Result<Bytes> data = read_data(*reader, 8);
    ASSERT_THAT(data, IsOk());
    EXPECT_EQ(*data, read_bytes(file(std::string(c.numpy) + ".bin")));
  }
}

// One line of manifest.txt: what numpy says about an array it put in the npz.
struct Expected {
  std::string key, descr;
  bool fortran = false;
  std::vector<uint64_t> shape;
  Bytes data;  // little-endian, in the file's element order
};

class NpzReadTest : public NpyTest {
 protected:
  // plain.npz (np.savez) and compressed.npz (np.savez_compressed) of the same arrays, and what
  // numpy says each holds.
  void make_archives() {
    python(R"(
rng = np.random.default_rng(7)
def sample(dt, shape):
    dt = np.dtype(dt)
    n = int(np.prod(shape))
    if dt.kind == 'b': a = rng.integers(0, 2, n) == 1
    elif dt.kind == 'f': a = (rng.standard_normal(n) * 100).astype(dt)
    else: a = np.frombuffer(rng.bytes(n * dt.itemsize), dtype=dt).copy()
    return a.reshape(shape)
arrays = {}
for n in ['float16', 'float32', 'float64', 'int8', 'uint8', 'int16', 'uint16', 'int32',
          'uint32', 'int64', 'uint64', 'bool']:
    arrays[n] = sample(n, (2, 3))
arrays['scalar'] = sample('float32', ())
arrays['empty'] = sample('float32', (0, 3))
arrays['big_f4'] = sample('>f4', (5,))
arrays['big_i2'] = sample('>i2', (2, 2))
arrays['fortran'] = np.asfortranarray(sample('int32', (2, 3, 4)))
arrays['run0/conv'] = sample('float32', (1, 2, 2, 3))
arrays['large'] = sample('>f8', (9000,))
np.savez(path('plain.npz'), **arrays)
np.savez_compressed(path('compressed.npz'), **arrays)
with open(path('manifest.txt'), 'w') as m:
    for i, (k, a) in enumerate(arrays.items()):
        fortran = a.flags.f_contiguous and not a.flags.c_contiguous
        m.write('\t'.join([k, np.lib.format.dtype_to_descr(a.dtype), str(int(fortran)),
                           ','.join(map(str, a.shape))]) + '\n')
        little = a.astype(a.dtype.newbyteorder('<'))
        open(path('%d.bin' % i), 'wb').write(little.tobytes(order='F' if fortran else 'C'))
)");
  }

  std::vector<Expected> manifest() const {
    std::vector<Expected> all;
    std::istringstream lines(read_text(file("manifest.txt")));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      Expected e;
      std::string fortran, shape, dim;
      std::getline(fields, e.key, '\t');
      std::getline(fields, e.descr, '\t');
      std::getline(fields, fortran, '\t');
      std::getline(fields, shape, '\t');
      e.fortran = fortran == "1";
      std::istringstream dims(shape);
      while (std::getline(dims, dim, ',')) e.shape.push_back(std::stoull(dim));
      e.data = read_bytes(file(std::to_string(all.size()) + ".bin"));
      all.push_back(std::move(e));
    }
    return all;
  }

  void expect_archive_matches(const std::string& path, size_t piece) {
    const std::vector<Expected> expected = manifest();
    ASSERT_EQ(expected.size(), 19u);
    Result<NpzReader> npz = NpzReader::open(path);
    ASSERT_THAT(npz, IsOk());
    ASSERT_EQ(npz->arrays().size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const Expected& e = expected[i];
      const NpzArray& array = npz->arrays()[i];
      SCOPED_TRACE(e.key);
      EXPECT_EQ(array.key, e.key);
      EXPECT_EQ(array.header.descr, e.descr);
      EXPECT_EQ(array.header.dtype, dtype_of_descr(e.descr));
      EXPECT_EQ(array.header.big_endian, e.descr[0] == '>');
      EXPECT_EQ(array.header.fortran_order, e.fortran);
      EXPECT_EQ(array.header.shape, e.shape);
      EXPECT_EQ(array.header.data_bytes, e.data.size());
      Result<NpyArrayReader> reader = npz->open_array(i);
      ASSERT_THAT(reader, IsOk());
      Result<Bytes> data = read_data(*reader, piece);
      ASSERT_THAT(data, IsOk());
      EXPECT_EQ(*data, e.data);
    }
  }
};

TEST_F(NpzReadTest, ReadsWhatSavezWrites) {
  make_archives();
  for (const size_t piece : {size_t{8}, size_t{24}, size_t{1} << 20}) {
    SCOPED_TRACE(piece);
    expect_archive_matches(file("plain.npz"), piece);
  }
}

TEST_F(NpzReadTest, ReadsWhatSavezCompressedWrites) {
  make_archives();
  for (const size_t piece : {size_t{8}, size_t{40}, size_t{1} << 20}) {
    SCOPED_TRACE(piece);
    expect_archive_matches(file("compressed.npz"), piece);
  }
}

// 72,000 bytes of big-endian doubles in buffers that do not hold a whole number of them: each
// read delivers whole elements, swapped.
TEST_F(NpzReadTest, StreamsALargeBigEndianArrayInSmallPieces) {
  make_archives();
  const Expected large = manifest().back();
  ASSERT_EQ(large.key, "large");
  ASSERT_GT(large.data.size(), size_t{64} << 10);
  for (const std::string name : {"plain.npz", "compressed.npz"}) {
    Result<NpzReader> npz = NpzReader::open(file(name));
    ASSERT_THAT(npz, IsOk());
    Result<NpyArrayReader> reader = npz->open_array(npz->arrays().size() - 1);
    ASSERT_THAT(reader, IsOk());
    Bytes buffer(13), all;
    size_t reads = 0;
    while (true) {
      Result<size_t> count = reader->read(buffer);
      ASSERT_THAT(count, IsOk());
      if (*count == 0) break;
      ASSERT_EQ(*count, 8u);  // 13 bytes hold one double
      all.insert(all.end(), buffer.begin(), buffer.begin() + 8);
      ++reads;
    }
    EXPECT_EQ(reads, 9000u);
    EXPECT_EQ(all, large.data);
  }
}

TEST_F(NpzReadTest, BufferSmallerThanAnElementIsRefusedButNotFinal) {
  make_archives();
  Result<NpzReader> npz = NpzReader::open(file("plain.npz"));
  ASSERT_THAT(npz, IsOk());
  Result<NpyArrayReader> reader = npz->open_array(2);  // float64
  ASSERT_THAT(reader, IsOk());
  Bytes small(7);
  Result<size_t> refused = reader->read(small);
  ASSERT_THAT(refused, StatusIs(ErrorCode::kInvalidArgument));
  expect_error_about(refused.status(), file("plain.npz"), "'float64.npy'");
  Result<Bytes> data = read_data(*reader, 16);
  ASSERT_THAT(data, IsOk());
  EXPECT_EQ(*data, manifest()[2].data);
  EXPECT_FALSE(npz->open_array(19).is_ok());
}

// The reader owns its member: it outlives the archive it came from.
TEST_F(NpzReadTest, ArrayReaderOutlivesTheArchive) {
  make_archives();
  std::optional<NpyArrayReader> reader;
  {
    Result<NpzReader> npz = NpzReader::open(file("compressed.npz"));
    ASSERT_THAT(npz, IsOk());
    Result<NpyArrayReader> opened = npz->open_array(17);  // run0/conv
    ASSERT_THAT(opened, IsOk());
    reader.emplace(std::move(opened.value()));
  }
  Result<Bytes> data = read_data(*reader, 4);
  ASSERT_THAT(data, IsOk());
  EXPECT_EQ(*data, manifest()[17].data);
}

// ---- the header dict ---------------------------------------------------------------------------

TEST_F(NpyTest, AcceptsEveryHeaderSpellingNumpyMightWrite) {
  struct Case {
    std::string dict;
    std::vector<uint64_t> shape;
    bool fortran;
    uint8_t major;
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", {2, 3}, false, 1},
      {"{\"descr\": \"<f4\", \"fortran_order\": True, \"shape\": (3,)}", {3}, true, 1},
      {"{'shape': (), 'fortran_order': False, 'descr': '<f4'}", {}, false, 1},
      {"{ 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2L , 3L , ) , }",
       {2, 3},
       false,
       1},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 0, 5), }", {4, 0, 5}, false, 2},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 2), }",
       {1, 1, 1, 1, 1, 1, 1, 2},
       false,
       3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dict);
    uint64_t elements = 1;
    for (uint64_t dim : c.shape) elements *= dim;
    const Bytes bytes = npy_bytes(c.dict, elements * 4, c.major);
    Result<NpyHeader> header = parse_bytes(bytes, bytes.size());
    ASSERT_THAT(header, IsOk());
    EXPECT_EQ(header->shape, c.shape);
    EXPECT_EQ(header->fortran_order, c.fortran);
    EXPECT_EQ(header->version_major, c.major);
    EXPECT_EQ(header->element_count, elements);
    EXPECT_EQ(header->data_offset, bytes.size() - elements * 4);
  }
}

TEST_F(NpyTest, ReadsOldFilesWith16ByteAlignmentAndNativeOrder) {
  // numpy before 1.14 padded the preamble to 16 bytes; '=' is native (little-endian here).
  const std::string dict = "{'descr': '=i2', 'fortran_order': False, 'shape': (3,), }";
  Bytes bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
  std::string header = dict;
  header.resize((10 + dict.size() + 1 + 15) / 16 * 16 - 11, ' ');
  header += '\n';
  bytes[8] = static_cast<uint8_t>(header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  const size_t data_offset = bytes.size();
  for (uint8_t b : {1, 2, 3, 4, 5, 6}) bytes.push_back(b);
  ASSERT_NE(data_offset % 64, 0u);
  write_bytes(file("old.npy"), bytes);
  Result<NpyArrayReader> reader = NpyArrayReader::open_file(file("old.npy"));
  ASSERT_THAT(reader, IsOk());
  EXPECT_EQ(reader->header().data_offset, data_offset);
  EXPECT_EQ(reader->header().dtype, DType::kInt16);
  EXPECT_FALSE(reader->header().big_endian);
  Result<Bytes> data = read_data(*reader, 2);
  ASSERT_THAT(data, IsOk());
  EXPECT_EQ(*data, (Bytes{1, 2, 3, 4, 5, 6}));
}

TEST_F(NpyTest, MalformedHeadersAreErrorsNamingTheProblem) {
  const std::pair<std::string, std::string> cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, }", "the key 'shape' is missing"},
      {"{'descr': '<f4', 'shape': (2,), }", "the key 'fortran_order' is missing"},
      {"{'fortran_order': False, 'shape': (2,), }", "the key 'descr' is missing"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'color': 1, }",
       "unknown key 'color'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
       "'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, }", "expected a dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", "',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", "one-element shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", "a tuple '('"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", "expected a dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "negative dimension"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", "True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,), }", "True or False"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (2,), }", "a quoted descr"},
      {"{'descr': '<f4\\n', 'fortran_order': False, 'shape': (2,), }", "escape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,) ", "',' or '}'"},
      {"'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "'{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", "only spaces"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",
       "more than 8 dimensions"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1152921504606846977,), }",
       "exceeds the limit"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1073741824, 2), }",
       "more than 2^60 elements"},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    const auto& [dict, wanted] = cases[i];
    SCOPED_TRACE(dict);
    const std::string path = file("bad" + std::to_string(i) + ".npy");
    write_bytes(path, npy_bytes(dict, 8));
    Result<NpyArrayReader> reader = NpyArrayReader::open_file(path);
    expect_error_about(reader.status(), path, wanted);
    EXPECT_EQ(reader.status().code(), ErrorCode::kCorrupt);
  }
}

TEST_F(NpyTest, UnsupportedDescrsAreErrorsNamingThem) {
  const std::pair<std::string, std::string> cases[] = {
      {"'<c8'", "unsupported descr '<c8' (complex numbers)"},
      {"'<U5'", "unsupported descr '<U5' (unicode strings)"},
      {"'|O'", "unsupported descr '|O' (Python objects"},
      {"'<M8[ns]'", "unsupported descr '<M8[ns]' (datetimes)"},
      {"'|S3'", "unsupported descr '|S3' (byte strings)"},
      {"'<f16'", "unsupported descr '<f16'"},
      {"'|f4'", "'|' (no byte order) on a 4-byte type"},
      {"'f4'", "unsupported descr 'f4'"},
      {"[('a', '<f4'), ('b', '<i4')]",
       "unsupported descr '[(\\x27a\\x27, \\x27<f4\\x27), (\\x27b\\x27, \\x27<i4\\x27)]' (a "
       "structured dtype)"},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    const auto& [descr, wanted] = cases[i];
    SCOPED_TRACE(descr);
    const std::string path = file("descr" + std::to_string(i) + ".npy");
    write_bytes(path,
                npy_bytes("{'descr': " + descr + ", 'fortran_order': False, 'shape': (2,), }", 8));
    Result<NpyArrayReader> reader = NpyArrayReader::open_file(path);
    expect_error_about(reader.status(), path, wanted);
  }
}

TEST_F(NpyTest, DamagedPreamblesAndDataLengthsAreErrors) {
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  const Bytes good = npy_bytes(dict, 24);
  Bytes wrong_magic = good;
  wrong_magic[5] = 'Z';
  Bytes version_4 = good;
  version_4[6] = 4;
  Bytes minor_1 = good;
  minor_1[7] = 1;
  Bytes long_header = good;
  long_header[8] = 0x88;  // 5000 bytes in a 152-byte file
  long_header[9] = 0x13;
  Bytes huge_header = npy_bytes(dict, 24, 2);
  huge_header[10] = 0x20;  // 2 MiB
  Bytes shorter = good, longer = good;
  shorter.pop_back();
  longer.push_back(0);
  const std::pair<Bytes, std::string> cases[] = {
      {wrong_magic, "not an .npy array: it starts with '\\x93NUMPZ'"},
      {version_4, "unsupported .npy format version 4.0"},
      {minor_1, "unsupported .npy format version 1.1"},
      {long_header, "header of 5000 bytes at offset 10 runs past the end of the 152-byte"},
      {huge_header, "over the 1 MiB limit"},
      {shorter,
       "truncated: 23 bytes follow the header, short of the 24 bytes of data that "
       "shape (2, 3) of <i4 needs"},
      {longer, "1 trailing bytes after the 24 bytes of data"},
      {Bytes{0x93, 'N', 'U', 'M'}, "truncated: the stream ends at offset 4, inside the 10-byte"},
      {Bytes{}, "truncated: the stream ends at offset 0"},
      {Bytes{'P', 'K', 3, 4}, "it starts with 'PK\\x03\\x04'"},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE(cases[i].second);
    const std::string path = file("damaged" + std::to_string(i) + ".npy");
    write_bytes(path, cases[i].first);
    Result<NpyArrayReader> reader = NpyArrayReader::open_file(path);
    expect_error_about(reader.status(), path, cases[i].second);
    EXPECT_EQ(reader.status().code(), ErrorCode::kCorrupt);
  }
  // Without a known stream length only the header is judged; a failing source is passed on.
  Result<NpyHeader> header = parse_bytes(shorter, std::nullopt);
  ASSERT_THAT(header, IsOk());
  EXPECT_EQ(header->data_bytes, 24u);
  const NpyByteSource failing = [](std::span<uint8_t>) -> Result<size_t> {
    return error(ErrorCode::kIo, "'x': the disk is on fire");
  };
  EXPECT_EQ(parse_npy_header(failing, 100, "'x'").status().message(), "'x': the disk is on fire");
  EXPECT_FALSE(NpyArrayReader::open_file(file("missing.npy")).is_ok());
}

// Every prefix of a real .npy is refused at open; flipped header bytes never crash, and whatever
// is accepted is consistent with the file size.
TEST_F(NpyTest, TruncatedAndFlippedFilesNeverCrash) {
  python("np.save(path('a.npy'), np.arange(10, dtype='>i2').reshape(2, 5))\n");
  const Bytes good = read_bytes(file("a.npy"));
  const std::string path = file("cut.npy");
  for (size_t length = 0; length < good.size(); ++length) {
    write_bytes(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)));
    Result<NpyArrayReader> reader = NpyArrayReader::open_file(path);
    ASSERT_FALSE(reader.is_ok()) << length;
    ASSERT_EQ(reader.status().message().rfind(quote_name(path), 0), 0u);
  }
  for (size_t at = 0; at < 128; ++at) {
    for (const uint8_t flip : {0x01, 0x20, 0x80, 0xFF}) {
      Bytes bytes = good;
      bytes[at] ^= flip;
      Result<NpyHeader> header = parse_bytes(bytes, bytes.size());
      if (header.is_ok()) {
        EXPECT_EQ(header->data_offset + header->data_bytes, bytes.size()) << at;
      }
    }
  }
}

// ---- damaged npz -------------------------------------------------------------------------------

TEST_F(NpyTest, NpzMembersMustBeUniqueArrays) {
  python(R"(
a = np.lib.format
def npy(arr):
    import io
    f = io.BytesIO(); np.save(f, arr); return f.getvalue()
with zipfile.ZipFile(path('notes.npz'), 'w') as z:
    z.writestr('a.npy', npy(np.arange(3)))
    z.writestr('notes.txt', b'hello')
with zipfile.ZipFile(path('twice.npz'), 'w') as z:
    z.writestr('run0/a.npy', npy(np.arange(3)))
    z.writestr('run0/a.npy', npy(np.arange(4)))
with zipfile.ZipFile(path('bad_member.npz'), 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('ok.npy', npy(np.arange(3)))
    z.writestr('run0/conv.npy', npy(np.arange(3, dtype=np.complex64)))
with zipfile.ZipFile(path('short_member.npz'), 'w') as z:
    z.writestr('run0/conv.npy', npy(np.arange(3, dtype=np.float32))[:-1])
with zipfile.ZipFile(path('not_npy.npz'), 'w') as z:
    z.writestr('run0/conv.npy', b'PK\x03\x04 not an array')
with zipfile.ZipFile(path('bare.npz'), 'w') as z:
    z.writestr('.npy', npy(np.arange(3)))
)");
  const std::pair<std::string, std::string> cases[] = {
      {"notes.npz", "member 'notes.txt': is not an array"},
      {"twice.npz", "member 'run0/a.npy': appears more than once"},
      {"bad_member.npz", "member 'run0/conv.npy': unsupported descr '<c8'"},
      {"short_member.npz", "member 'run0/conv.npy': truncated: 11 bytes follow the header"},
      {"not_npy.npz", "member 'run0/conv.npy': not an .npy array"},
      {"bare.npz", "member '.npy': is not an array"},
  };
  for (const auto& [name, wanted] : cases) {
    SCOPED_TRACE(name);
    expect_error_about(NpzReader::open(file(name)).status(), file(name), wanted);
  }
}

// Cut at every length, a real npz is always an error (at open or while reading), never a crash.
TEST_F(NpyTest, TruncatedNpzIsAlwaysAnError) {
  python(R"(
arrays = {'a': np.arange(6, dtype=np.float32).reshape(2, 3), 'run0/b': np.array(7, np.int8)}
np.savez(path('plain.npz'), **arrays)
np.savez_compressed(path('compressed.npz'), **arrays)
)");
  for (const std::string name : {"plain.npz", "compressed.npz"}) {
    const Bytes good = read_bytes(file(name));
    const std::string path = file("cut_" + name);
    for (size_t length = 0; length < good.size(); ++length) {
      write_bytes(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)));
      Status status = Status::ok();
      Result<NpzReader> npz = NpzReader::open(path);
      status = npz.status();
      for (size_t i = 0; status.is_ok() && i < npz->arrays().size(); ++i) {
        Result<NpyArrayReader> reader = npz->open_array(i);
        status = reader.is_ok() ? read_data(*reader, 64).status() : reader.status();
      }
      ASSERT_FALSE(status.is_ok()) << name << " cut to " << length;
      ASSERT_EQ(status.message().rfind(quote_name(path), 0), 0u) << status.message();
    }
  }
}

// ---- we write, numpy reads ---------------------------------------------------------------------

// Writes `data` in pieces of `piece` bytes.
Status write_pieces(NpzWriter& writer, const Bytes& data, size_t piece) {
  for (size_t at = 0; at < data.size(); at += piece) {
    const size_t count = std::min(piece, data.size() - at);
    QD_RETURN_IF_ERROR(writer.write(std::span(data).subspan(at, count)));
  }
  return Status::ok();
}

struct ArrayToWrite {
  std::string key;
  DType dtype;
  std::vector<uint64_t> shape;
  Bytes data;
};

// The arrays written by the writer tests, and what numpy.load prints for them.
std::vector<ArrayToWrite> sample_arrays() {
  std::vector<float> conv;
  for (int i = 0; i < 12; ++i) conv.push_back(static_cast<float>(i) * 0.5f - 3.0f);
  return {
      {"run0/conv", DType::kFloat32, {2, 3, 1, 2}, as_bytes(conv)},
      {"scalar", DType::kFloat64, {}, as_bytes(std::vector<double>{2.25})},
      {"empty", DType::kInt16, {0, 3}, {}},
      {"q8", DType::kSFixed8, {4}, as_bytes(std::vector<int8_t>{-128, -1, 0, 127})},
      {"u16", DType::kUFixed16, {3}, as_bytes(std::vector<uint16_t>{0, 1000, 65535})},
      {"flags", DType::kBool8, {5}, Bytes{1, 0, 0, 1, 1}},
      {"i64", DType::kInt64, {2, 2}, as_bytes(std::vector<int64_t>{INT64_MIN, 1, 2, INT64_MAX})},
      {"f16", DType::kFloat16, {3}, as_bytes(std::vector<uint16_t>{0x3C00, 0xC000, 0x3800})},
      {"u32",
       DType::kUInt32,
       {1, 1, 1, 1, 1, 1, 1, 2},
       as_bytes(std::vector<uint32_t>{0, 4294967295u})},
      {"uni/\xce\xba\xe2\x82\xac\xf0\x9f\x98\x80", DType::kUInt8, {2}, Bytes{7, 9}},
  };
}

const char kSampleAsNumpySeesIt[] =
    "'run0/conv' <f4 (2, 3, 1, 2) [[[[-3.0, -2.5]], [[-2.0, -1.5]], [[-1.0, -0.5]]], "
    "[[[0.0, 0.5]], [[1.0, 1.5]], [[2.0, 2.5]]]]\n"
    "'scalar' <f8 () 2.25\n"
    "'empty' <i2 (0, 3) []\n"
    "'q8' |i1 (4,) [-128, -1, 0, 127]\n"
    "'u16' <u2 (3,) [0, 1000, 65535]\n"
    "'flags' |b1 (5,) [True, False, False, True, True]\n"
    "'i64' <i8 (2, 2) [[-9223372036854775808, 1], [2, 9223372036854775807]]\n"
    "'f16' <f2 (3,) [1.0, -2.0, 0.5]\n"
    "'u32' <u4 (1, 1, 1, 1, 1, 1, 1, 2) [[[[[[[[0, 4294967295]]]]]]]]\n"
    "'uni/\\u03ba\\u20ac\\U0001f600' |u1 (2,) [7, 9]\n";

class NpzWriteTest : public NpyTest {
 protected:
  void write_sample(const std::string& path, NpzWriter::Zip64 zip64) {
    Result<NpzWriter> writer = NpzWriter::create(path, zip64);
    ASSERT_THAT(writer, IsOk());
    size_t piece = 1;
    for (const ArrayToWrite& array : sample_arrays()) {
      const Status begun = writer->begin_array(array.key, array.dtype, array.shape);
      ASSERT_THAT(begun, IsOk());
      const Status written = write_pieces(*writer, array.data, piece++);
      ASSERT_THAT(written, IsOk());
      const Status ended = writer->end_array();
      ASSERT_THAT(ended, IsOk());
    }
    const Status finished = writer->finish();
    ASSERT_THAT(finished, IsOk());
  }

  // What numpy.load(allow_pickle=False) finds in `name`, one line per array in archive order;
  // zipfile's testzip() checks every CRC on the way, and the local headers are compared with the
  // central directory (zipfile and numpy read only the latter's CRC and sizes).
  std::string load_with_numpy(const std::string& name) {
    python("check_local_headers(path('" + name + "'))\n" + "assert zipfile.ZipFile(path('" + name +
           "')).testzip() is None\n" + "z = np.load(path('" + name + "'), allow_pickle=False)\n" +
           R"(with open(path('loaded.txt'), 'w') as f:
    for k in z.files:
        a = z[k]
        f.write('%s %s %s %s\n' % (ascii(k), a.dtype.str, a.shape, a.tolist()))
)");
    return read_text(file("loaded.txt"));
  }

  // Our own reader sees the arrays written, each with its data at a multiple of 64.
  void expect_round_trip(const std::string& path) {
    Result<NpzReader> npz = NpzReader::open(path);
    ASSERT_THAT(npz, IsOk());
    const std::vector<ArrayToWrite> arrays = sample_arrays();
    ASSERT_EQ(npz->arrays().size(), arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) {
      const NpyHeader& header = npz->arrays()[i].header;
      EXPECT_EQ(npz->arrays()[i].key, arrays[i].key);
      EXPECT_EQ(header.shape, arrays[i].shape);
      EXPECT_EQ(header.version_major, 1);
      EXPECT_EQ(header.data_offset % 64, 0u);
      Result<NpyArrayReader> reader = npz->open_array(i);
      ASSERT_THAT(reader, IsOk());
      Result<Bytes> data = read_data(*reader, 8);
      ASSERT_THAT(data, IsOk());
      EXPECT_EQ(*data, arrays[i].data);
    }
  }
};

TEST_F(NpzWriteTest, NumpyLoadsWhatWeWrite) {
  write_sample(file("out.npz"), NpzWriter::Zip64::kWhenNeeded);
  EXPECT_EQ(listing(), std::vector<std::string>{"out.npz"});  // the temporary is gone
  EXPECT_EQ(load_with_numpy("out.npz"), kSampleAsNumpySeesIt);
  expect_round_trip(file("out.npz"));
  const Bytes bytes = read_bytes(file("out.npz"));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_EQ(text.find("PK\x06\x06"), std::string_view::npos);  // no ZIP64 end record needed
  // Fixed-point dtypes are written as their storage integers; the header says so.
  Result<NpzReader> npz = NpzReader::open(file("out.npz"));
  ASSERT_THAT(npz, IsOk());
  EXPECT_EQ(npz->arrays()[3].header.descr, "|i1");
  EXPECT_EQ(npz->arrays()[3].header.dtype, DType::kInt8);
  EXPECT_EQ(npz->arrays()[4].header.descr, "<u2");
}

TEST_F(NpzWriteTest, ForcedZip64IsReadByNumpyAndByUs) {
  write_sample(file("zip64.npz"), NpzWriter::Zip64::kAlways);
  const Bytes bytes = read_bytes(file("zip64.npz"));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_NE(text.find("PK\x06\x06"), std::string_view::npos);  // ZIP64 end record
  EXPECT_NE(text.find("PK\x06\x07"), std::string_view::npos);  // and its locator
  python(R"(
with zipfile.ZipFile(path('zip64.npz')) as z:
    info = z.getinfo('run0/conv.npy')
    # The sizes and offset were read from ZIP64 extra fields (tag 0x0001) in the directory.
    assert info.extra[:2] == b'\x01\x00' and info.file_size == 128 + 48, (info.extra, info.file_size)
)");
  EXPECT_EQ(load_with_numpy("zip64.npz"), kSampleAsNumpySeesIt);
  expect_round_trip(file("zip64.npz"));
}

// More members than the classic end record can count: the ZIP64 end record is written for real.
TEST_F(NpzWriteTest, MoreThan65535Members) {
  constexpr size_t kCount = 65540;
  {
    Result<NpzWriter> writer = NpzWriter::create(file("many.npz"));
    ASSERT_THAT(writer, IsOk());
    const uint64_t shape[] = {1};
    for (size_t i = 0; i < kCount; ++i) {
      const uint8_t value = static_cast<uint8_t>(i * 7);
      ASSERT_THAT(writer->begin_array("t/" + std::to_string(i), DType::kUInt8, shape), IsOk());
      ASSERT_THAT(writer->write(std::span(&value, 1)), IsOk());
      ASSERT_THAT(writer->end_array(), IsOk());
    }
    const Status finished = writer->finish();
    ASSERT_THAT(finished, IsOk());
  }
  python(R"(
z = np.load(path('many.npz'), allow_pickle=False)
with open(path('loaded.txt'), 'w') as f:
    f.write('%d %s %s %s\n' % (len(z.files), z.files[0], z.files[-1], z[z.files[-1]].tolist()))
)");
  // The classic end record's counts say "see the ZIP64 end record", which precedes its locator.
  const Bytes bytes = read_bytes(file("many.npz"));
  ASSERT_GT(bytes.size(), 98u);
  const size_t end_record = bytes.size() - 22, locator = end_record - 20;
  EXPECT_EQ(Bytes(bytes.begin() + locator, bytes.begin() + locator + 4), (Bytes{'P', 'K', 6, 7}));
  EXPECT_EQ(Bytes(bytes.begin() + locator - 56, bytes.begin() + locator - 52),
            (Bytes{'P', 'K', 6, 6}));
  EXPECT_EQ(Bytes(bytes.begin() + end_record + 8, bytes.begin() + end_record + 12),
            (Bytes{0xFF, 0xFF, 0xFF, 0xFF}));
  EXPECT_EQ(read_text(file("loaded.txt")),
            "65540 t/0 t/65539 [" + std::to_string(uint8_t(65539 * 7)) + "]\n");
  Result<NpzReader> npz = NpzReader::open(file("many.npz"));
  ASSERT_THAT(npz, IsOk());
  ASSERT_EQ(npz->arrays().size(), kCount);
  Result<NpyArrayReader> reader = npz->open_array(kCount - 1);
  ASSERT_THAT(reader, IsOk());
  Result<Bytes> data = read_data(*reader, 1);
  ASSERT_THAT(data, IsOk());
  EXPECT_EQ(*data, Bytes{uint8_t(65539 * 7)});
}

// A member over 4 GiB: ZIP64 sizes in its local and central headers. Needs 4 GiB of disk in
// $TMPDIR; run with --gtest_also_run_disabled_tests.
TEST_F(NpzWriteTest, DISABLED_MemberOver4GiB) {
  constexpr uint64_t kSize = (uint64_t{4} << 30) + 100;
  Bytes piece(size_t{1} << 20);
  for (size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<uint8_t>(i * 31 + 7);
  {
    Result<NpzWriter> writer = NpzWriter::create(file("big.npz"));
    ASSERT_THAT(writer, IsOk());
    const uint64_t shape[] = {kSize};
    ASSERT_THAT(writer->begin_array("big", DType::kUInt8, shape), IsOk());
    for (uint64_t done = 0; done < kSize; done += piece.size()) {
      const size_t count = static_cast<size_t>(std::min<uint64_t>(piece.size(), kSize - done));
      ASSERT_THAT(writer->write(std::span(piece).first(count)), IsOk());
    }
    ASSERT_THAT(writer->end_array(), IsOk());
    ASSERT_THAT(writer->begin_array("after", DType::kInt32, {}), IsOk());
    const Bytes seven = as_bytes(std::vector<int32_t>{7});
    ASSERT_THAT(writer->write(seven), IsOk());
    ASSERT_THAT(writer->end_array(), IsOk());
    ASSERT_THAT(writer->finish(), IsOk());
  }
  python(R"(
with zipfile.ZipFile(path('big.npz')) as z:
    assert z.testzip() is None
    with z.open('big.npy') as f:
        np.lib.format.read_magic(f)
        assert np.lib.format.read_array_header_1_0(f) == ((4294967396,), False, np.dtype('u1'))
assert np.load(path('big.npz'))['after'] == 7
)");
  Result<NpzReader> npz = NpzReader::open(file("big.npz"));
  ASSERT_THAT(npz, IsOk());
  Result<NpyArrayReader> reader = npz->open_array(0);
  ASSERT_THAT(reader, IsOk());
  Bytes buffer(piece.size());
  uint64_t total = 0;
  while (true) {
    Result<size_t> count = reader->read(buffer);
    ASSERT_THAT(count, IsOk());
    if (*count == 0) break;
    ASSERT_TRUE(std::equal(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(*count),
                           piece.begin()));
    total += *count;
  }
  EXPECT_EQ(total, kSize);
}

// ---- writer misuse and failures ----------------------------------------------------------------

TEST_F(NpzWriteTest, RefusedArraysChangeNothing) {
  const std::string path = file("out.npz");
  Result<NpzWriter> writer = NpzWriter::create(path);
  ASSERT_THAT(writer, IsOk());
  const uint64_t two[] = {2};
  const uint64_t rank9[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const uint64_t huge[] = {uint64_t{1} << 40, uint64_t{1} << 40};
  const std::tuple<std::string, DType, std::span<const uint64_t>, std::string> refused[] = {
      {"", DType::kFloat32, two, "an empty key"},
      {std::string("a\0b", 3), DType::kFloat32, two, "a NUL byte"},
      {"bad\xff", DType::kFloat32, two, "not valid UTF-8"},
      {"\xc0\xaf", DType::kFloat32, two, "not valid UTF-8"},      // an overlong '/'
      {"\xed\xa0\x80", DType::kFloat32, two, "not valid UTF-8"},  // a surrogate
      {"a\xe2\x82", DType::kFloat32, two, "not valid UTF-8"},     // cut short
      {"x", DType::kBFloat16, two, "BFLOAT_16 has no numpy dtype"},
      {"x", DType::kSFixed4, two, "SFIXED_POINT_4 has no numpy dtype"},
      {"x", DType::kUFixed4, two, "UFIXED_POINT_4 has no numpy dtype"},
      {"x", DType::kFloat32, rank9, "rank 9"},
      {"x", DType::kFloat32, huge, "more than 2^60 elements"},
      {std::string(65001, 'k'), DType::kFloat32, two, "over 65000 bytes"},
  };
  for (const auto& [key, dtype, shape, wanted] : refused) {
    SCOPED_TRACE(wanted);
    const Status status = writer->begin_array(key, dtype, shape);
    expect_error_about(status, path, wanted);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(writer->write(Bytes{1}).code(), ErrorCode::kState);  // nothing open
  EXPECT_EQ(writer->end_array().code(), ErrorCode::kState);
  ASSERT_THAT(writer->begin_array("x", DType::kInt8, two), IsOk());
  expect_error_about(writer->begin_array("y", DType::kInt8, two), path, "'x' is still open");
  expect_error_about(writer->finish(), path, "'x' is still open");
  ASSERT_THAT(writer->write(Bytes{5, 6}), IsOk());
  ASSERT_THAT(writer->end_array(), IsOk());
  expect_error_about(writer->begin_array("x", DType::kInt8, two), path, "already written");
  ASSERT_THAT(writer->finish(), IsOk());
  expect_error_about(writer->finish(), path, "already finished");
  python(R"(
z = np.load(path('out.npz'))
assert z.files == ['x'] and z['x'].tolist() == [5, 6], (z.files, z['x'])
)");
}

TEST_F(NpzWriteTest, FailedWriterLeavesNoFileAndKeepsTheOldOne) {
  const std::string path = file("out.npz");
  write_bytes(path, Bytes{'o', 'l', 'd'});
  const uint64_t shape[] = {4};
  {  // too few bytes
    Result<NpzWriter> writer = NpzWriter::create(path);
    ASSERT_THAT(writer, IsOk());
    ASSERT_THAT(writer->begin_array("a", DType::kInt16, shape), IsOk());
    ASSERT_THAT(writer->write(Bytes(6, 1)), IsOk());
    const Status ended = writer->end_array();
    expect_error_about(ended, path, "array 'a': ended after 6 of the 8 data bytes");
    EXPECT_EQ(listing(), std::vector<std::string>{"out.npz"});  // removed at once
    EXPECT_EQ(writer->finish().message(), ended.message());     // final
  }
  {  // too many bytes
    Result<NpzWriter> writer = NpzWriter::create(path);
    ASSERT_THAT(writer, IsOk());
    ASSERT_THAT(writer->begin_array("a", DType::kInt16, shape), IsOk());
    ASSERT_THAT(writer->write(Bytes(6, 1)), IsOk());
    expect_error_about(writer->write(Bytes(3, 1)), path, "3 more bytes after 6 exceed the 8");
    EXPECT_FALSE(writer->end_array().is_ok());
  }
  {  // never finished
    Result<NpzWriter> writer = NpzWriter::create(path);
    ASSERT_THAT(writer, IsOk());
    ASSERT_THAT(writer->begin_array("a", DType::kInt16, shape), IsOk());
    ASSERT_THAT(writer->write(Bytes(8, 1)), IsOk());
    ASSERT_THAT(writer->end_array(), IsOk());
    EXPECT_EQ(listing().size(), 2u);  // the target and the temporary
  }
  EXPECT_EQ(listing(), std::vector<std::string>{"out.npz"});
  EXPECT_EQ(read_bytes(path), (Bytes{'o', 'l', 'd'}));
  const std::string nowhere = file("no/such/folder/out.npz");
  Result<NpzWriter> writer = NpzWriter::create(nowhere);
  expect_error_about(writer.status(), nowhere, "cannot be written (no such folder: ");
  EXPECT_EQ(writer.status().code(), ErrorCode::kIo);
}

TEST_F(NpzWriteTest, MovedWriterKeepsWorking) {
  Result<NpzWriter> created = NpzWriter::create(file("out.npz"));
  ASSERT_THAT(created, IsOk());
  NpzWriter writer = std::move(created.value());
  EXPECT_EQ(created->finish().code(), ErrorCode::kState);  // the moved-from one
  const uint64_t shape[] = {1};
  ASSERT_THAT(writer.begin_array("a", DType::kUInt8, shape), IsOk());
  ASSERT_THAT(writer.write(Bytes{42}), IsOk());
  ASSERT_THAT(writer.end_array(), IsOk());
  ASSERT_THAT(writer.finish(), IsOk());
  Result<NpzReader> npz = NpzReader::open(file("out.npz"));
  ASSERT_THAT(npz, IsOk());
  Result<NpyArrayReader> reader = npz->open_array(0);
  ASSERT_THAT(reader, IsOk());
  Result<Bytes> data = read_data(*reader, 1);
  ASSERT_THAT(data, IsOk());
  EXPECT_EQ(*data, Bytes{42});
}

}  // namespace
}  // namespace qd::importers
