#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "html_assets.h"
#include "qnn_debug/compare/metric_fields.h"
#include "views_internal.h"

namespace qd::report {
namespace {

// JSON that is safe inside <script type="application/json">: '<', '>' and '&' only occur in
// strings there, so writing them as \u escapes keeps the JSON identical while no "</script>" or
// "<!--" can end the element early; ASCII-only output covers U+2028 and U+2029.
std::string embeddable(std::string_view text) {
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

// The metric declarations (compare/metric_fields.h) the page builds its tables from.
std::string metric_declarations() {
  nlohmann::json out = nlohmann::json::array();
  for (const compare::MetricField& field : compare::metric_fields()) {
    out.push_back({{"key", field.key},
                   {"label", field.label},
                   {"unit", field.unit},
                   {"kind", field.kind == compare::MetricField::Kind::kCount ? "count" : "real"},
                   {"overview", field.in_overview}});
  }
  return embeddable(out.dump(-1, ' ', true));
}

// The template cut at the data marker: each marker is replaced once, in template order, and
// inserted text is never searched again, so a store string that looks like a marker stays inert.
struct Page {
  std::string before_data;
  std::string after_data;
};

Page page() {
  const std::string_view templ = assets::kTemplate;
  const std::string metrics = metric_declarations();
  const std::pair<std::string_view, const std::string_view> parts[] = {
      {"/*QD_STYLE*/", assets::kStyle},
      {"/*QD_METRICS*/", metrics},
      {"/*QD_DATA*/", {}},
      {"/*QD_SCRIPT*/", assets::kScript}};
  Page out;
  std::string* target = &out.before_data;
  size_t from = 0;
  for (const auto& [marker, value] : parts) {
    const size_t at = templ.find(marker, from);
    if (at == std::string_view::npos) continue;
    target->append(templ.substr(from, at - from));
    target->append(value);
    if (marker == "/*QD_DATA*/") target = &out.after_data;
    from = at + marker.size();
  }
  target->append(templ.substr(from));
  return out;
}

// One HTML file with its styles, script and data inlined: no network access. Store strings are
// data, never markup: the page builds its DOM with textContent only. The report streams into
// the data element as compact, ASCII-only JSON.
class HtmlView : public ReportSink {
 public:
  explicit HtmlView(TextOut out)
      : out_(std::move(out)),
        json_([this](std::string_view text) { return out_(embeddable(text)); },
              JsonStyle{/*indented=*/false, /*ascii=*/true}) {}
  Status begin(const ReportHeader& header) override {
    page_ = page();
    QD_RETURN_IF_ERROR(out_(page_.before_data));
    return json_.begin(header);
  }
  Status add_run(const RunReport& run) override { return json_.add_run(run); }
  Status finish(const ReportEnding& ending) override {
    QD_RETURN_IF_ERROR(json_.finish(ending));
    return out_(page_.after_data);
  }

 private:
  TextOut out_;
  JsonWriter json_;
  Page page_;
};

}  // namespace

std::unique_ptr<ReportSink> make_html_view(TextOut out) {
  return std::make_unique<HtmlView>(std::move(out));
}

}  // namespace qd::report
