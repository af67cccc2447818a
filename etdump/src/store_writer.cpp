#include "qnn_debug/etdump/store_writer.h"

#include "qnn_debug/base/output_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "h5.h"
#include "qnn_debug/base/checksum.h"
#include "qnn_debug/base/output_file.h"
#include "schema.h"
#include "tensor_stats.h"

namespace qd {
namespace {

// Pools hold raw native bytes and the format says little-endian; every target (x86-64, ARM64
// Android) is. A big-endian port must byte-swap first.
static_assert(std::endian::native == std::endian::little, "the store format is little-endian");

constexpr hsize_t kDataChunkBytes = hsize_t{1} << 20;
constexpr hsize_t kMetaChunkBytes = hsize_t{64} << 10;
constexpr hsize_t kRowsPerChunk = 256;
// Tensors at least this large bypass the staging buffer (one copy less) and go to HDF5 in
// pieces: few-MiB writes reach the disk's speed, a single 100 MiB write does not
// (docs/performance.md).
constexpr size_t kDirectWriteBytes = size_t{64} << 10;
constexpr size_t kWritePieceBytes = size_t{8} << 20;
constexpr size_t kStagingFlushBytes = size_t{4} << 20;

Status hdf5_error(const std::string& path, const std::string& what) {
  std::string detail = h5::last_error_detail();
  std::string message = path + ": " + what;
  if (!detail.empty()) message += " (HDF5: " + detail + ")";
  return error(ErrorCode::kIo, std::move(message));
}

h5::Dataset create_extendible(hid_t file, const char* name, hid_t type, hsize_t chunk,
                              int deflate_level) {
  const hsize_t initial = 0;
  const hsize_t unlimited = H5S_UNLIMITED;
  h5::Dataspace space(H5Screate_simple(1, &initial, &unlimited));
  h5::PropertyList create(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(create.get(), 1, &chunk);
  if (deflate_level > 0) H5Pset_deflate(create.get(), static_cast<unsigned>(deflate_level));
  h5::PropertyList access(H5Pcreate(H5P_DATASET_ACCESS));
  // Room for a few partially filled chunks; fully written chunks are evicted first (w0 = 1).
  H5Pset_chunk_cache(access.get(), 521, 8 * kDataChunkBytes, 1.0);
  return h5::Dataset(
      H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, create.get(), access.get()));
}

// Grows a 1-D dataset to `at + count` and writes `count` elements at `at`.
bool extend_and_write(hid_t dataset, hid_t memory_type, hsize_t at, hsize_t count,
                      const void* buffer) {
  if (count == 0) return true;
  const hsize_t new_size = at + count;
  if (H5Dset_extent(dataset, &new_size) < 0) return false;
  h5::Dataspace file_space(H5Dget_space(dataset));
  if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &at, nullptr, &count, nullptr) < 0) {
    return false;
  }
  h5::Dataspace memory_space(H5Screate_simple(1, &count, nullptr));
  return H5Dwrite(dataset, memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT,
                  buffer) >= 0;
}

// An append-only byte dataset. Small appends collect in a staging buffer; large ones are written
// through. Offsets are final as soon as append() returns.
class BytePool {
 public:
  BytePool() = default;
  explicit BytePool(h5::Dataset dataset) : dataset_(std::move(dataset)) {}

  bool append(std::span<const uint8_t> bytes, uint64_t* offset) {
    *offset = end();
    if (bytes.size() < kDirectWriteBytes) {
      staging_.insert(staging_.end(), bytes.begin(), bytes.end());
      return staging_.size() < kStagingFlushBytes || flush_staging();
    }
    if (!flush_staging()) return false;
    for (size_t done = 0; done < bytes.size(); done += kWritePieceBytes) {
      const size_t piece = std::min(kWritePieceBytes, bytes.size() - done);
      if (!write_at_end(bytes.data() + done, piece)) return false;
    }
    return true;
  }

