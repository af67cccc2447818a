#include <algorithm>
#include <cmath>
#include <optional>

#include "compare_internal.h"
#include "qnn_debug/compare/compare.h"
#include "sequential_reader.h"
#include "softmax_kernel.h"

namespace qd::compare {
namespace {

// ---- classifier agreement (docs/metrics.md, "Classifier agreement") --------------------------

// A last axis longer than this is not a class axis (the largest LLM vocabularies are about 2^18).
constexpr uint64_t kMaxClasses = uint64_t{1} << 20;
// A permuted device side is decoded whole, in the reference's order, up to this many elements.
constexpr uint64_t kMaxPermutedClassifierElements = uint64_t{1} << 26;

// NaN ranks below every number, so a NaN score never wins.
bool ranks_above(float a, float b) { return !std::isnan(a) && (std::isnan(b) || a > b); }

// The k highest-ranking classes of a row, highest first (ties: the lower class first), in one
// pass: a class enters only when it ranks above the k-th kept, which few do.
class TopClasses {
 public:
  void find(const float* row, uint64_t classes, size_t k) {
    top_.clear();
    uint64_t c = 0;
    for (; c < classes && top_.size() < k; ++c) enter(row, c, k);
    // Then a block of values is looked at one by one only when one of them beats the k-th kept
    // (a vector test per block; a NaN kept is beaten by any number, so then each value is).
    constexpr uint64_t kBlock = 16;
    while (c < classes) {
      const uint64_t end = std::min(classes, c + kBlock);
      const float bar = row[top_.back()];
      if (!std::isnan(bar) && !any_above(row + c, end - c, bar)) {
        c = end;
        continue;
      }
      for (; c < end; ++c) {
        if (ranks_above(row[c], row[top_.back()])) enter(row, c, k);
      }
    }
  }
  const std::vector<uint32_t>& classes() const { return top_; }
  bool holds(uint32_t c, size_t k) const {
    const auto end = top_.begin() + static_cast<ptrdiff_t>(std::min(k, top_.size()));
    return std::find(top_.begin(), end, c) != end;
  }
  // |top-k here & top-k there|
  size_t shared(const TopClasses& other, size_t k) const {
    size_t n = 0;
    for (size_t i = 0; i < std::min(k, top_.size()); ++i) n += other.holds(top_[i], k) ? 1 : 0;
    return n;
  }

 private:
  static bool any_above(const float* x, uint64_t n, float bar) {
    int above = 0;
#pragma omp simd reduction(| : above)
    for (uint64_t i = 0; i < n; ++i) above |= x[i] > bar ? 1 : 0;
    return above != 0;
  }

  // Class c into its place among the kept (ties: the lower class first), the k+1-th dropped.
  void enter(const float* row, uint64_t c, size_t k) {
    auto at = top_.end();
    while (at != top_.begin() && ranks_above(row[c], row[*(at - 1)])) --at;
    top_.insert(at, static_cast<uint32_t>(c));
    if (top_.size() > k) top_.pop_back();
  }

  std::vector<uint32_t> top_;
};

// A row's softmax, read through its log-normaliser: log p_c = x_c - log_norm (float64). A row with
// NaN has none; +inf entries share the whole probability (the softmax's limit). `weights`, when
// given, receives each class's p_c (the KL pass reads them instead of exponentiating again).
struct Softmax {
  std::optional<double> log_norm;
  bool infinite = false;  // some entry is +inf

