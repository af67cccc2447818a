#include "qnn_debug/naming/naming.h"

#include <re2/re2.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "handle_map.h"

namespace qd::naming {
namespace detail {

enum class Preset : uint8_t { kDebugId, kExecutorchQnn, kQnnSanitized, kCustom };

struct ParserRules {
  Preset preset = Preset::kDebugId;
  std::string_view preset_name;  // refers to a string literal

  // Each match yields one handle; a custom pattern may also carry the output index.
  std::unique_ptr<RE2> handle_scanner;
  int handle_group = 1;
  int output_group = 0;  // 0: the scanner has no output group

  // The marks of a trailing output index: "@:" ("@k"/":k"), "@" for executorch-qnn; not used by
  // custom.
  std::string_view index_marks = "@:";

  // executorch-qnn only.
  std::unique_ptr<RE2> debug_id_tail;  // "..._debugID_k": those digits are a handle
  std::unique_ptr<RE2> role_prefix;    // "input_<n>_" or "output_"

  HandleMap handle_map;  // empty when no file was given
};

}  // namespace detail

namespace {

using detail::ParserRules;
using detail::Preset;

constexpr std::string_view kDebugIdName = "debug-id";
constexpr std::string_view kExecutorchQnnName = "executorch-qnn";
constexpr std::string_view kQnnSanitizedName = "qnn-sanitized";
constexpr std::string_view kCustomName = "custom";

constexpr std::string_view kDebugIdPattern = R"(_debugID_(\d+))";
constexpr std::string_view kDebugIdTailPattern = R"(_debugID_\d+\z)";
constexpr std::string_view kRolePrefixPattern = R"(\A(?:(input_(?:\d+_)?)|(output_)))";

constexpr std::string_view kHandleGroupOpen = "(?P<handle>";
constexpr size_t kMaxEchoedBytes = 200;

// Latin-1 makes every byte one character, so names that are not valid UTF-8 still match
// byte-for-byte instead of failing to match at all.
RE2::Options byte_options() {
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingLatin1);
  options.set_log_errors(false);  // a hook must not write to the host's stderr
  return options;
}

re2::StringPiece as_piece(std::string_view text) { return {text.data(), text.size()}; }
std::string_view as_view(const re2::StringPiece& piece) { return {piece.data(), piece.size()}; }

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word_byte(char c) {
  return is_ascii_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Decimal digits only (no sign), in range for Int; anything else is "not a number".
template <typename Int>
std::optional<Int> parse_decimal(std::string_view digits) {
  if (digits.empty() || !is_ascii_digit(digits.front())) return std::nullopt;
  Int value{};
  const char* end = digits.data() + digits.size();
  const auto [stop, failure] = std::from_chars(digits.data(), end, value);
  if (failure != std::errc() || stop != end) return std::nullopt;
  return value;
}

// User text echoed in an error message, cut short so a hostile argument cannot bloat it.
std::string echo(std::string_view text) {
  std::string shown(text.substr(0, kMaxEchoedBytes));
  if (text.size() > kMaxEchoedBytes) shown += "...";
  return "\"" + shown + "\"";
}

Status invalid_argument(std::string message) {
  return error(ErrorCode::kInvalidArgument, std::move(message));
}

// ---------------------------------------------------------------------------------------------
// Matching helpers shared by the presets.

// Visits every non-overlapping match from left to right, like RE2::FindAndConsume, except that an
// empty match steps one byte forward instead of matching at the same place forever.
// Returns the first output index a custom pattern's output group yields, or -1.
int32_t scan_handles(const ParserRules& rules, std::string_view name,
                     UniqueHandleAppender& handles) {
  const RE2& scanner = *rules.handle_scanner;
  const int group_count = 1 + std::max(rules.handle_group, rules.output_group);
  // Most patterns have a handful of groups; only unusual custom ones need the heap.
  constexpr int kInlineGroups = 8;
  re2::StringPiece inline_groups[kInlineGroups];
  std::vector<re2::StringPiece> heap_groups;
  re2::StringPiece* groups = inline_groups;
  if (group_count > kInlineGroups) {
    heap_groups.resize(static_cast<size_t>(group_count));
    groups = heap_groups.data();
  }
  int32_t output_index = -1;
  size_t pos = 0;
  while (pos <= name.size() &&
         scanner.Match(as_piece(name), pos, name.size(), RE2::UNANCHORED, groups, group_count)) {
    if (auto handle = parse_decimal<int64_t>(as_view(groups[rules.handle_group]))) {
      handles.add(*handle);
    }
    if (rules.output_group > 0 && output_index < 0) {
      output_index = parse_decimal<int32_t>(as_view(groups[rules.output_group])).value_or(-1);
    }
    const size_t match_end = static_cast<size_t>(groups[0].data() - name.data()) + groups[0].size();
    pos = groups[0].empty() ? match_end + 1 : match_end;
  }
  return output_index;
}

struct RolePrefix {
  TensorRole role = TensorRole::kIntermediate;
  size_t length = 0;  // bytes of "input_<n>_" or "output_"
};

RolePrefix match_role_prefix(const RE2& pattern, std::string_view name) {
  re2::StringPiece groups[3];
  if (!pattern.Match(as_piece(name), 0, name.size(), RE2::ANCHOR_START, groups, 3)) return {};
  if (groups[1].data() != nullptr) return {TensorRole::kGraphInput, groups[1].size()};
  return {TensorRole::kGraphOutput, groups[2].size()};
}

// Adds the handles of the first candidate name present in the map. With `also_sanitized`, a
// second pass tries each candidate's qnn_sanitize'd form. Returns whether any candidate was found.
bool add_mapped_handles(const HandleMap& map, std::initializer_list<std::string_view> candidates,
                        bool also_sanitized, UniqueHandleAppender& handles) {
  if (map.empty()) return false;
  const auto add_if_present = [&](std::string_view key) {
    const std::vector<int64_t>* mapped = map.find(key);
    if (mapped == nullptr) return false;
    for (int64_t handle : *mapped) handles.add(handle);
    return true;
  };
  for (std::string_view candidate : candidates) {
    if (!candidate.empty() && add_if_present(candidate)) return true;
  }
  if (!also_sanitized) return false;
  for (std::string_view candidate : candidates) {
    if (candidate.empty()) continue;
    const std::string sanitized = qnn_sanitize(candidate);
    if (sanitized != candidate && add_if_present(sanitized)) return true;
  }
  return false;
}

// Lookup in a map whose keys were sanitized when loaded: only sanitized forms can hit.
bool add_sanitized_mapped_handles(const HandleMap& map,
                                  std::initializer_list<std::string_view> candidates,
                                  UniqueHandleAppender& handles) {
  if (map.empty()) return false;
  for (std::string_view candidate : candidates) {
    if (candidate.empty()) continue;
    const std::vector<int64_t>* mapped = map.find(qnn_sanitize(candidate));
    if (mapped == nullptr) continue;
    for (int64_t handle : *mapped) handles.add(handle);
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The presets. Each returns what it found; none of them can fail except by running out of memory.

// The output index and the op's node from a trailing output suffix, when the name has one.
std::optional<OutputSuffix> take_output_suffix(const ParserRules& rules, std::string_view name,
                                               ParsedName& parsed) {
  const std::optional<OutputSuffix> suffix = split_output_suffix(name, rules.index_marks);
  if (suffix) parsed.output_index = suffix->index;
  parsed.node = suffix ? suffix->stem : name;
  return suffix;
}

ParsedName parse_debug_id(const ParserRules& rules, std::string_view name) {
  ParsedName parsed;
  UniqueHandleAppender handles(parsed.handles);
  scan_handles(rules, name, handles);
  take_output_suffix(rules, name, parsed);
  add_mapped_handles(rules.handle_map, {name}, /*also_sanitized=*/false, handles);
  parsed.matched = !parsed.handles.empty();
  return parsed;
}

// "@k" wins; the older "_k" counts only when the trailing digits are not a "_debugID_" handle.
std::optional<OutputSuffix> match_executorch_suffix(const ParserRules& rules,
                                                    std::string_view name) {
  if (auto suffix = split_output_suffix(name, rules.index_marks)) return suffix;
  if (RE2::PartialMatch(as_piece(name), *rules.debug_id_tail)) return std::nullopt;
  return split_output_suffix(name, "_");
}

ParsedName parse_executorch_qnn(const ParserRules& rules, std::string_view name) {
  ParsedName parsed;
  UniqueHandleAppender handles(parsed.handles);
  scan_handles(rules, name, handles);
  const std::optional<OutputSuffix> suffix = match_executorch_suffix(rules, name);
  const RolePrefix prefix = match_role_prefix(*rules.role_prefix, name);
  parsed.role = prefix.role;
  if (suffix) parsed.output_index = suffix->index;

  const std::string_view stem = suffix ? suffix->stem : name;
  // The graph node's own name, as a reference run would know it: "output_aten_add_tensor@0"
  // -> "aten_add_tensor", "input_1_tokens@0" -> "tokens".
  const std::string_view node =
      prefix.length > 0 && stem.size() > prefix.length ? stem.substr(prefix.length) : "";
  parsed.node = node.empty() ? stem : node;
  add_mapped_handles(rules.handle_map, {name, stem, node}, /*also_sanitized=*/true, handles);
  parsed.matched = suffix.has_value() || !parsed.handles.empty();
  return parsed;
}

ParsedName parse_qnn_sanitized(const ParserRules& rules, std::string_view name) {
  ParsedName parsed;
  UniqueHandleAppender handles(parsed.handles);
  scan_handles(rules, name, handles);
  const std::optional<OutputSuffix> suffix = take_output_suffix(rules, name, parsed);
  add_sanitized_mapped_handles(rules.handle_map, {name, suffix ? suffix->stem : ""}, handles);
  parsed.matched = !parsed.handles.empty();
  return parsed;
}

ParsedName parse_custom(const ParserRules& rules, std::string_view name) {
  ParsedName parsed;
  UniqueHandleAppender handles(parsed.handles);
  parsed.output_index = scan_handles(rules, name, handles);
  parsed.node = name;
  add_mapped_handles(rules.handle_map, {name}, /*also_sanitized=*/false, handles);
  parsed.matched = !parsed.handles.empty() || parsed.output_index >= 0;
  return parsed;
}

// ---------------------------------------------------------------------------------------------
// Building the rules.

Result<Preset> preset_from_name(std::string_view name) {
  if (name == kDebugIdName) return Preset::kDebugId;
  if (name == kExecutorchQnnName) return Preset::kExecutorchQnn;
  if (name == kQnnSanitizedName) return Preset::kQnnSanitized;
  if (name == kCustomName) return Preset::kCustom;
  return invalid_argument("unknown naming preset " + echo(name) +
                          "; expected debug-id, executorch-qnn, qnn-sanitized or custom");
}

std::string_view preset_name(Preset preset) {
  switch (preset) {
    case Preset::kDebugId:
      return kDebugIdName;
    case Preset::kExecutorchQnn:
      return kExecutorchQnnName;
    case Preset::kQnnSanitized:
      return kQnnSanitizedName;
    case Preset::kCustom:
      return kCustomName;
  }
  return "";
}

// Built-in patterns are constants, so failing to compile one is a bug, not a user error.
Result<std::unique_ptr<RE2>> compile_builtin(std::string_view pattern) {
  auto compiled = std::make_unique<RE2>(as_piece(pattern), byte_options());
  if (!compiled->ok()) {
    return error(ErrorCode::kInternal,
                 "built-in naming pattern " + echo(pattern) + " failed: " + compiled->error());
  }
  return compiled;
}

// Where a character class starting at `open` ('[') ends, one past its ']'. Follows RE2's rules:
// a ']' right after '[' or '[^' is literal, '\' escapes, and "[:name:]" nests.
size_t skip_character_class(std::string_view pattern, size_t open) {
  size_t i = open + 1;
  if (i < pattern.size() && pattern[i] == '^') ++i;
  if (i < pattern.size() && pattern[i] == ']') ++i;
  while (i < pattern.size()) {
    if (pattern[i] == '\\') {
      i += 2;
      continue;
    }
    if (pattern.substr(i, 2) == "[:") {
      const size_t close = pattern.find(":]", i + 2);
      if (close != std::string_view::npos) {
        i = close + 2;
        continue;
      }
    }
    if (pattern[i] == ']') return i + 1;
    ++i;
  }
  return pattern.size();
}

// The text inside "(?P<handle>...)". The pattern already compiled, so the only places a
// parenthesis can hide from a depth count are escapes, \Q...\E quotes and character classes.
std::optional<std::string_view> handle_group_body(std::string_view pattern) {
  size_t depth = 0;
  size_t body_start = std::string_view::npos;
  size_t body_depth = 0;
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (pattern.substr(i, 2) == "\\Q") {
      const size_t quote_end = pattern.find("\\E", i + 2);
      i = quote_end == std::string_view::npos ? pattern.size() : quote_end + 2;
    } else if (c == '\\') {
      i += 2;
    } else if (c == '[') {
      i = skip_character_class(pattern, i);
    } else if (c == '(') {
      ++depth;
      if (body_start == std::string_view::npos && pattern.substr(i).starts_with(kHandleGroupOpen)) {
        body_start = i + kHandleGroupOpen.size();
        body_depth = depth;
        i = body_start;
        continue;
      }
      ++i;
    } else if (c == ')') {
      if (body_start != std::string_view::npos && depth == body_depth) {
        return pattern.substr(body_start, i - body_start);
      }
      if (depth > 0) --depth;
      ++i;
    } else {
      ++i;
    }
  }
  return std::nullopt;
}

// Whether `expression` matches an empty string anywhere. RE2's only zero-width constructs are
// ^ $ \A \z \b \B, whose outcome depends on the neighbouring bytes, so trying an empty match at
// every position of texts covering each kind of neighbourhood (text edge, word byte, other
// byte, newline) decides it.
bool matches_empty_somewhere(const RE2& expression) {
  static constexpr std::string_view kProbeTexts[] = {"",   "a",    " ",    "\n",  "aa", "a a",
                                                     "  ", "a\na", "\n\n", " \n", "\n "};
  for (std::string_view probe : kProbeTexts) {
    for (size_t at = 0; at <= probe.size(); ++at) {
      if (expression.Match(as_piece(probe), at, at, RE2::ANCHOR_BOTH, nullptr, 0)) return true;
    }
  }
  return false;
}

Status check_handle_group_never_empty(std::string_view pattern) {
  const std::optional<std::string_view> body = handle_group_body(pattern);
  if (!body) {
    return error(ErrorCode::kInternal,
                 "could not locate the handle group in custom pattern " + echo(pattern));
  }
  const std::string wrapped = "(?:" + std::string(*body) + ")";
  const RE2 group(as_piece(wrapped), byte_options());
  if (!group.ok()) {
    return invalid_argument("the (?P<handle>...) group of custom pattern " + echo(pattern) +
                            " cannot be checked on its own: " + group.error());
  }
  if (matches_empty_somewhere(group)) {
    return invalid_argument("the (?P<handle>...) group of custom pattern " + echo(pattern) +
                            " can match an empty string; a handle needs at least one digit");
  }
  return Status::ok();
}

Status compile_custom(std::string_view pattern, ParserRules& rules) {
  if (pattern.empty()) {
    return invalid_argument("preset \"custom\" needs a pattern with a (?P<handle>...) group");
  }
  auto compiled = std::make_unique<RE2>(as_piece(pattern), byte_options());
  if (!compiled->ok()) {
    return invalid_argument("custom pattern " + echo(pattern) +
                            " does not compile: " + compiled->error());
  }
  const std::map<std::string, int>& groups = compiled->NamedCapturingGroups();
  const auto handle = groups.find("handle");
  if (handle == groups.end()) {
    return invalid_argument("custom pattern " + echo(pattern) +
                            " has no (?P<handle>...) group to take the debug handle from");
  }
  QD_RETURN_IF_ERROR(check_handle_group_never_empty(pattern));
  rules.handle_group = handle->second;
  const auto output = groups.find("output");
  rules.output_group = output == groups.end() ? 0 : output->second;
  rules.handle_scanner = std::move(compiled);
  return Status::ok();
}

Status compile_builtin_rules(Preset preset, ParserRules& rules) {
  QD_ASSIGN_OR_RETURN(rules.handle_scanner, compile_builtin(kDebugIdPattern));
  if (preset != Preset::kExecutorchQnn) return Status::ok();
  rules.index_marks = "@";
  QD_ASSIGN_OR_RETURN(rules.debug_id_tail, compile_builtin(kDebugIdTailPattern));
  QD_ASSIGN_OR_RETURN(rules.role_prefix, compile_builtin(kRolePrefixPattern));
  return Status::ok();
}

Status load_handle_map(std::string_view path, Preset preset, ParserRules& rules) {
  if (path.empty()) return Status::ok();
  QD_ASSIGN_OR_RETURN(HandleMap map, HandleMap::load(path));
  if (preset == Preset::kQnnSanitized) {
    QD_ASSIGN_OR_RETURN(map, map.with_sanitized_keys());
  }
  rules.handle_map = std::move(map);
  return Status::ok();
}

Result<std::shared_ptr<const ParserRules>> build_rules(std::string_view preset_text,
                                                       std::string_view custom_pattern,
                                                       std::string_view handle_map_path) {
  QD_ASSIGN_OR_RETURN(const Preset preset, preset_from_name(preset_text));
  if (preset != Preset::kCustom && !custom_pattern.empty()) {
    return invalid_argument("a custom pattern is only used with preset \"custom\", not " +
                            echo(preset_text));
  }
  auto rules = std::make_shared<ParserRules>();
  rules->preset = preset;
  rules->preset_name = preset_name(preset);
  if (preset == Preset::kCustom) {
    QD_RETURN_IF_ERROR(compile_custom(custom_pattern, *rules));
  } else {
    QD_RETURN_IF_ERROR(compile_builtin_rules(preset, *rules));
  }
  QD_RETURN_IF_ERROR(load_handle_map(handle_map_path, preset, *rules));
  return std::shared_ptr<const ParserRules>(std::move(rules));
}

}  // namespace

std::string qnn_sanitize(std::string_view name) {
  std::string sanitized;
  const bool leading_digit = !name.empty() && is_ascii_digit(name.front());
  sanitized.reserve(name.size() + (leading_digit ? 1 : 0));
  if (leading_digit) sanitized.push_back('_');
  for (char c : name) sanitized.push_back(is_word_byte(c) ? c : '_');
  return sanitized;
}

std::optional<OutputSuffix> split_output_suffix(std::string_view name,
                                                std::string_view marks) noexcept {
  size_t digits = 0;
  while (digits < name.size() && is_ascii_digit(name[name.size() - 1 - digits])) ++digits;
  if (digits == 0 || digits == name.size()) return std::nullopt;
  const size_t mark = name.size() - 1 - digits;
  if (marks.find(name[mark]) == std::string_view::npos) return std::nullopt;
  const std::optional<int32_t> index = parse_decimal<int32_t>(name.substr(mark + 1));
  if (!index) return std::nullopt;
  return OutputSuffix{name.substr(0, mark), *index};
}

NameParser::NameParser(std::shared_ptr<const detail::ParserRules> rules) noexcept
    : rules_(std::move(rules)) {}

Result<NameParser> NameParser::create(std::string_view preset, std::string_view custom_pattern,
                                      std::string_view handle_map_path) noexcept {
  try {
    QD_ASSIGN_OR_RETURN(auto rules, build_rules(preset, custom_pattern, handle_map_path));
    return NameParser(std::move(rules));
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::kNoMemory, "out of memory");
  } catch (...) {
    return error(ErrorCode::kInternal, "unexpected failure creating a name parser");
  }
}

ParsedName NameParser::parse(std::string_view name) const {
  if (!rules_) return {};  // a moved-from parser recognizes nothing
  // RE2 reports match positions as pointers into the text, which needs a real address.
  if (name.data() == nullptr) name = std::string_view("", 0);
  switch (rules_->preset) {
    case Preset::kDebugId:
      return parse_debug_id(*rules_, name);
    case Preset::kExecutorchQnn:
      return parse_executorch_qnn(*rules_, name);
    case Preset::kQnnSanitized:
      return parse_qnn_sanitized(*rules_, name);
    case Preset::kCustom:
      return parse_custom(*rules_, name);
  }
  return {};
}

std::string_view NameParser::preset() const noexcept {
  return rules_ ? rules_->preset_name : std::string_view();
}

}  // namespace qd::naming
