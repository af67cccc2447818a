#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "html_assets.h"
#include "json_codec.h"
#include "json_writer.h"
#include "qnn_debug/compare/flags.h"
#include "qnn_debug/compare/hint.h"
#include "qnn_debug/compare/metric_fields.h"
#include "qnn_debug/compare/parts.h"
#include "qnn_debug/jsonio/jsonio.h"
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
  return embeddable(jsonio::dump(out, {-1, true}));
}

// The closed vocabularies the page names (compare/flags.h, compare/hint.h): its legend and
// badges come from here, never from lists of its own.
std::string vocabulary_declarations() {
  nlohmann::json flags = nlohmann::json::object(), hints = nlohmann::json::object();
  for (const compare::FlagInfo& flag : compare::kFlags) flags[flag.name] = flag.meaning;
  for (size_t k = 0; k < compare::kHintKindNames.size(); ++k) {
    hints[compare::kHintKindNames[k]] = compare::kHintKindBadges[k];
  }
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& part : compare::kParts) parts.push_back({part.name, part.meaning});
  const nlohmann::json vocabulary = {{"flags", flags}, {"hint_badges", hints}, {"parts", parts}};
  return embeddable(jsonio::dump(vocabulary, {-1, true}));
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

// ---- long reports: the runs whose groups the page keeps ------------------------------------
//
// A long decode (thousands of runs of a device) cannot keep even a light row per group of every
// run. Per device, the page keeps the groups of its first kFirstPageRuns runs (the prefill and
// the first steps), of its first kFailingPageRuns failing runs after those (where the decode goes
// wrong), and of up to kLowestPageRuns runs whose lowest SQNR is kLowerByDb below that of every
// run kept before (the worst steps, as far as a report written run by run can know them), and of
// its first kDepartingPageRuns runs where a group departs from its earlier runs. Every
// other run keeps its own fields, cut to 5 significant digits, with its first three introducers
// and no groups (`"groups_in_page": false`). The heatmap of runs draws every run from the page's
// aggregate and the step lines; a click on a run left out says the JSON report has its groups.
constexpr uint64_t kFirstPageRuns = 32;
constexpr uint64_t kFailingPageRuns = 32;
constexpr uint64_t kLowestPageRuns = 16;
constexpr uint64_t kDepartingPageRuns = 16;  // runs where some group departs (departure.h)
constexpr double kLowerByDb = 1.0;
constexpr size_t kIntroducersOfRunsOut = 3;  // what the terminal names too

// The lowest SQNR of a run's groups (+inf when none was compared).
double lowest_sqnr(const RunReport& run) {
  double lowest = std::numeric_limits<double>::infinity();
  for (const GroupReport& group : run.groups) {
    if (group.sqnr_db && *group.sqnr_db < lowest) lowest = *group.sqnr_db;  // false for NaN
  }
  return lowest;
}

class DetailBudget {
 public:
  // A run's groups: each in the detail the writer chose while the budget of its verdict lasts,
  // a row after; none at all for a run beyond the page's runs.
  void plan(const RunReport& run, codec::RunDetail& detail) {
    if (!run_in_page(run)) {
      detail.groups = false;
      detail.cells = true;                         // every group's light row, as a cell of numbers
      detail.introducers = kIntroducersOfRunsOut;  // all of them, a line each for a graph
      return;
    }
    detail.group_detail.resize(run.groups.size(), codec::GroupDetail::kFull);
    for (size_t i = 0; i < run.groups.size(); ++i) {
      const GroupReport& group = run.groups[i];
      // The page's script reads groups as objects: the file's packed rows are its figures.
      if (detail.group_detail[i] == codec::GroupDetail::kPacked) {
        detail.group_detail[i] = codec::GroupDetail::kFigures;
      }
      const size_t limit =
          group.verdict == compare::Verdict::kPass ? kPassDetailBytes : kFindingDetailBytes;
      if (spent_ < limit) {
        spent_ += jsonio::dump(codec::to_json(group, detail.group_detail[i])).size();
      } else {
        detail.group_detail[i] = codec::GroupDetail::kRow;
      }
    }
  }

 private:
  bool run_in_page(const RunReport& run) {
    PageRuns& kept = devices_[run.device];
    const double lowest = lowest_sqnr(run);
    const bool keep = [&] {
      if (kept.first < kFirstPageRuns) return ++kept.first, true;
      if (run.verdict == compare::Verdict::kFail && kept.failing < kFailingPageRuns) {
        return ++kept.failing, true;
      }
      if (lowest <= kept.lowest_db - kLowerByDb && kept.lowest < kLowestPageRuns) {
        return ++kept.lowest, true;
      }
      const bool departs =
          std::any_of(run.groups.begin(), run.groups.end(),
                      [](const GroupReport& g) { return g.departure.has_value(); });
      if (departs && kept.departing < kDepartingPageRuns) return ++kept.departing, true;
      return false;
    }();
    if (keep && lowest < kept.lowest_db) kept.lowest_db = lowest;
    return keep;
  }

  struct PageRuns {
    uint64_t first = 0;      // runs kept from the start
    uint64_t failing = 0;    // failing runs kept after those
    uint64_t lowest = 0;     // runs kept for going lower than the runs kept before
    uint64_t departing = 0;  // runs kept for a group's departure
    double lowest_db = std::numeric_limits<double>::infinity();  // over the runs kept
  };
  size_t spent_ = 0;
  std::map<uint32_t, PageRuns> devices_;
};

