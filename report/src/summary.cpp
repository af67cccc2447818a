#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "qnn_debug/compare/kv_cache.h"
#include "qnn_debug/report/inspect.h"
#include "qnn_debug/report/views.h"

namespace qd::report {
namespace {

using compare::Verdict;

// Every list of the summary is bounded (a qnn-net-run tree of 100,000 empty results must not
// print 100,000 lines): the first few, then how many more and where they all are.
constexpr size_t kWhyLines = 20;      // lines of a why block
constexpr size_t kWhyDevices = 8;     // devices with a why block
constexpr size_t kListLines = 10;     // warnings; run rules that failed
constexpr size_t kDevicesShown = 16;  // devices in the header, the outcomes and the matrix
constexpr size_t kKvTracks = 8;       // KV-cache tensors
constexpr size_t kRanges = 8;         // position ranges of a KV-cache line
// A row where several devices add the most error, none more than another, is shown from this
// spread (the page's "where the devices disagree most" starts there too).
constexpr double kSeveralOutliersDb = 3;
constexpr const char* kWhereAll = "the JSON report (--json) lists them all";

// 99978 -> "99,978".
std::string count_text(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "  ... and 99,978 more warnings: the JSON report (--json) lists them all\n"
std::string more_line(const std::string& indent, uint64_t more, const char* what) {
  return more == 0
             ? ""
             : fmt::format("{}... and {} more {}: {}\n", indent, count_text(more), what, kWhereAll);
}

const char* terminal_colour_of(Verdict verdict) {
  return verdict == Verdict::kFail   ? "\033[31m"
         : verdict == Verdict::kWarn ? "\033[33m"
                                     : "\033[32m";
}

std::string paint(bool color, Verdict verdict, const std::string& text) {
  return color ? terminal_colour_of(verdict) + text + "\033[0m" : text;
}

std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.2f}", value);
}

std::string db_text(const std::optional<double>& value) {
  return value ? number_text(*value) : "n/a";
}

// "SQNR 12.34 dB", or why the group has none: "not compared: shapes differ ...".
std::string sqnr_text(const GroupReport& group) {
  if (!group.sqnr_db) {
    for (const PairReport& pair : group.pairs) {
      if (!pair.metrics) return "not compared: " + printable(pair.error);
    }
  }
  return "SQNR " + db_text(group.sqnr_db) + " dB";
}

std::string flags_text(const std::vector<compare::Flag>& flags) {
  return flags.empty() ? "" : fmt::format(" [{}]", fmt::join(compare::flag_names(flags), ", "));
}

// What an introducer adds, as its entry says it: the noise it adds itself (what ranks it), and
// the SQNR it lost; a report written before the added noise existed gives the loss alone.
// `with_loss` false: the noise alone (a part's loss against an exact input says little).
std::string added_text(const Introducer& item, bool with_loss = true) {
  if (!item.added_noise_db) return fmt::format("{:+.2f} dB", item.introduced_db);
  if (std::isinf(*item.added_noise_db)) return "NaN/Inf";
  if (!with_loss) return fmt::format("own noise {:.1f} dB", *item.added_noise_db);
  return fmt::format("own noise {:.1f} dB, {:+.2f} dB lost", *item.added_noise_db,
                     item.introduced_db);
}

// The groups that add the most error in `run`, named.
std::string introducers_line(const RunReport& run) {
  std::vector<std::string> items;
  for (const Introducer& item : run.introducers) {
    if (items.size() == 3) break;
    const GroupReport* group = run.group(item.id);
    const std::string name = group != nullptr ? " " + printable(group->name()) : "";
    items.push_back(fmt::format("{}{} ({})", printable(item.id), name, added_text(item)));
  }
  if (items.empty()) return "";
  // A report written before the added noise existed ranks by the loss alone, as it said then.
  const bool by_loss =
      std::none_of(run.introducers.begin(), run.introducers.end(),
                   [](const Introducer& i) { return i.added_noise_db.has_value(); });
  return fmt::format("most error {}: {}\n", by_loss ? "introduced by" : "added by",
                     fmt::join(items, ", "));
}

// The group's most explaining hint in words; an inherited error in a few, since a faulty op
// usually leaves a long tail of them.
std::string cause_text(const GroupReport& group) {
  if (group.hints.empty()) {
    for (const PairReport& pair : group.pairs) {
      if (!pair.metrics) return "not compared: " + printable(pair.error);
    }
    return "no cause found";
  }
  const compare::Hint& hint = group.hints.front();
  const std::string_view kind = compare::hint_kind_name(hint.kind());
  if (const auto* inherited = std::get_if<compare::Inherited>(&hint.evidence)) {
    return fmt::format("{} from group {} ({})", kind, printable(inherited->upstream_group),
                       std::isnan(inherited->introduced_db)
                           ? "NaN or Inf in its input"
                           : fmt::format("this op added {:+.2f} dB", inherited->introduced_db));
  }
  return fmt::format("{}: {}", kind, printable(hint.sentence));
}

// "; channel 5 of 64 (axis 1) at -3.21 dB, the median channel 38.20 dB" when one channel of the
// group's worst output stands out (docs/metrics.md, "Per-channel figures").
std::string channel_text(const GroupReport& group) {
  const PairReport* worst = nullptr;
  for (const PairReport& pair : group.pairs) {
    if (pair.metrics && (!worst || pair.metrics->sqnr_db < worst->metrics->sqnr_db)) worst = &pair;
  }
  if (worst == nullptr) return "";
  const compare::Metrics& m = *worst->metrics;
  const std::optional<uint64_t> channel = compare::standout_channel(m);
  if (!channel) return "";
  return fmt::format("; channel {} of {}{} at {:.2f} dB, the median channel {:.2f} dB", *channel,
                     m.channel_summary->count,
                     m.channel_axis ? fmt::format(" (axis {})", *m.channel_axis) : "",
                     m.channel_summary->worst_sqnr_db, m.channel_summary->median_sqnr_db);
}

// One line per failing or warning group of `run`, in op order, with its most explaining hint in
// words (docs/metrics.md, "Hints"); at most `shown` lines. The groups with a cause of their own
// come first when not all fit: an op that only warns is not crowded out by the tail of ops that
// inherit a failure.
std::string why_lines(const RunReport& run, size_t shown, const std::string& of_device) {
  // A report written before hints existed has none anywhere: nothing to say, rather than "no
  // cause found" for every group.
  const bool explained = std::any_of(run.groups.begin(), run.groups.end(),
                                     [](const GroupReport& g) { return !g.hints.empty(); });
  if (!explained) return "";
  const auto inherits = [](const GroupReport& g) {
    return !g.hints.empty() && g.hints.front().kind() == compare::HintKind::kInherited;
  };
  std::vector<const GroupReport*> found;
  for (const GroupReport& group : run.groups) {
    if (group.verdict != Verdict::kPass) found.push_back(&group);
  }
  if (found.empty()) return "";
  std::vector<const GroupReport*> picked;
  for (const bool inherited : {false, true}) {
    for (const GroupReport* group : found) {
      if (picked.size() < shown && inherits(*group) == inherited) picked.push_back(group);
    }
  }
  std::stable_sort(picked.begin(), picked.end(),
                   [](const GroupReport* a, const GroupReport* b) { return a->order < b->order; });
  std::string out = fmt::format("why (device run {}{}):\n", run.device_run, of_device);
  for (const GroupReport* group : picked) {
    out += fmt::format("  {:<12} {}{}: {}{}\n", printable(group->id), printable(group->name()),
                       group->verdict == Verdict::kWarn ? " (warn)" : "", cause_text(*group),
                       channel_text(*group));
  }
  if (found.size() > picked.size()) {
    out += fmt::format(
        "  ... and {} more failing or warning groups (the JSON and HTML reports list them)\n",
        count_text(found.size() - picked.size()));
  }
  return out;
}

// " | allows 26.2 dB, own error 13.4x its rounding noise (isolated)": what its encoding allows a
// group and what the op adds beyond it (compare/excess.h), when that is more than the rounding.
std::string excess_text(const GroupReport& group) {
  if (!group.excess || group.excess->excess_noise_ratio < 1) return "";
  return fmt::format(" | allows {:.1f} dB, own error {:.1f}x its rounding noise ({})",
                     group.excess->allowed_sqnr_db, group.excess->excess_noise_ratio,
                     compare::excess_source_name(group.excess->source));
}

// " | quantization 31.20, kernel 4.10 dB: kernel (by 27.10 dB)": a group's error parts.
std::string parts_text(const GroupReport& group) {
  if (!group.parts) return "";
  const ErrorParts& parts = *group.parts;
  std::vector<std::string> figures;
  for (const auto& term : compare::kParts) {
    const std::optional<PartFigures>& part = parts.*kGroupParts[part_index(term.value)];
    if (part) figures.push_back(fmt::format("{} {}", term.name, db_text(part->sqnr_db)));
  }
  if (figures.empty()) return "";
  std::string out = fmt::format(" | {} dB", fmt::join(figures, ", "));
  if (parts.attribution && parts.attribution->kind != compare::AttributionKind::kNone) {
    out += fmt::format(": {}{} (by {:.2f} dB)", compare::attribution_name(parts.attribution->kind),
                       parts.attribution->inherited ? ", inherited" : "",
                       parts.attribution->margin_db);
  }
  return out;
}

// Where each error part of `run` starts and which groups add most within it.
std::string part_lines(const RunReport& run) {
  std::string out;
  for (const auto& term : compare::kParts) {
    const std::optional<PartRun>* part = &(run.*kRunParts[part_index(term.value)]);
    const std::string_view name = term.name, what = term.meaning;
    if (!*part) continue;
    const std::optional<std::string>& first = (*part)->first_divergence;
    const GroupReport* group = first ? run.group(*first) : nullptr;
    std::string line = fmt::format("{:<12} ({}): first divergence ", name, what);
    line += group != nullptr ? fmt::format("{} {}", printable(group->id), printable(group->name()))
                             : std::string("none");
    std::vector<std::string> items;
    for (const Introducer& item : (*part)->introducers) {
      if (items.size() == 3) break;
      items.push_back(fmt::format("{} ({})", printable(item.id), added_text(item, false)));
    }
    if (!items.empty()) line += fmt::format("; most added by {}", fmt::join(items, ", "));
    out += line + "\n";
  }
  return out.empty() ? "" : fmt::format("error parts (device run {}):\n", run.device_run) + out;
}

// Where the device run's time went (profile events joined to groups, join_profile): the three
// groups with the largest share, so a slow op is seen beside a wrong one.
std::string time_line(const RunReport& run) {
  std::vector<const GroupReport*> timed;
  for (const GroupReport& group : run.groups) {
    if (group.time) timed.push_back(&group);
  }
  if (timed.empty()) return "";
  std::stable_sort(timed.begin(), timed.end(), [](const GroupReport* a, const GroupReport* b) {
    return a->time->share > b->time->share;
  });
  std::vector<std::string> items;
  for (size_t i = 0; i < timed.size() && i < 3; ++i) {
    const GroupReport& g = *timed[i];
    items.push_back(fmt::format("{} {} ({:.1f}%, {:.0f} {})", printable(g.id), printable(g.name()),
                                100 * g.time->share, g.time->duration, printable(g.time->unit)));
  }
  return fmt::format("time (device run {}): most in {}\n", run.device_run, fmt::join(items, ", "));
}

// "first departure: group h12 (layers.1.attn.probs) departs in device run 20: 60.10 dB -> 11.50
// dB (baseline over 19 runs)": the earliest group whose SQNR leaves its earlier runs' level
// (compare/departure.h), beside the first divergence: a run can depart and still pass.
std::string departure_line(const FirstDeparture& first, const std::string& of) {
  const compare::Departure& d = first.departure;
  return fmt::format(
      "first departure: group {} ({}) departs in device run {}{}: {} dB -> {} (baseline over {} "
      "run{})\n",
      printable(first.group), printable(first.name), first.device_run, of,
      number_text(d.baseline_db),
      std::isnan(d.sqnr_db) ? std::string("NaN/Inf on the device") : number_text(d.sqnr_db) + " dB",
      d.baseline_runs, d.baseline_runs == 1 ? "" : "s");
}

// A reference margin below this reads as a near tie in the terminal: the two tokens' probabilities
// within 5% of each other on the reference (log 1.05), which rounding noise can flip.
constexpr double kNearTieNats = 0.05;

// The first step whose next token is not the reference's, and the op whose error led to it.
std::string diverging_token_line(const FirstDivergingToken& t, const std::string& of) {
  std::string out = fmt::format(
      "first diverging token: device run {}{}: token {} where the reference has {} (the "
      "reference's token: probability {} on the device, rank {}; KL {} nats)",
      t.device_run, of, t.device_token, t.reference_token,
      t.reference_token_probability ? fmt::format("{:.4g}", *t.reference_token_probability)
                                    : std::string("-"),
      t.reference_token_rank ? std::to_string(*t.reference_token_rank) : std::string("-"),
      t.kl_divergence ? fmt::format("{:.3g}", *t.kl_divergence) : std::string("-"));
  if (t.reference_margin) {
    out +=
        fmt::format("; the reference's margin over the device's token: {:.3g} nats{}",
                    *t.reference_margin, *t.reference_margin < kNearTieNats ? " (a near tie)" : "");
  }
  if (t.departure) {
    out += fmt::format("; first departing op before it: group {} ({}) in run {}",
                       printable(t.departure->group), printable(t.departure->name),
                       t.departure->device_run);
  }
  if (t.first_divergence)
    out += fmt::format("; its first divergence: {}", printable(*t.first_divergence));
  return out + "\n";
}

// Over several runs (decode steps, say), the groups in the order they start failing: where the
// error first shows and how it spreads from run to run.
std::string first_failures_line(const ReportEnding& ending) {
  if (ending.summary.runs_compared < 2) return "";
  std::vector<const AggregateEntry*> failing;
  for (const AggregateEntry& entry : ending.aggregate) {
    if (entry.first_failing_run) failing.push_back(&entry);
  }
  if (failing.empty()) return "";
  std::stable_sort(failing.begin(), failing.end(), [](const auto* a, const auto* b) {
    return *a->first_failing_run < *b->first_failing_run;
  });
  constexpr size_t kShown = 5;
  std::vector<std::string> items;
  for (size_t i = 0; i < failing.size() && i < kShown; ++i) {
    items.push_back(
        fmt::format("{} in run {}", printable(failing[i]->id), *failing[i]->first_failing_run));
  }
  const std::string more =
      failing.size() > kShown ? fmt::format(" (+{} more)", failing.size() - kShown) : "";
  return fmt::format("first fails: {}{}\n", fmt::join(items, ", "), more);
}

// NaN (no meaningful figure) ranks as the worst, so the order is total.
bool lower_sqnr(double a, double b) { return (std::isnan(a) && !std::isnan(b)) || a < b; }

std::string short_label(const std::string& label, size_t width) {
  const std::string text = printable(label);
  return text.size() <= width ? text : text.substr(0, width - 1) + "~";
}

// Each device of a multi-device diff: its verdict and first divergence.
std::string device_lines(const ReportEnding& ending, const std::vector<std::string>& labels) {
  std::string out = fmt::format("devices ({}, each against the reference):\n", labels.size());
  for (const DeviceOutcome& d : ending.devices) {
    if (d.device >= kDevicesShown) break;
    const FirstDivergence* first = d.first_divergence ? &*d.first_divergence : nullptr;
    out += fmt::format(
        "  {:<2} {:<24} {:<5} {} pass, {} warn, {} fail; first divergence {}\n", d.device,
        short_label(labels[d.device], 24), compare::verdict_name(d.verdict), d.pass, d.warn, d.fail,
        first != nullptr ? fmt::format("{} in run {} (SQNR {} dB)", printable(first->group),
                                       first->device_run, db_text(first->sqnr_db))
                         : std::string("none"));
  }
  return out + more_line("  ",
                         ending.devices.size() - std::min(ending.devices.size(), kDevicesShown),
                         "devices");
}

// The ops x devices matrix, only the rows where the devices disagree most: what tells which
// backend, SDK version or SoC breaks which op.
std::string disagreement_lines(const ReportEnding& ending, const std::vector<std::string>& labels,
                               size_t shown) {
  std::vector<const DeviceRow*> rows;
  for (const DeviceRow& row : ending.device_matrix) {
    if (row.outlier || row.disagreement_db >= kSeveralOutliersDb) rows.push_back(&row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const DeviceRow* a, const DeviceRow* b) {
    return a->disagreement_db > b->disagreement_db;
  });
  if (rows.size() > shown) rows.resize(shown);
  if (rows.empty()) return "where the devices disagree: nowhere (every op adds the same error)\n";
  const size_t columns = std::min(labels.size(), kDevicesShown);
  std::string out = fmt::format(
      "where the devices disagree most (SQNR dB per device{}; * adds the most error here):\n",
      columns < labels.size() ? fmt::format(", the first {} devices", columns) : "");
  out += fmt::format("  {:<12} {:<20}", "group", "name");
  for (size_t d = 0; d < columns; ++d) out += fmt::format(" {:>12}", short_label(labels[d], 12));
  out += fmt::format(" {:>9}  outlier\n", "spread");
  for (const DeviceRow* row : rows) {
    out += fmt::format("  {:<12} {:<20}", printable(row->id), short_label(row->name, 20));
    for (uint32_t d = 0; d < columns; ++d) {
      const auto cell = std::find_if(row->cells.begin(), row->cells.end(),
                                     [&](const DeviceCell& c) { return c.device == d; });
      const std::string text =
          cell == row->cells.end() ? "-" : db_text(cell->sqnr_db) + (row->outlier == d ? "*" : "");
      out += fmt::format(" {:>12}", text);
    }
    // No outlier: several devices add the most error here, none of them more than another.
    out += fmt::format(" {:>9}  {}\n", number_text(row->disagreement_db),
                       row->outlier ? printable(labels.at(*row->outlier)) : std::string("-"));
  }
  return out;
}

// "36-52, 60": position ranges.
std::string ranges_text(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  std::vector<std::string> parts;
  for (const auto& [first, last] : ranges) {
    if (parts.size() == kRanges) break;
    parts.push_back(first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last));
  }
  const std::string more =
      ranges.size() > parts.size()
          ? fmt::format(" (+{} more ranges)", count_text(ranges.size() - parts.size()))
          : "";
  return fmt::format("{}{}", fmt::join(parts, ", "), more);
}

