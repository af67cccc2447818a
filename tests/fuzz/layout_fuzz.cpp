// What `qnn-debug diff` does with one pair of store tensors once they are read: reconcile the
// layouts, un-permute, decode and dequantize every dtype, and accumulate the metrics, as
// compare_tensors does but without HDF5 (so ~10^4 runs a second instead of ~40). The fuzz input
// describes the two tensors (dtype, dims, axis order, quantization, bytes); tensors the store
// reader would refuse (qd::validate_tensor) are skipped, as a real store never yields them.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "qnn_debug/base/encoding_lint.h"
#include "qnn_debug/compare/decode.h"
#include "qnn_debug/compare/layout.h"
#include "qnn_debug/compare/metrics.h"
#include "qnn_debug/compare/worst.h"
#include "qnn_debug/etdump/store.h"
#include "tensor_picker.h"

namespace {

using namespace qd;
using namespace qd::compare;
using namespace qd::fuzz;

constexpr uint64_t kMaxElements = uint64_t{1} << 14;  // small tensors: the fuzzer wants speed

struct Side {
  TensorEntry tensor;
  std::vector<uint8_t> bytes;
};

// A tensor as the store reader would return it, or false when the reader would refuse its row.
bool pick_side(FuzzedDataProvider& in, const char* name, Side& side) {
  TensorEntry& t = side.tensor;
  t.name = name;
  t.dtype = pick_dtype(in);
  t.dims = pick_dims(in);
  t.axis_order = pick_axis_order(in, t.dims.size());
  t.quant = pick_quantization(in, t.dims);
  if (t.element_count() > kMaxElements) return false;
  side.bytes = in.ConsumeBytes<uint8_t>(storage_bytes(t.dtype, t.element_count()));
  side.bytes.resize(storage_bytes(t.dtype, t.element_count()));
  t.data_nbytes = side.bytes.size();
  return validate_tensor(t, side.bytes.size()).is_ok();
}

// Decodes the whole tensor in chunks of `chunk` elements (even, as compare's readers use), each
// from the byte that holds its first element.
std::vector<double> decode_all(const Side& side, uint64_t chunk, DecodeCounts& counts) {
  const TensorEntry& t = side.tensor;
  const bool packed = info(t.dtype).bits == 4;
  std::vector<double> out(t.element_count());
  for (uint64_t first = 0; first < out.size(); first += chunk) {
    const uint64_t count = std::min<uint64_t>(chunk, out.size() - first);
    const uint64_t byte = packed ? first / 2 : first * (info(t.dtype).bits / 8);
    counts += decode(t, side.bytes.data() + byte, first, count, out.data() + first);
  }
  return out;
}

void compare_pair(const Side& ref, const Side& device, const LayoutPlan& plan, uint64_t chunk) {
  const TensorEntry& d = device.tensor;
  DecodeCounts ignored, saturated;
  const std::vector<double> r = decode_all(ref, chunk, ignored);
  const std::vector<double> stored = decode_all(device, chunk, saturated);
  auto permuter = Permuter::create(plan, d.dims);
  if (!permuter.is_ok()) return;
  std::vector<uint64_t> index;
  if (!permuter->map(0, r.size(), &index).is_ok()) return;
  const ChannelView channels = channel_view(ref.tensor, d, plan);
  std::vector<double> gathered(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    gathered[i] = stored[index[i]];
    // The view's map, in reference order, must name each element's own encoding channel.
    if (d.quant.per_axis() &&
        (i / channels.map.inner) % channels.map.count != channel_of(d, index[i])) {
      __builtin_trap();
    }
  }
  MetricAccumulator acc(MetricOptions{}, channels.map);
  acc.add(r.data(), gathered.data(), r.size(), 0);
  acc.add_saturation(saturated.saturated());
  (void)acc.finish(d.quant.is_quantized() ? &d.quant : nullptr);
  WorstElements worst;
  worst.add(r.data(), gathered.data(), r.size(), 0);
  (void)worst.sorted();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint64_t chunk = 2 * in.ConsumeIntegralInRange<uint64_t>(1, 64);
  Side ref, device;
  if (!pick_side(in, "ref", ref) || !pick_side(in, "device", device)) return 0;
  for (const EncodingFinding& finding : lint_encoding(device.tensor)) (void)describe(finding);
  (void)saturation_range(device.tensor);
  auto plan = plan_layout(ref.tensor, device.tensor);
  if (!plan.is_ok() || ref.tensor.element_count() != device.tensor.element_count()) return 0;
  compare_pair(ref, device, *plan, chunk);
  return 0;
}
