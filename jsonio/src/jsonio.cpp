#include "qnn_debug/jsonio/jsonio.h"

#include <nlohmann/json.hpp>

namespace qd::jsonio {

template <class Json>
bool parse(std::string_view text, Json& out, std::string* error) {
  try {
    out = Json::parse(text);
    return true;
  } catch (const typename Json::exception& failure) {
    if (error != nullptr) *error = failure.what();
    return false;
  }
}

template <class Json>
std::string dump(const Json& value, DumpStyle style) {
  return value.dump(style.indent, ' ', style.ascii, Json::error_handler_t::replace);
}

namespace {
template <class Sax>
struct DocumentOf;
template <class Json>
struct DocumentOf<nlohmann::json_sax<Json>> {
  using type = Json;
};
}  // namespace

template <class Sax>
bool sax_parse(std::string_view text, Sax& handler) {
  using Json = typename DocumentOf<Sax>::type;
  return Json::sax_parse(text.data(), text.data() + text.size(), &handler);
}

// The only instantiations: every caller's document is one of these two.
template bool parse(std::string_view, nlohmann::json&, std::string*);
template bool parse(std::string_view, nlohmann::ordered_json&, std::string*);
template std::string dump(const nlohmann::json&, DumpStyle);
template std::string dump(const nlohmann::ordered_json&, DumpStyle);
template bool sax_parse(std::string_view, nlohmann::json_sax<nlohmann::json>&);
template bool sax_parse(std::string_view, nlohmann::json_sax<nlohmann::ordered_json>&);

}  // namespace qd::jsonio
