#include "qnn_debug/etdump/store_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "direct_chunks.h"
#include "h5.h"
#include "qnn_debug/base/checksum.h"
#include "schema.h"

namespace qd {
namespace {

constexpr size_t kVerifyPieceBytes = size_t{8} << 20;

// In SWMR mode HDF5 re-reads metadata whose checksum fails, 100 times by default with a doubling
// sleep (a damaged file then hangs the reader for minutes); a few attempts cover a writer's
// torn updates.
constexpr unsigned kSwmrReadAttempts = 4;

Status open_error(const std::string& path, ErrorCode code, const std::string& what) {
  std::string message = path + ": " + what;
  const std::string detail = h5::last_error_detail();
  // HDF5's advice to run h5clear is wrong here: on a killed store it can destroy the file.
  if (!detail.empty() && detail.find("h5clear") == std::string::npos) {
    message += " (HDF5: " + detail + ")";
  }
  return error(code, std::move(message));
}

// HDF5 puts its 8-byte signature at 0, 512, 1024, ... (a user block may precede it). Returns
// the superblock's offset.
std::optional<std::streamoff> hdf5_superblock(const std::string& path) {
  static constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
  std::ifstream file(path, std::ios::binary);
  char buffer[8];
  for (std::streamoff at = 0; at <= 8192; at = at == 0 ? 512 : at * 2) {
    file.clear();
    file.seekg(at);
    if (!file.read(buffer, sizeof buffer)) return std::nullopt;
    if (std::memcmp(buffer, kSignature, sizeof buffer) == 0) return at;
  }
  return std::nullopt;
}

bool has_hdf5_signature(const std::string& path) { return hdf5_superblock(path).has_value(); }

// Whether a writer has the file open, or was killed with it open: the file consistency flags of
// a version 2 or 3 superblock (the byte after the version and the two size fields) are then
// non-zero. Such a file opens only for SWMR reading; any other opens plainly, with no retries.
bool marked_open_for_writing(const std::string& path) {
  const std::optional<std::streamoff> at = hdf5_superblock(path);
  if (!at) return false;
  std::ifstream file(path, std::ios::binary);
  unsigned char head[12];
  file.seekg(*at);
  if (!file.read(reinterpret_cast<char*>(head), sizeof head)) return false;
  const unsigned version = head[8];
  return version >= 2 && head[11] != 0;
}

hid_t open_hdf5(const std::string& path) {
  if (!marked_open_for_writing(path)) return H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  h5::PropertyList access(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_metadata_read_attempts(access.get(), kSwmrReadAttempts);
  return H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, access.get());
}

Status check_openable(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    return error(ErrorCode::kNotFound, path + ": no such file");
  }
  if (S_ISDIR(info.st_mode)) {
    return error(ErrorCode::kInvalidArgument, path + ": is a directory, not a store file");
  }
  if (!std::ifstream(path, std::ios::binary)) {
    return error(ErrorCode::kIo, path + ": cannot be read (permissions?)");
  }
  if (info.st_size == 0) return error(ErrorCode::kCorrupt, path + ": empty file, not a store");
  if (!has_hdf5_signature(path)) {
    return error(ErrorCode::kCorrupt, path + ": not an HDF5 file (no HDF5 signature)");
  }
  return Status::ok();
}

hsize_t dataset_length(hid_t dataset) {
  h5::Dataspace space(H5Dget_space(dataset));
  hsize_t length = 0;
  if (!space.valid() || H5Sget_simple_extent_dims(space.get(), &length, nullptr) != 1) return 0;
  return length;
}

template <typename Row>
bool read_table(hid_t file, const char* name, hid_t type, std::vector<Row>* rows) {
  h5::Dataset dataset(H5Dopen2(file, name, H5P_DEFAULT));
  if (!dataset.valid()) return false;
  rows->assign(dataset_length(dataset.get()), Row{});
  return rows->empty() ||
         H5Dread(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows->data()) >= 0;
}

// A table stores written before it lack: absent reads as empty.
template <typename Row>
bool read_optional_table(hid_t file, const char* name, hid_t type, std::vector<Row>* rows) {
  const htri_t exists = H5Lexists(file, name, H5P_DEFAULT);
  if (exists == 0) return true;
  return exists > 0 && read_table(file, name, type, rows);
}

// Elements [first, first + count) of a one-dimensional dataset, as `type`.
bool read_slab(hid_t dataset, hid_t type, uint64_t first, uint64_t count, void* out) {
  if (count == 0) return true;
  h5::Dataspace file_space(H5Dget_space(dataset));
  const hsize_t start = first;
  const hsize_t length = count;
  if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &length, nullptr) <
      0) {
    return false;
  }
  h5::Dataspace memory_space(H5Screate_simple(1, &length, nullptr));
  return H5Dread(dataset, type, memory_space.get(), file_space.get(), H5P_DEFAULT, out) >= 0;
}

