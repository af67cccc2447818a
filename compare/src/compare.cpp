#include "qnn_debug/compare/compare.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <span>
#include <system_error>
#include <thread>
#include <unordered_set>

#include "qnn_debug/base/checksum.h"
#include "qnn_debug/compare/decode.h"

namespace qd::compare {
namespace {

// Decoded elements of one side: a float32 side as stored, every other one as Split (exact to
// about 2^-47).
struct Values {
  const float* floats = nullptr;
  const Split* splits = nullptr;
};

// Calls f with the pointer that `values` holds.
template <class F>
void with_values(const Values& values, F&& f) {
  if (values.floats != nullptr) {
    f(values.floats);
  } else {
    f(values.splits);
  }
}

// The bytes of a stretch of a tensor and their CRC-32C: stretches checked apart (slices, on other
// threads) are appended in order and held to the CRC of the whole.
struct BytesChecked {
  uint32_t crc = 0;
  uint64_t bytes = 0;

  void append(const BytesChecked& next) {
    crc = crc32c_combine(crc, next.crc, next.bytes);
    bytes += next.bytes;
  }
};

Status verify_checksum(const StoreReader& store, const TensorEntry& tensor,
                       const BytesChecked& checked) {
  if (checked.bytes == tensor.data_nbytes && checked.crc == tensor.data_crc32c) return Status::ok();
  return error(ErrorCode::kCorrupt, store.path() + ": tensor " + quote_name(tensor.name) +
                                        " (seq " + std::to_string(tensor.seq) +
                                        "): checksum mismatch, data is damaged");
}

// One side of a pair, elements [begin, end) read front to back in bounded chunks and checked
// against the CRC as it goes: the comparison never trusts bytes the store cannot vouch for. The
// bytes of a stretch are those of its elements; a 4-bit stretch starts on an even element, and the
// byte shared with the next stretch is that one's.
class SequentialReader {
 public:
  SequentialReader(const StoreReader& store, const TensorEntry& tensor, uint64_t begin,
                   uint64_t end)
      : store_(store),
        tensor_(tensor),
        packed_(info(tensor.dtype).bits == 4),
        native_float_(tensor.dtype == DType::kFloat32 &&
                      std::endian::native == std::endian::little),
        check_end_(end == tensor.element_count() ? tensor.data_nbytes : byte_of(end)),
        checked_to_(byte_of(begin)) {}
  SequentialReader(const StoreReader& store, const TensorEntry& tensor)
      : SequentialReader(store, tensor, 0, tensor.element_count()) {}

  // Reads the bytes of elements [first, first + count) and checks them into the CRC; chunks must
  // come in order, `first` even for 4-bit.
  Status fetch(uint64_t first, uint64_t count) {
    const uint64_t begin = byte_of(first), end = byte_of(first + count) + (packed_ ? 1 : 0);
    const uint64_t stop = std::min<uint64_t>(end, tensor_.data_nbytes);
    storage_.resize((stop - begin + sizeof(float) - 1) / sizeof(float));
    const std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(storage_.data()), stop - begin);
    QD_RETURN_IF_ERROR(store_.read_tensor_range(tensor_, begin, bytes));
    const uint64_t fresh_from = std::max(begin, checked_to_);  // a shared nibble byte once only
    const uint64_t fresh_to = std::min(stop, check_end_);
    if (fresh_to > fresh_from) {
      checked_.crc =
          crc32c_extend(checked_.crc, bytes.data() + (fresh_from - begin), fresh_to - fresh_from);
      checked_.bytes += fresh_to - fresh_from;
      checked_to_ = fresh_to;
    }
    fetched_begin_ = begin;
    return Status::ok();
  }

  // Elements [first, first + count) of the last fetch (`first` even for 4-bit): a float32 side's
  // stored floats themselves, any other side decoded into `scratch` (count values).
  Values piece(uint64_t first, uint64_t count, Split* scratch) {
    const uint64_t offset = byte_of(first) - fetched_begin_;
    if (native_float_) return {storage_.data() + offset / sizeof(float), nullptr};
    decode_fetched(first, count, scratch);
    return {nullptr, scratch};
  }