  static Softmax of(const float* x, uint64_t classes, std::vector<double>* weights = nullptr) {
    double top = -INFINITY;
    for (uint64_t c = 0; c < classes; ++c) {
      if (std::isnan(x[c])) return {};
      top = std::max(top, static_cast<double>(x[c]));
    }
    if (top == -INFINITY) return {};  // every class masked: no distribution
    if (top == INFINITY) {            // the +inf entries share it all
      const auto count = static_cast<double>(std::count(x, x + classes, INFINITY));
      if (weights != nullptr) {
        weights->resize(classes);
        for (uint64_t c = 0; c < classes; ++c) (*weights)[c] = x[c] == INFINITY ? 1 / count : 0;
      }
      return {std::log(count), true};
    }
    // p_c = exp(x_c - top) / sum, each class exponentiated once (over a 151,936-token vocabulary
    // the exponentials are the token view's cost): the weights are the sum's terms.
    double sum = 0;
    if (weights == nullptr) {
      for (uint64_t c = 0; c < classes; ++c)
        sum += exp_nonpositive(static_cast<double>(x[c]) - top);
      return {top + std::log(sum), false};
    }
    weights->resize(classes);
    for (uint64_t c = 0; c < classes; ++c) {
      (*weights)[c] = exp_nonpositive(static_cast<double>(x[c]) - top);
      sum += (*weights)[c];
    }
    for (uint64_t c = 0; c < classes; ++c) (*weights)[c] /= sum;
    return {top + std::log(sum), false};
  }
  double log_probability(float x) const {
    if (infinite) return x == INFINITY ? -*log_norm : -INFINITY;
    return static_cast<double>(x) - *log_norm;
  }
};

// KL(p || q) of two rows' softmax (`weights`: p's probabilities), summed over the classes p gives
// weight. Each term's log-ratio is the logits' difference less the normalisers', so that equal
// rows give 0 without cancelling two numbers near log(classes).
double kl_divergence(const float* p, const Softmax& sp, const std::vector<double>& weights,
                     const float* q, const Softmax& sq, uint64_t classes) {
  if (!sq.log_norm) return INFINITY;  // the device gives no distribution
  const bool limits = sp.infinite || sq.infinite;
  const double norms = *sp.log_norm - *sq.log_norm;
  double kl = 0;
  for (uint64_t c = 0; c < classes; ++c) {
    if (weights[c] == 0) continue;  // 0 log 0 = 0
    if (sq.log_probability(q[c]) == -INFINITY) return INFINITY;
    const double gap = limits ? sp.log_probability(p[c]) - sq.log_probability(q[c])
                              : (static_cast<double>(p[c]) - static_cast<double>(q[c])) - norms;
    kl += weights[c] * gap;
  }
  return std::max(0.0, kl);
}

// The classifier figures and the token view, counted row by row into `agreement` (its tensor,
// rows and classes set).
class RowAgreement {
 public:
  explicit RowAgreement(ClassAgreement& agreement) : out_(agreement) {}

  void add(const float* rr, const float* dr, bool last_row) {
    const uint64_t classes = out_.classes;
    ref_top_.find(rr, classes, kOverlapK);
    device_top_.find(dr, classes, kOverlapK);
    const uint32_t best = ref_top_.classes().front();
    top1_ += device_top_.classes().front() == best ? 1 : 0;
    top5_ += device_top_.holds(best, 5) ? 1 : 0;
    overlap5_ += ref_top_.shared(device_top_, 5);
    overlap10_ += ref_top_.shared(device_top_, kOverlapK);
    const std::optional<double> ref_top = finite_maximum(rr, classes);
    const std::optional<double> device_top = finite_maximum(dr, classes);
    Softmax device_softmax;
    if (ref_top && device_top) {  // finite rows: one vector pass (softmax_kernel.h)
      const RowExpSums sums = row_exp_sums(rr, *ref_top, dr, *device_top, classes);
      const double ref_norm = *ref_top + std::log(sums.x_sum);
      device_softmax.log_norm = *device_top + std::log(sums.y_sum);
      add_kl(sums.weighted_gap / sums.x_sum - (ref_norm - *device_softmax.log_norm));
    } else {
      const Softmax ref_softmax = Softmax::of(rr, classes, &ref_weights_);
      device_softmax = Softmax::of(dr, classes);
      if (ref_softmax.log_norm) {
        add_kl(kl_divergence(rr, ref_softmax, ref_weights_, dr, device_softmax, classes));
      }
    }
    if (last_row) note_token(rr, dr, device_softmax, best);
    ++rows_;
  }

  void finish() const {
    if (rows_ == 0) return;
    const double rows = static_cast<double>(rows_);
    out_.top1 = double(top1_) / rows;
    if (out_.classes >= 5) out_.top5 = double(top5_) / rows;
    if (out_.classes >= 5) out_.top5_overlap = double(overlap5_) / (5 * rows);
    if (out_.classes >= kOverlapK) out_.top10_overlap = double(overlap10_) / (kOverlapK * rows);
    if (kl_rows_ > 0) {
      out_.kl_divergence = kl_sum_ / static_cast<double>(kl_rows_);
      out_.kl_max = kl_max_;
    }
  }

 private:
  static constexpr size_t kOverlapK = 10;

  void add_kl(double kl) {
    kl = std::max(0.0, kl);
    kl_sum_ += kl;
    kl_max_ = std::max(kl_max_, kl);
    ++kl_rows_;
  }

  // The next token: the device's choice, and where it puts the reference's.
  void note_token(const float* rr, const float* dr, const Softmax& device_softmax, uint32_t best) {
    const uint32_t device = device_top_.classes().front();
    out_.reference_token = best;
    out_.device_token = device;
    const double margin = static_cast<double>(rr[best]) - static_cast<double>(rr[device]);
    out_.reference_margin = std::isnan(margin) ? std::nullopt : std::optional(margin);
    uint64_t above = 0;  // classes the device ranks above `best` (ties: the lower class)
    for (uint64_t c = 0; c < out_.classes; ++c) {
      above += ranks_above(dr[c], dr[best]) || (c < best && !ranks_above(dr[best], dr[c])) ? 1 : 0;
    }
    out_.reference_token_rank = above + 1;
    out_.reference_token_probability = std::nullopt;
    if (device_softmax.log_norm) {
      out_.reference_token_probability = std::exp(device_softmax.log_probability(dr[best]));
    }
  }

