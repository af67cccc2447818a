#include "qnn_debug/report/model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "qnn_debug/compare/analysis.h"
#include "qnn_debug/compare/hint.h"
#include "qnn_debug/compare/kv_cache.h"
#include "qnn_debug/compare/metrics.h"

namespace qd::report {

using compare::Verdict;

std::vector<uint64_t> coordinates(uint64_t index, const std::vector<uint64_t>& dims) {
  std::vector<uint64_t> coords(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    coords[d] = dims[d] ? index % dims[d] : 0;
    index = dims[d] ? index / dims[d] : 0;
  }
  return coords;
}

// The output a group is labelled by is the one its verdict and SQNR come from: the first pair
// not compared, else the first with the lowest SQNR (NaN the lowest).
const std::string& GroupReport::name() const {
  static const std::string kNone;
  const PairReport* worst = nullptr;
  for (const PairReport& pair : pairs) {
    if (!pair.metrics) return pair.reference.name;
    const double sqnr = pair.metrics->sqnr_db;
    if (worst == nullptr || sqnr < worst->metrics->sqnr_db ||
        (std::isnan(sqnr) && !std::isnan(worst->metrics->sqnr_db))) {
      worst = &pair;
    }
  }
  return worst == nullptr ? kNone : worst->reference.name;
}

std::string default_label(const StoreSummary& device) {
  std::string label;
  for (const std::string* part :
       {&device.metadata.backend, &device.metadata.soc, &device.metadata.producer}) {
    if (part->empty()) continue;
    label += (label.empty() ? "" : " ") + *part;
  }
  if (!label.empty()) return label;
  const size_t slash = device.path.find_last_of('/');
  return slash == std::string::npos ? device.path : device.path.substr(slash + 1);
}

const GroupReport* RunReport::group(const std::string& id) const {
  for (const GroupReport& g : groups) {
    if (g.id == id) return &g;
  }
  return nullptr;
}

const AggregateEntry::RunSqnr& AggregateEntry::worst() const {
  return *std::min_element(per_run.begin(), per_run.end(), [](const RunSqnr& a, const RunSqnr& b) {
    return a.sqnr_db < b.sqnr_db;
  });
}

double AggregateEntry::mean_sqnr_db() const {
  double sum = 0;
  for (const RunSqnr& r : per_run) sum += r.sqnr_db;
  return sum / static_cast<double>(per_run.size());
}

Status ReportCollector::begin(const ReportHeader& header) {
  report_.header = header;
  return Status::ok();
}

Status ReportCollector::add_run(const RunReport& run) {
  report_.runs.push_back(run);
  return Status::ok();
}

Status ReportCollector::finish(const ReportEnding& ending) {
  report_.ending = ending;
  return Status::ok();
}

Status replay(const Report& report, ReportSink& sink) {
  QD_RETURN_IF_ERROR(sink.begin(report.header));
  for (const RunReport& run : report.runs) QD_RETURN_IF_ERROR(sink.add_run(run));
  return sink.finish(report.ending);
}

namespace {

// The summary's first divergence of each part: the first run's that has one.
void note_part_divergences(const RunReport& run, const GroupReport& group, Summary& s) {
  const auto note = [&](const std::optional<PartRun>& part_run,
                        const std::optional<PartFigures>& figures,
                        std::optional<FirstDivergence>& first) {
    if (!first && part_run && part_run->first_divergence == group.id && figures) {
      first = FirstDivergence{run.device, run.device_run, group.id, figures->sqnr_db, group.flags};
    }
  };
  for (const auto& term : compare::kParts) {
    const size_t i = part_index(term.value);
    note(run.*kRunParts[i], *group.parts.*kGroupParts[i], s.*kPartFirstDivergences[i]);
  }
}

}  // namespace

namespace {

// The group a step's output is judged by: the one holding the tensor the classifier check
// ranked (the logits), else the last in op order.
const GroupReport* output_group(const RunReport& run) {
  if (run.classification) {
    for (const GroupReport& group : run.groups) {
      for (const PairReport& pair : group.pairs) {
        if (pair.reference.name == run.classification->tensor) return &group;
      }
    }
  }
  return run.groups.empty() ? nullptr : &run.groups.back();
}

StepLine step_line(const RunReport& run, const GroupReport* output) {
  StepLine step;
  step.device = run.device;
  step.device_run = run.device_run;
  step.reference_run = run.reference_run;
  step.verdict = run.verdict;
  step.first_divergence = run.first_divergence;
  for (const GroupReport& group : run.groups) {
    if (group.sqnr_db && (!step.worst_sqnr_db || *group.sqnr_db < *step.worst_sqnr_db)) {
      step.worst = group.id;
      step.worst_sqnr_db = group.sqnr_db;
    }
  }
  if (output != nullptr) {
    step.output = output->id;
    step.output_verdict = output->verdict;
    step.output_sqnr_db = output->sqnr_db;
  }
  step.tokens = run.classification;
  return step;
}

// The step's token, when it differs, with what led to it.
std::optional<FirstDivergingToken> diverging_token(const StepLine& step,
                                                   const std::optional<FirstDeparture>& departure) {
  if (!step.token_differs()) return std::nullopt;
  const compare::ClassAgreement& t = *step.tokens;
  return FirstDivergingToken{step.device,
                             step.device_run,
                             *t.reference_token,
                             *t.device_token,
                             t.reference_token_probability,
                             t.reference_token_rank,
                             t.kl_divergence,
                             t.reference_margin,
                             step.first_divergence,
                             departure};
}

void count_verdict(Verdict verdict, uint64_t& pass, uint64_t& warn, uint64_t& fail) {
  (verdict == Verdict::kPass ? pass : verdict == Verdict::kWarn ? warn : fail)++;
}

// Devices whose SQNR at an op is this close (dB) read it alike (docs/metrics.md, 6d).
constexpr double kSameSqnrDb = 0.1;
// A device stands out when it adds this much more error than every other device: as much as an
// op must add not to be taken for inheriting its error (docs/metrics.md, 6b).
constexpr double kOutlierDb = 1.0;

// The error an op added on a device, in [0, C]: NaN introduced (+inf), an op without inputs and
// a cell not compared weigh as the whole of an exact signal, and an op that recovers error
// (introduced below 0, its input's error partly undone) adds none, so it never stands out.
double bounded_introduced(const DeviceCell& cell) {
  double added = cell.introduced_db ? *cell.introduced_db
                 : cell.sqnr_db     ? compare::introduced_db(compare::kExactSqnrDb, *cell.sqnr_db)
                                    : compare::kExactSqnrDb;  // not compared: nothing agrees
  if (std::isnan(added)) added = compare::kExactSqnrDb;
  return std::clamp(added, 0.0, compare::kExactSqnrDb);
}

// The spread of the error the devices add at the op, and the device that adds the most when it
// stands out; none of it when every device reads the op alike (docs/metrics.md, 6d).
void measure_disagreement(DeviceRow& row) {
  row.disagreement_db = 0;
  row.outlier.reset();
  if (row.cells.size() < 2) return;
  const auto sqnr = [](const DeviceCell& c) {
    return std::clamp(*c.sqnr_db, -compare::kExactSqnrDb, compare::kExactSqnrDb);
  };
  const bool all_compared = std::all_of(row.cells.begin(), row.cells.end(), [](const auto& c) {
    return c.sqnr_db && !std::isnan(*c.sqnr_db);
  });
  if (all_compared) {
    const auto [lo, hi] = std::minmax_element(
        row.cells.begin(), row.cells.end(),
        [&](const DeviceCell& a, const DeviceCell& b) { return sqnr(a) < sqnr(b); });
    if (sqnr(*hi) - sqnr(*lo) <= kSameSqnrDb) return;  // no spread in SQNR: no disagreement
  }
  double low = std::numeric_limits<double>::infinity();
  double high = -low, second = -low;
  const DeviceCell* most = nullptr;
  for (const DeviceCell& cell : row.cells) {
    const double added = bounded_introduced(cell);
    low = std::min(low, added);
    if (added > high) {
      second = high;
      high = added;
      most = &cell;
    } else {
      second = std::max(second, added);
    }
  }
  row.disagreement_db = high - low;
  // The outlier adds more than every other device, not just as much as another one does.
  if (high - second >= kOutlierDb) row.outlier = most->device;
}

// The lower SQNR is the worse cell (NaN the lowest); a cell not compared is worse than any.
bool worse_cell(const DeviceCell& a, const DeviceCell& b) {
  if (!a.sqnr_db || !b.sqnr_db) return !a.sqnr_db && b.sqnr_db;
  if (std::isnan(*a.sqnr_db) || std::isnan(*b.sqnr_db)) {
    return std::isnan(*a.sqnr_db) && !std::isnan(*b.sqnr_db);
  }
  return *a.sqnr_db < *b.sqnr_db;
}

// Keeps the earlier of `first` and the group's departure: the lower device run, then the group
// first in op order (ties between devices: the one seen first).
void note_departure(const RunReport& run, const GroupReport& group,
                    std::optional<FirstDeparture>& first) {
  if (!group.departure) return;
  if (first &&
      std::pair(first->device_run, first->order) <= std::pair(run.device_run, group.order)) {
    return;
  }
  first = FirstDeparture{run.device, run.device_run, group.order,
                         group.id,   group.name(),   *group.departure};
}

}  // namespace

bool StepLine::token_differs() const {
  return tokens && tokens->reference_token && tokens->device_token &&
         *tokens->reference_token != *tokens->device_token;
}

EndingBuilder::EndingBuilder(const ReportHeader& header)
    : departures_(header.devices.size()), header_devices_(header.devices.size()) {
  const size_t device_count = header.devices.size();
  if (device_count < 2) return;
  devices_.resize(device_count);
  for (uint32_t d = 0; d < device_count; ++d) devices_[d].device = d;
}

void EndingBuilder::add_run(const RunReport& run) {
  Summary& s = summary_;
  ++s.runs_compared;
  s.verdict = compare::worse(s.verdict, run.verdict);
  DeviceOutcome* outcome = run.device < devices_.size() ? &devices_[run.device] : nullptr;
  if (outcome) {
    ++outcome->runs_compared;
    outcome->verdict = compare::worse(outcome->verdict, run.verdict);
  }
  for (const std::string& reason : run.verdict_reasons) {
    s.verdict_reasons.push_back("device run " + std::to_string(run.device_run) + ": " + reason);
  }
  for (const GroupReport& group : run.groups) {
    ++s.groups;
    s.compared_pairs += group.pairs.size();
    count_verdict(group.verdict, s.pass, s.warn, s.fail);
    s.verdict = compare::worse(s.verdict, group.verdict);
    const FirstDivergence here{run.device, run.device_run, group.id, group.sqnr_db, group.flags};
    if (!s.first_divergence && run.first_divergence == group.id) s.first_divergence = here;
    if (outcome) {
      count_verdict(group.verdict, outcome->pass, outcome->warn, outcome->fail);
      outcome->verdict = compare::worse(outcome->verdict, group.verdict);
      if (!outcome->first_divergence && run.first_divergence == group.id) {
        outcome->first_divergence = here;
      }
      note_departure(run, group, outcome->first_departure);
      add_to_matrix(run, group);
    }
    note_departure(run, group, s.first_departure);
    if (run.device < departures_.size()) note_departure(run, group, departures_[run.device]);
    if (group.parts) note_part_divergences(run, group, s);
    if (!group.sqnr_db) continue;
    const auto [at, added] = aggregate_index_.try_emplace(group.id, aggregate_.size());
    if (added) aggregate_.push_back({group.id, {}, std::nullopt});
    AggregateEntry& entry = aggregate_[at->second];
    entry.per_run.push_back({run.device, run.device_run, *group.sqnr_db, group.verdict});
    if (group.verdict == Verdict::kFail && !entry.first_failing_run) {
      entry.first_failing_run = run.device_run;
      entry.first_failing_device = run.device;
    }
  }
  for (const UnmatchedTensor& u : run.unmatched) {
    (u.reference_side ? s.unmatched_reference : s.unmatched_device)++;
  }
  for (const GroupReport& group : run.groups) track_kv_cache(run, group);
  const GroupReport* output = output_group(run);
  steps_.push_back(step_line(run, output));
  if (!s.first_diverging_token) {
    s.first_diverging_token = diverging_token(
        steps_.back(), run.device < departures_.size() ? departures_[run.device] : std::nullopt);
  }
  if (!s.first_failing_step && output != nullptr && output->verdict == Verdict::kFail) {
    s.first_failing_step =
        FirstDivergence{run.device, run.device_run, output->id, output->sqnr_db, output->flags};
  }
}

void EndingBuilder::add_to_matrix(const RunReport& run, const GroupReport& group) {
  const auto [at, added] = matrix_index_.try_emplace(group.id, matrix_.size());
  if (added) matrix_.push_back({group.id, group.name(), {}, 0, std::nullopt});
  DeviceRow& row = matrix_[at->second];
  DeviceCell cell{run.device,
                  run.device_run,
                  group.verdict,
                  group.sqnr_db,
                  group.introduced_db,
                  group.hints.empty()
                      ? std::string()
                      : std::string(compare::hint_kind_name(group.hints.front().kind()))};
  const auto same_device =
      std::find_if(row.cells.begin(), row.cells.end(),
                   [&](const DeviceCell& c) { return c.device == run.device; });
  if (same_device == row.cells.end()) {
    row.cells.push_back(std::move(cell));
  } else if (worse_cell(cell, *same_device)) {
    *same_device = std::move(cell);
  }
}

namespace {

// The union over heads of the cells' positions.
std::vector<std::pair<uint64_t, uint64_t>> positions_of(const compare::KvCells& cells) {
  std::vector<bool> any(cells.positions, false);
  for (const auto& r : cells.differing) {
    for (uint64_t p = r.first; p <= r.last && p < any.size(); ++p) any[p] = true;
  }
  return compare::ranges_where(cells.positions, [&](uint64_t p) { return any[p]; });
}

// Adds the step's cells not seen differing before to the track's first_differ (`seen`: each
// head's positions so far, on the step's device). A cache tracked by position only is one head.
void note_first_cells(KvCacheTrack& track, const KvCacheTrack::Step& step,
                      std::vector<std::vector<bool>>& seen) {
  std::vector<compare::KvCells::Range> cells = step.cells;
  if (track.heads == 0) {
    for (const auto& [first, last] : step.differing) cells.push_back({0, first, last});
  }
  for (const auto& r : cells) {
    if (r.head >= seen.size()) seen.resize(r.head + 1, std::vector<bool>(track.positions));
    std::vector<bool>& head = seen[r.head];
    if (head.size() < track.positions) head.resize(track.positions);
    for (uint64_t p = r.first; p <= r.last && p < head.size(); ++p) {
      if (head[p]) continue;
      head[p] = true;
      auto& firsts = track.first_differ;
      if (!firsts.empty() && firsts.back().device_run == step.device_run &&
          firsts.back().device == step.device && firsts.back().cells.head == r.head &&
          firsts.back().cells.last + 1 == p) {
        firsts.back().cells.last = p;
      } else {
        firsts.push_back({{r.head, p, p}, step.device, step.device_run});
      }
    }
  }
}

}  // namespace

void EndingBuilder::track_kv_cache(const RunReport& run, const GroupReport& group) {
  for (const PairReport& pair : group.pairs) {
    if (!pair.metrics || !pair.metrics->channel_axis || pair.metrics->channels.empty() ||
        !compare::is_kv_cache(pair.reference.name)) {
      continue;
    }
    const compare::Metrics& m = *pair.metrics;
    const auto [at, added] = kv_index_.try_emplace(pair.reference.name, kv_cache_.size());
    if (added) {
      kv_cache_.push_back({group.id,
                           pair.reference.name,
                           *m.channel_axis,
                           m.channels.size(),
                           m.kv_cells ? m.kv_cells->heads : 0,
                           0,
                           {},
                           {}});
      kv_seen_.emplace_back(header_devices_);
    }
    KvCacheTrack& track = kv_cache_[at->second];
    ++track.runs;
    track.positions = std::max<uint64_t>(track.positions, m.channels.size());
    KvCacheTrack::Step step{run.device, run.device_run, {}, {}};
    if (m.kv_cells) {
      step.cells = m.kv_cells->differing;
      step.differing = positions_of(*m.kv_cells);
    } else {
      step.differing = compare::ranges_where(m.channels.size(), [&](uint64_t p) {
        return m.channels[p].n > 0 && m.channels[p].sqnr_db < compare::kHealthyChannelDb;
      });
    }
    if (step.differing.empty()) continue;
    if (run.device < kv_seen_[at->second].size()) {
      note_first_cells(track, step, kv_seen_[at->second][run.device]);
    }
    track.steps.push_back(std::move(step));
  }
}

ReportEnding EndingBuilder::finish(std::vector<std::string> warnings) && {
  for (DeviceRow& row : matrix_) measure_disagreement(row);
  return {std::move(summary_), std::move(aggregate_), std::move(steps_),  std::move(devices_),
          std::move(matrix_),  std::move(kv_cache_),  std::move(warnings)};
}

}  // namespace qd::report
