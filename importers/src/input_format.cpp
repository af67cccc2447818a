// What every input format shares: the option bag, detection by content, the names in messages.
// The formats themselves are in input_formats.cpp's list.
#include "qnn_debug/importers/input_format.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "qnn_debug/base/text.h"

namespace qd::importers {
namespace {

namespace fs = std::filesystem;

std::string first_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(16, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

// A flatbuffer's file identifier sits at byte 4: two letters and a schema version.
bool flatbuffer_identifier(const std::string& head, std::string_view letters) {
  const auto digit = [&](size_t i) { return head[i] >= '0' && head[i] <= '9'; };
  return head.size() >= 8 && head.compare(4, 2, letters) == 0 && digit(6) && digit(7);
}

OtherContent other_content_of(const std::string& head) {
  if (flatbuffer_identifier(head, "ET")) return OtherContent::kExecutorchProgram;
  if (flatbuffer_identifier(head, "BP")) return OtherContent::kBundledProgram;
  for (const char c : head) {
    if (c == '{') return OtherContent::kJson;
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
  }
  return OtherContent::kUnknown;
}

// "a, b, c or d".
std::string listed(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

// What detect_format says of a file it recognizes but does not read.
std::string not_an_input(const std::string& path, const std::string& head) {
  const std::string identifier = head.size() >= 8 ? head.substr(4, 4) : "";
  switch (other_content_of(head)) {
    case OtherContent::kExecutorchProgram:
      return quote_name(path) + ": an ExecuTorch program (flatbuffer " + identifier +
             "), not a dump of its tensors: run it with ETDump enabled "
             "(qnn_executor_runner --dump_intermediate_outputs) and give the .etdp it writes";
    case OtherContent::kBundledProgram:
      return quote_name(path) + ": an ExecuTorch bundled program (flatbuffer " + identifier +
             "): a program and its test inputs, not a dump of tensors: run it with ETDump "
             "enabled and give the .etdp it writes";
    case OtherContent::kJson:
      return quote_name(path) +
             ": a JSON document, not a store or a dump of tensors (encodings go to "
             "--encodings; `qnn-debug inspect` lists and lints them)";
    case OtherContent::kUnknown:
      break;
  }
  return quote_name(path) + ": not " + format_nouns() + " (its first bytes match none of them)";
}

}  // namespace

const std::vector<std::string>& InputSpec::values(std::string_view key) const {
  static const std::vector<std::string> kNone;
  const auto it = options.find(key);
  return it == options.end() ? kNone : it->second;
}

std::string InputSpec::value(std::string_view key) const {
  const std::vector<std::string>& given = values(key);
  return given.empty() ? std::string() : given.back();
}

InputSpec with_shared_options(InputSpec side, const InputSpec& shared) {
  const std::vector<InputOption> options = side_options();
  for (const auto& [key, values] : shared.options) {
    const auto option = std::ranges::find(options, key, &InputOption::key);
    std::vector<std::string>& own = side.options[key];
    if (own.empty() || (option != options.end() && option->many)) {
      own.insert(own.end(), values.begin(), values.end());
    }
  }
  return side;
}

InputOption encodings_option(std::string capture_help) {
  return {.key = "encodings",
          .flag = "encodings",
          .help = std::move(capture_help),
          .side_help = "Encodings for this side",
          .both_help = "Encodings for both sides (repeatable)",
          .many = true,
          .path = true,
          .default_value = ""};
}

std::vector<InputOption> with_naming_options(std::vector<InputOption> own,
                                             std::string default_naming) {
  own.push_back({.key = "naming",
                 .flag = "naming",
                 .help = "Naming preset for the tensor names (docs/naming.md)",
                 .side_help = "Naming preset for this side's names",
                 .both_help = "",
                 .many = false,
                 .path = false,
                 .default_value = std::move(default_naming)});
  own.push_back({.key = "handle_map",
                 .flag = "handle-map",
                 .help = "JSON {\"tensor name\": handle or [handles]} for the naming preset",
                 .side_help = "The preset's handle map",
                 .both_help = "",
                 .many = false,
                 .path = true,
                 .default_value = ""});
  own.push_back({.key = "heap_profile",
                 .flag = "heap-profile",
                 .help =
                     "An HTP heap profile (ExecuTorch's --heap_profiling_path file) to store as "
                     "memory checkpoints",
                 .side_help = "This side's HTP heap profile",
                 .both_help = "",
                 .many = false,
                 .path = true,
                 .default_value = ""});
  return own;
}

std::string format_names() {
  std::vector<std::string> names;
  for (const InputFormat* format : input_formats()) names.push_back(format->name);
  return listed(names);
}

std::string format_nouns() {
  std::vector<std::string> nouns;
  for (const InputFormat* format : input_formats()) nouns.push_back(format->noun);
  return listed(nouns);
}

Result<const InputFormat*> parse_format(std::string_view name) {
  for (const InputFormat* format : input_formats()) {
    if (format->name == name) return format;
  }
  return error(ErrorCode::kInvalidArgument,
               "unknown input format " + quote_name(name) + "; expected " + format_names());
}

Result<const InputFormat*> detect_format(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    return error(ErrorCode::kNotFound, quote_name(path) + ": no such file or folder");
  }
  InputHead head;
  head.folder = fs::is_directory(status);
  if (!head.folder) head.bytes = first_bytes(path);
  for (const InputFormat* format : input_formats()) {
    if (format->detect(head)) return format;
  }
  return error(ErrorCode::kCorrupt, not_an_input(path, head.bytes));
}

OtherContent other_content(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return OtherContent::kUnknown;
  return other_content_of(first_bytes(path));
}

std::string capture_command(const InputFormat& format, const std::string& path) {
  return "qnn-debug capture " + format.name + " " + path + format.capture_example + " -o store.h5";
}

Status refuse_other_format(const InputFormat& wanted, const std::string& path) {
  const Result<const InputFormat*> format = detect_format(path);
  if (!format) {
    if (other_content(path) == OtherContent::kUnknown) return Status::ok();  // the importer says
    return error(ErrorCode::kInvalidArgument, format.status().message());
  }
  if (*format == &wanted) return Status::ok();
  if (!(*format)->import) {
    return error(ErrorCode::kInvalidArgument,
                 "'" + path + "' is already " + (*format)->noun + ", not " + wanted.noun);
  }
  return error(ErrorCode::kInvalidArgument, "'" + path + "' is " + (*format)->detected_as +
                                                ", not " + wanted.noun + ": use `" +
                                                capture_command(**format, path) + "`");
}

std::vector<InputOption> side_options() {
  std::vector<InputOption> all;
  for (const InputFormat* format : input_formats()) {
    for (const InputOption& option : format->options) {
      if (std::ranges::none_of(all, [&](const InputOption& o) { return o.key == option.key; })) {
        all.push_back(option);
        all.back().default_value.clear();  // a default is a format's, and a side has any format
      }
    }
  }
  return all;
}

}  // namespace qd::importers
