// Tensor-name parsing: the input as a name for every preset (each with a small handle map, so the
// map lookups run), QNN sanitizing and output suffixes. An input with a newline is also a custom
// preset: its first line the RE2 pattern, the rest the name.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "qnn_debug/naming/naming.h"

namespace {

using qd::naming::NameParser;

// Keys chosen to meet names the fuzzer finds early: plain, sanitized, with an output suffix.
constexpr std::string_view kHandleMap =
    R"({"aten_relu_default": 3, "conv.0": [4, 5], "conv_0": [6], "output_x@0": []})";

volatile size_t g_sink = 0;  // keeps the reads of `node` from being optimized away

std::vector<NameParser> make_parsers() {
  const std::string map = qd::fuzz::write_file("handles.json", kHandleMap);
  std::vector<NameParser> parsers;
  for (const char* preset : {"debug-id", "executorch-qnn", "qnn-sanitized"}) {
    for (const std::string& path : {std::string(), map}) {
      auto parser = NameParser::create(preset, "", path);
      if (!parser.is_ok()) std::abort();  // fixed, valid inputs: the harness is broken
      parsers.push_back(std::move(*parser));
    }
  }
  return parsers;
}

// `node` must be a view into the name parsed; reading it under ASan proves that.
void parse(const NameParser& parser, std::string_view name) {
  const qd::naming::ParsedName parsed = parser.parse(name);
  size_t sum = parsed.handles.size();
  for (const char c : parsed.node) sum += static_cast<unsigned char>(c);
  g_sink = sum;
}

void custom(std::string_view input) {
  const std::string_view pattern = qd::fuzz::take_until(input, '\n');
  auto parser = qd::fuzz::checked(NameParser::create("custom", pattern, ""));
  if (parser.is_ok()) parse(*parser, input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<NameParser> parsers = make_parsers();
  const std::string_view name = qd::fuzz::as_text(data, size);
  for (const NameParser& parser : parsers) parse(parser, name);
  (void)qd::naming::qnn_sanitize(name);
  (void)qd::naming::split_output_suffix(name);
  (void)qd::naming::split_output_suffix(name, "@");
  if (name.find('\n') != std::string_view::npos) custom(name);
  return 0;
}