// ---- the aggregate as the page reads it -----------------------------------------------------
//
// The JSON report's aggregate lists every group's SQNR in every run as an object each: 37 MB at
// 5,000 runs x 200 groups even cut to 5 digits. The page's (element qd-aggregate) lists each
// entry's fields but per_run, and its SQNR in every run as one array in the order of "columns"
// ([device index, device run] pairs, the step lines' order), cut to 4 significant digits: 6.2 MB;
// "inf" for exact, null where the group was not compared in that run (docs/reports.md, HTML).
std::string sqnr_cell(double db) {
  if (std::isnan(db)) return "null";
  if (std::isinf(db)) return db > 0 ? "\"inf\"" : "\"-inf\"";
  return fmt::format("{:.4g}", db);
}

class PageAggregate {
 public:
  explicit PageAggregate(const ReportEnding& ending) {
    for (const StepLine& step : ending.steps) column(step.device, step.device_run);
    for (const AggregateEntry& entry : ending.aggregate) {
      for (const AggregateEntry::RunSqnr& cell : entry.per_run)
        column(cell.device, cell.device_run);
    }
  }

  // {"columns": [[device, run], ...], "entries": [...]}, an entry at a time.
  Status write(const std::vector<AggregateEntry>& aggregate, const TextOut& out) const {
    QD_RETURN_IF_ERROR(out("{\"columns\":" + jsonio::dump(columns_) + ",\"entries\":["));
    std::vector<std::string> cells(columns_.size());
    for (size_t i = 0; i < aggregate.size(); ++i) {
      const AggregateEntry& entry = aggregate[i];
      std::fill(cells.begin(), cells.end(), "null");
      std::string verdicts(columns_.size(), '-');
      for (const AggregateEntry::RunSqnr& cell : entry.per_run) {
        const size_t column = index_.at({cell.device, cell.device_run});
        cells[column] = sqnr_cell(cell.sqnr_db);
        verdicts[column] = compare::verdict_name(cell.verdict)[0];
      }
      std::string text = i == 0 ? "" : ",";
      text += jsonio::dump(codec::short_numbers(codec::to_json(entry, /*with_runs=*/false)),
                           {-1, true});
      text.pop_back();  // the object's '}'
      text += ",\"sqnr\":[" + fmt::format("{}", fmt::join(cells, ",")) + "],\"verdicts\":\"" +
              verdicts + "\"}";
      QD_RETURN_IF_ERROR(out(embeddable(text)));
    }
    return out("]}");
  }

 private:
  void column(uint32_t device, uint32_t run) {
    if (index_.emplace(std::pair{device, run}, columns_.size()).second) {
      columns_.push_back({device, run});
    }
  }
  std::map<std::pair<uint32_t, uint32_t>, size_t> index_;
  nlohmann::json columns_ = nlohmann::json::array();
};

// The template cut at its data markers: each marker is replaced once, in template order, and
// inserted text is never searched again, so a store string that looks like a marker stays inert.
struct Page {
  std::string before_data;       // up to the report
  std::string before_aggregate;  // from the report to the page's aggregate
  std::string after_aggregate;
};

Page page() {
  const std::string_view templ = assets::kTemplate;
  const std::string metrics = metric_declarations();
  const std::string vocabulary = vocabulary_declarations();
  const std::pair<std::string_view, const std::string_view> parts[] = {
      {"/*QD_STYLE*/", assets::kStyle},  {"/*QD_METRICS*/", metrics},
      {"/*QD_VOCABULARY*/", vocabulary}, {"/*QD_DATA*/", {}},
      {"/*QD_AGGREGATE*/", {}},          {"/*QD_SCRIPT*/", assets::script()}};
  Page out;
  std::string* target = &out.before_data;
  size_t from = 0;
  for (const auto& [marker, value] : parts) {
    const size_t at = templ.find(marker, from);
    if (at == std::string_view::npos) continue;
    target->append(templ.substr(from, at - from));
    target->append(value);
    if (marker == "/*QD_DATA*/") target = &out.before_aggregate;
    if (marker == "/*QD_AGGREGATE*/") target = &out.after_aggregate;
    from = at + marker.size();
  }
  target->append(templ.substr(from));
  return out;
}

// One HTML file with its styles, script and data inlined: no network access. Store strings are
// data, never markup: the page builds its DOM with textContent only. The report streams into
// the data element as compact, ASCII-only JSON; its aggregate goes into an element of its own.
class HtmlView : public ReportSink {
 public:
  explicit HtmlView(TextOut out)
      : out_(std::move(out)),
        json_(
            [this](std::string_view text) { return out_(embeddable(text)); },
            // The report file's rule for a long decode too: a page re-rendered from the
            // file (`qnn-debug report`) is then the page diff wrote.
            JsonStyle{/*indented=*/false, /*ascii=*/true, /*shrink_long=*/true},
            [this](const RunReport& run, codec::RunDetail& detail) { budget_.plan(run, detail); }) {
  }
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
    ReportEnding shown = ending;
    shown.aggregate.clear();  // written below in the page's form
    QD_RETURN_IF_ERROR(json_.finish(shown));
    QD_RETURN_IF_ERROR(out_(page_.before_aggregate));
    // The page shows the aggregate only across runs: one run's is its groups again.
    const std::vector<AggregateEntry> none;
    QD_RETURN_IF_ERROR(PageAggregate(ending).write(runs_ > 1 ? ending.aggregate : none, out_));
    return out_(page_.after_aggregate);
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
