#include "byte_ring.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>

namespace qd::capture {
namespace {

TEST(ByteRing, HandsOutContiguousSpansUntilFull) {
  ByteRing ring(100);
  ASSERT_TRUE(ring.valid());
  auto a = ring.reserve(60);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->offset, 0u);
  auto b = ring.reserve(40);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->offset, 60u);
  EXPECT_FALSE(ring.reserve(1));
  EXPECT_EQ(ring.used(), 100u);
}

TEST(ByteRing, WrapsAndChargesTheSkippedTail) {
  ByteRing ring(100);
  auto a = ring.reserve(50);
  auto b = ring.reserve(30);
  ring.release(*a);  // free [0, 50); [80, 100) too short for 40
  auto c = ring.reserve(40);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->offset, 0u);
  EXPECT_EQ(c->charged, 60u);  // 40 + the 20-byte tail skipped
  EXPECT_EQ(ring.used(), 90u);
  EXPECT_FALSE(ring.reserve(11));  // only [40, 50) is free
  ring.release(*b);
  ring.release(*c);
  EXPECT_EQ(ring.used(), 0u);
}

TEST(ByteRing, RefusesMoreThanCapacity) {
  ByteRing ring(16);
  EXPECT_FALSE(ring.reserve(17));
  EXPECT_TRUE(ring.reserve(16));
}

// Random FIFO traffic: spans never overlap and the accounting returns to zero.
TEST(ByteRing, RandomFifoTrafficNeverOverlaps) {
  ByteRing ring(1000);
  std::deque<RingSpan> live;
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 2 == 0 || live.empty()) {
      auto span = ring.reserve(rng() % 300);
      if (!span) continue;
      ASSERT_LE(span->offset + span->size, 1000u);
      for (const RingSpan& other : live) {
        const bool disjoint = span->offset + span->size <= other.offset ||
                              other.offset + other.size <= span->offset || span->size == 0 ||
                              other.size == 0;
        ASSERT_TRUE(disjoint) << "step " << step;
      }
      live.push_back(*span);
    } else {
      ring.release(live.front());
      live.pop_front();
    }
  }
  while (!live.empty()) {
    ring.release(live.front());
    live.pop_front();
  }
  EXPECT_EQ(ring.used(), 0u);
}

}  // namespace
}  // namespace qd::capture