// Each KV cache: where its positions first differ and which differ at the last step that has any.
// " (heads 3, 5-6)": the heads of a step's differing cells, "" for a cache without heads.
std::string heads_text(const KvCacheTrack::Step& step) {
  if (step.cells.empty()) return "";
  std::vector<bool> differs;
  for (const auto& r : step.cells) {
    if (r.head >= differs.size()) differs.resize(r.head + 1);
    differs[r.head] = true;
  }
  const uint64_t count = std::count(differs.begin(), differs.end(), true);
  return fmt::format(
      " (head{} {})", count == 1 ? "" : "s",
      ranges_text(compare::ranges_where(differs.size(), [&](uint64_t h) { return differs[h]; })));
}

std::string kv_cache_lines(const ReportEnding& ending) {
  std::string out;
  size_t shown = 0;
  for (const KvCacheTrack& track : ending.kv_cache) {
    if (shown++ == kKvTracks) break;
    out += fmt::format(
        "kv cache {} ({} positions on axis {}{}, {} runs): ", printable(track.tensor),
        track.positions, track.axis,
        track.heads > 0 ? fmt::format(", {} heads", track.heads) : std::string(), track.runs);
    if (track.steps.empty()) {
      out += "no position differs\n";
      continue;
    }
    const KvCacheTrack::Step& first = track.steps.front();
    const KvCacheTrack::Step& last = track.steps.back();
    out += fmt::format("positions {}{} first differ in run {}", ranges_text(first.differing),
                       heads_text(first), first.device_run);
    if (&last != &first) {
      out += fmt::format("; in run {}: {}{}", last.device_run, ranges_text(last.differing),
                         heads_text(last));
    }
    out += "\n";
  }
  return out + more_line("", ending.kv_cache.size() - std::min(ending.kv_cache.size(), kKvTracks),
                         "kv caches");
}

