#include "report_schema.h"

#include "qnn_debug/base/text.h"
#include "qnn_debug/jsonio/jsonio.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace qd::report {
namespace {

using nlohmann::json;

// JSON Schema's instance types as bits; an integer is also a number.
enum TypeBit : unsigned {
  kNull = 1u << 0,
  kBoolean = 1u << 1,
  kInteger = 1u << 2,
  kNumber = 1u << 3,
  kString = 1u << 4,
  kArray = 1u << 5,
  kObject = 1u << 6,
};

struct TypeName {
  const char* name;
  unsigned bit;
  const char* phrase;  // how an error message names it
};

constexpr TypeName kTypes[] = {{"integer", kInteger, "an integer"},
                               {"number", kNumber, "a number"},
                               {"string", kString, "a string"},
                               {"boolean", kBoolean, "true or false"},
                               {"array", kArray, "an array"},
                               {"object", kObject, "an object"},
                               {"null", kNull, "null"}};

unsigned type_bits(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return kNull;
    case json::value_t::boolean:
      return kBoolean;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return kInteger | kNumber;
    case json::value_t::number_float:  // 3.0 too: the readers take integers as integers only
      return kNumber;
    case json::value_t::string:
      return kString;
    case json::value_t::array:
      return kArray;
    case json::value_t::object:
      return kObject;
    default:
      return 0;  // binary and discarded values never come from JSON text
  }
}

// One schema node, compiled.
struct Rule {
  unsigned types = 0;        // allowed TypeBits; 0 allows any type
  std::vector<json> values;  // enum or const; empty allows any value
  json minimum;              // null when there is none
  std::vector<std::string> required;
  std::vector<std::pair<std::string, const Rule*>> properties;
  const Rule* items = nullptr;
  std::vector<const Rule*> one_of;
  std::vector<std::string> expected;  // each accepted alternative, for messages
};

bool is_annotation(std::string_view key) {
  return key == "$schema" || key == "$id" || key == "$defs" || key == "$comment" ||
         key == "title" || key == "description";
}

// The schema's JSON -> Rules. Everything it does not understand is refused, so a keyword added to
// the schema file is either enforced or reported by the test that compiles the schema.
class Compiler {
 public:
  Compiler(const json& root, std::deque<Rule>& rules) : root_(root), rules_(rules) {}

  Result<const Rule*> compile(const json& node, const std::string& at) {
    if (!node.is_object()) return fail(at, "a schema must be an object");
    if (const auto ref = node.find("$ref"); ref != node.end()) return reference(node, *ref, at);
    Rule& rule = rules_.emplace_back();  // a deque: earlier rules stay where they are
    for (const auto& [key, value] : node.items()) {
      QD_RETURN_IF_ERROR(keyword(rule, key, value, at + "/" + key));
    }
    describe(rule);
    return &rule;
  }

 private:
  static Status fail(const std::string& at, const std::string& what) {
    return error(ErrorCode::kInternal, "report schema #" + at + ": " + what);
  }

  // {"$ref": "#/$defs/name"} with annotations at most: the named definition, compiled once.
  Result<const Rule*> reference(const json& node, const json& ref, const std::string& at) {
    for (const auto& [key, value] : node.items()) {
      if (key != "$ref" && !is_annotation(key)) return fail(at, "$ref beside " + key);
    }
    constexpr std::string_view kPrefix = "#/$defs/";
    if (!ref.is_string() || !ref.get_ref<const std::string&>().starts_with(kPrefix)) {
      return fail(at, "$ref must name #/$defs/<name>");
    }
    const std::string name = ref.get<std::string>().substr(kPrefix.size());
    if (const auto done = compiled_.find(name); done != compiled_.end()) return done->second;
    const auto defs = root_.find("$defs");
    if (defs == root_.end() || !defs->contains(name)) return fail(at, "no definition " + name);
    if (!open_.insert(name).second) return fail(at, "recursive $ref to " + name);
    QD_ASSIGN_OR_RETURN(const Rule* rule, compile((*defs)[name], "/$defs/" + name));
    open_.erase(name);
    compiled_[name] = rule;
    return rule;
  }

