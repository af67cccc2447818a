#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

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

// ---- large reports: every group's row, the full figures of as many groups as fit -----------
//
// A report's JSON holds about 3.5 KB per group (worst elements, histogram, samples, tensor
// descriptions): 100,000 groups would be a 350 MB page no browser opens quickly. The page keeps
// every group as a light row (what the table, the graph and the chart draw) and the full figures
// of failing and warning groups, then of passing ones, until their budgets are spent, in report
// order. The JSON report always has everything.
constexpr size_t kFindingDetailBytes = size_t{6} << 20;  // failing and warning groups
constexpr size_t kPassDetailBytes = size_t{3} << 19;     // passing groups (the same total)

// A number cut to 5 significant digits: a row shows 2 or 3, and the JSON report has them all.
nlohmann::json short_numbers(const nlohmann::json& value) {
  if (value.is_number_float()) return std::stod(fmt::format("{:.5g}", value.get<double>()));
  if (!value.is_structured()) return value;
  nlohmann::json out = value;
  for (auto& item : out) item = short_numbers(item);
  return out;
}

nlohmann::json light_tensor(const nlohmann::json& tensor) {
  return {{"name", tensor["name"]}, {"dims", tensor["dims"]}, {"dtype", tensor["dtype"]}};
}

// What a row can do without: empty lists, no error, the default rule, and the device's name and
// dims when they are the reference's (the page reads each missing one as that default).
void drop_defaults(nlohmann::json& group) {
  for (const char* key : {"flags", "hints", "handles"}) {
    if (group.contains(key) && group[key].empty()) group.erase(key);
  }
  if (group.value("policy_rule", 0) == -1) group.erase("policy_rule");
  for (nlohmann::json& pair : group["pairs"]) {
    if (pair["error"].is_null()) pair.erase("error");
    if (pair["device"]["dims"] == pair["reference"]["dims"]) pair["device"].erase("dims");
    if (pair["device"]["name"] == pair["reference"]["name"]) pair["device"].erase("name");
  }
}

// The overview figures of a pair (the table's columns) and its SQNR.
nlohmann::json light_metrics(const nlohmann::json& metrics) {
  if (metrics.is_null()) return nullptr;
  nlohmann::json out = {{"sqnr_db", metrics["sqnr_db"]}};
  for (const compare::MetricField& field : compare::metric_fields()) {
    if (field.in_overview) out[field.key] = metrics[field.key];
  }
  return out;
}

nlohmann::json light_group(const nlohmann::json& group) {
  nlohmann::json out = {{"light", true}};
  for (const char* key : {"id", "order", "handles", "op_type", "verdict", "policy_rule", "sqnr_db",
                          "input_sqnr_db", "introduced_db", "flags", "inputs", "time", "parts"}) {
    if (const auto found = group.find(key); found != group.end()) out[key] = *found;
  }
  const nlohmann::json& hints = group.value("hints", nlohmann::json::array());
  out["hints"] = hints.empty() ? hints : nlohmann::json::array({hints[0]});
  nlohmann::json pairs = nlohmann::json::array();
  for (const nlohmann::json& pair : group["pairs"]) {
    pairs.push_back({{"reference", light_tensor(pair["reference"])},
                     {"device", light_tensor(pair["device"])},
                     {"metrics", light_metrics(pair["metrics"])},
                     {"error", pair["error"]}});
  }
  out["pairs"] = std::move(pairs);
  drop_defaults(out);
  return short_numbers(out);
}

// A long decode (thousands of runs of a device) cannot keep even a light row per group of every
// run: the page keeps the groups of each device's first kFirstPageRuns runs and of its first
// kFailingPageRuns failing runs after those; every other run keeps its own fields with its
// groups, and all but its first three introducers, left out (`"groups_in_page": false`). The heatmap of runs draws every run from the
// aggregate and the step lines, and a click on a run left out says the JSON report has it.
constexpr uint64_t kFirstPageRuns = 32;
constexpr uint64_t kFailingPageRuns = 32;
constexpr size_t kIntroducersOfRunsOut = 3;  // what the terminal names too

class DetailBudget {
 public:
  // Shapes a run's groups: full while the group's budget lasts, light after; none at all for a
  // run beyond the page's runs.
  void shape(nlohmann::json& run) {
    if (!run_in_page(run)) {
      run["groups"] = nlohmann::json::array();
      run["groups_in_page"] = false;
      nlohmann::json& introducers = run["introducers"];  // all of them, a line each for a graph
      if (introducers.size() > kIntroducersOfRunsOut) {
        introducers.erase(introducers.begin() + kIntroducersOfRunsOut, introducers.end());
      }
      return;
    }
    for (nlohmann::json& group : run["groups"]) {
      const size_t limit = group["verdict"] == "pass" ? kPassDetailBytes : kFindingDetailBytes;
      if (spent_ < limit) {
        spent_ += group.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
      } else {
        group = light_group(group);
      }
    }
  }

 private:
  bool run_in_page(const nlohmann::json& run) {
    PageRuns& kept = devices_[run.value("device_index", uint32_t{0})];
    if (kept.first < kFirstPageRuns) return ++kept.first, true;
    if (run["verdict"] == "fail" && kept.failing < kFailingPageRuns) return ++kept.failing, true;
    return false;
  }

  struct PageRuns {
    uint64_t first = 0;    // runs kept from the start
    uint64_t failing = 0;  // failing runs kept after those
  };
  size_t spent_ = 0;
  std::map<uint32_t, PageRuns> devices_;
};

// The aggregate the heatmap of runs draws: every group's SQNR in every run, cut to 5
// significant digits as the light rows are (the JSON report has them all).
void shorten_aggregate(std::vector<AggregateEntry>& aggregate) {
  for (AggregateEntry& entry : aggregate) {
    for (AggregateEntry::RunSqnr& cell : entry.per_run) {
      if (std::isfinite(cell.sqnr_db))
        cell.sqnr_db = std::stod(fmt::format("{:.5g}", cell.sqnr_db));
    }
  }
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
      {"/*QD_SCRIPT*/", assets::script()}};
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
              JsonStyle{/*indented=*/false, /*ascii=*/true},
              [this](nlohmann::json& run) { budget_.shape(run); }) {}
  Status begin(const ReportHeader& header) override {
    page_ = page();
    QD_RETURN_IF_ERROR(out_(page_.before_data));
    return json_.begin(header);
  }
  Status add_run(const RunReport& run) override {
    ++runs_;
    return json_.add_run(run);
  }
  Status finish(const ReportEnding& ending) override {
    // The page shows the aggregate only across runs: one run's is its groups again.
    ReportEnding shown = ending;
    if (runs_ > 1) {
      shorten_aggregate(shown.aggregate);
    } else {
      shown.aggregate.clear();
    }
    QD_RETURN_IF_ERROR(json_.finish(shown));
    return out_(page_.after_data);
  }

 private:
  TextOut out_;
  DetailBudget budget_;
  JsonWriter json_;
  Page page_;
  uint64_t runs_ = 0;
};

}  // namespace

std::unique_ptr<ReportSink> make_html_view(TextOut out) {
  return std::make_unique<HtmlView>(std::move(out));
}

}  // namespace qd::report
