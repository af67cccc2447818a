#include "qnn_debug/pipeline/export.h"

#include <algorithm>
#include <span>

#include "qnn_debug/checksum.h"
#include "qnn_debug/compare/decode.h"
#include "qnn_debug/compare/layout.h"
#include "qnn_debug/importers/npy.h"
#include "qnn_debug/store_reader.h"

namespace qd::pipeline {
namespace {

using importers::NpzWriter;

constexpr uint64_t kChunkBytes = 4u << 20;
constexpr size_t kRenameExamples = 10;

std::string where(const StoreReader& store, const TensorEntry& t) {
  return quote_name(store.path()) + ": tensor " + quote_name(t.name) + " (seq " +
         std::to_string(t.seq) + ")";
}

// The dtype a raw export writes: the stored one, widened where numpy has none.
DType raw_export_dtype(DType stored) {
  const DTypeInfo dtype = info(stored);
  if (dtype.bits == 4) return dtype.kind == DTypeKind::kSignedInt ? DType::kInt8 : DType::kUInt8;
  if (stored == DType::kBFloat16) return DType::kFloat32;
  return stored;
}

class Exporter {
 public:
  Exporter(const StoreReader& store, NpzWriter& writer, bool dequantize, NpzExportSummary& summary)
      : store_(store), writer_(writer), dequantize_(dequantize), summary_(summary) {}

  Status run(const RunInfo& run, const std::string& prefix) {
    for (const TensorEntry* t : store_.tensors_of_run(run.id)) {
      QD_RETURN_IF_ERROR(tensor(*t, prefix));
    }
    summary_.runs += 1;
    return Status::ok();
  }

 private:
  Status tensor(const TensorEntry& t, const std::string& prefix) {
    const DType dtype = dequantize_ ? DType::kFloat32 : raw_export_dtype(t.dtype);
    std::vector<uint64_t> dims = t.dims;
    if (dequantize_ && !t.axis_order.empty()) {
      for (size_t i = 0; i < dims.size(); ++i) dims[i] = t.dims[t.axis_order[i]];
    }
    QD_RETURN_IF_ERROR(begin(t, prefix, dtype, dims));
    const bool reorder = dequantize_ && !t.axis_order.empty();
    if (dtype == t.dtype && !reorder) {
      QD_RETURN_IF_ERROR(copy_stored(t));
    } else {
      QD_RETURN_IF_ERROR(convert(t, dtype));
    }
    summary_.arrays += 1;
    summary_.bytes += storage_bytes(dtype, t.element_count());
    summary_.widened += !dequantize_ && dtype != t.dtype ? 1 : 0;
    return writer_.end_array();
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
    return error(ErrorCode::kInvalidArgument, where(store_, t) + ": no usable npz key");
  }

  void note_rename(const std::string& from, const std::string& to) {
    summary_.renamed += 1;
    if (summary_.renamed_examples.size() < kRenameExamples) {
      summary_.renamed_examples.push_back(quote_name(from) + " -> " + quote_name(to));
    }
  }

  // The stored bytes as they are, in bounded pieces, checked against the row's CRC-32C.
  Status copy_stored(const TensorEntry& t) {
    uint32_t crc = 0;
    buffer_.resize(static_cast<size_t>(std::min<uint64_t>(kChunkBytes, t.data_nbytes)));
    for (uint64_t offset = 0; offset < t.data_nbytes; offset += buffer_.size()) {
      const std::span<uint8_t> piece(buffer_.data(),
                                     std::min<uint64_t>(buffer_.size(), t.data_nbytes - offset));
      QD_RETURN_IF_ERROR(store_.read_tensor_range(t, offset, piece));
      crc = crc32c_extend(crc, piece.data(), piece.size());
      QD_RETURN_IF_ERROR(writer_.write(piece));
    }
    if (crc != t.data_crc32c) {
      return error(ErrorCode::kCorrupt,
                   where(store_, t) + ": data does not match its CRC-32C (the store is damaged)");
    }
    return Status::ok();
  }

  // Decoded values: real values for --dequantize, else the raw integers (quantization left
  // out) widened to a type numpy has. The whole tensor is decoded because undoing a stored axis
  // order reads it out of order.
  Status convert(const TensorEntry& t, DType dtype) {
    QD_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, store_.read_tensor(t));
    TensorRecord plain = t;
    if (!dequantize_) plain.quant = Quantization{};
    const uint64_t count = t.element_count();
    values_.resize(count);
    compare::decode(plain, bytes.data(), 0, count, values_.data());
    if (dequantize_ && !t.axis_order.empty()) QD_RETURN_IF_ERROR(to_reference_layout(t));
    if (dtype == DType::kFloat32) {
      const auto* raw = reinterpret_cast<const uint8_t*>(values_.data());
      return writer_.write(std::span<const uint8_t>(raw, values_.size() * sizeof(float)));
    }
    // 4-bit integers: each decoded value is an exact small integer.
    buffer_.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      buffer_[i] = static_cast<uint8_t>(static_cast<int8_t>(values_[i]));
    }
    return writer_.write(buffer_);
  }

  Status to_reference_layout(const TensorEntry& t) {
    compare::LayoutPlan plan;
    plan.axis_order = t.axis_order;
    QD_ASSIGN_OR_RETURN(const compare::Permuter permuter, compare::Permuter::create(plan, t.dims));
    std::vector<float> ordered(values_.size());
    std::vector<uint64_t> index;
    constexpr uint64_t kPiece = 1u << 16;
    for (uint64_t first = 0; first < ordered.size(); first += kPiece) {
      const uint64_t n = std::min<uint64_t>(kPiece, ordered.size() - first);
      QD_RETURN_IF_ERROR(permuter.map(first, n, &index));
      for (uint64_t k = 0; k < n; ++k) ordered[first + k] = values_[index[k]];
    }
    values_ = std::move(ordered);
    return Status::ok();
  }

  const StoreReader& store_;
  NpzWriter& writer_;
  bool dequantize_;
  NpzExportSummary& summary_;
  std::vector<uint8_t> buffer_;
  std::vector<float> values_;
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
