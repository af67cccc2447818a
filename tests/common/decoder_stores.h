// A reference / device store pair shaped like a Qwen3-0.6B-class decoder's generation: run 0 the
// prefill of `prefill` tokens, runs 1..steps one decode step each, every op of every layer stored
// (the names and graph of tests/python/emulated_decoder.py: RMSNorm, q/k/v projections with
// grouped-query heads, RoPE, the KV caches stored whole in every run, attention scores with the
// slots beyond the current length masked, softmax, the attention output, the MLP, the residuals),
// then the final norm and the logits over the vocabulary. The reference is float32; the device
// holds each op's output per-tensor quantized (8 or 16 bits, QNN's offset convention) with about
// half a step of rounding noise, so every pair passes: a clean device at full size. For the
// benchmark of tests/bench/decoder_bench.cpp (docs/performance.md, "A decoder at full size").
//
// Values are a hash of the op, the token position and the element, so a cache slot holds the same
// value in every run (the rope_k / v_proj of its position) and the stores are the same for a seed.
// They are not a model's: only their sizes, ranges and masks matter here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qnn_debug/etdump/store_writer.h"

namespace qd::testing {

struct DecoderShape {
  uint32_t hidden = 1024;
  uint32_t layers = 28;
  uint32_t q_heads = 16;
  uint32_t kv_heads = 8;
  uint32_t head_dim = 128;
  uint32_t ffn = 3072;
  uint32_t prefill = 64;  // tokens of run 0
  uint32_t cache = 512;   // KV cache slots
  uint32_t steps = 16;    // decode steps: runs 1..steps
  uint32_t vocab = 151936;
  unsigned bits = 16;  // the device's codes: 8 or 16 (signed)
  uint64_t seed = 1;
};

struct DecoderStores {
  uint64_t pairs = 0;                        // tensors of each store
  uint64_t ref_bytes = 0, device_bytes = 0;  // tensor data bytes of each store
};

namespace decoder_detail {

// What an op's output looks like: its shape, its range, how its values are made.
enum class Kind { kTokens, kHidden, kQuery, kKeyValue, kCache, kScores, kProbs, kFfn, kLogits };

struct Op {
  std::string name, op_type;
  std::vector<std::string> inputs;
  Kind kind;
  float lo, hi;  // the range of its finite values
  uint64_t key;  // the hash key of its values: a cache shares its source's, probs their scores'
};

inline uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Element `index` of the values keyed `key`: two 24-bit uniforms for a triangular value in
// [0, 1], and 16 more bits for the device's rounding noise.
struct Draw {
  float unit;   // in [0, 1], peaked at 1/2
  float noise;  // in [-1/2, 1/2)
};
inline Draw draw(uint64_t seed, uint64_t key, uint64_t index) {
  const uint64_t h = mix(seed ^ mix(key * 0x9E3779B97F4A7C15ull + index));
  const float a = static_cast<float>(h >> 40) * 0x1p-24f;
  const float b = static_cast<float>((h >> 16) & 0xFFFFFF) * 0x1p-24f;
  return {(a + b) * 0.5f, static_cast<float>(h & 0xFFFF) * 0x1p-16f - 0.5f};
}

// Visible attention scores lie in [-kScoreRange, kScoreRange].
inline constexpr float kScoreRange = 12;

// The graph of one layer, in capture order (the leaf names of emulated_decoder.py).
inline void add_layer(std::vector<Op>& ops, uint32_t layer, std::string& x) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  const std::string a = p + "attn.", m = p + "mlp.";
  const uint64_t base = (uint64_t{layer} + 1) << 8;
  using K = Kind;
  const auto op = [&](std::string name, const char* type, std::vector<std::string> inputs, K kind,
                      float lo, float hi, uint64_t key_of = 0) {
    const uint64_t key = key_of != 0 ? key_of : base + ops.size() % 256;
    ops.push_back({std::move(name), type, std::move(inputs), kind, lo, hi, key});
  };
  op(p + "attn_norm", "RMSNorm", {x}, K::kHidden, -4, 4);
  op(a + "q_proj", "Linear", {p + "attn_norm"}, K::kQuery, -6, 6);
  op(a + "k_proj", "Linear", {p + "attn_norm"}, K::kKeyValue, -6, 6);
  op(a + "v_proj", "Linear", {p + "attn_norm"}, K::kKeyValue, -3, 3);
  op(a + "rope_q", "RoPE", {a + "q_proj"}, K::kQuery, -6, 6);
  op(a + "rope_k", "RoPE", {a + "k_proj"}, K::kKeyValue, -6, 6);
  const uint64_t rope_k = ops.back().key, v_proj = ops[ops.size() - 3].key;
  op(a + "k_cache", "KVCacheUpdate", {a + "rope_k"}, K::kCache, -6, 6, rope_k);
  op(a + "v_cache", "KVCacheUpdate", {a + "v_proj"}, K::kCache, -3, 3, v_proj);
  op(a + "scores", "AttentionScores", {a + "rope_q", a + "k_cache"}, K::kScores, -kScoreRange,
     kScoreRange);
  op(a + "probs", "Softmax", {a + "scores"}, K::kProbs, 0, 1, ops.back().key);  // their softmax
  op(a + "out", "MatMul", {a + "probs", a + "v_cache"}, K::kQuery, -3, 3);
  op(a + "o_proj", "Linear", {a + "out"}, K::kHidden, -4, 4);
  op(p + "attn_residual", "Add", {x, a + "o_proj"}, K::kHidden, -16, 16);
  op(p + "mlp_norm", "RMSNorm", {p + "attn_residual"}, K::kHidden, -4, 4);
  op(m + "gate_proj", "Linear", {p + "mlp_norm"}, K::kFfn, -8, 8);
  op(m + "up_proj", "Linear", {p + "mlp_norm"}, K::kFfn, -8, 8);
  op(m + "act", "SiLU", {m + "gate_proj"}, K::kFfn, -0.28f, 8);
  op(m + "mul", "Mul", {m + "act", m + "up_proj"}, K::kFfn, -32, 32);
  op(m + "down_proj", "Linear", {m + "mul"}, K::kHidden, -8, 8);
  op(p + "mlp_residual", "Add", {p + "attn_residual", m + "down_proj"}, K::kHidden, -24, 24);
  x = p + "mlp_residual";
}

inline std::vector<Op> graph(const DecoderShape& shape) {
  std::vector<Op> ops;
  ops.push_back({"tokens", "Input", {}, Kind::kTokens, 0, 0, 1});
  ops.push_back({"embed", "Gather", {"tokens"}, Kind::kHidden, -1, 1, 2});
  std::string x = "embed";
  for (uint32_t layer = 0; layer < shape.layers; ++layer) add_layer(ops, layer, x);
  ops.push_back({"norm", "RMSNorm", {x}, Kind::kHidden, -4, 4, 3});
  ops.push_back({"lm_head", "Linear", {"norm"}, Kind::kLogits, -20, 20, 4});
  return ops;
}

// One run: its first token's position and its tokens.
struct Run {
  uint32_t start, tokens;
  uint32_t length() const { return start + tokens; }  // cache slots written after it
};

inline std::vector<uint64_t> dims_of(const Op& op, const DecoderShape& s, const Run& run) {
  const uint64_t t = run.tokens;
  switch (op.kind) {
    case Kind::kTokens:
      return {1, t};
    case Kind::kHidden:
      return {1, t, s.hidden};
    case Kind::kQuery:
      return {1, t, uint64_t{s.q_heads} * s.head_dim};
    case Kind::kKeyValue:
      return {1, t, uint64_t{s.kv_heads} * s.head_dim};
    case Kind::kCache:
      return {1, s.kv_heads, s.cache, s.head_dim};
    case Kind::kScores:
    case Kind::kProbs:
      return {1, s.q_heads, t, s.cache};
    case Kind::kFfn:
      return {1, t, s.ffn};
    case Kind::kLogits:
      return {1, t, s.vocab};
  }
  return {};
}

// The device's per-tensor encoding of an op: its range two steps inside the codes' ends, so that
// only a masked score sits at the lowest code and nothing saturates.
struct Encoding {
  double scale;
  int64_t offset;
  int64_t qmin, qmax;
};
inline Encoding encoding_of(const Op& op, unsigned bits) {
  const int64_t qmin = -(int64_t{1} << (bits - 1)), qmax = (int64_t{1} << (bits - 1)) - 1;
  const double scale = (double(op.hi) - double(op.lo)) / double(qmax - qmin - 4);
  return {scale, std::llround(op.lo / scale) - (qmin + 2), qmin, qmax};
}

// Fills one run's reference values of an op. [1, T, width] tensors are keyed by (position, column),
// a cache by (slot, column) as its source is, so slot s holds position s's values in every run.
class Values {
 public:
  Values(const DecoderShape& shape, const Run& run) : shape_(shape), run_(run) {}

