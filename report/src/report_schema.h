// docs/report-schema.json as the checks a saved report must pass. The schema file is embedded at
// build time (embed_schema.cmake) and interpreted here, so it stays the one description of a
// report: a field added to or required by the schema is checked without touching this code.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "qnn_debug/base/status.h"

namespace qd::report {

// The text of docs/report-schema.json (generated report_schema_text.cpp).
extern const char* const kReportSchemaJson;

// Checks `doc` against the embedded schema. The first field that does not fit is a
// kInvalidArgument error naming its path, e.g. `runs[0].groups[3].sqnr_db: expected a number,
// "inf", "-inf", "nan" or null, got "loud"` or `summary.verdict: missing`. kInternal for every
// document when the schema uses a keyword this interpreter does not know, so a schema edit it
// cannot enforce fails every test that loads a report.
//
// The interpreter knows the part of JSON Schema 2020-12 that the report schema uses: type, enum,
// const, required, properties, items, oneOf, minimum, and $ref to "#/$defs/<name>"; annotations
// ($schema, $id, $defs, title, description, $comment) are ignored. Integers must be written as
// JSON integers (no fraction or exponent). oneOf alternatives are told apart by their type and
// values: a value is checked in depth against the first alternative it fits.
Status check_against_schema(const nlohmann::json& doc);
// Checks `value` against one of the schema's definitions ("#/$defs/<name>"): a part of a report
// the document did not hold as JSON (a packed group, json_rows.h). Errors name its path within
// `value`.
Status check_against_definition(const nlohmann::json& value, const std::string& name);

}  // namespace qd::report