// A step's next token: "=" when the device picks the reference's, else "dev!=ref".
std::string token_text(const StepLine& step) {
  if (!step.tokens || !step.tokens->device_token || !step.tokens->reference_token) return "-";
  if (!step.token_differs()) return "=";
  return fmt::format("{}!={}", *step.tokens->device_token, *step.tokens->reference_token);
}

// The columns of a step's line; the token view's last two only when some step has it (a
// report written before it, or a classifier without rows, leaves them out).
std::string step_columns(const std::string& run, const std::string& verdict,
                         const std::string& first, const std::string& worst,
                         const std::string& output, const std::string& top1, const std::string& kl,
                         const std::string& token, bool token_view) {
  std::string line = fmt::format("  {:<5} {:<7} {:<14} {:<24} {:>9} {:>7}", run, verdict, first,
                                 worst, output, top1);
  if (token_view) line += fmt::format(" {:>9} {:>13}", kl, token);
  return line + "\n";
}

bool has_token_view(const StepLine& step) {
  return step.tokens && (step.tokens->kl_divergence || step.tokens->device_token);
}

std::string step_line_text(const StepLine& step, bool token_view) {
  const std::string kl = step.tokens && step.tokens->kl_divergence
                             ? fmt::format("{:.3g}", *step.tokens->kl_divergence)
                             : std::string("-");
  return step_columns(
      std::to_string(step.device_run), std::string(compare::verdict_name(step.verdict)),
      step.first_divergence ? printable(*step.first_divergence) : "-",
      step.worst ? fmt::format("{} {} dB", printable(*step.worst), db_text(step.worst_sqnr_db))
                 : std::string("-"),
      db_text(step.output_sqnr_db),
      step.tokens && step.tokens->top1 ? fmt::format("{:.1f}%", 100 * *step.tokens->top1)
                                       : std::string("-"),
      kl, token_text(step), token_view);
}

