#include "qnn_debug/pipeline/export.h"

#include <algorithm>
#include <span>
#include <vector>

#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/importers/npy.h"
#include "qnn_debug/pipeline/tensor_values.h"

namespace qd::pipeline {
namespace {

using importers::NpzWriter;

constexpr uint64_t kPieceBytes = 4u << 20;
constexpr size_t kRenameExamples = 10;

std::span<const uint8_t> bytes_of(const std::vector<float>& values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)};
}

class Exporter {
 public:
  Exporter(const StoreReader& store, NpzWriter& writer, bool dequantize, NpzExportSummary& summary)
      : store_(store), writer_(writer), dequantize_(dequantize), summary_(summary) {}

  Status run(const RunInfo& run, const std::string& prefix) {
    QD_ASSIGN_OR_RETURN(const std::vector<TensorEntry> tensors, store_.tensors_of_run(run.id));
    for (const TensorEntry& t : tensors) QD_RETURN_IF_ERROR(tensor(t, prefix));
    summary_.runs += 1;
    return Status::ok();
  }

 private:
  Status tensor(const TensorEntry& t, const std::string& prefix) {
    const DType dtype = dequantize_ ? DType::kFloat32 : numpy_dtype(t.dtype);
    QD_RETURN_IF_ERROR(begin(t, prefix, dtype, dequantize_ ? reference_dims(t) : t.dims));
    if (dequantize_) {
      QD_ASSIGN_OR_RETURN(const std::vector<float> values,
                          read_real_values(store_, t, /*reference_layout=*/true));
      QD_RETURN_IF_ERROR(writer_.write(bytes_of(values)));
    } else if (dtype == t.dtype) {
      QD_RETURN_IF_ERROR(copy_stored(t));
    } else {
      QD_ASSIGN_OR_RETURN(const std::vector<uint8_t> values, read_stored_values(store_, t));
      QD_RETURN_IF_ERROR(writer_.write(values));
      summary_.widened += 1;
    }
    summary_.arrays += 1;
    summary_.bytes += storage_bytes(dtype, t.element_count());
    return writer_.end_array();
  }

  Status copy_stored(const TensorEntry& t) {
    StoredBytes bytes(store_, t);
    buffer_.resize(static_cast<size_t>(std::min(kPieceBytes, t.data_nbytes)));
    while (bytes.remaining() > 0) {
      QD_ASSIGN_OR_RETURN(const size_t n, bytes.read(buffer_));
      QD_RETURN_IF_ERROR(writer_.write(std::span<const uint8_t>(buffer_).first(n)));
    }
    return Status::ok();
  }

  // The tensor's name, or a stand-in when the writer refuses it (repeated, not UTF-8, a NUL).
  Status begin(const TensorEntry& t, const std::string& prefix, DType dtype,
               const std::vector<uint64_t>& dims) {
    const std::string seq = std::to_string(t.seq);
    for (const std::string& key :
         {prefix + t.name, prefix + t.name + "#" + seq, prefix + "tensor_" + seq}) {
      const Status begun = writer_.begin_array(key, dtype, dims);
      if (begun.code() != ErrorCode::kInvalidArgument) {
        if (begun.is_ok() && key != prefix + t.name) note_rename(prefix + t.name, key);
        return begun;
      }
    }
    return error(ErrorCode::kInvalidArgument, tensor_context(store_, t) + ": no usable npz key");
  }

  void note_rename(const std::string& from, const std::string& to) {
    summary_.renamed += 1;
    if (summary_.renamed_examples.size() < kRenameExamples) {
      summary_.renamed_examples.push_back(quote_name(from) + " -> " + quote_name(to));
    }
  }

  const StoreReader& store_;
  NpzWriter& writer_;
  bool dequantize_;
  NpzExportSummary& summary_;
  std::vector<uint8_t> buffer_;
};

}  // namespace

Result<NpzExportSummary> export_npz(const NpzExportOptions& o) {
  QD_ASSIGN_OR_RETURN(const std::unique_ptr<StoreReader> store, StoreReader::open(o.store_path));
  std::vector<const RunInfo*> runs;
  for (const RunInfo& run : store->runs()) {
    if (!o.run || run.id == *o.run) runs.push_back(&run);
  }
  if (runs.empty()) {
    return error(
        o.run ? ErrorCode::kInvalidArgument : ErrorCode::kCorrupt,
        quote_name(o.store_path) + (o.run ? ": no run " + std::to_string(*o.run) + " (" +
                                                std::to_string(store->runs().size()) + " runs)"
                                          : ": the store holds no run"));
  }
  QD_ASSIGN_OR_RETURN(NpzWriter writer, NpzWriter::create(o.output_path));
  NpzExportSummary summary;
  Exporter exporter(*store, writer, o.dequantize, summary);
  const bool several = runs.size() > 1;
  for (const RunInfo* run : runs) {
    QD_RETURN_IF_ERROR(exporter.run(*run, several ? "run" + std::to_string(run->id) + "/" : ""));
  }
  QD_RETURN_IF_ERROR(writer.finish());
  return summary;
}

}  // namespace qd::pipeline
