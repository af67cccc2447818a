#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "compare_internal.h"
#include "compare_testing.h"
#include "ideal_noise.h"
#include "mask_filter.h"
#include "qnn_debug/compare/compare.h"
#include "sequential_reader.h"

namespace qd::compare {
namespace {

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
                           WorstElements& worst, EvenSamples& samples, IdealNoise& ideal,
                           MaskFilter& mask) {
  std::vector<Split> r(std::min({chunk, end - begin, kDecodedPiece})), d(r.size());
  double bounds[kDecodedPiece / kErrorBlock];  // the float pass's, for the largest errors
  const bool zeros_unmasked = !mask.rule().masks_device_zero();
  for (uint64_t first = begin; first < end; first += chunk) {
    const uint64_t count = std::min(chunk, end - first);
    QD_RETURN_IF_ERROR(ref_reader.fetch(first, count));
    QD_RETURN_IF_ERROR(device_reader.fetch(first, count));
    // The ideal noise of the chunk's pieces at once where it can (their sums side by side).
    const bool ideal_done = ideal.add_pieces(ref_reader.floats(first), count, first, r.size());
    for (uint64_t at = first; at < first + count; at += r.size()) {
      const uint64_t n = std::min<uint64_t>(r.size(), first + count - at);
      const Values ref = ref_reader.piece(at, n, r.data());
      const Values dev = device_reader.piece(at, n, d.data());
      with_values(ref, [&](const auto* rv) {
        with_values(dev, [&](const auto* dv) {
          if (!(dev.zeros && zeros_unmasked)) acc.add_masked(mask.apply(rv, dv, n, at));
          acc.add(rv, dv, n, at, bounds);
          worst.add(rv, dv, n, at, bounds);
          samples.add(rv, dv, n, at);
          if (!ideal_done) ideal.add(rv, dv, n, at);
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
                           EvenSamples& samples, IdealNoise& ideal, MaskFilter& mask) {
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
    const Split* rv = r.data();
    const Split* dv = d.data();
    acc.add_masked(mask.apply(rv, dv, count, first));
    acc.add(rv, dv, count, first);
    worst.add(rv, dv, count, first);
    samples.add(rv, dv, count, first);
    ideal.add(rv, dv, count, first);
  }
  return Status::ok();
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
  IdealNoise ideal;
  MaskFilter mask;
  DecodeCounts saturated;
  BytesChecked ref_checked, device_checked;

  // What the readers of the slice counted and checked.
  void take_from(const SequentialReader& ref_reader, const SequentialReader& device_reader) {
    saturated = device_reader.saturated();
    ref_checked = ref_reader.checked();
    device_checked = device_reader.checked();
  }

  bool predicted() const { return ref_checked.predicted || device_checked.predicted; }

  void merge(const SliceResult& next) {
    acc.merge(next.acc);
    worst.merge(next.worst);
    samples.merge(next.samples);
    ideal.merge(next.ideal);
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
                  IdealNoise(device, task.channels.map),
                  MaskFilter(MaskRule(ref, device, task.channels.map)),
                  {},
                  {},
                  {}};
  if (task.in_order) {
    const uint64_t begin = std::min(elements, slice * kSliceElements);
    const uint64_t end = std::min(elements, begin + kSliceElements);
    SequentialReader ref_reader(task.ref_store, ref, begin, end);
    SequentialReader device_reader(task.device_store, device, begin, end);
    QD_RETURN_IF_ERROR(accumulate_in_order(ref_reader, device_reader, begin, end, chunk, out.acc,
                                           out.worst, out.samples, out.ideal, out.mask));
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
                                         chunk, out.acc, out.worst, out.samples, out.ideal,
                                         out.mask));
  out.take_from(ref_reader, device_reader);
  return out;
}

// The pair's metrics from all its slices merged.
Result<Metrics> finish_pair(const PairTask& task, SliceResult& all) {
  QD_RETURN_IF_ERROR(verify_checksum(task.ref_store, task.ref, all.ref_checked));
  QD_RETURN_IF_ERROR(verify_checksum(task.device_store, task.device, all.device_checked));
  const Quantization& quant = task.device.quant;
  // A quantized device holds a masked position at its lowest raw code (mask.h): that is the
  // mask, not clipping.
  if (quant.is_quantized()) {
    all.saturated.at_min -= std::min(all.saturated.at_min, all.acc.masked());
  }
  all.acc.add_saturation(all.saturated.saturated());
  Metrics metrics = all.acc.finish(quant.is_quantized() ? &quant : nullptr);
  metrics.worst = all.worst.sorted();
  metrics.samples = all.samples.sorted();
  metrics.ideal_sqnr_db = all.ideal.sqnr_db();
  if (!metrics.channels.empty()) metrics.channel_axis = task.channels.axis;
  if (quant.is_quantized()) {
    metrics.saturated_low = all.saturated.at_min;
    metrics.saturated_high = all.saturated.at_max;
  }
  return metrics;
}

// Every slice of the pair, on this thread, merged in order.
Result<Metrics> compare_pair(const PairTask& task, bool& predicted) {
  QD_ASSIGN_OR_RETURN(SliceResult all, compare_slice(task, 0));
  for (uint64_t slice = 1; slice < task.slices; ++slice) {
    QD_ASSIGN_OR_RETURN(const SliceResult next, compare_slice(task, slice));
    all.merge(next);
  }
  predicted = all.predicted();
  return finish_pair(task, all);
}

// The pair read again once both tensors' chunks are located in the stores' indexes
// (StoreReader::relocate): its CRC then judges the store.
Result<Metrics> compare_located(const PairTask& task) {
  task.ref_store.relocate(task.ref);
  task.device_store.relocate(task.device);
  bool ignored = false;
  return compare_pair(task, ignored);
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
    const bool predicted = total_ && total_->predicted();
    total_.reset();
    if (!metrics.is_ok() && metrics.status().code() == ErrorCode::kCorrupt && predicted) {
      metrics = compare_located(task_);  // maybe a chunk was not where it was predicted
    }
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

}  // namespace

// Every slice of every pair of `work`, pair after pair, on options.jobs threads.
void compute_all(const StoreReader& ref, const StoreReader& device, std::vector<PairResult*>& work,
                 const CompareOptions& options, const std::vector<std::function<void()>>& first) {
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
  run_parallel(first.size() + slices.size(), options.jobs, [&](size_t i) {
    if (i < first.size()) return first[i]();
    auto [merger, slice] = slices[i - first.size()];
    merger->deliver(slice, compare_slice(merger->task(), slice));
  });
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
  bool predicted = false;
  Result<Metrics> metrics = compare_pair(task, predicted);
  if (!metrics.is_ok() && metrics.status().code() == ErrorCode::kCorrupt && predicted) {
    return compare_located(task);
  }
  return metrics;
}

}  // namespace qd::compare
