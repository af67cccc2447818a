#include "qnn_debug/report/inspect.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "json_codec.h"
#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/jsonio/jsonio.h"
#include "qnn_debug/report/build.h"

namespace qd::report {
namespace {

using nlohmann::json;

// Session-level events (outside any run) are context for every run, so a filter keeps them.
bool selected(const InspectOptions& options, uint32_t run) {
  return !options.run || *options.run == run || run == kNoRun;
}

std::string run_label(uint32_t run) { return run == kNoRun ? "-" : std::to_string(run); }
json run_json(uint32_t run) { return run == kNoRun ? json(nullptr) : json(run); }

std::string join_handles(const std::vector<int64_t>& handles) {
  return handles.empty() ? "-" : fmt::format("{}", fmt::join(handles, ","));
}

std::string shape_text(const std::vector<uint64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ","));
}

std::string quant_text(const Quantization& quant) {
  if (!quant.is_quantized()) return "-";
  const char* convention = quant.convention == QuantConvention::kQnnOffset ? "offset" : "zp";
  if (!quant.per_axis()) {
    return fmt::format("scale={:.6g} {}={}", quant.scales[0], convention, quant.offsets[0]);
  }
  return fmt::format("per-axis {} ch on axis {}", quant.scales.size(), quant.axis);
}

