// A long decode's groups as rows (docs/reports.md, "JSON"): what repeats from run to run (the
// JSON's keys, names, dims, dtypes, handles, quantization, flags) is written once, as a template,
// and each group as the numbers of its template's slots. The writer and the reader of each form
// side by side:
//   - the report file's packed block (schema version 3): a run's passing groups past its device's
//     first run (GroupDetail::kPacked), every number exact, as binary columns;
//   - the page's cells: every group of a run the page has no groups of, the light row's reals
//     (5 significant digits) as JSON arrays, which the page's script fills into its templates.
// A template is the JSON of the first group of its shape; a slot is a number of it (a real:
// a JSON number with a fraction or exponent, or "inf", "-inf", "nan"; in the packed block an
// integer too), in the order of the JSON (object keys sorted, as nlohmann keeps them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/report/model.h"

namespace qd::report::codec {

using nlohmann::json;

// How a real slot follows from others of its row (json_rows.cpp says how rules are found).
enum class RowOp : uint8_t { kCopy, kSqrt, kDivide, kSubtract };
struct RowRule {
  uint32_t slot = 0;  // a real slot: what the rule gives
  RowOp op = RowOp::kCopy;
  uint32_t a = 0, b = 0;  // its operands: slots of the same row (b for divide and subtract)
};

// A template's slots: which are reals, its rules, and each slot's value in its last row (a real's
// bits, an integer's two's complement).
struct SlotTable {
  std::vector<bool> real;
  std::vector<RowRule> rules;  // in the order they apply: a rule giving an operand comes first
  std::vector<uint64_t> last;
};

// The packed groups of a report file, written run by run. A run's block: "text" ("base85": how
// the next two are written as text; base64 in blocks written before it), "templates" (the deflated
// JSON array of the templates first used in it, each {"group": a group object with every slot 0,
// "rules": its rules}; their indices count on from the earlier runs'), "template_bytes" (that
// JSON's size), "groups" (how many it packs), "bytes" (its data before compression) and "data":
// the deflated columns (json_rows.cpp says their layout), whose first row of a template carries
// its numbers. The templates are deflated too: as JSON they would weigh more than the rows of a
// short decode.
class PackedWriter {
 public:
  // Takes a group (its GroupDetail::kFigures JSON) into the run's block at `position` among the
  // run's groups; false when its template would pass the templates' budget (the caller then
  // writes it whole). Positions rise within a run.
  bool add(size_t position, const json& figures);
  // The run's block, or null when it packed none; the next add() starts the next run's.
  json finish_run();

 private:
  std::unordered_map<std::string, uint32_t> index_;  // a template's shape -> its index
  std::vector<SlotTable> templates_;
  size_t shape_bytes_ = 0;  // held by index_'s keys
  // The run's block so far.
  json new_templates_ = json::array();  // {"group", "rules"} each
  std::string head_;  // per group: its position (the gap from the last), template and rule bits
  std::string ints_;  // per integer slot: the change from the last row, zigzag varint
  std::vector<uint64_t> reals_;  // per real slot no rule gives: its bits XOR the last row's
  size_t groups_ = 0, next_position_ = 0;
};

// The reader of PackedWriter's blocks, run by run in the report's order.
class PackedReader {
 public:
  // Puts the groups of run `j`'s block ("packed", when it has one) among `groups` (its other
  // groups, in order) at their positions. An error names `where` (the run's JSON path) when the
  // block does not fit its groups; each group is checked against the schema's "group".
  Status read(const json& j, const std::string& where, std::vector<GroupReport>& groups);

 private:
  struct Template {
    SlotTable table;
    const json* group;  // in templates_text_
  };
  Status add_templates(const json& block);
  Status unpack(const json& block, std::vector<GroupReport>& packed,
                std::vector<size_t>& positions);
  Result<GroupReport> group_of(const Template& t, const std::vector<uint64_t>& row, size_t k) const;
  std::vector<Template> templates_;
  std::deque<json> templates_text_;  // each block's templates, parsed (a deque keeps them put)
};

// The page's cells of the runs it keeps no groups of. A run's "cells": "templates" (first used in
// it: {"group": a light row, "slots": the path of each slot in it}) and "rows": per group of the
// run, [its template's index, each slot's value], or null past the templates' budget. Past the
// cells' budget, runs have none.
class CellWriter {
 public:
  // Whether the page has room for another run's cells (a budget of their bytes, in report order).
  bool has_room() const;
  void add(const json& row);  // a group's light row, as the cell keeps it
  json finish_run();          // the run's "cells"; the next add() starts the next run's

 private:
  std::unordered_map<std::string, uint32_t> index_;
  size_t shape_bytes_ = 0;
  size_t written_bytes_ = 0;  // of the runs' cells so far
  json new_templates_ = json::array();
  json rows_ = json::array();
};

// What a JSON writer keeps across the runs it writes: one per report.
struct RowTables {
  PackedWriter packed;
  CellWriter cells;
};

}  // namespace qd::report::codec
