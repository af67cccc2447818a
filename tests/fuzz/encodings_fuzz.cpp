// Encodings JSON in its three shapes (converter net JSON, context-binary JSON, plain map): parse,
// merge (twice, so the duplicate rules run), then apply each encoding to a record as the
// importers do and lint it, as inspect and diff do.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/importers/encodings.h"
#include "tensor_layout.h"

namespace {

using namespace qd::importers;

// Plain maps state no dims: the array an importer applies one to has them. A shape the axis fits.
std::vector<uint64_t> dims_for(const qd::Quantization& quant) {
  if (!quant.per_axis() || quant.axis >= qd::kMaxRank) return {};
  std::vector<uint64_t> dims(static_cast<size_t>(quant.axis) + 1, 1);
  dims.back() = quant.scales.size();
  return dims;
}

// The record an importer would build for a tensor the encoding describes.
void apply(const TensorEncoding& encoding) {
  qd::TensorRecord record;
  record.name = encoding.name;
  record.dims = encoding.dims.empty() ? dims_for(encoding.quant) : encoding.dims;
  auto dtype =
      qd::fuzz::checked(reconcile_dtype(encoding.dtype.value_or(qd::DType::kUFixed8), encoding));
  if (!dtype.is_ok()) return;
  record.dtype = *dtype;
  const qd::Status applied = apply_encoding(encoding, record);
  qd::fuzz::expect_no_internal_error(applied);
  if (!applied.is_ok()) return;
  for (const qd::EncodingFinding& finding : qd::lint_encoding(record)) (void)describe(finding);
  qd::fuzz::expect_no_internal_error(
      qd::validate_tensor(record, qd::storage_bytes(record.dtype, record.element_count())));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = qd::fuzz::as_text(data, size);
  auto first = qd::fuzz::checked(parse_encodings(text, "fuzz.json"));
  if (!first.is_ok()) return 0;
  for (const auto& [name, encoding] : first->tensors) {
    apply(encoding);
    (void)axis_order_from_formats(encoding.axis_format, encoding.src_axis_format);
  }
  EncodingTable merged;
  qd::fuzz::expect_no_internal_error(merge_encodings(merged, std::move(*first)));
  auto second = parse_encodings(text, "again.json");
  if (second.is_ok())
    qd::fuzz::expect_no_internal_error(merge_encodings(merged, std::move(*second)));
  return 0;
}
