// The token view's passes over a row of logits (docs/metrics.md, "Token view"): over a
// 151,936-token vocabulary the exponentials are its cost, so they are computed in vector lanes.
// Both instruction sets (kernel_dispatch.h) give the same bits: plain IEEE additions and
// multiplications in a fixed order, sixteen partial sums combined the same way.
#pragma once

#include <cstdint>
#include <optional>

namespace qd::compare {

// exp(x) for x <= 0, within 2 units in the last place of the exact value; 0 below -708 (where
// exp is subnormal: beside a softmax's largest term, exp(0) = 1, it weighs nothing).
double exp_nonpositive(double x);

// The largest value of x[0, n), or nullopt when some value is NaN or infinite (the token view's
// exact path takes such a row).
std::optional<double> finite_maximum(const float* x, uint64_t n);

// One pass over two rows of logits x (the reference's) and y (the device's), with their maxima:
//   x_sum = sum_c exp(x_c - x_top),  y_sum = sum_c exp(y_c - y_top),
//   weighted_gap = sum_c exp(x_c - x_top) (x_c - y_c)
// so that KL(p || q) = weighted_gap / x_sum - (L(x) - L(y)), L the log-normaliser.
struct RowExpSums {
  double x_sum = 0;
  double y_sum = 0;
  double weighted_gap = 0;
};
RowExpSums row_exp_sums(const float* x, double x_top, const float* y, double y_top, uint64_t n);

}  // namespace qd::compare
