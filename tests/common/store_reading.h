// A store's tensors read whole, for tests: their stores are small, and a read error fails the
// test where it happens.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "qnn_debug/etdump/store_reader.h"

namespace qd::testing {

inline std::vector<TensorEntry> all_tensors(const StoreReader& store) {
  Result<std::vector<TensorEntry>> tensors = store.all_tensors();
  EXPECT_TRUE(tensors.is_ok()) << tensors.status().message();
  return tensors.is_ok() ? std::move(tensors).value() : std::vector<TensorEntry>{};
}

inline std::vector<TensorEntry> run_tensors(const StoreReader& store, uint32_t run) {
  Result<std::vector<TensorEntry>> tensors = store.tensors_of_run(run);
  EXPECT_TRUE(tensors.is_ok()) << tensors.status().message();
  return tensors.is_ok() ? std::move(tensors).value() : std::vector<TensorEntry>{};
}

}  // namespace qd::testing
