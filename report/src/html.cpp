#include <string>
#include <string_view>

#include "html_assets.h"
#include "qnn_debug/report/render.h"

namespace qd::report {
namespace {

// The report as JSON that is safe inside <script type="application/json">: '<', '>' and '&'
// only occur in strings there, so writing them as \u escapes keeps the JSON identical while no
// "</script>" or "<!--" can end the element early; ensure_ascii covers U+2028 and U+2029.
std::string embeddable_json(const Document& doc) {
  const std::string text = doc.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (char c : text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The template with each marker replaced once, in template order: inserted text is never
// searched again, so a store string that looks like a marker stays inert.
std::string fill(std::string_view templ, const std::string& style, const std::string& script,
                 const std::string& data) {
  const std::pair<std::string_view, const std::string*> parts[] = {
      {"/*QD_STYLE*/", &style}, {"/*QD_DATA*/", &data}, {"/*QD_SCRIPT*/", &script}};
  std::string out;
  size_t from = 0;
  for (const auto& [marker, value] : parts) {
    const size_t at = templ.find(marker, from);
    if (at == std::string_view::npos) continue;
    out.append(templ.substr(from, at - from));
    out += *value;
    from = at + marker.size();
  }
  out.append(templ.substr(from));
  return out;
}

}  // namespace

std::string render_html(const Document& doc) {
  return fill(assets::kTemplate, assets::kStyle, assets::kScript, embeddable_json(doc));
}

}  // namespace qd::report