  Status keyword(Rule& rule, const std::string& key, const json& value, const std::string& at) {
    if (key == "type") return types(rule, value, at);
    if (key == "enum" || key == "const") {
      if (key == "enum" && (!value.is_array() || value.empty())) return fail(at, "not a list");
      rule.values = key == "enum" ? value.get<std::vector<json>>() : std::vector<json>{value};
    } else if (key == "minimum") {
      if (!value.is_number()) return fail(at, "not a number");
      rule.minimum = value;
    } else if (key == "required") {
      if (!value.is_array()) return fail(at, "not a list");
      for (const json& name : value) {
        if (!name.is_string()) return fail(at, "not a list of names");
        rule.required.push_back(name.get<std::string>());
      }
    } else if (key == "properties") {
      if (!value.is_object()) return fail(at, "not an object");
      for (const auto& [name, schema] : value.items()) {
        QD_ASSIGN_OR_RETURN(const Rule* property, compile(schema, at + "/" + name));
        rule.properties.emplace_back(name, property);
      }
    } else if (key == "items") {
      QD_ASSIGN_OR_RETURN(rule.items, compile(value, at));
    } else if (key == "oneOf") {
      if (!value.is_array() || value.empty()) return fail(at, "not a list");
      for (size_t i = 0; i < value.size(); ++i) {
        QD_ASSIGN_OR_RETURN(const Rule* alternative,
                            compile(value[i], at + "/" + std::to_string(i)));
        rule.one_of.push_back(alternative);
      }
    } else if (!is_annotation(key)) {
      return fail(at, "keyword not supported by the report validator (report_schema.h)");
    }
    return Status::ok();
  }

  static Status types(Rule& rule, const json& value, const std::string& at) {
    const std::vector<json> names =
        value.is_array() ? value.get<std::vector<json>>() : std::vector{value};
    for (const json& name : names) {
      const auto known = std::find_if(std::begin(kTypes), std::end(kTypes),
                                      [&](const TypeName& t) { return name == t.name; });
      if (known == std::end(kTypes)) return fail(at, "unknown type " + jsonio::dump(name));
      rule.types |= known->bit;
    }
    return Status::ok();
  }

  // What a mismatch says was expected: the alternatives, the values, else the types.
  static void describe(Rule& rule) {
    for (const Rule* alternative : rule.one_of) {
      rule.expected.insert(rule.expected.end(), alternative->expected.begin(),
                           alternative->expected.end());
    }
    if (!rule.one_of.empty()) return;
    for (const json& value : rule.values) rule.expected.push_back(jsonio::dump(value));
    if (!rule.values.empty()) return;
    for (const TypeName& type : kTypes) {
      if ((rule.types & type.bit) == 0) continue;
      const bool bounded = !rule.minimum.is_null() && (type.bit & (kInteger | kNumber)) != 0;
      rule.expected.push_back(type.phrase + (bounded ? " >= " + jsonio::dump(rule.minimum) : ""));
    }
  }

  const json& root_;
  std::deque<Rule>& rules_;
  std::map<std::string, const Rule*> compiled_;
  std::set<std::string> open_;  // definitions being compiled: a cycle would never end
};

// The embedded schema, compiled on first use.
class CompiledSchema {
 public:
  CompiledSchema() {
    json schema;
    if (!jsonio::parse(kReportSchemaJson, schema)) {
      status_ = error(ErrorCode::kInternal, "the built-in report schema is not valid JSON");
      return;
    }
    Compiler compiler(schema, rules_);
    Result<const Rule*> root = compiler.compile(schema, "");
    if (root) root_ = *root;
    status_ = root.status();
    // Each definition by name (the root compiled them: these are look-ups).
    const auto defs = schema.find("$defs");
    if (defs == schema.end() || !defs->is_object()) return;
    for (auto it = defs->begin(); it != defs->end() && status_.is_ok(); ++it) {
      json ref = json::object();
      ref["$ref"] = "#/$defs/" + it.key();
      Result<const Rule*> rule = compiler.compile(ref, "");
      if (rule) definitions_[it.key()] = *rule;
      status_ = rule.status();
    }
  }
  CompiledSchema(const CompiledSchema&) = delete;
  CompiledSchema& operator=(const CompiledSchema&) = delete;

