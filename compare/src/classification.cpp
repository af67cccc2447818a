#include <algorithm>
#include <cmath>
#include <numeric>

#include "compare_internal.h"
#include "qnn_debug/compare/compare.h"
#include "sequential_reader.h"

namespace qd::compare {
namespace {

// ---- classifier agreement (docs/metrics.md, "Classifier agreement") --------------------------

// A last axis longer than this is not a class axis (the largest LLM vocabularies are about 2^18).
constexpr uint64_t kMaxClasses = uint64_t{1} << 20;
// A permuted device side is decoded whole, in the reference's order, up to this many elements.
constexpr uint64_t kMaxPermutedClassifierElements = uint64_t{1} << 26;
constexpr size_t kTopK = 5;

// NaN ranks below every number, so a NaN score never wins.
bool ranks_above(float a, float b) { return !std::isnan(a) && (std::isnan(b) || a > b); }

// Top-1 and top-5 agreement counted row by row.
class RowAgreement {
 public:
  explicit RowAgreement(uint64_t classes) : order_(classes) {}

  void add(const float* rr, const float* dr) {
    const uint64_t classes = order_.size();
    const auto best = static_cast<uint32_t>(
        std::max_element(rr, rr + classes, [](float a, float b) { return ranks_above(b, a); }) -
        rr);
    std::iota(order_.begin(), order_.end(), 0u);
    const auto k = static_cast<ptrdiff_t>(std::min<size_t>(kTopK, order_.size()));
    std::partial_sort(order_.begin(), order_.begin() + k, order_.end(),
                      [&](uint32_t a, uint32_t b) {
                        return ranks_above(dr[a], dr[b]) || (!ranks_above(dr[b], dr[a]) && a < b);
                      });
    top1_ += order_[0] == best ? 1 : 0;
    top5_ += std::find(order_.begin(), order_.begin() + k, best) != order_.begin() + k ? 1 : 0;
  }

  void fill(ClassAgreement& agreement) const {
    if (agreement.rows == 0) return;
    agreement.top1 = double(top1_) / double(agreement.rows);
    if (agreement.classes >= kTopK) agreement.top5 = double(top5_) / double(agreement.rows);
  }

 private:
  std::vector<uint32_t> order_;
  uint64_t top1_ = 0, top5_ = 0;
};

// The device tensor in the reference's element order, decoded whole.
Result<std::vector<float>> decode_permuted(const StoreReader& store, const TensorEntry& tensor,
                                           const LayoutPlan& layout) {
  const uint64_t count = tensor.element_count();
  std::vector<float> stored(count);
  SequentialReader reader(store, tensor);
  QD_RETURN_IF_ERROR(reader.read(0, count, stored.data()));
  QD_RETURN_IF_ERROR(reader.verify());
  QD_ASSIGN_OR_RETURN(const Permuter permuter, Permuter::create(layout, tensor.dims));
  std::vector<uint64_t> index;
  QD_RETURN_IF_ERROR(permuter.map(0, count, &index));
  std::vector<float> ordered(count);
  for (uint64_t i = 0; i < count; ++i) ordered[i] = stored[index[i]];
  return ordered;
}

// Over the rows of the last axis: how often the device's top-1 class is the reference's, and how
// often the reference's top-1 class is among the device's top 5. Both sides stream a few rows at
// a time, unless the device's is permuted.
Result<ClassAgreement> measure_agreement(const StoreReader& ref_store, const TensorEntry& ref,
                                         const StoreReader& device_store, const TensorEntry& device,
                                         const LayoutPlan& layout) {
  ClassAgreement agreement{ref.name, 0, ref.dims.back(), std::nullopt, std::nullopt};
  const uint64_t classes = agreement.classes;
  agreement.rows = ref.element_count() / classes;
  RowAgreement rows(classes);
  SequentialReader ref_reader(ref_store, ref);
  const uint64_t batch_rows = std::max<uint64_t>(1, (uint64_t{1} << 16) / classes);
  std::vector<float> r(std::min(agreement.rows, batch_rows) * classes), d;
  std::vector<float> permuted;
  const bool in_order = is_identity(layout.axis_order);
  if (!in_order) {
    QD_ASSIGN_OR_RETURN(permuted, decode_permuted(device_store, device, layout));
  }
  SequentialReader device_reader(device_store, device);
  d.resize(in_order ? r.size() : 0);
  for (uint64_t row = 0; row < agreement.rows; row += batch_rows) {
    const uint64_t n = std::min(batch_rows, agreement.rows - row);
    QD_RETURN_IF_ERROR(ref_reader.read(row * classes, n * classes, r.data()));
    if (in_order) QD_RETURN_IF_ERROR(device_reader.read(row * classes, n * classes, d.data()));
    const float* dv = in_order ? d.data() : permuted.data() + row * classes;
    for (uint64_t i = 0; i < n; ++i) rows.add(r.data() + i * classes, dv + i * classes);
  }
  QD_RETURN_IF_ERROR(ref_reader.verify());
  if (in_order) QD_RETURN_IF_ERROR(device_reader.verify());
  rows.fill(agreement);
  return agreement;
}

// The run's final output: the first compared output of its last group (reference order), read
// as a classifier's scores over its last axis when that has at least two classes.
const PairResult* final_output(const RunComparison& run) {
  const PairResult* last = nullptr;
  for (const PairResult& pair : run.pairs) {
    if (!pair.metrics || !pair.layout) continue;
    if (last == nullptr || pair.group > last->group ||
        (pair.group == last->group && pair.pair.output_index < last->pair.output_index)) {
      last = &pair;
    }
  }
  if (last == nullptr) return nullptr;
  const TensorEntry& ref = *last->pair.ref;
  // At least one row: an empty tensor's last axis can be any length (its rank order buffer is
  // sized by it), and it has nothing to rank.
  const uint64_t count = ref.element_count();
  const bool in_order = is_identity(last->layout->axis_order);
  const bool scores = !ref.dims.empty() && ref.dims.back() >= 2 && ref.dims.back() <= kMaxClasses &&
                      count > 0 && (in_order || count <= kMaxPermutedClassifierElements);
  return scores ? last : nullptr;
}

}  // namespace

void measure_classifier(const StoreReader& ref, const StoreReader& device, RunComparison& run) {
  const PairResult* output = final_output(run);
  if (output == nullptr) return;
  // A guessed shape (docs/store-format.md, /shape_guesses) makes rows and classes a guess too:
  // no figure rather than a confident wrong one. The stores' warnings name the tensor.
  if (ref.shape_guessed(output->pair.ref->name) ||
      device.shape_guessed(output->pair.device->name)) {
    return;
  }
  Result<ClassAgreement> agreement =
      measure_agreement(ref, *output->pair.ref, device, *output->pair.device, *output->layout);
  // A CRC mismatch where a chunk was not where it was predicted (StoreReader::relocate): again.
  const auto relocated = [&] {
    const bool r = ref.relocate(*output->pair.ref), d = device.relocate(*output->pair.device);
    return r || d;
  };
  if (!agreement.is_ok() && relocated()) {
    agreement =
        measure_agreement(ref, *output->pair.ref, device, *output->pair.device, *output->layout);
  }
  if (agreement.is_ok()) run.classification = std::move(agreement).value();
}

}  // namespace qd::compare