bool read_range(hid_t dataset, uint64_t offset, std::span<uint8_t> out) {
  return read_slab(dataset, H5T_NATIVE_UINT8, offset, out.size(), out.data());
}

// Tensor rows are read this many at a time, at open and on demand: a store of a million tensors
// is never held as rows (about 220 bytes each) or as decoded tensors all at once.
constexpr uint64_t kRowsPerRead = 4096;

// Consecutive intact rows of the tensor table.
struct RowRange {
  uint64_t first = 0;
  uint64_t count = 0;
};

void add_row(std::vector<RowRange>& ranges, uint64_t row) {
  if (!ranges.empty() && ranges.back().first + ranges.back().count == row) {
    ++ranges.back().count;
  } else {
    ranges.push_back({row, 1});
  }
}

// Decodes references into the /meta pool, of which it holds the whole or a window (the bytes a
// few rows point at): references are checked against the whole pool's size.
class MetaView {
 public:
  explicit MetaView(const std::vector<uint8_t>& pool) : MetaView(pool, 0, pool.size()) {}
  MetaView(const std::vector<uint8_t>& window, uint64_t window_offset, uint64_t pool_size)
      : pool_(window), base_(window_offset), pool_size_(pool_size) {}

  bool valid(const schema::MetaRef& ref) const {
    return ref.offset <= pool_size_ && ref.nbytes <= pool_size_ - ref.offset;
  }
  std::span<const uint8_t> bytes(const schema::MetaRef& ref) const {
    if (ref.nbytes == 0) return {};
    return {pool_.data() + (ref.offset - base_), static_cast<size_t>(ref.nbytes)};
  }
  std::string text(const schema::MetaRef& ref) const {
    const std::span<const uint8_t> b = bytes(ref);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  template <typename T>
  std::vector<T> values(const schema::MetaRef& ref, size_t skip = 0,
                        size_t count = SIZE_MAX) const {
    const size_t available = ref.nbytes / sizeof(T) - std::min(skip, ref.nbytes / sizeof(T));
    std::vector<T> out(std::min(count, available));
    if (!out.empty()) {
      std::memcpy(out.data(), bytes(ref).data() + skip * sizeof(T), out.size() * sizeof(T));
    }
    return out;
  }
  std::vector<std::string> name_list(const schema::MetaRef& ref) const {
    std::vector<std::string> names;
    std::string current;
    for (const uint8_t byte : bytes(ref)) {
      const char c = static_cast<char>(byte);
      if (c == '\0') {
        names.push_back(std::move(current));
        current.clear();
      } else {
        current.push_back(c);
      }
    }
    return names;
  }

 private:
  const std::vector<uint8_t>& pool_;
  uint64_t base_ = 0;
  uint64_t pool_size_ = 0;
};

// The /meta bytes the references of `rows` point at, as one window [first, end).
template <typename Row>
std::pair<uint64_t, uint64_t> meta_window(const std::vector<Row>& rows) {
  uint64_t first = UINT64_MAX, end = 0;
  for (const Row& row : rows) {
    for (const size_t at : schema::row_layout<Row>().refs) {
      schema::MetaRef ref;
      std::memcpy(&ref, reinterpret_cast<const uint8_t*>(&row) + at, sizeof ref);
      if (ref.nbytes == 0) continue;
      first = std::min(first, ref.offset);
      end = std::max(end, ref.offset + ref.nbytes);
    }
  }
  return first < end ? std::pair{first, end} : std::pair{uint64_t{0}, uint64_t{0}};
}

// What is wrong with a row, if anything: a reference past the end of /meta, or a checksum that
// does not cover what the row and its /meta bytes hold.
template <typename Row>
std::optional<std::string> row_problem(const Row& row, const MetaView& meta) {
  const schema::RowLayout& layout = schema::row_layout<Row>();
  uint32_t meta_crc = 0;
  for (const size_t at : layout.refs) {
    schema::MetaRef ref;
    std::memcpy(&ref, reinterpret_cast<const uint8_t*>(&row) + at, sizeof ref);
    if (!meta.valid(ref)) return "points past the end of /meta";
    const std::span<const uint8_t> bytes = meta.bytes(ref);
    meta_crc = crc32c_extend(meta_crc, bytes.data(), bytes.size());
  }
  if (schema::row_checksum(layout, &row, meta_crc) != row.row_crc32c) {
    return "checksum mismatch (the row or its names, handles or quantization are damaged)";
  }
  return std::nullopt;
}

}  // namespace