  // Decodes elements [first, first + count) into `out`.
  template <class Out>
  Status read(uint64_t first, uint64_t count, Out* out) {
    QD_RETURN_IF_ERROR(fetch(first, count));
    decode_fetched(first, count, out);
    return Status::ok();
  }

  // For a reader of the whole tensor: every byte read and matching the stored CRC.
  Status verify() const { return verify_checksum(store_, tensor_, checked_); }

  const BytesChecked& checked() const { return checked_; }
  const DecodeCounts& saturated() const { return saturated_; }

 private:
  template <class Out>
  void decode_fetched(uint64_t first, uint64_t count, Out* out) {
    const uint8_t* fetched = reinterpret_cast<const uint8_t*>(storage_.data());
    saturated_ += decode(tensor_, fetched + (byte_of(first) - fetched_begin_), first, count, out);
  }

  uint64_t byte_of(uint64_t element) const {
    return packed_ ? element / 2 : element * (info(tensor_.dtype).bits / 8);
  }

  const StoreReader& store_;
  const TensorEntry& tensor_;
  const bool packed_;
  const bool native_float_;
  const uint64_t check_end_;  // the first byte that is not this stretch's
  // The fetched bytes, held as floats so that a float32 side is read in place.
  std::vector<float> storage_;
  uint64_t fetched_begin_ = 0;  // the byte storage_ starts at
  uint64_t checked_to_;         // the bytes before this one are in checked_
  BytesChecked checked_;
  DecodeCounts saturated_;
};

bool is_identity(const std::vector<uint8_t>& order) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != i) return false;
  }
  return true;
}

Status check_element_counts(const TensorEntry& ref, const TensorEntry& device) {
  if (ref.element_count() == device.element_count()) return Status::ok();
  return error(ErrorCode::kInvalidArgument,
               "element counts differ: reference " + quote_name(ref.name) + " has " +
                   std::to_string(ref.element_count()) + ", device " + quote_name(device.name) +
                   " has " + std::to_string(device.element_count()));
}

// Decoded values go through the metrics in pieces this long, so that both sides' values stay in
// the core's cache (2 x 64 KiB) while the stored bytes are read in larger chunks.
constexpr uint64_t kDecodedPiece = 8192;

// Same element order on both sides: elements [begin, end) of both stream side by side.
Status accumulate_in_order(SequentialReader& ref_reader, SequentialReader& device_reader,
                           uint64_t begin, uint64_t end, uint64_t chunk, MetricAccumulator& acc,
                           WorstElements& worst, EvenSamples& samples) {
  std::vector<Split> r(std::min({chunk, end - begin, kDecodedPiece})), d(r.size());
  double bounds[kDecodedPiece / kErrorBlock];  // the float pass's, for the largest errors
  for (uint64_t first = begin; first < end; first += chunk) {
    const uint64_t count = std::min(chunk, end - first);
    QD_RETURN_IF_ERROR(ref_reader.fetch(first, count));
    QD_RETURN_IF_ERROR(device_reader.fetch(first, count));
    for (uint64_t at = first; at < first + count; at += r.size()) {
      const uint64_t n = std::min<uint64_t>(r.size(), first + count - at);
      const Values ref = ref_reader.piece(at, n, r.data());
      const Values dev = device_reader.piece(at, n, d.data());
      with_values(ref, [&](const auto* rv) {
        with_values(dev, [&](const auto* dv) {
          acc.add(rv, dv, n, at, bounds);
          worst.add(rv, dv, n, at, bounds);
          samples.add(rv, dv, n, at);
        });
      });
    }
  }
  return Status::ok();
}

