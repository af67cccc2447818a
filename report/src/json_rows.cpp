#include "json_rows.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "json_codec.h"
#include "qnn_debug/base/json_depth.h"
#include "qnn_debug/jsonio/jsonio.h"
#include "report_schema.h"

namespace qd::report::codec {
namespace {

// ---- slots: the numbers a row carries, in the JSON's order

bool is_real_text(const json& v) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  return s == "inf" || s == "-inf" || s == "nan";
}

bool is_real_slot(const json& v) { return v.is_number_float() || is_real_text(v); }

// Integers beyond int64 (none is written today) stay in the template: a slot's change from row to
// row is an int64.
bool is_int_slot(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(INT64_MAX);
  return v.is_number_integer();
}

// Calls f(leaf, real) for every slot of `v`, depth first, object keys in order.
template <typename Json, typename F>
void for_each_slot(Json& v, bool with_ints, F&& f) {
  if (v.is_structured()) {
    for (auto& item : v) for_each_slot(item, with_ints, f);  // objects iterate their values
  } else if (is_real_slot(v)) {
    f(v, true);
  } else if (with_ints && is_int_slot(v)) {
    f(v, false);
  }
}

void append_text(std::string_view text, std::string& shape) {
  shape += std::to_string(text.size());
  shape += ':';
  shape += text;
}

// What a template is to its rows, as a string: everything of `v` but its slots, each slot a
// letter. Strings are prefixed with their length, so no two shapes read alike.
void append_shape(const json& v, bool with_ints, std::string& shape) {
  if (v.is_object()) {
    shape += '{';
    for (auto it = v.begin(); it != v.end(); ++it) {
      append_text(it.key(), shape);
      append_shape(it.value(), with_ints, shape);
    }
    shape += '}';
  } else if (v.is_array()) {
    shape += '[';
    for (const json& item : v) append_shape(item, with_ints, shape);
    shape += ']';
  } else if (is_real_slot(v)) {
    shape += 'r';
  } else if (with_ints && is_int_slot(v)) {
    shape += 'i';
  } else if (v.is_string()) {
    shape += 's';
    append_text(v.get_ref<const std::string&>(), shape);
  } else {
    shape += 'v';
    shape += v.dump();  // true, false, null, an integer kept in the template
  }
}

uint64_t bits_of(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

double double_of(uint64_t bits) {
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

int64_t int_of(const json& v) {
  return v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
}

json json_int(int64_t v) { return v < 0 ? json(v) : json(static_cast<uint64_t>(v)); }

// Each real slot's path in `v` (object keys and array indices), in for_each_slot's order: what the
// page's script fills a cell's template by (a parsed JSON number does not say whether it had a
// fraction, so the script cannot find the slots itself).
void add_slot_paths(const json& v, json& path, json& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      path.push_back(it.key());
      add_slot_paths(it.value(), path, out);
      path.erase(path.size() - 1);
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      path.push_back(i);
      add_slot_paths(v[i], path, out);
      path.erase(path.size() - 1);
    }
  } else if (is_real_slot(v)) {
    out.push_back(path);
  }
}

json slot_paths(const json& v) {
  json path = json::array(), out = json::array();
  add_slot_paths(v, path, out);
  return out;
}

// ---- the block's bytes: varints, byte planes, deflate, base64

void put_varint(uint64_t v, std::string& out) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// A signed change as an unsigned varint: small changes either way take one byte.
uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// Reads the block's bytes in order; a read past the end, or a varint longer than ten bytes,
// leaves it failed.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70 && at_ < bytes_.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(bytes_[at_++]);
      v |= uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    failed_ = true;
    return 0;
  }
  // The next `n` bytes (fewer when the bytes end: then failed).
  std::string_view take(size_t n) {
    if (n > bytes_.size() - at_) {
      failed_ = true;
      n = bytes_.size() - at_;
    }
    at_ += n;
    return bytes_.substr(at_ - n, n);
  }
  bool failed() const { return failed_; }
  std::string_view rest() const { return bytes_.substr(at_); }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
  bool failed_ = false;
};