  void fill(const Op& op, std::vector<float>& ref, std::vector<float>& noise) const {
    if (op.kind == Kind::kCache) return fill_cache(op, ref, noise);
    if (op.kind == Kind::kScores || op.kind == Kind::kProbs) return fill_attention(op, ref, noise);
    const uint64_t width = ref.size() / run_.tokens;
    for (uint64_t t = 0; t < run_.tokens; ++t) {
      const uint64_t row = (uint64_t{run_.start} + t) * width;
      for (uint64_t c = 0; c < width; ++c)
        put(op, row + c, ref[t * width + c], noise[t * width + c]);
    }
  }

 private:
  void put(const Op& op, uint64_t index, float& value, float& noise) const {
    const Draw d = draw(shape_.seed, op.key, index);
    value = op.lo + (op.hi - op.lo) * d.unit;
    noise = d.noise;
  }

  // [1, heads, slots, head_dim]: the slots beyond the run's length are still zero.
  void fill_cache(const Op& op, std::vector<float>& ref, std::vector<float>& noise) const {
    const uint64_t dim = shape_.head_dim, slots = shape_.cache, width = shape_.kv_heads * dim;
    for (uint64_t h = 0; h < shape_.kv_heads; ++h) {
      for (uint64_t s = 0; s < slots; ++s) {
        float* out = ref.data() + (h * slots + s) * dim;
        float* out_noise = noise.data() + (h * slots + s) * dim;
        for (uint64_t c = 0; c < dim; ++c) {
          if (s < run_.length()) {
            put(op, s * width + h * dim + c, out[c], out_noise[c]);
          } else {
            out[c] = 0;
            out_noise[c] = 0;
          }
        }
      }
    }
  }

