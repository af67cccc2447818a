#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "qnn_debug/report/inspect.h"
#include "qnn_debug/report/render.h"

namespace qd::report {
namespace {

using nlohmann::json;

const char* colour_of(const std::string& verdict) {
  return verdict == "fail" ? "\033[31m" : verdict == "warn" ? "\033[33m" : "\033[32m";
}

std::string paint(bool color, const std::string& verdict, const std::string& text) {
  return color ? colour_of(verdict) + text + "\033[0m" : text;
}

std::string db_text(const json& value) {
  if (value.is_null()) return "n/a";
  const double db = real(value);
  return std::isfinite(db) ? fmt::format("{:.2f}", db) : value.get<std::string>();
}

// The reference name of a group's first output: what engineers recognise.
std::string group_name(const json& group) {
  return group["pairs"].empty() ? "" : group["pairs"][0]["reference"]["name"].get<std::string>();
}

// "SQNR 12.34 dB", or why the group has none: "not compared: shapes differ ...".
std::string sqnr_text(const json& group) {
  if (group["sqnr_db"].is_null()) {
    for (const json& pair : group["pairs"]) {
      if (pair["error"].is_string()) {
        return "not compared: " + printable(pair["error"].get<std::string>());
      }
    }
  }
  return "SQNR " + db_text(group["sqnr_db"]) + " dB";
}

std::string flags_text(const json& flags) {
  std::vector<std::string> names;
  for (const json& flag : flags) names.push_back(printable(flag.get<std::string>()));
  return names.empty() ? "" : fmt::format(" [{}]", fmt::join(names, ", "));
}

std::string first_divergence_line(const Document& doc) {
  const json& first = doc["summary"]["first_divergence"];
  if (first.is_null()) return "first divergence: none";
  for (const json& run : doc["runs"]) {
    if (run["device_run"] != first["device_run"]) continue;
    for (const json& group : run["groups"]) {
      if (group["id"] != first["group"]) continue;
      return fmt::format("first divergence: group {} ({}) in device run {}: {}{}",
                         printable(group["id"].get<std::string>()), printable(group_name(group)),
                         run["device_run"].get<int64_t>(), sqnr_text(group),
                         flags_text(group["flags"]));
    }
  }
  return "first divergence: group " + printable(first.value("group", ""));
}

std::string worst_groups(const Document& doc, size_t worst_n, bool color) {
  std::vector<std::pair<const json*, const json*>> ranked;  // run, group
  for (const json& run : doc["runs"]) {
    for (const json& group : run["groups"]) {
      if (!group["sqnr_db"].is_null()) ranked.emplace_back(&run, &group);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return real((*a.second)["sqnr_db"]) < real((*b.second)["sqnr_db"]);
  });
  const size_t shown = std::min(worst_n, ranked.size());
  if (shown == 0) return "";
  std::string out = fmt::format("worst {} groups:\n", shown);
  for (size_t i = 0; i < shown; ++i) {
    const json& run = *ranked[i].first;
    const json& group = *ranked[i].second;
    const std::string verdict = group["verdict"].get<std::string>();
    const json& introduced = group["introduced_db"];
    out += fmt::format("  {:>9} dB  {}  run {:<3} {:<12} {}{}\n", db_text(group["sqnr_db"]),
                       paint(color, verdict, fmt::format("{:<5}", verdict)),
                       run["device_run"].get<int64_t>(), printable(group["id"].get<std::string>()),
                       printable(group_name(group)),
                       introduced.is_null() || !std::isfinite(real(introduced))
                           ? ""
                           : fmt::format("  (introduced {:+.2f} dB)", real(introduced)));
  }
  return out;
}

// The groups that add the most error, from the run of the first divergence (else the first run).
std::string introducers_line(const Document& doc) {
  const json& first = doc["summary"]["first_divergence"];
  for (const json& run : doc["runs"]) {
    if (!first.is_null() && run["device_run"] != first["device_run"]) continue;
    std::vector<std::string> items;
    for (const json& item : run["introducers"]) {
      if (items.size() == 3) break;
      std::string name;
      for (const json& group : run["groups"]) {
        if (group["id"] == item["id"]) name = " " + printable(group_name(group));
      }
      items.push_back(fmt::format("{}{} ({:+.2f} dB)", printable(item["id"].get<std::string>()),
                                  name, real(item["introduced_db"])));
    }
    return items.empty() ? ""
                         : fmt::format("most error introduced by: {}\n", fmt::join(items, ", "));
  }
  return "";
}

// The final output read as a classifier: its worst top-1 agreement over the runs.
std::string classifier_line(const Document& doc) {
  const json* worst = nullptr;
  uint64_t worst_run = 0;
  for (const json& run : doc["runs"]) {
    const auto c = run.find("classification");
    if (c == run.end() || !c->is_object() || (*c)["top1_agreement"].is_null()) continue;
    if (worst == nullptr || real((*c)["top1_agreement"]) < real((*worst)["top1_agreement"])) {
      worst = &*c;
      worst_run = run["device_run"].get<uint64_t>();
    }
  }
  if (worst == nullptr) return "";
  const json& c = *worst;
  std::string line =
      fmt::format("classifier {} ({} rows x {} classes): top-1 agreement {:.1f}%",
                  printable(c["tensor"].get<std::string>()), c["rows"].get<uint64_t>(),
                  c["classes"].get<uint64_t>(), 100 * real(c["top1_agreement"]));
  if (!c["top5_agreement"].is_null()) {
    line += fmt::format(", top-5 {:.1f}%", 100 * real(c["top5_agreement"]));
  }
  return line + (doc["runs"].size() > 1 ? fmt::format(" (worst: device run {})", worst_run) : "") +
         "\n";
}

}  // namespace

std::string render_summary(const Document& doc, size_t worst_n, bool color) {
  const json& s = doc["summary"];
  std::string out = fmt::format("reference {}\ndevice    {}\n",
                                printable(doc["reference"]["path"].get<std::string>()),
                                printable(doc["device"]["path"].get<std::string>()));
  out += fmt::format(
      "compared  {} runs, {} groups, {} pairs: {} pass, {} warn, {} fail; "
      "unmatched {} reference, {} device\n",
      s.value("runs_compared", 0), s.value("groups", 0), s.value("compared_pairs", 0),
      s.value("pass", 0), s.value("warn", 0), s.value("fail", 0), s.value("unmatched_reference", 0),
      s.value("unmatched_device", 0));
  const std::string first = first_divergence_line(doc);
  out += (s["first_divergence"].is_null() ? first : paint(color, "fail", first)) + "\n";
  out += introducers_line(doc);
  out += classifier_line(doc);
  out += worst_groups(doc, worst_n, color);
  for (const json& w : doc["warnings"]) out += "warning: " + printable(w.get<std::string>()) + "\n";
  for (const json& reason : s.value("verdict_reasons", json::array())) {
    out += paint(color, "fail", "fails because " + printable(reason.get<std::string>())) + "\n";
  }
  const std::string verdict = s.value("verdict", "fail");
  out += paint(color, verdict, "verdict: " + verdict) + "\n";
  return out;
}

}  // namespace qd::report