  bool flush_staging() {
    if (staging_.empty()) return true;
    const bool ok = write_at_end(staging_.data(), staging_.size());
    staging_.clear();
    return ok;
  }

  uint64_t end() const { return written_ + staging_.size(); }
  hid_t id() const { return dataset_.get(); }

 private:
  bool write_at_end(const uint8_t* bytes, size_t size) {
    if (!extend_and_write(dataset_.get(), H5T_NATIVE_UINT8, written_, size, bytes)) return false;
    written_ += size;
    return true;
  }

  h5::Dataset dataset_;
  std::vector<uint8_t> staging_;
  uint64_t written_ = 0;
};

// An append-only table of fixed-size rows, written only at commit.
template <typename Row>
class RowTable {
 public:
  RowTable() = default;
  RowTable(h5::Dataset dataset, hid_t type) : dataset_(std::move(dataset)), type_(type) {}

  // Seals the row with its checksum over `*meta_crc` (its /meta bytes, put in field order since
  // the previous row) and its fields; starts the next row's meta CRC.
  void append(Row row, uint32_t* meta_crc) {
    row.row_crc32c = schema::row_checksum(schema::row_layout<Row>(), &row, *meta_crc);
    *meta_crc = 0;
    pending_.push_back(row);
  }
  bool write_pending() {
    const bool ok =
        extend_and_write(dataset_.get(), type_, written_, pending_.size(), pending_.data());
    if (ok) written_ += pending_.size();
    pending_.clear();
    return ok;
  }
  bool has_pending() const { return !pending_.empty(); }
  uint64_t size() const { return written_ + pending_.size(); }

 private:
  h5::Dataset dataset_;
  hid_t type_ = H5I_INVALID_HID;
  std::vector<Row> pending_;
  uint64_t written_ = 0;
};

// Refuses writes that would run the file system (or RLIMIT_FSIZE) out of space. HDF5 1.10 hit
// by ENOSPC mid-flush leaves a superblock whose end-of-file lies past the real end: the file no
// longer opens, and closing it crashes at exit. Stopping while there is room keeps everything
// committed so far readable.
class SpaceGuard {
 public:
  // `path` names the store in messages; `building` is the file whose folder's space counts.
  SpaceGuard(std::string path, std::string building)
      : path_(std::move(path)), building_(std::move(building)) {}

  // Counts `bytes` against the known free space, asking the system again every few MiB (other
  // processes use the disk too) and whenever the known space runs short.
  Status reserve(uint64_t bytes, hid_t file) {
    const uint64_t needed = bytes + kMetadataMargin + bytes / 64;
    if (needed > known_free_ || since_refresh_ + bytes >= kRefreshEvery) refresh(file);
    if (needed > known_free_) {
      return error(ErrorCode::kIo, path_ + ": no space left for " + std::to_string(bytes) +
                                       " more bytes (" + std::to_string(known_free_) +
                                       " available); the store is intact up to the last flush");
    }
    known_free_ -= bytes;
    since_refresh_ += bytes;
    return Status::ok();
  }

 private:
  static constexpr uint64_t kMetadataMargin = uint64_t{4} << 20;  // HDF5's own flush writes
  static constexpr uint64_t kRefreshEvery = uint64_t{4} << 20;

  void refresh(hid_t file) {
    since_refresh_ = 0;
    known_free_ = UINT64_MAX;
    struct statvfs fs {};
    const std::string dir = std::filesystem::path(building_).parent_path().string();
    if (statvfs(dir.empty() ? "." : dir.c_str(), &fs) == 0) {
      known_free_ = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    }
    rlimit limit{};
    hsize_t file_size = 0;
    if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        H5Fget_filesize(file, &file_size) >= 0) {
      const uint64_t cap = limit.rlim_cur > file_size ? limit.rlim_cur - file_size : 0;
      known_free_ = std::min<uint64_t>(known_free_, cap);
    }
  }

  std::string path_;
  std::string building_;
  uint64_t known_free_ = 0;
  uint64_t since_refresh_ = 0;
};

