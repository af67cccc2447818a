#include "etrecord.h"

#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "qnn_debug/base/json_depth.h"
#include "qnn_debug/base/text.h"
#include "qnn_debug/etdump/store.h"
#include "qnn_debug/jsonio/jsonio.h"
#include "zip_archive.h"

namespace qd::importers {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxMemberBytes = uint64_t{256} << 20;  // JSON maps, never this large

// Reads the JSON members of one ETRecord, naming the file and the JSON path in every error.
class MapReader {
 public:
  explicit MapReader(const std::string& path) : label_("etrecord " + quote_name(path)) {}

  Status fail(const std::string& where, const std::string& what) const {
    return error(ErrorCode::kCorrupt, label_ + ": " + where + ": " + what);
  }

  // The member as a JSON object; an ETRecord without it has no such handles: {}.
  Result<json> member(const ZipArchive& zip, std::string_view name) const {
    const ZipEntry* entry = zip.find(name);
    if (entry == nullptr) return json::object();
    QD_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, zip.read_all(*entry, kMaxMemberBytes));
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const std::string where = std::string(name);
    QD_RETURN_IF_ERROR(check_json_depth(text, label_ + ": " + where));
    json parsed;
    if (!jsonio::parse(text, parsed)) return fail(where, "not valid JSON");
    if (!parsed.is_object()) return fail(where, "expected a JSON object");
    return parsed;
  }

  Result<int32_t> instruction_id(const std::string& key, const std::string& where) const {
    int32_t id = 0;
    const auto [end, failure] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (failure != std::errc() || end != key.data() + key.size() || id < 0) {
      return fail(where, "key " + quote_name(key) + " is not an instruction id");
    }
    return id;
  }

  // One debug handle: ExecuTorch numbers them from 0, so a negative one (or one past int64) is
  // damage, not a handle that merely matches nothing.
  Result<int64_t> handle(const json& value, const std::string& where) const {
    if (!value.is_number_integer()) return fail(where, "expected an integer debug handle");
    if (value.is_number_unsigned() ? value.get<uint64_t>() > uint64_t(INT64_MAX)
                                   : value.get<int64_t>() < 0) {
      return fail(where, "debug handle " + jsonio::dump(value) +
                             " is not a handle (handles are 0 or more)");
    }
    return value.get<int64_t>();
  }

  // A handle (an integer) or a list of them.
  Result<std::vector<int64_t>> handles(const json& value, const std::string& where) const {
    if (value.is_number_integer()) {
      QD_ASSIGN_OR_RETURN(const int64_t one, handle(value, where));
      return std::vector<int64_t>{one};
    }
    if (!value.is_array()) return fail(where, "expected a debug handle or a list of them");
    std::vector<int64_t> out;
    for (size_t i = 0; i < value.size(); ++i) {
      QD_ASSIGN_OR_RETURN(const int64_t one, handle(value[i], where + json_path_index(i)));
      out.push_back(one);
    }
    return out;
  }

  // {instruction id: value}, each value read by `read(value, where)`.
  template <typename Read>
  Status for_each_instruction(const json& method_map, const std::string& where, Read read) const {
    if (!method_map.is_object()) return fail(where, "expected an object");
    for (const auto& [key, value] : method_map.items()) {
      QD_ASSIGN_OR_RETURN(const int32_t id, instruction_id(key, where));
      QD_RETURN_IF_ERROR(read(id, value, where + "[" + quote_name(key) + "]"));
    }
    return Status::ok();
  }

 private:
  std::string label_;
};

Result<std::string> pick_method(const json& maps, std::string_view wanted,
                                const MapReader& reader) {
  if (!wanted.empty()) {
    if (maps.empty() || maps.contains(std::string(wanted))) return std::string(wanted);
    return reader.fail("method " + quote_name(wanted), "not in the ETRecord's maps");
  }
  if (maps.size() == 1) return maps.begin().key();
  return std::string("forward");
}

}  // namespace

Result<EtrecordHandles> EtrecordHandles::load(const std::string& path, std::string_view method) {
  const MapReader reader(path);
  QD_ASSIGN_OR_RETURN(const ZipArchive zip, ZipArchive::open(path));
  QD_ASSIGN_OR_RETURN(const json instruction_maps, reader.member(zip, "debug_handle_map"));
  QD_ASSIGN_OR_RETURN(const json delegate_maps, reader.member(zip, "delegate_map"));
  EtrecordHandles out;
  QD_ASSIGN_OR_RETURN(
      out.method_,
      pick_method(delegate_maps.empty() ? instruction_maps : delegate_maps, method, reader));
  const std::string key = quote_name(out.method_);
  if (auto it = instruction_maps.find(out.method_); it != instruction_maps.end()) {
    QD_RETURN_IF_ERROR(reader.for_each_instruction(
        *it, "debug_handle_map[" + key + "]",
        [&](int32_t id, const json& value, const std::string& where) -> Status {
          QD_ASSIGN_OR_RETURN(out.instructions_[id], reader.handles(value, where));
          return Status::ok();
        }));
  }
  if (auto it = delegate_maps.find(out.method_); it != delegate_maps.end()) {
    QD_RETURN_IF_ERROR(reader.for_each_instruction(
        *it, "delegate_map[" + key + "]",
        [&](int32_t id, const json& value, const std::string& where) -> Status {
          const auto map = value.is_object() ? value.find("delegate_map") : value.end();
          if (map == value.end() || !map->is_object()) {
            return reader.fail(where, "expected {\"name\": ..., \"delegate_map\": {...}}");
          }
          Identifiers& identifiers = out.delegates_[id];
          for (const auto& [identifier, handles] : map->items()) {
            QD_ASSIGN_OR_RETURN(
                identifiers[identifier],
                reader.handles(handles, where + ".delegate_map[" + quote_name(identifier) + "]"));
          }
          return Status::ok();
        }));
  }
  out.index_unique_identifiers();
  return out;
}

void EtrecordHandles::index_unique_identifiers() {
  std::map<std::string, int, std::less<>> occurrences;
  for (const auto& [id, identifiers] : delegates_) {
    for (const auto& entry : identifiers) ++occurrences[entry.first];
  }
  for (const auto& [id, identifiers] : delegates_) {
    for (const auto& [identifier, handles] : identifiers) {
      if (occurrences[identifier] == 1) unique_identifiers_.emplace(identifier, handles);
    }
  }
}

const std::vector<int64_t>* EtrecordHandles::instruction(int32_t instruction_id) const {
  const auto it = instructions_.find(instruction_id);
  return it == instructions_.end() ? nullptr : &it->second;
}

const std::vector<int64_t>* EtrecordHandles::delegate(int32_t instruction_id,
                                                      std::string_view identifier) const {
  if (const auto it = delegates_.find(instruction_id); it != delegates_.end()) {
    const auto found = it->second.find(identifier);
    return found == it->second.end() ? nullptr : &found->second;
  }
  const auto found = unique_identifiers_.find(identifier);
  return found == unique_identifiers_.end() ? nullptr : &found->second;
}

size_t EtrecordHandles::delegate_identifier_count() const {
  size_t count = 0;
  for (const auto& entry : delegates_) count += entry.second.size();
  return count;
}

}  // namespace qd::importers
