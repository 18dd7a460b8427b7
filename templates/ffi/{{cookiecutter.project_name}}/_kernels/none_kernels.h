// Your op, one row at a time, for the CPU and (cuda=yes) the CUDA handlers
// alike: csrc/rowwise.h says what a Row provides and what this file must
// define. The starter is the identity: y = x, dx = g.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "rowwise.h"

namespace rowwise::op {

// TODO: whether your rows must be whole on one device: true where
// forward_row or backward_row reduce over the row (row.sum, row.max), false
// for an element-wise op.
inline constexpr bool kNeedsWholeRows = true;

// TODO: your attributes (none, one or several): a double member each, set to
// a valid value, their names in the same order, and their check.
struct Attributes {
  double eps = 1e-6;
};
inline constexpr std::array<const char*, 1> kAttributeNames = {"eps"};

inline const char* attributes_problem(const Attributes& a) {
  return a.eps >= 0.0 && std::isfinite(a.eps) ? nullptr : "eps must be finite and >= 0";
}

// TODO: your forward pass for one row: write y, return the residual the
// backward pass needs (one number per row; 0 if it needs none).
template <typename Row, typename T>
ROWWISE_HD double forward_row(const Row& row, const T* x, T* y, const Attributes& a) {
  (void)a;
  row.each([&](std::int64_t i) { y[i] = Row::store(Row::load(x[i])); });
  return 0.0;
}

// TODO: your backward pass for one row: dx from x, the residual and the
// cotangent g of y.
template <typename Row, typename T>
ROWWISE_HD void backward_row(const Row& row, const T* x, double residual, const T* g, T* dx,
                             const Attributes& a) {
  (void)x;
  (void)residual;
  (void)a;
  row.each([&](std::int64_t i) { dx[i] = Row::store(Row::load(g[i])); });
}

}  // namespace rowwise::op