  ClassAgreement& out_;
  TopClasses ref_top_, device_top_;
  std::vector<double> ref_weights_;
  uint64_t rows_ = 0, top1_ = 0, top5_ = 0, overlap5_ = 0, overlap10_ = 0;
  double kl_sum_ = 0, kl_max_ = 0;
  uint64_t kl_rows_ = 0;
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
  ClassAgreement agreement;
  agreement.tensor = ref.name;
  agreement.classes = ref.dims.back();
  const uint64_t classes = agreement.classes;
  agreement.rows = ref.element_count() / classes;
  RowAgreement rows(agreement);
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
    for (uint64_t i = 0; i < n; ++i) {
      rows.add(r.data() + i * classes, dv + i * classes, row + i + 1 == agreement.rows);
    }
  }
  QD_RETURN_IF_ERROR(ref_reader.verify());
  if (in_order) QD_RETURN_IF_ERROR(device_reader.verify());
  rows.finish();
  return agreement;
}

// Whether a compared pair's reference can be read as scores over its last axis: at least two
// classes and one row (an empty tensor's last axis can be any length, and it has nothing to rank).
bool holds_scores(const PairResult& pair) {
  const TensorEntry& ref = *pair.pair.ref;
  const uint64_t count = ref.element_count();
  const bool in_order = is_identity(pair.layout->axis_order);
  return !ref.dims.empty() && ref.dims.back() >= 2 && ref.dims.back() <= kMaxClasses && count > 0 &&
         (in_order || count <= kMaxPermutedClassifierElements);
}

// The run's scores: the compared pair of the reference tensor named `logits` (none when the run
// has no such pair: a named tensor is never replaced by a guess), else the run's final output (the
// first compared output of its last group, reference order), when it holds scores.
// `planned`: before the pairs are measured, every pair with a layout taken to compare.
const PairResult* classifier_output(const RunComparison& run, const std::string& logits,
                                    bool planned) {
  const PairResult* last = nullptr;
  for (const PairResult& pair : run.pairs) {
    if ((!planned && !pair.metrics) || !pair.layout) continue;
    if (!logits.empty()) {
      if (pair.pair.ref->name == logits) return holds_scores(pair) ? &pair : nullptr;
      continue;
    }
    if (last == nullptr || pair.group > last->group ||
        (pair.group == last->group && pair.pair.output_index < last->pair.output_index)) {
      last = &pair;
    }
  }
  return last != nullptr && holds_scores(*last) ? last : nullptr;
}

// The agreement of the classifier's pair, or nullopt when it has none.
std::optional<ClassAgreement> agreement_of(const StoreReader& ref, const StoreReader& device,
                                           const PairResult& output) {
  // A guessed shape (docs/store-format.md, /shape_guesses) makes rows and classes a guess too:
  // no figure rather than a confident wrong one. The stores' warnings name the tensor.
  if (ref.shape_guessed(output.pair.ref->name) || device.shape_guessed(output.pair.device->name)) {
    return std::nullopt;
  }
  Result<ClassAgreement> agreement =
      measure_agreement(ref, *output.pair.ref, device, *output.pair.device, *output.layout);
  // A CRC mismatch where a chunk was not where it was predicted (StoreReader::relocate): again,
  // also when the pair's slices, measured at the same time, have relocated the chunks first.
  if (!agreement.is_ok() && agreement.status().code() == ErrorCode::kCorrupt) {
    ref.relocate(*output.pair.ref);
    device.relocate(*output.pair.device);
    agreement =
        measure_agreement(ref, *output.pair.ref, device, *output.pair.device, *output.layout);
  }
  if (!agreement.is_ok()) return std::nullopt;
  return std::move(agreement).value();
}

}  // namespace

EarlyClassifier guess_classifier(const std::string& logits, const RunComparison& run) {
  return {classifier_output(run, logits, true), std::nullopt, false};
}

void measure_early(const StoreReader& ref, const StoreReader& device, EarlyClassifier& early) {
  if (early.output == nullptr) return;
  early.agreement = agreement_of(ref, device, *early.output);
  early.measured = true;
}

void measure_classifier(const StoreReader& ref, const StoreReader& device,
                        const std::string& logits, RunComparison& run,
                        const EarlyClassifier* early) {
  const PairResult* output = classifier_output(run, logits, false);
  if (output == nullptr) return;
  std::optional<ClassAgreement> agreement =
      early != nullptr && early->measured && early->output == output
          ? early->agreement
          : agreement_of(ref, device, *output);
  if (agreement) run.classification = std::move(*agreement);
}

}  // namespace qd::compare