std::span<const uint8_t> as_bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

template <typename T>
std::span<const uint8_t> as_bytes(const std::vector<T>& values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(T)};
}

// H5Fcreate opens the empty file prepare() reserved with O_TRUNC, which ext4 (auto_da_alloc)
// takes for a file being rewritten in place: the next close of the file then pushes all its dirty
// pages to the disk first. At the end of a 512 MiB import that was 0.15-0.3 s, for a writer that
// leaves durability to the page cache (WriterOptions::durable; the durable writer has synced
// before it closes). Closing another descriptor of the file now, while it is empty, spends that
// push on nothing.
void spend_the_truncate_flush(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) ::close(fd);
}

}  // namespace

struct StoreWriter::Impl {
  // First member, destroyed last: an unpublished staging file goes only after HDF5 closed it.
  std::optional<StagedOutput> publish_at_close;  // targets written in place (device, FIFO, -)
  std::string path;
  WriterOptions options;
  h5::File file;
  BytePool data;
  BytePool meta;
  RowTable<schema::TensorRow> tensors;
  RowTable<schema::RunRow> runs;
  RowTable<schema::ProfileRow> profile;
  RowTable<schema::MemoryRow> memory;
  RowTable<schema::GraphRow> graph;
  RowTable<schema::ShapeGuessRow> shape_guesses;
  RowTable<schema::ProfileInstructionRow> profile_instructions;

  std::optional<uint32_t> current_run;
  uint32_t next_run = 0;
  uint64_t run_tensor_count = 0;
  uint64_t tensors_appended = 0;
  uint32_t row_meta_crc = 0;  // the /meta bytes put for the row being built, in field order
  std::unique_ptr<SpaceGuard> space;
  Status failure;            // sticky: after an I/O error nothing more is written
  bool hdf5_failed = false;  // HDF5 itself failed a write: its in-memory state is suspect
  bool closed = false;

  Status check_usable() const {
    if (closed) return error(ErrorCode::kState, path + ": store writer is closed");
    return failure;
  }

  Status fail(const std::string& what) {
    failure = hdf5_error(path, what);
    hdf5_failed = true;
    return failure;
  }

  Status reserve_space(uint64_t bytes) {
    Status status = space->reserve(bytes, file.get());
    if (!status.is_ok()) failure = status;
    return status;
  }

  // Asks the kernel to start writing the flushed bytes to disk now, without waiting. Otherwise
  // nothing reaches the disk until the dirty-page threshold (gigabytes) or the fsync at close,
  // so the writer's CPU work and the disk never overlap, and a phone holds the whole capture
  // in dirty memory.
  void start_writeback() {
#if defined(__linux__)
    void* handle = nullptr;
    if (H5Fget_vfd_handle(file.get(), H5P_DEFAULT, &handle) >= 0 && handle != nullptr) {
      sync_file_range(*static_cast<int*>(handle), 0, 0, SYNC_FILE_RANGE_WRITE);
    }
#endif
  }

  // After HDF5 failed a write, closing would flush (and truncate) into the same error, and
  // HDF5 1.10 then crashes at process exit on the half-closed file. Swapping its descriptor for
  // an anonymous in-memory file lets it close cleanly; the file on disk keeps its last committed
  // state.
  void detach_from_disk() {
    void* handle = nullptr;
    if (H5Fget_vfd_handle(file.get(), H5P_DEFAULT, &handle) < 0 || handle == nullptr) return;
    const int scratch = memfd_create("qnn-debug-detached-store", MFD_CLOEXEC);
    if (scratch < 0) return;
    dup2(scratch, *static_cast<int*>(handle));
    ::close(scratch);
  }

  bool put_meta(std::span<const uint8_t> bytes, schema::MetaRef* ref) {
    ref->nbytes = bytes.size();
    row_meta_crc = crc32c_extend(row_meta_crc, bytes.data(), bytes.size());
    return meta.append(bytes, &ref->offset);
  }

