// A saved report (JSON, docs/report-schema.json): parsed and validated as `qnn-debug report` and
// `qnn-debug check` load it; a report that validates is rendered in every view, then re-judged
// with its own policy and written again, as `check` does. What check writes must load again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz_util.h"
#include "qnn_debug/compare/policy.h"
#include "qnn_debug/report/json.h"
#include "qnn_debug/report/judge.h"
#include "qnn_debug/report/views.h"

namespace {

using namespace qd::report;

void render_all(const Report& doc) {
  (void)render_summary(doc, 5, /*color=*/true);
  for (const FileView& view : file_views()) (void)render(doc, view);
}

// `qnn-debug check` without --policy: the report's own policy, then the re-judged report text.
std::string check(Report& doc) {
  judge(doc, qd::compare::Policy(doc.header.policy));
  return report_text(doc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = qd::fuzz::checked(parse_report(qd::fuzz::as_text(data, size), "fuzz.json"));
  if (!doc.is_ok()) return 0;
  render_all(*doc);
  const std::string written = check(*doc);
  auto again = parse_report(written, "checked.json");
  if (!again.is_ok()) {
    std::fprintf(stderr, "the re-judged report does not load: %s\n",
                 again.status().message().c_str());
    std::abort();
  }
  render_all(*again);
  return 0;
}