// The device is permuted: it is decoded whole (bounded by max_permuted_elements), the reference
// streams, and each reference chunk gathers its device values through the permutation.
Status accumulate_permuted(SequentialReader& ref_reader, SequentialReader& device_reader,
                           const TensorEntry& device, const LayoutPlan& layout, uint64_t elements,
                           uint64_t chunk, MetricAccumulator& acc, WorstElements& worst,
                           EvenSamples& samples) {
  std::vector<Split> all_device(elements);
  for (uint64_t first = 0; first < elements; first += chunk) {
    QD_RETURN_IF_ERROR(
        device_reader.read(first, std::min(chunk, elements - first), all_device.data() + first));
  }
  QD_ASSIGN_OR_RETURN(const Permuter permuter, Permuter::create(layout, device.dims));
  std::vector<Split> r(std::min(chunk, elements)), d(r.size());
  std::vector<uint64_t> device_index;
  for (uint64_t first = 0; first < elements; first += chunk) {
    const uint64_t count = std::min(chunk, elements - first);
    QD_RETURN_IF_ERROR(ref_reader.read(first, count, r.data()));
    QD_RETURN_IF_ERROR(permuter.map(first, count, &device_index));
    for (uint64_t i = 0; i < count; ++i) d[i] = all_device[device_index[i]];
    acc.add(r.data(), d.data(), count, first);
    worst.add(r.data(), d.data(), count, first);
    samples.add(r.data(), d.data(), count, first);
  }
  return Status::ok();
}

std::string run_label(const RunInfo& run) { return std::to_string(run.id) + " (" + run.name + ")"; }

// Reads the run pair's tensors and fills `run` with the alignment and one PairResult per
// compared pair (layouts planned, metrics not yet computed).
Result<RunComparison> plan_run(const StoreReader& ref, const RunInfo& ref_run,
                               const StoreReader& device, const RunInfo& device_run,
                               const CompareOptions& options) {
  RunComparison run;
  run.ref_run = ref_run.id;
  run.device_run = device_run.id;
  QD_ASSIGN_OR_RETURN(run.ref_tensors, read_run(ref, ref_run.id));
  QD_ASSIGN_OR_RETURN(run.device_tensors, read_run(device, device_run.id));
  run.alignment = align(*run.ref_tensors, *run.device_tensors, options.mapping);
  for (size_t g = 0; g < run.alignment.groups.size(); ++g) {
    for (const ComparedPair& pair : run.alignment.groups[g].pairs) {
      run.pairs.push_back(plan_pair(pair, g));
    }
  }
  return run;
}

// A pair is compared in slices of this many elements (the last one shorter; a permuted pair in
// one), each on its own and merged in slice order: the split depends on the tensor alone, so any
// number of threads gives the same bits, and two cores share one large tensor.
constexpr uint64_t kSliceElements = uint64_t{1} << 22;

// What a slice of a pair adds up to.
struct SliceResult {
  MetricAccumulator acc;
  WorstElements worst;
  EvenSamples samples;
  DecodeCounts saturated;
  BytesChecked ref_checked, device_checked;

  // What the readers of the slice counted and checked.
  void take_from(const SequentialReader& ref_reader, const SequentialReader& device_reader) {
    saturated = device_reader.saturated();
    ref_checked = ref_reader.checked();
    device_checked = device_reader.checked();
  }

  void merge(const SliceResult& next) {
    acc.merge(next.acc);
    worst.merge(next.worst);
    samples.merge(next.samples);
    saturated += next.saturated;
    ref_checked.append(next.ref_checked);
    device_checked.append(next.device_checked);
  }
};

// One pair to compare: its tensors and what follows from them alone.
struct PairTask {
  const StoreReader& ref_store;
  const TensorEntry& ref;
  const StoreReader& device_store;
  const TensorEntry& device;
  const LayoutPlan& layout;
  const CompareOptions& options;
  ChannelView channels = channel_view(ref, device, layout);
  bool in_order = layout.axis_order.empty() || is_identity(layout.axis_order);
  uint64_t slices =
      in_order && ref.element_count() == device.element_count()
          ? std::max<uint64_t>(1, (ref.element_count() + kSliceElements - 1) / kSliceElements)
          : 1;
};