  bool put_name_list(const std::vector<std::string>& names, schema::MetaRef* ref) {
    std::string joined;
    for (const std::string& name : names) {
      joined += name;
      joined.push_back('\0');
    }
    return put_meta(as_bytes(joined), ref);
  }

  bool put_quant(const Quantization& quant, schema::MetaRef* ref) {
    const auto scales = as_bytes(quant.scales);
    const auto offsets = as_bytes(quant.offsets);
    std::vector<uint8_t> bytes(scales.begin(), scales.end());
    bytes.insert(bytes.end(), offsets.begin(), offsets.end());
    return put_meta(bytes, ref);
  }

  Status ensure_run(int64_t unix_ns) {
    if (current_run) return Status::ok();
    return begin_run("run" + std::to_string(next_run), unix_ns).status();
  }

  Result<uint32_t> begin_run(std::string_view name, int64_t unix_ns) {
    schema::RunRow row{};
    row.run = next_run;
    row.event = schema::kRunBegin;
    row.unix_ns = unix_ns;
    if (!put_meta(as_bytes(name), &row.name)) return fail("cannot write run name");
    runs.append(row, &row_meta_crc);
    current_run = next_run++;
    run_tensor_count = 0;
    return *current_run;
  }

  schema::TensorRow tensor_row(const TensorRecord& record, int64_t capture_unix_ns) const {
    schema::TensorRow row{};
    row.seq = tensors_appended;
    row.capture_unix_ns = capture_unix_ns;
    row.run = *current_run;
    row.dtype = static_cast<uint32_t>(record.dtype);
    row.output_index = record.output_index;
    row.rank = static_cast<uint8_t>(record.dims.size());
    std::copy(record.dims.begin(), record.dims.end(), row.dims);
    std::fill(std::begin(row.axis_order), std::end(row.axis_order), int8_t{-1});
    std::copy(record.axis_order.begin(), record.axis_order.end(), row.axis_order);
    row.role = static_cast<uint8_t>(record.role);
    row.name_matched = record.name_matched ? 1 : 0;
    row.quant_axis = record.quant.axis;
    row.quant_count = static_cast<uint32_t>(record.quant.scales.size());
    row.quant_convention = static_cast<uint8_t>(record.quant.convention);
    row.quant_bitwidth = record.quant.bitwidth;
    return row;
  }
};

StoreWriter::StoreWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StoreWriter::~StoreWriter() {
  if (impl_) (void)close();
}

namespace {}  // namespace