struct StoreReader::Impl {
  std::string path;
  h5::File file;
  h5::Dataset data;
  std::unique_ptr<DirectChunks> direct;  // null: every read goes through HDF5
  uint64_t data_size = 0;
  int64_t format_version = 0;
  StoreMetadata metadata;
  std::vector<RunInfo> runs;
  // The tensor table is indexed at open, not kept: its intact rows, and each run's, as ranges of
  // row numbers. A run's tensors are read and decoded when asked for, so memory follows the
  // runs being compared, not the store (docs/performance.md, "Many runs").
  h5::Dataset tensor_table;
  h5::Dataset meta_pool;
  uint64_t meta_size = 0;  // at open: every intact row points below it
  uint64_t tensor_count = 0;
  std::vector<RowRange> tensor_rows;
  std::unordered_map<uint32_t, std::vector<RowRange>> tensor_rows_by_run;
  std::vector<ProfileEvent> profile;
  std::vector<MemoryCheckpoint> memory;
  std::vector<GraphNode> graph;
  std::vector<std::string> shape_guesses;
  std::vector<std::string> warnings;
  bool unfinished = false;  // still marked open for writing: being written, or its writer died
  Status
      damage;  // the first damaged row: any bad row of a finished store, one before the torn tail

  Status load_metadata() {
    const auto not_a_store = [&] {
      return error(ErrorCode::kCorrupt, path +
                                            ": an HDF5 file, but not a qnn-debug store (root "
                                            "attribute 'format' is not '" +
                                            std::string(kStoreFormatName) + "')");
    };
    // The version first: format 1 kept its strings in HDF5's unchecked global heap, so none of
    // its attributes is read (h5.h, read_string_attribute).
    if (!h5::read_int64_attribute(file.get(), "format_version", &format_version)) {
      std::string format;
      if (!h5::read_string_attribute(file.get(), "format", &format) || format != kStoreFormatName) {
        return not_a_store();
      }
      return error(ErrorCode::kCorrupt, path + ": store has no 'format_version' attribute");
    }
    if (format_version < kStoreFormatVersion) {
      return error(ErrorCode::kCorrupt,
                   path + ": store format version " + std::to_string(format_version) +
                       ", an unreleased development format with unchecked strings and rows, "
                       "no longer read; capture it again");
    }
    if (format_version > kStoreFormatVersion) {
      return error(ErrorCode::kCorrupt,
                   path + ": store format version " + std::to_string(format_version) +
                       " is newer than this build reads (version " +
                       std::to_string(kStoreFormatVersion) + "); upgrade qnn-debug");
    }
    std::string format;
    if (!h5::read_string_attribute(file.get(), "format", &format) || format != kStoreFormatName) {
      return not_a_store();
    }
    h5::read_string_attribute(file.get(), "producer", &metadata.producer);
    h5::read_string_attribute(file.get(), "backend", &metadata.backend);
    h5::read_string_attribute(file.get(), "soc", &metadata.soc);
    h5::read_string_attribute(file.get(), "model", &metadata.model);
    h5::read_int64_attribute(file.get(), "created_unix_ns", &metadata.created_unix_ns);
    return Status::ok();
  }