// The reals a byte plane at a time, most significant first: a column's sign, exponent and top
// bits change little from row to row (after the XOR, many are 0), so deflate finds them.
void append_planes(const std::vector<uint64_t>& reals, std::string& out) {
  const size_t n = reals.size();
  const size_t start = out.size();
  out.resize(start + 8 * n);
  for (int plane = 0; plane < 8; ++plane) {
    char* to = &out[start + plane * n];
    const int shift = 8 * (7 - plane);
    for (size_t i = 0; i < n; ++i) to[i] = static_cast<char>(reals[i] >> shift);
  }
}

std::vector<uint64_t> read_planes(std::string_view bytes, size_t n) {
  std::vector<uint64_t> reals(n, 0);
  for (int plane = 0; plane < 8; ++plane) {
    const int shift = 8 * (7 - plane);
    for (size_t i = 0; i < n; ++i) {
      reals[i] |= uint64_t(static_cast<uint8_t>(bytes[plane * n + i])) << shift;
    }
  }
  return reals;
}

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Blocks written before base85 ("text" absent).
Result<std::string> from_base64(std::string_view text) {
  std::array<int8_t, 256> value;
  value.fill(-1);
  for (int i = 0; i < 64; ++i) value[static_cast<uint8_t>(kBase64[i])] = static_cast<int8_t>(i);
  if (text.size() % 4 != 0) return error(ErrorCode::kInvalidArgument, "data: not base64");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int padding = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      const bool pad = c == '=' && i + 4 == text.size() && k >= 2 && (k == 3 || text[i + 3] == '=');
      if (!pad && value[static_cast<uint8_t>(c)] < 0) {
        return error(ErrorCode::kInvalidArgument, "data: not base64");
      }
      padding += pad;
      v = (v << 6) | (pad ? 0 : static_cast<uint32_t>(value[static_cast<uint8_t>(c)]));
    }
    out += static_cast<char>(v >> 16);
    if (padding < 2) out += static_cast<char>(v >> 8);
    if (padding < 1) out += static_cast<char>(v);
  }
  return out;
}

// Level 6, zlib's default: on a decode's blocks level 1 was 3 to 4% larger and level 9 1% smaller
// and six to ten times slower (docs/performance.md, "A long decode's JSON").
// RFC 1924's 85 digits (Python's base64.b85encode, git's binary patches): none needs escaping
// in a JSON string, and four bytes take five, where base64 takes five and a third.
constexpr char kBase85[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

// Each four bytes, big-endian, as five digits, most significant first; a last group of n < 4
// bytes is padded with zeros and written as its first n + 1 digits.
std::string base85(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 3) / 4 * 5);
  for (size_t i = 0; i < bytes.size(); i += 4) {
    const size_t n = std::min<size_t>(4, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      v = (v << 8) | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    }
    char digits[5];
    for (int k = 4; k >= 0; --k) {
      digits[k] = kBase85[v % 85];
      v /= 85;
    }
    out.append(digits, n + 1);
  }
  return out;
}

// The inverse: a last group of m < 5 digits is padded with the highest digit and gives m - 1
// bytes (as Python's b85decode).
Result<std::string> from_base85(std::string_view text) {
  std::array<int8_t, 256> value;
  value.fill(-1);
  for (int i = 0; i < 85; ++i) value[static_cast<uint8_t>(kBase85[i])] = static_cast<int8_t>(i);
  if (text.size() % 5 == 1) return error(ErrorCode::kInvalidArgument, "data: not base85");
  std::string out;
  out.reserve(text.size() / 5 * 4 + 4);
  for (size_t i = 0; i < text.size(); i += 5) {
    const size_t m = std::min<size_t>(5, text.size() - i);
    uint64_t v = 0;
    for (size_t k = 0; k < 5; ++k) {
      const int digit = k < m ? value[static_cast<uint8_t>(text[i + k])] : 84;
      if (digit < 0) return error(ErrorCode::kInvalidArgument, "data: not base85");
      v = v * 85 + static_cast<uint64_t>(digit);
    }
    if (v > UINT32_MAX) return error(ErrorCode::kInvalidArgument, "data: not base85");
    for (size_t k = 0; k + 1 < m; ++k) out += static_cast<char>(v >> (8 * (3 - k)));
  }
  return out;
}

