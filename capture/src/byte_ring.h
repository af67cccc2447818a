// Fixed-size circular byte arena for the capture queue. Pre-faulted at construction so the
// runtime thread's copy into it costs what a memcpy into warm memory costs. Space is handed out
// contiguously and released in the order it was reserved (the writer drains FIFO). Not
// thread-safe: the session's queue mutex guards it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

namespace qd::capture {

struct RingSpan {
  uint64_t offset = 0;   // where the bytes live
  uint64_t size = 0;     // bytes asked for
  uint64_t charged = 0;  // size plus any tail skipped to stay contiguous
};

class ByteRing {
 public:
  // Returns nullptr-backed ring when the allocation fails; check valid().
  explicit ByteRing(uint64_t capacity);

  bool valid() const { return buffer_ != nullptr; }
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint8_t* at(uint64_t offset) { return buffer_.get() + offset; }

  // Contiguous room for `size` bytes, or nullopt when it does not fit right now.
  std::optional<RingSpan> reserve(uint64_t size);
  // Frees the oldest reservation, which must be `span`.
  void release(const RingSpan& span);
  // Takes back the newest reservation, which must be `span` (its owner could not be queued).
  void cancel_newest(const RingSpan& span);

 private:
  std::unique_ptr<uint8_t[]> buffer_;
  uint64_t capacity_ = 0;
  uint64_t head_ = 0;  // start of the oldest reservation
  uint64_t tail_ = 0;  // first byte after the newest reservation
  uint64_t used_ = 0;  // bytes charged, skipped tails included
};

}  // namespace qd::capture