  Status load_index() {
    std::vector<uint8_t> meta;
    std::vector<schema::RunRow> run_rows;
    std::vector<schema::ProfileRow> profile_rows;
    std::vector<schema::MemoryRow> memory_rows;
    std::vector<schema::GraphRow> graph_rows;
    const hid_t f = file.get();
    data = h5::Dataset(H5Dopen2(f, schema::kDataPool, H5P_DEFAULT));
    tensor_table = h5::Dataset(H5Dopen2(f, schema::kTensorTable, H5P_DEFAULT));
    meta_pool = h5::Dataset(H5Dopen2(f, schema::kMetaPool, H5P_DEFAULT));
    const bool ok =
        data.valid() && tensor_table.valid() && meta_pool.valid() &&
        read_table(f, schema::kMetaPool, H5T_NATIVE_UINT8, &meta) &&
        read_table(f, schema::kRunTable, schema::run_row_type(), &run_rows) &&
        read_table(f, schema::kProfileTable, schema::profile_row_type(), &profile_rows) &&
        read_table(f, schema::kMemoryTable, schema::memory_row_type(), &memory_rows) &&
        read_table(f, schema::kGraphTable, schema::graph_row_type(), &graph_rows);
    std::vector<schema::ShapeGuessRow> guess_rows;
    std::vector<schema::ProfileInstructionRow> instruction_rows;
    const auto unreadable = [&] {
      return open_error(path, ErrorCode::kCorrupt,
                        "store index is unreadable (truncated or damaged file)");
    };
    if (!ok ||
        !read_optional_table(f, schema::kShapeGuessTable, schema::shape_guess_row_type(),
                             &guess_rows) ||
        !read_optional_table(f, schema::kProfileInstructionTable,
                             schema::profile_instruction_row_type(), &instruction_rows)) {
      return unreadable();
    }
    data_size = dataset_length(data.get());
    meta_size = meta.size();
    direct = DirectChunks::open(path, data.get());
    MetaView view(meta);
    if (!index_tensors(view)) return unreadable();
    load_runs(run_rows, view);
    load_events(profile_rows, instruction_rows, memory_rows, graph_rows, view);
    load_table(schema::kShapeGuessTable, guess_rows, view, shape_guesses,
               [&](const schema::ShapeGuessRow& row) { return view.text(row.name); });
    warn_about_shape_guesses();
    return damage;
  }

  // A row with something wrong, set aside until its table is read: only then is it known whether
  // the row is part of the torn tail (every row after the last good one).
  struct BadRow {
    uint64_t index;
    std::string why;
  };

  // A finished store's rows are all whole: any bad row is damage, and the store is refused. A
  // store whose writer was killed may end in rows torn by the kill: those (the bad rows after
  // the table's last good row) are skipped, with a warning, and everything before them is read.
  // A bad row before a good one was not torn by the kill: the store is damaged
  // (docs/store-format.md, section 11).
  void settle_bad_rows(const char* table, uint64_t row_count, const std::vector<BadRow>& bad) {
    uint64_t torn_from = row_count;  // bad is in row order: walk back over the trailing bad rows
    for (auto it = bad.rbegin(); it != bad.rend() && it->index + 1 == torn_from; ++it) {
      torn_from = it->index;
    }
    for (const BadRow& row : bad) {
      const std::string what = path + ": /" + table + " row " + std::to_string(row.index);
      if (unfinished && row.index >= torn_from) {
        warnings.push_back(what + " ignored (torn when the writer stopped): " + row.why);
      } else if (damage.is_ok()) {
        damage = error(ErrorCode::kCorrupt,
                       what + " is damaged: " + row.why +
                           (unfinished ? " (a later row is intact, so the writer's stop did not "
                                         "tear it)"
                                       : ""));
      }
    }
  }

  template <typename Row>
  bool intact(uint64_t i, const Row& row, const MetaView& meta, std::vector<BadRow>& bad) {
    std::optional<std::string> problem = row_problem(row, meta);
    if (problem) bad.push_back({i, std::move(*problem)});
    return !problem;
  }

  bool read_tensor_rows(uint64_t first, uint64_t count,
                        std::vector<schema::TensorRow>& rows) const {
    rows.resize(count);
    return read_slab(tensor_table.get(), schema::tensor_row_type(), first, count, rows.data());
  }