Result<SliceResult> compare_slice(const PairTask& task, uint64_t slice) {
  const TensorEntry& ref = task.ref;
  const TensorEntry& device = task.device;
  QD_RETURN_IF_ERROR(check_element_counts(ref, device));
  const uint64_t elements = ref.element_count();
  const uint64_t chunk = std::max<uint64_t>(2, task.options.chunk_elements & ~uint64_t{1});
  SliceResult out{MetricAccumulator(task.options.metrics, task.channels.map),
                  WorstElements(task.options.worst_elements),
                  EvenSamples(elements, task.options.scatter_samples),
                  {},
                  {},
                  {}};
  if (task.in_order) {
    const uint64_t begin = std::min(elements, slice * kSliceElements);
    const uint64_t end = std::min(elements, begin + kSliceElements);
    SequentialReader ref_reader(task.ref_store, ref, begin, end);
    SequentialReader device_reader(task.device_store, device, begin, end);
    QD_RETURN_IF_ERROR(accumulate_in_order(ref_reader, device_reader, begin, end, chunk, out.acc,
                                           out.worst, out.samples));
    out.take_from(ref_reader, device_reader);
    return out;
  }
  if (elements > task.options.max_permuted_elements) {
    return error(ErrorCode::kInvalidArgument,
                 "device tensor " + quote_name(device.name) + " has " + std::to_string(elements) +
                     " elements in a permuted layout, above the " +
                     std::to_string(task.options.max_permuted_elements) +
                     " that are un-permuted in memory");
  }
  SequentialReader ref_reader(task.ref_store, ref), device_reader(task.device_store, device);
  QD_RETURN_IF_ERROR(accumulate_permuted(ref_reader, device_reader, device, task.layout, elements,
                                         chunk, out.acc, out.worst, out.samples));
  out.take_from(ref_reader, device_reader);
  return out;
}

// The pair's metrics from all its slices merged.
Result<Metrics> finish_pair(const PairTask& task, SliceResult& all) {
  QD_RETURN_IF_ERROR(verify_checksum(task.ref_store, task.ref, all.ref_checked));
  QD_RETURN_IF_ERROR(verify_checksum(task.device_store, task.device, all.device_checked));
  const Quantization& quant = task.device.quant;
  all.acc.add_saturation(all.saturated.saturated());
  Metrics metrics = all.acc.finish(quant.is_quantized() ? &quant : nullptr);
  metrics.worst = all.worst.sorted();
  metrics.samples = all.samples.sorted();
  if (!metrics.channels.empty()) metrics.channel_axis = task.channels.axis;
  if (quant.is_quantized()) {
    metrics.saturated_low = all.saturated.at_min;
    metrics.saturated_high = all.saturated.at_max;
  }
  return metrics;
}

// A pair's slices as they finish, on any thread: each is merged as soon as those before it are,
// so at most about one slice per thread waits, and the first failing slice in slice order decides
// the error.
class SliceMerger {
 public:
  SliceMerger(PairTask task, PairResult* result) : task_(std::move(task)), result_(result) {}

  const PairTask& task() const { return task_; }

  void deliver(uint64_t slice, Result<SliceResult> outcome) {
    const std::lock_guard lock(mutex_);
    waiting_.emplace(slice, std::move(outcome));
    for (auto next = waiting_.find(merged_); next != waiting_.end();
         next = waiting_.find(merged_)) {
      if (failure_.is_ok()) absorb(next->second);
      waiting_.erase(next);
      ++merged_;
    }
    if (merged_ == task_.slices) finish();
  }

 private:
  void absorb(Result<SliceResult>& outcome) {
    if (!outcome.is_ok()) {
      failure_ = outcome.status();
    } else if (!total_) {
      total_ = std::move(outcome).value();
    } else {
      total_->merge(outcome.value());
    }
  }

  void finish() {
    Result<Metrics> metrics =
        failure_.is_ok() ? finish_pair(task_, *total_) : Result<Metrics>(failure_);
    total_.reset();
    if (metrics.is_ok()) {
      result_->metrics = std::move(metrics).value();
    } else {
      result_->error = metrics.status().message();
      result_->error_code = metrics.status().code();
    }
  }

  PairTask task_;
  PairResult* result_;
  std::mutex mutex_;
  uint64_t merged_ = 0;
  std::optional<SliceResult> total_;
  std::map<uint64_t, Result<SliceResult>> waiting_;  // finished ahead of their turn
  Status failure_ = Status::ok();
};

