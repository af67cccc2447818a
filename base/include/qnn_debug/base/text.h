// Text for messages: names and JSON paths made safe for one line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qd {

// `text` with bytes outside printable ASCII, and those in `also`, as \xNN; cut to about
// `max_chars` with "..." so a hostile megabyte cannot flood a terminal line.
std::string escape_text(std::string_view text, size_t max_chars, std::string_view also = "");

// A tensor name made safe for one line of a message: quoted, control and non-ASCII bytes as
// \xNN, cut to `max_chars` with "..." so a hostile 1 MB name cannot flood a terminal.
std::string quote_name(std::string_view name, size_t max_chars = 160);

// Steps of a JSON path as every reader's messages name them (`rules[2].fail_below_db`,
// `graph.tensors["conv/out"].dims[1]`): a field is `.name` when the key looks like an
// identifier, else `["..."]`; a key that is data (a tensor name) is always `["..."]`.
std::string json_path_field(std::string_view key);
std::string json_path_key(std::string_view key);
std::string json_path_index(size_t index);

}  // namespace qd
