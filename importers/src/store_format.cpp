// A qnn-debug store (docs/store-format.md): read as it is, never converted.
#include "qnn_debug/importers/input_format.h"

namespace qd::importers {

const InputFormat& store_format() {
  static const InputFormat kStore = [] {
    InputFormat f;
    f.name = "store";
    f.noun = "a qnn-debug store";
    f.detected_as = "a store";
    f.detect = [](const InputHead& head) { return head.starts_with("\x89HDF\r\n\x1a\n"); };
    return f;
  }();
  return kStore;
}

}  // namespace qd::importers
