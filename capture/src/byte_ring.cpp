#include "byte_ring.h"

#include <cstring>
#include <new>

namespace qd::capture {

ByteRing::ByteRing(uint64_t capacity) : buffer_(new (std::nothrow) uint8_t[capacity]) {
  if (buffer_) {
    capacity_ = capacity;
    std::memset(buffer_.get(), 0, capacity);  // fault every page in now, not on the hot path
  }
}

std::optional<RingSpan> ByteRing::reserve(uint64_t size) {
  if (size > capacity_ - used_) return std::nullopt;
  if (used_ == 0) head_ = tail_ = 0;  // an empty ring starts over: the longest free run
  const bool wrapped = tail_ < head_ || (tail_ == head_ && used_ > 0);
  RingSpan span{tail_, size, size};
  if (wrapped) {
    if (head_ - tail_ < size) return std::nullopt;
  } else if (capacity_ - tail_ < size) {
    if (head_ < size) return std::nullopt;
    span.offset = 0;  // skip the too-short tail; it is charged to this reservation
    span.charged += capacity_ - tail_;
  }
  tail_ = span.offset + size;
  used_ += span.charged;
  return span;
}

void ByteRing::cancel_newest(const RingSpan& span) {
  used_ -= span.charged;
  const uint64_t skipped = span.charged - span.size;  // a tail skipped to wrap, given back too
  tail_ = skipped > 0 ? capacity_ - skipped : span.offset;
}

void ByteRing::release(const RingSpan& span) {
  used_ -= span.charged;
  head_ = span.offset + span.size;
  if (head_ == capacity_) head_ = 0;
}

}  // namespace qd::capture