std::string time_text(int64_t unix_ns) {
  if (unix_ns == 0) return "-";
  const time_t seconds = static_cast<time_t>(unix_ns / 1'000'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

// JSON has no NaN: statistics of a tensor with no finite values become null.

// The tensor as the diff report writes it (one dialect: data_nbytes, non-finite statistics as
// "nan" / "inf" / "-inf"), plus what only a store listing shows.
json tensor_json(const TensorEntry& t) {
  json out = codec::to_json(tensor_summary(t));
  out["run"] = t.run_id;
  out["name_matched"] = t.name_matched;
  out["role"] = role_name(t.role);
  out["dtype_code"] = static_cast<uint32_t>(t.dtype);
  out["crc32c"] = t.data_crc32c;
  return out;
}

Status append_tensor_lines(std::string& out, const StoreReader& store, const RunInfo& run,
                           const InspectOptions& options) {
  QD_ASSIGN_OR_RETURN(const std::vector<TensorEntry> tensors, store.tensors_of_run(run.id));
  out += fmt::format(
      "  {:>6}  {:<40} {:<10} {:>3}  {:<16} {:<18} {:<12} {:<28} {:>11} {:>11} "
      "{:>11} {}\n",
      "seq", "name", "handles", "out", "dtype", "shape", "layout", "quantization", "min", "max",
      "mean", "nan/inf");
  size_t shown = 0;
  for (const TensorEntry& entry : tensors) {
    const TensorEntry* t = &entry;
    if (options.max_tensors != 0 && shown == options.max_tensors) {
      out += fmt::format("  ... {} more tensors (use --limit 0 for all)\n", tensors.size() - shown);
      break;
    }
    const std::string flag = t->name_matched ? "" : " [name unmatched]";
    out += fmt::format(
        "  {:>6}  {:<40} {:<10} {:>3}  {:<16} {:<18} {:<12} {:<28} {:>11.5g} {:>11.5g} {:>11.5g} "
        "{}/{}{}\n",
        t->seq, printable(t->name), join_handles(t->handles), t->output_index, info(t->dtype).name,
        shape_text(t->dims), describe_axis_order(t->axis_order), quant_text(t->quant), t->stats.min,
        t->stats.max, t->stats.mean, t->stats.nan_count, t->stats.inf_count, flag);
    for (const EncodingFinding& finding : lint_encoding(*t)) {
      out += fmt::format("          encoding: {}\n", describe(finding));
    }
    ++shown;
  }
  return Status::ok();
}

// Durations per instruction over the selected runs, in order of first appearance. An event
// whose producer gave the runtime's instruction index (an ETDump's instruction_id) is grouped by
// it. Without one, a program still runs its instructions in the same order every run, so the
// k-th event of one name, handles and unit within a run is the same instruction each time. Both
// keep two convolutions two rows and 14 OPERATOR_CALLs 14 rows.
using EventKey = std::tuple<std::string, std::vector<int64_t>, std::string, int64_t>;

EventKey event_key(const ProfileEvent& e) { return {e.name, e.handles, e.unit, e.instruction_id}; }

// The k-th event with its key in its run, from 0 (0 for each event of a known instruction that
// runs once per run).
class OccurrenceCounter {
 public:
  uint64_t next(const ProfileEvent& e) { return seen_[{e.run_id, event_key(e)}]++; }

 private:
  std::map<std::tuple<uint32_t, EventKey>, uint64_t> seen_;
};

struct OpDurations {
  const ProfileEvent* first = nullptr;  // name, handles, unit and instruction id of the row
  uint64_t occurrence = 0;
  uint64_t calls = 0;
  int64_t total = 0;
  int64_t max = 0;
};

std::vector<OpDurations> durations_by_instruction(const StoreReader& store,
                                                  const InspectOptions& o) {
  std::vector<OpDurations> ops;
  std::map<std::tuple<EventKey, uint64_t>, size_t> index;
  OccurrenceCounter occurrences;
  for (const ProfileEvent& e : store.profile_events()) {
    if (!selected(o, e.run_id)) continue;
    const uint64_t occurrence = occurrences.next(e);
    auto [it, added] = index.try_emplace({event_key(e), occurrence}, ops.size());
    if (added) ops.push_back({&e, occurrence});
    OpDurations& op = ops[it->second];
    const int64_t duration = e.end - e.start;
    op.calls += 1;
    op.total += duration;
    op.max = op.calls == 1 ? duration : std::max(op.max, duration);
  }
  return ops;
}

std::string instruction_text(int64_t id) { return id < 0 ? "-" : std::to_string(id); }

// Durations are integers (ticks, cycles, ns): a mean that is not one keeps one decimal.
std::string mean_text(int64_t total, uint64_t calls) {
  const auto n = static_cast<int64_t>(calls);
  if (total % n == 0) return std::to_string(total / n);
  return fmt::format("{:.1f}", static_cast<double>(total) / static_cast<double>(n));
}

void append_durations_text(std::string& out, const StoreReader& store, const InspectOptions& o) {
  const std::vector<OpDurations> ops = durations_by_instruction(store, o);
  if (ops.empty()) return;
  out += fmt::format(
      "\nprofile: duration per op, one row per instruction (end - start; instr: the runtime's "
      "instruction index; #: the k-th event of that name and instruction in a run)\n"
      "  {:<48} {:>5} {:>4} {:<10} {:>7} {:>14} {:>14} {:>14}  {}\n",
      "op", "instr", "#", "handles", "calls", "mean", "max", "total", "unit");
  for (const OpDurations& op : ops) {
    const ProfileEvent& e = *op.first;
    out += fmt::format("  {:<48} {:>5} {:>4} {:<10} {:>7} {:>14} {:>14} {:>14}  {}\n",
                       printable(e.name), instruction_text(e.instruction_id), op.occurrence,
                       join_handles(e.handles), op.calls, mean_text(op.total, op.calls), op.max,
                       op.total, printable(e.unit));
  }
}

void append_events_text(std::string& out, const StoreReader& store, const InspectOptions& o) {
  size_t shown = 0, selected_events = 0;
  for (const ProfileEvent& e : store.profile_events()) {
    if (!selected(o, e.run_id)) continue;
    ++selected_events;
    if (o.max_tensors != 0 && shown == o.max_tensors) continue;
    out += fmt::format("  profile run {} {:<40} instr {:>3} handles {:<10} {} .. {} ({} {})\n",
                       run_label(e.run_id), printable(e.name), instruction_text(e.instruction_id),
                       join_handles(e.handles), e.start, e.end, e.end - e.start, printable(e.unit));
    ++shown;
  }
  if (shown < selected_events) {
    out += fmt::format("  ... {} more profile events (use --limit 0 for all)\n",
                       selected_events - shown);
  }
  // Each checkpoint with its change since the previous one of its run: a heap profile's
  // after_context_freed against before_context_created is what the context left behind.
  std::map<uint32_t, uint64_t> previous;
  for (const MemoryCheckpoint& m : store.memory_checkpoints()) {
    if (!selected(o, m.run_id)) continue;
    std::string change;
    if (const auto before = previous.find(m.run_id); before != previous.end()) {
      change = m.bytes >= before->second ? fmt::format(" (+{})", m.bytes - before->second)
                                         : fmt::format(" (-{})", before->second - m.bytes);
    }
    previous[m.run_id] = m.bytes;
    out += fmt::format("  memory  run {} {:<40} {} bytes{}\n", run_label(m.run_id),
                       printable(m.label), m.bytes, change);
  }
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

Result<std::string> inspect_text(const StoreReader& store, const InspectOptions& options) {
  const StoreMetadata& meta = store.metadata();
  std::string out = fmt::format("store     {}\n", printable(store.path()));
  out += fmt::format("format    {} v{}\n", kStoreFormatName, store.format_version());
  out += fmt::format("producer  {}   backend {}   soc {}   model {}\n", printable(meta.producer),
                     printable(meta.backend), printable(meta.soc), printable(meta.model));
  out += fmt::format("created   {}\n", time_text(meta.created_unix_ns));
  out += fmt::format(
      "runs      {}   tensors {}   profile events {}   memory checkpoints {}   "
      "graph nodes {}\n",
      store.runs().size(), store.tensor_count(), store.profile_events().size(),
      store.memory_checkpoints().size(), store.graph().size());
  size_t flagged = 0;
  QD_RETURN_IF_ERROR(store.for_each_tensor([&](const TensorEntry& t) {
    flagged += lint_encoding(t).empty() ? 0 : 1;
    return Status::ok();
  }));
  if (flagged > 0) {
    out += fmt::format(
        "encodings {} tensors have an encoding that cannot be right (\"encoding:\" lines; "
        "docs/metrics.md, Encoding lint)\n",
        flagged);
  }
  for (const RunInfo& run : store.runs()) {
    if (!selected(options, run.id)) continue;
    out += fmt::format("\nrun {} {}  {}  {} tensors  {} dropped\n", run.id, printable(run.name),
                       run.complete ? "complete" : "INCOMPLETE (writer stopped before end_run)",
                       run.tensor_count, run.dropped_count);
    QD_RETURN_IF_ERROR(append_tensor_lines(out, store, run, options));
  }
  append_durations_text(out, store, options);
  if (!store.profile_events().empty() || !store.memory_checkpoints().empty()) out += "\nevents\n";
  append_events_text(out, store, options);
  for (const std::string& warning : store.warnings())
    out += "warning: " + printable(warning) + "\n";
  return out;
}

Result<std::string> inspect_json(const StoreReader& store, const InspectOptions& options) {
  const StoreMetadata& meta = store.metadata();
  json doc = {{"store", store.path()},
              {"format", kStoreFormatName},
              {"format_version", store.format_version()},
              {"metadata",
               {{"producer", meta.producer},
                {"backend", meta.backend},
                {"soc", meta.soc},
                {"model", meta.model},
                {"created_unix_ns", meta.created_unix_ns}}}};
  json runs = json::array(), tensors = json::array(), profile = json::array(),
       memory = json::array(), graph = json::array();
  for (const RunInfo& r : store.runs()) {
    if (!selected(options, r.id)) continue;
    runs.push_back({{"id", r.id},
                    {"name", r.name},
                    {"complete", r.complete},
                    {"tensor_count", r.tensor_count},
                    {"dropped_count", r.dropped_count},
                    {"begin_unix_ns", r.begin_unix_ns},
                    {"end_unix_ns", r.end_unix_ns}});
  }
  const auto add_tensor = [&](const TensorEntry& t) {
    tensors.push_back(tensor_json(t));
    return Status::ok();
  };
  if (options.run) {
    QD_ASSIGN_OR_RETURN(const std::vector<TensorEntry> of_run, store.tensors_of_run(*options.run));
    for (const TensorEntry& t : of_run) QD_RETURN_IF_ERROR(add_tensor(t));
  } else {
    QD_RETURN_IF_ERROR(store.for_each_tensor(add_tensor));
  }
  OccurrenceCounter occurrences;
  for (const ProfileEvent& e : store.profile_events()) {
    if (!selected(options, e.run_id)) continue;
    profile.push_back({{"run", run_json(e.run_id)},
                       {"name", e.name},
                       {"instruction_id", e.instruction_id < 0 ? json() : json(e.instruction_id)},
                       {"occurrence", occurrences.next(e)},
                       {"handles", e.handles},
                       {"start", e.start},
                       {"end", e.end},
                       {"unit", e.unit}});
  }
  for (const MemoryCheckpoint& m : store.memory_checkpoints()) {
    if (!selected(options, m.run_id)) continue;
    memory.push_back({{"run", run_json(m.run_id)},
                      {"label", m.label},
                      {"bytes", m.bytes},
                      {"unix_ns", m.time_unix_ns}});
  }
  for (const GraphNode& n : store.graph()) {
    graph.push_back({{"name", n.name},
                     {"op_type", n.op_type},
                     {"inputs", n.inputs},
                     {"outputs", n.outputs},
                     {"handles", n.handles}});
  }
  doc["runs"] = std::move(runs);
  doc["tensors"] = std::move(tensors);
  doc["profile_events"] = std::move(profile);
  doc["memory_checkpoints"] = std::move(memory);
  doc["graph_nodes"] = std::move(graph);
  doc["warnings"] = store.warnings();
  // Names are arbitrary bytes; invalid UTF-8 becomes U+FFFD rather than failing the dump.
  return jsonio::dump(doc, {2}) + "\n";
}

namespace {

json encoding_json(const EncodingEntry& e) {
  return {{"name", e.tensor.name},
          {"dtype", e.dtype_stated ? json(info(e.tensor.dtype).name) : json(nullptr)},
          {"dims", e.tensor.dims},
          {"axis_order", e.tensor.axis_order},
          {"quantization", codec::to_json(e.tensor.quant)},
          {"encoding_problems", codec::to_json(lint_encoding(e.tensor))},
          {"graph", e.graph},
          {"notes", e.notes}};
}

}  // namespace

std::string encodings_text(const EncodingsListing& listing, size_t max_lines) {
  std::string out = fmt::format("encodings {}\nformat    {}\ntensors   {}\n",
                                printable(listing.path), listing.format, listing.tensors.size());
  size_t flagged = 0;
  for (const EncodingEntry& e : listing.tensors) flagged += lint_encoding(e.tensor).empty() ? 0 : 1;
  out += fmt::format("problems  {} tensors have an encoding that cannot be right{}\n\n", flagged,
                     flagged > 0 ? " (\"encoding:\" lines; docs/metrics.md, Encoding lint)" : "");
  out += fmt::format("  {:<40} {:<16} {:<18} {:<12} {}\n", "name", "dtype", "shape", "layout",
                     "quantization");
  size_t shown = 0;
  for (const EncodingEntry& e : listing.tensors) {
    if (max_lines != 0 && shown == max_lines) {
      out += fmt::format("  ... {} more tensors (use --limit 0 for all)\n",
                         listing.tensors.size() - shown);
      break;
    }
    out += fmt::format("  {:<40} {:<16} {:<18} {:<12} {}\n", printable(e.tensor.name),
                       e.dtype_stated ? info(e.tensor.dtype).name : "-",
                       e.tensor.dims.empty() ? "-" : shape_text(e.tensor.dims),
                       describe_axis_order(e.tensor.axis_order), quant_text(e.tensor.quant));
    for (const EncodingFinding& finding : lint_encoding(e.tensor)) {
      out += fmt::format("          encoding: {}\n", describe(finding));
    }
    for (const std::string& note : e.notes) out += "          note: " + printable(note) + "\n";
    ++shown;
  }
  return out;
}

std::string encodings_json(const EncodingsListing& listing) {
  json tensors = json::array();
  size_t flagged = 0;
  for (const EncodingEntry& e : listing.tensors) {
    tensors.push_back(encoding_json(e));
    flagged += lint_encoding(e.tensor).empty() ? 0 : 1;
  }
  const json doc = {{"encodings", listing.path},
                    {"format", listing.format},
                    {"flagged_tensors", flagged},
                    {"tensors", std::move(tensors)}};
  return jsonio::dump(doc, {2}) + "\n";
}

}  // namespace qd::report
