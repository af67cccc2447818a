// The file views' sinks, for the registry in views.cpp.
#pragma once

#include <memory>

#include "qnn_debug/report/json.h"
#include "qnn_debug/report/model.h"

namespace qd::report {

std::unique_ptr<ReportSink> make_csv_view(TextOut out);
std::unique_ptr<ReportSink> make_html_view(TextOut out);
std::unique_ptr<ReportSink> make_overrides_view(TextOut out);
std::unique_ptr<ReportSink> make_model_explorer_view(TextOut out);
std::unique_ptr<ReportSink> make_model_explorer_graph_view(TextOut out);

}  // namespace qd::report