Result<std::unique_ptr<StoreWriter>> StoreWriter::create(const std::string& path,
                                                         const StoreMetadata& metadata,
                                                         const WriterOptions& options) {
  h5::QuietErrors quiet;
  // Built under a staging name and published once it opens (docs/output-files.md), so a kill
  // while it is being created leaves nothing (or the previous file) at the path, never a store
  // that cannot be opened. Declared first: the file is closed before the staging name goes.
  QD_ASSIGN_OR_RETURN(StagedOutput staged, StagedOutput::prepare(path, "creating"));
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = options;
  impl->space = std::make_unique<SpaceGuard>(path, staged.staging_path());

  h5::PropertyList access(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_libver_bounds(access.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);  // SWMR needs it
  impl->file =
      h5::File(H5Fcreate(staged.staging_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()));
  if (!impl->file.valid()) return hdf5_error(path, "cannot create store file");
  spend_the_truncate_flush(staged.staging_path());
  const hid_t file = impl->file.get();

  const bool attributes_ok =
      h5::write_fixed_string_attribute(file, "format", std::string(kStoreFormatName)) &&
      h5::write_int64_attribute(file, "format_version", kStoreFormatVersion) &&
      h5::write_fixed_string_attribute(file, "producer", metadata.producer) &&
      h5::write_fixed_string_attribute(file, "backend", metadata.backend) &&
      h5::write_fixed_string_attribute(file, "soc", metadata.soc) &&
      h5::write_fixed_string_attribute(file, "model", metadata.model) &&
      h5::write_int64_attribute(file, "created_unix_ns", metadata.created_unix_ns);
  if (!attributes_ok) return hdf5_error(path, "cannot write store metadata");

  const int deflate = options.deflate_level;
  impl->data = BytePool(
      create_extendible(file, schema::kDataPool, H5T_NATIVE_UINT8, kDataChunkBytes, deflate));
  impl->meta = BytePool(
      create_extendible(file, schema::kMetaPool, H5T_NATIVE_UINT8, kMetaChunkBytes, deflate));
  auto table = [&](const char* name, hid_t type) {
    return create_extendible(file, name, type, kRowsPerChunk, 0);
  };
  h5::Dataset tensors = table(schema::kTensorTable, schema::tensor_row_type());
  h5::Dataset runs = table(schema::kRunTable, schema::run_row_type());
  h5::Dataset profile = table(schema::kProfileTable, schema::profile_row_type());
  h5::Dataset memory = table(schema::kMemoryTable, schema::memory_row_type());
  h5::Dataset graph = table(schema::kGraphTable, schema::graph_row_type());
  h5::Dataset guesses = table(schema::kShapeGuessTable, schema::shape_guess_row_type());
  h5::Dataset instructions =
      table(schema::kProfileInstructionTable, schema::profile_instruction_row_type());
  if (impl->data.id() < 0 || impl->meta.id() < 0 || !tensors.valid() || !runs.valid() ||
      !profile.valid() || !memory.valid() || !graph.valid() || !guesses.valid() ||
      !instructions.valid()) {
    return hdf5_error(path, "cannot create store datasets");
  }
  impl->tensors = RowTable<schema::TensorRow>(std::move(tensors), schema::tensor_row_type());
  impl->runs = RowTable<schema::RunRow>(std::move(runs), schema::run_row_type());
  impl->profile = RowTable<schema::ProfileRow>(std::move(profile), schema::profile_row_type());
  impl->memory = RowTable<schema::MemoryRow>(std::move(memory), schema::memory_row_type());
  impl->graph = RowTable<schema::GraphRow>(std::move(graph), schema::graph_row_type());
  impl->shape_guesses =
      RowTable<schema::ShapeGuessRow>(std::move(guesses), schema::shape_guess_row_type());
  impl->profile_instructions = RowTable<schema::ProfileInstructionRow>(
      std::move(instructions), schema::profile_instruction_row_type());

  if (H5Fstart_swmr_write(file) < 0) return hdf5_error(path, "cannot start SWMR writing");
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) return hdf5_error(path, "cannot write store file");
  if (staged.in_place()) {
    // A device or FIFO cannot hold a store being written: it receives the finished file.
    impl->publish_at_close.emplace(std::move(staged));
  } else {
    QD_RETURN_IF_ERROR(staged.publish(options.durable));
  }
  return std::unique_ptr<StoreWriter>(new StoreWriter(std::move(impl)));
}

Result<uint32_t> StoreWriter::begin_run(std::string_view name, int64_t unix_ns) {
  QD_RETURN_IF_ERROR(impl_->check_usable());
  if (impl_->current_run) {
    return error(ErrorCode::kState, impl_->path + ": begin_run while run " +
                                        std::to_string(*impl_->current_run) + " is open");
  }
  h5::QuietErrors quiet;
  return impl_->begin_run(name, unix_ns);
}

Status StoreWriter::end_run(int64_t unix_ns, uint64_t dropped_count) {
  QD_RETURN_IF_ERROR(impl_->check_usable());
  if (!impl_->current_run) return error(ErrorCode::kState, impl_->path + ": end_run with no run");
  schema::RunRow row{};
  row.run = *impl_->current_run;
  row.event = schema::kRunEnd;
  row.unix_ns = unix_ns;
  row.tensor_count = impl_->run_tensor_count;
  row.dropped_count = dropped_count;
  impl_->runs.append(row, &impl_->row_meta_crc);
  impl_->current_run.reset();
  return Status::ok();
}

