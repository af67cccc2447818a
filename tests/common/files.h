// Whole files in and out, for tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace qd::testing {

// The eight bytes every HDF5 file starts with.
inline constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";

inline std::string slurp(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// Writes `bytes` as the whole of `path`, creating its folders.
inline void write_bytes(const std::string& path, std::span<const uint8_t> bytes) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(file.good()) << "cannot write " << path;
}

inline void write_text(const std::string& path, std::string_view text) {
  write_bytes(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

}  // namespace qd::testing
