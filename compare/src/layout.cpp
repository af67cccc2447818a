#include "qnn_debug/compare/layout.h"

#include "qnn_debug/compare/kv_cache.h"

#include <algorithm>
#include <numeric>

namespace qd::compare {
namespace {

Status invalid(std::string message) {
  return error(ErrorCode::kInvalidArgument, std::move(message));
}

std::string describe_pair(const TensorEntry& ref, const TensorEntry& device) {
  return "reference " + quote_name(ref.name) + " " + format_dims(ref.dims) + " vs device " +
         quote_name(device.name) + " " + format_dims(device.dims);
}

std::vector<uint64_t> without_ones(const std::vector<uint64_t>& dims) {
  std::vector<uint64_t> kept;
  for (uint64_t dim : dims) {
    if (dim != 1) kept.push_back(dim);
  }
  return kept;
}

// True when `a` and `b` differ only by size-1 axes: same elements in the same order.
bool same_but_size1(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  return without_ones(a) == without_ones(b);
}

bool is_permutation_of_rank(const std::vector<uint8_t>& order, size_t rank) {
  if (order.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (uint8_t axis : order) {
    if (axis >= rank || seen[axis]) return false;
    seen[axis] = true;
  }
  return true;
}

std::vector<uint8_t> normalized(std::vector<uint8_t> order) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != i) return order;
  }
  return {};
}

std::string format_order(const std::vector<uint8_t>& order) {
  std::string text;
  for (uint8_t axis : order) text += (text.empty() ? "" : ",") + std::to_string(axis);
  return "{" + text + "}";
}

// Every axis order mapping device dims onto reference dims (reference axis i = device axis
// order[i]), counting orders that differ only in where size-1 axes go as one: a size-1 reference
// axis always takes the lowest free size-1 device axis. Keeps the first `keep` of them.
class PermutationSearch {
 public:
  PermutationSearch(const std::vector<uint64_t>& ref, const std::vector<uint64_t>& device,
                    size_t keep)
      : ref_(ref), device_(device), keep_(keep), used_(device.size(), false) {}

  void run() { visit(0); }
  uint64_t count() const { return count_; }
  const std::vector<std::vector<uint8_t>>& found() const { return found_; }

 private:
  void visit(size_t axis) {
    if (axis == ref_.size()) {
      ++count_;
      if (found_.size() < keep_) found_.push_back(order_);
      return;
    }
    for (size_t j = 0; j < device_.size(); ++j) {
      if (used_[j] || device_[j] != ref_[axis]) continue;
      used_[j] = true;
      order_.push_back(static_cast<uint8_t>(j));
      visit(axis + 1);
      order_.pop_back();
      used_[j] = false;
      if (ref_[axis] == 1) break;  // size-1 axes: only the canonical choice
    }
  }

  const std::vector<uint64_t>& ref_;
  const std::vector<uint64_t>& device_;
  size_t keep_;
  std::vector<bool> used_;
  std::vector<uint8_t> order_;
  std::vector<std::vector<uint8_t>> found_;
  uint64_t count_ = 0;
};

}  // namespace