// A block's text form: base85 since it was written ("text"), base64 in the blocks before.
Result<std::string> block_bytes(const json& block, const char* key) {
  const std::string& text = block.at(key).get_ref<const std::string&>();
  const auto form = block.find("text");
  if (form == block.end()) return from_base64(text);
  if (*form != "base85") {
    return error(ErrorCode::kInvalidArgument, "text: neither absent (base64) nor \"base85\"");
  }
  return from_base85(text);
}

// zlib's default level with its strategy for data of small changes (Z_FILTERED: fewer string
// matches, more Huffman coding): the byte planes of changed reals are mostly such data, and deflate
// about 4% smaller than with the default strategy. Level 9 would take 1.4% more off at six times
// the time (some 0.7 s for a 16-step Qwen-class decode).
std::string deflate_bytes(const std::string& bytes) {
  z_stream stream{};
  std::string out;
  if (deflateInit2(&stream, 6, Z_DEFLATED, 15, 8, Z_FILTERED) != Z_OK) return out;
  out.resize(deflateBound(&stream, bytes.size()));
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  // One call: a block is at most kMaxBlockBytes (what a reader takes), so its size fits a uInt,
  // and the bound holds the output (Z_STREAM_END).
  const int done = deflate(&stream, Z_FINISH);
  (void)done;
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

// A block's data expands to at most this (the report file itself may hold 8 GB).
constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 30;

Result<std::string> inflate_bytes(const std::string& bytes, uint64_t size) {
  if (size > kMaxBlockBytes) {
    return error(ErrorCode::kInvalidArgument, "bytes: more than a block may hold");
  }
  std::string out(size, '\0');
  uLongf got = size;
  const int done = uncompress(reinterpret_cast<Bytef*>(out.data()), &got,
                              reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  if (done != Z_OK || got != size) {
    return error(ErrorCode::kInvalidArgument, "data: does not inflate to its bytes");
  }
  return out;
}

// Templates are few in a decode (an op's shape repeats every step); a store whose names change
// every run would make one per group. Past these budgets a group is written whole (packed) or
// left out (the page's cells), so the writer's memory stays bounded.
constexpr size_t kMaxPackedShapeBytes = size_t{64} << 20;
constexpr size_t kMaxCellShapeBytes = size_t{4} << 20;
// A page's cells: about 50 bytes a group, so 32 MB hold 1,000 steps of 400 ops and keep the page
// of 5,000 steps of 200 ops (the first 3,000 or so with cells) under 60 MB, which Chromium opens
// in a few seconds (docs/performance.md, "HTML report in the browser").
constexpr size_t kMaxCellBytes = size_t{32} << 20;

}  // namespace

// ---- the report file's packed block
//
// A block's data, before deflate: for each group, varint(its position - the position after the
// previous packed group's), varint(its template) and its template's rule bits (below); then each
// group's integer slots, zigzag varints of the change from its template's last row; then each
// group's real slots that no rule gives, their bits XOR those of the template's last row, in 8
// byte planes of all of them (most significant first). A template's first row is the template
// itself. A row's numbers are exactly the group's: the reader XORs and adds back the same bits.
//
// A rule says how one real slot follows from others in every row of its template, as the
// figures' definitions make them (rmse = sqrt(mse), mae = l1_sum / n, a group's SQNR its worst
// output's): found on the template's own numbers, checked bit for bit in each row, one bit per
// rule and row (set: the rule gives the slot, which the row then leaves out). A rule that a row
// misses costs that row its bit; a figure is never taken from a rule that does not hold for it.

namespace {

constexpr const char* kOpNames[] = {"copy", "sqrt", "divide", "subtract"};
using Op = RowOp;
using Rule = RowRule;

SlotTable slot_table(const json& group) {
  SlotTable t;
  for_each_slot(group, true, [&](const json& leaf, bool real) {
    t.real.push_back(real);
    t.last.push_back(real ? bits_of(codec::real(leaf)) : uint64_t(int_of(leaf)));
  });
  return t;
}

// A slot's value as an operand: integers (counts) as doubles.
double operand(const SlotTable& t, const std::vector<uint64_t>& row, uint32_t slot) {
  return t.real[slot] ? double_of(row[slot]) : static_cast<double>(int64_t(row[slot]));
}

// The bits rule `r` gives in `row` (IEEE 754 double operations, correctly rounded: the same bits
// wherever the report is read).
uint64_t apply(const SlotTable& t, const Rule& r, const std::vector<uint64_t>& row) {
  const double a = operand(t, row, r.a), b = operand(t, row, r.b);
  switch (r.op) {
    case Op::kCopy:
      return bits_of(a);
    case Op::kSqrt:
      return bits_of(std::sqrt(a));
    case Op::kDivide:
      return bits_of(a / b);
    case Op::kSubtract:
      break;
  }
  return bits_of(a - b);
}

// Whether slot `slot` is given by a rule whose operands lead back to `target`.
bool leads_to(const std::vector<int>& rule_of, const std::vector<Rule>& rules, uint32_t slot,
              uint32_t target) {
  if (slot == target) return true;
  if (rule_of[slot] < 0) return false;
  const Rule& r = rules[rule_of[slot]];
  return leads_to(rule_of, rules, r.a, target) ||
         ((r.op == Op::kDivide || r.op == Op::kSubtract) && leads_to(rule_of, rules, r.b, target));
}

// Binary rules are searched over every pair of slots: a template of hundreds of slots (per-channel
// figures) gets the one-operand rules only, which are looked up.
constexpr size_t kMaxSlotsForPairRules = 128;

// The real slots of a template's row by their bits, and by the bits of their square roots: where
// a copy or a square root of slot i comes from. A few candidates each (a value that repeats more
// is 0 or 1, which gives nothing away).
struct Lookups {
  std::unordered_map<uint64_t, std::vector<uint32_t>> by_bits, by_sqrt;
  explicit Lookups(const SlotTable& t) {
    for (uint32_t a = 0; a < t.real.size(); ++a) {
      if (!t.real[a]) continue;
      add(by_bits[t.last[a]], a);
      add(by_sqrt[bits_of(std::sqrt(double_of(t.last[a])))], a);
    }
  }
  static void add(std::vector<uint32_t>& slots, uint32_t a) {
    if (slots.size() < 4) slots.push_back(a);
  }
};

// The first rule that gives slot `i` of the template's row, or none. A zero or non-finite value
// follows from too much by accident to say anything.
std::optional<Rule> find_rule(const SlotTable& t, const Lookups& lookups,
                              const std::vector<int>& rule_of, const std::vector<Rule>& rules,
                              uint32_t i) {
  const std::vector<uint64_t>& row = t.last;
  const double v = double_of(row[i]);
  if (!std::isfinite(v) || v == 0) return std::nullopt;
  const auto fits = [&](const Rule& r) {
    return apply(t, r, row) == row[i] && !leads_to(rule_of, rules, r.a, i) &&
           ((r.op != Op::kDivide && r.op != Op::kSubtract) || !leads_to(rule_of, rules, r.b, i));
  };
  for (const auto& [op, lookup] :
       {std::pair{Op::kCopy, &lookups.by_bits}, {Op::kSqrt, &lookups.by_sqrt}}) {
    const auto found = lookup->find(row[i]);
    if (found == lookup->end()) continue;
    for (const uint32_t a : found->second) {
      if (a != i && fits({i, op, a, 0})) return Rule{i, op, a, 0};
    }
  }
  const uint32_t n = static_cast<uint32_t>(row.size());
  if (n > kMaxSlotsForPairRules) return std::nullopt;
  for (const Op op : {Op::kDivide, Op::kSubtract}) {
    for (uint32_t a = 0; a < n; ++a) {
      if (a == i || !t.real[a]) continue;
      for (uint32_t b = 0; b < n; ++b) {
        if (b != i && b != a && operand(t, row, b) != 0 && fits({i, op, a, b})) {
          return Rule{i, op, a, b};
        }
      }
    }
  }
  return std::nullopt;
}

// Appends `slot`'s rule after the rules of its operands (a rule's operands come before it).
void order_rule(uint32_t slot, const std::vector<int>& rule_of, const std::vector<Rule>& found,
                std::vector<bool>& placed, std::vector<Rule>& out) {
  if (rule_of[slot] < 0 || placed[slot]) return;
  placed[slot] = true;
  const Rule& r = found[rule_of[slot]];
  order_rule(r.a, rule_of, found, placed, out);
  if (r.op == Op::kDivide || r.op == Op::kSubtract) order_rule(r.b, rule_of, found, placed, out);
  out.push_back(r);
}

// The rules a new template's rows follow: each real slot's first, no slot given through itself.
std::vector<Rule> find_rules(const SlotTable& t) {
  std::vector<Rule> found;
  std::vector<int> rule_of(t.real.size(), -1);
  const Lookups lookups(t);
  for (uint32_t i = 0; i < t.real.size(); ++i) {
    if (!t.real[i]) continue;
    if (const std::optional<Rule> rule = find_rule(t, lookups, rule_of, found, i)) {
      rule_of[i] = static_cast<int>(found.size());
      found.push_back(*rule);
    }
  }
  std::vector<Rule> ordered;
  std::vector<bool> placed(t.real.size(), false);
  for (uint32_t i = 0; i < t.real.size(); ++i) order_rule(i, rule_of, found, placed, ordered);
  return ordered;
}

json rules_json(const std::vector<Rule>& rules) {
  json out = json::array();
  for (const Rule& r : rules) {
    json rule = {r.slot, kOpNames[static_cast<size_t>(r.op)], r.a};
    if (r.op == Op::kDivide || r.op == Op::kSubtract) rule.push_back(r.b);
    out.push_back(std::move(rule));
  }
  return out;
}

// A block's rules for a template of slot table `t`, checked: each gives a real slot once, from
// slots of the row that the rules before it have given or no rule gives.
Result<std::vector<Rule>> rules_from(const json& j, const SlotTable& t) {
  const auto fail = [](const std::string& what) {
    return error(ErrorCode::kInvalidArgument, "rules: " + what);
  };
  if (!j.is_array()) return fail("not a list");
  std::vector<Rule> rules;
  std::vector<bool> target(t.real.size(), false);  // given by some rule
  for (const json& r : j) {
    if (!r.is_array() || r.size() < 3 || !r[0].is_number_unsigned() || !r[1].is_string() ||
        !r[2].is_number_unsigned() || (r.size() > 3 && !r[3].is_number_unsigned())) {
      return fail("a rule is not [slot, operation, operand...]");
    }
    Rule rule;
    const auto op = std::find(std::begin(kOpNames), std::end(kOpNames), r[1].get<std::string>());
    if (op == std::end(kOpNames)) return fail("unknown operation " + r[1].get<std::string>());
    rule.op = static_cast<Op>(op - std::begin(kOpNames));
    const bool binary = rule.op == Op::kDivide || rule.op == Op::kSubtract;
    if (r.size() != (binary ? 4u : 3u)) return fail("a rule has the wrong number of operands");
    const uint64_t slot = r[0].get<uint64_t>(), a = r[2].get<uint64_t>();
    const uint64_t b = binary ? r[3].get<uint64_t>() : a;
    if (slot >= t.real.size() || a >= t.real.size() || b >= t.real.size() || !t.real[slot] ||
        target[slot] || slot == a || slot == b) {
      return fail("a rule's slots are not its template's, or a slot is given twice");
    }
    rule.slot = static_cast<uint32_t>(slot);
    rule.a = static_cast<uint32_t>(a);
    rule.b = static_cast<uint32_t>(b);
    target[slot] = true;
    rules.push_back(rule);
  }
  // An operand that a later rule gives would be read before it is known.
  std::vector<bool> given(t.real.size(), false);
  for (const Rule& rule : rules) {
    for (const uint32_t operand_slot : {rule.a, rule.b}) {
      if (target[operand_slot] && !given[operand_slot]) {
        return fail("a rule's operand is given by a later rule");
      }
    }
    given[rule.slot] = true;
  }
  return rules;
}

}  // namespace

namespace {

// A template with every slot 0 (0.0 for a real): its first row carries the values, as the bits
// of the block's columns, which deflate to about half of what their decimal text did. A reader
// takes a template's slots as the row before its first (whatever they hold), so blocks whose
// templates kept their first group's values read the same way.
json without_values(json group) {
  for_each_slot(group, true, [](json& leaf, bool real) { leaf = real ? json(0.0) : json(0); });
  return group;
}

}  // namespace

bool PackedWriter::add(size_t position, const json& figures) {
  std::string shape;
  append_shape(figures, /*with_ints=*/true, shape);
  auto found = index_.find(shape);
  if (found == index_.end()) {
    if (shape_bytes_ + shape.size() > kMaxPackedShapeBytes) return false;
    shape_bytes_ += shape.size();
    found = index_.emplace(std::move(shape), static_cast<uint32_t>(templates_.size())).first;
    SlotTable t = slot_table(figures);
    t.rules = find_rules(t);
    new_templates_.push_back({{"group", without_values(figures)}, {"rules", rules_json(t.rules)}});
    t.last.assign(t.last.size(), 0);  // what the reader takes from the template's zeros
    templates_.push_back(std::move(t));
  }
  SlotTable& t = templates_[found->second];
  const SlotTable row_table = slot_table(figures);
  const std::vector<uint64_t>& row = row_table.last;
  put_varint(position - next_position_, head_);
  put_varint(found->second, head_);
  next_position_ = position + 1;
  std::vector<bool> given(row.size(), false);
  for (size_t k = 0; k < t.rules.size(); k += 8) {
    uint8_t bits = 0;
    for (size_t b = 0; b < 8 && k + b < t.rules.size(); ++b) {
      const Rule& rule = t.rules[k + b];
      if (apply(t, rule, row) == row[rule.slot]) {
        given[rule.slot] = true;
        bits |= uint8_t(1u << b);
      }
    }
    head_ += static_cast<char>(bits);
  }
  for (size_t i = 0; i < row.size(); ++i) {
    if (!t.real[i]) {
      put_varint(zigzag(static_cast<int64_t>(row[i] - t.last[i])), ints_);
    } else if (!given[i]) {
      reals_.push_back(row[i] ^ t.last[i]);
    }
  }
  t.last = row;
  ++groups_;
  return true;
}

json PackedWriter::finish_run() {
  json block = nullptr;
  if (groups_ > 0) {
    std::string bytes = head_ + ints_;
    append_planes(reals_, bytes);
    const std::string templates = jsonio::dump(new_templates_);
    block = {{"text", "base85"},
             {"templates", base85(deflate_bytes(templates))},
             {"template_bytes", templates.size()},
             {"groups", groups_},
             {"bytes", bytes.size()},
             {"data", base85(deflate_bytes(bytes))}};
  }
  new_templates_ = json::array();
  head_.clear();
  ints_.clear();
  reals_.clear();
  groups_ = next_position_ = 0;
  return block;
}

Status PackedReader::read(const json& j, const std::string& where,
                          std::vector<GroupReport>& groups) {
  const auto block = j.find("packed");
  if (block == j.end()) return Status::ok();
  std::vector<GroupReport> packed;
  std::vector<size_t> positions;
  if (const Status unpacked = unpack(*block, packed, positions); !unpacked.is_ok()) {
    return error(unpacked.code(), where + ".packed: " + unpacked.message());
  }
  // The packed groups at their positions, the others in order around them.
  std::vector<GroupReport> merged;
  merged.reserve(groups.size() + packed.size());
  size_t other = 0;
  for (size_t k = 0; k < packed.size(); ++k) {
    while (merged.size() < positions[k]) {
      if (other == groups.size()) {
        return error(ErrorCode::kInvalidArgument,
                     where + ".packed: a group's position is past the run's groups");
      }
      merged.push_back(std::move(groups[other++]));
    }
    merged.push_back(std::move(packed[k]));
  }
  while (other < groups.size()) merged.push_back(std::move(groups[other++]));
  groups = std::move(merged);
  return Status::ok();
}

// The block's templates and rules, added to those of the runs before.
Status PackedReader::add_templates(const json& block) {
  QD_ASSIGN_OR_RETURN(const std::string deflated, block_bytes(block, "templates"));
  QD_ASSIGN_OR_RETURN(const std::string text,
                      inflate_bytes(deflated, block.at("template_bytes").get<uint64_t>()));
  QD_RETURN_IF_ERROR(check_json_depth(text, "templates"));
  json& templates = templates_text_.emplace_back();
  if (!jsonio::parse(text, templates) || !templates.is_array()) {
    return error(ErrorCode::kInvalidArgument, "templates: not a JSON array");
  }
  for (const json& item : templates) {
    const auto group = item.find("group"), rules = item.find("rules");
    if (!item.is_object() || group == item.end() || !group->is_object() || rules == item.end()) {
      return error(ErrorCode::kInvalidArgument, "templates: an entry without its group and rules");
    }
    Template t{slot_table(*group), &*group};
    QD_ASSIGN_OR_RETURN(t.table.rules, rules_from(*rules, t.table));
    templates_.push_back(std::move(t));
  }
  return Status::ok();
}

Status PackedReader::unpack(const json& block, std::vector<GroupReport>& packed,
                            std::vector<size_t>& positions) {
  QD_RETURN_IF_ERROR(add_templates(block));
  QD_ASSIGN_OR_RETURN(const std::string deflated, block_bytes(block, "data"));
  QD_ASSIGN_OR_RETURN(const std::string bytes,
                      inflate_bytes(deflated, block.at("bytes").get<uint64_t>()));
  const auto fail = [](const std::string& what) {
    return error(ErrorCode::kInvalidArgument, what);
  };
  const uint64_t count = block.at("groups").get<uint64_t>();
  if (2 * count > bytes.size()) return fail("groups: more than its bytes hold");
  Cursor cursor(bytes);
  struct Head {
    size_t which;
    std::vector<bool> given;  // by slot: a rule gives it
  };
  std::vector<Head> heads;
  size_t next_position = 0, reals = 0;
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t gap = cursor.varint(), which = cursor.varint();
    if (cursor.failed() || which >= templates_.size() || gap > bytes.size()) {
      return fail("data: a group names no template, or its bytes end early");
    }
    const SlotTable& t = templates_[which].table;
    Head head{which, std::vector<bool>(t.real.size(), false)};
    const std::string_view bits = cursor.take((t.rules.size() + 7) / 8);
    for (size_t r = 0; r < t.rules.size() && !cursor.failed(); ++r) {
      head.given[t.rules[r].slot] = (static_cast<uint8_t>(bits[r / 8]) >> (r % 8)) & 1;
    }
    for (size_t i = 0; i < t.real.size(); ++i) reals += t.real[i] && !head.given[i];
    positions.push_back(next_position + gap);
    next_position = positions.back() + 1;
    heads.push_back(std::move(head));
  }
  std::vector<std::vector<uint64_t>> rows;
  for (const Head& head : heads) {
    const SlotTable& t = templates_[head.which].table;
    std::vector<uint64_t> row(t.real.size(), 0);
    for (size_t i = 0; i < t.real.size(); ++i) {
      if (!t.real[i]) row[i] = uint64_t(unzigzag(cursor.varint()));  // the change, for now
    }
    rows.push_back(std::move(row));
  }
  if (cursor.failed() || cursor.rest().size() != 8 * reals) {
    return fail("data: its bytes do not hold its groups' numbers");
  }
  const std::vector<uint64_t> xors = read_planes(cursor.rest(), reals);
  size_t next_real = 0;
  for (size_t k = 0; k < heads.size(); ++k) {
    Template& t = templates_[heads[k].which];
    std::vector<uint64_t>& row = rows[k];
    // In the writer's order: the template's last row is the previous group's of the template.
    for (size_t i = 0; i < row.size(); ++i) {
      if (!t.table.real[i]) {
        row[i] += t.table.last[i];
      } else if (!heads[k].given[i]) {
        row[i] = t.table.last[i] ^ xors[next_real++];
      }
    }
    for (const Rule& rule : t.table.rules) {
      if (heads[k].given[rule.slot]) row[rule.slot] = apply(t.table, rule, row);
    }
    t.table.last = row;
    QD_ASSIGN_OR_RETURN(GroupReport group, group_of(t, row, k));
    packed.push_back(std::move(group));
  }
  return Status::ok();
}