// Over several runs of one device (prefill, then a run per decode step): the first step whose
// output fails, and a line per step: all of them when few, else the first ones, those leading to
// the first failing run and to the first failing output, and the worst ones, in run order. With
// several devices, each device's runs under a heading of their own (`of_device`).
std::string step_lines(const ReportEnding& ending, size_t shown, uint32_t device,
                       const std::string& of_device) {
  std::vector<const StepLine*> steps;
  for (const StepLine& step : ending.steps) {
    if (step.device == device) steps.push_back(&step);
  }
  if (steps.size() < 2) return "";
  // The first run whose output fails, and the first failing run, which may come long before it
  // (or the output never fails).
  const StepLine* first = nullptr;
  std::optional<uint32_t> first_failing_run, first_token_run;
  for (const StepLine* step : steps) {
    if (!first && step->output && step->output_verdict == Verdict::kFail) first = step;
    if (!first_failing_run && step->verdict == Verdict::kFail) first_failing_run = step->device_run;
    if (!first_token_run && step->token_differs()) first_token_run = step->device_run;
  }
  std::vector<size_t> picked;
  std::vector<size_t> by_output;
  for (size_t i = 0; i < steps.size(); ++i) {
    by_output.push_back(i);
    const auto leads_to = [&](std::optional<uint32_t> run) {
      return run && steps[i]->device_run <= *run && steps[i]->device_run + 2 >= *run;
    };
    const bool near_first =
        leads_to(first != nullptr ? std::optional(first->device_run) : std::nullopt) ||
        leads_to(first_failing_run) || leads_to(first_token_run);
    if (picked.size() < 3 || near_first || steps.size() <= shown) picked.push_back(i);
  }
  std::stable_sort(by_output.begin(), by_output.end(), [&](size_t a, size_t b) {
    return lower_sqnr(steps[a]->output_sqnr_db.value_or(NAN),
                      steps[b]->output_sqnr_db.value_or(NAN));
  });
  for (size_t i = 0; i < by_output.size() && i < 5; ++i) picked.push_back(by_output[i]);
  std::sort(picked.begin(), picked.end());
  picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
  std::string out = fmt::format(
      "per run{} ({} runs; the first whose output fails: {}):\n", of_device, steps.size(),
      first != nullptr ? fmt::format("run {}, {} at SQNR {} dB", first->device_run,
                                     printable(*first->output), db_text(first->output_sqnr_db))
                       : std::string("none"));
  const bool token_view = std::any_of(steps.begin(), steps.end(),
                                      [](const StepLine* step) { return has_token_view(*step); });
  out += step_columns("run", "verdict", "first diverges", "worst", "output dB", "top-1", "KL nats",
                      "token", token_view);
  for (size_t k = 0; k < picked.size(); ++k) {
    if (k > 0 && steps[picked[k]]->device_run > steps[picked[k - 1]]->device_run + 1)
      out += "  ...\n";
    out += step_line_text(*steps[picked[k]], token_view);
  }
  return out;
}

}  // namespace