std::string format_dims(const std::vector<uint64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

namespace {

// When the reference itself is stored in a non-logical layout (it has an axis order), the
// device's order must be expressed against the reference's stored axes: reference stored axis j
// is logical axis L with ref.axis_order[L] = j, which the device stores as its axis
// order[L] (its stored axis L when it has no order, i.e. it is stored logically).
std::vector<uint8_t> order_relative_to_reference(const TensorEntry& ref,
                                                 const TensorEntry& device) {
  std::vector<uint8_t> relative(ref.axis_order.size());
  for (size_t logical = 0; logical < ref.axis_order.size(); ++logical) {
    const auto device_axis =
        device.axis_order.empty() ? static_cast<uint8_t>(logical) : device.axis_order[logical];
    relative[ref.axis_order[logical]] = device_axis;
  }
  return relative;
}

}  // namespace

// plan_layout for a reference stored in its logical layout (defined below).
Result<LayoutPlan> plan_stored_layout(const TensorEntry& ref, const TensorEntry& device);

Result<LayoutPlan> plan_layout(const TensorEntry& ref, const TensorEntry& device) {
  const bool ref_has_order =
      !ref.axis_order.empty() && is_permutation_of_rank(ref.axis_order, ref.dims.size()) &&
      device.dims.size() == ref.dims.size() &&
      (device.axis_order.empty() || is_permutation_of_rank(device.axis_order, device.dims.size()));
  // Same stored layout on both sides (the same physical order) needs no permutation at all.
  if (ref_has_order && device.axis_order == ref.axis_order && device.dims == ref.dims) {
    return LayoutPlan{};
  }
  if (ref_has_order && !(device.axis_order.empty() && device.dims == ref.dims)) {
    TensorEntry stored_ref = ref;
    stored_ref.axis_order.clear();
    TensorEntry relative_device = device;
    relative_device.axis_order = order_relative_to_reference(ref, device);
    return plan_layout(stored_ref, relative_device);
  }
  return plan_stored_layout(ref, device);
}

Result<LayoutPlan> plan_stored_layout(const TensorEntry& ref, const TensorEntry& device) {
  if (ref.dims.size() > static_cast<size_t>(kMaxRank) ||
      device.dims.size() > static_cast<size_t>(kMaxRank)) {
    return invalid("shape mismatch: " + describe_pair(ref, device) + ": rank above " +
                   std::to_string(kMaxRank));
  }
  LayoutPlan plan;

  if (!device.axis_order.empty()) {
    if (!is_permutation_of_rank(device.axis_order, device.dims.size())) {
      return invalid("device tensor " + quote_name(device.name) + ": stored axis order " +
                     format_order(device.axis_order) + " is not a permutation of its rank " +
                     std::to_string(device.dims.size()));
    }
    std::vector<uint64_t> permuted(device.dims.size());
    for (size_t i = 0; i < permuted.size(); ++i) permuted[i] = device.dims[device.axis_order[i]];
    plan.axis_order = normalized(device.axis_order);
    if (permuted == ref.dims) return plan;
    if (same_but_size1(permuted, ref.dims)) {
      plan.reshaped = true;
      return plan;
    }
    return invalid("shape mismatch: " + describe_pair(ref, device) +
                   " (after the stored axis order " + describe_axis_order(device.axis_order) +
                   ": " + format_dims(permuted) + ")");
  }

  if (device.dims == ref.dims) return plan;
  if (same_but_size1(device.dims, ref.dims)) {
    plan.reshaped = true;
    return plan;
  }

  if (device.dims.size() == ref.dims.size()) {
    std::vector<uint64_t> a = ref.dims;
    std::vector<uint64_t> b = device.dims;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a == b) {
      constexpr size_t kListed = 6;
      PermutationSearch search(ref.dims, device.dims, kListed);
      search.run();
      if (search.count() == 1) {
        plan.axis_order = search.found().front();
        plan.inferred = true;
        return plan;
      }
      std::string candidates;
      for (const auto& order : search.found()) {
        candidates += (candidates.empty() ? "" : ", ") + format_order(order);
      }
      if (search.count() > search.found().size()) {
        candidates += ", ... (" + std::to_string(search.count()) + " in all)";
      }
      return invalid("ambiguous permutation: " + describe_pair(ref, device) + ": " +
                     std::to_string(search.count()) + " axis orders fit (" + candidates +
                     "); store the axis order with the device tensor");
    }
  }

  std::string hint;
  if (ref.element_count() == device.element_count()) {
    hint =
        " (same element count, but only size-1 axes may be added or removed; a reshape of "
        "larger axes does not say how elements are ordered)";
  }
  return invalid("shape mismatch: " + describe_pair(ref, device) + hint);
}