bool StoreWriter::in_run() const { return impl_->current_run.has_value(); }

TensorDigest digest_tensor(const TensorRecord& record, std::span<const uint8_t> data) {
  return {compute_stats(record, data.data()), crc32c(data.data(), data.size())};
}

Status StoreWriter::append_tensor(const TensorRecord& record, std::span<const uint8_t> data,
                                  int64_t capture_unix_ns, const TensorDigest* digest) {
  QD_RETURN_IF_ERROR(impl_->check_usable());
  QD_RETURN_IF_ERROR(validate_tensor(record, data.size()));
  h5::QuietErrors quiet;
  QD_RETURN_IF_ERROR(impl_->ensure_run(capture_unix_ns));

  QD_RETURN_IF_ERROR(
      impl_->reserve_space(data.size() + record.name.size() + sizeof(schema::TensorRow)));
  schema::TensorRow row = impl_->tensor_row(record, capture_unix_ns);
  const TensorDigest computed = digest ? TensorDigest{} : digest_tensor(record, data);
  const TensorDigest& d = digest ? *digest : computed;
  row.stat_min = d.stats.min;
  row.stat_max = d.stats.max;
  row.stat_mean = d.stats.mean;
  row.stat_nan_count = d.stats.nan_count;
  row.stat_inf_count = d.stats.inf_count;
  row.data_crc32c = d.crc32c;
  row.data_nbytes = data.size();

  const bool ok = impl_->put_meta(as_bytes(record.name), &row.name) &&
                  impl_->put_meta(as_bytes(record.handles), &row.handles) &&
                  impl_->put_quant(record.quant, &row.quant) &&
                  impl_->data.append(data, &row.data_offset);
  if (!ok) return impl_->fail("cannot write tensor " + quote_name(record.name));
  impl_->tensors.append(row, &impl_->row_meta_crc);
  ++impl_->tensors_appended;
  ++impl_->run_tensor_count;
  return Status::ok();
}

Status StoreWriter::append_profile_event(const ProfileEvent& event) {
  QD_RETURN_IF_ERROR(impl_->check_usable());
  h5::QuietErrors quiet;
  schema::ProfileRow row{};
  row.run = impl_->current_run.value_or(kNoRun);
  row.start = event.start;
  row.end = event.end;
  const bool ok = impl_->put_meta(as_bytes(event.name), &row.name) &&
                  impl_->put_meta(as_bytes(event.handles), &row.handles) &&
                  impl_->put_meta(as_bytes(event.unit), &row.unit);
  if (!ok) return impl_->fail("cannot write profile event " + quote_name(event.name));
  const uint64_t event_row = impl_->profile.size();
  impl_->profile.append(row, &impl_->row_meta_crc);
  if (event.instruction_id >= 0) {
    impl_->profile_instructions.append({event_row, event.instruction_id, 0}, &impl_->row_meta_crc);
  }
  return Status::ok();
}

Status StoreWriter::append_memory_checkpoint(const MemoryCheckpoint& checkpoint) {
  QD_RETURN_IF_ERROR(impl_->check_usable());
  h5::QuietErrors quiet;
  schema::MemoryRow row{};
  row.run = impl_->current_run.value_or(kNoRun);
  row.bytes = checkpoint.bytes;
  row.unix_ns = checkpoint.time_unix_ns;
  if (!impl_->put_meta(as_bytes(checkpoint.label), &row.label)) {
    return impl_->fail("cannot write memory checkpoint " + quote_name(checkpoint.label));
  }
  impl_->memory.append(row, &impl_->row_meta_crc);
  return Status::ok();
}