struct SummaryView::State {
  State(size_t shown, bool in_color) : worst_n(shown), color(in_color) {}
  size_t worst_n;
  bool color;
  std::string head;                 // the store lines
  std::vector<std::string> labels;  // the devices'

  std::optional<std::string> first_line;
  std::optional<std::string> introducers;  // of the first run, then of the first divergence's
  // Per device: the causes in its first failing run, and in its first warning run (shown when
  // it has no failing one).
  std::vector<std::optional<std::string>> why_fail, why_warn;
  std::optional<std::string> parts;  // the first run's error parts, then the first divergence's
  std::optional<std::string> time;   // the first run's slowest groups
  std::optional<compare::ClassAgreement> classifier;  // the worst top-1 agreement
  uint32_t classifier_run = 0;
  std::vector<std::pair<double, std::string>> worst;  // SQNR, line; best kept first among ties
  std::string text;

  void add_worst(const RunReport& run) {
    std::vector<std::pair<double, std::string>> found;
    for (const GroupReport& group : run.groups) {
      if (!group.sqnr_db) continue;
      const double introduced = group.introduced_db.value_or(NAN);
      found.emplace_back(
          *group.sqnr_db,
          fmt::format(
              "  {:>9} dB  {}  {}run {:<3} {:<12} {}{}{}{}\n", db_text(group.sqnr_db),
              paint(color, group.verdict,
                    fmt::format("{:<5}", compare::verdict_name(group.verdict))),
              labels.size() > 1 ? fmt::format("device {} ", run.device) : "", run.device_run,
              printable(group.id), printable(group.name()),
              std::isfinite(introduced) ? fmt::format("  (introduced {:+.2f} dB)", introduced) : "",
              excess_text(group), parts_text(group)));
    }
    auto by_sqnr = [](const auto& a, const auto& b) { return lower_sqnr(a.first, b.first); };
    std::stable_sort(found.begin(), found.end(), by_sqnr);
    std::vector<std::pair<double, std::string>> merged;
    std::merge(std::make_move_iterator(worst.begin()), std::make_move_iterator(worst.end()),
               std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()),
               std::back_inserter(merged), by_sqnr);
    if (merged.size() > worst_n) merged.resize(worst_n);
    worst = std::move(merged);
  }

  // " of <label>" in a multi-device report: which device a run line is about.
  std::string of_device(uint32_t device) const {
    return labels.size() > 1 && device < labels.size() ? " of " + printable(labels[device])
                                                       : std::string();
  }
  std::string of_device(const RunReport& run) const { return of_device(run.device); }

  void add_why(const RunReport& run) {
    if (run.verdict == Verdict::kPass) return;
    if (why_fail.size() <= run.device) {
      why_fail.resize(run.device + 1);
      why_warn.resize(run.device + 1);
    }
    std::optional<std::string>& why =
        (run.verdict == Verdict::kFail ? why_fail : why_warn)[run.device];
    if (why) return;
    std::string lines = why_lines(run, kWhyLines, of_device(run));
    if (!lines.empty()) why = std::move(lines);
  }

  // Each device's causes: of its first failing run, else of its first warning run.
  std::string why_text() const {
    std::string out;
    size_t blocks = 0, more = 0;
    for (size_t d = 0; d < why_fail.size(); ++d) {
      const std::optional<std::string>& why = why_fail[d] ? why_fail[d] : why_warn[d];
      if (!why) continue;
      if (blocks++ < kWhyDevices) {
        out += *why;
      } else {
        ++more;
      }
    }
    return out + more_line("", more, "devices' causes");
  }

  void add_classifier(const RunReport& run) {
    const auto& c = run.classification;
    if (!c || !c->top1) return;
    if (!classifier || *c->top1 < *classifier->top1) {
      classifier = c;
      classifier_run = run.device_run;
    }
  }

  std::string classifier_line(uint64_t runs) const {
    if (!classifier) return "";
    const compare::ClassAgreement& c = *classifier;
    std::string line = fmt::format("classifier {} ({} rows x {} classes): top-1 agreement {:.1f}%",
                                   printable(c.tensor), c.rows, c.classes, 100 * *c.top1);
    if (c.top5) line += fmt::format(", top-5 {:.1f}%", 100 * *c.top5);
    return line + (runs > 1 ? fmt::format(" (worst: device run {})", classifier_run) : "") + "\n";
  }
};