  // The tensor a row holds, or what is wrong with the row.
  Result<TensorEntry> decode_checked(const schema::TensorRow& row, const MetaView& meta) const {
    if (std::optional<std::string> problem = row_problem(row, meta)) {
      return error(ErrorCode::kCorrupt, std::move(*problem));
    }
    if (row.rank > kMaxRank || row.handles.nbytes % sizeof(int64_t) != 0 ||
        row.quant.nbytes != uint64_t{row.quant_count} * 16) {
      return error(ErrorCode::kCorrupt, "malformed row (rank, handles or quantization size)");
    }
    TensorEntry entry = decode_tensor(row, meta);
    QD_RETURN_IF_ERROR(validate_tensor(entry, row.data_nbytes));
    if (row.data_offset > data_size || row.data_nbytes > data_size - row.data_offset) {
      return error(ErrorCode::kCorrupt,
                   "tensor " + quote_name(entry.name) + " points past the end of /data");
    }
    return entry;
  }

  // Checks every row of the tensor table, a piece at a time, and remembers where the intact
  // ones are.
  bool index_tensors(const MetaView& meta) {
    const uint64_t row_count = dataset_length(tensor_table.get());
    std::vector<schema::TensorRow> rows;
    std::vector<BadRow> bad;
    for (uint64_t first = 0; first < row_count; first += kRowsPerRead) {
      if (!read_tensor_rows(first, std::min(kRowsPerRead, row_count - first), rows)) return false;
      for (uint64_t i = 0; i < rows.size(); ++i) {
        const Result<TensorEntry> entry = decode_checked(rows[i], meta);
        if (!entry.is_ok()) {
          bad.push_back({first + i, entry.status().message()});
          continue;
        }
        add_row(tensor_rows, first + i);
        add_row(tensor_rows_by_run[rows[i].run], first + i);
        ++tensor_count;
      }
    }
    settle_bad_rows(schema::kTensorTable, row_count, bad);
    return true;
  }

  // The /meta bytes `rows` point at, from *window_first on.
  bool read_meta_window(const std::vector<schema::TensorRow>& rows, std::vector<uint8_t>& window,
                        uint64_t* window_first) const {
    const auto [first, end] = meta_window(rows);
    if (end > meta_size) return false;
    *window_first = first;
    window.resize(end - first);
    return read_slab(meta_pool.get(), H5T_NATIVE_UINT8, first, window.size(), window.data());
  }

  // Reads and decodes the tensors of `ranges`, a piece at a time, in row order. The rows were
  // intact at open: one that is not now was changed under the reader.
  Status visit_tensors(const std::vector<RowRange>& ranges,
                       const std::function<Status(TensorEntry&&)>& visit) const {
    h5::QuietErrors quiet;
    std::vector<schema::TensorRow> rows;
    std::vector<uint8_t> window;
    for (const RowRange& range : ranges) {
      for (uint64_t first = range.first; first < range.first + range.count; first += kRowsPerRead) {
        const uint64_t count = std::min(kRowsPerRead, range.first + range.count - first);
        uint64_t window_first = 0;
        if (!read_tensor_rows(first, count, rows) ||
            !read_meta_window(rows, window, &window_first)) {
          return open_error(path, ErrorCode::kCorrupt,
                            "/tensors rows " + std::to_string(first) + " to " +
                                std::to_string(first + count - 1) + " cannot be read");
        }
        const MetaView meta(window, window_first, meta_size);
        for (uint64_t i = 0; i < rows.size(); ++i) {
          Result<TensorEntry> entry = decode_checked(rows[i], meta);
          if (!entry.is_ok()) {
            return error(ErrorCode::kCorrupt,
                         path + ": /tensors row " + std::to_string(first + i) +
                             " changed since the store was opened: " + entry.status().message());
          }
          QD_RETURN_IF_ERROR(visit(std::move(entry).value()));
        }
      }
    }
    return Status::ok();
  }

  Result<std::vector<TensorEntry>> read_tensors(const std::vector<RowRange>& ranges) const {
    std::vector<TensorEntry> tensors;
    QD_RETURN_IF_ERROR(visit_tensors(ranges, [&](TensorEntry&& tensor) {
      tensors.push_back(std::move(tensor));
      return Status::ok();
    }));
    return tensors;
  }