  // [1, heads, T, slots]: query t (position start + t) sees slots 0 .. start + t; the others are
  // -inf in the scores and 0 in the probabilities, each row of which is the softmax of its
  // scores.
  void fill_attention(const Op& op, std::vector<float>& ref, std::vector<float>& noise) const {
    const uint64_t slots = shape_.cache;
    const Op scores{"", "", {}, Kind::kScores, -kScoreRange, kScoreRange, op.key};
    for (uint64_t row = 0; row < uint64_t{shape_.q_heads} * run_.tokens; ++row) {
      const uint64_t position = run_.start + row % run_.tokens, visible = position + 1;
      float* out = ref.data() + row * slots;
      float* out_noise = noise.data() + row * slots;
      for (uint64_t s = 0; s < slots; ++s) {
        const uint64_t index = ((row / run_.tokens) * slots + position) * slots + s;
        out[s] = -std::numeric_limits<float>::infinity();
        out_noise[s] = 0;
        if (s < visible) put(scores, index, out[s], out_noise[s]);
      }
      if (op.kind == Kind::kProbs) softmax(out, visible, slots);
    }
  }

  static void softmax(float* row, uint64_t visible, uint64_t slots) {
    const float top = *std::max_element(row, row + visible);
    double sum = 0;
    for (uint64_t s = 0; s < visible; ++s) sum += std::exp(double(row[s]) - top);
    for (uint64_t s = 0; s < visible; ++s) {
      row[s] = static_cast<float>(std::exp(double(row[s]) - top) / sum);
    }
    std::fill(row + visible, row + slots, 0.0f);
  }

  const DecoderShape& shape_;
  Run run_;
};

template <class T>
std::span<const uint8_t> bytes_of(const std::vector<T>& values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(T)};
}

// The device's codes of reference values: rounded with the noise added, kept off the ends; a
// masked score (-inf) at the lowest code, as a quantized exporter's mask clamps there.
template <class Code>
void quantize(const std::vector<float>& ref, const std::vector<float>& noise, const Encoding& e,
              std::vector<Code>& codes) {
  codes.resize(ref.size());
  const double inverse = 1.0 / e.scale;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) {
      codes[i] = static_cast<Code>(e.qmin);
      continue;
    }
    const double q = std::nearbyint(double(ref[i]) * inverse - double(e.offset) + noise[i]);
    codes[i] = static_cast<Code>(std::clamp<double>(q, double(e.qmin + 1), double(e.qmax - 1)));
  }
}

class PairWriter {
 public:
  PairWriter(const DecoderShape& shape, StoreWriter& ref, StoreWriter& device)
      : shape_(shape), ref_(ref), device_(device) {}

