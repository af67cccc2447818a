// The ETDump FlatBuffer walk (importers/src/executorch_etdump_reader.h) on untrusted bytes, with a
// visitor that touches every field handed to it, so a view pointing outside the buffer is read here
// under ASan rather than later.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "executorch_etdump_reader.h"
#include "fuzz_util.h"

namespace {

using namespace qd::importers;

// Where the visitor's sums go, so the optimizer cannot drop the reads that make them.
volatile size_t g_sink = 0;

// Sums bytes of every string view: a view past the buffer is an ASan report at this line.
size_t touch(std::string_view text) {
  size_t sum = 0;
  for (const char c : text) sum += static_cast<unsigned char>(c);
  return sum;
}
size_t touch(const std::optional<std::string_view>& text) { return text ? touch(*text) : 0; }

class Toucher : public EtdumpVisitor {
 public:
  qd::Status on_run(uint32_t, const EtdumpRun& run) override {
    sum_ += touch(run.name);
    for (const std::string_view allocator : run.allocators) sum_ += touch(allocator);
    return qd::Status::ok();
  }
  qd::Status on_debug_event(const EventPosition& at, const EtdumpDebugEvent& e) override {
    sum_ += touch(e.name) + touch(e.delegate_debug_id_str) + describe(at).size();
    if (e.value) {
      for (const EtdumpTensor& t : e.value->tensors) sum_ += t.sizes.size() + t.strides.size();
    }
    return qd::Status::ok();
  }
  qd::Status on_profile_event(const EventPosition&, const EtdumpProfileEvent& e) override {
    sum_ += touch(e.name) + touch(e.delegate_debug_id_str);
    return qd::Status::ok();
  }
  qd::Status on_allocation_event(const EventPosition&, const EtdumpAllocationEvent&) override {
    return qd::Status::ok();
  }
  qd::Status on_run_end(uint32_t) override { return qd::Status::ok(); }
  ~Toucher() override { g_sink = sum_; }

 private:
  size_t sum_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)looks_like_etdump(bytes);
  Toucher visitor;
  (void)qd::fuzz::checked(read_etdump(bytes, visitor));
  return 0;
}
