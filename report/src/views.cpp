#include "qnn_debug/report/views.h"

#include "json_writer.h"
#include "views_internal.h"

namespace qd::report {
namespace {

std::unique_ptr<ReportSink> make_json_view(TextOut out) {
  return std::make_unique<JsonWriter>(std::move(out), kReportFileStyle);
}

constexpr FileView kViews[] = {
    {"json", "Write the JSON report here (docs/report-schema.json)", make_json_view},
    {"html", "Write the self-contained HTML report here", make_html_view},
    {"csv", "Write one CSV row per compared pair here", make_csv_view},
    {"suggest-overrides",
     "Write encodings fitted to the reference for the tensors with a clipping or "
     "coarse_encoding hint here (AIMET JSON for the converters' --quantization_overrides)",
     make_overrides_view},
    {"model-explorer",
     "Write each op's SQNR as Model Explorer node data here, coloured by the policy's default "
     "thresholds (docs/reports.md, \"Model Explorer\")",
     make_model_explorer_view},
    {"model-explorer-graph", "Write the stored graph as a Model Explorer graph JSON here",
     make_model_explorer_graph_view},
};

}  // namespace

std::span<const FileView> file_views() { return kViews; }

const FileView* find_view(std::string_view name) {
  for (const FileView& view : kViews) {
    if (name == view.name) return &view;
  }
  return nullptr;
}

std::string render(const Report& report, const FileView& view) {
  std::string text;
  const auto sink = view.make([&](std::string_view part) {
    text += part;
    return Status::ok();
  });
  const Status done = replay(report, *sink);  // appending to a string cannot fail
  (void)done;
  return text;
}

Status SinkList::begin(const ReportHeader& header) {
  for (ReportSink* sink : sinks_) QD_RETURN_IF_ERROR(sink->begin(header));
  return Status::ok();
}

Status SinkList::add_run(const RunReport& run) {
  for (ReportSink* sink : sinks_) QD_RETURN_IF_ERROR(sink->add_run(run));
  return Status::ok();
}

Status SinkList::finish(const ReportEnding& ending) {
  for (ReportSink* sink : sinks_) QD_RETURN_IF_ERROR(sink->finish(ending));
  return Status::ok();
}

}  // namespace qd::report