  Status write_op(const Op& op, int64_t handle, const Run& run, DecoderStores& out) {
    TensorRecord record;
    record.name = op.name;
    if (handle > 0) record.handles = {handle};
    record.role = op.kind == Kind::kTokens   ? TensorRole::kGraphInput
                  : op.kind == Kind::kLogits ? TensorRole::kGraphOutput
                                             : TensorRole::kIntermediate;
    record.dims = dims_of(op, shape_, run);
    ++out.pairs;
    if (op.kind == Kind::kTokens) return write_tokens(record, run, out);
    ref_values_.resize(record.element_count());
    noise_.resize(ref_values_.size());
    Values(shape_, run).fill(op, ref_values_, noise_);
    record.dtype = DType::kFloat32;
    QD_RETURN_IF_ERROR(ref_.append_tensor(record, bytes_of(ref_values_), run.start));
    out.ref_bytes += ref_values_.size() * sizeof(float);
    const Encoding e = encoding_of(op, shape_.bits);
    record.quant.scales = {e.scale};
    record.quant.offsets = {e.offset};
    if (shape_.bits == 8) {
      record.dtype = DType::kSFixed8;
      quantize(ref_values_, noise_, e, codes8_);
      out.device_bytes += codes8_.size();
      return device_.append_tensor(record, bytes_of(codes8_), run.start);
    }
    record.dtype = DType::kSFixed16;
    quantize(ref_values_, noise_, e, codes16_);
    out.device_bytes += codes16_.size() * sizeof(int16_t);
    return device_.append_tensor(record, bytes_of(codes16_), run.start);
  }

 private:
  Status write_tokens(TensorRecord& record, const Run& run, DecoderStores& out) {
    std::vector<int32_t> tokens(run.tokens);
    for (uint32_t t = 0; t < run.tokens; ++t) {
      tokens[t] = static_cast<int32_t>(mix(shape_.seed + run.start + t) % shape_.vocab);
    }
    record.dtype = DType::kInt32;
    QD_RETURN_IF_ERROR(ref_.append_tensor(record, bytes_of(tokens), run.start));
    QD_RETURN_IF_ERROR(device_.append_tensor(record, bytes_of(tokens), run.start));
    out.ref_bytes += tokens.size() * sizeof(int32_t);
    out.device_bytes += tokens.size() * sizeof(int32_t);
    return Status::ok();
  }

  const DecoderShape& shape_;
  StoreWriter& ref_;
  StoreWriter& device_;
  std::vector<float> ref_values_, noise_;
  std::vector<int8_t> codes8_;
  std::vector<int16_t> codes16_;
};

}  // namespace decoder_detail

// Writes the pair (see the top of this file). Not durable: the stores are scratch files.
inline Result<DecoderStores> write_decoder_pair(const std::string& ref_path,
                                                const std::string& device_path,
                                                const DecoderShape& shape) {
  using namespace decoder_detail;
  if (shape.prefill + shape.steps > shape.cache || shape.prefill == 0 ||
      (shape.bits != 8 && shape.bits != 16)) {
    return error(ErrorCode::kInvalidArgument,
                 "the prefill and the steps must fit the cache, and the bits be 8 or 16");
  }
  const WriterOptions options{.deflate_level = 0, .durable = false};
  QD_ASSIGN_OR_RETURN(
      auto ref, StoreWriter::create(ref_path, {"decoder", "cpu", "", "qwen3-0.6b", 0}, options));
  QD_ASSIGN_OR_RETURN(
      auto device,
      StoreWriter::create(device_path, {"decoder", "QnnHtp", "SM8650", "qwen3-0.6b", 0}, options));
  const std::vector<Op> ops = graph(shape);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == Kind::kTokens) continue;
    const GraphNode node{
        ops[i].name, ops[i].op_type, ops[i].inputs, {ops[i].name}, {static_cast<int64_t>(i)}};
    QD_RETURN_IF_ERROR(ref->append_graph_node(node));
    QD_RETURN_IF_ERROR(device->append_graph_node(node));
  }
  PairWriter writer(shape, *ref, *device);
  DecoderStores out;
  for (uint32_t r = 0; r <= shape.steps; ++r) {
    const Run run = r == 0 ? Run{0, shape.prefill} : Run{shape.prefill + r - 1, 1};
    const std::string name = r == 0 ? "prefill" : "step " + std::to_string(r);
    QD_RETURN_IF_ERROR(ref->begin_run(name, r).status());
    QD_RETURN_IF_ERROR(device->begin_run(name, r).status());
    // Handle i for op i (the tokens, op 0, have none): the same in every run and both stores.
    for (size_t i = 0; i < ops.size(); ++i) {
      QD_RETURN_IF_ERROR(writer.write_op(ops[i], static_cast<int64_t>(i), run, out));
    }
    QD_RETURN_IF_ERROR(ref->end_run(r, 0));
    QD_RETURN_IF_ERROR(device->end_run(r, 0));
    QD_RETURN_IF_ERROR(ref->commit());
    QD_RETURN_IF_ERROR(device->commit());
  }
  QD_RETURN_IF_ERROR(ref->close());
  QD_RETURN_IF_ERROR(device->close());
  return out;
}

}  // namespace qd::testing