Status StoreWriter::append_graph_node(const GraphNode& node) {
  QD_RETURN_IF_ERROR(impl_->check_usable());
  h5::QuietErrors quiet;
  schema::GraphRow row{};
  const bool ok = impl_->put_meta(as_bytes(node.name), &row.name) &&
                  impl_->put_meta(as_bytes(node.op_type), &row.op_type) &&
                  impl_->put_name_list(node.inputs, &row.inputs) &&
                  impl_->put_name_list(node.outputs, &row.outputs) &&
                  impl_->put_meta(as_bytes(node.handles), &row.handles);
  if (!ok) return impl_->fail("cannot write graph node " + quote_name(node.name));
  impl_->graph.append(row, &impl_->row_meta_crc);
  return Status::ok();
}

Status StoreWriter::append_shape_guess(const std::string& tensor_name) {
  QD_RETURN_IF_ERROR(impl_->check_usable());
  h5::QuietErrors quiet;
  schema::ShapeGuessRow row{};
  if (!impl_->put_meta(as_bytes(tensor_name), &row.name)) {
    return impl_->fail("cannot write the guessed shape of " + quote_name(tensor_name));
  }
  impl_->shape_guesses.append(row, &impl_->row_meta_crc);
  return Status::ok();
}

Status StoreWriter::commit() {
  QD_RETURN_IF_ERROR(impl_->check_usable());
  h5::QuietErrors quiet;
  Impl& s = *impl_;
  if (!s.meta.flush_staging() || !s.data.flush_staging()) return s.fail("cannot write pools");
  if (H5Fflush(s.file.get(), H5F_SCOPE_LOCAL) < 0) return s.fail("cannot flush pools");
  const bool any_rows = s.tensors.has_pending() || s.runs.has_pending() ||
                        s.profile.has_pending() || s.memory.has_pending() ||
                        s.graph.has_pending() || s.shape_guesses.has_pending() ||
                        s.profile_instructions.has_pending();
  if (!any_rows) return Status::ok();
  const bool rows_ok = s.runs.write_pending() && s.tensors.write_pending() &&
                       s.profile.write_pending() && s.memory.write_pending() &&
                       s.graph.write_pending() && s.shape_guesses.write_pending() &&
                       s.profile_instructions.write_pending();
  if (!rows_ok) return s.fail("cannot write index rows");
  if (H5Fflush(s.file.get(), H5F_SCOPE_LOCAL) < 0) return s.fail("cannot flush index rows");
  if (s.options.durable) s.start_writeback();
  return Status::ok();
}

Status StoreWriter::close() {
  if (impl_->closed) return impl_->failure;
  Status status = impl_->failure.is_ok() ? commit() : impl_->failure;
  h5::QuietErrors quiet;
  if (status.is_ok() && impl_->options.durable) {
    void* handle = nullptr;
    if (H5Fget_vfd_handle(impl_->file.get(), H5P_DEFAULT, &handle) >= 0 && handle != nullptr &&
        fsync(*static_cast<int*>(handle)) != 0) {
      status = error(ErrorCode::kIo, impl_->path + ": fsync failed");
    }
  }
  if (impl_->hdf5_failed) impl_->detach_from_disk();  // before datasets flush their caches
  impl_->data = BytePool();
  impl_->meta = BytePool();
  impl_->tensors = {};
  impl_->runs = {};
  impl_->profile = {};
  impl_->memory = {};
  impl_->graph = {};
  impl_->shape_guesses = {};
  impl_->profile_instructions = {};
  if (H5Fclose(impl_->file.release()) < 0 && status.is_ok()) {
    status = hdf5_error(impl_->path, "cannot close store");
  }
  if (impl_->publish_at_close) {
    if (status.is_ok()) status = impl_->publish_at_close->publish(/*durable=*/false);
    impl_->publish_at_close.reset();
  }
  impl_->closed = true;
  if (impl_->failure.is_ok()) impl_->failure = status;
  return status;
}

const std::string& StoreWriter::path() const { return impl_->path; }
uint64_t StoreWriter::tensors_written() const { return impl_->tensors_appended; }

}  // namespace qd