  static TensorEntry decode_tensor(const schema::TensorRow& row, const MetaView& meta) {
    TensorEntry entry;
    entry.name = meta.text(row.name);
    entry.handles = meta.values<int64_t>(row.handles);
    entry.output_index = row.output_index;
    entry.role = static_cast<TensorRole>(std::min<uint8_t>(row.role, 2));
    entry.name_matched = row.name_matched != 0;
    entry.dtype = static_cast<DType>(row.dtype);
    entry.dims.assign(row.dims, row.dims + row.rank);
    for (size_t d = 0; d < row.rank && row.axis_order[d] >= 0; ++d) {
      entry.axis_order.push_back(static_cast<uint8_t>(row.axis_order[d]));
    }
    entry.quant.scales = meta.values<double>(row.quant, 0, row.quant_count);
    entry.quant.offsets = meta.values<int64_t>(row.quant, row.quant_count, row.quant_count);
    entry.quant.axis = row.quant_axis;
    entry.quant.bitwidth = row.quant_bitwidth;
    entry.quant.convention = static_cast<QuantConvention>(row.quant_convention);
    entry.seq = row.seq;
    entry.run_id = row.run;
    entry.capture_unix_ns = row.capture_unix_ns;
    entry.data_offset = row.data_offset;
    entry.data_nbytes = row.data_nbytes;
    entry.data_crc32c = row.data_crc32c;
    entry.stats = {row.stat_min, row.stat_max, row.stat_mean, row.stat_nan_count,
                   row.stat_inf_count};
    return entry;
  }

  void load_runs(const std::vector<schema::RunRow>& rows, const MetaView& meta) {
    std::map<uint32_t, RunInfo> by_id;
    std::set<uint32_t> begun;
    std::vector<BadRow> bad;
    for (uint64_t i = 0; i < rows.size(); ++i) {
      const schema::RunRow& row = rows[i];
      if (!intact(i, row, meta, bad)) continue;
      RunInfo& run = by_id[row.run];
      run.id = row.run;
      if (row.event == schema::kRunBegin) {
        run.name = meta.valid(row.name) ? meta.text(row.name) : "";
        run.begin_unix_ns = row.unix_ns;
        begun.insert(row.run);
      } else if (row.event == schema::kRunEnd) {
        run.complete = true;
        run.end_unix_ns = row.unix_ns;
        run.dropped_count = row.dropped_count;
      }
    }
    settle_bad_rows(schema::kRunTable, rows.size(), bad);
    for (const auto& [id, ranges] : tensor_rows_by_run) {
      RunInfo& run = by_id[id];
      run.id = id;
      for (const RowRange& range : ranges) run.tensor_count += range.count;
    }
    for (auto& [id, run] : by_id) {
      run.complete = run.complete && begun.count(id) > 0;  // an end without a begin is damage
      if (run.name.empty()) run.name = "run" + std::to_string(id);
      runs.push_back(run);
    }
  }

  // Reads every row of one table that is intact into `out`, through `decode`.
  template <typename Row, typename Out, typename Decode>
  void load_table(const char* table, const std::vector<Row>& rows, const MetaView& meta,
                  std::vector<Out>& out, Decode decode) {
    std::vector<BadRow> bad;
    for (uint64_t i = 0; i < rows.size(); ++i) {
      if (intact(i, rows[i], meta, bad)) out.push_back(decode(rows[i]));
    }
    settle_bad_rows(table, rows.size(), bad);
  }

  void load_events(const std::vector<schema::ProfileRow>& profile_rows,
                   const std::vector<schema::ProfileInstructionRow>& instruction_rows,
                   const std::vector<schema::MemoryRow>& memory_rows,
                   const std::vector<schema::GraphRow>& graph_rows, const MetaView& meta) {
    std::vector<std::pair<uint64_t, int64_t>> instructions;  // (event row, instruction id)
    load_table(schema::kProfileInstructionTable, instruction_rows, meta, instructions,
               [](const schema::ProfileInstructionRow& row) {
                 return std::pair{row.event, row.instruction_id};
               });
    const std::map<uint64_t, int64_t> instruction_of(instructions.begin(), instructions.end());
    load_table(
        schema::kProfileTable, profile_rows, meta, profile, [&](const schema::ProfileRow& row) {
          const auto event_row = static_cast<uint64_t>(&row - profile_rows.data());
          const auto id = instruction_of.find(event_row);
          return ProfileEvent{
              row.run, meta.text(row.name), meta.values<int64_t>(row.handles),           row.start,
              row.end, meta.text(row.unit), id == instruction_of.end() ? -1 : id->second};
        });
    load_table(schema::kMemoryTable, memory_rows, meta, memory, [&](const schema::MemoryRow& row) {
      return MemoryCheckpoint{row.run, meta.text(row.label), row.bytes, row.unix_ns};
    });
    load_table(schema::kGraphTable, graph_rows, meta, graph, [&](const schema::GraphRow& row) {
      return GraphNode{meta.text(row.name), meta.text(row.op_type), meta.name_list(row.inputs),
                       meta.name_list(row.outputs), meta.values<int64_t>(row.handles)};
    });
  }