// Runs `work(i)` for i in [0, count) on up to `jobs` threads, this one included. An exception
// leaving a thread would end the process (std::terminate, exit 134): the first one (std::bad_alloc,
// an input too big for memory) stops the others and is rethrown here, for the caller to report.
template <class Work>
void run_parallel(size_t count, unsigned jobs, const Work& work) {
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto worker = [&] {
    try {
      for (size_t i = next++; i < count; i = next++) work(i);
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = count;
    }
  };
  const unsigned threads = std::max(1u, std::min<unsigned>(jobs, count));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // no memory for another thread's stack: the threads started do the work
    }
  }
  worker();
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

// Every slice of every pair of `work`, pair after pair, on options.jobs threads.
void compute_all(const StoreReader& ref, const StoreReader& device, std::vector<PairResult*>& work,
                 const CompareOptions& options) {
  std::deque<SliceMerger> mergers;
  std::vector<std::pair<SliceMerger*, uint64_t>> slices;
  for (PairResult* result : work) {
    mergers.emplace_back(
        PairTask{ref, *result->pair.ref, device, *result->pair.device, *result->layout, options},
        result);
    for (uint64_t s = 0; s < mergers.back().task().slices; ++s) {
      slices.emplace_back(&mergers.back(), s);
    }
  }
  run_parallel(slices.size(), options.jobs, [&](size_t i) {
    auto [merger, slice] = slices[i];
    merger->deliver(slice, compare_slice(merger->task(), slice));
  });
}

}  // namespace

Result<RunTensors> read_run(const StoreReader& store, uint32_t run_id) {
  QD_ASSIGN_OR_RETURN(std::vector<TensorEntry> tensors, store.tensors_of_run(run_id));
  return std::make_shared<const std::vector<TensorEntry>>(std::move(tensors));
}

PairResult plan_pair(const ComparedPair& pair, size_t group) {
  PairResult result;
  result.pair = pair;
  result.group = group;
  auto layout = plan_layout(*pair.ref, *pair.device);
  if (layout.is_ok()) {
    result.layout = std::move(layout).value();
  } else {
    result.error = layout.status().message();
    result.error_code = layout.status().code();
  }
  return result;
}

void measure_pairs(const StoreReader& ref, const StoreReader& device, RunComparison& run,
                   const CompareOptions& options) {
  std::vector<PairResult*> work;
  for (PairResult& pair : run.pairs) {
    if (pair.layout) work.push_back(&pair);
  }
  compute_all(ref, device, work, options);
}

Result<Metrics> compare_tensors(const StoreReader& ref_store, const TensorEntry& ref,
                                const StoreReader& device_store, const TensorEntry& device,
                                const LayoutPlan& layout, const CompareOptions& options) {
  const PairTask task{ref_store, ref, device_store, device, layout, options};
  QD_ASSIGN_OR_RETURN(SliceResult all, compare_slice(task, 0));
  for (uint64_t slice = 1; slice < task.slices; ++slice) {
    QD_ASSIGN_OR_RETURN(const SliceResult next, compare_slice(task, slice));
    all.merge(next);
  }
  return finish_pair(task, all);
}

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
  if (agreement.is_ok()) run.classification = std::move(agreement).value();
}

// Mapping entries that name a tensor neither store has: ignored by the alignment, which is worth
// saying (a stale mapping file otherwise looks like it worked).
Result<std::unordered_set<std::string>> tensor_names(const StoreReader& store) {
  std::unordered_set<std::string> names;
  QD_RETURN_IF_ERROR(store.for_each_tensor([&](const TensorEntry& tensor) {
    names.insert(tensor.name);
    return Status::ok();
  }));
  return names;
}

