// Reading and writing JSON text, for every room that does (policies, name mappings, encodings,
// ETRecord members, reports, the views). The definitions live in one file (jsonio/src/jsonio.cpp)
// for nlohmann::json and nlohmann::ordered_json, and for their SAX handler interfaces: callers
// include <nlohmann/json.hpp> for the document type and call these instead of its parse and dump,
// so the parser and serializer templates are compiled once, not in each caller. This header names
// no third-party type.
#pragma once

#include <string>
#include <string_view>

namespace qd::jsonio {

struct DumpStyle {
  int indent = -1;     // spaces per level; -1: one line
  bool ascii = false;  // \u escapes for every non-ASCII character
};

// Parses `text` into `out`. Text that is not JSON gives false and, when `error` is set, the
// parser's message (it names the line and column). Callers bound the nesting first
// (base/json_depth.h).
template <class Json>
bool parse(std::string_view text, Json& out, std::string* error = nullptr);

// `value` as JSON text; invalid UTF-8 in its strings is replaced (U+FFFD), never an error.
template <class Json>
std::string dump(const Json& value, DumpStyle style = {});

// Feeds `text` to `handler`: false when the handler or a syntax error stopped the parse (the
// handler's parse_error says which). `Sax` is nlohmann::json_sax<Json> itself, the interface the
// caller's handler derives from: name it (sax_parse<nlohmann::json_sax<nlohmann::json>>).
template <class Sax>
bool sax_parse(std::string_view text, Sax& handler);

}  // namespace qd::jsonio