  // Said wherever the store is shown (inspect, diff): a figure that depends on a guessed shape
  // (a classifier's top-k) is not given, and the user can give the shape.
  void warn_about_shape_guesses() {
    if (shape_guesses.empty()) return;
    std::string names;
    for (size_t i = 0; i < shape_guesses.size() && i < 8; ++i) {
      names += (i == 0 ? "" : ", ") + quote_name(shape_guesses[i], 60);
    }
    if (shape_guesses.size() > 8) names += ", ...";
    warnings.push_back(path + ": " + std::to_string(shape_guesses.size()) +
                       " tensors were read with a guessed shape (" + names +
                       "): no top-k figure for them; give their shapes with --net-json "
                       "(qnn-net-run) or --shape NAME=D0,D1,...");
  }

  // Bytes of `tensor` (see read_tensor_range and stream_tensor_range).
  Status read_range_of(const TensorEntry& tensor, uint64_t offset, std::span<uint8_t> out,
                       bool* predicted) const;

  std::string describe(const TensorEntry& tensor) const {
    return path + ": tensor " + quote_name(tensor.name) + " (seq " + std::to_string(tensor.seq) +
           ")";
  }
};

StoreReader::StoreReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StoreReader::~StoreReader() = default;

Result<std::unique_ptr<StoreReader>> StoreReader::open(const std::string& path) {
  QD_RETURN_IF_ERROR(check_openable(path));
  h5::QuietErrors quiet;
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->unfinished = marked_open_for_writing(path);
  impl->file = h5::File(open_hdf5(path));
  if (!impl->file.valid()) {
    return open_error(path, ErrorCode::kCorrupt,
                      "HDF5 file cannot be opened (truncated or damaged)");
  }
  QD_RETURN_IF_ERROR(impl->load_metadata());
  QD_RETURN_IF_ERROR(impl->load_index());
  return std::unique_ptr<StoreReader>(new StoreReader(std::move(impl)));
}

const std::string& StoreReader::path() const { return impl_->path; }
int64_t StoreReader::format_version() const { return impl_->format_version; }
const StoreMetadata& StoreReader::metadata() const { return impl_->metadata; }
const std::vector<RunInfo>& StoreReader::runs() const { return impl_->runs; }
uint64_t StoreReader::tensor_count() const { return impl_->tensor_count; }
const std::vector<ProfileEvent>& StoreReader::profile_events() const { return impl_->profile; }
const std::vector<MemoryCheckpoint>& StoreReader::memory_checkpoints() const {
  return impl_->memory;
}
const std::vector<GraphNode>& StoreReader::graph() const { return impl_->graph; }
const std::vector<std::string>& StoreReader::warnings() const { return impl_->warnings; }
const std::vector<std::string>& StoreReader::shape_guesses() const { return impl_->shape_guesses; }
bool StoreReader::shape_guessed(std::string_view tensor_name) const {
  const auto& names = impl_->shape_guesses;
  return std::find(names.begin(), names.end(), tensor_name) != names.end();
}

Result<std::vector<TensorEntry>> StoreReader::tensors_of_run(uint32_t run_id) const {
  const auto found = impl_->tensor_rows_by_run.find(run_id);
  if (found == impl_->tensor_rows_by_run.end()) return std::vector<TensorEntry>{};
  return impl_->read_tensors(found->second);
}

Status StoreReader::for_each_tensor(const std::function<Status(const TensorEntry&)>& visit) const {
  return impl_->visit_tensors(impl_->tensor_rows,
                              [&](TensorEntry&& tensor) { return visit(tensor); });
}

Result<std::vector<TensorEntry>> StoreReader::all_tensors() const {
  return impl_->read_tensors(impl_->tensor_rows);
}