Result<Permuter> Permuter::create(const LayoutPlan& plan,
                                  const std::vector<uint64_t>& device_dims) {
  const size_t rank = device_dims.size();
  if (rank > static_cast<size_t>(kMaxRank)) {
    return invalid("device dims " + format_dims(device_dims) + ": rank above " +
                   std::to_string(kMaxRank));
  }
  std::vector<uint8_t> order = plan.axis_order;
  if (order.empty()) {
    for (size_t i = 0; i < rank; ++i) order.push_back(static_cast<uint8_t>(i));
  } else if (!is_permutation_of_rank(order, rank)) {
    return invalid("axis order " + format_order(plan.axis_order) +
                   " is not a permutation of the device dims " + format_dims(device_dims));
  }

  Permuter permuter;
  permuter.count_ = 1;
  for (uint64_t dim : device_dims) {
    if (__builtin_mul_overflow(permuter.count_, dim, &permuter.count_)) {
      return invalid("device dims " + format_dims(device_dims) + " overflow 64 bits");
    }
  }
  if (permuter.count_ == 0) return permuter;

  std::vector<uint64_t> strides(rank, 1);
  for (size_t j = rank; j-- > 1;) strides[j - 1] = strides[j] * device_dims[j];
  for (uint8_t axis : order) {
    const uint64_t size = device_dims[axis];
    if (size == 1) continue;
    const uint64_t stride = strides[axis];
    // Merge with the axis before when stepping it equals running through this one.
    if (!permuter.axes_.empty() && permuter.axes_.back().stride == stride * size) {
      permuter.axes_.back() = {permuter.axes_.back().size * size, stride};
    } else {
      permuter.axes_.push_back({size, stride});
    }
  }
  return permuter;
}

Status Permuter::check_range(uint64_t first, uint64_t n) const {
  if (first <= count_ && n <= count_ - first) return Status::ok();
  return invalid("reference index range [" + std::to_string(first) + ", +" + std::to_string(n) +
                 ") is outside the " + std::to_string(count_) + " elements");
}

Status Permuter::map(uint64_t first, std::span<uint64_t> out) const {
  const uint64_t n = out.size();
  QD_RETURN_IF_ERROR(check_range(first, n));
  if (n == 0) return Status::ok();
  if (is_identity()) {
    std::iota(out.begin(), out.end(), first);
    return Status::ok();
  }

  const size_t axes = axes_.size();
  const size_t inner = axes - 1;
  // Odometer position of `first`: the only divisions of the call.
  uint64_t coord[kMaxRank] = {};
  uint64_t rest = first;
  for (size_t i = axes; i-- > 0;) {
    coord[i] = rest % axes_[i].size;
    rest /= axes_[i].size;
  }
  uint64_t outer_offset = 0;  // device offset of the outer coordinates
  for (size_t i = 0; i < inner; ++i) outer_offset += coord[i] * axes_[i].stride;

  const uint64_t inner_size = axes_[inner].size;
  const uint64_t inner_stride = axes_[inner].stride;
  uint64_t c = coord[inner];
  uint64_t k = 0;
  while (true) {
    const uint64_t run = std::min(inner_size - c, n - k);
    uint64_t value = outer_offset + c * inner_stride;
    uint64_t* dst = out.data() + k;
    for (uint64_t j = 0; j < run; ++j, value += inner_stride) dst[j] = value;
    k += run;
    if (k == n) break;
    c = 0;
    for (size_t i = inner; i-- > 0;) {  // carry into the outer axes
      outer_offset += axes_[i].stride;
      if (++coord[i] < axes_[i].size) break;
      outer_offset -= axes_[i].size * axes_[i].stride;
      coord[i] = 0;
    }
  }
  return Status::ok();
}

Status Permuter::map(uint64_t first, uint64_t count, std::vector<uint64_t>* out) const {
  QD_RETURN_IF_ERROR(check_range(first, count));
  out->resize(count);
  return map(first, std::span<uint64_t>(*out));
}

