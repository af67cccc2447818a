// Readers of quantization-encoding files: what scale, offset, dtype, dims and layout each tensor
// of a QNN graph has, so device tensors can be dequantized and compared with a CPU reference.
//
// Three JSON shapes are recognised by content, never by file name:
//  - the QNN converter's `<model>_net.json` ({"graph": {"tensors": ..., "nodes": ...}}),
//  - the JSON qnn-context-binary-utility writes for a context binary ({"info": {"graphs": ...}}),
//  - a plain map {"<tensor name>": {"scale": s, "offset": o, ...}} written by hand or by a script.
//
// The readers check structure only (types, required fields, list lengths, axes against dims);
// whether an encoding is plausible (zero, negative, huge or non-finite scales) is judged later by
// the store's lint, so values are returned exactly as written. Every error is a Status whose
// message is one line starting with `encodings '<file>': ` followed by the JSON path of the
// offending value; no exception leaves this API.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/dtype.h"
#include "qnn_debug/base/status.h"
#include "qnn_debug/base/vocabulary.h"
#include "qnn_debug/etdump/store.h"

namespace qd::importers {

// Inputs larger than this are refused before being read: no real encodings file comes close.
inline constexpr uint64_t kMaxEncodingsBytes = uint64_t{1} << 30;
// Deeper nesting is refused before parsing; the real shapes need fewer than 10 levels.
inline constexpr int kMaxEncodingsDepth = 64;

// The shapes of encodings file qnn-debug reads, each told by its JSON's shape (the meaning).
// The readers beside them (encodings.cpp, kShapeReaders) follow this table's order.
enum class EncodingFormat : uint8_t { kConverterNetJson, kContextBinaryJson, kPlainMap };
inline constexpr auto kEncodingFormats = std::to_array<Term<EncodingFormat>>({
    {EncodingFormat::kConverterNetJson, "converter net JSON", "{\"graph\": {\"tensors\": ...}}"},
    {EncodingFormat::kContextBinaryJson, "context-binary JSON", "{\"info\": {\"graphs\": [...]}}"},
    {EncodingFormat::kPlainMap, "plain encodings map", "{\"<tensor>\": {\"scale\": ...}}"},
});
static_assert(in_declaration_order(kEncodingFormats));
constexpr std::string_view encoding_format_name(EncodingFormat format) {
  return term_name(kEncodingFormats, format);
}

struct TensorEncoding {
  std::string name;
  std::optional<DType> dtype;  // when the file states it
  std::vector<uint64_t> dims;  // empty when not stated (or a scalar)
  Quantization quant;          // empty scales: no encoding defined
  // Reference axis i is stored axis axis_order[i] (NHWC stored, NCHW reference: {0, 3, 1, 2}),
  // derived from axis_format / src_axis_format. Empty: same layout, or not derivable.
  std::vector<uint8_t> axis_order;
  std::string axis_format;      // the stored layout as written ("NHWC", "ANY"), "" when absent
  std::string src_axis_format;  // the framework's layout as written, "" when absent
  std::string graph;            // context-binary graph (the first one listing it), "" otherwise
  std::string source;           // the file it was read from
  // Facts worth showing that did not stop the read, e.g. "unsupported encoding 4 (BLOCK)".
  std::vector<std::string> notes;
};

struct EncodingSource {
  std::string path;
  EncodingFormat format = EncodingFormat::kPlainMap;
  size_t tensor_count = 0;  // tensors this file described (duplicates of earlier files included)
};

struct EncodingTable {
  std::vector<EncodingSource> sources;                         // files read, in order
  std::map<std::string, TensorEncoding, std::less<>> tensors;  // by exact tensor name
  std::vector<GraphNode> graph;  // converter net JSON nodes, in file order (handles empty)

  // The tensor called exactly `name`, or null.
  const TensorEncoding* find(std::string_view name) const;
};

// Parses one document; `source` names it in messages and in the result.
// Per file: tensors whose encoding QNN defines but this reader does not support (BLOCK,
// BLOCKWISE_EXPANSION, VECTOR, ...) are kept unquantized with a note. In context-binary JSON the
// same name in several graphs must carry the same dtype and quantization (else an error); the first
// graph's entry is kept, with a note when the dims differ.
// Errors: kCorrupt (not JSON, too deep or too large, none of the three shapes, a structural
// problem), kNoMemory.
Result<EncodingTable> parse_encodings(std::string_view json_text, const std::string& source);

// Reads `path` (at most kMaxEncodingsBytes), then parse_encodings.
// Errors: kNotFound (no such file), kIo (unreadable, a directory), then as parse_encodings.
Result<EncodingTable> load_encodings(const std::string& path);

// Adds the tensors, nodes and sources of `more` (a later --encodings file) to `into`. A tensor
// already present must have the same quantization (offsets compared in QNN's convention, so a
// zero point equals the negated offset) and, where both state one, the same dtype: that duplicate
// is dropped and the first entry kept: it gains the dtype, dims, bitwidth and axis formats it
// lacked, and a note when the dims differ. A node already present must be identical; it is not
// repeated.
// Errors: kCorrupt naming both files and the tensor or node; `into` is then unchanged.
Status merge_encodings(EncodingTable& into, EncodingTable&& more);

// QNN data-type name -> dtype. Accepts "QNN_DATATYPE_UFIXED_POINT_8" and "UFIXED_POINT_8" in any
// letter case, the signed alias "FIXED_POINT_8" (= SFIXED_POINT_8, as some tools spell it), and a
// decimal code ("1032"). Errors: kInvalidArgument naming the unknown type.
Result<DType> dtype_from_qnn_name(std::string_view name);

// Reference -> stored axis order from two layout strings such as "NHWC" (stored) and "NCHW"
// (source): {0, 3, 1, 2}. Empty when they are equal, not permutations of each other with distinct
// letters, or longer than kMaxRank.
std::vector<uint8_t> axis_order_from_formats(std::string_view axis_format,
                                             std::string_view src_axis_format);

}  // namespace qd::importers