Status warn_unused_mapping(const StoreReader& ref, const StoreReader& device,
                           const NameMapping& mapping, std::vector<std::string>& warnings) {
  QD_ASSIGN_OR_RETURN(const std::unordered_set<std::string> ref_names, tensor_names(ref));
  QD_ASSIGN_OR_RETURN(const std::unordered_set<std::string> device_names, tensor_names(device));
  for (const auto& [from, to] : mapping.ref_to_device) {
    const bool ref_missing = ref_names.count(from) == 0;
    const bool device_missing = device_names.count(to) == 0;
    if (!ref_missing && !device_missing) continue;
    std::string what = ref_missing && device_missing ? "neither tensor exists"
                       : ref_missing                 ? "the reference has no such tensor"
                                                     : "the device has no tensor " + quote_name(to);
    warnings.push_back("mapping entry " + quote_name(from) + " -> " + quote_name(to) +
                       " was not used: " + what);
  }
  return Status::ok();
}

namespace {

// Tensors a node produces and no node consumes.
std::unordered_set<std::string_view> graph_outputs(const std::vector<GraphNode>& graph) {
  std::unordered_set<std::string_view> produced, consumed;
  for (const GraphNode& node : graph) {
    produced.insert(node.outputs.begin(), node.outputs.end());
    consumed.insert(node.inputs.begin(), node.inputs.end());
  }
  for (std::string_view name : consumed) produced.erase(name);
  return produced;
}

void mark_graph_outputs(const std::unordered_set<std::string_view>& outputs, RunComparison& run) {
  for (Unmatched& u : run.alignment.unmatched) u.graph_output = outputs.count(u.tensor->name) != 0;
}

std::string run_pair_label(const RunComparison& run) {
  return "device run " + std::to_string(run.device_run);
}

// "'a' (graph output), 'b', 'c' and 4 more"
std::string name_list(const std::vector<const Unmatched*>& entries) {
  constexpr size_t kShown = 8;
  std::string text;
  for (size_t i = 0; i < entries.size() && i < kShown; ++i) {
    text += (i > 0 ? ", " : "") + quote_name(entries[i]->tensor->name) +
            (entries[i]->graph_output ? " (graph output)" : "");
  }
  if (entries.size() > kShown) text += " and " + std::to_string(entries.size() - kShown) + " more";
  return text;
}

// What a run left out that its verdict alone would not say (docs/metrics.md, "Run rules"): every
// tensor left out of an ambiguous claim; the reference tensors without a device counterpart when
// other pairs of the run were compared; every pair that matched but could not be compared.
void warn_left_out(const RunComparison& run, std::vector<std::string>& warnings) {
  const std::string label = run_pair_label(run);
  std::vector<const Unmatched*> missing;
  for (const Unmatched& u : run.alignment.unmatched) {
    if (u.ambiguous) {
      warnings.push_back(
          label + ": " + std::string(u.side == Side::kReference ? "reference" : "device") +
          " tensor " + quote_name(u.tensor->name) + " was not compared: " + u.reason);
    } else if (u.side == Side::kReference) {
      missing.push_back(&u);
    }
  }
  const bool any_compared = std::any_of(run.pairs.begin(), run.pairs.end(),
                                        [](const PairResult& p) { return p.metrics.has_value(); });
  if (any_compared && !missing.empty()) {
    warnings.push_back(label + ": " + std::to_string(missing.size()) + " reference tensor" +
                       (missing.size() == 1 ? " has" : "s have") +
                       " no device counterpart while others were compared: " + name_list(missing) +
                       " (see the unmatched tensors and their reasons)");
  }
  for (const PairResult& pair : run.pairs) {
    if (pair.metrics) continue;
    warnings.push_back(label + ": " +
                       describe_not_compared(pair.pair.ref->name, pair.pair.device->name,
                                             match_kind_name(pair.pair.how), pair.error));
  }
}

}  // namespace

std::string describe_not_compared(std::string_view ref_name, std::string_view device_name,
                                  std::string_view how, std::string_view why) {
  return "reference " + quote_name(ref_name) + " and device " + quote_name(device_name) +
         " matched (" + std::string(how) + ") but could not be compared: " + std::string(why);
}

const std::vector<GraphNode>& comparison_graph(const StoreReader& ref, const StoreReader& device) {
  return ref.graph().empty() ? device.graph() : ref.graph();
}