SummaryView::SummaryView(size_t worst_n, bool color)
    : state_(std::make_unique<State>(worst_n, color)) {}
SummaryView::~SummaryView() = default;

Status SummaryView::begin(const ReportHeader& header) {
  state_->head = fmt::format("reference {}\n", printable(header.reference.path));
  for (const StoreSummary& device : header.devices) {
    state_->labels.push_back(device.label);
    if (state_->labels.size() > kDevicesShown) continue;
    state_->head += header.devices.size() == 1
                        ? fmt::format("device    {}\n", printable(device.path))
                        : fmt::format("device {:<2} {} ({})\n", state_->labels.size() - 1,
                                      printable(device.path), printable(state_->labels.back()));
  }
  if (header.devices.size() > kDevicesShown) {
    state_->head += more_line("", header.devices.size() - kDevicesShown, "devices");
  }
  if (header.simulation) {
    state_->head += fmt::format("simulation {}\n", printable(header.simulation->path));
  }
  if (header.isolated)
    state_->head += fmt::format("isolated  {}\n", printable(header.isolated->path));
  return Status::ok();
}

Status SummaryView::add_run(const RunReport& run) {
  State& s = *state_;
  if (!s.introducers) s.introducers = introducers_line(run);
  if (!s.first_line && run.first_divergence) {
    if (const GroupReport* group = run.group(*run.first_divergence)) {
      s.first_line = fmt::format("first divergence: group {} ({}) in device run {}{}: {}{}",
                                 printable(group->id), printable(group->name()), run.device_run,
                                 s.of_device(run), sqnr_text(*group), flags_text(group->flags));
      s.introducers = introducers_line(run);
      // The error parts where the run goes wrong: which part the divergence is in.
      if (std::string parts = part_lines(run); !parts.empty()) s.parts = std::move(parts);
    }
  }
  if (!s.parts) {
    std::string parts = part_lines(run);
    if (!parts.empty()) s.parts = std::move(parts);
  }
  s.add_why(run);
  if (!s.time) s.time = time_line(run);
  s.add_classifier(run);
  s.add_worst(run);
  return Status::ok();
}

