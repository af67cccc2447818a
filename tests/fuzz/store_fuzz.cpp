// A qnn-debug store (HDF5) from untrusted bytes: open, read and verify every tensor, and render
// what `qnn-debug inspect` prints. libhdf5 itself is not instrumented; a crash inside it still
// stops the run (ASan catches the signal) and names the call that led there.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "qnn_debug/etdump/store_reader.h"
#include "qnn_debug/report/inspect.h"

// Allocation stacks that reach through libhdf5 (no frame pointers), for fuzz_util.cpp's leak
// suppression; halves the speed, which HDF5 dominates anyway.
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  qd::keep_hdf5_quiet_at_exit();  // damaged files otherwise make libhdf5 print at every exit
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qd::fuzz::write_file("store.h5", std::span(data, size));
  auto store = qd::fuzz::checked(qd::StoreReader::open(path));
  if (!store.is_ok()) return 0;
  qd::fuzz::expect_no_internal_error((*store)->for_each_tensor([&](const qd::TensorEntry& tensor) {
    (void)qd::fuzz::checked((*store)->read_tensor(tensor));
    qd::fuzz::expect_no_internal_error((*store)->verify_tensor(tensor));
    return qd::Status::ok();
  }));
  const qd::report::InspectOptions options;
  (void)qd::fuzz::checked(qd::report::inspect_text(**store, options));
  (void)qd::fuzz::checked(qd::report::inspect_json(**store, options));
  return 0;
}
