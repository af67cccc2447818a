// Text for messages.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qd {

// A tensor name made safe for one line of a message: quoted, control and non-ASCII bytes as
// \xNN, cut to `max_chars` with "..." so a hostile 1 MB name cannot flood a terminal.
std::string quote_name(std::string_view name, size_t max_chars = 160);

}  // namespace qd