namespace {

// The per-channel view (docs/metrics.md, "Per-channel figures"): at most this many channels, each
// with at least kMinChannelElements elements, so the view stays readable and each figure means
// something (a [1, 1000] classifier output gets no view).
constexpr uint64_t kMaxViewChannels = 4096;
constexpr uint64_t kMinChannelElements = 8;

uint64_t product_after(const std::vector<uint64_t>& dims, size_t axis) {
  uint64_t inner = 1;
  for (size_t k = axis + 1; k < dims.size(); ++k) inner *= dims[k];
  return inner;
}

// The reference axis of `count` elements with `inner` elements after it (size-1 axes aside).
std::optional<uint32_t> axis_with(const std::vector<uint64_t>& dims, uint64_t count,
                                  uint64_t inner) {
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == count && product_after(dims, k) == inner) return static_cast<uint32_t>(k);
  }
  return std::nullopt;
}

// A per-axis device encoding's axis, read in the reference order: the layout permutes the device
// axes (then drops or adds size-1 ones, which moves no element), so the channel's position among
// the permuted device axes fixes the elements after it.
ChannelView encoding_channels(const TensorEntry& ref, const TensorEntry& device,
                              const LayoutPlan& layout) {
  const auto axis = static_cast<uint8_t>(device.quant.axis);
  std::vector<uint8_t> order = layout.axis_order;
  if (order.empty()) {
    for (size_t k = 0; k < device.dims.size(); ++k) order.push_back(static_cast<uint8_t>(k));
  }
  const size_t position =
      static_cast<size_t>(std::find(order.begin(), order.end(), axis) - order.begin());
  ChannelView view;
  view.map.count = device.dims[axis];
  for (size_t k = position + 1; k < order.size(); ++k) view.map.inner *= device.dims[order[k]];
  view.axis = axis_with(ref.dims, view.map.count, view.map.inner);
  return view;
}

// The channel axis of a tensor with no per-axis encoding, from its rank in the reference
// (PyTorch) layout: axis 1 of NCHW / NCDHW activations, the last (features) of [N, C] and
// [N, T, C].
std::optional<uint32_t> conventional_channel_axis(const std::vector<uint64_t>& dims) {
  switch (dims.size()) {
    case 2:
    case 3:
      return static_cast<uint32_t>(dims.size() - 1);
    case 4:
    case 5:
      return 1;
    default:
      return std::nullopt;
  }
}

// A KV cache's heads x positions cells, when its heads sit next to its positions and the cells
// are few enough to keep each one's sums (a few MB at most).
std::optional<ChannelView> kv_cells_view(const TensorEntry& ref, uint32_t position_axis) {
  constexpr uint64_t kMaxKvCells = uint64_t{1} << 16;
  const std::optional<uint32_t> head_axis = kv_head_axis(ref.dims);
  if (!head_axis) return std::nullopt;
  const uint64_t heads = ref.dims[*head_axis], positions = ref.dims[position_axis];
  const uint64_t cells = heads * positions;
  if (positions < 2 || positions > kMaxViewChannels || cells > kMaxKvCells ||
      ref.element_count() < cells * kMinChannelElements) {
    return std::nullopt;
  }
  ChannelMap map{cells, ref.dims[3], heads, *head_axis > position_axis};
  return ChannelView{map, position_axis};
}

}  // namespace

ChannelView channel_view(const TensorEntry& ref, const TensorEntry& device,
                         const LayoutPlan& layout) {
  if (device.quant.per_axis()) return encoding_channels(ref, device, layout);
  // A KV cache is read per position: which positions differ is what a decode step changes.
  const bool kv = is_kv_cache(ref.name);
  const std::optional<uint32_t> axis =
      kv ? kv_position_axis(ref.dims) : conventional_channel_axis(ref.dims);
  if (!axis) return {};
  if (kv) {
    if (const std::optional<ChannelView> cells = kv_cells_view(ref, *axis)) return *cells;
  }
  const uint64_t count = ref.dims[*axis];
  if (count < 2 || count > kMaxViewChannels || ref.element_count() < count * kMinChannelElements) {
    return {};
  }
  return {{count, product_after(ref.dims, *axis)}, axis};
}

}  // namespace qd::compare