  const Rule* root() const { return root_; }
  const Rule* definition(const std::string& name) const {
    const auto found = definitions_.find(name);
    return found == definitions_.end() ? nullptr : found->second;
  }
  const Status& status() const { return status_; }

 private:
  std::deque<Rule> rules_;
  const Rule* root_ = nullptr;
  std::map<std::string, const Rule*> definitions_;
  Status status_;
};

// Where a value sits: a chain of keys and indexes on the stack, spelled out only for a message.
struct Where {
  const Where* parent = nullptr;
  std::string_view key;  // empty for an array element
  size_t index = 0;
};

std::string path_of(const Where* where) {
  if (where == nullptr) return "";
  const std::string parent = path_of(where->parent);
  if (where->key.empty()) return parent + json_path_index(where->index);
  const std::string field = json_path_field(where->key);
  return parent.empty() && field.front() == '.' ? field.substr(1) : parent + field;
}

// "a", "a or b", "a, b or c".
std::string alternatives(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  }
  return out;
}

// A value as an error message shows it: short, one line, escaped (it may be anything).
std::string shown(const json& value) {
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  constexpr size_t kLimit = 40;
  const std::string text = jsonio::dump(value, {-1, /*ascii=*/true});
  return text.size() <= kLimit ? text : text.substr(0, kLimit) + "...";
}

Status invalid(const Where* where, const std::string& what) {
  const std::string path = path_of(where);
  return error(ErrorCode::kInvalidArgument, (path.empty() ? "the report" : path) + ": " + what);
}

// The value's type and value alone, not what it holds.
bool fits(const json& value, const Rule& rule) {
  if (rule.types != 0 && (type_bits(value) & rule.types) == 0) return false;
  if (!rule.values.empty() &&
      std::find(rule.values.begin(), rule.values.end(), value) == rule.values.end()) {
    return false;
  }
  if (!rule.minimum.is_null() && value.is_number() && value < rule.minimum) return false;
  return rule.one_of.empty() || std::any_of(rule.one_of.begin(), rule.one_of.end(),
                                            [&](const Rule* r) { return fits(value, *r); });
}

Status check(const json& value, const Rule& rule, const Where* where);

Status check_object(const json& object, const Rule& rule, const Where* where) {
  for (const std::string& key : rule.required) {
    const Where here{where, key};
    if (!object.contains(key)) return invalid(&here, "missing");
  }
  for (const auto& [key, property] : rule.properties) {
    const auto it = object.find(key);
    if (it == object.end()) continue;
    const Where here{where, key};
    QD_RETURN_IF_ERROR(check(*it, *property, &here));
  }
  return Status::ok();
}

Status check(const json& value, const Rule& rule, const Where* where) {
  if (!fits(value, rule)) {
    return invalid(where, "expected " + alternatives(rule.expected) + ", got " + shown(value));
  }
  const auto alternative = std::find_if(rule.one_of.begin(), rule.one_of.end(),
                                        [&](const Rule* r) { return fits(value, *r); });
  if (alternative != rule.one_of.end()) QD_RETURN_IF_ERROR(check(value, **alternative, where));
  if (value.is_object()) QD_RETURN_IF_ERROR(check_object(value, rule, where));
  if (value.is_array() && rule.items != nullptr) {
    for (size_t i = 0; i < value.size(); ++i) {
      const Where here{where, {}, i};
      QD_RETURN_IF_ERROR(check(value[i], *rule.items, &here));
    }
  }
  return Status::ok();
}

const CompiledSchema& compiled_schema() {
  static const CompiledSchema schema;
  return schema;
}

}  // namespace

Status check_against_schema(const json& doc) {
  const CompiledSchema& schema = compiled_schema();
  QD_RETURN_IF_ERROR(schema.status());
  return check(doc, *schema.root(), nullptr);
}

Status check_against_definition(const json& value, const std::string& name) {
  const CompiledSchema& schema = compiled_schema();
  QD_RETURN_IF_ERROR(schema.status());
  const Rule* rule = schema.definition(name);
  if (rule == nullptr) return error(ErrorCode::kInternal, "report schema: no definition " + name);
  return check(value, *rule, nullptr);
}

}  // namespace qd::report