Status SummaryView::finish(const ReportEnding& ending) {
  State& s = *state_;
  const Summary& sum = ending.summary;
  std::string out = s.head;
  out += fmt::format(
      "compared  {} runs, {} groups, {} pairs: {} pass, {} warn, {} fail; "
      "unmatched {} reference, {} device\n",
      sum.runs_compared, sum.groups, sum.compared_pairs, sum.pass, sum.warn, sum.fail,
      sum.unmatched_reference, sum.unmatched_device);
  out += s.first_line ? paint(s.color, Verdict::kFail, *s.first_line) + "\n"
                      : "first divergence: none\n";
  if (sum.first_departure) {
    out += departure_line(*sum.first_departure, s.of_device(sum.first_departure->device));
  }
  if (sum.first_diverging_token) {
    out += diverging_token_line(*sum.first_diverging_token,
                                s.of_device(sum.first_diverging_token->device));
  }
  out += s.introducers.value_or("");
  out += s.parts.value_or("");
  out += s.why_text();
  out += s.classifier_line(sum.runs_compared);
  if (!ending.devices.empty()) {
    out += device_lines(ending, s.labels);
    out += disagreement_lines(ending, s.labels, s.worst_n);
  }
  const bool several = s.labels.size() > 1;
  for (uint32_t d = 0; d < std::max<size_t>(s.labels.size(), 1) && d < kDevicesShown; ++d) {
    out += step_lines(ending, 2 * s.worst_n, d, several ? s.of_device(d) : "");
  }
  out += kv_cache_lines(ending);
  out += first_failures_line(ending);
  out += s.time.value_or("");
  if (!s.worst.empty()) {
    out += fmt::format("worst {} groups:\n", s.worst.size());
    for (const auto& [sqnr, line] : s.worst) out += line;
  }
  for (size_t i = 0; i < ending.warnings.size() && i < kListLines; ++i) {
    out += "warning: " + printable(ending.warnings[i]) + "\n";
  }
  if (ending.warnings.size() > kListLines) {
    out += "warning: " + more_line("", ending.warnings.size() - kListLines, "warnings");
  }
  const std::vector<std::string>& reasons = sum.verdict_reasons;
  for (size_t i = 0; i < reasons.size() && i < kListLines; ++i) {
    out += paint(s.color, Verdict::kFail, "fails because " + printable(reasons[i])) + "\n";
  }
  if (reasons.size() > kListLines) {
    std::string more = more_line("", reasons.size() - kListLines, "reasons");
    more.pop_back();  // painted without its line end
    out += paint(s.color, Verdict::kFail, "fails because " + more) + "\n";
  }
  out +=
      paint(s.color, sum.verdict, "verdict: " + std::string(compare::verdict_name(sum.verdict))) +
      "\n";
  s.text = std::move(out);
  return Status::ok();
}

const std::string& SummaryView::text() const { return state_->text; }

std::string render_summary(const Report& report, size_t worst_n, bool color) {
  SummaryView view(worst_n, color);
  const Status done = replay(report, view);  // the summary view cannot fail
  (void)done;
  return view.text();
}

}  // namespace qd::report