// The group a row of template `t` stands for, checked as the schema checks a group.
Result<GroupReport> PackedReader::group_of(const Template& t, const std::vector<uint64_t>& row,
                                           size_t k) const {
  json group = *t.group;
  size_t i = 0;
  for_each_slot(group, true, [&](json& leaf, bool real) {
    leaf = real ? json_real(double_of(row[i])) : json_int(int64_t(row[i]));
    ++i;
  });
  if (const Status fits = check_against_definition(group, "group"); !fits.is_ok()) {
    return error(ErrorCode::kInvalidArgument,
                 "packed group " + std::to_string(k) + ": " + fits.message());
  }
  return group_from(group);
}

// ---- the page's cells

void CellWriter::add(const json& row) {
  std::string shape;
  append_shape(row, /*with_ints=*/false, shape);
  auto found = index_.find(shape);
  if (found == index_.end()) {
    if (shape_bytes_ + shape.size() > kMaxCellShapeBytes) {
      rows_.push_back(nullptr);
      return;
    }
    shape_bytes_ += shape.size();
    found = index_.emplace(std::move(shape), static_cast<uint32_t>(index_.size())).first;
    new_templates_.push_back({{"group", row}, {"slots", slot_paths(row)}});
  }
  json cell = json::array({found->second});
  for_each_slot(row, false, [&](const json& leaf, bool) { cell.push_back(leaf); });
  rows_.push_back(std::move(cell));
}

bool CellWriter::has_room() const { return written_bytes_ < kMaxCellBytes; }

json CellWriter::finish_run() {
  json cells = {{"templates", std::move(new_templates_)}, {"rows", std::move(rows_)}};
  written_bytes_ += jsonio::dump(cells).size();
  new_templates_ = json::array();
  rows_ = json::array();
  return cells;
}

}  // namespace qd::report::codec
