// The views of a report. Each is a ReportSink that writes as the runs arrive, so a diff of
// thousands of runs never holds more than one run: the JSON file, the CSV, the self-contained
// HTML page (the file views, listed in views()), and the terminal summary.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/report/json.h"
#include "qnn_debug/report/model.h"

namespace qd::report {

// A view written to a file: `qnn-debug diff --<name> FILE`, `report --<name> FILE`, the Python
// Report.write_<name>(path). Adding a view is one entry in views.cpp and its sink.
struct FileView {
  const char* name;  // "json", "html", "csv"
  const char* help;  // the CLI option's help
  std::unique_ptr<ReportSink> (*make)(TextOut out);
};
std::span<const FileView> file_views();
const FileView* find_view(std::string_view name);

// A whole report through one view, as text.
std::string render(const Report& report, const FileView& view);

// The terminal summary: stores, counts, the first divergence, the groups that introduce most
// error, the classifier's agreement, the worst `worst_n` groups by SQNR, warnings and the verdict.
// It keeps the counts and the worst groups, not the runs. ANSI colour only when `color` (callers
// pass isatty).
class SummaryView : public ReportSink {
 public:
  SummaryView(size_t worst_n, bool color);
  ~SummaryView() override;
  Status begin(const ReportHeader& header) override;
  Status add_run(const RunReport& run) override;
  Status finish(const ReportEnding& ending) override;
  const std::string& text() const;  // complete after finish

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string render_summary(const Report& report, size_t worst_n, bool color);

// Several sinks fed as one, in order.
class SinkList : public ReportSink {
 public:
  void add(ReportSink& sink) { sinks_.push_back(&sink); }
  Status begin(const ReportHeader& header) override;
  Status add_run(const RunReport& run) override;
  Status finish(const ReportEnding& ending) override;

 private:
  std::vector<ReportSink*> sinks_;
};

}  // namespace qd::report
