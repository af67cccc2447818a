// The one list of input formats (qnn_debug/importers/input_format.h). A new format is its unit,
// a function returning its InputFormat (beside its importer), and one line here; its order
// here is its place in `capture`'s commands and in every list of formats.
#include "qnn_debug/importers/input_format.h"

namespace qd::importers {

const InputFormat& store_format();        // store_format.cpp
const InputFormat& qnn_net_run_format();  // qnn_net_run_import.cpp
const InputFormat& npz_format();          // npz_import.cpp
const InputFormat& etdump_format();       // etdump_import.cpp

std::span<const InputFormat* const> input_formats() {
  static const InputFormat* const kFormats[] = {&store_format(), &qnn_net_run_format(),
                                                &npz_format(), &etdump_format()};
  return kFormats;
}

}  // namespace qd::importers
