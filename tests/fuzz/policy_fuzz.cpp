// A verdict policy (JSON): parsed, asked for thresholds and verdicts, and written back; what
// to_json writes (reports embed it) must parse again to the same policy.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz_util.h"
#include "qnn_debug/compare/policy.h"

namespace {

using qd::compare::Policy;

void judge(const Policy& policy) {
  for (const char* name : {"conv/Relu:0", "aten_softmax_default@0", ""}) {
    qd::compare::OutputFacts facts;
    facts.op_type = "Softmax";
    facts.ref_name = name;
    facts.device_dtype = "SFIXED_POINT_16";
    facts.sqnr_db = 12.5;
    (void)policy.judge_output(facts);
  }
  qd::compare::RunFacts run;
  run.reference_tensors = 10;
  run.matched_reference_tensors = 7;
  run.compared_pairs = 7;
  run.top1_agreement = 0.5;
  (void)policy.judge_run(run);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto policy = qd::fuzz::checked(Policy::from_json(qd::fuzz::as_text(data, size), "fuzz.json"));
  if (!policy.is_ok()) return 0;
  judge(*policy);
  const std::string written = policy->to_json();
  auto again = Policy::from_json(written, "written.json");
  if (!again.is_ok() || again->to_json() != written) {
    std::fprintf(stderr, "policy does not survive to_json: %s\n", written.c_str());
    std::abort();
  }
  return 0;
}