Result<TensorEntry> StoreReader::tensor_at(uint64_t seq) const {
  // The writer numbers tensors by row, so row `seq` is the one unless rows were skipped as
  // damaged; then every row is looked at.
  const auto& ranges = impl_->tensor_rows;
  const auto range = std::find_if(ranges.begin(), ranges.end(), [&](const RowRange& r) {
    return seq >= r.first && seq - r.first < r.count;
  });
  std::optional<TensorEntry> found;
  if (range != ranges.end()) {
    QD_ASSIGN_OR_RETURN(std::vector<TensorEntry> row, impl_->read_tensors({{seq, 1}}));
    if (row.at(0).seq == seq) found = std::move(row.at(0));
  }
  if (!found) {
    QD_RETURN_IF_ERROR(for_each_tensor([&](const TensorEntry& tensor) {
      if (tensor.seq == seq && !found) found = tensor;
      return Status::ok();
    }));
  }
  if (!found) {
    return error(ErrorCode::kNotFound, path() + ": no tensor with seq " + std::to_string(seq));
  }
  return *std::move(found);
}

namespace {

Status check_range(const std::string& description, const TensorEntry& tensor, uint64_t offset,
                   uint64_t size) {
  if (offset <= tensor.data_nbytes && size <= tensor.data_nbytes - offset) return Status::ok();
  return error(ErrorCode::kInvalidArgument, description + ": byte range " + std::to_string(offset) +
                                                "+" + std::to_string(size) + " is outside its " +
                                                std::to_string(tensor.data_nbytes) + " bytes");
}

}  // namespace

Status StoreReader::Impl::read_range_of(const TensorEntry& tensor, uint64_t offset,
                                        std::span<uint8_t> out, bool* predicted) const {
  QD_RETURN_IF_ERROR(check_range(describe(tensor), tensor, offset, out.size()));
  if (direct && direct->read(tensor.data_offset + offset, out, predicted)) return Status::ok();
  h5::QuietErrors quiet;
  if (!read_range(data.get(), tensor.data_offset + offset, out)) {
    return open_error(describe(tensor), ErrorCode::kCorrupt, "data cannot be read");
  }
  return Status::ok();
}

Status StoreReader::read_tensor_range(const TensorEntry& tensor, uint64_t offset,
                                      std::span<uint8_t> out) const {
  return impl_->read_range_of(tensor, offset, out, nullptr);
}

Status StoreReader::stream_tensor_range(const TensorEntry& tensor, uint64_t offset,
                                        std::span<uint8_t> out, bool& predicted) const {
  return impl_->read_range_of(tensor, offset, out, &predicted);
}

bool StoreReader::relocate(const TensorEntry& tensor) const {
  return impl_->direct && impl_->direct->look_up(tensor.data_offset, tensor.data_nbytes);
}

Result<std::vector<uint8_t>> StoreReader::read_tensor(const TensorEntry& tensor) const {
  std::vector<uint8_t> bytes(tensor.data_nbytes);
  QD_RETURN_IF_ERROR(read_tensor_range(tensor, 0, bytes));
  const uint32_t crc = crc32c(bytes.data(), bytes.size());
  if (crc != tensor.data_crc32c) {
    return error(ErrorCode::kCorrupt, impl_->describe(tensor) + ": checksum mismatch (stored " +
                                          std::to_string(tensor.data_crc32c) + ", computed " +
                                          std::to_string(crc) + ")");
  }
  return bytes;
}

Status StoreReader::verify_tensor(const TensorEntry& tensor) const {
  std::vector<uint8_t> piece(std::min<uint64_t>(kVerifyPieceBytes, tensor.data_nbytes));
  uint32_t crc = 0;
  for (uint64_t done = 0; done < tensor.data_nbytes;) {
    const size_t size = std::min<uint64_t>(piece.size(), tensor.data_nbytes - done);
    QD_RETURN_IF_ERROR(read_tensor_range(tensor, done, std::span(piece.data(), size)));
    crc = crc32c_extend(crc, piece.data(), size);
    done += size;
  }
  if (crc != tensor.data_crc32c) {
    return error(ErrorCode::kCorrupt, impl_->describe(tensor) + ": checksum mismatch");
  }
  return Status::ok();
}

void keep_hdf5_quiet_at_exit() { H5dont_atexit(); }

}  // namespace qd
