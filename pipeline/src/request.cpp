#include "qnn_debug/pipeline/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>

#include "qnn_debug/base/text.h"
#include "qnn_debug/importers/input_format.h"

namespace qd::pipeline {
namespace {

// A setting's text, parsed into the request.
using Setter = Status (*)(DiffRequest& request, const std::vector<std::string>& values,
                          const std::string& flag);

struct SettingRule {
  DiffSetting setting;
  Setter set;
};

// A count: "--jobs: must be 0 or more, not -2", as the CLI says of its other counts.
Result<uint64_t> whole_number(const std::string& text, const std::string& flag,
                              uint64_t max = std::numeric_limits<uint64_t>::max()) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.starts_with('-')) {
    return error(ErrorCode::kInvalidArgument, flag + ": must be 0 or more, not " + text);
  }
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && value > max)) {
    return error(ErrorCode::kInvalidArgument,
                 flag + ": must be at most " + std::to_string(max) + ", not " + text);
  }
  if (ec != std::errc() || end != text.data() + text.size()) {
    return error(ErrorCode::kInvalidArgument,
                 flag + ": must be a whole number, not " + quote_name(text));
  }
  return value;
}

Result<double> real_number(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    return error(ErrorCode::kInvalidArgument, flag + ": must be a number, not " + quote_name(text));
  }
  return value;
}

const std::vector<SettingRule>& setting_rules() {
  const DiffRequest defaults;
  static const std::vector<SettingRule> rules = {
      {{"labels", "--label",
        "A device's name in the report, once per device in order (default: its store's "
        "backend, SoC and producer)",
        "", true, false, "TEXT"},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string&) {
         r.labels = v;
         return Status::ok();
       }},
      {{"policy", "--policy", "Policy JSON: verdict thresholds (docs/metrics.md)", "", false, true},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string&) {
         r.policy_path = v.back();
         return Status::ok();
       }},
      {{"mapping", "--map",
        "JSON {\"reference name\": \"device name\"} for tensors that neither handles nor names "
        "align",
        "", false, true, "PATH"},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string&) {
         r.mapping_path = v.back();
         return Status::ok();
       }},
      {{"jobs", "--jobs,-j", "Worker threads (0: one per core)", std::to_string(defaults.jobs),
        false, false, "UINT"},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string& flag) {
         QD_ASSIGN_OR_RETURN(const uint64_t jobs,
                             whole_number(v.back(), flag, std::numeric_limits<unsigned>::max()));
         r.jobs = static_cast<unsigned>(jobs);
         return Status::ok();
       }},
      {{"ref_run", "--ref-run", "Compare every device run against this reference run", "", false,
        false, "UINT"},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string& flag) {
         QD_ASSIGN_OR_RETURN(const uint64_t run, whole_number(v.back(), flag, UINT32_MAX));
         r.ref_run = static_cast<uint32_t>(run);
         return Status::ok();
       }},
      {{"logits", "--logits",
        "The reference tensor holding the scores (a decoder's logits) when they are not each "
        "run's final output: the classifier figures and the token view measure it",
        "", false, false, "NAME"},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string&) {
         r.logits = v.back();
         return Status::ok();
       }},
      {{"atol", "--atol", "allclose absolute tolerance", fmt::format("{}", defaults.atol), false,
        false, "FLOAT"},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string& flag) {
         QD_ASSIGN_OR_RETURN(r.atol, real_number(v.back(), flag));
         return Status::ok();
       }},
      {{"rtol", "--rtol", "allclose relative tolerance", fmt::format("{}", defaults.rtol), false,
        false, "FLOAT"},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string& flag) {
         QD_ASSIGN_OR_RETURN(r.rtol, real_number(v.back(), flag));
         return Status::ok();
       }},
      {{"chunk_kib", "--chunk-kib", "Streaming chunk per side and worker, in KiB of float values",
        std::to_string(defaults.chunk_elements >> 8), false, false, "UINT"},
       [](DiffRequest& r, const std::vector<std::string>& v, const std::string& flag) {
         QD_ASSIGN_OR_RETURN(const uint64_t kib, whole_number(v.back(), flag, uint64_t{1} << 40));
         r.chunk_elements = std::max<uint64_t>(1, kib) << 8;  // 4-byte floats
         return Status::ok();
       }},
  };
  return rules;
}

}  // namespace

const std::vector<DiffSetting>& diff_settings() {
  static const std::vector<DiffSetting> settings = [] {
    std::vector<DiffSetting> out;
    for (const SettingRule& rule : setting_rules()) out.push_back(rule.setting);
    return out;
  }();
  return settings;
}

Result<DiffRequest> make_diff_request(const DiffInputs& inputs, const DiffSettingValues& settings,
                                      std::string tool_version) {
  DiffRequest request;
  request.reference = importers::with_shared_options(inputs.reference, inputs.shared);
  for (const std::string& path : inputs.device_paths) {
    InputSpec device = inputs.device;
    device.path = path;
    request.devices.push_back(importers::with_shared_options(std::move(device), inputs.shared));
  }
  for (auto [path, spec] : {std::pair{&inputs.simulation, &request.simulation},
                            std::pair{&inputs.isolated, &request.isolated}}) {
    if (path->empty()) continue;
    InputSpec third;
    third.path = *path;
    *spec = importers::with_shared_options(std::move(third), inputs.shared);
  }
  for (const auto& setting : settings) {
    const std::string& key = setting.first;  // not a binding: a lambda below captures it
    const std::vector<std::string>& values = setting.second;
    const std::vector<SettingRule>& rules = setting_rules();
    const auto rule = std::find_if(rules.begin(), rules.end(),
                                   [&](const SettingRule& r) { return r.setting.key == key; });
    if (rule == rules.end()) {
      return error(ErrorCode::kInvalidArgument, "unknown diff setting " + quote_name(key));
    }
    if (values.empty()) continue;
    QD_RETURN_IF_ERROR(rule->set(request, values, rule->setting.flag()));
  }
  request.tool_version = std::move(tool_version);
  return request;
}

}  // namespace qd::pipeline