namespace {

// The run pairs to compare, in report order: every device run against options.ref_run, else
// runs paired by position (the unpaired ones are warned about).
Result<std::vector<std::pair<const RunInfo*, const RunInfo*>>> pair_runs(
    const StoreReader& ref, const StoreReader& device, const CompareOptions& options,
    std::vector<std::string>& warnings) {
  const auto& ref_runs = ref.runs();
  const auto& device_runs = device.runs();
  if (ref_runs.empty()) return error(ErrorCode::kInvalidArgument, ref.path() + ": no runs");
  if (device_runs.empty()) return error(ErrorCode::kInvalidArgument, device.path() + ": no runs");
  std::vector<std::pair<const RunInfo*, const RunInfo*>> pairs;
  if (options.ref_run) {
    auto it = std::find_if(ref_runs.begin(), ref_runs.end(),
                           [&](const RunInfo& r) { return r.id == *options.ref_run; });
    if (it == ref_runs.end()) {
      return error(ErrorCode::kInvalidArgument, ref.path() + ": no run " +
                                                    std::to_string(*options.ref_run) + " (it has " +
                                                    std::to_string(ref_runs.size()) + " runs)");
    }
    for (const RunInfo& run : device_runs) pairs.emplace_back(&*it, &run);
    return pairs;
  }
  const size_t paired = std::min(ref_runs.size(), device_runs.size());
  for (size_t i = 0; i < paired; ++i) pairs.emplace_back(&ref_runs[i], &device_runs[i]);
  for (size_t i = paired; i < ref_runs.size(); ++i) {
    warnings.push_back("reference run " + run_label(ref_runs[i]) +
                       " has no device run to compare with");
  }
  for (size_t i = paired; i < device_runs.size(); ++i) {
    warnings.push_back("device run " + run_label(device_runs[i]) +
                       " has no reference run (use --ref-run to reuse one)");
  }
  return pairs;
}

// Enough pairs per batch that every worker stays busy across run boundaries, few enough that a
// batch's metrics (histograms, channels, worst elements) stay small.
constexpr size_t kBatchPairs = 512;

}  // namespace

Status compare_runs(const StoreReader& ref, const StoreReader& device,
                    const CompareOptions& options, std::vector<std::string>& warnings,
                    const RunConsumer& consume) {
  QD_ASSIGN_OR_RETURN(const auto run_pairs, pair_runs(ref, device, options, warnings));
  for (const RunInfo& run : device.runs()) {
    if (!run.complete) {
      warnings.push_back("device run " + run_label(run) +
                         " is incomplete (the capture stopped before it ended)");
    }
  }
  if (options.mapping != nullptr) {
    QD_RETURN_IF_ERROR(warn_unused_mapping(ref, device, *options.mapping, warnings));
  }
  const std::unordered_set<std::string_view> outputs = graph_outputs(comparison_graph(ref, device));
  for (size_t next = 0; next < run_pairs.size();) {
    std::vector<RunComparison> batch;
    std::vector<PairResult*> work;
    for (size_t pairs = 0; next < run_pairs.size() && pairs < kBatchPairs; ++next) {
      QD_ASSIGN_OR_RETURN(RunComparison run, plan_run(ref, *run_pairs[next].first, device,
                                                      *run_pairs[next].second, options));
      batch.push_back(std::move(run));
      pairs += batch.back().pairs.size();
    }
    for (RunComparison& run : batch) {
      for (PairResult& pair : run.pairs) {
        if (pair.layout) work.push_back(&pair);
      }
    }
    compute_all(ref, device, work, options);
    for (RunComparison& run : batch) {
      measure_classifier(ref, device, run);
      mark_graph_outputs(outputs, run);
      warn_left_out(run, warnings);
      QD_RETURN_IF_ERROR(consume(std::move(run)));
    }
  }
  return Status::ok();
}

Result<StoreComparison> compare_stores(const StoreReader& ref, const StoreReader& device,
                                       const CompareOptions& options) {
  StoreComparison comparison;
  QD_RETURN_IF_ERROR(
      compare_runs(ref, device, options, comparison.warnings, [&](RunComparison&& run) {
        comparison.runs.push_back(std::move(run));
        return Status::ok();
      }));
  return comparison;
}

}  // namespace qd::compare
