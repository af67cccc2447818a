// The steps every importer takes the same way, written once: encodings files loaded and merged
// in order, the options every format shares read from an InputSpec, and the sink's options.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "qnn_debug/base/status.h"
#include "qnn_debug/importers/encodings.h"
#include "qnn_debug/importers/input_format.h"
#include "qnn_debug/importers/store_sink.h"

namespace qd::importers {

// Every file loaded (load_encodings) and merged into the first (merge_encodings), in order.
Result<EncodingTable> load_encodings_files(const std::vector<std::string>& paths);

// The options every importer's Options struct has (encodings_paths, naming, handle_map_path,
// heap_profile_path, output_path) from `spec`; a naming preset left out keeps the importer's
// default.
template <typename Options>
void read_shared_options(const InputSpec& spec, std::string output, Options& o) {
  o.encodings_paths = spec.values("encodings");
  if (const std::string naming = spec.value("naming"); !naming.empty()) o.naming = naming;
  o.handle_map_path = spec.value("handle_map");
  o.heap_profile_path = spec.value("heap_profile");
  o.output_path = std::move(output);
}

// The sink of `qnn-debug capture <format>` (its producer) with the importer's output and naming.
template <typename Options>
SinkOptions sink_options_of(const Options& o, std::string_view format, std::string backend,
                            std::string model) {
  SinkOptions options;
  options.output_path = o.output_path;
  options.producer = "qnn-debug capture " + std::string(format);
  options.backend = std::move(backend);
  options.model = std::move(model);
  options.naming = o.naming;
  options.handle_map_path = o.handle_map_path;
  options.heap_profile_path = o.heap_profile_path;
  return options;
}

}  // namespace qd::importers
